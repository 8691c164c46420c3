"""The frames the Wu & Dredze chapters' claims read: one definition, called by each chapter's claims cell and by
`xlrepro verdicts` (`PAPER.claims_frames`), so that the published verdicts are the chapters' own."""
from __future__ import annotations

import os

import pandas as pd


def claims_frames(chapter: str, folder: str | os.PathLike) -> dict[str, pd.DataFrame]:
    """The results CSVs of `folder` by artifact name, for every chapter.

    A chapter's claims read more than the frames it draws: Q4's claims read overlap.csv, the zero-shot accuracies of
    zero_shot.csv and the majority class beside them (the precondition that transfer works), and paraphrase.csv where
    the published run has it; Q2's read frozen.csv and the majority class of zero_shot.csv. The chapters write these
    files (Q4 its overlap.csv, Q1 zero_shot.csv and paraphrase.csv) into the results folder they share before their
    claims cells run, so the folder holds exactly what the claims read."""
    from xlrepro.claims import read_results

    return read_results(folder)
