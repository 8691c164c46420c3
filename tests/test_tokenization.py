"""Deterministic WordPiece training and canonical ids (xlrepro.tokenization)."""
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tokenizers import BertWordPieceTokenizer

from xlrepro.tokenization import (SPECIAL_TOKENS, bert_wordpiece, canonical_order, renumber, train_wordpiece,
                                  vocab_fingerprint)

ROOT = Path(__file__).resolve().parents[1]
# 8 x 8 two-letter stems, each with the endings x and y, every word twice: every pair count ties with many others,
# and 60 pieces cut through those ties (HF's own trainer gave 6 different vocabularies in 6 trainings on it).
LETTERS = "abcdefgh"
TIED = [" ".join(x + y + z for x, y in itertools.product(LETTERS, repeat=2) for z in "xy")] * 2


def ordered(tok):
    v = tok.get_vocab()
    return sorted(v, key=v.get)


def test_known_answer_ids_on_a_hand_made_corpus():
    # words ab x2, ac x2: alphabet a b c, continuations ##b ##c; the merges a+##b and a+##c tie at count 2.
    # With room for both merges (12 pieces): specials, then word-initial pieces sorted, then ## pieces sorted.
    assert ordered(train_wordpiece(["ab ab ac ac"], 12)) == SPECIAL_TOKENS + ["a", "ab", "ac", "b", "c", "##b", "##c"]
    # Room for one merge (11): the tie goes to the pair with the smaller ids, ##b before ##c (code points), so "ab",
    # in every training (HF alone numbers ##b and ##c in hash order and picks either).
    for _ in range(3):
        assert ordered(train_wordpiece(["ab ab ac ac"], 11)) == SPECIAL_TOKENS + ["a", "ab", "b", "c", "##b", "##c"]


def test_ties_give_the_same_vocabulary_and_ids_every_time():
    first = train_wordpiece(TIED, 60)
    assert len(first.get_vocab()) == 60
    for _ in range(4):
        assert train_wordpiece(TIED, 60).get_vocab() == first.get_vocab()


def test_same_ids_in_another_process():
    code = ("import itertools; from xlrepro.tokenization import train_wordpiece, vocab_fingerprint; "
            f"L = {LETTERS!r}; "
            "T = [' '.join(x + y + z for x, y in itertools.product(L, repeat=2) for z in 'xy')] * 2; "
            "print(vocab_fingerprint(train_wordpiece(T, 60)))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
           for _ in range(2)]
    assert out[0] == out[1] == vocab_fingerprint(train_wordpiece(TIED, 60)) + "\n"


def test_same_pieces_as_the_library_where_no_tie_decides():
    # words abc x6, abd x4, ce x3: every merge count differs (a+##b 10, ab+##c 6, ab+##d 4, c+##e 3), so HF's trainer
    # alone gives these pieces too; the continuation characters handed to it first take no merge's slot.
    corpus = ["abc abc abc abc abc abc abd abd abd abd ce ce ce"]
    expected = SPECIAL_TOKENS + ["a", "ab", "abc", "abd", "b", "c", "ce", "d", "e", "##b", "##c", "##d", "##e"]
    assert ordered(train_wordpiece(corpus, 18)) == expected
    hf = BertWordPieceTokenizer(strip_accents=False, lowercase=False, clean_text=False)
    hf.train_from_iterator(corpus, vocab_size=18, special_tokens=SPECIAL_TOKENS, show_progress=False)
    assert set(hf.get_vocab()) == set(expected)
    assert train_wordpiece(corpus, 18).encode("abd ce abe").tokens == hf.encode("abd ce abe").tokens == \
        ["abd", "ce", "ab", "##e"]


def test_canonical_order_and_renumber():
    assert canonical_order(["##b", "b", "[UNK]", "a", "##a", "[PAD]"], ["[PAD]", "[UNK]"]) == \
        ["[PAD]", "[UNK]", "a", "b", "##a", "##b"]
    with pytest.raises(ValueError, match=r"\[MASK\]"):
        canonical_order(["a"], ["[MASK]"])
    tok = train_wordpiece(["ab ab ac ac"], 12)
    j = json.loads(tok.to_str())
    assert [(t["content"], t["id"]) for t in j["added_tokens"]] == [(s, i) for i, s in enumerate(SPECIAL_TOKENS)]
    shuffled = dict(zip(reversed(list(j["model"]["vocab"])), range(12)))  # same pieces, other ids
    j["model"]["vocab"] = shuffled
    from tokenizers import Tokenizer
    other = Tokenizer.from_str(json.dumps(j))
    assert vocab_fingerprint(other) != vocab_fingerprint(tok)
    assert renumber(other, SPECIAL_TOKENS).get_vocab() == tok.get_vocab()


def test_fingerprint_names_pieces_with_ids():
    a = train_wordpiece(["ab ab ac ac"], 12)
    assert vocab_fingerprint(a) == vocab_fingerprint(train_wordpiece(["ab ab ac ac"], 12))
    assert len(vocab_fingerprint(a)) == 16
    assert vocab_fingerprint(a) != vocab_fingerprint(train_wordpiece(["ab ab ac ac"], 11))


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="vocab_size"):
        train_wordpiece(["a b"], 3)
    from xlrepro.tokenization import train_wordpiece_model
    with pytest.raises(ValueError, match="limit_alphabet"):
        train_wordpiece_model(bert_wordpiece(), ["a b"], 20, limit_alphabet=0)
