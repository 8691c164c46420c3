"""Wu & Dredze 2019, "Beto, Bentz, Becas: The Surprising Cross-Lingual Effectiveness of BERT".

``reference.csv`` (the paper's numbers, read by `xlrepro.reference.paper_numbers`), columns
    table, experiment, description, language, metric, mean, std, note
    - values in PERCENT as printed (0-100); ``std`` is always blank (the paper gives none).
    - Tables 2 (MLDoc, ``accuracy``), 3 (XNLI, ``accuracy``), 4 (NER, ``f1``), 5 (POS, ``accuracy``),
      6 (parsing, ``uas``, ``las``, ``word_order_distance``); Figure 1a-e (layer freezing, read from
      the heatmap's cell labels). ``experiment`` is "<system>/<setting>", e.g. "mBERT/zero-shot";
      ``description`` keeps the paper's row label; language ``avg`` is the paper's average column
      (``note`` says which languages it leaves out).
"""
from __future__ import annotations

import argparse

from xlrepro.papers import Paper

from .constants import MODELS, PARTS

NAME = "wu2019"


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--part", required=True, choices=PARTS, help="the part of the plan to run")
    p.add_argument("--languages", nargs="*", help="--part in-language only: these training languages")
    p.add_argument("--model", default="lab", choices=MODELS, help="the plan's encoder")
    p.add_argument("--shard", default="0/1", help="I/N runs every N-th job of the part, from the I-th")
    p.add_argument("--task", default="sections", help="the pair task: sections (default, the chapters' numbers) or "
                   "paraphrase (same verse in two editions; en fr es de it tl), see xlrepro.tasks.pairs")


def parse_shard(text: str) -> tuple[int, int]:
    from xlrepro.config import ConfigError

    i, _, n = text.partition("/")
    if not (i.isdigit() and n.isdigit() and int(i) < int(n)):
        raise ConfigError(f"--shard must be I/N with 0 <= I < N, e.g. 0/4; got {text!r}")
    return int(i), int(n)


def prepare_train(a: argparse.Namespace):
    from xlrepro.config import ConfigError, choose
    from xlrepro.data.multilingual import LANGUAGES
    from xlrepro.devices import check_long_run, default_device

    choose("part", a.part, PARTS)
    choose("model", a.model, MODELS)
    from xlrepro.tasks.pairs import PAIR_TASKS, pair_task

    choose("task", a.task, PAIR_TASKS)
    task_languages = pair_task(a.task).languages
    shard = parse_shard(a.shard)
    if a.languages is not None:
        if a.part not in ("in-language", "all"):
            raise ConfigError(f"--languages applies to --part in-language (or all) only; got --part {a.part}")
        for lang in a.languages:
            choose("language", lang, LANGUAGES)
            choose(f"language of the {a.task} task", lang, task_languages)
    if a.model == "lab":
        check_long_run(f"{NAME} --part {a.part} with the published encoder", default_device(), a.allow_cpu)

    def train() -> str:
        from .transfer import TransferLab, run_part

        lab = TransferLab(model=a.model, progress=False, task=a.task)
        return run_part(a.part, lab, a.languages, shard).to_string()
    return train


def pending_training(chapter: str, parameters: dict) -> str | None:
    """Full-size training a chapter would start: the published encoder's pretraining or its fine-tuning runs.
    None where the chapter renders from the published results instead (`published.choose_source`: the published
    run, `parameters["publish"]`, at its defaults, on a CPU without the fine-tuning cache)."""
    from xlrepro.paths import runs_dir

    if parameters.get("profile", "lab") == "paper":
        if parameters.get("max_train_pairs") is None:
            if chapter.endswith(("/q1_zero_shot", "/q4_subword_overlap")):
                return "fine-tuning mBERT on MultiNLI's 393k pairs (3 learning rates, then each seed) for Table 3"
            if chapter.endswith("/q2_layers"):
                return ("fine-tuning mBERT on MultiNLI's 393k pairs with frozen layers (the 3 learning rates, then "
                        "5 frozen depths and the feature-based variant for each seed) for Figure 1")
        return None  # a shrunk run, or Q3 (features of the frozen encoder, no training)
    if parameters.get("model", "lab") != "lab":
        return None
    from .transfer import load_plan, mini_mbert_for

    name = chapter.split("/")[-1]
    if chapter.startswith(f"{NAME}/"):
        from .published import choose_source

        known = ("profile", "model", "languages", "max_train_pairs", "max_test_pairs", "epochs", "results", "seeds")
        probe = {k: parameters[k] for k in ("train_per_language", "test_per_language") if k in parameters}
        source, _ = choose_source(name, parameters.get("source", "auto"), publish=bool(parameters.get("publish")),
                                  probe=probe, **{k: parameters[k] for k in known if k in parameters})
        if source == "published":
            return None
    config, _ = mini_mbert_for(load_plan(), "lab")
    if not (config.default_dir() / "training.json").exists():
        return f"pretraining mini-mBERT ({config.steps} steps; on a GPU: xlrepro pretrain mini-mbert)"
    shrunk = any(parameters.get(k) is not None for k in ("max_train_pairs", "max_test_pairs", "epochs"))
    finetunes = name in ("q1_zero_shot", "q2_layers", "q4_subword_overlap")
    if finetunes and not shrunk and not any((runs_dir() / NAME / "lab" / "finetune").glob("*/*/*.json")):
        return f"the {NAME} fine-tuning runs at the plan's settings; on a GPU: xlrepro train {NAME} --part all"
    return None


def check_chapter(chapter: str, parameters: dict, allow_cpu: bool) -> None:
    """Before a kernel starts, under -p profile paper: a chapter without a paper path stops with the line that
    says what is missing; Q1, Q2 and Q4 stop where MultiNLI or XNLI cannot be found, Q3 where the Wikipedia text
    cannot (the encoder is checked when it loads: a hub id may be in the hub cache)."""
    if parameters.get("profile", "lab") != "paper":
        return
    from .constants import PAPER_MISSING

    name = chapter.split("/")[-1]
    if name in PAPER_MISSING:
        from xlrepro.config import ConfigError
        raise ConfigError(PAPER_MISSING[name])
    if name == "q3_language_id":
        from .language_id import resolve_wiki_paths

        resolve_wiki_paths(languages=parameters.get("languages"))
        return
    from .xnli import resolve_paths

    resolve_paths()


def claims_frames(chapter: str, folder) -> dict:
    """The frames a chapter's claims read (`report.claims_frames`; imported on call, as pandas is)."""
    from .report import claims_frames as frames

    return frames(chapter, folder)


PAPER = Paper(
    name=NAME,
    title="Wu & Dredze 2019, Beto, Bentz, Becas: The Surprising Cross-Lingual Effectiveness of BERT",
    # the plan's encoder (mini-mBERT), which these chapters fine-tune, is presented by the multilingual lab's entry
    chapters=tuple(f"{NAME}/{n}" for n in ("q1_zero_shot", "q2_layers", "q3_language_id", "q4_subword_overlap")),
    add_train_arguments=add_train_arguments,
    prepare_train=prepare_train,
    # the paraphrase task's zero-shot runs (Q1 and Q4 would show them beside the section task's): pending a GPU run
    reproduce=(("pretrain", "mini-mbert"), ("train", NAME, "--part", "all"),
               ("train", NAME, "--part", "zero-shot", "--task", "paraphrase")),
    pending_training=pending_training,
    check_chapter=check_chapter,
    # the paper profile: mBERT, MultiNLI and XNLI for Table 3 (q1_zero_shot, `xnli.py`), Figure 1's XNLI panel
    # (q2_layers, `XnliLab.frozen`) and the overlap against XNLI transfer (q4); Q3 probes mBERT on Wikipedia text
    # (`language_id.py`); Tables 2, 4, 5 and 6 run as package functions (`mldoc.table2`, `ner.table4`, `pos.table5`,
    # `parsing.table6`)
    resources={**{f"{NAME}/{n}": ("mbert", "multinli", "xnli")
                  for n in ("q1_zero_shot", "q2_layers", "q4_subword_overlap")},
               f"{NAME}/q3_language_id": ("mbert", "wikipedia"),
               f"{NAME}/mldoc.table2": ("mbert", "mldoc"),
               f"{NAME}/ner.table4": ("mbert", "conll2002", "conll2003"),
               f"{NAME}/pos.table5": ("mbert", "ud"),
               f"{NAME}/parsing.table6": ("mbert", "ud")},
    order=20,
    claims_frames=claims_frames,
)
