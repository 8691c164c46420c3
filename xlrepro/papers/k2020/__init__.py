"""K, Wang, Mayhew & Roth 2020, "Cross-Lingual Ability of Multilingual BERT: An Empirical Study".

``reference.csv`` (the paper's numbers, read by `xlrepro.reference.paper_numbers`), columns
    table, experiment, description, language, metric, mean, std, note
    - values as printed: accuracies and F1 in percent, ``parameters_m`` in millions; ``std`` is the NER ± where given.
    - ``experiment`` is the name of the matching experiment of ``experiments.yaml`` ("enfake-es", "enfake-ru/L6H12",
      "enfake-ru/L3H3/5.9%", "en-es-hi-ru/L16H1", ...). Where the paper's column is our base's setting the base's
      name is used: Table 8 "No-NSP", Table 9 "No Lang-id" and Table 10 "WordPiece" are "enfake-X"; the paper's
      base itself had NSP (Table 8's NSP column repeats Table 1).
    - ``language`` is the test language; Table 11 writes "premise>hypothesis"; ``delta`` (Tables 4-6) is the
      Fake-English minus Russian accuracy; ``word_piece_contribution`` (Table 1) en-X minus enfake-X.
"""
from __future__ import annotations

import argparse

from xlrepro.papers import Paper

from .constants import CHAPTERS

NAME = "k2020"


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--part", help="lab and smoke (required there): pilot, t1 .. t11, all (experiments.yaml `parts`), "
                        "or parts joined by commas (t4,t5,t6: one plan, so their cells of one shape share stacks)")
    p.add_argument("--profile", default="lab", help="lab (the GPU run), alltext (its pilot on all the offline text: "
                        "every Bible edition and the LibreOffice help), alltext2x, alltext4x and alltext8x (the same with "
                        "twice, four and eight times the pre-training steps), smoke (tiny, for CI) or paper (the paper's "
                        "B-BERT pre-trained on Wikipedia and tested on XNLI: xlrepro/papers/k2020/paper.py)")
    p.add_argument("--pair", default=None, help="--profile paper: en-X, X an XNLI language (default en-es)")
    p.add_argument("--fake", action="store_true", help="--profile paper: English shifted into Fake-English (enfake-X)")
    p.add_argument("--steps", type=int, default=None,
                   help="--profile paper: pre-training steps (default the paper's 2M)")
    p.add_argument("--seeds", nargs="*", type=int, help="default: the plan's seeds")
    p.add_argument("--time-limit", type=float,
                   help="stop (resumably) after this many seconds; a stack is planned to finish within it where one "
                        "model does (changes no number)")
    p.add_argument("--compile", action="store_true", help="GPU: fused, torch.compile'd stacks (changes no number)")
    p.add_argument("--no-graphs", action="store_true", help="GPU: no CUDA graphs (changes no number)")
    p.add_argument("--no-snapshots", action="store_true",
                   help="neither save nor evaluate the profile's snapshots (`snapshots` in experiments.yaml: the "
                        "zero-shot learning curve), e.g. for the tables' cells; changes no number")
    p.add_argument("--workers-per-gpu", type=int, default=1,
                   help="ranks per GPU taking every job (stacks and fine-tuning side by side; changes no number). With "
                        "more than one slot the command starts torchrun, one rank a slot, each taking the next job "
                        "from the engine's queue (xlrepro/engine/queue.py)")
    p.add_argument("--eval-workers-per-gpu", type=int, default=0,
                   help="more ranks per GPU that take evaluations only (an evaluation keeps a GPU about a "
                        "tenth busy); the stack plan depends on --workers-per-gpu alone (changes no number)")
    p.add_argument("--max-stack", type=int, default=None, help="models per stack (default: stacks.MAX_STACK)")
    p.add_argument("--last-call", action="store_true",
                   help="the machine's last call (its models and checkpoints go with it): start no stack or NSP model "
                        "that cannot finish and be evaluated before --time-limit; those workers evaluate instead "
                        "(changes no number)")
    p.add_argument("--time-total", type=float, default=None,
                   help="seconds left for the part, this call's and those of the calls that resume it (at least "
                        "--time-limit; without --time-limit this call may use them all): only the cells that fit are "
                        "planned, in the part's order (one passed over is taken where it fills a slot left idle), "
                        "stacks are cut to finish within one --time-limit, and no stack "
                        "or NSP model starts that cannot finish and be evaluated within it; the others wait for a "
                        "later run (changes no number). --last-call is --time-total equal to --time-limit")
    p.add_argument("--dry-run", action="store_true",
                   help="print the stacks still to train with their estimated seconds and the jobs left; train nothing")
    p.add_argument("--gpus", type=int, default=None,
                   help="with --dry-run: plan for this many GPUs (default: this machine's, at least 1)")
    p.add_argument("--gpu", default=None,
                   help="with --dry-run: estimate for this card, H100 or H200 (its measured speeds only; default: "
                        "every measurement pooled)")


def prepare_train(a: argparse.Namespace):
    from xlrepro.config import ConfigError, check_seeds, choose
    from xlrepro.devices import check_long_run, default_device

    from .config import EVAL_MARGIN, PROFILES, check_part, load_plan

    choose("profile", a.profile, (*PROFILES, "paper"))
    if a.profile == "paper":
        return _prepare_paper(a)
    paper_only = [f"--{n}" for n in ("pair", "fake", "steps") if getattr(a, n, None) not in (None, False)]
    if paper_only:
        raise ConfigError(f"{', '.join(paper_only)} apply to --profile paper; got --profile {a.profile}")
    if a.part is None:
        raise ConfigError(f"--profile {a.profile} needs --part (pilot, t1 .. t11, all, or parts joined by commas)")
    plan = load_plan()
    check_part(plan, a.part)
    if a.seeds is not None:
        check_seeds(a.seeds)
    if a.time_limit is not None and a.time_limit <= 0:
        raise ConfigError(f"--time-limit must be a positive number of seconds; got {a.time_limit}")
    workers = getattr(a, "workers_per_gpu", 1)
    max_stack = getattr(a, "max_stack", None)
    if workers < 1 or (max_stack is not None and max_stack < 1):
        raise ConfigError(f"--workers-per-gpu and --max-stack must be >= 1; got {workers}, {max_stack}")
    eval_workers = getattr(a, "eval_workers_per_gpu", 0)
    if eval_workers < 0:
        raise ConfigError(f"--eval-workers-per-gpu must be >= 0; got {eval_workers}")
    if a.profile == "lab" and a.time_limit is not None and a.time_limit < EVAL_MARGIN + 60:
        raise ConfigError(f"--time-limit {a.time_limit:g} s leaves no room for an evaluation (one starts only with "
                          f"{EVAL_MARGIN} s left, after about a minute of preparation), so models trained or waiting "
                          f"in this call would stay unevaluated; give at least {EVAL_MARGIN + 60} s or no limit")
    gpus_planned = getattr(a, "gpus", None)
    if gpus_planned is not None and (gpus_planned < 1 or not getattr(a, "dry_run", False)):
        raise ConfigError(f"--gpus plans a dry run for that many GPUs: give it with --dry-run and >= 1; got "
                          f"{gpus_planned}{'' if getattr(a, 'dry_run', False) else ' without --dry-run'}")
    if getattr(a, "last_call", False) and a.time_limit is None:
        raise ConfigError("--last-call decides what can still finish before the time limit: give --time-limit too")
    time_total = getattr(a, "time_total", None)
    if time_total is not None:
        if getattr(a, "last_call", False):
            raise ConfigError("--last-call is --time-total equal to --time-limit: give one of them")
        if time_total <= 0 or (a.time_limit is not None and time_total < a.time_limit):
            raise ConfigError(f"--time-total must be a positive number of seconds, at least --time-limit "
                              f"({a.time_limit}); got {time_total:g}")
    gpu = getattr(a, "gpu", None)
    if gpu is not None:
        if not getattr(a, "dry_run", False):
            raise ConfigError(f"--gpu {gpu} estimates a dry run for that card: give it with --dry-run")
        from .config import GPUS
        choose("--gpu", gpu, GPUS)
    device = default_device()
    if getattr(a, "dry_run", False):
        def plan() -> str:
            import torch

            from .stacks import MAX_STACK, dry_run, part_cells
            gpus = gpus_planned or max(1, torch.cuda.device_count())
            limit = a.time_limit if a.time_limit is not None else time_total
            return dry_run(part_cells(a.part, a.profile, a.seeds), gpus * workers, max_stack or MAX_STACK, gpu,
                           compiled=bool(getattr(a, "compile", False)),
                           snapshots=not getattr(a, "no_snapshots", False), time_limit=limit,
                           time_total=time_total if time_total is not None
                           else limit if getattr(a, "last_call", False) else None)
        return plan
    if a.profile == "lab":
        check_long_run(f"{NAME} --part {a.part} at the lab profile", device, a.allow_cpu)

    import torch

    from xlrepro.engine.queue import launch, rank_device, under_torchrun

    gpus = torch.cuda.device_count() if str(device).startswith("cuda") else 0
    slots = max(gpus, 1) * (workers + eval_workers)  # one rank a slot
    argv = getattr(a, "argv", None)  # the command line, which torchrun runs once per rank
    if slots > 1 and not under_torchrun() and argv is None:
        raise ConfigError(f"{slots} slots need torchrun: torchrun --nproc-per-node {slots} -m xlrepro.cli train "
                          f"{NAME} ...")

    def train() -> str:
        from .bbert import pilot_gate
        from .stacks import MAX_STACK, collect, part_cells, run_part

        if slots > 1 and not under_torchrun():  # one rank a slot, each taking jobs from the engine's queue
            code = launch(argv, slots)
            if code:
                raise RuntimeError(f"torchrun's {slots} ranks stopped with exit status {code}; see their output above")
            out = collect(part_cells(a.part, a.profile, a.seeds))
        else:  # in this process, or one rank of torchrun's
            out = run_part(a.part, a.profile, a.seeds, rank_device() if under_torchrun() else device, a.time_limit,
                           progress=True, workers_per_gpu=workers, compile=getattr(a, "compile", False) or None,
                           graphs=not getattr(a, "no_graphs", False), max_stack=max_stack or MAX_STACK,
                           eval_workers_per_gpu=eval_workers, last_call=getattr(a, "last_call", False),
                           snapshots=not getattr(a, "no_snapshots", False), time_total=time_total)
        text = f"{len(out)} result rows"
        if a.part == "pilot" and len(out):
            text += "\n" + pilot_gate(out).to_string(index=False)
        return text
    return train


#: Options of the lab's stacked runs, with their defaults: the paper profile takes none of them.
LAB_ONLY = {"compile": False, "no_graphs": False, "no_snapshots": False, "workers_per_gpu": 1, "eval_workers_per_gpu": 0,
            "max_stack": None, "last_call": False, "time_total": None, "dry_run": False, "gpus": None, "gpu": None}


def _prepare_paper(a: argparse.Namespace):
    """`train k2020 --profile paper`: every argument and resource checked here, before anything loads."""
    from xlrepro.config import ConfigError
    from xlrepro.devices import check_long_run, default_device

    from .paper import PaperSettings, resolve_paths, run_paper

    if a.part is not None:
        raise ConfigError("--part applies to --profile lab and smoke; --profile paper runs one pair (--pair, --fake)")
    given = [f"--{k.replace('_', '-')}" for k, default in LAB_ONLY.items() if getattr(a, k, default) != default]
    if given:
        raise ConfigError(f"{', '.join(given)} apply to --profile lab and smoke; --profile paper takes --pair, "
                          f"--fake, --steps, --seeds, --time-limit")
    if a.time_limit is not None and a.time_limit <= 0:
        raise ConfigError(f"--time-limit must be a positive number of seconds; got {a.time_limit}")
    pair, fake, steps = getattr(a, "pair", None), getattr(a, "fake", False), getattr(a, "steps", None)
    settings = PaperSettings(pair=pair or "en-es", fake=fake, seeds=tuple(a.seeds) if a.seeds else (0,),
                             **({} if steps is None else {"steps": steps}))
    resolve_paths(settings)
    device = default_device()
    check_long_run(f"{NAME} --profile paper ({settings.name}, {settings.steps} steps)", device, a.allow_cpu)

    def train() -> str:
        out = run_paper(settings.pair, settings.fake, settings.seeds, settings.steps, device=device,
                        time_limit=a.time_limit, progress=True)
        return "stopped at the time limit (resumable): run the command again" if out is None else f"wrote {out}"
    return train


def prepare(profile: str) -> str:
    """The NER stand-in's silver labels (spaCy on every English verse of the Bible, once; cached)."""
    from xlrepro.tasks.entities import label_statistics, prepare_entities, silver_entities
    prepare_entities()
    return label_statistics({s: silver_entities(s) for s in ("train", "dev", "test")}).to_string()


def claims_frames(chapter: str, folder) -> dict:
    """The frames `chapter`'s claims read, from a results folder (`report.claims_frames`)."""
    from .report import claims_frames as frames
    return frames(chapter, folder)


PAPER_MISSING = ("{chapter} has no paper profile yet (its profiles: lab, smoke): the paper's core experiment, a "
                 "B-BERT pretrained on Wikipedia ($XLREPRO_WIKI_DIR), fine-tuned on MultiNLI and tested on XNLI "
                 "($XLREPRO_MULTINLI_DIR, $XLREPRO_XNLI_DIR), runs as `xlrepro train k2020 --profile paper --pair "
                 "en-es [--fake]` (xlrepro/papers/k2020/paper.py), but the chapters do not read its results yet, and "
                 "NER (the paper's LORELEI sets are licensed; WikiANN, $XLREPRO_WIKIANN_DIR) is not wired in. "
                 "Use -p profile lab")


def check_chapter(chapter: str, parameters: dict, allow_cpu: bool) -> None:
    """Before a kernel starts: -p profile paper stops in one line saying what the paper profile would need; `source`
    is one of `published.SOURCES`, and "published" only where `published.choose_source` allows it."""
    if parameters.get("profile") == "paper":
        from xlrepro.config import ConfigError
        raise ConfigError(PAPER_MISSING.format(chapter=chapter))
    from xlrepro.config import choose

    from .published import DEFAULTS, SOURCES, choose_source
    source = choose("source", parameters.get("source", "auto"), SOURCES)
    if source == "published":
        choose_source(chapter.split("/")[-1], source, publish=bool(parameters.get("publish")),
                      **{k: v for k, v in parameters.items() if k in DEFAULTS})


def pending_training(chapter: str, parameters: dict) -> str | None:
    return None  # the chapters never train at the lab profile: they read finished cells and say what is pending


PAPER = Paper(
    name=NAME,
    title="K, Wang, Mayhew & Roth 2020, Cross-Lingual Ability of Multilingual BERT: An Empirical Study",
    chapters=tuple(f"{NAME}/{c}" for c in CHAPTERS),
    add_train_arguments=add_train_arguments,
    prepare_train=prepare_train,
    prepare=prepare,
    reproduce=(("train", NAME, "--part", "pilot"), ("train", NAME, "--part", "all")),
    pending_training=pending_training,
    check_chapter=check_chapter,
    # the paper's own data: B-BERTs pretrained on Wikipedia, fine-tuned on MultiNLI and tested on XNLI, and NER
    # (the paper's LORELEI sets are licensed through the LDC; WikiANN is the public set of the same kind)
    resources={**{f"{NAME}/{c}": ("wikipedia", "multinli", "xnli", "wikiann") for c in CHAPTERS},
               f"{NAME}/paper.run_paper": ("wikipedia", "multinli", "xnli")},  # `train k2020 --profile paper`
    order=30,
    claims_frames=claims_frames,
)
