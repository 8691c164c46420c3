"""Fake-English by shifting token ids (Dufter & Schütze §2.1, Figure 2).

Tokenize English, then add `shift` (= the vocabulary size of one language) to every id; the model's vocabulary is
doubled. Special tokens keep their ids unless shift-special is on. Shifted tokens are displayed with a `::` prefix;
the prefix is for display only.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tokenizers import Tokenizer

from ...tokenization import SPECIAL_TOKENS

FAKE_PREFIX = "::"


@dataclass
class FakeEnglish:
    """A WordPiece tokenizer plus its shifted twin: ids [0, shift) are English, [shift, 2*shift) Fake-English."""

    tokenizer: Tokenizer
    shift: int

    def __post_init__(self):
        size = self.tokenizer.get_vocab_size()
        if size > self.shift:
            raise ValueError(f"vocabulary of {size} pieces does not fit under the shift {self.shift}")
        self.pad, self.unk, self.cls, self.sep, self.mask = (self.tokenizer.token_to_id(t) for t in SPECIAL_TOKENS)
        self.special_ids = np.array([self.pad, self.unk, self.cls, self.sep, self.mask])

    @property
    def vocab_size(self) -> int:
        """Size of the doubled vocabulary (English + Fake-English)."""
        return 2 * self.shift

    def encode(self, sentences: list[str], max_pieces: int) -> list[np.ndarray]:
        """English word-piece ids without [CLS]/[SEP], truncated to `max_pieces`."""
        enc = self.tokenizer.encode_batch(sentences, add_special_tokens=False)
        return [np.asarray(e.ids[:max_pieces], dtype=np.int64) for e in enc]

    def to_fake(self, ids: np.ndarray, shift_special: bool = False) -> np.ndarray:
        """Shift ids into Fake-English. Special tokens are shifted only with shift-special."""
        ids = np.asarray(ids)
        move = np.ones_like(ids, dtype=bool) if shift_special else ~np.isin(ids, self.special_ids)
        return np.where(move, ids + self.shift, ids)

    def to_english(self, ids: np.ndarray) -> np.ndarray:
        """Inverse of `to_fake` (for either setting of shift-special)."""
        ids = np.asarray(ids)
        return np.where(ids >= self.shift, ids - self.shift, ids)

    def display(self, ids) -> list[str]:
        """Token strings, Fake-English ones with the `::` prefix."""
        return [(FAKE_PREFIX if i >= self.shift else "") + self.tokenizer.id_to_token(int(i) % self.shift) for i in ids]
