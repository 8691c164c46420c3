"""The section task's baselines card (xlrepro/papers/k2020/task_card.py) on hand-made verse pairs.

The pairs are made here (no Bible): in every language a name decides the label (Moses: law, David: history, Paul:
wisdom); en and es spell the names alike, ru spells them in Cyrillic, and the three share no other word or letter
string. So a bag of words trained on English is perfect in English and Spanish, sees nothing it knows in Russian
(and in Fake-English), and must answer the majority class there.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from xlrepro.papers.k2020 import task_card as card_mod

NAMES = {"en": ("Moses", "David", "Paul"), "es": ("Moses", "David", "Paul"), "ru": ("Моисей", "Давид", "Павел")}
FILLER = {"en": ("and the", "went up"), "es": ("y el", "subió"), "ru": ("и он", "пошёл")}
# train: 6 law, 3 history, 3 wisdom (majority: law, label 0); dev: one of each; test: labels 0, 1, 2, 0
LABELS = {"train": [0] * 6 + [1] * 3 + [2] * 3, "dev": [0, 1, 2], "test": [0, 1, 2, 0]}


def fixture_pairs(lang, split, cache_dir=None, max_pairs=None, seed=0, *, keys=None):
    a, b = FILLER[lang]
    rows = [{"book": 1 + i, "chapter": 1, "verse": 1, "first": f"{NAMES[lang][y]} {a}", "second": f"{b} {NAMES[lang][y]}.",
             "label": y} for i, y in enumerate(LABELS[split])]
    df = pd.DataFrame(rows)
    if keys is not None:
        df = df[[k in set(keys) for k in zip(df["book"], df["chapter"], df["verse"])]]
    return df.head(max_pairs).reset_index(drop=True) if max_pairs is not None else df


@pytest.fixture
def fixture_bible(monkeypatch):
    asked = []

    def keys(langs, split, cache_dir=None):
        asked.append((list(langs), split))
        return [(1 + i, 1, 1) for i in range(len(LABELS[split]))]

    monkeypatch.setattr(card_mod, "verse_pairs", fixture_pairs)
    monkeypatch.setattr(card_mod, "parallel_keys", keys)
    return asked


def value(card, baseline, train, test, metric, split="test"):
    row = card[(card.baseline == baseline) & (card.train_language == train) & (card.test_language == test)
               & (card.split == split) & (card.metric == metric)]
    assert len(row) == 1, (baseline, train, test, metric, split)
    return float(row["value"].iloc[0])


def test_card_on_hand_made_pairs(fixture_bible):
    card = card_mod.baseline_card(("en", "es", "ru"))
    assert list(card.columns) == list(card_mod.CARD_COLUMNS)
    assert fixture_bible == [(["en", "es", "ru"], "test")]  # the test keys shared by every language
    # majority: law (6 of 12 train pairs); the test labels 0, 1, 2, 0 -> half right; F1 2/3 for law, 0 for the
    # other five sections
    for lang in ("en", "es", "ru", "enfake"):
        assert value(card, "majority", "en", lang, "accuracy") == pytest.approx(0.5)
        assert value(card, "majority", "en", lang, "macro_f1") == pytest.approx((2 / 3) / 6)
        assert value(card, "majority", "en", lang, "pairs") == 4
        assert value(card, "majority", "en", lang, "accuracy", "dev") == pytest.approx(1 / 3)
    for features in ("word", "char"):
        b = f"bow_{features}"
        # the names decide the label and en, es spell them alike: perfect in both
        assert value(card, b, "en", "en", "accuracy") == 1.0
        assert value(card, b, "en", "es", "accuracy") == 1.0
        assert value(card, b, "en", "es", "macro_f1") == pytest.approx(0.5)  # 3 of the 6 sections, each F1 1
        # Cyrillic and Fake-English share nothing with English: every pair is empty, the answer is law
        for train, test in (("en", "ru"), ("en", "enfake"), ("enfake", "en"), ("enfake", "es"), ("enfake", "ru")):
            assert value(card, b, train, test, "empty_share") == 1.0
            assert value(card, b, train, test, "feature_coverage") == 0.0
            assert value(card, b, train, test, "majority_share") == 1.0
            assert value(card, b, train, test, "accuracy") == pytest.approx(0.5)
        assert value(card, b, "enfake", "enfake", "accuracy") == 1.0
        assert value(card, b, "en", "es", "empty_share") == 0.0
        assert value(card, b, "en", "en", "C") in card_mod.C_GRID
    for lang in ("en", "es", "ru"):
        assert value(card, "in_language_word", lang, lang, "accuracy") == 1.0
        assert value(card, "in_language_word", lang, lang, "accuracy", "dev") == 1.0
    table = card_mod.accuracy_table(card)
    assert table.loc[("bow_word", "en"), "es"] == 100.0
    assert table.loc[("majority", "en"), "ru"] == 50.0
    assert list(table.loc[("in_language_word", "own"), ["en", "es", "ru"]]) == [100.0, 100.0, 100.0]


def test_card_is_deterministic_and_respects_max_train_pairs(fixture_bible):
    a = card_mod.baseline_card(("en", "ru"), fake=False)
    b = card_mod.baseline_card(("en", "ru"), fake=False)
    pd.testing.assert_frame_equal(a, b)
    assert "enfake" not in set(a.train_language) | set(a.test_language)
    # the first 8 train pairs: 6 law, 2 history, no wisdom -> the model can never answer wisdom
    small = card_mod.baseline_card(("en",), fake=False, max_train_pairs=8)
    assert value(small, "bow_word", "en", "en", "accuracy") == pytest.approx(0.75)


def test_empty_pairs_fall_back_to_the_majority_class():
    docs = [["moses", "and"], ["moses", "the"], ["david", "and"], ["david", "the"], ["paul", "x"], ["paul", "y"]]
    vec, clf = card_mod.fit_bow(docs, [0, 0, 1, 1, 2, 2], "word", C=10.0)
    pred, raw, empty = card_mod.predict_bow(vec, clf, [["david"], ["unknown"], []], fallback=2)
    assert list(empty) == [False, True, True]
    assert pred[0] == raw[0] == 1
    assert list(pred[1:]) == [2, 2]
    assert card_mod.feature_coverage(vec, [["david", "unknown"], ["moses", "and", "x", "zzz"]]) == pytest.approx(3 / 6)


def test_word_documents_keep_devanagari_words_whole():
    pairs = pd.DataFrame({"first": ["सातवें महीने,"], "second": ["दिन को।"], "label": [0]})
    assert card_mod.pair_documents(pairs, "hi", "word") == [["सातवें", "महीने", "दिन", "को"]]
    fake = card_mod.pair_documents(pairs.assign(first=["Go, now"], second=["up"]), "enfake", "char")[0]
    assert all(ord(ch) >= 200_000 for ch in fake if ch != " ")  # every character shifted, spaces kept
    assert fake.count(" ") == 3  # "Go , now" (the comma split off, as BERT's basic tokenizer does) + " " + "up"


def test_bad_arguments_raise(fixture_bible, tmp_path):
    with pytest.raises(ValueError, match="valid languages"):
        card_mod.baseline_card(("en", "english"))
    with pytest.raises(ValueError, match="put 'en' in langs"):
        card_mod.baseline_card(("es", "ru"), train_lang="es")
    with pytest.raises(ValueError, match="max_train_pairs"):
        card_mod.baseline_card(("en",), max_train_pairs=0)
    with pytest.raises(ValueError, match="valid features: word, char"):
        card_mod.make_vectorizer("chars")
    with pytest.raises(ValueError, match="valid splits"):
        card_mod.accuracy_table(pd.DataFrame(columns=list(card_mod.CARD_COLUMNS)), "validation")


def test_cli_writes_the_long_csv(fixture_bible, tmp_path, capsys):
    out = tmp_path / "card.csv"
    card_mod.main(["--languages", "en", "ru", "--out", str(out)])
    df = pd.read_csv(out)
    assert list(df.columns) == list(card_mod.CARD_COLUMNS)
    assert set(df["baseline"]) == set(card_mod.BASELINES)
    assert np.isclose(df[(df.baseline == "bow_word") & (df.train_language == "en") & (df.test_language == "ru")
                         & (df.split == "test") & (df.metric == "accuracy")]["value"], 0.5).all()
    assert not list(tmp_path.glob(".card.csv.*"))  # no temp file left


def test_compare_zero_shot_against_the_best_source_baseline():
    card = pd.DataFrame([
        ("majority", "en", "es", "test", "accuracy", 0.25), ("bow_word", "en", "es", "test", "accuracy", 0.20),
        ("bow_char", "en", "es", "test", "accuracy", 0.35), ("bow_char", "enfake", "es", "test", "accuracy", 0.25),
        ("bow_word", "enfake", "es", "test", "accuracy", 0.25),
        ("in_language_word", "es", "es", "test", "accuracy", 0.80),  # not a zero-shot baseline
        ("majority", "en", "ru", "test", "accuracy", 0.25), ("bow_char", "en", "ru", "test", "accuracy", 0.30),
        ("bow_char", "en", "es", "dev", "accuracy", 0.90)], columns=list(card_mod.CARD_COLUMNS))
    results = pd.DataFrame([
        ("en-es", 0, "es", "sections", "accuracy", 0.40), ("en-es", 1, "es", "sections", "accuracy", 0.50),
        ("en-es", 0, "en", "sections", "accuracy", 0.90),  # the source language: not read
        ("enfake-es", 0, "es", "sections", "accuracy", 0.20), ("enfake-es", 1, "es", "sections", "accuracy", 0.20),
        ("en-ru", 0, "ru", "ner", "accuracy", 0.99)],  # another task: not read
        columns=["experiment", "seed", "language", "task", "metric", "value"])
    cmp = card_mod.compare_zero_shot(card, results)
    assert list(cmp["cell"]) == ["en-es", "enfake-es"]  # en-ru has no section result
    es, fake = cmp.iloc[0], cmp.iloc[1]
    assert (es.bbert, es.best_baseline, es.baseline, es.seeds) == (pytest.approx(45.0), 35.0, "bow_char", 2)
    assert es.difference == pytest.approx(10.0)
    # Fake-English: its own bag of words and the majority class tie at 25; the en-trained char model is not its
    assert fake.best_baseline == 25.0 and fake.baseline in ("majority", "bow_char", "bow_word")
    assert fake.difference == pytest.approx(-5.0)
    text = card_mod.comparison_sentence(cmp)
    assert "mean over 2 seeds" in text and "in 1 of 2 cells" in text
    assert "en-es 45.0 vs 35.0 (character n-grams)" in text
    assert card_mod.comparison_sentence(cmp.iloc[:0]) == ""
    with pytest.raises(ValueError, match="valid splits: test, dev"):
        card_mod.compare_zero_shot(card, results, split="train")


def test_adjacency_card_on_hand_made_chapters(monkeypatch):
    """Chapters of one verse pair each, whose two verses share one word (w<c> in English and Spanish alike, a
    Cyrillic one in Russian) and nothing with other chapters: the word overlap separates next verses perfectly in each
    language, and falls to 50 % on every mixed pair with Fake-English (which shares no word); one verse alone scores
    exactly 50 % (each verse is once in each class); the majority class is 50 %."""
    from xlrepro.tasks import adjacency as A
    word = {"en": "w", "es": "w", "ru": "ж"}  # es shares en's words: only the Fake-English shift removes them

    def pairs(lang, split, cache_dir=None, max_pairs=None, seed=0, *, keys=None):
        n = 8 if split == "train" else 4
        w = word[lang]
        return pd.DataFrame([{"book": 1, "chapter": c, "verse": 1, "first": f"{w}a{c} {w}{c}",
                              "second": f"{w}{c} {w}z{c}", "label": 0} for c in range(1, n + 1)])
    monkeypatch.setattr(A, "verse_pairs", pairs)
    monkeypatch.setattr(card_mod, "parallel_keys", lambda langs, split, cache_dir=None: [(1, c, 1) for c in range(5)])
    card = card_mod.adjacency_card(["en", "es", "ru"])
    table = card_mod.adjacency_table(card)
    assert table.loc["majority", ["en", "es", "ru"]].tolist() == [50.0] * 3
    assert table.loc["first_only", "en"] == 50.0 and table.loc["second_only", "en"] == 50.0
    assert table.loc["overlap", ["en", "es", "ru"]].tolist() == [100.0] * 3
    assert table.loc["overlap", ["enfake>es", "es>enfake", "enfake>ru", "ru>enfake"]].tolist() == [50.0] * 4
    assert set(card["metric"]) == {"accuracy", "pairs", "threshold"} and (card["split"] == "test").all()
    with pytest.raises(ValueError, match="put 'en' in langs"):
        card_mod.adjacency_card(["es", "ru"])
