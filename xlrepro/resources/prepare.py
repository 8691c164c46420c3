"""`xlrepro prepare --profile paper`: check, and where it can, download the resources the chapters need.

    plan = needed_resources(chapters)          # [Resource], from the papers' declarations
    print(dry_run_table(plan))                 # every resource with its size, source and folder; the total
    lines = prepare_resources(plan)            # downloads what a script may download; ConfigError otherwise

Hub resources are fetched with `huggingface_hub.snapshot_download` into the hub's cache; ``url`` archives into
``<cache>/paper/<name>/``. A resource that is missing and cannot be fetched here (the hub offline, no network, or a
licence that needs a person) stops with a one-line ConfigError naming it, the variable that points to a local copy
and where to get it (the CLI exits with status 2). Nothing is ever replaced by a lab stand-in.
"""
from __future__ import annotations

import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from ..config import ConfigError, plural
from .encoders import ENCODER_FILES, hub_offline
from .registry import RESOURCES, Resource, locate, resources_for


def needed_resources(chapters) -> list[Resource]:
    return [RESOURCES[name] for name in resources_for(chapters)]


def human_size(n: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def dry_run_table(plan: list[Resource]) -> str:
    """One line per resource (name, approximate size, how it is obtained, where it is or would be, source), then
    the total; reads nothing from the network."""
    lines = []
    for res in plan:
        where = locate(res.name)
        state = f"present at {where}" if where else f"missing (${res.env})"
        lines.append(f"{res.name:10} {human_size(res.size_bytes):>9}  {res.how:6}  {state}  <- {res.url}")
    total = sum(r.size_bytes for r in plan)
    lines.append(f"total: {plural(len(plan), 'resource')}, about {human_size(total)}"
                 f" ({human_size(sum(r.size_bytes for r in plan if not locate(r.name)))} still to get)")
    return "\n".join(lines)


def _missing_line(res: Resource, why: str) -> str:
    how = {"hub": f"on a machine with a network (HF_HUB_OFFLINE unset) run `xlrepro prepare --profile paper`, or "
                  f"set {res.env} to a local copy (a folder written by save_pretrained)",
           "url": f"download {res.url}, unpack it and set {res.env} to the folder holding {', '.join(res.files)}",
           "manual": f"{res.instructions}; set {res.env} to that folder"}[res.how]
    return f"resource {res.name} ({res.description.split(':')[0]}) is missing{why}: {how}"


def _fetch_hub(res: Resource) -> Path:
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(res.hub_id, allow_patterns=list(ENCODER_FILES)))
    except Exception as exc:  # no network, a proxy refusing, an unknown repository
        raise ConfigError(_missing_line(res, f" and could not be downloaded ({type(exc).__name__})")) from None


def _fetch_url(res: Resource) -> Path:
    target = res.cache_folder().parent if res.subdir else res.cache_folder()
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target) as tmp:
        archive = Path(tmp) / Path(res.url).name
        try:
            with urllib.request.urlopen(res.url, timeout=60) as response, open(archive, "wb") as out:
                shutil.copyfileobj(response, out)
        except (urllib.error.URLError, OSError) as exc:
            raise ConfigError(_missing_line(res, f" and could not be downloaded ({exc})")) from None
        if not zipfile.is_zipfile(archive):
            raise ConfigError(f"resource {res.name}: {res.url} is not a zip archive; {_missing_line(res, '')}")
        with zipfile.ZipFile(archive) as z:
            z.extractall(target)
    if locate(res.name) is None:
        raise ConfigError(f"resource {res.name}: the archive from {res.url} has no {', '.join(res.files)} under "
                          f"{res.subdir or 'its top folder'}")
    return res.cache_folder()


def prepare_resources(plan: list[Resource]) -> list[str]:
    """Make every resource of `plan` present: those already there are listed; hub and url ones are downloaded
    (unless HF_HUB_OFFLINE is set); manual ones that are missing are described. Returns the lines to print; raises
    ConfigError (one line) for the first resource that cannot be fetched here, or, after the downloads, naming the
    manual resources still missing."""
    lines, manual = [], []
    for res in plan:
        where = locate(res.name)
        if where is not None:
            lines.append(f"{res.name}: present at {where}")
        elif res.how == "manual":
            manual.append(res)
        elif hub_offline():
            raise ConfigError(_missing_line(res, " and HF_HUB_OFFLINE is set"))
        else:
            folder = _fetch_hub(res) if res.how == "hub" else _fetch_url(res)
            lines.append(f"{res.name}: downloaded into {folder}")
    if manual:
        lines += [f"{res.name}: needs a manual download: {res.instructions}; then set {res.env} to the folder"
                  for res in manual]
        print("\n".join(lines))
        names = ", ".join(r.name for r in manual)
        raise ConfigError(f"{plural(len(manual), 'resource')} to get by hand ({names}): "
                          + "; ".join(f"set {r.env}" for r in manual) + " (the lines above say where to get them)")
    return lines


def prepare_command(profile: str, only: str | None = None, dry_run: bool = False) -> list[str] | None:
    """The paper-profile step of `xlrepro prepare`: the chapters chosen by `only` (a chapter '<paper>/<notebook>', a
    package function's key '<paper>/<module>.<function>' of `Paper.resources`, or a paper's name; default every
    chapter and function), their resources listed (`dry_run`: with sizes, and None returned) or
    made present (`prepare_resources`). Returns the names of the papers whose own `prepare` should run next.
    `only` and `dry_run` apply to the paper profile only (ConfigError otherwise)."""
    from ..config import check_profile, choose
    from ..papers import papers

    check_profile(profile)
    if profile != "paper":
        raise ConfigError(f"--only and --dry-run apply to --profile paper (the lab profile downloads nothing); "
                          f"got --profile {profile}")
    # the chapters, then the paper paths run as package functions ('<paper>/<module>.<function>' keys of resources)
    every = {c: p.name for p in papers().values() for c in (*p.chapters, *p.resources)}
    if only is None:
        chapters = list(every)
    elif only in papers():
        chapters = [c for c in every if every[c] == only]
    else:
        chapters = [choose("chapter or paper for --only", only, [*papers(), *every])]
    plan = needed_resources(chapters)
    if dry_run:
        print(dry_run_table(plan) if plan else f"{', '.join(chapters)}: no resource needed")
        return None
    print("\n".join(prepare_resources(plan)))
    return sorted({every[c] for c in chapters}, key=list(papers()).index)
