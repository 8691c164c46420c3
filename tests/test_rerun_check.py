"""A model retrained alone is set beside the published grid's number for the same (model, seed)."""
import json

import pandas as pd
import pytest

from xlrepro.papers.dufter2020.engines import rerun_check


def _write(folder, exp, seed, metrics, **extra):
    d = folder / exp / str(seed)
    d.mkdir(parents=True)
    (d / "metrics.json").write_text(json.dumps({"experiment": exp, "seed": seed, "metrics": metrics, **extra}))


def test_rerun_check_sets_each_metric_beside_the_published_value(tmp_path):
    published = tmp_path / "table1.csv"
    pd.DataFrame({"experiment": ["0", "0", "0", "1"], "seed": [0, 0, 42, 0], "metric": ["mu", "ppl_train", "mu", "mu"],
                  "value": [0.50, 10.0, 0.60, 0.1]}).to_csv(published, index=False)
    runs = tmp_path / "rerun"
    _write(runs, "0", 0, {"mu": 0.625, "ppl_train": 9.5}, compile="none", stack_size=1)
    _write(runs, "0", 42, {"mu": 0.60, "ppl_train": 1.0}, compile="regional", stack_size=3)
    got = rerun_check(runs, published, metrics=("mu",))
    assert got[["model", "seed"]].values.tolist() == [["0", 0], ["0", 42]]
    assert got["difference"].tolist() == pytest.approx([0.125, 0.0])
    assert got["alone_engine"].tolist() == ["eager, stack of 1", "compiled (regional), stack of 3"]
    with pytest.raises(KeyError, match="seed 42: no published ppl_train"):  # never a silent gap
        rerun_check(runs, published, metrics=("mu", "ppl_train"))
    (runs / "0" / "42" / "metrics.json").unlink()
    both = rerun_check(runs, published, metrics=("mu", "ppl_train"))
    assert both.loc[both["metric"] == "ppl_train", "difference"].tolist() == pytest.approx([-0.5])
