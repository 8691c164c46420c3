"""The scaling pilots of the K et al. 2020 chapters: the base B-BERT's pair cells on more text and more steps.

The lab recipe's base B-BERT fails its transfer gate (gates.yaml, ``base_transfers``). The levers are tried on the
base pair cells alone, each profile of experiments.yaml declared with its gate before its cells ran:

- ``alltext``: every Bible edition of a language plus its LibreOffice help paragraphs (same chapter half, same
  recipe), trained with ``--part base`` (es, hi, ru; 3 seeds);
- ``alltext2x``: the same text with twice the pre-training steps, ``--part pilot`` (es, ru), seed 0;
- ``alltext4x``: four times the steps, ``--part pilot``, seed 0, with snapshots after a quarter, half and three
  quarters of the steps evaluated like the final model (the zero-shot learning curve, ``pilot_<profile>_curve.csv``,
  read back with `transfer_curves`).

`publish` copies a profile's trained cells into the book (``pilot_<profile>.csv`` in the chapters' long format, with
each cell's ``majority/<cell>`` rows; ``pilot_<profile>/stack_<key>.json``, the stacks' timing records with their MLM
loss curves; ``pilot_<profile>/config_<cell>.json``; ``pilot_<profile>_corpus.csv``, the corpus card;
``pilot_<profile>_curve.csv``, the snapshots' results). The linguistic chapter reads them back with `recipe_table`,
`loss_curves` and `transfer_curves`:

    python -m xlrepro.papers.k2020.pilots alltext alltext2x alltext4x

`publish_recipe` publishes table cells retrained with a scaling profile's recipe (``--part``, e.g. ``es``: the
cells of Tables 1-3 and 8-11 whose target is Spanish at ``alltext4x``) as a stronger recipe beside the lab results:
each claim is read on it where it holds every model the claim reads (`xlrepro.claims.claims_table`'s ``recipes``):

    python -m xlrepro.papers.k2020.pilots alltext4x --part es

`restore` goes the other way: a profile's published results and stack timings back into runs/k2020/<profile>, so
that a machine with the book but not the runs carries on the profile's parts (the planner skips the published cells
and plans with their measured speeds):

    python -m xlrepro.papers.k2020.pilots alltext8x --restore
"""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pandas as pd

from xlrepro import atomic
from xlrepro.config import ConfigError, choose, plural

from .config import PROFILES, experiments_of, load_plan
from .constants import PILOTS, RECIPES
from .gates import gate_passed


def publish(profile: str, results: Path | None = None) -> Path:
    """Copy `profile`'s trained base cells (part ``base``) from runs/k2020/<profile> into `results` (book/results/k2020):
    their results with the majority baselines, the stacks' timing records and the cells' configs, and the corpus
    card. Returns the CSV written. Fails, naming the cells, when none of them has results."""
    from xlrepro.results import results_dir

    from . import report as R
    choose("profile", profile, list(PILOTS))
    results = Path(results) if results is not None else results_dir("k2020")
    names = experiments_of(load_plan(), "base")
    frame = R.collect(names, profile)
    if frame.empty:
        raise ConfigError(f"no trained cell of profile {profile} ({', '.join(names)}) under {R.run_folder(profile)}: "
                          f"run `xlrepro train k2020 --part base --profile {profile}` (or --part pilot) first")
    out = results / f"pilot_{profile}.csv"
    with atomic.atomic_path(out) as tmp:
        frame.to_csv(tmp, index=False)
    folder = results / f"pilot_{profile}"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    trained = set(frame["experiment"])
    curve = snapshot_results(profile, frame)
    shown = pd.concat([frame, curve], ignore_index=True) if len(curve) else frame  # a curve run's stacks too
    for timing in sorted(R.run_folder(profile).glob("stacks/*/timing.json")):
        record = json.loads(timing.read_text())
        if all_evaluated(record, shown):
            atomic.write_json(folder / f"stack_{timing.parent.name}.json", record)
    write_configs(profile, trained, folder)
    with atomic.atomic_path(results / f"pilot_{profile}_corpus.csv") as tmp:
        R.corpus_card(profile).to_csv(tmp, index=False)
    if not curve.empty:
        with atomic.atomic_path(results / f"pilot_{profile}_curve.csv") as tmp:
            curve.to_csv(tmp, index=False)
    return out


def publish_recipe(profile: str, parts, results: Path | None = None) -> Path:
    """Publish the table cells of `parts` trained with `profile`'s recipe as a stronger recipe beside the lab results
    (`xlrepro.verdicts.recipe_frames`): for each chapter, its cells of those parts and of the parts the recipe
    published before (recipes.json's ``parts``) with every planned seed evaluated (and their ``majority/<cell>``
    rows) into ``recipe_<profile>/<chapter>.csv``, the timing records of the stacks whose every model is published
    beside them, and the recipe in ``recipes.json``, the recipes ordered strongest first (`PILOTS` from the end). A
    cell with a seed still to train stays out (its claims read the lab results until it is complete). The folder is
    built aside and then put in place. Returns the recipe's folder; fails where no cell of the parts is complete."""
    from xlrepro.results import results_dir
    from xlrepro.verdicts import RECIPES as INDEX

    from . import report as R
    from .bbert import Cell
    from .config import not_run
    from .constants import CHAPTERS, PARTS
    choose("profile", profile, list(PILOTS))
    plan = load_plan()
    results = Path(results) if results is not None else results_dir("k2020")
    index = results / INDEX
    listed = json.loads(index.read_text()) if index.is_file() else []
    before = next((r.get("parts") or [] for r in listed if r["name"] == profile), [])
    parts = list(dict.fromkeys([*before, *([parts] if isinstance(parts, str) else parts)]))
    for part in parts:
        choose("part", part, list(plan.parts))
    wanted = {n for p in parts for n in experiments_of(plan, p)}
    folder = results / f"recipe_{profile}"
    frames = {}
    for chapter in CHAPTERS:
        skipped = not_run(plan, PARTS[chapter], profile)
        names = [n for n in dict.fromkeys(n for p in PARTS[chapter] for n in experiments_of(plan, p))
                 if n in wanted and n not in skipped]
        complete = [n for n in names if all(Cell(plan, profile, n).evaluated(s) for s in plan.seeds)]
        frame = R.collect(complete, profile)
        if len(frame):
            frames[chapter] = frame
    if not frames:
        raise ConfigError(f"no cell of {', '.join(sorted(wanted))} has all its seeds evaluated under "
                          f"{R.run_folder(profile)}")
    aside = results / f".recipe_{profile}.new"
    if aside.exists():
        shutil.rmtree(aside)
    aside.mkdir(parents=True)
    for chapter, frame in frames.items():
        R.save(frame, aside, chapter)
    every = pd.concat(frames.values(), ignore_index=True)
    for timing in sorted(R.run_folder(profile).glob("stacks/*/timing.json")):
        record = json.loads(timing.read_text())
        if all_evaluated(record, every):
            atomic.write_json(aside / f"stack_{timing.parent.name}.json", record)
    write_configs(profile, every["experiment"], aside)
    if folder.exists():
        shutil.rmtree(folder)
    aside.rename(folder)
    entry = {"name": profile, "label": RECIPES[profile], "folder": folder.name, "parts": parts}
    recipes = [r for r in listed if r["name"] != profile] + [entry]
    strength = {name: i for i, name in enumerate(PILOTS)}  # more text and steps later in PILOTS: stronger
    recipes.sort(key=lambda r: -strength.get(r["name"], -1))
    atomic.write_json(index, recipes)
    return folder


def write_configs(profile: str, names, folder: Path) -> None:
    """``config_<cell>.json`` in `folder` ("/" written "__"): the config.json of each cell of `names` (the
    ``majority/<cell>`` rows' names skipped) that has one in its run folder at the plan's run key, which `restore`
    checks before it writes a published cell back."""
    from .bbert import Cell
    plan = load_plan()
    for name in sorted({n for n in names if not n.startswith("majority/")}):
        config = Cell(plan, profile, name).dir / "config.json"
        if config.is_file():
            atomic.write_json(Path(folder) / f"config_{name.replace('/', '__')}.json", json.loads(config.read_text()))


def restore(profile: str, results: Path | None = None, root: Path | None = None) -> list[str]:
    """Write `profile`'s published results back into its run folder (runs/k2020/<profile>/, or `root`), so that a
    machine with the book but not the runs carries on the profile's parts where they stand: the published cells
    (``pilot_<profile>.csv`` and the chapters' CSVs of ``recipe_<profile>/``) get each task's results file for each of
    the plan's seeds, so that `Cell.evaluated` holds and the planner trains them no more (their weights stayed
    where they trained: "evaluated elsewhere"); the published stacks' timing records go to
    ``stacks/<key>/timing.json``, the planner's measured speeds, and the published ``config_<cell>.json`` is the
    cell's config.json. A cell whose published config names another run key than the plan gives it now (its engine
    or recipe changed since) is not restored, and is said so: it is to be trained again. A file already there is
    left as it is. Returns the cells restored; fails, naming the files read, where nothing of the profile is
    published."""
    from xlrepro.results import results_dir

    from . import report as R
    from .bbert import ADJACENCY_TASK, NER_TASK, RESULT_COLUMNS, Cell
    from .constants import CHAPTERS
    choose("profile", profile, list(PILOTS))
    results = Path(results) if results is not None else results_dir("k2020")
    sources = [results / f"pilot_{profile}.csv", *(results / f"recipe_{profile}" / f"{c}.csv" for c in CHAPTERS)]
    sources = [f for f in sources if f.is_file()]
    if not sources:
        raise ConfigError(f"nothing of profile {profile} is published in {results} (pilot_{profile}.csv, "
                          f"recipe_{profile}/<chapter>.csv)")
    # as text, so that each value is written back as it was published
    frame = pd.concat([pd.read_csv(f, dtype={"experiment": str, "language": str, "value": str}) for f in sources],
                      ignore_index=True).drop_duplicates()
    frame = frame[~frame["experiment"].str.startswith("majority/")]
    plan = load_plan()
    restored = []
    configs = {f.stem.removeprefix("config_").replace("__", "/"): f
               for folder in (results / f"pilot_{profile}", results / f"recipe_{profile}")
               for f in sorted(folder.glob("config_*.json"))}
    for name, rows in frame.groupby("experiment", sort=False):
        cell = Cell(plan, profile, name, root=root)
        if name in configs:
            config = json.loads(configs[name].read_text())
            if config.get("key") != cell.key:
                print(f"{name}: published with run key {config.get('key')}, the plan now gives {cell.key}; "
                      f"not restored (to be trained again)")
                continue
            if not (cell.dir / "config.json").exists():
                atomic.write_json(cell.dir / "config.json", config)
        for (seed, task), d in rows.groupby(["seed", "task"], sort=False):
            if int(seed) not in cell.seeds:  # a curve run's extra seed: not a table's
                continue
            paths = {"sections": cell.dir / f"results_{int(seed)}.csv", NER_TASK: cell.ner_results_path(int(seed)),
                     ADJACENCY_TASK: cell.adjacency_results_path(int(seed))}
            path = paths[choose("task", task, list(paths))]
            if not path.exists():
                with atomic.atomic_path(path) as tmp:
                    d[RESULT_COLUMNS].to_csv(tmp, index=False)
        restored.append(name)
    runs = Path(root) if root is not None else R.run_folder(profile)
    for timing in [*sorted((results / f"pilot_{profile}").glob("stack_*.json")),
                   *sorted((results / f"recipe_{profile}").glob("stack_*.json"))]:
        target = runs / "stacks" / timing.stem.removeprefix("stack_") / "timing.json"
        if not target.exists():
            atomic.write_json(target, json.loads(timing.read_text()))
    return restored


def all_evaluated(record: dict, frame: pd.DataFrame) -> bool:
    """Whether every member ("<cell>/<seed>") of a stack's timing record has results in `frame`. The loss curves the
    book shows are those of evaluated models: a stack whose models were lost before their evaluation stays out
    (its seeds are trained again)."""
    evaluated = {f"{e}/{s}" for e, s in zip(frame["experiment"], frame["seed"])}
    return set(record["members"]) <= evaluated


def snapshot_results(profile: str, final: pd.DataFrame) -> pd.DataFrame:
    """The zero-shot learning curve of `profile`'s trained base cells: the section task's results of each snapshot
    (`Cell.evaluate_snapshot`, the profile's `snapshots`) and of the final model (`final`, from `publish`; its
    step the profile's last), with the majority rows, in the chapters' long format plus a ``step`` column. Empty
    when no snapshot was evaluated."""
    from .bbert import Cell
    plan = load_plan()
    steps = plan.profiles[profile].pretrain.steps
    frames, extra = [], []
    for name in experiments_of(plan, "base"):
        cell = Cell(plan, profile, name)
        mine = [pd.read_csv(f, dtype={"experiment": str, "language": str})
                for f in sorted(cell.dir.glob("snapshots/results_*_step*.csv"))]
        frames += mine
        # a seed outside the plan's (a curve run, e.g. part curve_hi) is in no table, so not in `final`: its final
        # model's section results come from its own file
        seeds = {int(s) for f in mine for s in f["seed"].unique() if s >= 0}
        extra += [pd.read_csv(cell.dir / f"results_{s}.csv", dtype={"experiment": str, "language": str})
                  for s in sorted(seeds - set(plan.seeds)) if (cell.dir / f"results_{s}.csv").exists()]
    if not frames:
        return pd.DataFrame()
    snaps = pd.concat(frames, ignore_index=True)
    done = set(snaps["experiment"])
    last = final[final["experiment"].isin(done | {f"majority/{n}" for n in done}) & (final["task"] == "sections")]
    return pd.concat([snaps, last.assign(step=steps), *[f.assign(step=steps) for f in extra]], ignore_index=True)


def transfer_curves(folder: Path, profiles=tuple(PILOTS)) -> pd.DataFrame:
    """recipe, cell, seed, step, target test, target dev, source test, majority (%): the zero-shot learning curves
    published with the pilots (``pilot_<profile>_curve.csv``), one row per evaluated snapshot and the final model;
    the majority class's accuracy on the target's test pairs. A run with its final model alone (trained without
    snapshots) is no curve and is left out, so every point of a cell averages the same runs."""
    rows = []
    for profile in profiles:
        path = Path(folder) / f"pilot_{profile}_curve.csv"
        if not path.exists():
            continue
        frame = pd.read_csv(path, dtype={"experiment": str, "language": str})
        majority = frame[frame["experiment"].str.startswith("majority/")]
        for step, f in frame[~frame["experiment"].str.startswith("majority/")].groupby("step"):
            f = pd.concat([f, majority])
            test, dev = _cells(f, "accuracy"), _cells(f, "dev_accuracy")
            for t in test.itertuples():
                d = dev[(dev["experiment"] == t.experiment) & (dev["seed"] == t.seed)]["target"]
                rows.append({"recipe": RECIPES[profile], "cell": t.experiment, "seed": t.seed, "step": int(step),
                             "target test": 100 * t.target, "target dev": 100 * float(d.mean()),
                             "source test": 100 * t.source, "majority": 100 * t.majority})
    columns = ["recipe", "cell", "seed", "step", "target test", "target dev", "source test", "majority"]
    curves = pd.DataFrame(rows, columns=columns)
    points = curves.groupby(["recipe", "cell", "seed"])["step"].transform("nunique")
    return curves[points > 1].sort_values(["recipe", "cell", "seed", "step"], ignore_index=True)


def _by_step(c: pd.DataFrame) -> tuple[pd.Series, int]:
    """A cell's curve at one recipe: the target's test accuracy per step (mean over its runs) and the runs counted."""
    return c.groupby("step")["target test"].mean(), c["seed"].nunique()


def transfer_reading(curves: pd.DataFrame) -> str:
    """`transfer_curves` in words: per recipe (its evaluated steps named) and cell, the target's test accuracy at
    each step (mean over its runs, counted) and the majority class; then, per recipe, how many cells gained between
    their last two points, and by at most how much."""
    if curves.empty:
        return ""
    recipes, rises = [], []
    for recipe, r in curves.groupby("recipe", sort=False):
        parts, gains = [], []
        for cell, c in r.groupby("cell", sort=False):
            by_step, runs = _by_step(c)
            parts.append(f"{cell} " + " → ".join(f"{v:.1f}" for v in by_step)
                         + f" ({runs} run{'s' if runs > 1 else ''}; majority {c['majority'].mean():.1f})")
            if len(by_step) > 1:
                gains.append(by_step.iloc[-1] - by_step.iloc[-2])
        steps = sorted(r["step"].unique())
        recipes.append(f"*{recipe}* (steps {', '.join(f'{s:,}' for s in steps)}): " + "; ".join(parts))
        up = [g for g in gains if g > 0]
        rises.append(f"in {len(up)} of {len(gains)} cells at *{recipe}*"
                     + (f" (by at most {max(up):.1f} points)" if up else ""))
    return ("**Zero-shot accuracy along pre-training** (target test pairs, %): " + ". ".join(recipes)
            + ". Between the last two points the target's accuracy rose " + "; ".join(rises) + ".")


def failing_curves(curves: pd.DataFrame, gates: pd.DataFrame, gate: str = "alltext4x_base_transfers",
                   finals: pd.DataFrame | None = None) -> str:
    """What the learning curves say of the cells that fail `gate` (gates.csv's detail names them,
    `gates.failing_cells`), at the gate's recipe. Per cell with two or more evaluated steps: its accuracy at the point
    nearest half of pre-training and at the end (mean over its curve runs, seeds named), the gain between them,
    whether it rose at every snapshot of that half, and whether its end lies below the gate's level (the majority
    class plus the gate's `points` in gates.yaml). The noise is the largest move between neighbouring snapshots in
    any cell's curve at that recipe: a gain beyond it reads as still rising; a gain within it, at every snapshot, as
    too slow for the curve to tell; any other as flat. Then each failing cell that a stronger recipe's gate passed
    (`gates.stronger_passes`), with its curve there and, with `finals` (`recipe_table`), its runs at the gate's last
    step beside the gate recipe's final models (the gap and 2 SE of the difference) and how far they moved after it:
    the two recipes differ in their learning-rate schedule as well as its length, so the pass is said to be the
    stronger recipe's, not the steps'. Empty when the gate is absent, passed, or none of its failing cells has a
    curve."""
    from .gates import failing_cells, gate_spec, stronger_passes, stronger_sentence
    row = gates[gates["gate"] == gate] if len(gates) else gates
    if row.empty:
        return ""
    recipe = RECIPES[gate.split("_")[0]]
    at = curves[curves["recipe"] == recipe] if len(curves) else curves
    if at.empty:
        return ""
    means = at.groupby(["cell", "step"])["target test"].mean()
    noise = max((means[c].diff().abs().max() for c in means.index.get_level_values(0).unique()
                 if len(means[c]) > 1), default=0.0)
    points = gate_spec(gate)["points"]
    parts = []
    for cell in failing_cells(row["detail"].iloc[0]):
        c = at[at["cell"] == cell]
        by_step, _ = _by_step(c)
        if len(by_step) < 2:
            continue
        last = by_step.index.max()
        half = min(by_step.index[:-1], key=lambda st: abs(st - last / 2))
        second = by_step[by_step.index >= half]
        gain, end = by_step[last] - by_step[half], by_step[last]
        level = c["majority"].mean() + points
        seeds = sorted(c["seed"].unique())
        every = bool((second.diff().dropna() > 0).all())
        up = ", up at every snapshot" if every else ""
        head = (f"{cell} (seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}) {by_step[half]:.1f} → "
                f"{end:.1f} from step {half:,} to {last:,} ({gain:+.1f} points{up})")
        if end >= level:
            runs = "this run" if len(seeds) == 1 else "these runs"
            parts.append(f"{head}, above the gate's level of {level:.1f} in {runs}: steps are not what it lacks (the "
                         "gate reads the mean of the tables' seeds minus 2 SE)")
        elif gain > noise:
            parts.append(f"{head}, below the gate's level of {level:.1f} and still rising: more steps might move it")
        elif every:
            parts.append(f"{head}, below the gate's level of {level:.1f}, rising within one run's noise: the curve "
                         "cannot tell whether more steps would make it pass")
        else:
            parts.append(f"{head}, below the gate's level of {level:.1f} and flat: more steps at this recipe are "
                         "unlikely to make it pass")
    if not parts:
        return ""
    text = (f"**The curves of the cells that fail `{gate}`** (single runs; one run's accuracy moves by up to "
            f"{noise:.1f} points between neighbouring snapshots in these curves, so only a larger gain over the second "
            "half reads as a rise): " + "; ".join(parts) + ".")
    last = int(at["step"].max())  # the gate recipe's final step
    for cell, (later, label) in stronger_passes(gates, gate).items():
        c = curves[(curves["recipe"] == label) & (curves["cell"] == cell)]
        by_step, runs = _by_step(c)
        text += " " + stronger_sentence([cell], later, label)
        if len(by_step) > 1:
            text += (f": {by_step.iloc[0]:.1f} → {by_step.iloc[-1]:.1f} from step {by_step.index[0]:,} to "
                     f"{by_step.index[-1]:,} (mean of {runs} run{'s' if runs > 1 else ''})")
        own = (finals[(finals["recipe"] == recipe) & (finals["cell"] == cell)]
               if finals is not None and len(finals) else pd.DataFrame())
        if last in by_step.index and len(own) and by_step.index[-1] > last:
            there = c[c["step"] == last]["target test"]  # the stronger recipe's runs at the gate recipe's last step
            mine, sd, n = (own[k].iloc[0] for k in ("target test", "target test sd", "seeds"))
            gap = there.mean() - mine
            two_se = 2 * (there.sem() ** 2 + sd ** 2 / n) ** 0.5  # as `report.mean_difference`, from mean and sd
            text += (f". At step {last:,}, part-way through its longer schedule, those runs stood at "
                     f"{there.mean():.1f} (sd {there.std():.1f}), where the final models of *{recipe}* ({int(n)} "
                     f"seeds) stood at {mine:.1f} (sd {sd:.1f}): a gap of {gap:+.1f} points, "
                     f"{'within' if abs(gap) <= two_se else 'beyond'} 2 SE of the difference ({two_se:.1f}). The two "
                     "recipes differ in their learning-rate schedule as well as its length, so the curves cannot "
                     f"separate the extra steps from the schedule; from step {last:,} to {by_step.index[-1]:,} those "
                     f"runs moved by {by_step.iloc[-1] - by_step[last]:+.1f} points")
        text += "."
    return text


# The part that adds a learning curve to base cells trained without snapshots, its command, and the commit that
# declared it (experiments.yaml, with its extra seed) before any of its runs.
CURVE_PART = ("curve_hi", "xlrepro train k2020 --part curve_hi --profile alltext4x --seeds 3 --compile", "60e25c3")


def transfer_missing(curves: pd.DataFrame) -> str:
    """The base cells with no learning curve among `curves`, in words, and the declared part that would add one
    where it covers them (`CURVE_PART`); empty when every base cell has a curve."""
    plan = load_plan()
    have = set(curves["cell"]) if len(curves) else set()
    missing = [n for n in experiments_of(plan, "base") if n not in have]
    if not missing:
        return ""
    part, command, declared = CURVE_PART
    covered = [n for n in missing if n in experiments_of(plan, part)]
    text = (f"No learning curve is published for {', '.join(missing)}: no snapshot of "
            f"{'its' if len(missing) == 1 else 'their'} runs was evaluated, so only the recipes' final models "
            "(the tables above) show how more steps moved them.")
    if covered:
        text += (f" Part `{part}`, declared before its run (commit {declared}), adds one for {', '.join(covered)} "
                 f"(an extra seed, in no table or gate mean): `{command}`.")
    return text


def transfer_figure(curves: pd.DataFrame):
    """One panel per cell: zero-shot accuracy on the target's test pairs (and the source's, thin) against the
    pre-training step at which the encoder was taken, a line per run coloured by recipe, with the majority class
    dashed."""
    import matplotlib.pyplot as plt

    cells = _panel_order(curves["cell"])
    colour = {r: f"C{i}" for i, r in enumerate(dict.fromkeys(curves["recipe"]))}  # one colour per recipe, every seed
    fig, axes = plt.subplots(1, len(cells), figsize=(max(2.6 * len(cells), 6), 3.2), sharey=True, squeeze=False)
    for ax, cell in zip(axes[0], cells):
        c = curves[curves["cell"] == cell].sort_values("step")
        for (recipe, seed), r in c.groupby(["recipe", "seed"]):
            ax.plot(r["step"], r["target test"], marker="o", linewidth=1.2, color=colour[recipe],
                    label=f"target ({recipe})")
            ax.plot(r["step"], r["source test"], marker=".", linewidth=0.6, color="grey", label="source")
        ax.axhline(c["majority"].mean(), color="black", linestyle="--", linewidth=0.8, label="majority class")
        ax.set_title(cell)
        ax.set_xlabel("pre-training step")
    axes[0][0].set_ylabel("test accuracy (%)")
    keep = {}  # every panel's entries: a recipe may be missing from some panels
    for ax in axes[0]:
        handles, labels = ax.get_legend_handles_labels()
        keep.update({label: h for label, h in zip(labels, handles) if label not in keep})
    fig.legend(keep.values(), keep.keys(), loc="lower center", ncol=len(keep), frameon=False)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


def _panel_order(cells) -> list[str]:
    """The distinct `cells` in the order of experiments.yaml's part ``base``, any others after them by name."""
    base = experiments_of(load_plan(), "base")
    return sorted(dict.fromkeys(cells), key=lambda c: (base.index(c) if c in base else len(base), c))


def _cells(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per (experiment, seed): the section task's `metric` on the cell's target (its second part) and on its source,
    and the majority class's on the target (from ``majority/<cell>``)."""
    sec = frame[(frame["task"] == "sections") & (frame["metric"] == metric)]
    rows = []
    for name in dict.fromkeys(sec["experiment"]):
        if name.startswith("majority/"):
            continue
        source, target = name.split("/")[0].split("-")[:2]
        major = sec[(sec["experiment"] == f"majority/{name}") & (sec["language"] == target)]["value"]
        cell = sec[sec["experiment"] == name]
        for seed in sorted(cell["seed"].unique()):
            s = cell[cell["seed"] == seed]
            value = lambda lang: float(s[s["language"] == lang]["value"].mean())  # noqa: E731 - NaN when absent
            rows.append({"experiment": name, "seed": int(seed), "target": value(target), "source": value(source),
                         "majority": float(major.mean()) if len(major) else float("nan")})
    return pd.DataFrame(rows, columns=["experiment", "seed", "target", "source", "majority"])


def run_health(frame: pd.DataFrame, rules=None) -> pd.DataFrame:
    """The paper's health rules (claims.yaml, ``never_left_majority``: a run whose accuracy on its own source language
    is within 2 points of the majority class there learnt nothing) on a results frame: experiment, seed, reason of
    each failed run."""
    from xlrepro.health import assess, failed_runs, load_rules

    from .report import source_over_majority
    rules = load_rules("k2020") if rules is None else rules
    over = source_over_majority(frame)
    if over.empty:  # no run with a majority row on its source language: nothing the rule can read
        return pd.DataFrame(columns=["experiment", "seed", "reason"])
    return failed_runs(assess(rules, {"source_over_majority": over}))


def recipe_table(frames: dict[str, pd.DataFrame], cells=None) -> pd.DataFrame:
    """recipe -> long results frame (the linguistic chapter's for ``lab``, pilot_<profile>.csv for the others) ->
    one row per (cell, recipe): seeds, the target's test and dev accuracy (mean and sample sd over seeds, %), the
    majority class's on the target's dev pairs, the source's test accuracy and the majority class's on the target's
    test pairs (%), and the test margin over the
    majority class minus 2 SE (points; blank with one seed), the quantity of the ``base_transfers`` gate. Runs the
    paper's health rule fails (`run_health`) are left out of every number and counted in ``failed runs``. `cells`
    (default: experiments.yaml's part ``base``) restricts the frames to those cells."""
    cells = list(cells) if cells is not None else experiments_of(load_plan(), "base")
    keep = cells + [f"majority/{c}" for c in cells]
    rows = []
    for recipe, frame in frames.items():
        frame = frame[frame["experiment"].isin(keep)]
        failed = run_health(frame)
        bad = set(zip(failed["experiment"], failed["seed"]))
        frame = frame[[(e, s) not in bad for e, s in zip(frame["experiment"], frame["seed"])]]
        test, dev = _cells(frame, "accuracy"), _cells(frame, "dev_accuracy")
        for name in dict.fromkeys(test["experiment"]):
            t, d = test[test["experiment"] == name], dev[dev["experiment"] == name]
            n = len(t)
            sd = t["target"].std(ddof=1) if n > 1 else float("nan")
            rows.append({"cell": name, "recipe": RECIPES.get(recipe, recipe), "seeds": n,
                         "failed runs": int((failed["experiment"] == name).sum()),
                         "target test": 100 * t["target"].mean(), "target test sd": 100 * sd,
                         "target dev": 100 * d["target"].mean() if len(d) else float("nan"),
                         "majority dev": 100 * d["majority"].mean() if len(d) else float("nan"),
                         "source test": 100 * t["source"].mean(), "majority": 100 * t["majority"].mean(),
                         "margin - 2 SE": 100 * (t["target"].mean() - 2 * sd / n ** 0.5 - t["majority"].mean())})
    order = {r: i for i, r in enumerate(RECIPES.values())} | {c: i for i, c in enumerate(cells)}
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    return table.sort_values(["cell", "recipe"], key=lambda c: c.map(order), kind="stable").reset_index(drop=True)


def scaling_reading(table: pd.DataFrame, gates: pd.DataFrame, points: float = 5.0) -> str:
    """The pilots in words, from `recipe_table` and gates.csv: per recipe, the cells whose test margin minus 2 SE
    (3 seeds) or dev margin (one seed) reaches `points`, then the outcome of each scaling profile's gate (pilot and
    base gates, in gates.csv's order; a superseded gate by the gate that replaced it). The gate's test (the mean minus
    2 SE at least `points` above the majority class) is stricter than the claims' preconditions on the same cells
    (`xlrepro.claims`, ``greater``: the difference at least `points`, and, separately, beyond 2 SE); the cells that
    fail the first and meet the second are named."""
    if table.empty:
        return ""
    parts, any_looser = [], False
    for recipe, t in table.groupby("recipe", sort=False):
        if (t["seeds"] > 1).all():
            ok = t[t["margin - 2 SE"] >= points]["cell"].tolist()
            diff, two_se = t["target test"] - t["majority"], 2 * t["target test sd"] / t["seeds"] ** 0.5
            looser = t[(t["margin - 2 SE"] < points) & (diff >= points) & (diff > two_se)]["cell"].tolist()
            any_looser = any_looser or bool(looser)
            parts.append(f"*{recipe}* ({int(t['seeds'].min())} seeds): {len(ok)} of {len(t)} cells transfer by "
                         f"the base gate's test ({', '.join(ok) or 'none'})"
                         + (f", and {', '.join(looser)} too by the claims' looser reading" if looser else ""))
        else:
            ok = t[t["target dev"] - t["majority dev"] >= points]["cell"].tolist()
            parts.append(f"*{recipe}* (one seed, dev): {len(ok)} of {len(t)} cells at least {points:g} points above "
                         f"the majority class ({', '.join(ok) or 'none'})")
    text = "**Reading it.** " + "; ".join(parts) + ". "
    if any_looser:
        text += (f"The claims' preconditions read the same words more loosely: the difference at least {points:g} "
                 f"points and, separately, beyond 2 SE (`xlrepro.claims`, test `greater`). ")
    scaling = gates[gates["gate"].str.split("_").str[0].isin(PILOTS)] if len(gates) else gates
    for g in scaling.itertuples():
        if str(g.detail).startswith("superseded by"):
            text += f"Gate `{g.gate}`: {str(g.detail).split(':')[0]}. "
            continue
        if pd.isna(g.passed) or pd.isna(g.value):
            text += f"Gate `{g.gate}`: pending ({g.detail}). "
            continue
        text += (f"Gate `{g.gate}`: {'passed' if gate_passed(g.passed) else 'failed'} ({g.value:g} of "
                 f"{g.threshold:g}; {g.detail}). ")
    return text.strip()


def loss_curves(folder: Path, profiles=tuple(PILOTS)) -> pd.DataFrame:
    """recipe, cell, seed, step, loss: the MLM loss curves of the pilots' stacks (``pilot_<profile>/stack_*.json``;
    each point the mean over the `loss_every` steps before it)."""
    rows = []
    for profile in profiles:
        for path in sorted((Path(folder) / f"pilot_{profile}").glob("stack_*.json")):
            record = json.loads(path.read_text())
            for step, losses in record["mlm_loss_curve"].items():
                for member, loss in zip(record["members"], losses):
                    cell, seed = member.rsplit("/", 1)
                    rows.append({"recipe": RECIPES[profile], "cell": cell, "seed": int(seed), "step": int(step),
                                 "loss": float(loss)})
    return pd.DataFrame(rows, columns=["recipe", "cell", "seed", "step", "loss"])


def final_drop(curves: pd.DataFrame, points: int = 3) -> pd.DataFrame:
    """recipe, cell, seed, steps, drop: how much each run's MLM loss fell between its last `points` recorded
    points (drop in nats over `steps` steps; positive: still falling)."""
    rows = []
    for (recipe, cell, seed), c in curves.sort_values("step").groupby(["recipe", "cell", "seed"], sort=False):
        tail = c.tail(points)
        rows.append({"recipe": recipe, "cell": cell, "seed": seed,
                     "steps": int(tail["step"].iloc[-1] - tail["step"].iloc[0]),
                     "drop": float(tail["loss"].iloc[0] - tail["loss"].iloc[-1])})
    return pd.DataFrame(rows, columns=["recipe", "cell", "seed", "steps", "drop"])


def loss_reading(drop: pd.DataFrame) -> str:
    """`final_drop` in words: in how many runs the loss still fell over their last recorded steps, and by how much,
    recipe by recipe (median and range, nats)."""
    if drop.empty:
        return ""
    order = {r: i for i, r in enumerate(RECIPES.values())}  # the recipes in the order of the levers
    drop = drop.sort_values("recipe", key=lambda c: c.map(order), kind="stable")
    by = "; ".join(f"*{recipe}* {d['drop'].median():.3f} ({d['drop'].min():.3f} to {d['drop'].max():.3f}, "
                   f"{plural(len(d), 'run')})" for recipe, d in drop.groupby("recipe", sort=False))
    return (f"**Was the loss still falling?** Over each run's last {drop['steps'].max():,} steps it fell in "
            f"{(drop['drop'] > 0).sum()} of {len(drop)} runs, with the learning rate decaying linearly to 0 over "
            f"those steps. Median fall in nats (range, runs): {by}.")


def loss_figure(curves: pd.DataFrame):
    """One panel per cell: MLM loss against pre-training step, a line per (recipe, seed), coloured by recipe."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    cells = _panel_order(curves["cell"])
    fig, axes = plt.subplots(1, len(cells), figsize=(2.6 * len(cells), 2.8), sharey=True, squeeze=False)
    for ax, cell in zip(axes[0], cells):
        sns.lineplot(data=curves[curves["cell"] == cell], x="step", y="loss", hue="recipe", units="seed",
                     estimator=None, hue_order=[r for r in RECIPES.values() if r in set(curves["recipe"])],
                     ax=ax, legend=ax is axes[0][-1], linewidth=1)
        ax.set_title(cell)
        ax.set_xlabel("pre-training step")
    axes[0][0].set_ylabel("MLM loss (nats)")
    if axes[0][-1].get_legend() is not None:
        sns.move_legend(axes[0][-1], "upper left", bbox_to_anchor=(1, 1), frameon=False, title=None)
    fig.tight_layout()
    return fig


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m xlrepro.papers.k2020.pilots", description=__doc__.split("\n")[0])
    p.add_argument("profiles", nargs="+", help=f"scaling profiles to publish: {', '.join(PILOTS)}")
    p.add_argument("--part", action="append", default=None,
                   help="publish the table cells of this part (experiments.yaml `parts`, e.g. es; repeatable) as a "
                        "stronger recipe beside the lab results (`publish_recipe`) instead of the base cells")
    p.add_argument("--restore", action="store_true",
                   help="the other way: write the profile's published results and stack timings back into its run "
                        "folder (`restore`), so that a machine without the runs carries on its parts")
    a = p.parse_args(argv)
    from . import report
    if a.restore and a.part:
        raise ConfigError("--restore writes back every published cell of the profile: give it without --part")
    for profile in a.profiles:
        choose("profile", profile, [q for q in PROFILES if q in PILOTS])
    for part in a.part or []:
        choose("part", part, list(load_plan().parts))
    for profile in a.profiles:
        if a.restore:
            cells = restore(profile)
            print(f"{profile}: {len(cells)} cells restored into {report.run_folder(profile)}")
        else:
            print(publish_recipe(profile, a.part) if a.part else publish(profile))


if __name__ == "__main__":
    main()
