"""Every published long-format results CSV (book/results/**) has one row per key (`xlrepro.results.duplicate_key`)."""
from pathlib import Path

import pandas as pd
import pytest

from xlrepro.paths import repo_root
from xlrepro.results import REQUIRED, duplicate_key, read_csv

RESULTS = repo_root() / "book" / "results"
NOT_LONG = {"claims.csv", "health.csv", "gates.csv"}  # verdicts and checks, not results


def long_csvs(folder: Path) -> list[Path]:
    """The CSVs under `folder` with the contract's columns (experiment, seed, metric, value)."""
    return [p for p in sorted(folder.rglob("*.csv"))
            if p.name not in NOT_LONG and set(REQUIRED) <= set(pd.read_csv(p, nrows=0).columns)]


def test_long_csvs_finds_the_long_files_only(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "long.csv").write_text("experiment,seed,metric,value,language\n0,0,mu,0.5,en\n")
    (tmp_path / "a" / "claims.csv").write_text("experiment,seed,metric,value\n0,0,mu,0.5\n")
    (tmp_path / "wide.csv").write_text("lang,pairs\nen,3\n")
    assert long_csvs(tmp_path) == [tmp_path / "a" / "long.csv"]


PUBLISHED = long_csvs(RESULTS)


def test_the_published_long_csvs_are_found():
    names = {p.relative_to(RESULTS).as_posix() for p in PUBLISHED}
    assert {"wu2019/zero_shot.csv", "dufter2020/runtime.csv", "k2020/linguistic.csv"} <= names


@pytest.mark.parametrize("path", PUBLISHED, ids=[p.relative_to(RESULTS).as_posix() for p in PUBLISHED])
def test_no_published_key_repeats(path):
    first = duplicate_key(read_csv(path))
    assert first is None, f"{path.relative_to(RESULTS)}: more than one row for {first}"
