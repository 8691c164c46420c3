"""`xlrepro reproduce`: the published run of the whole book, resumable, in one command.

The plan is made from the paper registry (`xlrepro.papers`): for each paper, in book order, its training commands
(`Paper.reproduce`, e.g. ``xlrepro train <paper>``), then each of its chapters published
(``xlrepro run <chapter> --publish``). Every step runs in this process through the package's own functions
(`xlrepro.cli.main`, `xlrepro.cli.run_chapter`); nothing is shelled out.

What is skipped when the same command runs again (it resumes):

- a training step that ran without a time limit and returned 0 (the trainers then run to the end) is recorded as
  finished and skipped while the code (the git commit) is unchanged. A training step given a time limit (under
  ``--deadline``) is never recorded, because a trainer may stop before its limit with work left: it runs again, and
  the trainer itself skips every model already trained, so a rerun of finished work costs only the check;
- a chapter is published again unless its published notebook exists and was written by this plan, at this commit,
  with these parameters, after the last change to its paper's runs (the newest file under ``runs/<paper>*``) —
  that is, unless the published copy is up to date with its runs.

The record of finished steps is ``runs/reproduce/state.json``.

The deadline (``--deadline SECONDS``, counted from the start): a step that takes ``--time-limit`` gets the seconds
left (less a margin to save its checkpoint); a step that does not is started only when its recorded time (below)
fits in what is left; and every step is stopped at the deadline itself (SIGALRM, handled like Ctrl-C: the steps'
clean-up runs). At the end the command prints what is left, and running it again resumes.

Estimated GPU time: read from the published results (`recorded_time`): a paper's ``runtime.csv`` (the stacks'
``train_seconds``), its run records' training lines ("N GPU-minutes" / "N worker-minutes"), and encoders'
``*training.json`` (``seconds``, ``device``); "unknown" where nothing was measured.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from .config import ConfigError, choose

MARGIN_S = 30  # a time-limited step stops this long before the deadline, to save its checkpoint
MIN_STEP_S = 60  # no step starts with less time than this left


@dataclass(frozen=True)
class Step:
    """One step of the plan: a paper's training command, or one chapter published."""
    kind: str = field(metadata={"help": "'train' or 'publish'"})
    paper: str
    argv: tuple[str, ...] = field(metadata={"help": "the `xlrepro` command line, without the program name"})
    chapter: str | None = None
    parameters: tuple[tuple[str, object], ...] = ()
    needs_gpu: bool = False
    takes_time_limit: bool = False
    estimate: str = "unknown"
    estimate_s: float | None = field(default=None, metadata={"help": "seconds, where a record gives them"})

    @property
    def key(self) -> str:
        return " ".join(self.argv)

    def command(self) -> str:
        return "xlrepro " + " ".join(self.argv) + "".join(f" -p {k} {v!r}" for k, v in self.parameters)


@dataclass(frozen=True)
class Cli:
    """What the plan and its steps use of `xlrepro.cli` (passed in by it: the command line imports this module)."""
    main: Callable[[list[str]], int] = field(metadata={"help": "`xlrepro.cli.main`: runs one command line"})
    run_chapter: Callable[..., Path] = field(metadata={"help": "`xlrepro.cli.run_chapter`"})
    chapter_parameters: Callable[[str], dict] = field(metadata={"help": "a chapter's declared parameters"})
    build_parser: Callable[[], object] = field(metadata={"help": "the command line's argparse parser"})
    value: Callable[[str], object] = field(metadata={"help": "a -p value's text -> its Python value"})


class DeadlineReached(KeyboardInterrupt):
    """Raised in the running step when the deadline passes (its `finally` clauses run, as for Ctrl-C)."""


# ---- the plan -------------------------------------------------------------------------------------------------


def parse_only(values: Sequence[str] | None) -> dict[str, set[str] | None]:
    """``--only`` values -> {paper: chapters (None: all of them)}; an unknown paper or chapter raises a ConfigError
    naming the valid choices. No values: every paper."""
    from .papers import get_paper, papers

    if not values:
        return {name: None for name in papers()}
    chosen: dict[str, set[str] | None] = {}
    for value in values:
        name, _, chapter = value.partition("/")
        paper = get_paper(name) if name in papers() else None
        if paper is None:  # a chapter's folder that is not a paper (multilingual/lab): its paper
            owners = [p for p in papers().values() if value in p.chapters]
            if not owners:
                choose("paper", name, papers())  # raises, naming the papers
            paper, chapter = owners[0], value
        if chapter:
            full = chapter if "/" in chapter else f"{name}/{chapter}"
            choose(f"chapter of {paper.name}", full, paper.chapters)
            if chosen.get(paper.name, set()) is not None:
                chosen.setdefault(paper.name, set()).add(full)
        else:
            chosen[paper.name] = None
    order = list(papers())
    return {p: chosen[p] for p in sorted(chosen, key=order.index)}


def takes_time_limit(parser, argv: Sequence[str]) -> bool:
    """Whether the `xlrepro` subcommand `argv` has a --time-limit option (the command line's `parser` says)."""
    for word in argv:
        sub = next((a for a in parser._actions if a.choices and isinstance(a.choices, dict) and word in a.choices),
                   None)
        if sub is None:
            break
        parser = sub.choices[word]
    return any("--time-limit" in a.option_strings for a in parser._actions)


def make_plan(cli: Cli, only: dict[str, set[str] | None], parameters: dict | None = None,
              skip_train: bool = False) -> list[Step]:
    """The steps for the papers and chapters of `only` (`parse_only`), in book order: each paper's training
    commands, then its chapters. `parameters` (``-p``) go to every chapter that declares them; one that no selected
    chapter declares raises a ConfigError."""
    from .papers import get_paper

    parameters = parameters or {}
    parser = cli.build_parser()
    steps: list[Step] = []
    used: set[str] = set()
    trains: set[tuple[str, ...]] = set()  # a training several papers need (mini-mBERT) is planned once, first
    for name, wanted in only.items():
        paper = get_paper(name)
        seconds, text = recorded_time(name)
        if not skip_train:
            for i, command in enumerate(paper.reproduce):
                if tuple(command) in trains:
                    continue
                trains.add(tuple(command))
                steps.append(Step("train", name, tuple(command), needs_gpu=True,
                                  takes_time_limit=takes_time_limit(parser, command),
                                  estimate=text if i == 0 else (
                                      "unknown" if seconds is None and text.startswith("unknown")
                                      else f"counted with {name}'s first training step"),
                                  estimate_s=seconds if len(paper.reproduce) == 1 else None))
        for chapter in paper.chapters:
            if wanted is not None and chapter not in wanted:
                continue
            declared = cli.chapter_parameters(chapter)
            given = tuple((k, v) for k, v in parameters.items() if k in declared)
            used.update(k for k, _ in given)
            wall, where = chapter_wall_time(chapter)
            steps.append(Step("publish", name, ("run", chapter, "--publish"), chapter=chapter, parameters=given,
                              estimate="unknown" if wall is None else f"{wall:.0f} s on {where} (its run record)",
                              estimate_s=wall))
    unused = [k for k in parameters if k not in used]
    if unused:
        raise ConfigError(f"no chapter of the plan has the parameter {', '.join(map(repr, unused))}")
    return after_what_they_read(steps, {c: r for name in only for c, r in get_paper(name).reads.items()})


def after_what_they_read(steps: list[Step], reads: dict[str, tuple[str, ...]]) -> list[Step]:
    """`steps` with each chapter that reads other chapters' published results (`Paper.reads`) moved right after
    the last of those in the plan; one whose sources are not in the plan keeps its place (it reads what
    book/results already holds)."""
    out = list(steps)
    for chapter, sources in reads.items():
        at = next((i for i, s in enumerate(out) if s.kind == "publish" and s.chapter == chapter), None)
        last = max((i for i, s in enumerate(out) if s.kind == "publish" and s.chapter in sources), default=-1)
        if at is not None and last > at:
            out.insert(last, out.pop(at))  # after the pop, index `last` is right after the last source
    return out


# ---- recorded times -------------------------------------------------------------------------------------------


def _results(paper: str) -> Path:
    from .paths import repo_root
    return repo_root() / "book" / "results" / paper


def _short_card(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'H100'; '2 x NVIDIA H200' -> '2 x H200'."""
    return re.sub(r"NVIDIA\s+(\w+)(\s+\d+GB\s+\w+)?", r"\1", name).strip()


def recorded_time(paper: str) -> tuple[float | None, str]:
    """The GPU time a paper's published training took, from the published results of the paper and of its chapters'
    folders: (seconds or None, the text to print, with the card and the source). (None, "unknown ...") where nothing
    was measured. Sources: ``runtime.csv`` (the stacks' ``train_seconds``, summed), the run records' training lines
    ("N GPU-minutes" / "N worker-minutes", summed over the chapters), ``*training.json`` (``seconds``, ``device``)."""
    from .papers import get_paper

    folders = list(dict.fromkeys([paper, *(c.split("/")[0] for c in get_paper(paper).chapters)]))
    records = [json.loads(p.read_text(encoding="utf-8")) for f in folders
               for p in sorted(_results(f).glob("run_record_*.json"))]
    cards = sorted({r.get("training devices", "") for r in records} - {"", "none recorded"})
    card = ", ".join(map(_short_card, cards)) or "an unrecorded card"
    found: list[tuple[float | None, str]] = []
    for folder in folders:
        runtime = _results(folder) / "runtime.csv"
        if runtime.exists():
            import pandas as pd
            frame = pd.read_csv(runtime)
            seconds = float(frame.loc[frame["metric"] == "train_seconds", "value"].sum())
            if seconds > 0:
                found.append((seconds, f"about {seconds / 60:.0f} GPU-minutes on {card} (the stacks' training, "
                                       f"{folder}/runtime.csv)"))
        for path in sorted(_results(folder).glob("*training.json")):
            rec = json.loads(path.read_text(encoding="utf-8"))
            if "seconds" in rec:
                found.append((float(rec["seconds"]), f"{path.stem.replace('_', ' ')}: about {rec['seconds'] / 60:.0f} "
                                                     f"GPU-minutes on {_short_card(rec.get('device', card))}"))
    totals: dict[tuple[str, str], float] = {}
    for r in records:
        for key, value in r.items():
            m = re.match(r"(\d+(?:\.\d+)?) (GPU|worker)-minutes", str(value))
            if m:
                totals[key, m.group(2)] = totals.get((key, m.group(2)), 0.0) + float(m.group(1))
    for (key, unit), minutes in totals.items():
        found.append((minutes * 60 if unit == "GPU" else None,
                      f"{key}: about {minutes:.0f} {unit}-minutes on {card} (summed over its chapters' run records)"))
    if not found:
        return None, "unknown (no published record of its training time)"
    known = [s for s, _ in found]
    return (sum(known) if None not in known else None), "; ".join(text for _, text in found)


def chapter_wall_time(chapter: str) -> tuple[float | None, str]:
    """The published run's wall time of a chapter and the machine that executed it (its run record), or
    (None, "")."""
    folder, name = chapter.split("/")
    path = _results(folder) / f"run_record_{name}.json"
    if not path.exists():
        return None, ""
    record = json.loads(path.read_text(encoding="utf-8"))
    return record.get("wall time (s)"), record.get("executed on", "an unrecorded machine")


# ---- state: what earlier runs finished -----------------------------------------------------------------------


def state_path() -> Path:
    from .paths import runs_dir
    return runs_dir() / "reproduce" / "state.json"


def load_state(path: Path | None = None) -> dict:
    path = path or state_path()
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def save_state(state: dict, path: Path | None = None) -> None:
    from .atomic import write_json
    write_json(path or state_path(), state)


def runs_fingerprint(paper: str) -> float:
    """The newest modification time of a file under runs/<paper>* (exploratory runs and locks left out): a chapter
    published after it is up to date with its runs. 0 where there are no runs."""
    from .paths import runs_dir

    newest = 0.0
    for folder in runs_dir().glob(f"{paper}*"):
        for root, dirs, files in os.walk(folder):
            dirs[:] = [d for d in dirs if d not in ("exploratory", ".locks")]
            for f in files:
                try:
                    newest = max(newest, os.stat(os.path.join(root, f)).st_mtime)
                except OSError:
                    pass
    return newest


def _commit() -> str:
    from .runrecord import git_commit
    return git_commit()


def is_done(step: Step, state: dict, commit: str) -> bool:
    """Whether an earlier run finished `step` and it is still up to date (see the module's docstring)."""
    entry = state.get(step.key)
    if not entry or entry.get("commit") != commit:
        return False
    if step.kind == "train":
        return True
    from .paths import repo_root
    if entry.get("parameters") != repr(step.parameters):
        return False
    if not (repo_root() / "book" / f"{step.chapter}.ipynb").exists():
        return False
    return entry.get("runs", 0.0) >= runs_fingerprint(step.paper)


# ---- running --------------------------------------------------------------------------------------------------


def check_gpus(gpus: str | None, available: int) -> list[int]:
    """``--gpus``: a count ('2': the first two) or a list of indices ('0,2'). Returns the indices; raises a
    ConfigError for a malformed value or one this machine lacks (`available` GPUs)."""
    valid = f"a count such as 2 or indices such as 0,1 (this machine has {available} GPU(s)" + (
        f": {', '.join(map(str, range(available)))})" if available else ")")
    if gpus is None:
        return list(range(available))
    text = gpus.strip()
    if re.fullmatch(r"\d+", text) and "," not in text:
        n = int(text)
        if n < 1 or n > available:
            raise ConfigError(f"--gpus {gpus!r}: valid choices are {valid}")
        return list(range(n))
    if not re.fullmatch(r"\d+(,\d+)*", text):
        raise ConfigError(f"--gpus {gpus!r} is malformed; valid choices are {valid}")
    ids = [int(x) for x in text.split(",")]
    if len(set(ids)) != len(ids) or any(i >= available for i in ids):
        raise ConfigError(f"--gpus {gpus!r}: valid choices are {valid}")
    return ids


def gpu_count() -> int:
    import torch
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@contextmanager
def _alarm(seconds: float | None):
    """Raise DeadlineReached in the main thread after `seconds` (None: no alarm)."""
    if seconds is None:
        yield
        return

    def handler(signum, frame):
        raise DeadlineReached("the deadline passed")
    try:
        previous = signal.signal(signal.SIGALRM, handler)
    except ValueError:  # not the main thread
        yield
        return
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_step(step: Step, time_limit: float | None, cli: Cli, allow_cpu: bool = False) -> int:
    """Run one step in this process: a training command through `xlrepro.cli.main` (with --time-limit when given),
    a chapter through `run_chapter(..., publish=True)`. Returns the exit status."""
    if step.kind == "train":
        argv = [*step.argv, *(["--time-limit", f"{time_limit:.0f}"] if time_limit is not None else []),
                *(["--allow-cpu"] if allow_cpu else [])]
        try:
            return cli.main(argv)
        except SystemExit as exc:  # a module's own argparse error inside the training: its status
            return exc.code if isinstance(exc.code, int) else 1
    from papermill.exceptions import PapermillExecutionError
    try:
        print(cli.run_chapter(step.chapter, dict(step.parameters), publish=True, allow_cpu=allow_cpu), flush=True)
    except PapermillExecutionError as err:
        print(f"xlrepro: chapter {step.chapter} stopped in cell [{err.exec_count}]: {err.ename}: {err.evalue}",
              file=sys.stderr)
        return 1
    return 0


@dataclass
class Outcome:
    done: list[Step] = field(default_factory=list)
    skipped: list[Step] = field(default_factory=list)  # finished by an earlier run
    left: list[Step] = field(default_factory=list)
    failed: list[Step] = field(default_factory=list)  # each stopped the rest of its paper
    reason: str = ""


def execute(steps: Sequence[Step], *, deadline: float | None = None, runner: Callable[[Step, float | None], int],
            clock: Callable[[], float] = time.monotonic, state_file: Path | None = None,
            commit: str | None = None, hard_stop: bool = False, out=None) -> Outcome:
    """Run `steps` in order with `runner(step, time_limit)`, skipping those an earlier run finished, stopping
    before `deadline` seconds (from now) run out; records each finished step in the state file as it goes.
    `hard_stop`: also interrupt a step at the deadline itself (SIGALRM; the real clock only)."""
    commit = commit or _commit()
    out = out or sys.stdout
    state = load_state(state_file)
    start = clock()
    outcome = Outcome()
    broken: set[str] = set()  # papers with a failed step: their later steps are left
    for n, step in enumerate(steps):
        if step.paper in broken:
            outcome.left.append(step)
            continue
        if is_done(step, state, commit):
            outcome.skipped.append(step)
            print(f"= {step.command()}  (done by an earlier run)", file=out, flush=True)
            continue
        left = None if deadline is None else deadline - (clock() - start)
        if left is not None:
            if left < MIN_STEP_S:
                outcome.reason = f"{left:.0f} s left before the deadline"
            elif not step.takes_time_limit and step.estimate_s is not None and step.estimate_s > left:
                outcome.reason = (f"{step.command()} took {step.estimate_s:.0f} s in the published run; "
                                  f"{left:.0f} s are left")
            if outcome.reason:
                outcome.left += list(steps[n:])
                return outcome
        limit = left - MARGIN_S if left is not None and step.takes_time_limit else None
        print(f"+ {step.command()}" + (f"  (time limit {limit:.0f} s)" if limit is not None else ""),
              file=out, flush=True)
        began = clock()
        try:
            with _alarm(left if hard_stop else None):
                rc = runner(step, limit)
        except DeadlineReached:
            outcome.left += list(steps[n:])
            outcome.reason = "the deadline passed during the step"
            return outcome
        took = clock() - began
        if rc != 0:  # the rest of this paper waits; the other papers go on
            print(f"xlrepro reproduce: {step.command()} exited with status {rc}; the rest of {step.paper} is left",
                  file=out, flush=True)
            outcome.failed.append(step)
            outcome.left.append(step)
            broken.add(step.paper)
            continue
        if limit is not None and took >= limit - 1:  # stopped at its time limit: it resumes on the next run
            outcome.left += list(steps[n:])
            outcome.reason = f"{step.command()} reached its time limit (it resumes on the next run)"
            return outcome
        outcome.done.append(step)
        if limit is None:  # ran to its end: recorded (a time-limited training is checked again next time)
            state[step.key] = {"commit": commit, "seconds": round(took, 1),
                               "finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
            if step.kind == "publish":
                state[step.key].update(parameters=repr(step.parameters), runs=runs_fingerprint(step.paper))
            save_state(state, state_file)
    if outcome.failed and not outcome.reason:
        outcome.reason = "failed: " + "; ".join(s.command() for s in outcome.failed)
    return outcome


# ---- the command ----------------------------------------------------------------------------------------------


def describe(steps: Sequence[Step], state: dict, commit: str) -> list[str]:
    """The plan as lines: number, what, where it runs, its recorded time, and whether an earlier run did it."""
    lines = []
    for i, s in enumerate(steps, 1):
        what = "train " + s.paper if s.kind == "train" else "publish " + s.chapter
        status = "done" if is_done(s, state, commit) else "to do"
        lines.append(f"{i:2d}. {what:34s} {s.command()}")
        lines.append(f"    {'GPU' if s.needs_gpu else 'CPU or GPU'}; recorded: {s.estimate}; {status}")
    return lines


def main(a, cli: Cli) -> int:
    """`xlrepro reproduce` with the parsed arguments `a` (see `xlrepro.cli.build_parser`). Exit 0 when every step
    is done, 3 when the deadline stopped it (run the same command again), 1 when a step failed (the rest of its
    paper is left, the other papers go on), 2 for a refusal before anything ran."""
    if a.deadline is not None and a.deadline <= 0:
        raise ConfigError(f"--deadline must be a positive number of seconds; got {a.deadline}")
    only = parse_only(a.only)
    steps = make_plan(cli, only, {k: cli.value(v) for k, v in a.parameter}, skip_train=a.skip_train)
    commit = _commit()
    state = load_state()
    if a.dry_run:
        print(f"xlrepro reproduce: {len(steps)} steps" + (f", deadline {a.deadline:.0f} s" if a.deadline else ""))
        print("\n".join(describe(steps, state, commit)))
        return 0
    available = gpu_count()
    gpus = check_gpus(a.gpus, available) if available or a.gpus is not None else []
    todo = [s for s in steps if not is_done(s, state, commit)]
    needs = next((s for s in todo if s.needs_gpu), None)
    if needs is not None and not available and not a.allow_cpu:
        print(f"xlrepro: {needs.command()} needs a GPU and this machine has none; run on a GPU machine, or "
              f"--only a chapter with --skip-train to publish from runs already here", file=sys.stderr)
        return 2
    if available and a.gpus is not None:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        names = visible.split(",") if visible else [str(i) for i in range(available)]
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(names[i] for i in gpus)

    def runner(step, limit):
        return run_step(step, limit, cli, allow_cpu=a.allow_cpu)
    outcome = execute(steps, deadline=a.deadline, runner=runner, commit=commit, hard_stop=True)
    return report(outcome, len(steps))


def report(outcome: Outcome, total: int, out=None) -> int:
    """The closing lines: what was done, what is left and why; the exit status."""
    out = out or sys.stdout
    print(f"xlrepro reproduce: {len(outcome.done)} steps done now, {len(outcome.skipped)} done before, "
          f"{len(outcome.left)} left of {total}", file=out)
    if outcome.left:
        print(f"stopped: {outcome.reason}", file=out)
        for s in outcome.left:
            print(f"  left: {s.command()}", file=out)
        print("run the same command again to go on", file=out)
    if outcome.failed:
        return 1
    return 3 if outcome.left else 0
