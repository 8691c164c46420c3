"""The papers' own numbers, transcribed once from the paper texts, with the table they come from.

One long CSV per paper ships as package data in the paper's package, ``xlrepro/papers/<paper>/reference.csv``
(found through the registry, `xlrepro.papers`). Columns: ``table`` (the paper's name, e.g. "Table 1"),
``experiment``, ``description``, ``metric``, ``mean``, ``std``, ``note``, and where a paper needs them ``epochs``
or ``language``. Each paper's package docstring says what its tables hold.

``experiment`` is always a string ("0", "21b", "30-base"), so it joins with the results CSVs.
"""
from __future__ import annotations

from importlib import resources

import pandas as pd

from .config import ConfigError

_NUMERIC = ("mean", "std", "epochs")


def _norm_table(name: object) -> str:
    """'Table 1', 'table1', 'TABLE 1', 1 and '1' all normalise to '1'; 'Figure 1a' to 'figure1a'."""
    s = str(name).strip().lower().replace(" ", "").replace("_", "")
    return s[len("table"):] if s.startswith("table") else s


def _load(paper: str) -> pd.DataFrame:
    from .papers import package_of, papers

    if paper not in papers("paper"):  # ConfigError is a ValueError; a shared part has no reference numbers
        raise ConfigError(f"unknown paper {paper!r}; valid choices: {', '.join(papers('paper'))}")
    with resources.files(package_of(paper)).joinpath("reference.csv").open("r", encoding="utf-8") as f:
        # No default NA strings: a language code such as "no" or a label such as "NA" stays text.
        df = pd.read_csv(f, dtype=str, keep_default_na=False)
    for col in _NUMERIC:
        if col in df.columns:
            df[col] = pd.to_numeric(df[col].replace("", None), errors="raise")
    if "epochs" in df.columns:
        df["epochs"] = df["epochs"].astype("Int64")
    return df


def tables(paper: str) -> tuple[str, ...]:
    """The table names held for `paper`, in the order of the CSV (e.g. 'Table 1', 'Figure 1a')."""
    return tuple(dict.fromkeys(_load(paper)["table"]))


def paper_numbers(paper: str, table: str | None = None) -> pd.DataFrame:
    """The transcribed numbers of `paper` (a name of `xlrepro.papers.papers("paper")`), optionally only one `table`.

    `table` is the paper's name, e.g. "Table 1" (also accepted: "table1", "1"). An unknown paper or
    table raises ValueError naming the valid choices. Returns a fresh DataFrame with `experiment`
    as string, `mean`/`std` as float (NaN where the paper gives none) and `epochs` as Int64.
    """
    df = _load(paper)
    if table is None:
        return df.reset_index(drop=True)
    valid = list(dict.fromkeys(df["table"]))
    wanted = _norm_table(table)
    match = [t for t in valid if _norm_table(t) == wanted]
    if not match:
        raise ValueError(f"unknown table {table!r} for {paper}; valid choices: {', '.join(valid)}")
    return df[df["table"] == match[0]].reset_index(drop=True)
