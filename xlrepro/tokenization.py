"""WordPiece vocabularies (HF `tokenizers`)."""
from __future__ import annotations

from tokenizers import BertWordPieceTokenizer, Tokenizer

# Special tokens as in bert-base-multilingual-cased (names); with a freshly trained vocabulary they get ids 0..4.
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def train_wordpiece(sentences: list[str], vocab_size: int = 2048) -> Tokenizer:
    """Train a cased WordPiece vocabulary as the authors did (no accent stripping, no lowercasing, no cleaning)."""
    tok = BertWordPieceTokenizer(strip_accents=False, lowercase=False, clean_text=False)
    tok.train_from_iterator(sentences, vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False)
    return tok._tokenizer
