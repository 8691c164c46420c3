"""Loaders of the paper profile's resources: the papers' own data and the released encoders, read from local
copies in their exact upstream formats (none of them can be downloaded on an offline machine).

One module per family, each loader's docstring naming the upstream source, its URL and its format:

* `encoders`: `load_encoder(hub id or folder)`, mBERT and any ``save_pretrained`` folder;
* `nli`: `read_xnli` (XNLI 1.0 tsv) and `read_multinli` (MultiNLI jsonl);
* `ner`: `read_iob` (CoNLL 2002/2003, WikiANN), `to_iob2` and `entity_f1` (seqeval);
* `ud`: `read_conllu` (Universal Dependencies, through the `conllu` package);
* `mldoc`: `read_mldoc`;
* `dictionaries`: `read_muse_gold` (MUSE bilingual dictionaries);
* `wikipedia`: `read_wikiextractor` and `read_plain_text`;
* `bible`: the Parallel Bible Corpus reader of `xlrepro.data.bible`, re-exported.

`registry.RESOURCES` lists every resource (description, URL, size, licence, variable); `prepare` is
`xlrepro prepare --profile paper`. Loaders import their heavy libraries (transformers, conllu, seqeval) on call.
"""
from __future__ import annotations

from .bible import read_pbc
from .dictionaries import read_muse_gold
from .encoders import MBERT, load_encoder
from .mldoc import MLDOC_LABELS, read_mldoc
from .ner import TaggedSentence, entity_f1, read_iob, to_iob2
from .nli import NLI_LABELS, XNLI_LANGUAGES, read_multinli, read_xnli
from .registry import RESOURCES, Resource, chapters_needing, get_resource, locate, mbert_encoder, resources_for
from .ud import Sentence, read_conllu
from .wikipedia import Document, read_plain_text, read_wikiextractor

__all__ = ["MBERT", "MLDOC_LABELS", "NLI_LABELS", "RESOURCES", "XNLI_LANGUAGES", "Document", "Resource",
           "Sentence", "TaggedSentence", "chapters_needing", "entity_f1", "get_resource", "load_encoder", "locate", "mbert_encoder",
           "read_conllu", "read_iob", "read_mldoc", "read_multinli", "read_muse_gold", "read_pbc",
           "read_plain_text", "read_wikiextractor", "read_xnli", "resources_for", "to_iob2"]
