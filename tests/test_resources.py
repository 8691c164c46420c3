"""The paper profile's loaders on fixtures in the exact upstream formats (tests/fixtures/paper/), with answers
counted by hand from the fixture files; the resource registry and `xlrepro prepare --profile paper`."""
from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from xlrepro.cli import main
from xlrepro.config import ConfigError
from xlrepro.resources import (entity_f1, load_encoder, read_conllu, read_iob, read_mldoc, read_multinli,
                               read_muse_gold, read_pbc, read_plain_text, read_wikiextractor, read_xnli)
from xlrepro.resources import prepare as P
from xlrepro.resources.registry import RESOURCES, Resource, chapters_needing, locate, resources_for

FIX = Path(__file__).resolve().parent / "fixtures" / "paper"


# --- NLI ---------------------------------------------------------------------------------------------------------

def test_xnli_keeps_quotes_that_open_a_field_and_maps_the_labels():
    test = read_xnli(FIX / "xnli" / "xnli.test.tsv")
    assert len(test) == 24 and test["language"].value_counts().to_dict() == {"de": 6, "en": 6, "es": 6, "fr": 6}
    en = test[test["language"] == "en"].reset_index(drop=True)
    assert en.loc[1, "first"] == '"No," he said to the offer.'  # a csv reader with quoting would eat the quotes
    assert en.loc[1, "gold_label"] == "contradiction" and en.loc[1, "label"] == 2
    assert en["label"].tolist() == [0, 2, 1, 0, 2, 1]
    assert list(test.columns) == ["language", "first", "second", "gold_label", "label"]


def test_xnli_language_filter_and_its_errors(tmp_path):
    dev = read_xnli(FIX / "xnli" / "xnli.dev.tsv", languages=["fr"])
    assert len(dev) == 3 and set(dev["language"]) == {"fr"}
    with pytest.raises(ConfigError, match="valid choices: ar, bg"):
        read_xnli(FIX / "xnli" / "xnli.dev.tsv", languages=["xx"])
    with pytest.raises(ConfigError, match="XLREPRO_XNLI_DIR"):
        read_xnli(tmp_path / "xnli.test.tsv")
    bad = tmp_path / "bad.tsv"
    bad.write_text("language\tsentence1\nen\tx\n")
    with pytest.raises(ConfigError, match="header names language, gold_label"):
        read_xnli(bad)


def test_multinli_drops_the_pairs_without_consensus():
    train = read_multinli(FIX / "multinli" / "multinli_1.0_train.jsonl")
    assert len(train) == 9  # 10 lines, one labelled "-"
    assert "It rained all night." not in set(train["first"])
    assert train["gold_label"].value_counts().to_dict() == {"entailment": 3, "contradiction": 3, "neutral": 3}
    assert set(train["language"]) == {"en"}
    assert len(read_multinli(FIX / "multinli" / "multinli_1.0_train.jsonl", max_pairs=4)) == 4
    with pytest.raises(ConfigError, match="max_pairs"):
        read_multinli(FIX / "multinli" / "multinli_1.0_train.jsonl", max_pairs=0)


# --- NER ---------------------------------------------------------------------------------------------------------

def test_conll2003_skips_docstart_and_takes_the_last_field_as_tag():
    sents = read_iob(FIX / "conll" / "eng.testb")
    assert [len(s.tokens) for s in sents] == [9, 2, 2]
    assert sents[0].tokens[:3] == ("EU", "rejects", "German") and sents[0].tags[:3] == ("I-ORG", "O", "I-MISC")
    assert sents[2].tokens == ("BRUSSELS", "1996-08-22") and sents[2].tags == ("I-LOC", "O")


def test_conll2002_latin1_and_wikiann_prefixes():
    esp = read_iob(FIX / "conll" / "esp.train", encoding="latin-1")
    assert [len(s.tokens) for s in esp] == [12, 6] and esp[1].tokens[4] == "Málaga" and esp[1].tags[4] == "B-LOC"
    wiki = read_iob(FIX / "wikiann" / "en" / "train", language_prefix=True)
    assert wiki[0].tokens == ("Paris", "is", "in", "France") and wiki[1].tags[-2:] == ("B-ORG", "I-ORG")


def test_iob_rejects_a_tag_outside_the_scheme(tmp_path):
    bad = tmp_path / "bad.iob"
    bad.write_text("Paris LOC\n")
    with pytest.raises(ConfigError, match="bad.iob:1: tag 'LOC'"):
        read_iob(bad)


def test_entity_f1_of_a_hand_made_prediction():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    pred = [["B-PER", "I-PER", "O", "O"], ["B-ORG", "B-LOC"]]
    # entities: gold PER, LOC, ORG; predicted PER, ORG, LOC (wrong place): 2 right of 3 -> P = R = F1 = 2/3
    assert entity_f1(gold, pred) == pytest.approx(2 / 3)
    # a span cut short is wrong: gold PER over 2 tokens, predicted over 1 -> 0 right
    assert entity_f1([["B-PER", "I-PER"]], [["B-PER", "O"]]) == 0.0
    # IOB1 (CoNLL 2003): "I-ORG" opens an entity; the gold file scored against itself is perfect
    eng = read_iob(FIX / "conll" / "eng.testb")
    assert entity_f1([s.tags for s in eng], [s.tags for s in eng]) == 1.0
    with pytest.raises(ValueError, match="sentence 0: 2 gold tags but 1"):
        entity_f1([["O", "O"]], [["O"]])


# --- UD, MLDoc, MUSE, Wikipedia, PBC ----------------------------------------------------------------------------

def test_conllu_leaves_out_multiword_tokens_and_empty_nodes():
    first, second = read_conllu(FIX / "ud" / "es_fixture-ud-test.conllu")
    assert first.sent_id == "es-1" and first.text == "Vámonos al mar."
    assert first.forms == ("Vamos", "nos", "a", "el", "mar", ".")  # not "Vámonos", not "al"
    assert first.heads == (0, 1, 5, 5, 1, 1) and first.upos[2:4] == ("ADP", "DET")
    assert second.forms == ("Juan", "come", "y", "María", "también", ".")  # the empty node 2.1 left out
    assert second.heads == (2, 0, 4, 2, 4, 2) and second.deprels[3] == "conj"


def test_mldoc_labels_and_a_bad_line(tmp_path):
    docs = read_mldoc(FIX / "mldoc" / "english.train.1000")
    assert docs["gold_label"].tolist() == ["CCAT", "ECAT", "GCAT", "MCAT", "CCAT"]
    assert docs["label"].tolist() == [0, 1, 2, 3, 0] and docs["text"][3] == "Shares fell sharply on the stock exchange."
    bad = tmp_path / "english.dev"
    bad.write_text("C15\tsub-topic labels are not MLDoc's\n")
    with pytest.raises(ConfigError, match="CCAT, ECAT, GCAT, MCAT"):
        read_mldoc(bad)


def test_muse_targets_of_one_source_form_one_gold_set():
    gold = read_muse_gold(FIX / "muse" / "en-de.txt")
    assert gold == {"the": {"der", "die", "das"}, "house": {"haus"}, "cat": {"katze", "kater"}, "water": {"wasser"}}
    assert list(gold) == ["the", "house", "cat", "water"]


def test_wikiextractor_documents_without_their_title_line():
    docs = list(read_wikiextractor(FIX / "wiki" / "en"))  # a folder: every file under it
    assert [(d.id, d.title) for d in docs] == [("12", "Anarchism"), ("25", "Autism"), ("40", "House cat")]
    assert docs[0].url == "https://en.wikipedia.org/wiki?curid=12"
    assert docs[0].text == ("Anarchism is a political philosophy and movement.\nIt is sceptical of authority.\n"
                            "Humans lived in societies without formal hierarchies.")


def test_wikiextractor_unclosed_document(tmp_path):
    (tmp_path / "wiki_00").write_text('<doc id="1" url="u" title="T">\nT\ntext\n')
    with pytest.raises(ConfigError, match="document 1 has no closing"):
        list(read_wikiextractor(tmp_path / "wiki_00"))


def test_plain_text_by_line_and_by_paragraph():
    path = FIX / "plain" / "de.txt"
    assert len(list(read_plain_text(path))) == 4
    assert list(read_plain_text(path, "paragraph")) == [
        "Der erste Absatz beginnt hier und geht hier weiter.", "Der zweite Absatz.", "Der dritte Absatz."]
    with pytest.raises(ConfigError, match="valid choices: line, paragraph"):
        list(read_plain_text(path, "sentence"))


def test_pbc_reader_is_the_labs():
    from xlrepro.data.bible import read_pbc as labs
    assert read_pbc is labs


# --- encoders ----------------------------------------------------------------------------------------------------

def test_tiny_bert_loads_by_local_path_and_is_small():
    encoder, tokenizer = load_encoder(FIX / "tiny_bert")
    assert encoder.config.hidden_size == 32 and encoder.config.num_hidden_layers == 2
    enc = tokenizer("Die Katze", "A cat")
    assert enc.input_ids[0] == tokenizer.cls_token_id and enc.input_ids.count(tokenizer.sep_token_id) == 2
    pieces = tokenizer.tokenize("Málaga")  # cased, accents kept, as mBERT's
    assert "".join(p.removeprefix("##") for p in pieces) == "Málaga" and all(p != "[UNK]" for p in pieces)
    assert sum(p.stat().st_size for p in (FIX / "tiny_bert").iterdir()) < 2_000_000


def test_an_encoder_missing_offline_names_the_id_and_the_fixes(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(ConfigError) as err:
        load_encoder("xlrepro-test/no-such-encoder")
    message = str(err.value)
    assert "'xlrepro-test/no-such-encoder'" in message and "HF_HUB_OFFLINE" in message and "local copy" in message
    assert "\n" not in message
    with pytest.raises(ConfigError, match="does not exist"):
        load_encoder(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="has no config.json"):
        load_encoder(tmp_path / "empty")


# --- registry and prepare ---------------------------------------------------------------------------------------

def test_registry_entries_are_complete():
    for name, res in RESOURCES.items():
        assert res.name == name and res.url.startswith("http") and res.size_bytes > 0 and res.licence
        assert res.env.startswith("XLREPRO_") and res.files
        assert (res.how == "hub") == (res.hub_id is not None)
        assert res.how != "manual" or res.instructions
    with pytest.raises(ConfigError, match="valid choices: hub, url, manual"):
        Resource("x", "d", "https://x", 1, "l", "XLREPRO_X", "ftp")


def test_chapters_declare_their_resources():
    assert resources_for(["wu2019/q1_zero_shot"]) == ["mbert", "xnli", "multinli"]
    assert resources_for(["dufter2020/setup", "dufter2020/engineering"]) == ["pbc"]
    assert "wu2019/q1_zero_shot" in chapters_needing("xnli") and chapters_needing("pbc")[0] == "dufter2020/setup"
    every = set(RESOURCES)
    from xlrepro.papers import papers
    for paper in papers().values():
        for chapter, names in paper.resources.items():
            assert (chapter in paper.chapters or chapter.startswith(f"{paper.name}/")) and set(names) <= every, chapter
    # the paper paths run as package functions are keys '<paper>/<module>.<function>'
    assert resources_for(["wu2019/pos.table5"]) == ["mbert", "ud"]
    assert resources_for(["liu2020/paper.mean_difference_shift"]) == ["mbert", "wikipedia"]
    assert resources_for(["liu2020/paper.word_retrieval_by_layer"]) == ["mbert", "muse", "wikipedia"]


def test_a_resources_key_is_a_chapter_or_a_package_function():
    from xlrepro.config import ConfigError
    from xlrepro.papers import Paper

    Paper("x2020", "X", ("x2020/one",), resources={"x2020/one": ("pbc",), "x2020/mod.run": ("ud",)})
    for key in ("x2020/two", "y2020/mod.run"):
        with pytest.raises(ConfigError, match=f"resources key '{key}' is neither a chapter nor a package function"):
            Paper("x2020", "X", ("x2020/one",), resources={key: ("pbc",)})


def test_prepare_only_accepts_a_package_function(capsys):
    assert main(["prepare", "--profile", "paper", "--only", "wu2019/pos.table5", "--dry-run"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()[:2]] == ["mbert", "ud"]


def test_locate_reads_the_variable(monkeypatch):
    monkeypatch.setenv("XLREPRO_XNLI_DIR", str(FIX / "xnli"))
    assert locate("xnli") == FIX / "xnli"
    monkeypatch.setenv("XLREPRO_XNLI_DIR", str(FIX / "multinli"))  # a folder without the files: not there
    assert locate("xnli") is None


def test_the_encoder_is_the_argument_else_the_local_mbert_else_the_hub_id(monkeypatch, tmp_path):
    from xlrepro.resources import MBERT, mbert_encoder
    monkeypatch.setenv("XLREPRO_MBERT", str(FIX / "tiny_bert"))
    assert mbert_encoder(tmp_path / "mine") == str(tmp_path / "mine")  # given: taken as it is
    assert mbert_encoder() == str(FIX / "tiny_bert")  # the variable's folder holds the encoder's files
    monkeypatch.setenv("XLREPRO_MBERT", str(FIX / "xnli"))  # a folder without them
    monkeypatch.setenv("XLREPRO_CACHE", str(tmp_path / "cache"))
    assert mbert_encoder() == MBERT


def test_prepare_dry_run_lists_sizes_and_total(capsys, monkeypatch):
    monkeypatch.setenv("XLREPRO_XNLI_DIR", str(FIX / "xnli"))
    assert main(["prepare", "--profile", "paper", "--only", "wu2019/q1_zero_shot", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out[:3]] == ["mbert", "xnli", "multinli"]
    assert "717.0 MB" in out[0] and f"present at {FIX / 'xnli'}" in out[1] and "missing ($XLREPRO_MULTINLI_DIR)" in out[2]
    assert out[3] == "total: 3 resources, about 961.9 MB (944.0 MB still to get)"


def test_prepare_offline_stops_in_one_line_naming_the_resource(capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("XLREPRO_MBERT", str(FIX / "tiny_bert"))
    monkeypatch.setenv("XLREPRO_XNLI_DIR", str(FIX / "xnli"))
    assert main(["prepare", "--profile", "paper", "--only", "wu2019/q1_zero_shot"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("xlrepro: resource multinli") and "HF_HUB_OFFLINE is set" in err
    assert "XLREPRO_MULTINLI_DIR" in err and "multinli_1.0.zip" in err and "\n" not in err


def test_prepare_with_every_resource_present(capsys, monkeypatch):
    for env, folder in (("XLREPRO_MBERT", "tiny_bert"), ("XLREPRO_XNLI_DIR", "xnli"),
                        ("XLREPRO_MULTINLI_DIR", "multinli")):
        monkeypatch.setenv(env, str(FIX / folder))
    assert main(["prepare", "--profile", "paper", "--only", "wu2019/q1_zero_shot"]) == 0
    assert capsys.readouterr().out.count("present at") == 3


def test_prepare_names_the_manual_downloads(capsys, monkeypatch):
    monkeypatch.delenv("XLREPRO_PBC_DIR", raising=False)
    assert main(["prepare", "--profile", "paper", "--only", "dufter2020/setup"]) == 2
    captured = capsys.readouterr()
    assert "pbc: needs a manual download: ask the corpus's authors" in captured.out
    assert captured.err.strip() == ("xlrepro: 1 resource to get by hand (pbc): set XLREPRO_PBC_DIR "
                                    "(the lines above say where to get them)")


def test_prepare_arguments_are_checked(capsys):
    assert main(["prepare", "--only", "wu2019/q1_zero_shot"]) == 2
    assert "apply to --profile paper" in capsys.readouterr().err
    assert main(["prepare", "--profile", "paper", "--only", "wu2019/q9", "--dry-run"]) == 2
    assert "valid choices: dufter2020, multilingual, wu2019, k2020, liu2020" in capsys.readouterr().err


def test_a_url_resource_is_downloaded_and_unpacked(monkeypatch, tmp_path):
    archive = tmp_path / "XNLI-1.0.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for name in ("xnli.dev.tsv", "xnli.test.tsv"):
            z.write(FIX / "xnli" / name, f"XNLI-1.0/{name}")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.delenv("XLREPRO_XNLI_DIR", raising=False)
    monkeypatch.setenv("XLREPRO_CACHE", str(tmp_path / "cache"))
    local = Resource(**{**RESOURCES["xnli"].__dict__, "url": archive.as_uri()})
    monkeypatch.setitem(RESOURCES, "xnli", local)
    lines = P.prepare_resources([local])
    folder = tmp_path / "cache" / "paper" / "xnli" / "XNLI-1.0"
    assert lines == [f"xnli: downloaded into {folder}"] and len(read_xnli(folder / "xnli.test.tsv")) == 24
    assert P.prepare_resources([local]) == [f"xnli: present at {folder}"]  # a second run downloads nothing


def test_iob1_becomes_iob2():
    from xlrepro.resources import to_iob2

    # IOB1: I- opens an entity after O or another type; B- only separates two adjacent entities of one type
    assert to_iob2(["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG"]) == (
        "B-PER", "I-PER", "O", "B-LOC", "B-LOC", "B-ORG")
    assert to_iob2(["B-LOC", "I-LOC", "O"]) == ("B-LOC", "I-LOC", "O")  # IOB2 unchanged
