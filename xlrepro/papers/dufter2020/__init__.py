"""Dufter & Schütze 2020, "Identifying Elements Essential for BERT's Multilinguality" (English + Fake-English).

``reference.csv`` (the paper's numbers, read by `xlrepro.reference.paper_numbers`), columns
    table, experiment, description, epochs, metric, mean, std, note
    - Tables 1, 2, 10: metrics ``mu``, ``align_l0``, ``retr_l0``, ``trans_l0``, ``align_l8``,
      ``retr_l8``, ``trans_l8``, ``ppl_train``, ``ppl_dev`` (fractions as printed, e.g. .97 -> 0.97;
      perplexity cells "217 07.8" -> mean 217, std 7.8). Table 2 has no std. Table 10 fills ``epochs``.
    - Table 3 (XNLI, BERT-base on Wikipedia): ``xnli_en``, ``xnli_de``, ``xnli_hi`` (fractions).
    - Table 4 (mBERT, per language): ``kendall_tau_<lang>``, ``xnli_<lang>`` (percent / 100).
    - Table 5: ``runtime_minutes`` (the printed text in ``note``). Table 6: ``parameters_millions``.
"""
from __future__ import annotations

import argparse

from xlrepro.papers import Paper

NAME = "dufter2020"


PARTS = ("grid", "table3", "table3-pilot", "table4")


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--part", default="grid", choices=PARTS,
                   help="grid (the default): the English/Fake-English models of every table (--ids); table3: Table 3's "
                        "real-language models, pretrained and fine-tuned (`real_languages.run_table3`: its two stacks "
                        "on the GPUs side by side, then the fine-tunings, --finetune-processes at once per GPU); "
                        "table3-pilot: the declared pilot of Table 3's pretraining (experiments.yaml `table3_pilot`, "
                        "`real_languages.run_pilot`), its results into table3_pilot.csv and the chosen variant "
                        "printed; "
                        "table4: Table 4's mini-mBERT column, word similarities from mini-mBERT's middle layer "
                        "(`word_order`; needs `xlrepro pretrain mini-mbert`). Each writes its rows into "
                        "book/results/dufter2020/ (table3.csv, table3_pilot.csv, table4.csv), which the knn_replace "
                        "chapter reads")
    p.add_argument("--ids", nargs="*", help="model IDs (default: every table of the chapter)")
    p.add_argument("--seeds", nargs="*", type=int)
    p.add_argument("--large-seeds", nargs="*", type=int, help="seeds of the BERT-base models (default: --seeds)")
    p.add_argument("--profile", default="lab", choices=["lab", "paper"])
    p.add_argument("--time-limit", type=float, help="stop (resumably) after this many seconds")
    p.add_argument("--epochs", type=int,
                   help="train every model this many epochs instead of its experiment's: a shortened run, for timing "
                        "the engine; its models go to a folder of their own, which no chapter reads")
    p.add_argument("--compile", action="store_true",
                   help="GPU: the fused, torch.compile'd stacks (larger stacks; the same numbers)")
    p.add_argument("--no-graphs", action="store_true", help="GPU: eager steps, no CUDA graphs (the same numbers)")
    p.add_argument("--evaluation", default="stacked", choices=["stacked", "per-model"],
                   help="evaluate a stack's models in one batched forward (stacked, the default: 3.0x faster for 20 "
                        "BERT-small models on an H200, the same numbers to bf16 rounding) or each model exported to "
                        "Hugging Face alone (per-model: the reference and the published runs' path)")
    p.add_argument("--linear", default="baddbmm", choices=["baddbmm", "mm"],
                   help="how the stacks' linear layers multiply: baddbmm (the default: one batched product that starts "
                        "from the bias) or mm (the product without the bias, which the next element-wise kernel adds: "
                        "9 %% faster for 50 compiled BERT-small models on an H200). It changes only rounding, but its training "
                        "check did not pass (the engineering appendix), so baddbmm stays the default")
    p.add_argument("--workers-per-gpu", type=int, default=1,
                   help="stacks trained side by side on each GPU (2 lets a small stack and its compile overlap "
                        "a large one). With more than one slot (GPUs x workers) the command starts torchrun, one rank "
                        "a slot, each taking the next stack from the engine's queue (xlrepro/engine/queue.py)")
    p.add_argument("--finetune-processes", type=int,
                   help="--part table3: fine-tunings side by side on each GPU, one process each (default 6: a "
                        "fine-tuning keeps a GPU about a fifth busy); changes no number")
    p.add_argument("--recipe", metavar="VARIANT",
                   help="--part table3: pretrain under this variant of Table 3's declared pilot (experiments.yaml "
                        "`table3_pilot`: its rate and warm-up in place of `table3`'s; the variant the pilot chose, "
                        "before experiments.yaml makes it the default). Changes the numbers and the run keys")
    p.add_argument("--data-parallel", action="store_true",
                   help="every GPU trains each stack on its share of every batch (torchrun, one rank a GPU) instead "
                        "of taking stacks of its own (the same numbers to rounding)")
    p.add_argument("--max-stack", nargs="*", default=[], metavar="SIZE=N",
                   help="at most N models of a size (small, base) per stack, e.g. base=3 to spread 12 BERT-base "
                        "models over 4 GPUs as 4 x 3; a speed switch (the same numbers in any stack)")


def prepare_train(a: argparse.Namespace):
    from xlrepro.config import ConfigError, check_seeds, plural
    from xlrepro.devices import check_long_run
    from xlrepro.engine.queue import launch, queue_world, rank_device, under_torchrun

    from . import grid
    from .config import load_chapter

    if a.part != "table3" and getattr(a, "finetune_processes", None) is not None:
        raise ConfigError(f"--finetune-processes applies to --part table3 only; got --part {a.part}")
    if a.part != "table3" and getattr(a, "recipe", None) is not None:
        raise ConfigError(f"--recipe applies to --part table3 only; got --part {a.part}")
    if a.part != "grid":
        return _prepare_part(a)
    chapter = load_chapter(NAME)
    ids = a.ids or list(dict.fromkeys(i for t in chapter.tables.values() for i in t))
    for i in ids:
        chapter.experiment(i)
    seeds = check_seeds(a.seeds if a.seeds else list(chapter.seeds))
    large_seeds = None if a.large_seeds is None else check_seeds(a.large_seeds)
    if a.workers_per_gpu < 1:
        raise ConfigError(f"--workers-per-gpu must be 1 or more; got {a.workers_per_gpu}")
    if a.epochs is not None and a.epochs < 1:
        raise ConfigError(f"--epochs must be 1 or more; got {a.epochs}")
    if a.time_limit is not None and a.time_limit <= 0:
        raise ConfigError(f"--time-limit must be a positive number of seconds; got {a.time_limit}")
    max_stack = grid.parse_max_stack(a.max_stack)
    data_parallel = getattr(a, "data_parallel", False)
    if data_parallel and a.workers_per_gpu != 1:
        raise ConfigError(f"--data-parallel trains each stack on every GPU at once: it takes no --workers-per-gpu "
                          f"(got {a.workers_per_gpu})")
    devices = grid.available_devices()
    gpus = max(1, sum(d.startswith("cuda") for d in devices))
    slots = gpus if data_parallel else gpus * a.workers_per_gpu
    check_long_run(f"training {plural(len(ids), 'model')} of {NAME}", devices[0], a.allow_cpu)
    argv = getattr(a, "argv", None)  # the command line, which torchrun runs once per rank
    if slots > 1 and not under_torchrun() and argv is None:
        raise ConfigError(f"{slots} slots need torchrun: torchrun --nproc-per-node {slots} -m xlrepro.cli train "
                          f"{NAME} ...")

    def train() -> str:
        if slots > 1 and not under_torchrun():  # one rank a slot, each taking stacks from the queue
            code = launch(argv, slots)
            if code:
                raise RuntimeError(f"torchrun's {slots} ranks stopped with exit status {code}; see their output above")
            members = grid.grid_members(chapter, ids, seeds, large_seeds, a.profile, a.epochs)
            root = grid.run_root(NAME, a.profile, a.epochs)
            done = all(grid.is_done(root, m) for m in members)
        else:  # in this process, or one rank of torchrun's (`run_grid` takes its share from the queue)
            ranks = queue_world()[1]
            done = grid.run_grid(NAME, ids, seeds, large_seeds=large_seeds, profile=a.profile, epochs=a.epochs,
                                 time_limit=a.time_limit, device=rank_device(),
                                 gpus=max(1, ranks // a.workers_per_gpu), compile=a.compile or None,
                                 graphs=not a.no_graphs, max_stack=max_stack, evaluation=a.evaluation,
                                 linear=a.linear, data_parallel=data_parallel)
        return "grid complete" if done else "time limit reached: run the same command again to resume"
    return train


def _prepare_part(a: argparse.Namespace):
    """`--part table3`, `table3-pilot` or `table4`: the options they take are checked, then the training to run."""

    from xlrepro.config import ConfigError
    from xlrepro.devices import check_long_run, default_device

    grid_only = [o for o, v in (("--ids", a.ids), ("--seeds", a.seeds), ("--large-seeds", a.large_seeds),
                                ("--epochs", a.epochs), ("--max-stack", a.max_stack or None),
                                ("--data-parallel", getattr(a, "data_parallel", False) or None)) if v is not None]
    if grid_only:
        raise ConfigError(f"{', '.join(grid_only)} applies to --part grid only; got --part {a.part}")
    if a.time_limit is not None and a.time_limit <= 0:
        raise ConfigError(f"--time-limit must be a positive number of seconds; got {a.time_limit}")
    device = default_device()
    processes = getattr(a, "finetune_processes", None)
    processes = 6 if processes is None else processes
    if processes < 1:
        raise ConfigError(f"--finetune-processes must be 1 or more; got {processes}")
    if a.part == "table3-pilot":
        check_long_run(f"pretraining Table 3's pilot of {NAME}", device, a.allow_cpu)

        def train() -> str:
            from xlrepro.paths import repo_root
            from xlrepro.results import write_csv

            from .real_languages import (PILOT_CURVES_CSV, collect_pilot, load_config, load_pilot, pilot_choice,
                                         prepare, run_pilot, run_root)
            cfg, pilot, root = load_config(), load_pilot(), run_root(False)
            prepare(cfg, root=root)
            cuda = device.startswith("cuda")
            if not run_pilot(pilot, cfg, root, "cuda" if cuda else device, time_limit=a.time_limit,
                             compile="regional" if cuda else None, graphs=cuda and not a.no_graphs):
                return "time limit reached: run the same command again to resume"
            results, curves = collect_pilot(pilot, cfg, root)
            out = repo_root() / "book" / "results" / NAME / "table3_pilot.csv"  # what knn_replace reads
            write_csv(results, out)
            write_csv(curves, out.with_name(PILOT_CURVES_CSV))
            _, chosen, outcome = pilot_choice(pilot, results)
            return f"Table 3's pilot complete: {out}; {outcome}" + (f": {chosen}" if chosen else "")
        return train
    if a.part == "table3":
        from .real_languages import load_config, recipe_config
        recipe = getattr(a, "recipe", None)
        cfg = recipe_config(load_config(), recipe)  # an unknown variant is refused before any work
        recipe_flags = ["--recipe", recipe] if recipe else []
        check_long_run(f"training Table 3's real-language models of {NAME}", device, a.allow_cpu)

        def train() -> str:
            from .real_languages import main as real_languages
            import torch

            from .real_languages import prepare, run_root, run_table3
            # tokenizers and the knn table, once, before the child processes read them
            prepare(cfg, root=run_root(False))
            gpus = max(1, torch.cuda.device_count()) if device.startswith("cuda") else 1
            # the published run's two stacks of six models; their fine-tunings side by side
            done = run_table3(shards=2, gpus=gpus, processes=processes, time_limit=a.time_limit,
                              extra=["--device", "cuda" if device.startswith("cuda") else device,
                                     *(["--no-graphs"] if a.no_graphs else []), *recipe_flags])
            if not done:
                return "time limit reached: run the same command again to resume"
            from xlrepro.paths import repo_root
            table = repo_root() / "book" / "results" / NAME / "table3.csv"  # what knn_replace reads
            real_languages(["--collect", str(table), *recipe_flags])
            return f"Table 3 complete: {table}"
        return train

    def train() -> str:
        from .word_order import MINI_MBERT
        from .word_order import main as word_order
        word_order(["--similarity", MINI_MBERT, "--device", device])
        return "Table 4's mini-mBERT rows written"
    return train


# The table of models each chapter trains (its `run.train(ids)`); the setup chapter trains nothing.
# knn_replace trains Figure 7's models (0, 30) only; its Table 10 (model 17 at 250 epochs) is read, never trained by
# the chapter (`knn_chapter.collect`): `xlrepro train dufter2020 --ids 17-250` trains it.
TRAINS = {"architecture": "table1", "comparability": "table2", "training_dynamics": "fig6", "knn_replace": "fig7"}


def pending_training(chapter: str, parameters: dict) -> str | None:
    """What full-size training executing `chapter` with `parameters` would start (None: none, or smoke size).

    None on a CPU too: there the chapter trains nothing at full size and lists the models that await a GPU
    (`ChapterRun.train`)."""
    from xlrepro.devices import default_device

    from .config import load_chapter

    if default_device() == "cpu" or parameters.get("source") == "published":  # the published results: no training
        return None
    from .grid import grid_members, is_done, run_root

    table = TRAINS.get(chapter.split("/")[-1])
    if table is None or any(parameters.get(k) is not None for k in ("epochs", "max_sentences", "batch_size")):
        return None
    ch = load_chapter(NAME)
    try:
        members = grid_members(ch, ch.tables[table], parameters.get("seeds") or list(ch.seeds),
                               parameters.get("large_seeds"), parameters.get("profile", "lab"))
        root = run_root(NAME, parameters.get("profile", "lab"))
    except Exception:  # bad parameters: the notebook's own checks name them
        return None
    todo = [m for m in members if not is_done(root, m)]
    return f"{len(todo)} untrained models of {NAME} ({table}) at the paper's settings" if todo else None


# The chapters whose parameters cell selects a run (`report.chapter_run`): profile, seeds, sizes, time_limit
RUN_CHAPTERS = ("setup", *TRAINS)
SMOKE = '-p epochs 1 -p max_sentences 4 -p batch_size 4 -p seeds "[0]"'  # a run of minutes on a CPU


def check_chapter(chapter: str, parameters: dict, allow_cpu: bool) -> None:
    """Before a kernel starts (`Paper.check_chapter`): the values the notebook's `chapter_run` checks; the PBC files
    of the paper profile where its cache is not prepared; and, on a CPU at the paper's settings, a chapter none of
    whose models is trained (it would have nothing to show): the command that trains them on a GPU. With
    `source` "published" the chapter reads its published CSV (`report.PUBLISHED_FILES`) instead of the runs: that
    file must exist, and no model is needed."""
    from xlrepro.config import ConfigError, plural
    from xlrepro.devices import default_device

    from .grid import is_done
    from .report import PUBLISHED_ALSO, PUBLISHED_FILES, chapter_run

    short = chapter.split("/")[-1]
    if short not in RUN_CHAPTERS:
        return
    names = ("profile", "seeds", "large_seeds", "epochs", "max_sentences", "batch_size", "source")
    try:
        run = chapter_run(NAME, **{k: parameters[k] for k in names if k in parameters})
    except ConfigError as err:
        raise ConfigError(f"chapter {chapter}: {err}") from None
    if run.source == "published":
        if short not in PUBLISHED_FILES:
            raise ConfigError(f"chapter {chapter} has no source='published'; chapters that have: "
                              f"{', '.join(PUBLISHED_FILES)}")
        lacks = [f"{n}.csv" for n in (PUBLISHED_FILES[short], *PUBLISHED_ALSO.get(short, ()))
                 if not (run.published / f"{n}.csv").exists()]
        if lacks:
            raise ConfigError(f"chapter {chapter} with source 'published' reads {', '.join(lacks)}, which "
                              f"book/results/{NAME} lacks; use -p source runs")
    if "word_order" in parameters:  # knn_replace's Table 4
        from .knn_chapter import check_word_order
        try:
            check_word_order(parameters["word_order"], run.source)
        except ConfigError as err:
            raise ConfigError(f"chapter {chapter}: {err}") from None
    limit = parameters.get("time_limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit <= 0):
        raise ConfigError(f"chapter {chapter}: time_limit must be None or a positive number of seconds; got {limit!r}")
    if run.profile == "paper":
        missing = missing_pbc_files()
        if missing:
            raise ConfigError(f"chapter {chapter} with profile 'paper' needs the Parallel Bible Corpus "
                              f"{'files' if len(missing) > 1 else 'file'} {', '.join(map(str, missing))} (not "
                              f"downloadable); set XLREPRO_PBC_DIR to the folder that holds them, or use -p profile lab")
    table = TRAINS.get(short)
    shrunk = (run.epochs, run.max_sentences, run.batch_size) != (None, None, None)
    if table is None or shrunk or allow_cpu or default_device() != "cpu" or run.source == "published":
        return
    members = run.members(list(run.chapter.tables[table]))
    if members and not any(is_done(run.root, m) for m in members):
        raise ConfigError(f"chapter {chapter} needs {plural(len(members), 'model')} ({table}) that no run has trained "
                          f"here, and at the paper's settings they train on a GPU (days on this CPU); on a GPU: "
                          f"{run.train_command(members)}; here: smoke sizes ({SMOKE}) or --allow-cpu")


def missing_pbc_files() -> list:
    """The Parallel Bible Corpus files the paper profile reads that are missing, where its cache is not prepared
    (the folder is $XLREPRO_PBC_DIR, else `pbc` beside the chapters' notebooks, the kernels' working folder)."""
    import os

    from xlrepro.data.bible import PBC_DEV_FILE, PBC_TRAIN_FILE
    from xlrepro.paths import repo_root

    from .lab import lab_cache

    if (lab_cache("paper") / "tokenizer.json").exists() and (lab_cache("paper") / "corpus.json").exists():
        return []
    folder = repo_root() / "notebooks" / NAME / os.environ.get("XLREPRO_PBC_DIR", "pbc")  # an absolute one stays
    return [folder / f for f in (PBC_TRAIN_FILE, PBC_DEV_FILE) if not (folder / f).exists()]


def prepare(profile: str):
    """The lab corpus and vocabulary, then knn-replace's neighbour table (fastText + VecMap; needs gensim)."""
    from .knn import prepare_knn
    from .lab import prepare_lab

    folder = prepare_lab(profile)
    prepare_knn(profile, k=1)
    return folder


PAPER = Paper(
    name=NAME,
    title="Dufter & Schütze 2020, Identifying Elements Essential for BERT's Multilinguality",
    # notebooks/dufter2020/engineering.ipynb, the appendix on every paper's runs, is the `appendix` entry's
    chapters=tuple(f"{NAME}/{n}" for n in ("setup", "architecture", "comparability", "training_dynamics",
                                           "knn_replace")),
    add_train_arguments=add_train_arguments,
    prepare_train=prepare_train,
    # Table 4's mini-mBERT column reads the encoder that Wu & Dredze's chapters fine-tune: pretrained here first
    # (resumable; done once for both papers)
    reproduce=(("train", NAME), ("train", NAME, "--part", "table3"), ("pretrain", "mini-mbert"),
               ("train", NAME, "--part", "table4")),
    pending_training=pending_training,
    check_chapter=check_chapter,
    prepare=prepare,
    # every chapter but engineering (benchmarks) trains on the two English PBC editions in the paper profile
    resources={**{f"{NAME}/{n}": ("pbc",) for n in ("setup", "architecture", "comparability", "training_dynamics",
                                                    "knn_replace")},
               f"{NAME}/paper_table4.mbert_table4": ("mbert", "xnli")},  # Table 4 with mBERT's similarities
    order=10,
    # Table 4's same-script pairs come from Wu & Dredze's overlap.csv (its subword-overlap chapter writes it)
    reads={f"{NAME}/knn_replace": ("wu2019/q4_subword_overlap",)},
)
