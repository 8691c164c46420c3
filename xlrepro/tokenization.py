"""WordPiece vocabularies (HF `tokenizers`), trained deterministically and numbered canonically.

HF's WordPiece trainer (a BPE trainer underneath) breaks ties between equally frequent merges by the ids of the pair's
pieces, and it numbers the continuation characters (`##a`, `##b`, ...) in the iteration order of a Rust `HashMap`,
which is seeded at random in every process and for every map. So two trainings on one corpus give different ids
(92 to 534 of the 2,048 ids of a vocabulary of the English Bible changed between two trainings) and, where a tie
falls at the cut-off, a few different pieces (up to 5 of 2,048). `train_wordpiece_model` removes both:

1. the alphabet is chosen here (the `limit_alphabet` most frequent characters, ties by code point) and handed to the
   trainer as its initial alphabet, so no tie decides which characters are kept;
2. the continuation characters the trainer would create (every kept character that occurs after the first position of
   a word) are handed to it first, in code-point order, among the special tokens: the trainer then numbers them in that
   order, and its tie-break (smaller pair ids first) no longer depends on the hash seed. They take the same slots of
   the vocabulary the trainer gives them anyway, so the budget of merges is unchanged; they are removed from the
   special tokens afterwards;
3. the trained vocabulary is renumbered canonically (`canonical_order`): the special tokens first, in their given
   order, then the word-initial pieces, then the `##` continuation pieces, each sorted by string (code points).

WordPiece segmentation is a greedy longest match over the vocabulary *set*, so ids never change how text is cut; they
change which embedding row a piece gets, which is why a model must be read with the vocabulary it was trained with:
`vocab_fingerprint` names a vocabulary (pieces with their ids) so that a run can record and check it.
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Iterable, Sequence

from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

# Special tokens as in bert-base-multilingual-cased (names); a trained vocabulary gives them ids 0..4.
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PREFIX = "##"
FINGERPRINT_LENGTH = 16  # hex digits of sha256


def canonical_order(pieces: Iterable[str], specials: Sequence[str], prefix: str = PREFIX) -> list[str]:
    """The canonical id order of a vocabulary: `specials` in their order, then the other pieces sorted by
    (is a continuation piece, string), strings compared by code point."""
    pieces = list(pieces)
    missing = [s for s in specials if s not in pieces]
    if missing:
        raise ValueError(f"special tokens {missing} are not in the vocabulary")
    rest = set(pieces) - set(specials)
    return list(specials) + sorted(rest, key=lambda p: (p.startswith(prefix), p))


def renumber(tokenizer: Tokenizer, specials: Sequence[str]) -> Tokenizer:
    """A copy of a WordPiece `tokenizer` with canonical ids (`canonical_order`); the same pieces and settings.

    Added tokens other than `specials` are dropped (the training helper's continuation characters); a post-processor
    holding ids would go stale, so none is allowed here (set it after renumbering)."""
    j = json.loads(tokenizer.to_str())
    if j["model"]["type"] != "WordPiece":
        raise ValueError(f"renumber expects a WordPiece model; got {j['model']['type']}")
    if j.get("post_processor") is not None:
        raise ValueError("renumber a tokenizer before setting its post-processor (it holds token ids)")
    prefix = j["model"].get("continuing_subword_prefix", PREFIX)
    order = canonical_order(j["model"]["vocab"], specials, prefix)
    j["model"]["vocab"] = {p: i for i, p in enumerate(order)}
    added = {t["content"]: t for t in j.get("added_tokens", [])}
    j["added_tokens"] = [{**added[s], "id": i} for i, s in enumerate(specials) if s in added]
    return Tokenizer.from_str(json.dumps(j, ensure_ascii=False))


def _words(tokenizer: Tokenizer, texts: Sequence[str]) -> Counter:
    """Word counts as the trainer sees them (the tokenizer's normalizer and pre-tokenizer)."""
    norm, pre = tokenizer.normalizer, tokenizer.pre_tokenizer
    words: Counter = Counter()
    for t in texts:
        t = norm.normalize_str(t) if norm is not None else t
        words.update(w for w, _ in pre.pre_tokenize_str(t)) if pre is not None else words.update([t])
    return words


def train_wordpiece_model(tokenizer: Tokenizer, texts: Iterable[str], vocab_size: int,
                          specials: Sequence[str] = SPECIAL_TOKENS, *, min_frequency: int = 2,
                          limit_alphabet: int | None = 1000) -> Tokenizer:
    """Train the WordPiece model of `tokenizer` (a `models.WordPiece` with its normalizer and pre-tokenizer) on
    `texts` with HF's `WordPieceTrainer`, deterministically (see the module's docstring), and return a new tokenizer
    with canonical ids. The defaults are those of HF's `BertWordPieceTokenizer.train_from_iterator`."""
    if not isinstance(vocab_size, int) or vocab_size < len(specials) + 1:
        raise ValueError(f"vocab_size must be an integer above the {len(specials)} special tokens; got {vocab_size!r}")
    if limit_alphabet is not None and (not isinstance(limit_alphabet, int) or limit_alphabet < 1):
        raise ValueError(f"limit_alphabet must be None or a positive integer; got {limit_alphabet!r}")
    if len(set(specials)) != len(specials):
        raise ValueError(f"special tokens repeat: {list(specials)}")
    texts = list(texts)
    words = _words(tokenizer, texts)
    chars: Counter = Counter()
    for w, n in words.items():
        for c in w:
            chars[c] += n
    # 1. the alphabet: the most frequent characters, ties by code point (HF breaks them by hash order)
    alphabet = sorted(chars, key=lambda c: (-chars[c], c))[:limit_alphabet]
    kept = set(alphabet)
    # 2. the continuation characters the trainer would create, numbered by us (code-point order)
    continuations = [PREFIX + c for c in sorted({c for w in words for c in w[1:] if c in kept})]
    clash = [c for c in continuations if c in specials]
    if clash:
        raise ValueError(f"special tokens {clash} look like continuation pieces")
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, show_progress=False,
        special_tokens=list(specials) + continuations, limit_alphabet=len(alphabet), initial_alphabet=alphabet,
        continuing_subword_prefix=PREFIX)
    tok = Tokenizer.from_str(tokenizer.to_str())  # train a copy: the caller's tokenizer stays untrained
    tok.train_from_iterator(texts, trainer)
    # 3. canonical ids; the continuation characters stop being special tokens
    return renumber(tok, specials)


def bert_wordpiece(lowercase: bool = False, strip_accents: bool = False, clean_text: bool = False) -> Tokenizer:
    """An untrained tokenizer set up as HF's `BertWordPieceTokenizer` (normalizer, pre-tokenizer, decoder)."""
    from tokenizers import decoders
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", continuing_subword_prefix=PREFIX))
    tok.normalizer = normalizers.BertNormalizer(clean_text=clean_text, handle_chinese_chars=True,
                                                strip_accents=strip_accents, lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix=PREFIX)
    return tok


def train_wordpiece(sentences: list[str], vocab_size: int = 2048) -> Tokenizer:
    """Train a cased WordPiece vocabulary as the authors did (no accent stripping, no lowercasing, no cleaning),
    deterministically and with canonical ids (`train_wordpiece_model`)."""
    return train_wordpiece_model(bert_wordpiece(), sentences, vocab_size, SPECIAL_TOKENS)


def vocab_fingerprint(tokenizer: Tokenizer) -> str:
    """A short sha256 of a vocabulary: its pieces with their ids (added tokens included)."""
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    text = json.dumps(sorted((i, p) for p, i in vocab.items()), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:FINGERPRINT_LENGTH]
