"""The appendix "How the runs were made": the engines that trained the published runs (throughput against plain
Hugging Face, equivalence with training one model at a time, scaling over GPUs, data parallelism).

An entry of its own (kind "shared"): it covers the runs of every paper and tests no paper's claim. It reads the
probes' records under ``book/results/bench/`` and two published tables of Dufter & Schütze; it trains nothing, so it
has no `xlrepro train` and nothing to check before its kernel starts. Its chapter keeps its notebook
``notebooks/dufter2020/engineering.ipynb`` and its name ``dufter2020/engineering`` (``xlrepro run
dufter2020/engineering``). What the notebook computes is in `engineering`.
"""
from __future__ import annotations

from xlrepro.papers import Paper

NAME = "appendix"

PAPER = Paper(
    name=NAME,
    title="Appendix: how the runs were made (engines, equivalence and scaling)",
    chapters=("dufter2020/engineering",),
    order=900,  # the last part of the book
    kind="shared",
)
