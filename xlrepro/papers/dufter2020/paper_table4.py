"""Dufter & Schütze's Table 4 (appendix B.2) on the paper's own resources (the paper profile): word-order distance
to English measured with the released mBERT's similarities on XNLI's parallel dev sentences.

The paper aligns 2,500 parallel XNLI dev sentences per language to English with SimAlign's Match (mutual argmax)
over mBERT's word similarities and averages Kendall's tau distance to English per language (English 1.0), which it
sets beside mBERT's XNLI zero-shot accuracy. Here: the premises of ``xnli.dev.tsv`` (parallel across languages: the
i-th premise of each language translates the i-th English one; 2,490 a language), split into words by the
encoder's own normaliser and pre-tokenizer (BERT's: whitespace and punctuation, each CJK character a word), each
word's vector the mean of its pieces' states at `layer` (default 8, SimAlign's layer for mBERT;
`xlrepro.evaluation.probe.word_features`), cosine similarities (`VectorSimilarity`), Match and the tau distance of
`xlrepro.evaluation.word_order` with the lab pass's tie-break and skip rules (`word_order.mini_mbert_table`).

The accuracies: a results file with experiment "zero-shot" and metric "accuracy" rows, such as the ``zero_shot.csv``
that Wu & Dredze's Table 3 writes in the paper profile (`xlrepro.papers.wu2019.xnli.table3`), become
``zero_shot_accuracy`` rows, as in the lab's ``table4.csv``.

Resources: the encoder ($XLREPRO_MBERT, else the hub id) and XNLI 1.0's ``xnli.dev.tsv`` ($XLREPRO_XNLI_DIR), about
18 MB with the test set (`xlrepro prepare --profile paper --only dufter2020/paper_table4.mbert_table4`).

    folder = mbert_table4(resolve_table4_paths(), accuracies="runs/wu2019/paper/<encoder>/results/zero_shot.csv")
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from xlrepro.config import ConfigError, choose
from xlrepro.paths import runs_dir
from xlrepro.resources import XNLI_LANGUAGES, locate, mbert_encoder, read_xnli

from .word_order import ACCURACY_EXPERIMENT, COLUMNS

EXPERIMENT = "mbert"  # the similarity source, as the lab's table4.csv names its "dice" and "mini-mbert" rows
LAYER = 8  # SimAlign's layer for mBERT
MAX_SENTENCES = 2500  # the paper's sentences per language
RESULTS = "table4.csv"


@dataclass(frozen=True)
class Table4Paths:
    encoder: str  # a hub id or a folder written by save_pretrained
    xnli: Path  # the folder holding xnli.dev.tsv


def resolve_table4_paths(encoder: str | os.PathLike | None = None, xnli: str | os.PathLike | None = None
                         ) -> Table4Paths:
    """The encoder ($XLREPRO_MBERT, else the hub id) and the XNLI folder (`xnli`, else $XLREPRO_XNLI_DIR or the
    prepared cache); a folder without ``xnli.dev.tsv`` raises a one-line ConfigError naming the variable."""
    folder = Path(xnli) if xnli is not None else locate("xnli")
    if folder is None or not (folder / "xnli.dev.tsv").is_file():
        where = "$XLREPRO_XNLI_DIR unset, not prepared" if folder is None else f"not in {folder}"
        raise ConfigError(f"Table 4 on mBERT needs XNLI 1.0's xnli.dev.tsv ({where}): set XLREPRO_XNLI_DIR to its "
                          f"folder, or run `xlrepro prepare --profile paper --only dufter2020/paper_table4.mbert_table4` "
                          f"on a machine with a network")
    return Table4Paths(mbert_encoder(encoder), folder)


def parallel_premises(xnli_dev: Path, languages, max_sentences: int | None = MAX_SENTENCES) -> pd.DataFrame:
    """One column a language (English first), row i the i-th premise of each: XNLI's dev set is in the same order
    in every language. The first `max_sentences` rows; languages of unequal length raise a ConfigError."""
    frame = read_xnli(xnli_dev, languages=["en", *languages])
    columns = {lang: frame.loc[frame["language"] == lang, "first"].tolist() for lang in ["en", *languages]}
    sizes = {lang: len(v) for lang, v in columns.items()}
    if len(set(sizes.values())) != 1:
        raise ConfigError(f"{xnli_dev}: the languages have different numbers of premises ({sizes}); XNLI's dev "
                          f"set is parallel")
    return pd.DataFrame(columns).head(max_sentences)


def words(tokenizer, text: str) -> list[str]:
    """The words of `text` as the encoder's fast tokenizer sees them: its normaliser, then its pre-tokenizer."""
    backend = tokenizer.backend_tokenizer
    normal = backend.normalizer.normalize_str(text) if backend.normalizer is not None else text
    return [w for w, _ in backend.pre_tokenizer.pre_tokenize_str(normal)]


def mbert_table4(paths: Table4Paths, languages=None, *, layer: int = LAYER, max_sentences: int | None = MAX_SENTENCES,
                 accuracies: str | os.PathLike | None = None, batch_size: int = 32, device=None,
                 results: str | os.PathLike | None = None) -> Path:
    """Table 4 with the encoder's similarities: rows (experiment "mbert", seed -1) kendall_tau per language (English
    1.0), verses (sentence pairs with at least 2 aligned words), skipped, aligned_pairs (mean per sentence used),
    cpu_seconds and layer; and, from `accuracies`, the zero_shot_accuracy rows of the same languages. languages:
    XNLI's targets (default all 14). Writes ``table4.csv`` into `results` (default
    ``runs/dufter2020/paper/<encoder>/results``) and returns the folder."""
    import torch

    from xlrepro.evaluation.probe import word_features
    from xlrepro.evaluation.word_order import VectorSimilarity, corpus_word_order
    from xlrepro.resources import load_encoder

    targets = [choose("XNLI language", lang, [x for x in XNLI_LANGUAGES if x != "en"])
               for lang in (languages or [x for x in XNLI_LANGUAGES if x != "en"])]
    targets = list(dict.fromkeys(targets))
    if max_sentences is not None and (not isinstance(max_sentences, int) or max_sentences < 1):
        raise ConfigError(f"max_sentences must be None or a positive integer; got {max_sentences!r}")
    acc = None
    if accuracies is not None:  # read first: a missing file stops before the pass
        from xlrepro.results import read_csv

        if not Path(accuracies).is_file():
            raise ConfigError(f"accuracies file {accuracies} does not exist: give the zero_shot.csv of Table 3 "
                              f"(xlrepro.papers.wu2019.xnli.table3), or None")
        acc = read_csv(accuracies)
        acc = acc[(acc["experiment"] == ACCURACY_EXPERIMENT) & (acc["metric"] == "accuracy")
                  & acc["language"].isin(["en", *targets])]
        acc = acc.assign(metric="zero_shot_accuracy")[COLUMNS]
    model, tokenizer = load_encoder(paths.encoder)
    depth = model.config.num_hidden_layers
    if not isinstance(layer, int) or not 0 <= layer <= depth:
        raise ConfigError(f"layer must be in 0..{depth} (0: embeddings, k: the output of layer k); got {layer!r}")
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model = model.to(device)
    premises = parallel_premises(paths.xnli / "xnli.dev.tsv", targets, max_sentences)
    backend = tokenizer.backend_tokenizer  # a tokenizers.Tokenizer, as word_features wants

    def encode(sentences):  # list of [n_words, H] per sentence (NaN rows for words without a piece)
        return word_features(model, backend, sentences, layer=layer, device=device, batch_size=batch_size,
                             max_length=model.config.max_position_embeddings)

    en_words = [words(tokenizer, t) for t in premises["en"]]
    en_vectors = encode(en_words)
    rows = [{"experiment": EXPERIMENT, "seed": -1, "language": "en", "metric": "kendall_tau", "value": 1.0}]
    for lang in targets:
        cpu = time.process_time()
        tg_words = [words(tokenizer, t) for t in premises[lang]]
        res = corpus_word_order(en_words, tg_words, VectorSimilarity(en_vectors, encode(tg_words)), "ordered")
        metrics = {"kendall_tau": res["kendall_tau"], "verses": res["sentences"], "skipped": res["skipped"],
                   "aligned_pairs": res["aligned_pairs"], "cpu_seconds": time.process_time() - cpu, "layer": layer}
        rows += [{"experiment": EXPERIMENT, "seed": -1, "language": lang, "metric": m, "value": float(v)}
                 for m, v in metrics.items()]
    table = pd.DataFrame(rows, columns=COLUMNS)
    if acc is not None:
        table = pd.concat([table, acc], ignore_index=True)
    return _write(paths, table, results)


def _write(paths: Table4Paths, table: pd.DataFrame, results) -> Path:
    import json

    from xlrepro import atomic
    from xlrepro.results import write_csv
    from xlrepro.runrecord import shown

    folder = (Path(results) if results is not None
              else runs_dir() / "dufter2020" / "paper" / Path(paths.encoder).name / "results")
    folder.mkdir(parents=True, exist_ok=True)
    profile = folder / "profile.json"
    known = json.loads(profile.read_text()) if profile.is_file() else {}
    encoder = shown(paths.encoder) if Path(paths.encoder).exists() else paths.encoder
    atomic.write_json(profile, {**known, "profile": "paper", "encoder": encoder, "table4": shown(paths.xnli)})
    write_csv(table, folder / RESULTS)
    return folder
