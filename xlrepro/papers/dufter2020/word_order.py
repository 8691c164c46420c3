"""Table 4 (appendix B.2): word-order distance to English against zero-shot transfer, on the lab's Bible.

The paper aligns 2,500 parallel XNLI dev sentences per language with SimAlign's Match over mBERT similarities, averages
Kendall's tau distance to English per language and correlates it (Pearson) with mBERT's XNLI zero-shot accuracy.
Ours: the same Match and distance (`xlrepro.evaluation.word_order`) on 2,500 dev verses that every language of the lab
holds (one seeded sample, the same verses for every language, as XNLI's dev set is), with similarities that need no
neural model: the Dice association of word co-occurrence over the train-split parallel verses of English and that
language (experiment ``dice``). The accuracies are mini-mBERT's zero-shot accuracies on the verse-pair section task,
the XNLI stand-in of the Wu & Dredze chapter (``book/results/wu2019/zero_shot.csv``: experiment ``zero-shot``, metric
``accuracy``, one row per seed), under the metric ``zero_shot_accuracy`` and the experiment ``zero-shot``.

``table4.csv`` (long: experiment, seed, language, metric, value) holds, for the similarity source ``dice`` (seed -1:
deterministic), one row per language and metric ``kendall_tau`` (English 1.0 by definition, as in the paper),
``verses`` (verse pairs with at least 2 aligned words), ``skipped`` (the others), ``aligned_pairs`` (mean per verse)
and ``cpu_seconds`` (the CPU time of that language's pass); the same rows under ``dice-unordered-ties`` (the
tie-break "none" of `aligned_word_order`: repeated words paired as scipy happens to pair them), which shows how much
that convention moves the distances; and the zero-shot accuracies.

The similarity source ``mini-mbert`` (closer to the paper, which uses mBERT) adds the same rows under the experiment
``mini-mbert``, plus ``layer``: word similarities are cosines of mini-mBERT's hidden states at its middle layer
(``depth // 2``: the output of transformer layer 2 of 4 for the published model), each word's pieces mean-pooled
(`xlrepro.evaluation.probe.word_features`). The words are exactly those the Dice variant aligns (`words`: the lab's
tokenisation, lower-cased), encoded pre-split, so each piece belongs to one word (mini-mBERT's vocabulary is cased:
capitalised words, sentence-initial ones and names, are read lower-cased as the Dice variant counts them). Same 2,500
dev verses, same Match, τ distance, tie-break ("ordered": contextual vectors seldom tie) and skip rules; a matched pair
of cosine <= 0 is dropped as a Dice-0 pair is. mini-mBERT's weights exist only where it was pretrained (a GPU node),
so this pass runs there (``xlrepro train dufter2020 --part table4``, which writes its rows into table4.csv; a CSV
made on another machine is merged with ``--merge``). Writing to a table4.csv keeps the rows of the experiments the run does not make, so each source's rows
stay beside the others; the claim ``word_order_correlates`` reads the ``dice`` rows only (its selectors name the
experiment).

    python -m xlrepro.papers.dufter2020.word_order            # Dice: writes book/results/dufter2020/table4.csv
    python -m xlrepro.papers.dufter2020.word_order --similarity mini-mbert --out runs/table4_mini_mbert.csv  # GPU node
    python -m xlrepro.papers.dufter2020.word_order --merge runs/table4_mini_mbert.csv   # its rows into table4.csv
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from xlrepro.data.multilingual import LANGUAGES, SPLITS, check_language, load_parallel, lowercase, tokenize
from xlrepro.evaluation.word_order import TIE_BREAKS, DiceSimilarity, corpus_word_order
from xlrepro.paths import repo_root

EXPERIMENT = "dice"
MINI_MBERT = "mini-mbert"
SIMILARITIES = (EXPERIMENT, MINI_MBERT)  # --similarity: the source of the word similarities, one experiment each
PRETRAIN_COMMAND = "xlrepro pretrain mini-mbert"
ACCURACY_EXPERIMENT = "zero-shot"
MAX_VERSES = 2500  # the paper's number of XNLI dev sentences per language
SAMPLE_SEED = 0
DEFAULT_OUT = Path("book/results/dufter2020/table4.csv")
ZERO_SHOT_CSV = Path("book/results/wu2019/zero_shot.csv")
TARGETS = tuple(lang for lang in LANGUAGES if lang != "en")
COLUMNS = ["experiment", "seed", "language", "metric", "value"]


def words(text: str, lang: str) -> list[str]:
    """A verse's lower-cased words as the lab counts them (`multilingual.tokenize`: whitespace words with the
    punctuation stripped; characters for zh and ja)."""
    return tokenize(lowercase(text, lang), lang)


def check_options(languages: Sequence[str], split: str, max_verses: int | None, tie_break: str) -> list[str]:
    """Every option checked before any work; returns the target languages (English left out: it is 1.0 by
    definition)."""
    langs = [check_language(lang) for lang in languages]
    if not langs:
        raise ValueError(f"need at least one language; choices: {', '.join(LANGUAGES)}")
    if split not in SPLITS or split == "train":
        raise ValueError(f"split must be one of {', '.join(s for s in SPLITS if s != 'train')} (the Dice counts use "
                         f"train); got {split!r}")
    if max_verses is not None and (not isinstance(max_verses, int) or max_verses < 1):
        raise ValueError(f"max_verses must be a positive integer or None; got {max_verses!r}")
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {', '.join(TIE_BREAKS)}; got {tie_break!r}")
    return [lang for lang in dict.fromkeys(langs) if lang != "en"]


def evaluation_verses(split: str = "dev", max_verses: int | None = MAX_VERSES, seed: int = SAMPLE_SEED,
                      cache_dir=None, common: Sequence[str] = LANGUAGES) -> pd.DataFrame:
    """The verses every language of `common` (default: all of the lab's, the published table's) holds in `split` (one
    text column per language), at most `max_verses` of them drawn with `seed`, in canonical order: the same verses
    for every language. A smaller `common` is for smoke runs on a cache that lacks some languages."""
    verses = load_parallel(list(common), split, cache_dir)
    if max_verses is not None and len(verses) > max_verses:
        verses = verses.sample(n=max_verses, random_state=seed).sort_index()
    return verses


def language_word_order(lang: str, verses: pd.DataFrame, tie_breaks: Sequence[str] = ("ordered",),
                        train_verses: int | None = None, english_train: pd.Series | None = None, cache_dir=None,
                        progress: bool = False) -> dict[str, dict]:
    """One target language's pass: Dice counts over the train-split parallel verses of English and `lang` (the first
    `train_verses` of them when given: smoke runs), then Match and Kendall's tau distance on `verses`, once per
    tie-break (the similarities are computed once). `english_train`: the English train verses' words by verse (from
    `english_train_words`), so that English is tokenised once for all languages. Returns {tie_break: result} with
    `corpus_word_order`'s keys and ``cpu_seconds`` (the language's whole pass, the same for every tie-break)."""
    start = time.process_time()
    en_eval = [words(t, "en") for t in verses["en"]]
    tg_eval = [words(t, lang) for t in verses[lang]]
    train = load_parallel(["en", lang], "train", cache_dir)
    if train_verses is not None:
        train = train.iloc[:train_verses]
    en_train = (english_train.reindex(train.index) if english_train is not None
                else pd.Series([words(t, "en") for t in train["en"]], index=train.index))
    dice = DiceSimilarity(list(en_train), [words(t, lang) for t in train[lang]],
                          source_vocabulary={w for s in en_eval for w in s},
                          target_vocabulary={w for s in tg_eval for w in s})
    out = {tb: corpus_word_order(en_eval, tg_eval, dice, tie_break=tb, progress=progress) for tb in tie_breaks}
    cpu = time.process_time() - start
    return {tb: {**res, "cpu_seconds": cpu} for tb, res in out.items()}


def english_train_words(cache_dir=None) -> pd.Series:
    """The English train verses' words, indexed by (book, chapter, verse)."""
    en = load_parallel(["en"], "train", cache_dir)["en"]
    return pd.Series([words(t, "en") for t in en], index=en.index)


def check_encoder(encoder_dir: str | Path | None = None) -> Path:
    """The folder of a finished mini-mBERT (default: the published one's, `MiniMBertConfig().default_dir()`);
    FileNotFoundError naming the command that trains it where it is not there."""
    from xlrepro.training.mini_mbert import MiniMBertConfig
    path = Path(encoder_dir) if encoder_dir is not None else MiniMBertConfig().default_dir()
    if not (path / "training.json").exists():
        raise FileNotFoundError(f"no finished mini-mBERT in {path}: train it first with `{PRETRAIN_COMMAND}` (GPU, "
                                "about 7.3 minutes on an H200), or pass --encoder DIR")
    return path


def middle_layer(depth: int) -> int:
    """The hidden-state index of the middle layer: depth // 2 (0 is the embedding output, k layer k's output)."""
    return depth // 2


def mini_mbert_table(languages: Sequence[str] = TARGETS, split: str = "dev", max_verses: int | None = MAX_VERSES,
                     encoder_dir: str | Path | None = None, device: str | None = None, layer: int | None = None,
                     common: Sequence[str] = LANGUAGES, batch_size: int = 64, cache_dir=None,
                     progress: bool = True) -> pd.DataFrame:
    """Table 4's ``mini-mbert`` rows: for each target language, Match over the cosines of mini-mBERT's word vectors
    at `layer` (default: `middle_layer`), on the same verses and words as the Dice pass (see the module's docstring).
    Rows: English's kendall_tau 1.0, and per target kendall_tau, verses, skipped, aligned_pairs, cpu_seconds,
    seconds (wall: the encoding runs on `device`) and layer."""
    import torch
    from tqdm.auto import tqdm

    from xlrepro.evaluation.probe import word_features
    from xlrepro.evaluation.word_order import VectorSimilarity
    from xlrepro.training.mini_mbert import load_mini_mbert

    targets = check_options(languages, split, max_verses, "ordered")
    for lang in ["en", *targets]:
        if lang not in common:
            raise ValueError(f"{lang} is not among the common languages {', '.join(common)}")
    path = check_encoder(encoder_dir)
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model, tokenizer = load_mini_mbert(path)
    depth = model.config.num_hidden_layers
    layer = middle_layer(depth) if layer is None else layer
    if not 0 <= layer <= depth:
        raise ValueError(f"layer must be in 0..{depth}; got {layer}")
    model = model.to(device)
    verses = evaluation_verses(split, max_verses, cache_dir=cache_dir, common=common)
    en_words = [words(t, "en") for t in verses["en"]]
    # verses up to the length mini-mBERT was pretrained on (its position table: 128 pieces for the published model)
    encode = lambda ws: word_features(model, tokenizer, ws, layer=layer, device=device, batch_size=batch_size,
                                      max_length=model.config.max_position_embeddings)
    en_vectors = encode(en_words)
    rows = [{"experiment": MINI_MBERT, "seed": -1, "language": "en", "metric": "kendall_tau", "value": 1.0}]
    bar = tqdm(targets, desc="Table 4 languages (mini-mBERT)", disable=not progress)
    for lang in bar:
        bar.set_postfix_str(lang)
        start, cpu = time.time(), time.process_time()
        tg_words = [words(t, lang) for t in verses[lang]]
        res = corpus_word_order(en_words, tg_words, VectorSimilarity(en_vectors, encode(tg_words)), "ordered")
        metrics = {"kendall_tau": res["kendall_tau"], "verses": res["sentences"], "skipped": res["skipped"],
                   "aligned_pairs": res["aligned_pairs"], "cpu_seconds": time.process_time() - cpu,
                   "seconds": time.time() - start, "layer": layer}
        rows += [{"experiment": MINI_MBERT, "seed": -1, "language": lang, "metric": m, "value": float(v)}
                 for m, v in metrics.items()]
    return pd.DataFrame(rows, columns=COLUMNS)


def merge_into(table: pd.DataFrame, path: str | Path) -> Path:
    """Write `table` to `path`, keeping the rows of `path` whose experiment `table` does not hold (so the Dice rows
    and the mini-mBERT rows stay side by side, each rewritten only by its own pass); checked with `claim_frame`."""
    from xlrepro.results import read_csv, write_csv
    path = Path(path)
    if path.exists():
        old = read_csv(path)
        table = pd.concat([old[~old["experiment"].isin(set(table["experiment"]))], table], ignore_index=True)
    return write_csv(claim_frame(table[COLUMNS]), path)


def accuracy_rows(path: str | Path | None = None) -> pd.DataFrame:
    """The zero-shot accuracies of the Wu & Dredze chapter (`zero_shot.csv`: experiment zero-shot, metric accuracy,
    one row per seed; English is its own test accuracy) as Table 4's ``zero_shot_accuracy`` rows."""
    from xlrepro.results import read_csv
    path = Path(path) if path is not None else repo_root() / ZERO_SHOT_CSV
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: the Wu & Dredze zero-shot results (run the wu2019 transfer "
                                "chapter) are needed for Table 4's accuracies")
    df = read_csv(path)
    df = df[(df["experiment"] == ACCURACY_EXPERIMENT) & (df["metric"] == "accuracy")]
    return df.assign(metric="zero_shot_accuracy")[COLUMNS].reset_index(drop=True)


# The experiment of each tie-break: "ordered" is the table's; "none" shows how much the convention moves it.
EXPERIMENTS = {"ordered": EXPERIMENT, "none": "dice-unordered-ties"}


def table4(languages: Sequence[str] = TARGETS, split: str = "dev", max_verses: int | None = MAX_VERSES,
           tie_breaks: Sequence[str] = TIE_BREAKS, train_verses: int | None = None,
           accuracies: str | Path | None = None, cache_dir=None, progress: bool = True) -> pd.DataFrame:
    """Table 4 as a long frame: the Dice word-order rows of every language (English 1.0), one experiment per
    tie-break (`EXPERIMENTS`), and the zero-shot accuracies of those languages. See the module's docstring."""
    tie_breaks = list(dict.fromkeys(tie_breaks))
    if not tie_breaks:
        raise ValueError(f"need at least one tie-break; choices: {', '.join(TIE_BREAKS)}")
    targets = [check_options(languages, split, max_verses, tb) for tb in tie_breaks][0]
    acc = accuracy_rows(accuracies)  # read first: a missing file stops before the pass
    verses = evaluation_verses(split, max_verses, cache_dir=cache_dir)
    english = english_train_words(cache_dir)
    rows = [{"experiment": EXPERIMENTS[tb], "seed": -1, "language": "en", "metric": "kendall_tau", "value": 1.0}
            for tb in tie_breaks]
    from tqdm.auto import tqdm
    bar = tqdm(targets, desc="Table 4 languages", disable=not progress)
    for lang in bar:
        bar.set_postfix_str(lang)
        res = language_word_order(lang, verses, tie_breaks, train_verses, english, cache_dir)
        rows += [{"experiment": EXPERIMENTS[tb], "seed": -1, "language": lang, "metric": m, "value": float(r[k])}
                 for tb, r in res.items()
                 for m, k in (("kendall_tau", "kendall_tau"), ("verses", "sentences"), ("skipped", "skipped"),
                              ("aligned_pairs", "aligned_pairs"), ("cpu_seconds", "cpu_seconds"))]
    ours = pd.DataFrame(rows, columns=COLUMNS)
    acc = acc[acc["language"].isin(["en", *targets])]
    return pd.concat([ours, acc], ignore_index=True)


def claim_frame(table: pd.DataFrame) -> pd.DataFrame:
    """The rows the claims read as ``table4``: every row (the claim's selectors pick the ``dice`` experiment);
    checked to hold one ``kendall_tau`` per language and similarity source, so sources are never averaged together."""
    tau = table[table["metric"] == "kendall_tau"]
    dup = tau.groupby(["experiment", "language"]).size()
    if (dup > 1).any():
        raise ValueError(f"table4 has several kendall_tau rows for {', '.join(map(str, dup[dup > 1].index))}")
    return table


def read_table4(results) -> pd.DataFrame | None:
    """`table4.csv` of a results folder, None when absent."""
    from xlrepro.results import read_csv
    path = Path(results) / "table4.csv"
    return read_csv(path) if path.exists() else None


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m xlrepro.papers.dufter2020.word_order`: Table 4's rows of one similarity source, written into --out
    beside the rows of the other sources (or, with --merge, another run's rows merged into --out)."""
    from xlrepro.results import read_csv
    p = argparse.ArgumentParser(prog="python -m xlrepro.papers.dufter2020.word_order", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--similarity", default=EXPERIMENT,
                   help=f"the word similarities: {', '.join(SIMILARITIES)} (default: %(default)s)")
    p.add_argument("--out", default=str(DEFAULT_OUT), help="CSV to write (default: %(default)s)")
    p.add_argument("--languages", nargs="+", default=list(TARGETS), choices=LANGUAGES)
    p.add_argument("--split", default="dev", choices=[s for s in SPLITS if s != "train"])
    p.add_argument("--max-verses", type=int, default=MAX_VERSES, help="verses per language (default: %(default)s)")
    p.add_argument("--tie-breaks", nargs="+", default=list(TIE_BREAKS), choices=TIE_BREAKS,
                   help="dice only: equal-weight matchings of repeated words, one experiment each")
    p.add_argument("--train-verses", type=int, help="dice only: the first N train verse pairs (smoke runs)")
    p.add_argument("--encoder", help="mini-mbert only: a finished mini-mBERT's folder (default: the published one "
                   f"in the cache, trained by `{PRETRAIN_COMMAND}`)")
    p.add_argument("--device", help="mini-mbert only: default cuda if available, else cpu")
    p.add_argument("--common-languages", nargs="+", default=list(LANGUAGES), choices=LANGUAGES,
                   help="mini-mbert only: the languages whose common verses are sampled (default: all 22, as the "
                        "published table; fewer for a smoke run on a partial cache)")
    p.add_argument("--merge", metavar="CSV", help="no pass: merge this CSV's rows (e.g. a GPU node's mini-mbert "
                   "rows) into --out, replacing --out's rows of the experiments it holds")
    a = p.parse_args(argv)
    if a.similarity not in SIMILARITIES:
        p.error(f"--similarity must be one of {', '.join(SIMILARITIES)}; got {a.similarity!r}")
    if a.max_verses < 1:
        p.error(f"--max-verses must be a positive integer; got {a.max_verses}")
    if a.merge is not None:
        if not Path(a.merge).exists():
            p.error(f"--merge: {a.merge} not found")
        print("wrote", merge_into(claim_frame(read_csv(a.merge)), a.out))
        return
    start, cpu = time.time(), time.process_time()
    if a.similarity == MINI_MBERT:
        try:
            check_encoder(a.encoder)  # before any data is read
        except FileNotFoundError as exc:
            p.error(str(exc))
        table = mini_mbert_table(a.languages, a.split, a.max_verses, a.encoder, a.device, common=a.common_languages)
    else:
        table = table4(a.languages, a.split, a.max_verses, a.tie_breaks, a.train_verses)
    tau = table[table["metric"] == "kendall_tau"].pivot(index="language", columns="experiment", values="value")
    acc = table[table["metric"] == "zero_shot_accuracy"].groupby("language")["value"].mean()
    with pd.option_context("display.width", 200, "display.max_rows", 100):
        print(tau.assign(zero_shot_accuracy=acc).round(3) if len(acc) else tau.round(3))
    print(f"wall {time.time() - start:.1f} s, CPU {time.process_time() - cpu:.1f} s")
    print("wrote", merge_into(table, a.out))

if __name__ == "__main__":
    main()
