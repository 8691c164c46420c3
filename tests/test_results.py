"""The results contract: atomic CSVs, string IDs, summaries over seeds, side-by-side, claims."""
import math
from pathlib import Path

import pandas as pd
import pytest

from xlrepro import results
from xlrepro.results import (read_csv, results_dir, side_by_side, summarise, write_claims,
                             write_csv)


def long_frame():
    return pd.DataFrame({
        "experiment": ["0", "0", "0", "21b", "0", "0"],
        "seed": [0, 42, 43, 0, 0, 42],
        "metric": ["retr_l8", "retr_l8", "retr_l8", "retr_l8", "mu", "mu"],
        "value": [0.90, 1.00, 0.95, 0.10, 0.6, 0.8],
    })


def test_round_trip_keeps_ids_as_strings(tmp_path):
    df = pd.DataFrame({"experiment": [0, "21b", "30-base"], "seed": [0, 0, 1],
                       "metric": ["mu"] * 3, "value": [0.5, 0.25, 1.0], "language": ["no", "en", "de"]})
    path = tmp_path / "new" / "sub" / "t.csv"  # parent folders are created
    write_csv(df, path)
    back = read_csv(path)
    assert back["experiment"].tolist() == ["0", "21b", "30-base"]
    assert all(isinstance(x, str) for x in back["experiment"])
    assert pd.api.types.is_string_dtype(back["experiment"])
    assert back["language"].tolist() == ["no", "en", "de"]
    assert back["value"].tolist() == [0.5, 0.25, 1.0]
    assert sorted(p.name for p in path.parent.iterdir()) == ["t.csv"]


def test_write_csv_requires_contract_columns(tmp_path):
    with pytest.raises(ValueError, match="experiment, seed, metric, value"):
        write_csv(pd.DataFrame({"experiment": ["0"], "value": [1.0]}), tmp_path / "x.csv")


def test_atomic_write_keeps_old_file_when_writing_fails(tmp_path, monkeypatch):
    path = tmp_path / "t.csv"
    write_csv(long_frame(), path)
    before = path.read_bytes()

    def broken_to_csv(self, buf, *args, **kwargs):
        buf.write("experiment,seed,metric,value\n0,0,mu,")  # half a file, then fail
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(pd.DataFrame, "to_csv", broken_to_csv)
    with pytest.raises(RuntimeError, match="disk on fire"):
        write_csv(long_frame(), path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"]  # no temp file left


def test_summarise_known_answers():
    s = summarise(long_frame())
    assert list(s.columns) == ["experiment", "metric", "mean", "std", "n"]
    r = s[(s.experiment == "0") & (s.metric == "retr_l8")].iloc[0]
    assert r["mean"] == pytest.approx(0.95) and r["std"] == pytest.approx(0.05) and r["n"] == 3
    r = s[(s.experiment == "0") & (s.metric == "mu")].iloc[0]
    assert r["mean"] == pytest.approx(0.7) and r["std"] == pytest.approx(math.sqrt(0.02))
    r = s[s.experiment == "21b"].iloc[0]
    assert r["mean"] == pytest.approx(0.10) and math.isnan(r["std"]) and r["n"] == 1


def test_summarise_keeps_layer_and_rejects_duplicate_seeds():
    df = pd.DataFrame({"experiment": ["0"] * 4, "seed": [0, 1, 0, 1], "metric": ["retr"] * 4,
                       "layer": [0, 0, 8, 8], "value": [1.0, 3.0, 5.0, 5.0]})
    s = summarise(df)
    assert s["layer"].tolist() == [0, 8]
    assert s["mean"].tolist() == [2.0, 5.0] and s["std"].tolist() == pytest.approx([math.sqrt(2), 0.0])
    with pytest.raises(ValueError, match="same seed"):
        summarise(pd.concat([df, df.iloc[:1]]))


def test_side_by_side_formatted_and_raw():
    paper = pd.DataFrame({"experiment": ["0", "0", "21b"], "metric": ["retr_l8", "mu", "mu"],
                          "mean": [0.97, 0.70, 0.07], "std": [0.01, float("nan"), float("nan")]})
    t = side_by_side(long_frame(), paper, ["21b", "0", "99"], ["retr_l8", "mu"])
    assert t["experiment"].tolist() == ["21b", "0", "99"]
    row0 = t.set_index("experiment").loc["0"]
    assert row0["retr_l8 ours"] == "0.95 ± 0.05"
    assert row0["retr_l8 paper"] == "0.97 ± 0.01"
    assert row0["mu paper"] == "0.70"
    row21b = t.set_index("experiment").loc["21b"]
    assert row21b["retr_l8 ours"] == "0.10" and row21b["retr_l8 paper"] == "–"
    assert row21b["mu ours"] == "–" and row21b["mu paper"] == "0.07"
    assert (t.set_index("experiment").loc["99"] == "–").all()

    raw = side_by_side(long_frame(), paper, ["0", "21b"], ["retr_l8"], formatted=False)
    r = raw.set_index("experiment").loc["0"]
    assert r["retr_l8 ours mean"] == pytest.approx(0.95) and r["retr_l8 ours n"] == 3
    assert r["retr_l8 paper mean"] == 0.97 and r["retr_l8 paper std"] == 0.01
    assert math.isnan(raw.set_index("experiment").loc["21b", "retr_l8 paper mean"])


def test_side_by_side_with_reference_table():
    from xlrepro.reference import paper_numbers
    t = side_by_side(long_frame(), paper_numbers("dufter2020", "Table 1"), [0], ["retr_l8"])
    assert t.loc[0, "retr_l8 paper"] == "0.97 ± 0.01"
    with pytest.raises(ValueError, match="filter it first"):  # Table 10 has "17" twice (epochs)
        side_by_side(long_frame(), paper_numbers("dufter2020", "Table 10"), ["17"], ["mu"])


def test_write_claims(tmp_path):
    path = tmp_path / "claims.csv"
    base = {"section": "§3.1", "criterion": "mu(0) - mu(1) >= 0.05, beyond 2 SE"}
    rows = [{"claim": "lang-pos hurts", **base, "evidence": "mu .30 vs .70", "verdict": "reproduced"},
            {"claim": "knn helps", **base, "evidence": "Table 3", "verdict": "not testable offline"}]
    write_claims(rows, path)
    back = results.read_claims(path)
    assert back.columns.tolist() == ["claim", "section", "criterion", "evidence", "verdict"]
    assert back["verdict"].tolist() == ["reproduced", "not testable offline"]
    with pytest.raises(ValueError, match="reproduced.*partly.*not reproduced.*not testable offline"):
        write_claims([{"claim": "c", **base, "evidence": "e", "verdict": "yes"}], path)
    assert results.read_claims(path)["verdict"].tolist() == ["reproduced", "not testable offline"]  # untouched
    with pytest.raises(ValueError, match="verdict"):
        write_claims([{"claim": "c", **base, "evidence": "e"}], path)
    with pytest.raises(ValueError, match="criterion"):
        write_claims([{"claim": "c", "section": "§1", "evidence": "e", "verdict": "partly"}], path)
    assert [p.name for p in tmp_path.iterdir()] == ["claims.csv"]


def test_results_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("XLREPRO_ROOT", raising=False)
    (tmp_path / "pyproject.toml").write_text("")
    deep = tmp_path / "notebooks" / "x"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    assert results_dir("dufter2020") == tmp_path.resolve() / "book" / "results" / "dufter2020"
    # a book/_toc.yml next to book/results points at the repo root, not at book/
    book = tmp_path / "book"
    (book / "results").mkdir(parents=True)
    (book / "_toc.yml").write_text("")
    monkeypatch.chdir(book)
    assert results_dir("wu2019") == tmp_path.resolve() / "book" / "results" / "wu2019"
    monkeypatch.setenv("XLREPRO_ROOT", str(tmp_path / "elsewhere"))
    assert results_dir("wu2019") == (tmp_path / "elsewhere").resolve() / "book" / "results" / "wu2019"
    assert results_dir("wu2019", root=tmp_path) == tmp_path.resolve() / "book" / "results" / "wu2019"
    with pytest.raises(ValueError):
        results_dir("../x")


def test_duplicate_key_names_the_first_repeated_key():
    df = long_frame()
    assert results.duplicate_key(df) is None
    # the same (experiment, seed, metric) twice, with another value: the second occurrence is named
    twice = pd.concat([df, pd.DataFrame({"experiment": ["0", "21b"], "seed": [42, 0], "metric": ["mu", "retr_l8"],
                                         "value": [0.7, 0.2]})], ignore_index=True)
    assert results.duplicate_key(twice) == {"experiment": "0", "seed": 42, "metric": "mu"}
    # a column the file adds tells rows apart: the same key in two tasks is no duplicate
    tasks = pd.DataFrame({"experiment": ["a", "a"], "seed": [0, 0], "task": ["ner", "sections"],
                          "metric": ["f1", "f1"], "value": [0.5, 0.5]})
    assert results.duplicate_key(tasks) is None
    assert results.duplicate_key(tasks.assign(task="ner")) == {"experiment": "a", "seed": 0, "task": "ner",
                                                               "metric": "f1"}
