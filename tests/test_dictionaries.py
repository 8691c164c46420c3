"""Dictionary readers on tiny fixtures in the exact upstream formats (tests/fixtures/dictionaries/,
made by make_fixtures.py there), the missing-dictionary errors, and test-dictionary building."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from xlrepro.data import dictionaries as dic

FIX = Path(__file__).parent / "fixtures" / "dictionaries"


def test_dictd_base64_numbers():
    assert dic.decode_dictd_number("A") == 0
    assert dic.decode_dictd_number("BA") == 64
    assert dic.decode_dictd_number("/") == 63
    assert dic.decode_dictd_number("BVBC") == ((1 * 64 + 21) * 64 + 1) * 64 + 2
    for n in (0, 1, 63, 64, 4095, 123456789):
        assert dic.decode_dictd_number(dic.encode_dictd_number(n)) == n
    with pytest.raises(ValueError):
        dic.decode_dictd_number("A=")


def test_index_and_entries():
    index = dic.read_dictd_index(FIX / "freedict-eng-fra.index")
    heads = [h for h, _, _ in index]
    assert "house" in heads and "00databaseshort" in heads and "ago" in heads
    entries = dict(dic.read_dictd_entries(FIX / "freedict-eng-fra.index"))
    assert entries["house"] == "house /haus/\nmaison\n"
    assert dic.dictd_metadata(FIX / "freedict-eng-fra.index")["00databaseshort"].startswith("English-French FreeDict")


def test_parse_classic_entry():
    heads, tr = dic.parse_dictd_entry("light /lait/\n1. allumer, enflammer\n2. clair\n3. lumière\n")
    assert heads == ["light"] and tr == ["allumer", "enflammer", "clair", "lumière"]
    heads, tr = dic.parse_dictd_entry("lumière /lymjɛʀ/ <n, fem>\n1. light\n2. (fig.) insight\n")
    assert heads == ["lumière"] and tr == ["light", "insight"]
    heads, tr = dic.parse_dictd_entry(
        "Haus /haʊs/ <neut, n, sg>\nhouse <n>, building <n>\n   Synonym: {Gebäude}\n\n see: {Häuser}\n\n")
    assert heads == ["Haus"] and tr == ["house", "building"]
    # Polish layout: roman numerals, part of speech, [notes], phrase lines
    _, tr = dic.parse_dictd_entry("house\nI.  <N> 1.  budynek, dom\n 2.  [książek]  wydawnictwo\n - mieszkać\n")
    assert tr == ["budynek", "dom", "wydawnictwo"]


def test_parse_wikdict_entry_skips_definitions():
    entry = "water //ˈwɔːtə// <n>\n水, みず 2.\nclear liquid H₂O\n 3.\none of the basic elements\n"
    assert dic.parse_dictd_entry(entry, wikdict=True) == (["water"], ["水", "みず"])
    entry = "light //laɪt// <adj>\n1. 明るい, 光\nhaving light\n2. 軽い\nweightless\n"
    assert dic.parse_dictd_entry(entry, wikdict=True)[1] == ["明るい", "光", "軽い"]


def test_read_freedict_pairs_single_words_stress_marks():
    assert dic.read_freedict(FIX / "freedict-eng-fra.index", "en", "fr") == [
        ("house", "maison"), ("light", "allumer"), ("light", "clair"), ("light", "enflammer"),
        ("light", "lumière"), ("water", "eau")]  # "ago" -> "il y a" and "give up" are phrases
    assert dic.read_freedict(FIX / "freedict-eng-rus.index", "en", "ru") == [
        ("a", "в"), ("a", "кто-то"), ("a", "на"), ("word", "слово")]  # сло́во without the stress


def test_load_dictionary_merges_both_directions():
    d = dic.load_dictionary("fr", dictd_dir=FIX)
    assert d["light"] == {"allumer", "clair", "enflammer", "lumière"}
    assert d["house"] == {"maison"} and d["home"] == {"maison"}  # home only from fra-eng
    assert d["today"] == {"aujourd'hui"}  # the headword, not the index key "aujourdhui"
    assert dic.load_dictionary("de", dictd_dir=FIX) == {"house": {"haus"}, "building": {"haus"},
                                                       "light": {"licht"}}
    assert dic.load_dictionary("ja", dictd_dir=FIX) == {"water": {"水", "みず"},
                                                       "light": {"明るい", "光", "軽い"}}


def test_cedict_reader():
    pairs = dic.read_cedict(FIX / "cc-cedict.txt")
    assert ("house", "房子") in pairs and ("building", "房子") in pairs
    assert ("love", "爱") in pairs and ("write", "书") in pairs  # "to love", "to write"
    assert not any(zh in ("张", "吃") for _, zh in pairs)  # surname and variant glosses skipped
    assert not any(" " in en for en, _ in pairs)
    d = dic.load_dictionary("zh", cedict_path=FIX / "cc-cedict.txt")
    assert d["light"] == {"光"} and d["book"] == {"书"}


def test_muse_reader():
    assert dic.read_muse(FIX / "muse-en-fr.txt")[:2] == [("the", "le"), ("the", "la")]
    d = dic.load_dictionary("fr", muse_path=FIX / "muse-en-fr.txt")
    assert d["light"] == {"lumière", "léger"}


def test_missing_dictionary_errors(tmp_path):
    with pytest.raises(dic.DictionaryNotFound, match="apt-get install dict-freedict-eng-spa dict-freedict-spa-eng"):
        dic.load_dictionary("es", dictd_dir=tmp_path)
    with pytest.raises(dic.DictionaryNotFound, match=r"no dictionary for vi.*bn, fa, ko, ro, tl, uk, vi"):
        dic.load_dictionary("vi")
    with pytest.raises(ValueError, match="valid languages"):
        dic.load_dictionary("xx")
    with pytest.raises(ValueError, match="source side"):
        dic.load_dictionary("en")


def test_dictionary_sizes_never_drop_a_language(tmp_path):
    table = dic.dictionary_sizes(["en", "fr", "es", "vi", "ru"], dictd_dir=FIX)
    assert list(table.index) == ["fr", "es", "vi", "ru"]
    assert table.loc["fr", "status"] == "ok" and table.loc["fr", "pairs"] == 9
    assert table.loc["es", "status"] == "not installed" and "apt-get install" in table.loc["es", "note"]
    assert table.loc["vi", "source"] == "none" and table.loc["vi", "status"] == "none"
    assert table.loc["ru", "english_words"] == 2


def test_build_test_dictionary_hand_made():
    dictionary = {"the": {"le", "la"}, "god": {"dieu"}, "light": {"lumière", "léger"},
                  "house": {"maison"}, "day": {"jour"}, "rare": {"rare"}}
    en = Counter({"the": 100, "god": 50, "light": 20, "house": 10, "day": 8, "rare": 2, "unknown": 30})
    x = Counter({"le": 80, "la": 70, "dieu": 40, "lumière": 15, "jour": 9, "rare": 1})
    pairs = dic.build_test_dictionary("fr", en, x, n=10, min_count=5, dictionary=dictionary)
    # frequency order; all gold translations present in the target corpus; "léger" and "maison"
    # absent from it; "rare" below min_count; "unknown" not in the dictionary
    assert pairs == [("the", "la"), ("the", "le"), ("god", "dieu"), ("light", "lumière"), ("day", "jour")]
    assert dic.build_test_dictionary("fr", en, x, n=2, min_count=5, dictionary=dictionary) == pairs[:3]
    assert dic.build_test_dictionary("fr", en, x, n=10, min_count=5, skip_top=1,
                                     dictionary=dictionary)[0] == ("god", "dieu")


def test_parsed_pairs_are_cached_on_disk_and_reparsed_when_a_source_changes(tmp_path, monkeypatch):
    import shutil
    monkeypatch.setenv("XLREPRO_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "dictd"
    shutil.copytree(FIX, src)
    dic._pairs.cache_clear()
    first = dic.load_dictionary("fr", dictd_dir=src)
    assert first["light"] == {"allumer", "clair", "enflammer", "lumière"}
    assert len(list((tmp_path / "cache" / "dictionaries").glob("fr-*.tsv.gz"))) == 1

    calls = []
    real = dic.read_freedict
    monkeypatch.setattr(dic, "read_freedict", lambda *a: calls.append(a) or real(*a))
    dic._pairs.cache_clear()  # as a new process: the pairs come from the disk cache, nothing is parsed
    assert dic.load_dictionary("fr", dictd_dir=src) == first and calls == []

    index = src / "freedict-eng-fra.index"
    index.write_text(index.read_text(encoding="utf-8").replace("water\t", "waters\t"), encoding="utf-8")
    dic._pairs.cache_clear()  # a changed source file is parsed again, under a new key
    again = dic.load_dictionary("fr", dictd_dir=src)
    assert calls and again == first  # the headwords come from the entries, which did not change
    assert len(list((tmp_path / "cache" / "dictionaries").glob("fr-*.tsv.gz"))) == 2
    dic._pairs.cache_clear()


def test_a_machine_without_the_dictionary_files_reads_the_prepared_pack(tmp_path, monkeypatch):
    import shutil
    monkeypatch.setenv("XLREPRO_CACHE", str(tmp_path / "cache"))
    installed = tmp_path / "dictd"
    shutil.copytree(FIX, installed)
    monkeypatch.setattr(dic, "DICTD_DIR", installed)
    dic._pairs.cache_clear()
    here = dic.load_dictionary("fr")
    assert dic.prepare_dictionary_packs(["en", "fr", "vi"]) == {"fr": 9}  # en and vi have none to pack; fr: 9 pairs in the fixture
    assert dic.dictionary_sizes(["fr"]).at["fr", "note"] == ""  # installed here: read from the files

    monkeypatch.setattr(dic, "DICTD_DIR", tmp_path / "nothing")  # the node: no /usr/share/dictd
    dic._pairs.cache_clear()
    assert dic.load_dictionary("fr") == here
    card = dic.dictionary_sizes(["fr", "de"])
    assert card.at["fr", "status"] == "ok" and card.at["fr", "pairs"] == 9
    assert card.at["fr", "note"].startswith("read from the prepared cache (parsed from freedict-eng-fra.index")
    assert card.at["de", "status"] == "not installed"  # no pack for de: never another language's pairs
    with pytest.raises(dic.DictionaryNotFound):
        dic.load_dictionary("fr", dictd_dir=tmp_path / "nothing")  # an explicit folder never falls back

    monkeypatch.setattr(dic, "PARSER_VERSION", dic.PARSER_VERSION + 1)  # other parsing rules: the pack is stale
    dic._pairs.cache_clear()
    assert dic.dictionary_sizes(["fr"]).at["fr", "status"] == "not installed"
    dic._pairs.cache_clear()
