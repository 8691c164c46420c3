"""Verse-pair section classification (xlrepro/tasks/sections.py).

The pair tests read the session's prepared cache (conftest's `multilingual_cache`) for at most
three languages: en, fr and tr (tr drops and merges verses, so its pairs differ from en's).
"""
from __future__ import annotations

import pytest

from xlrepro.data import multilingual as ml
from xlrepro.tasks import sections as sec

pytestmark = pytest.mark.usefixtures("multilingual_cache")


@pytest.fixture(scope="module")
def en_test():
    return sec.verse_pairs("en", "test")


def test_book_section_covers_books_1_to_66_and_every_section():
    assert sorted(sec.BOOK_SECTION) == list(range(1, 67))
    assert set(sec.BOOK_SECTION.values()) == set(sec.SECTIONS)
    assert len(sec.SECTIONS) == len(set(sec.SECTIONS)) == 6
    # each section is one contiguous run of books, in canonical order
    order = [sec.SECTIONS.index(sec.BOOK_SECTION[b]) for b in range(1, 67)]
    assert order == sorted(order)
    spot = {1: "law", 5: "law", 6: "history", 17: "history", 18: "wisdom", 22: "wisdom",
            23: "prophets", 39: "prophets", 40: "gospels_acts", 44: "gospels_acts",
            45: "letters_revelation", 66: "letters_revelation"}
    assert {b: sec.BOOK_SECTION[b] for b in spot} == spot


def test_pairs_are_consecutive_verses_with_the_right_label():
    train = sec.verse_pairs("en", "train")
    assert list(train.columns) == ["book", "chapter", "verse", "first", "second", "label"]
    verses = ml.load_verses("en").set_index(["book", "chapter", "verse"])["text"]
    # every pair is (v, v+1) of one chapter, with those two verses' texts
    sample = train.sample(200, random_state=0)
    for row in sample.itertuples():
        assert row.first == verses[(row.book, row.chapter, row.verse)]
        assert row.second == verses[(row.book, row.chapter, row.verse + 1)]
        assert sec.SECTIONS[row.label] == sec.BOOK_SECTION[row.book]
    # Genesis 1 is a train chapter: the first pair is Genesis 1:1-2, law
    g = train.iloc[0]
    assert (g.book, g.chapter, g.verse) == (1, 1, 1)
    assert g.first.startswith("In the beginning God created")
    assert g.second.startswith("Now the earth was formless")
    assert sec.SECTIONS[g.label] == "law"
    # no pair starts at a chapter's last verse (it would cross into the next chapter)
    last = verses.reset_index().groupby(["book", "chapter"])["verse"].max()
    starts_at_last = train.merge(last.rename("last").reset_index(), on=["book", "chapter"])
    assert (starts_at_last["verse"] < starts_at_last["last"]).all()
    # en keeps all verses as one-verse spans: pairs = verses - chapters
    en_train = ml.load_verses("en", "train")
    n_chapters = en_train.groupby(["book", "chapter"]).ngroups
    assert len(train) == len(en_train) - n_chapters
    # Matthew (40) and Revelation (66) labels, wherever their chapters fall
    for book, name in ((40, "gospels_acts"), (66, "letters_revelation")):
        labels = set(train.loc[train["book"] == book, "label"])
        assert labels == {sec.SECTIONS.index(name)}


def test_pairs_skip_missing_and_merged_verses():
    tr = ml.load_verses("tr", "test")
    pairs = sec.verse_pairs("tr", "test")
    single = set(zip(tr.loc[tr["span"] == 1, "book"], tr.loc[tr["span"] == 1, "chapter"],
                     tr.loc[tr["span"] == 1, "verse"]))
    keys = list(zip(pairs["book"], pairs["chapter"], pairs["verse"]))
    assert keys, "tr has test pairs"
    for b, c, v in keys:
        assert (b, c, v) in single and (b, c, v + 1) in single
    # the cleaned Turkish text really has merged verses in test, and they make pairs disappear
    assert (tr["span"] > 1).any()
    assert len(pairs) < len(sec.verse_pairs("en", "test"))


def test_parallel_keys_give_the_same_keys_in_every_language(en_test):
    keys = sec.parallel_keys(["en", "fr", "tr"], "test")
    assert 0 < len(keys) <= len(en_test)
    frames = {lang: sec.verse_pairs(lang, "test", keys=keys) for lang in ("en", "fr", "tr")}
    as_keys = {lang: list(zip(f["book"], f["chapter"], f["verse"])) for lang, f in frames.items()}
    assert as_keys["en"] == as_keys["fr"] == as_keys["tr"] == keys
    assert (frames["en"]["label"] == frames["tr"]["label"]).all()
    assert (frames["en"]["first"] != frames["fr"]["first"]).mean() > 0.99  # translations
    # without the shared keys tr has fewer test pairs than en
    assert len(sec.verse_pairs("tr", "test")) < len(en_test)
    # subsampling picks the same keys in every language, and nested
    small = {lang: sec.verse_pairs(lang, "test", keys=keys, max_pairs=50, seed=3) for lang in ("en", "tr")}
    assert len(small["en"]) == 50
    assert small["en"][["book", "chapter", "verse"]].equals(small["tr"][["book", "chapter", "verse"]])
    sub_keys = list(zip(small["en"]["book"], small["en"]["chapter"], small["en"]["verse"]))
    assert sub_keys == sorted(sub_keys)  # canonical order after subsampling
    smaller = sec.verse_pairs("en", "test", keys=keys, max_pairs=20, seed=3)
    big = set(zip(small["en"]["book"], small["en"]["chapter"], small["en"]["verse"]))
    assert set(zip(smaller["book"], smaller["chapter"], smaller["verse"])) <= big
    other_seed = sec.verse_pairs("en", "test", keys=keys, max_pairs=50, seed=4)
    assert not other_seed[["book", "chapter", "verse"]].equals(small["en"][["book", "chapter", "verse"]])


def test_majority_baseline_on_hand_made_labels():
    # train majority is 2 (three times); test has 2 in 2 of 5 places
    assert sec.majority_baseline([0, 2, 1, 2, 2, 0], [2, 0, 2, 1, 1]) == pytest.approx(0.4)
    # ties go to the smallest label
    assert sec.majority_baseline([3, 1, 3, 1], [1, 1, 3]) == pytest.approx(2 / 3)
    assert sec.majority_baseline([5], [4, 4]) == 0.0
    with pytest.raises(ValueError):
        sec.majority_baseline([], [1])


def test_task_card_counts_and_majority(en_test, monkeypatch):
    card = sec.task_card(["en"])
    assert list(card.index) == [("en", s) for s in ml.SPLITS]
    test = card.loc[("en", "test")]
    assert test["pairs"] == len(en_test)
    shares = [test[s] for s in sec.SECTIONS]
    assert sum(shares) == pytest.approx(1.0)
    assert test[sec.SECTIONS[0]] == pytest.approx((en_test["label"] == 0).mean())
    train_labels = sec.verse_pairs("en", "train")["label"]
    assert test["majority_acc"] == pytest.approx(sec.majority_baseline(train_labels, en_test["label"]))
    # majority_acc is the share of the *train* majority class, whatever the test majority is
    monkeypatch.setattr(sec, "majority_class", lambda labels: 5)
    test = sec.task_card(["en"]).loc[("en", "test")]
    assert test["majority"] == "letters_revelation"
    assert test["majority_acc"] == pytest.approx(test["letters_revelation"])


def test_bad_split_and_language_raise():
    with pytest.raises(ValueError, match="valid splits: train, dev, test"):
        sec.verse_pairs("en", "validation")
    with pytest.raises(ValueError, match="valid splits: train, dev, test"):
        sec.parallel_keys(["en"], "Test")
    with pytest.raises(ValueError, match="valid languages: en, fr"):
        sec.verse_pairs("xx", "test")
    with pytest.raises(ValueError, match="valid languages"):
        sec.task_card(["en", "english"])
