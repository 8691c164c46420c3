"""Turn English word-piece ids into the bilingual (English + Fake-English) inputs of one experiment.

Every modification of Dufter & Schütze §2.3–2.4 that changes the model's input lives here:
shift-special (specials shifted too), lang-pos (Fake-English positions start at `max_length`, token type 1),
inv-order (Fake-English word pieces reversed), no-parallel (English from the first half, Fake-English from the
second half of the corpus). The result is a padded array that the trainer keeps on the GPU.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xlrepro.data.collate import pad_batch

from .config import Experiment
from .fake_english import FakeEnglish


@dataclass
class BilingualSet:
    """Sentences as rows `[CLS] pieces [SEP] [PAD]...`, with a language flag (1 = Fake-English) per row."""

    ids: np.ndarray  # [N, width] int64
    lengths: np.ndarray  # [N] including [CLS] and [SEP]
    fake: np.ndarray  # [N] bool
    pad_id: int
    max_length: int  # position offset of Fake-English under lang-pos
    lang_pos: bool

    def __len__(self) -> int:
        return len(self.lengths)

    def position_ids(self, rows: np.ndarray) -> np.ndarray:
        width = self.ids.shape[1]
        pos = np.broadcast_to(np.arange(width), (len(rows), width)).copy()
        if self.lang_pos:
            pos[self.fake[rows]] += self.max_length
        return pos

    def token_type_ids(self, rows: np.ndarray) -> np.ndarray:
        width = self.ids.shape[1]
        return np.repeat((self.fake[rows] & self.lang_pos).astype(np.int64)[:, None], width, axis=1)


def fake_sentence(fe: FakeEnglish, pieces: np.ndarray, exp: Experiment) -> np.ndarray:
    """`[CLS] pieces [SEP]` in Fake-English for this experiment."""
    body = pieces[::-1] if exp.inv_order else pieces
    return fe.to_fake(np.concatenate([[fe.cls], body, [fe.sep]]), shift_special=exp.shift_special)


def english_sentence(fe: FakeEnglish, pieces: np.ndarray) -> np.ndarray:
    return np.concatenate([[fe.cls], pieces, [fe.sep]])


def no_parallel_halves(n: int) -> tuple[slice, slice]:
    """English uses the first half of the corpus, Fake-English the second (no sentence in both languages)."""
    return slice(0, n // 2), slice(n // 2, n)


def build_bilingual(fe: FakeEnglish, pieces: list[np.ndarray], exp: Experiment, max_length: int,
                    parallel_only: bool = False) -> BilingualSet:
    """The training (or evaluation) set of one experiment: English rows first, then Fake-English rows.

    `parallel_only` ignores no-parallel (evaluation always uses the parallel dev corpus).
    """
    if exp.no_parallel and not parallel_only:
        en_part, fake_part = no_parallel_halves(len(pieces))
    else:
        en_part = fake_part = slice(0, len(pieces))
    rows = [english_sentence(fe, p) for p in pieces[en_part]] + [fake_sentence(fe, p, exp) for p in pieces[fake_part]]
    fake = np.array([False] * len(pieces[en_part]) + [True] * len(pieces[fake_part]))
    return pad_rows(rows, fake, fe.pad, max_length, exp.lang_pos)


def pad_rows(rows: list[np.ndarray], fake: np.ndarray, pad_id: int, max_length: int, lang_pos: bool) -> BilingualSet:
    ids, lengths = pad_batch(rows, pad_id)
    if lengths.max() > max_length:
        raise ValueError(f"a sentence has {lengths.max()} pieces with specials; the maximum is {max_length}")
    return BilingualSet(ids=ids, lengths=lengths, fake=fake, pad_id=pad_id, max_length=max_length, lang_pos=lang_pos)
