"""The `xlrepro` command: prepare data, train a chapter's grid, execute chapters, benchmark.

  xlrepro prepare [--profile lab]
  xlrepro train dufter2020 [--ids 0 1 ...] [--seeds 0 42 ...] [--time-limit SECONDS] [--compile] [--workers-per-gpu 2]
  xlrepro train wu2019 --part select|zero-shot|in-language|frozen|all [--shard 0/4]
  xlrepro pretrain mini-mbert [--vocab shared] [--steps 20000] [--time-limit SECONDS]
  xlrepro run dufter2020/architecture [-p seeds "[0, 42]"] ...
  xlrepro bench [--cases small base mbert]
"""
from __future__ import annotations

import argparse
import ast
import os
import sys
from pathlib import Path

from .atomic import atomic_path
from .config import ConfigError, check_profile, load_chapter
from .paths import repo_root


def _value(text: str):
    """papermill-style parameter values: Python literals where they parse, else the string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def chapters() -> dict[str, Path]:
    root = repo_root() / "notebooks"
    return {f"{p.parent.name}/{p.stem}": p for p in sorted(root.glob("*/*.ipynb"))}


def run_chapter(name: str, parameters: dict, output: Path | None = None, kernel: str = "python3") -> Path:
    """Execute notebooks/<name>.ipynb with papermill into book/<name>.ipynb (the published run)."""
    import papermill

    known = chapters()
    if name not in known:
        raise ConfigError(f"unknown chapter {name!r}; valid choices: {', '.join(known)}")
    output = output or repo_root() / "book" / f"{name}.ipynb"
    with atomic_path(output, suffix=".ipynb") as tmp:  # the published notebook changes only when the run succeeded
        papermill.execute_notebook(str(known[name]), str(tmp), parameters=parameters, kernel_name=kernel,
                                   cwd=str(known[name].parent), progress_bar=False)
    return output


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="xlrepro", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="prepare the data cache")
    p.add_argument("--profile", default="lab")
    p.add_argument("--multilingual", action="store_true", help="also the 22-language Bible cache")
    p = sub.add_parser("train", help="train and evaluate a chapter's grid (resumable)")
    p.add_argument("chapter")
    p.add_argument("--ids", nargs="*", help="model IDs (default: every table of the chapter)")
    p.add_argument("--seeds", nargs="*", type=int)
    p.add_argument("--large-seeds", nargs="*", type=int, help="seeds of the BERT-base models (default: --seeds)")
    p.add_argument("--profile", default="lab")
    p.add_argument("--time-limit", type=float, help="stop (resumably) after this many seconds")
    p.add_argument("--part", help="wu2019 only: select, zero-shot, in-language, frozen or all")
    p.add_argument("--languages", nargs="*", help="wu2019 --part in-language only: these training languages")
    p.add_argument("--model", default="lab", help="wu2019 only: the plan's encoder (lab or smoke)")
    p.add_argument("--shard", default="0/1", help="wu2019 only: I/N runs every N-th job of the part, from the I-th")
    p.add_argument("--compile", action="store_true",
                   help="dufter2020, GPU: the fused, torch.compile'd stacks (sets XLREPRO_COMPILE=1; larger stacks)")
    p.add_argument("--workers-per-gpu", type=int, default=1,
                   help="dufter2020: stacks trained side by side on each GPU (2 lets a small stack and its compile "
                        "overlap a large one)")
    p = sub.add_parser("pretrain", help="pretrain mini-mBERT into the cache (resumable)")
    p.add_argument("model", choices=["mini-mbert"])
    p.add_argument("--vocab", default="shared", help="shared (a WordPiece trained here) or mbert")
    p.add_argument("--steps", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    p.add_argument("--time-limit", type=float, help="stop (resumably) after this many seconds")
    p = sub.add_parser("run", help="execute one chapter notebook with papermill")
    p.add_argument("chapter", help="e.g. dufter2020/architecture")
    p.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    p.add_argument("--output", type=Path)
    p = sub.add_parser("bench", help="MLM training throughput, plain HF vs ours")
    p.add_argument("--cases", nargs="*", default=["small", "base", "mbert"])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--compile", nargs="*", default=["small"], choices=["small", "base", "mbert"],
                   help="cases also timed with the fused, compiled loss (default: small)")
    p.add_argument("--out", type=Path, help="folder for bench.csv/bench.png (default: book/results/bench)")
    a = ap.parse_args(argv)
    try:
        if a.command == "prepare":
            from .data.lab import prepare_lab
            print(prepare_lab(check_profile(a.profile)))
            if a.multilingual:
                from .data.multilingual import prepare_multilingual_cache
                prepare_multilingual_cache()
        elif a.command == "train" and a.chapter == "wu2019":
            from .transfer import PARTS, TransferLab, run_part
            if a.part is None:
                raise ConfigError(f"wu2019 needs --part; valid choices: {', '.join(PARTS)}")
            i, _, n = a.shard.partition("/")
            if not (i.isdigit() and n.isdigit()):
                raise ConfigError(f"--shard must look like 0/4; got {a.shard!r}")
            lab = TransferLab(model=a.model, progress=False)
            print(run_part(a.part, lab, a.languages, (int(i), int(n))).to_string())
        elif a.command == "train":
            from .training.grid import available_devices, run_grid
            chapter = load_chapter(a.chapter)
            ids = a.ids or list(dict.fromkeys(i for t in chapter.tables.values() for i in t))
            if a.compile:  # read by every ModelStack and stack plan, also in the grid's worker processes
                os.environ["XLREPRO_COMPILE"] = "1"
            if a.workers_per_gpu < 1:
                raise ConfigError(f"--workers-per-gpu must be 1 or more; got {a.workers_per_gpu}")
            done = run_grid(a.chapter, ids, a.seeds or list(chapter.seeds), large_seeds=a.large_seeds,
                            profile=a.profile, time_limit=a.time_limit,
                            devices=available_devices() * a.workers_per_gpu)
            print("grid complete" if done else "time limit reached: run the same command again to resume")
        elif a.command == "pretrain":
            import torch
            from .mini_mbert import MiniMBertConfig, pretrain
            config = MiniMBertConfig(vocab=a.vocab, seed=a.seed, **({"steps": a.steps} if a.steps else {}))
            device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
            out = pretrain(config, device, time_limit=a.time_limit)
            print(out if (out / "training.json").exists() else f"{out}: time limit reached, run again to resume")
        elif a.command == "run":
            print(run_chapter(a.chapter, {k: _value(v) for k, v in a.parameter}, a.output))
        elif a.command == "bench":
            from .bench import write_bench
            print(write_bench(a.cases, a.steps, a.out, compile_cases=a.compile))
    except ConfigError as err:
        print(f"xlrepro: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
