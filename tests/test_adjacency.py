"""The verse adjacency task (`xlrepro.tasks.adjacency`) on hand-made pairs."""
import pandas as pd
import pytest

from xlrepro.tasks import adjacency as A


def test_partners_stay_in_the_section_and_leave_the_chapter():
    # section 0: chapters (1, 1) and (1, 2), two pairs each; section 1: two chapters of book 50
    partner = A.negative_partners([0, 0, 0, 0, 1, 1], [(1, 1), (1, 1), (1, 2), (1, 2), (50, 1), (50, 2)])
    assert partner.tolist() == [2, 3, 0, 1, 5, 4]


def test_a_section_of_one_chapter_is_rotated_with_the_next():
    partner = A.negative_partners([0, 0, 0, 1, 1, 1], [(1, 1)] * 3 + [(7, 1)] * 3)
    assert partner.tolist() == [3, 4, 5, 0, 1, 2]
    with pytest.raises(ValueError, match="more than half"):
        A.negative_partners([0, 0, 0, 1], [(1, 1)] * 3 + [(7, 1)])
    with pytest.raises(ValueError, match="at least two chapters"):
        A.negative_partners([0], [(1, 1)])


def test_every_verse_is_once_in_each_class_so_one_side_alone_scores_half(monkeypatch):
    pos = pd.DataFrame({"book": [1, 1, 1, 1], "chapter": [1, 1, 2, 2], "verse": [1, 2, 1, 2],
                        "first": ["a1", "a2", "b1", "b2"], "second": ["a2", "a3", "b2", "b3"], "label": [0, 0, 0, 0]})
    monkeypatch.setattr(A, "verse_pairs", lambda *a, **k: pos)
    pairs = A.adjacency_pairs("en", "test")
    assert pairs[["first", "second", "label"]].values.tolist() == [
        ["a1", "a2", 1], ["a1", "b2", 0], ["a2", "a3", 1], ["a2", "b3", 0],
        ["b1", "b2", 1], ["b1", "a2", 0], ["b2", "b3", 1], ["b2", "a3", 0]]
    for side in ("first", "second"):  # each verse of a side once per label: a one-side rule gets exactly half right
        counts = pairs.groupby([side, "label"]).size().unstack()
        assert (counts == 1).all().all()
    assert pairs["label"].mean() == 0.5 and A.LABELS[1] == "next_verse"


def test_jaccard_and_the_stump_threshold_by_hand():
    assert A.jaccard([["a", "b"], [], ["x"]], [["b", "c"], [], ["y"]]).tolist() == [1 / 3, 0.0, 0.0]
    # next-verse pairs overlap 0.5 and 0.4, others 0.1 and 0.0: any t in [0.1, 0.4) is perfect; the lowest midpoint
    assert A.best_threshold([0.5, 0.1, 0.4, 0.0], [1, 0, 1, 0]) == pytest.approx(0.25)
    assert A.best_threshold([0.0, 0.0], [1, 0]) == pytest.approx(-1.0)  # one value: every pair above, half right
