"""Pretrained encoders (the released mBERT and its kin), loaded with Hugging Face `transformers`.

Upstream: Devlin et al.'s multilingual BERT, published on the Hugging Face hub as
``google-bert/bert-base-multilingual-cased`` (https://huggingface.co/google-bert/bert-base-multilingual-cased):
a ``config.json``, the weights (``model.safetensors``), and the WordPiece tokenizer (``vocab.txt``,
``tokenizer.json``, ``tokenizer_config.json``). Any folder written by ``save_pretrained`` has the same layout, so a
local copy (or the tiny stand-in of the tests) loads the same way.

    encoder, tokenizer = load_encoder("google-bert/bert-base-multilingual-cased")   # hub id, or:
    encoder, tokenizer = load_encoder("/data/mbert")                              # a local folder
"""
from __future__ import annotations

import os
from pathlib import Path

from ..config import ConfigError

#: The released mBERT's hub id (the paper profile's default encoder).
MBERT = "google-bert/bert-base-multilingual-cased"
#: The files a hub snapshot of an encoder needs (not the TensorFlow, Flax or .bin copies of the weights).
ENCODER_FILES = ("config.json", "model.safetensors", "vocab.txt", "tokenizer.json", "tokenizer_config.json",
                 "special_tokens_map.json")


def hub_offline() -> bool:
    """True where the hub must not be reached (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE set to a true value)."""
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
               for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def load_encoder(name_or_path: str | os.PathLike):
    """(encoder, tokenizer) from a local folder written by ``save_pretrained`` or a hub id such as
    ``google-bert/bert-base-multilingual-cased``, via ``AutoModel`` and ``AutoTokenizer.from_pretrained``.

    The tokenizer is the fast one (its ``backend_tokenizer`` is a `tokenizers.Tokenizer` whose post-processor adds
    [CLS] and [SEP], as `xlrepro.training.finetune.encode_pairs` expects). A path that does not exist and does not
    look like a hub id, or a hub id that is not in the local cache while the hub cannot be reached, raises a
    one-line ConfigError that names it and the two fixes (a network, or a local folder)."""
    from transformers import AutoModel, AutoTokenizer

    name = os.fspath(name_or_path)
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"an encoder is a hub id (e.g. {MBERT}) or a local folder; got {name_or_path!r}")
    local = Path(name).expanduser()
    if local.exists():
        if not (local / "config.json").is_file():
            raise ConfigError(f"encoder folder {local} has no config.json: give a folder written by save_pretrained "
                              f"or a hub id (e.g. {MBERT})")
        name = str(local)
    elif name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise ConfigError(f"encoder folder {name} does not exist: give a folder written by save_pretrained or a hub "
                          f"id (e.g. {MBERT})")
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, use_fast=True)
        encoder = AutoModel.from_pretrained(name)
    except OSError as exc:  # transformers raises OSError for a repository it can neither find nor download
        if local.exists():
            raise ConfigError(f"encoder folder {local} cannot be read: {str(exc).splitlines()[0]}") from None
        raise ConfigError(
            f"encoder {name!r} is not in the local hub cache and cannot be downloaded "
            f"({'HF_HUB_OFFLINE is set' if hub_offline() else 'no network or no such repository'}): "
            f"on a machine with a network, unset HF_HUB_OFFLINE and run `xlrepro prepare --profile paper`, "
            f"or pass the path of a local copy (a folder written by save_pretrained)") from None
    if not getattr(tokenizer, "is_fast", False):
        raise ConfigError(f"encoder {name!r} has no fast tokenizer (tokenizer.json); the fine-tuning code needs one")
    return encoder, tokenizer
