"""Fake-English shift, lang-pos inputs, inv-order and no-parallel, on hand-made token ids."""
import numpy as np
import pytest
from tokenizers import Tokenizer
from tokenizers.models import WordLevel

from xlrepro.papers.dufter2020.config import Experiment
from xlrepro.papers.dufter2020.fake_english import FakeEnglish
from xlrepro.papers.dufter2020.transforms import build_bilingual, no_parallel_halves
from xlrepro.tokenization import SPECIAL_TOKENS


@pytest.fixture
def fe():
    words = SPECIAL_TOKENS + ["He", "ate", "wild", "hon", "##e", "##y", "."]
    tok = Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    return FakeEnglish(tok, shift=16)


def test_shift_is_invertible_and_keeps_specials(fe):
    ids = np.array([2, 5, 6, 7, 3, 0])  # [CLS] He ate wild [SEP] [PAD]
    fake = fe.to_fake(ids)
    assert fake.tolist() == [2, 21, 22, 23, 3, 0]
    assert fe.to_english(fake).tolist() == ids.tolist()
    shifted = fe.to_fake(ids, shift_special=True)
    assert shifted.tolist() == [18, 21, 22, 23, 19, 16]
    assert fe.to_english(shifted).tolist() == ids.tolist()
    assert fe.display([5, 21]) == ["He", "::He"]
    assert fe.vocab_size == 32


def exp(**kw):
    return Experiment(id="x", description="x", **kw)


def test_lang_pos_positions_and_segments(fe):
    data = build_bilingual(fe, [np.array([5, 6, 7])], exp(lang_pos=True), max_length=128)
    rows = np.arange(2)
    assert data.ids[0].tolist() == [2, 5, 6, 7, 3] and data.ids[1].tolist() == [2, 21, 22, 23, 3]
    assert data.position_ids(rows)[0].tolist() == [0, 1, 2, 3, 4]
    assert data.position_ids(rows)[1].tolist() == [128, 129, 130, 131, 132]
    assert data.token_type_ids(rows).tolist() == [[0] * 5, [1] * 5]
    shared = build_bilingual(fe, [np.array([5, 6, 7])], exp(), max_length=128)
    assert shared.position_ids(rows)[1].tolist() == [0, 1, 2, 3, 4]
    assert shared.token_type_ids(rows).sum() == 0


def test_inv_order_reverses_the_pieces_only(fe):
    data = build_bilingual(fe, [np.array([5, 6, 7, 8, 9])], exp(inv_order=True, shift_special=True), 128)
    assert data.ids[1].tolist() == [18, 25, 24, 23, 22, 21, 19]


def test_no_parallel_uses_disjoint_halves(fe):
    pieces = [np.array([5 + i % 7]) for i in range(10)]
    data = build_bilingual(fe, pieces, exp(no_parallel=True), 128)
    en, fake = no_parallel_halves(10)
    assert len(data) == 10 and data.fake.sum() == 5
    assert en == slice(0, 5) and fake == slice(5, 10)
    # English rows are sentences 0-4, Fake-English rows sentences 5-9 (no sentence in both languages)
    assert [int(r[1]) for r in data.ids[:5]] == [5 + i % 7 for i in range(5)]
    assert [int(r[1]) - 16 for r in data.ids[5:]] == [5 + i % 7 for i in range(5, 10)]
    parallel = build_bilingual(fe, pieces, exp(no_parallel=True), 128, parallel_only=True)
    assert len(parallel) == 20


def test_too_long_sentence_is_an_error(fe):
    with pytest.raises(ValueError, match="maximum is 4"):
        build_bilingual(fe, [np.array([5, 6, 7])], exp(), max_length=4)
