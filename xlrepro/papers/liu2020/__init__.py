"""Liu, Hsu, Chuang & Lee 2020, "What makes multilingual BERT multilingual?" (short version S, arXiv 2010.10938)
and its long version L ("A Study of Cross-Lingual Ability and Language-specific Information in Multilingual BERT").

``reference.csv`` (the paper's numbers, read by `xlrepro.reference.paper_numbers`), columns
    table, version, experiment, description, language, metric, mean, std, note
    - ``version`` says which text a table comes from: "S" (short) or "L" (long); "Table 1" is S's MRR by part of
      speech (L's Table 1 holds sample sentences, no numbers).
    - S Table 1: ``mrr`` per language (de es ar fr ru tr, ``avg``), experiment ``BERT-1000k/<class>``, class in
      closed, open, noun, verb, adv, adj.
    - L Table 2: 12 directions ``src-tgt`` in ``language``; metrics ``bleu1_l11_a3``, ``best_bleu1``,
      ``best_layer``, ``best_alpha``, ``cr_l10_a1``, ``cr_l10_a2``, ``cr_l10_a3``.
    - L Table 3: ``tokens`` (|V_lang|) and ``shared_with_en``. L Table 4: XNLI ``accuracy`` (percent) for
      ``mBERT/finetune-all``, ``mBERT/finetune-last6``, ``mBERT/finetune-last6+MDS`` (+ ``alpha`` per language);
      language ``avg`` is the paper's average without en.
    - Figures (only captions and prose survive): ``metric`` "claim", the claim's text in ``description``.
"""
from __future__ import annotations

import argparse

from xlrepro.papers import Paper

NAME = "liu2020"
PARTS = ("static", "glove", "word2vec", "bert", "all", "evaluate")
CHAPTERS = ("static_vs_bert", "context_window", "part_of_speech", "language_information")


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--part", required=True, choices=PARTS,
                   help="static: Word2Vec/GloVe runs of the plan; glove: its GloVe runs only; word2vec: the Word2Vec "
                        "runs the zero-shot evaluation reads (default window, both sizes); bert: the four BERTs; "
                        "all: static and bert; evaluate: every evaluation that reads the BERTs' weights (retrieval, "
                        "zero-shot transfer, language information), into runs/liu2020/<lab|smoke>/gpu-results, which "
                        "the chapters read")
    p.add_argument("--models", nargs="*", help="--part bert only: some of small-w512 small-w20 big-w512 big-w20")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda where there is one)")
    p.add_argument("--time-limit", type=float,
                   help="stop (resumably) after this many seconds; run the command again to go on")
    p.add_argument("--smoke", action="store_true",
                   help="--part bert or evaluate: tiny BERTs on 4 languages (CPU tests)")


def prepare_train(a: argparse.Namespace):
    from xlrepro.config import ConfigError, choose
    from xlrepro.devices import check_long_run, default_device

    choose("part", a.part, PARTS)
    names = ("small-w512", "small-w20", "big-w512", "big-w20")
    if a.models is not None:
        if a.part in ("static", "glove", "word2vec", "evaluate"):
            raise ConfigError("--models applies to --part bert (or all) only")
        for m in a.models:
            choose("model", m, names)
    device = a.device or default_device()
    choose("device", device.split(":")[0], ("cpu", "cuda"))
    if a.time_limit is not None and a.time_limit <= 0:
        raise ConfigError(f"--time-limit must be positive; got {a.time_limit}")
    if a.smoke and a.part not in ("bert", "evaluate"):
        raise ConfigError(f"--smoke applies to --part bert or evaluate only; got --part {a.part}")
    if a.part in ("bert", "all") and not a.smoke:
        check_long_run(f"{NAME} --part bert (four 768x12 BERTs)", device, a.allow_cpu)

    def train() -> str:
        from .run import evaluate_part, train_part
        if a.part == "evaluate":
            return evaluate_part(device=device, time_limit=a.time_limit, smoke=a.smoke)
        return train_part(a.part, device=device, models=a.models, time_limit=a.time_limit, smoke=a.smoke)
    return train


def pending_training(chapter: str, parameters: dict) -> str | None:
    from .run import missing_training
    return missing_training(chapter, parameters)


PAPER_MISSING = ("{chapter} has no paper-profile path in the chapter yet; its paper experiments run as package "
                 "functions: the released mBERT's word retrieval by layer and the mean-difference shift "
                 "(xlrepro.papers.liu2020.paper), and Word2Vec, GloVe and BERTs trained on nested Wikipedia samples "
                 "with MUSE retrieval (xlrepro.papers.liu2020.paper_wiki.data_size_retrieval; $XLREPRO_WIKI_DIR, "
                 "$XLREPRO_MUSE_DIR). Use -p profile lab")


def check_chapter(chapter: str, parameters: dict, allow_cpu: bool) -> None:
    """Before a kernel starts: -p profile paper stops in one line naming what the paper profile lacks (run outside
    `xlrepro run`, a chapter's first cell stops on the profile too)."""
    if parameters.get("profile") == "paper":
        from xlrepro.config import ConfigError
        raise ConfigError(PAPER_MISSING.format(chapter=chapter))


PAPER = Paper(
    name=NAME,
    title=("Liu, Hsu, Chuang & Lee 2020, A Study of Cross-Lingual Ability and Language-specific Information in "
           "Multilingual BERT"),
    chapters=tuple(f"{NAME}/{c}" for c in CHAPTERS),
    add_train_arguments=add_train_arguments,
    prepare_train=prepare_train,
    reproduce=(("train", NAME, "--part", "all"), ("train", NAME, "--part", "evaluate")),
    pending_training=pending_training,
    check_chapter=check_chapter,
    # BERTs and static embeddings trained on Wikipedia, word retrieval against MUSE; L Table 4 fine-tunes mBERT on
    # MultiNLI and tests it on XNLI
    resources={**{f"{NAME}/{c}": ("wikipedia", "muse") for c in CHAPTERS},
               **{f"{NAME}/paper.{f}": ("mbert", "wikipedia", *m) for f, m in (("word_retrieval_by_layer", ("muse",)), ("mean_difference_shift", ()))},  # noqa: E501
               f"{NAME}/paper_wiki.data_size_retrieval": ("wikipedia", "muse"),
               f"{NAME}/language_information": ("mbert", "multinli", "xnli", "wikipedia", "muse")},
    order=40,
)
