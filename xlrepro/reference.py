"""The papers' own numbers, transcribed once from the paper texts, with the table they come from.

One long CSV per paper ships as package data next to this file:

``dufter2020.csv`` (Dufter & Schütze 2020), columns
    table, experiment, description, epochs, metric, mean, std, note
    - Tables 1, 2, 10: metrics ``mu``, ``align_l0``, ``retr_l0``, ``trans_l0``, ``align_l8``,
      ``retr_l8``, ``trans_l8``, ``ppl_train``, ``ppl_dev`` (fractions as printed, e.g. .97 -> 0.97;
      perplexity cells "217 07.8" -> mean 217, std 7.8). Table 2 has no std. Table 10 fills ``epochs``.
    - Table 3 (XNLI, BERT-base on Wikipedia): ``xnli_en``, ``xnli_de``, ``xnli_hi`` (fractions).
    - Table 4 (mBERT, per language): ``kendall_tau_<lang>``, ``xnli_<lang>`` (percent / 100).
    - Table 5: ``runtime_minutes`` (the printed text in ``note``). Table 6: ``parameters_millions``.
``wu2019.csv`` (Wu & Dredze 2019), columns
    table, experiment, description, language, metric, mean, std, note
    - values in PERCENT as printed (0-100); ``std`` is always blank (the paper gives none).
    - Tables 2 (MLDoc, ``accuracy``), 3 (XNLI, ``accuracy``), 4 (NER, ``f1``), 5 (POS, ``accuracy``),
      6 (parsing, ``uas``, ``las``, ``word_order_distance``); Figure 1a-e (layer freezing, read from
      the heatmap's cell labels). ``experiment`` is "<system>/<setting>", e.g. "mBERT/zero-shot";
      ``description`` keeps the paper's row label; language ``avg`` is the paper's average column
      (``note`` says which languages it leaves out).

``experiment`` is always a string ("0", "21b", "30-base"), so it joins with the results CSVs.
"""
from __future__ import annotations

from importlib import resources

import pandas as pd

PAPERS = ("dufter2020", "wu2019")

_NUMERIC = ("mean", "std", "epochs")


def _norm_table(name: object) -> str:
    """'Table 1', 'table1', 'TABLE 1', 1 and '1' all normalise to '1'; 'Figure 1a' to 'figure1a'."""
    s = str(name).strip().lower().replace(" ", "").replace("_", "")
    return s[len("table"):] if s.startswith("table") else s


def _load(paper: str) -> pd.DataFrame:
    if paper not in PAPERS:
        raise ValueError(f"unknown paper {paper!r}; valid choices: {', '.join(PAPERS)}")
    with resources.files(__name__).joinpath(f"{paper}.csv").open("r", encoding="utf-8") as f:
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
    """The transcribed numbers of `paper` (one of PAPERS), optionally only those of one `table`.

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
