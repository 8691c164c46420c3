"""Span projection through word alignments: known answers on hand-made pairs (xlrepro.tasks.projection)."""
import pytest

from xlrepro.tasks.entities import entity_chunks
from xlrepro.tasks.projection import (WordAligner, chunks_to_tags, copy_strings, only_type, project_chunks,
                                      project_tags, symmetrise)

# a tiny parallel corpus whose alignment is obvious: every word has one translation, order swaps in the last pair
SRC = [["the", "house"], ["the", "book"], ["a", "book"], ["a", "house"], ["john", "saw", "the", "house"],
       ["mary", "saw", "a", "book"], ["john", "saw", "mary"]]
TGT = [["das", "haus"], ["das", "buch"], ["ein", "buch"], ["ein", "haus"], ["johann", "sah", "das", "haus"],
       ["maria", "sah", "ein", "buch"], ["maria", "sah", "johann"]]


@pytest.fixture(scope="module")
def aligner():
    return WordAligner.fit(SRC, TGT, iterations=5)


def test_ibm2_aligns_the_obvious_pairs(aligner):
    assert aligner.align(["John", "saw", "the", "house"], ["Johann", "sah", "das", "Haus"]) == \
        {(0, 0), (1, 1), (2, 2), (3, 3)}  # case does not matter
    # the swapped pair: names cross over
    assert {(0, 2), (2, 0)} <= aligner.align(["john", "saw", "mary"], ["maria", "sah", "johann"])


def test_intersection_and_grow_diag_final_and():
    fwd = {(0, 0), (1, 1), (2, 1)}
    bwd = {(0, 0), (1, 1), (2, 2)}
    assert symmetrise(fwd, bwd, 3, 3, "intersection") == {(0, 0), (1, 1)}
    # grow-diag from (1, 1): its neighbour (2, 1) comes first (source word 2 free), then (2, 2) (target word 2 free)
    assert symmetrise(fwd, bwd, 3, 3, "grow-diag-final-and") == {(0, 0), (1, 1), (2, 1), (2, 2)}
    # a neighbouring union link whose two words are both aligned already is not grown
    assert symmetrise({(0, 0), (1, 1), (1, 0)}, {(0, 0), (1, 1)}, 2, 2, "grow-diag-final-and") == {(0, 0), (1, 1)}
    # final-and adds a union link far from the others only when both its words are unaligned
    assert symmetrise({(0, 0), (3, 3)}, {(0, 0)}, 4, 4, "grow-diag-final-and") == {(0, 0), (3, 3)}
    assert symmetrise({(0, 0), (0, 3)}, {(0, 0)}, 4, 4, "grow-diag-final-and") == {(0, 0)}


def test_nltk_gdfa_returns_the_union_which_is_why_ours_is_written_by_hand():
    from nltk.translate.gdfa import grow_diag_final_and
    # 0-0 and 2-2 in one direction, 0-2 and 2-0 in the other: a true GDFA cannot keep both links of word 0 from
    # the final step; NLTK 3.10 keeps the whole union
    assert set(grow_diag_final_and(3, 3, "0-0 1-1 2-2", "0-2 1-1 2-0")) == {(0, 0), (1, 1), (2, 2), (0, 2), (2, 0)}
    assert symmetrise({(0, 0), (1, 1), (2, 2)}, {(0, 2), (1, 1), (2, 0)}, 3, 3, "grow-diag-final-and") == \
        {(1, 1), (0, 0), (0, 2), (2, 0)}  # grow-diag from 1-1: (0,0), then (0,2) and (2,0) (one word free), not (2,2)


def test_projection_takes_the_minimal_covering_span_and_drops_unaligned_and_overlapping():
    # source: [the land of Egypt] = LOC 1..4, [Moses] PER 5..6, [Aaron] PER 7..8 (unaligned)
    links = {(1, 3), (3, 1), (5, 0), (0, 9)}  # "land" -> 3, "Egypt" -> 1: covering span 1..4, gaps filled
    chunks = [("LOC", 1, 4), ("PER", 5, 6), ("PER", 7, 8)]
    kept, counts = project_chunks(chunks, links)
    assert kept == [("LOC", 1, 4), ("PER", 0, 1)]
    assert counts == {"projected": 2, "unaligned": 1, "overlap": 0}
    # two source entities whose images overlap: the first in source order wins
    kept, counts = project_chunks([("PER", 0, 1), ("LOC", 2, 3)], {(0, 1), (0, 2), (2, 2)})
    assert kept == [("PER", 1, 3)] and counts["overlap"] == 1


def test_project_tags_end_to_end():
    src = ["B-PER", "O", "B-LOC", "I-LOC"]
    tags, counts = project_tags(src, {(0, 3), (2, 0), (3, 1)}, 4)
    assert tags == ["B-LOC", "I-LOC", "O", "B-PER"] and counts["projected"] == 2
    assert entity_chunks(tags) == {("LOC", 0, 2), ("PER", 3, 4)}


def test_chunks_to_tags_checks_its_input():
    assert chunks_to_tags([("ORG", 1, 3)], 4) == ["O", "B-ORG", "I-ORG", "O"]
    with pytest.raises(ValueError, match="outside 2 words"):
        chunks_to_tags([("PER", 1, 3)], 2)
    with pytest.raises(ValueError, match="not one of PER, LOC, ORG"):
        chunks_to_tags([("GPE", 0, 1)], 2)
    with pytest.raises(ValueError, match="overlaps"):
        chunks_to_tags([("PER", 0, 2), ("LOC", 1, 2)], 2)


def test_string_copy_baseline():
    src_words = ["Moses", "went", "to", "Egypt", "and", "Moses", "spoke"]
    src_tags = ["B-PER", "O", "O", "B-LOC", "O", "B-PER", "O"]
    tgt_words = ["And", "Moses", "spoke", "to", "Moses", "in", "Mizraim"]
    # both Moses are copied (the second to the next free occurrence); Egypt has no exact match
    assert copy_strings(src_words, src_tags, tgt_words) == ["O", "B-PER", "O", "O", "B-PER", "O", "O"]


def test_only_type():
    assert only_type(["B-PER", "I-PER", "B-LOC", "O"], "LOC") == ["O", "O", "B-LOC", "O"]


def test_bad_input_names_the_choices():
    with pytest.raises(ValueError, match="valid: intersection, grow-diag-final-and"):
        symmetrise(set(), set(), 1, 1, "union")
    with pytest.raises(ValueError, match="outside a 2 x 2 pair"):
        symmetrise({(0, 2)}, set(), 2, 2)
    with pytest.raises(ValueError, match="2 source sentences but 1 target"):
        WordAligner.fit([["a"], ["b"]], [["x"]])
    with pytest.raises(ValueError, match="iterations must be >= 1"):
        WordAligner.fit([["a"]], [["x"]], iterations=0)


def test_the_check_refuses_the_lab_edition_itself():
    from xlrepro.tasks.projection import projection_check
    with pytest.raises(ValueError, match="lab's own English edition"):
        projection_check(edition="4")
    with pytest.raises(ValueError, match="unknown split 'val'"):
        projection_check("val")
    with pytest.raises(ValueError, match="en editions: k, 2, 3, 4"):
        projection_check(edition="v")


def _check_frame(f1):
    import pandas as pd
    rows = [(m, k, met, v) for m in ("projection (intersection)", "string copy") for k in ("all", "PER", "LOC", "ORG")
            for met, v in (("precision", 0.5), ("recall", 0.5), ("f1", f1))]
    rows += [("projection (intersection)", "all", "source_entities_unaligned", 3)]
    rows += [("setup", "all", m, 10) for m in ("verses", "source_entities", "target_entities_direct",
                                               "aligner_training_cpu_seconds", "alignment_cpu_seconds",
                                               "aligner_training_verses", "ibm2_iterations")]
    rows += [("criterion", "all", "usable", float(f1 >= 0.8))]
    return pd.DataFrame(rows, columns=["experiment", "type", "metric", "value"])


def test_the_chapter_text_follows_the_verdict():
    from xlrepro.papers.k2020.projection_check import summary, verdict_text
    assert "F1 **0.790**" in verdict_text(_check_frame(0.79)) and "**not met**" in verdict_text(_check_frame(0.79))
    assert "is met" in verdict_text(_check_frame(0.81)) and "not met" not in verdict_text(_check_frame(0.81))
    assert summary(_check_frame(0.79)).loc["string copy", "f1"] == 0.79
