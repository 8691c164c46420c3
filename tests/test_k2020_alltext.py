"""K et al. (2020) corpora with all the offline text of a language (`corpus(..., text="all")`), on hand-made
Bible editions and help paragraphs (the loaders monkeypatched)."""
import numpy as np
import pandas as pd
import pytest

from xlrepro.config import ConfigError
from xlrepro.papers.k2020 import data as D

# halves at seed 2020: chapters (1,1) (1,2) (2,5) -> 1, (1,3) (1,4) (2,2) -> 0; help files a, c -> 1, b -> 0
A, B, C = "text/shared/a.html", "text/shared/b.html", "text/swriter/c.html"
CHAPTERS = {"4": [(1, 1), (1, 3), (2, 2), (2, 5)],  # en's own edition (World English Bible)
            "k": [(1, 1), (1, 4)], "2": [(1, 2), (1, 3)], "3": [(2, 5)]}  # en's other editions


def verses(code, chapters):
    rows = [(b, c, v, "train", 1, f"{code} {b}:{c}:{v}") for b, c in chapters for v in (1, 2)]
    return pd.DataFrame(rows, columns=["book", "chapter", "verse", "split", "span", "text"]).astype(
        {"book": "int16", "chapter": "int16", "verse": "int16"})


@pytest.fixture
def loaders(monkeypatch):
    calls = []

    def load_verses(lang, split=None, cache_dir=None):
        calls.append((lang, None, split))
        return verses({"en": "4", "hi": "i"}[lang], CHAPTERS["4"])

    def load_edition_verses(lang, code, split=None, cache_dir=None):
        calls.append((lang, code, split))
        return verses(code, CHAPTERS[code])

    def paragraphs(lang, cache_dir=None):
        calls.append((lang, "help", None))
        return pd.DataFrame([(A, "p1", "a one"), (A, "p2", "a two"), (B, "p1", "b one"), (C, "p9", "c one")],
                            columns=["file", "para_id", "text"])

    monkeypatch.setattr(D, "load_verses", load_verses)
    monkeypatch.setattr(D, "load_edition_verses", load_edition_verses)
    monkeypatch.setattr(D.libreoffice, "paragraphs", paragraphs)
    return calls


def rows(df):
    return [tuple(r) for r in df.itertuples(index=False)]


def test_bible_is_the_one_edition_of_the_half(loaders):
    df = D.corpus("en", 0, seed=2020)
    assert list(df.columns) == ["book", "chapter", "verse", "text"]
    assert rows(df) == [(1, 3, 1, "4 1:3:1"), (1, 3, 2, "4 1:3:2"), (2, 2, 1, "4 2:2:1"), (2, 2, 2, "4 2:2:2")]
    assert D.corpus("en", 0, seed=2020, text="bible").equals(df)
    assert loaders == [("en", None, "train")] * 2  # no other edition, no help read


def test_all_adds_the_other_editions_and_the_help_files_of_the_same_half(loaders):
    df = D.corpus("en", 0, seed=2020, text="all")
    assert list(df.columns) == ["book", "chapter", "verse", "text", "source"]
    assert rows(df) == [
        (1, 3, 1, "4 1:3:1", "bible:4"), (1, 3, 2, "4 1:3:2", "bible:4"),
        (2, 2, 1, "4 2:2:1", "bible:4"), (2, 2, 2, "4 2:2:2", "bible:4"),
        (1, 4, 1, "k 1:4:1", "bible:k"), (1, 4, 2, "k 1:4:2", "bible:k"),
        (1, 3, 1, "2 1:3:1", "bible:2"), (1, 3, 2, "2 1:3:2", "bible:2"),
        # edition 3 has no chapter of half 0; help: file b, the 2nd file of the language
        (-1, -2, 1, "b one", f"help:{B}"),
    ]
    assert {split for _, _, split in loaders if split is not None} == {"train"}  # train chapters only
    other = D.corpus("en", 1, seed=2020, text="all")
    assert rows(other[other["book"] == D.HELP_BOOK]) == [
        (-1, -1, 1, "a one", f"help:{A}"), (-1, -1, 2, "a two", f"help:{A}"), (-1, -3, 1, "c one", f"help:{C}")]
    assert sorted(set(zip(other["book"], other["chapter"])) - {(-1, -1), (-1, -3)}) == [(1, 1), (1, 2), (2, 5)]


def test_the_two_halves_share_no_chapter_and_no_help_file(loaders):
    source, target = D.corpus("en", 0, seed=2020, text="all"), D.corpus("en", 1, seed=2020, text="all")
    assert not set(zip(source["book"], source["chapter"])) & set(zip(target["book"], target["chapter"]))
    help_files = [set(df.loc[df["book"] == D.HELP_BOOK, "source"]) for df in (source, target)]
    assert help_files == [{f"help:{B}"}, {f"help:{A}", f"help:{C}"}]


def test_a_help_file_is_one_document_of_its_own(loaders):
    df = D.corpus("en", 1, seed=2020, text="all")
    docs = (df["book"].astype(np.int64) * 1000 + df["chapter"].astype(np.int64)).to_numpy()  # as the trainer does
    help_docs = docs[(df["book"] == D.HELP_BOOK).to_numpy()]
    assert list(help_docs) == [-1001, -1001, -1003]
    assert not set(help_docs) & set(docs[(df["book"] != D.HELP_BOOK).to_numpy()])


def test_fake_english_reads_english_and_other_languages_what_they_have(loaders):
    assert D.corpus("enfake", 0, seed=2020, text="all").equals(D.corpus("en", 0, seed=2020, text="all"))
    loaders.clear()
    hi = D.corpus("hi", 0, seed=2020, text="all")  # Hindi: one Bible edition, a help package
    assert set(hi["source"]) == {"bible:i", f"help:{B}"}
    assert ("hi", "help", None) in loaders and not any(code not in (None, "help") for _, code, _ in loaders)


def test_text_is_checked():
    with pytest.raises(ConfigError, match="valid choices: bible, all"):
        D.corpus("en", 0, text="everything")
