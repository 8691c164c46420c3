"""Known-answer tests of xlrepro.claims: hand-made frames whose verdict is known for every kind."""
from pathlib import Path

import pandas as pd
import pytest

from xlrepro import claims as C
from xlrepro.results import read_claims, read_csv

ROOT = Path(__file__).resolve().parents[1]


def frame(values: dict[str, list[float]], metric="m", seeds=None) -> pd.DataFrame:
    """experiment -> one value per seed (seeds 0, 1, ... unless given)."""
    rows = []
    for exp, vals in values.items():
        for s, v in zip(seeds or range(len(vals)), vals):
            rows.append({"experiment": exp, "seed": s, "metric": metric, "value": v})
    return pd.DataFrame(rows)


def verdict(test, frames, **kw):
    return C.evaluate(test, C.Data(frames if isinstance(frames, dict) else {"t": frames}, artifact="t"), **kw)[0]


def greater(margin=0.05, noise="2se", **kw):
    return {"kind": "greater", "left": {"experiment": "a", "metric": "m"},
            "right": {"experiment": "b", "metric": "m"}, "margin": margin, "noise": noise, **kw}


# ----------------------------------------------------------------------------------------------- greater
@pytest.mark.parametrize("a, b, expected", [
    ([0.60, 0.61, 0.59], [0.40, 0.41, 0.39], "reproduced"),      # 0.2 ≥ margin, far beyond 2 SE
    ([0.43, 0.44, 0.42], [0.40, 0.41, 0.39], "partly"),          # beyond noise, below the margin
    ([0.90, 0.30, 0.60], [0.40, 0.41, 0.39], "partly"),          # margin met, noise too large
    ([0.41, 0.40, 0.42], [0.40, 0.41, 0.39], "not reproduced"),  # direction alone
    ([0.40, 0.41, 0.39], [0.40, 0.41, 0.39], "not reproduced"),  # tie
    ([0.30, 0.31, 0.29], [0.40, 0.41, 0.39], "not reproduced"),  # wrong direction
])
def test_greater(a, b, expected):
    assert verdict(greater(), frame({"a": a, "b": b})) == expected


def test_greater_welch_and_relative_margin():
    df = frame({"a": [0.60, 0.61, 0.59], "b": [0.40, 0.41, 0.39]})
    assert verdict(greater(noise="welch", alpha=0.05), df) == "reproduced"
    assert verdict(greater(margin="50% of left"), df) == "partly"   # 0.2 < 0.3
    assert verdict(greater(margin="30% of left"), df) == "reproduced"  # 0.2 ≥ 0.18
    noisy = frame({"a": [0.9, 0.2, 0.7], "b": [0.40, 0.41, 0.39]})
    assert verdict(greater(noise="welch"), noisy) == "partly"  # margin met, Welch p > 0.05


def test_greater_one_seed_is_at_most_partly_but_deterministic_counts():
    one = frame({"a": [0.9], "b": [0.1]})
    assert verdict(greater(), one) == "partly"
    fixed = frame({"a": [0.9], "b": [0.1]}, seeds=[-1])
    assert verdict(greater(noise="deterministic"), fixed) == "reproduced"
    assert verdict(greater(noise="deterministic"), frame({"a": [0.1], "b": [0.1]}, seeds=[-1])) == "not reproduced"
    with pytest.raises(ValueError, match="seed -1"):
        verdict(greater(noise="deterministic"), frame({"a": [0.9, 0.8], "b": [0.1, 0.2]}))


def test_greater_without_positive_margin_is_refused():
    with pytest.raises(ValueError, match="positive margin"):
        verdict(greater(margin=0), frame({"a": [1.0, 1.1], "b": [0.0, 0.1]}))


# ----------------------------------------------------------------------------------------------- bounds
@pytest.mark.parametrize("kind, vals, expected", [
    ("above", [0.95, 0.96, 0.97], "reproduced"),
    ("above", [0.99, 0.80, 0.95], "partly"),      # mean 0.913 > 0.9 but 2 SE reach below
    ("above", [0.90, 0.90, 0.90], "not reproduced"),  # tie with the bound
    ("below", [0.01, 0.00, 0.02], "reproduced"),
    ("below", [0.00, 0.19, 0.00], "partly"),
    ("below", [0.20, 0.30, 0.25], "not reproduced"),
])
def test_above_below(kind, vals, expected):
    bound = 0.9 if kind == "above" else 0.1
    test = {"kind": kind, "value": {"experiment": "a", "metric": "m"}, "bound": bound, "noise": "2se"}
    assert verdict(test, frame({"a": vals})) == expected


@pytest.mark.parametrize("vals, expected", [
    ([0.70, 0.71, 0.69], "reproduced"),
    ([0.78, 0.76, 0.80], "partly"),            # mean 0.78 within 0.1 of 0.7, gap + 2 SE (0.103) sticks out
    ([0.78, 0.62, 0.80], "inconclusive"),      # 2 SE (0.113) alone exceeds the tolerance: could not pass
    ([1.00, 0.90, 1.10], "not reproduced"),    # underpowered too (2 SE 0.115), but gap 0.3 − 2 SE > tolerance
    ([0.60, 0.60, 0.60], "not reproduced"),    # gap exactly the tolerance: a tie fails
    ([0.50, 0.51, 0.49], "not reproduced"),
])
def test_within(vals, expected):
    test = {"kind": "within", "value": {"experiment": "a", "metric": "m"}, "target": 0.7, "tolerance": 0.1,
            "noise": "2se"}
    assert verdict(test, frame({"a": vals})) == expected


def test_within_selector_target_relative():
    df = frame({"a": [12.0, 12.1, 11.9], "b": [10.0, 10.1, 9.9]})
    test = {"kind": "within", "value": {"experiment": "a", "metric": "m"},
            "target": {"experiment": "b", "metric": "m"}, "tolerance": "50% of target", "noise": "2se"}
    assert verdict(test, df) == "reproduced"
    assert verdict({**test, "tolerance": "10% of target"}, df) == "not reproduced"


# ----------------------------------------------------------------------------------------------- correlation
def by_language(values: dict[str, list[float]], exp="x") -> pd.DataFrame:
    return pd.DataFrame([{"experiment": exp, "seed": -1, "metric": "m", "language": l, "value": v}
                         for l, v in zip("abcdefgh", values)])


def corr(**kw):
    return {"kind": "correlation", "over": "language", "method": "pearson", "sign": "positive", "min_r": 0.5,
            "max_p": 0.05, "left": {"artifact": "x", "metric": "m"}, "right": {"artifact": "y", "metric": "m"}, **kw}


@pytest.mark.parametrize("y, expected", [
    ([1, 2, 3, 4, 5, 6, 7, 8], "reproduced"),
    ([2, 1, 4, 3, 6, 5, 8, 7], "reproduced"),       # r = 0.90
    ([3, 1, 2, 6, 4, 5, 8, 4], "partly"),            # r ≈ 0.66 but p ≈ 0.07: strong, not significant
    ([1, 5, 2, 6, 3, 7, 4, 2], "not reproduced"),    # weak positive (r ≈ 0.2): direction alone
    ([8, 7, 6, 5, 4, 3, 2, 1], "not reproduced"),    # wrong sign
])
def test_correlation(y, expected):
    frames = {"x": by_language(list(range(1, 9))), "y": by_language(y)}
    assert verdict(corr(), frames) == expected


def test_correlation_negative_sign_and_spearman():
    frames = {"x": by_language(list(range(1, 9))), "y": by_language([9, 8, 7, 6, 5, 4, 3, 1])}
    assert verdict(corr(sign="negative", method="spearman"), frames) == "reproduced"
    assert verdict(corr(sign="positive", method="spearman"), frames) == "not reproduced"


# ----------------------------------------------------------------------------------------------- curves
def curve(points: list[float], seeds=(0, 1, 2), jitter=0.001) -> pd.DataFrame:
    return pd.DataFrame([{"experiment": "a", "seed": s, "metric": "m", "step": 100 * i, "value": v + jitter * s}
                         for s in seeds for i, v in enumerate(points)])


@pytest.mark.parametrize("points, expected", [
    ([0.0, 0.1, 0.3, 0.5, 0.6], "reproduced"),
    ([0.0, 0.3, 0.1, 0.5, 0.6], "partly"),           # rises overall, one step back of 0.2
    ([0.0, 0.01, 0.02, 0.03, 0.03], "not reproduced"),  # below the margin
    ([0.5, 0.5, 0.5, 0.5, 0.5], "not reproduced"),   # flat: a tie
])
def test_monotone(points, expected):
    test = {"kind": "monotone", "value": {"experiment": "a", "metric": "m"}, "over": "step",
            "direction": "increasing", "margin": 0.05, "tolerance": 0.02, "noise": "2se"}
    assert verdict(test, curve(points)) == expected


def test_curve_events():
    df = pd.concat([curve([0.0, 0.1, 0.3, 0.5, 0.6]),
                    curve([100.0, 20.0, 11.0, 10.0, 10.0]).assign(metric="ppl"),
                    curve([50.0, 20.0, 30.0, 35.0, 40.0]).assign(metric="dev")])
    data = C.Data({"t": df}, artifact="t")
    assert C.sample({"metric": "m", "event": "half_final"}, data).tolist() == [200.0] * 3  # 0.3 >= 0.6 / 2
    assert C.sample({"metric": "m", "event": "half_final", "fraction": True}, data).tolist() == [0.5] * 3
    assert C.sample({"metric": "ppl", "event": "drop_90_log"}, data).tolist() == [200.0] * 3  # log 11 <= 90% drop
    assert C.sample({"metric": "dev", "event": "argmin"}, data).tolist() == [100.0] * 3
    assert C.sample({"metric": "m", "at": "half"}, data).round(3).tolist() == [0.3, 0.301, 0.302]
    # µ half-way (0.5) a checkpoint after the lowest dev ppl (0.25): reproduced; the same checkpoint: a tie
    later = greater(left={"metric": "m", "event": "half_final", "fraction": True},
                    right={"metric": "dev", "event": "argmin", "fraction": True})
    assert verdict(later, df) == "reproduced"
    tie = dict(later, right={"metric": "m", "event": "half_final", "fraction": True})
    assert verdict(tie, df) == "not reproduced"


# ----------------------------------------------------------------------------------------------- flat, argmax
def layers(means: list[float], spread=0.001) -> pd.DataFrame:
    return pd.DataFrame([{"experiment": "p", "seed": s, "metric": "m", "layer": i, "value": v + spread * (s - 1)}
                         for i, v in enumerate(means) for s in range(3)])


@pytest.mark.parametrize("means, spread, expected", [
    ([0.96, 0.97, 0.96, 0.965], 0.001, "reproduced"),
    ([0.95, 0.99, 0.96], 0.02, "partly"),     # spread 0.04 < 0.05, but 2 SE push it over
    ([0.90, 0.97, 0.96], 0.001, "not reproduced"),
])
def test_flat(means, spread, expected):
    test = {"kind": "flat", "value": {"metric": "m"}, "over": "layer", "max_spread": 0.05, "noise": "2se"}
    assert verdict(test, layers(means, spread)) == expected


@pytest.mark.parametrize("vals, expected", [
    ({"f0": [0.50, 0.51, 0.49], "f1": [0.60, 0.61, 0.59], "f2": [0.70, 0.71, 0.69]}, "reproduced"),
    ({"f0": [0.50, 0.51, 0.49], "f1": [0.69, 0.70, 0.68], "f2": [0.70, 0.71, 0.69]}, "partly"),  # best, within noise
    ({"f0": [0.50, 0.51, 0.49], "f1": [0.70, 0.71, 0.69], "f2": [0.70, 0.71, 0.69]}, "not reproduced"),  # tie
    ({"f0": [0.50, 0.51, 0.49], "f1": [0.80, 0.81, 0.79], "f2": [0.70, 0.71, 0.69]}, "not reproduced"),
])
def test_argmax(vals, expected):
    test = {"kind": "argmax", "value": {"metric": "m"}, "over": "experiment", "candidates": ["f0", "f1", "f2"],
            "expect": "f2", "noise": "2se"}
    assert verdict(test, frame(vals)) == expected


# ----------------------------------------------------------------------------------------------- composites
def test_all_and_each():
    df = frame({"a": [0.60, 0.61, 0.59], "b": [0.40, 0.41, 0.39], "c": [0.41, 0.40, 0.42]})
    good, direction = greater(), greater(left={"experiment": "c", "metric": "m"})
    partly = greater(margin=0.5)  # beyond noise, below the margin
    assert verdict({"kind": "all", "parts": [good, good]}, df) == "reproduced"
    assert verdict({"kind": "all", "parts": [good, direction]}, df) == "partly"      # score 1/2
    assert verdict({"kind": "all", "parts": [partly, direction]}, df) == "not reproduced"  # score 1/4
    assert verdict({"kind": "all", "parts": [partly, partly]}, df) == "partly"
    each = {"kind": "each", "over": "experiment", "values": ["a", "c"], "into": ["left"], "test": greater()}
    assert verdict(each, df) == "partly"
    assert verdict(dict(each, values=["a"]), df) == "reproduced"


def test_each_over_languages_fills_both_sides():
    zero = pd.DataFrame([{"experiment": e, "seed": s, "metric": "acc", "language": l, "value": v + 0.001 * s}
                         for l, z in (("en", 0.9), ("de", 0.6), ("zh", 0.3)) for e, v in (("zs", z), ("maj", 0.25))
                         for s in range(3)])
    test = {"kind": "each", "over": "language", "exclude": ["en"],
            "test": {"kind": "greater", "left": {"experiment": "zs", "metric": "acc"},
                     "right": {"experiment": "maj", "metric": "acc"}, "margin": 0.1, "noise": "2se"}}
    v, evidence = C.evaluate(test, C.Data({"t": zero}, artifact="t"))
    assert v == "partly" and "1 of 2 languages" in evidence and "1 partly (zh)" in evidence
    assert ", 1 not" not in evidence  # zh is partly (direction and noise right, margin not), not "not"
    # a language on the wrong side is listed as not, apart from the partly ones
    ko = pd.DataFrame([{"experiment": e, "seed": s, "metric": "acc", "language": "ko", "value": v + 0.001 * s}
                       for e, v in (("zs", 0.2), ("maj", 0.25)) for s in range(3)])
    v, evidence = C.evaluate(test, C.Data({"t": pd.concat([zero, ko])}, artifact="t"))
    assert "1 of 3 languages reproduced, 1 partly (zh), 1 not (ko)." in evidence


def test_each_over_an_all_gives_every_part_the_value_and_needs_values():
    rows = pd.DataFrame([{"experiment": "o", "seed": -1, "metric": m, "language": l, "value": v}
                         for l, tok, typ in (("a", 60.0, 40.0), ("b", 60.0, 70.0), ("c", 10.0, 1.0))
                         for m, v in (("tok", tok), ("typ", typ))])
    both = {"kind": "all", "combine": "weakest", "parts": [
        {"kind": "within", "value": {"experiment": "o", "metric": "tok"}, "target": 62.5, "tolerance": 12.5,
         "noise": "deterministic"},
        {"kind": "below", "value": {"experiment": "o", "metric": "typ"}, "bound": 50, "noise": "deterministic"}]}
    test = {"kind": "each", "over": "language", "values": ["a", "b", "c"], "test": both}
    v, evidence = C.evaluate(test, C.Data({"t": rows}, artifact="t"))
    assert "1 of 3 languages reproduced" in evidence and "2 not (b, c)" in evidence  # each language, both parts
    with pytest.raises(ValueError, match="list them in 'values'"):
        C.evaluate({k: x for k, x in test.items() if k != "values"}, C.Data({"t": rows}, artifact="t"))


def test_not_testable_offline():
    test = {"kind": "not_testable_offline", "reason": "needs XNLI"}
    assert C.evaluate(test, C.Data({}))[0] == "not testable offline"
    assert C.evaluate(test, C.Data({}), profile="paper")[0] == "not reproduced"


# ----------------------------------------------------------------------------------------------- errors
def test_errors_name_the_valid_choices():
    df = frame({"a": [0.6, 0.7], "b": [0.1, 0.2]})
    with pytest.raises(ValueError, match="unknown kind 'bigger'.*greater.*within.*correlation"):
        verdict({"kind": "bigger"}, df)
    with pytest.raises(ValueError, match="unknown noise 'sd'.*2se.*welch.*deterministic"):
        verdict(greater(noise="sd"), df)
    with pytest.raises(KeyError, match="unknown metric \\['mu'\\].*valid choices: m"):
        verdict(greater(left={"experiment": "a", "metric": "mu"}), df)
    with pytest.raises(KeyError, match="unknown experiment \\['z'\\].*valid choices: a, b"):
        verdict(greater(left={"experiment": "z", "metric": "m"}), df)
    with pytest.raises(KeyError, match="no results artifact 'table9'; available: t"):
        verdict(greater(left={"artifact": "table9", "experiment": "a", "metric": "m"}), df)
    with pytest.raises(ValueError, match="unknown selector keys \\['metrics'\\]; valid keys: artifact"):
        verdict(greater(left={"experiment": "a", "metrics": "m"}), df)
    with pytest.raises(ValueError, match="unknown event 'peak'; valid events: half_final"):
        verdict(greater(left={"experiment": "a", "metric": "m", "event": "peak"}), df)


def test_claims_yaml_errors(tmp_path):
    bad = tmp_path / "claims.yaml"
    bad.write_text("claims:\n  - {id: x, chapter: c, section: s, quote: q, claim: c, why: w,"
                   " test: {kind: bigger}}\n")
    with pytest.raises(ValueError, match="claim 'x': unknown kind 'bigger'; valid kinds: greater"):
        C.load_claims("p", bad)
    bad.write_text("claims:\n  - {id: x, chapter: c, section: s, claim: c, why: w, test: {kind: greater}}\n")
    with pytest.raises(ValueError, match="lacks \\['quote'\\]"):
        C.load_claims("p", bad)
    with pytest.raises(FileNotFoundError, match="papers with claims: dufter2020, k2020, liu2020, wu2019"):
        C.load_claims("nosuchpaper")


def test_claims_table_writes_only_its_chapter(tmp_path):
    (tmp_path / "t.csv").write_text("experiment,seed,metric,value\na,0,m,0.6\na,1,m,0.61\nb,0,m,0.4\nb,1,m,0.41\n")
    claims = [{"id": "one", "chapter": "c1", "section": "§1", "quote": "q", "claim": "a beats b", "artifact": "t",
               "test": greater(), "why": "because"},
              {"id": "two", "chapter": "c2", "section": "§2", "quote": "q", "claim": "b beats a", "artifact": "t",
               "test": greater(left={"experiment": "b", "metric": "m"}, right={"experiment": "a", "metric": "m"}),
               "why": "because"}]
    t1 = C.claims_table("p", "c1", tmp_path, claims=claims)
    assert t1.columns.tolist() == ["claim", "section", "criterion", "evidence", "verdict", "id", "quote",
                                   "precondition", "precondition_met", "reason"]
    assert t1["verdict"].tolist() == ["reproduced"] and "Why: because" in t1.loc[0, "criterion"]
    C.claims_table("p", "c2", tmp_path, claims=claims)
    C.claims_table("p", "c1", tmp_path, claims=claims)
    back = read_claims(tmp_path / "claims.csv")
    assert back.sort_values("chapter")["verdict"].tolist() == ["reproduced", "not reproduced"]
    with pytest.raises(ValueError, match="no claims for chapter 'c3'; chapters: c1, c2"):
        C.claims_table("p", "c3", tmp_path, claims=claims)


def test_a_note_written_after_the_run_is_shown_with_the_evidence_and_changes_no_verdict(tmp_path):
    (tmp_path / "t.csv").write_text("experiment,seed,metric,value\na,0,m,0.6\na,1,m,0.61\nb,0,m,0.4\nb,1,m,0.41\n")
    claim = {"id": "one", "chapter": "c1", "section": "§1", "quote": "q", "claim": "a beats b", "artifact": "t",
             "test": greater(), "why": "because"}
    plain = C.claims_table("p", "c1", tmp_path, claims=[claim])
    noted = C.claims_table("p", "c1", tmp_path, claims=[{**claim, "after_run": "b never learned the task"}])
    assert noted.loc[0, "verdict"] == plain.loc[0, "verdict"] == "reproduced"
    assert noted.loc[0, "criterion"] == plain.loc[0, "criterion"]
    assert noted.loc[0, "evidence"] == plain.loc[0, "evidence"] + ". Note written after the run: b never learned the task"
    pending = C.claims_table("p", "c1", {"t": pd.DataFrame({"experiment": ["a"], "seed": [0], "metric": ["m"],
                                                            "value": [0.6]})},
                             claims=[{**claim, "after_run": "b never learned the task"}], pending=["b"])
    assert pending.loc[0, "verdict"] == "pending" and "after the run" not in pending.loc[0, "evidence"]


# ----------------------------------------------------------------------------------------------- the papers
def _selectors(test):
    if test["kind"] == "all":
        for p in test["parts"]:
            yield from _selectors(p)
    elif test["kind"] == "each":
        yield from _selectors(test["test"])
    for key in ("left", "right", "value", "target"):
        if isinstance(test.get(key), dict):
            yield test[key]
            if "minus" in test[key]:
                yield test[key]["minus"]


@pytest.mark.parametrize("paper", ["dufter2020", "wu2019"])
def test_paper_claims_reference_existing_results(paper):
    claims = C.load_claims(paper)
    folder = ROOT / "book" / "results" / paper
    frames = {p.stem: read_csv(p) for p in folder.glob("*.csv") if p.stem != "claims"}
    chapters = {p.stem for p in (ROOT / "notebooks" / paper).glob("*.ipynb")}
    published = read_claims(folder / "claims.csv") if (folder / "claims.csv").exists() else None
    waiting = set() if published is None else set(published.loc[published["verdict"] == C.PENDING, "claim"])
    for c in claims:
        assert c["chapter"] in chapters, c["id"]
        assert len(c["quote"]) > 10 and c["why"], c["id"]
        if c["claim"] in waiting:  # published as pending: its models await a GPU run, so their rows are absent
            continue
        for sel in _selectors(c["test"]):
            if "reference" in sel:
                continue
            name = sel.get("artifact", c.get("artifact"))
            if name in PENDING_RUNS[paper]["artifacts"]:
                continue
            assert name in frames, f"{c['id']}: artifact {name!r} not in {sorted(frames)}"
            df = frames[name]
            for key in ("experiment", "metric"):
                for want in (sel[key] if isinstance(sel.get(key), list) else [sel[key]] if key in sel else []):
                    if not (key == "experiment" and str(want) in PENDING_RUNS[paper]["experiments"]):
                        assert str(want) in set(df[key].astype(str)), f"{c['id']}: {key} {want!r} not in {name}"
        # and every claim gets a verdict from the published results, or waits for a declared run
        try:
            v, evidence = C.evaluate(c["test"], C.Data(frames, paper, c.get("artifact")))
        except C.MissingResults as e:
            assert any(p in str(e) for p in PENDING_RUNS[paper]["artifacts"] | PENDING_RUNS[paper]["experiments"]), e
            continue
        assert v in C.VERDICTS and evidence


# Runs declared but not made yet (GPU): their claims are "pending"; anything else missing is a typo.
PENDING_RUNS = {"dufter2020": {"artifacts": {"fig7", "table3", "table4", "table10", "knn_table"},
                               "experiments": {"30", "15", "16", "17-250"}},
                # paraphrase.csv: written once `xlrepro train wu2019 --part zero-shot --task paraphrase` has run
                "wu2019": {"artifacts": {"paraphrase"}, "experiments": set()}}


def test_a_claim_on_a_run_not_made_yet_is_pending(tmp_path):
    (tmp_path / "t.csv").write_text("experiment,seed,metric,value\na,0,m,0.6\na,1,m,0.61\n")
    claims = [{"id": "one", "chapter": "c1", "section": "§1", "quote": "q", "claim": "z beats a", "artifact": "t",
               "test": greater(left={"experiment": "z", "metric": "m"}, right={"experiment": "a", "metric": "m"}),
               "why": "because"},
              {"id": "two", "chapter": "c1", "section": "§2", "quote": "q", "claim": "in u", "artifact": "u",
               "test": greater(), "why": "because"}]
    t = C.claims_table("p", "c1", tmp_path, claims=claims)
    assert t["verdict"].tolist() == ["pending", "pending"]
    assert t.loc[0, "evidence"] == "model z has no results yet" and "no results artifact 'u'" in t.loc[1, "evidence"]
    with pytest.raises(C.MissingResults):
        C.evaluate(claims[0]["test"], C.Data({"t": read_csv(tmp_path / "t.csv")}, "p", "t"))
    with pytest.raises(KeyError, match="unknown metric"):  # a wrong metric is an error, not a pending run
        C.evaluate(greater(left={"experiment": "a", "metric": "q"}), C.Data({"t": read_csv(tmp_path / "t.csv")}, "p", "t"))


@pytest.mark.parametrize("paper", ["dufter2020", "wu2019", "k2020", "liu2020"])
def test_paper_quotes_are_verbatim(paper):
    readme = ROOT.parent / "shared" / "papers" / "README.md"  # the paper texts sit beside the checkout
    if not readme.exists():
        pytest.skip("paper texts not available")
    names = [line.split("|")[1].strip() for line in readme.read_text().splitlines()
             if line.strip().endswith(f"| {paper} |")]  # Liu et al. has a short and a long version
    text = "\n".join((readme.parent / name).read_text() for name in names)
    flat = " ".join(text.split())
    flat = flat.replace("- ", "-")  # undo line-break hyphenation loosely: compare without it
    bare = flat.replace("-", "")
    for c in C.load_claims(paper):
        for piece in c["quote"].split("…"):  # "…" marks text the extraction put in between (a figure caption)
            piece = " ".join(piece.split()).replace("- ", "-")
            assert piece in flat or piece.replace("-", "") in bare, f"{c['id']}: {piece!r} not in the paper"


def test_a_claim_on_an_untrained_model_is_pending_and_a_typo_still_fails():
    df = frame({"a": [0.5, 0.6, 0.55], "b": [0.1, 0.2, 0.15]})
    claim = {"id": "x", "chapter": "c", "section": "§1", "quote": "q", "claim": "a > b", "why": "w",
             "test": {"kind": "greater", "left": {"experiment": "a", "metric": "m"},
                      "right": {"experiment": "z", "metric": "m"}, "margin": 0.1, "noise": "2se"}}
    table = C.claims_table("p", "c", {"t": df}, claims=[{**claim, "artifact": "t"}], pending=["z"])
    assert table["verdict"].tolist() == ["pending"] and "z awaits" in table["evidence"][0]
    with pytest.raises(C.MissingResults, match="unknown experiment"):  # evaluate itself never hides a missing model
        C.evaluate(claim["test"], C.Data({"t": df}, "p", "t"))


def test_a_claim_on_a_model_the_profile_does_not_run_is_inconclusive_with_the_reason():
    """not_run: the claim that reads such a model (here in a precondition's place: its right side) is inconclusive,
    code not_run, its evidence the profile's reason; a claim on the other models is decided as before; pending
    models stay pending."""
    df = frame({"a": [0.5, 0.6, 0.55], "b": [0.1, 0.2, 0.15]})
    base = {"chapter": "c", "section": "§1", "quote": "q", "why": "w", "artifact": "t"}
    claims = [{**base, "id": "x", "claim": "a > z", "test": greater(right={"experiment": "z", "metric": "m"})},
              {**base, "id": "y", "claim": "a > b", "test": greater(right={"experiment": "b", "metric": "m"})},
              {**base, "id": "w", "claim": "a > q", "test": greater(right={"experiment": "q", "metric": "m"})}]
    t = C.claims_table("p", "c", {"t": df}, claims=claims, pending=["q"],
                       not_run={"z": "part t9 is left out at this profile: its control repeats the base"})
    assert t["verdict"].tolist() == ["inconclusive", "reproduced", "pending"]
    assert t.loc[0, "reason"] == "not_run" and "z (part t9 is left out at this profile" in t.loc[0, "evidence"]
    assert C.reason_words("not_run") == "a model it reads is not run at this profile"


def test_all_weakest_follows_the_weaker_part():
    df = frame({"a": [0.6, 0.61], "b": [0.4, 0.41], "c": [0.59, 0.60]})
    good, tie = greater(), greater(left={"experiment": "c", "metric": "m"}, right={"experiment": "a", "metric": "m"})
    assert verdict({"kind": "all", "parts": [good, tie]}, df) == "partly"  # scores 1 and 0: half, partly
    assert verdict({"kind": "all", "parts": [good, good]}, df) == "reproduced"
    assert verdict({"kind": "all", "parts": [good, tie], "combine": "weakest"}, df) == "not reproduced"
    half = greater(margin=0.5)  # direction and noise right, margin not: partly
    assert verdict({"kind": "all", "parts": [good, half]}, df) == "partly"
    assert verdict({"kind": "all", "parts": [good, half], "combine": "weakest"}, df) == "partly"
    with pytest.raises(ValueError, match="valid choices: score, weakest"):
        verdict({"kind": "all", "parts": [good], "combine": "mean"}, df)


def test_layer_last_and_k_of_n_resolve_against_the_depth_of_the_rows():
    def model(depth):  # layer l has value l / 10; layers 0..depth
        return pd.DataFrame([{"experiment": "a", "seed": -1, "metric": "m", "layer": l, "value": l / 10}
                             for l in range(depth + 1)])
    data12, data2 = C.Data({"t": model(12)}, artifact="t"), C.Data({"t": model(2)}, artifact="t")
    assert C.sample({"experiment": "a", "metric": "m", "layer": "last"}, data12).tolist() == [1.2]
    assert C.sample({"experiment": "a", "metric": "m", "layer": "last"}, data2).tolist() == [0.2]
    # "10 of 12" is layer 10 of a 12-layer model and layer ceil(10 * 2 / 12) = 2 of a 2-layer one
    assert C.sample({"experiment": "a", "metric": "m", "layer": "10 of 12"}, data12).tolist() == [1.0]
    assert C.sample({"experiment": "a", "metric": "m", "layer": "10 of 12"}, data2).tolist() == [0.2]
    # a list: 1..4 of 12 on a 2-layer model is layer 1 only (no row counted twice)
    four = {"experiment": "a", "metric": "m", "layer": [f"{k} of 12" for k in (1, 2, 3, 4)]}
    assert C.sample(four, data12).round(6).tolist() == [0.25] and C.sample(four, data2).tolist() == [0.1]
    assert C.resolve_layers(7, pd.Series([0, 12])) == ["7"]  # a number stays as it is
    with pytest.raises(ValueError, match="need 0 <= K <= N"):
        C.resolve_layers("13 of 12", pd.Series([0, 12]))
    with pytest.raises(KeyError, match="unknown layer"):  # a layer the model lacks is still an error
        C.sample({"experiment": "a", "metric": "m", "layer": 12}, data2)


def test_each_with_every_value_excluded_is_missing_results_not_a_crash():
    df = pd.DataFrame([{"experiment": "a", "seed": -1, "metric": "m", "language": "en", "value": 1.0}])
    test = {"kind": "each", "over": "language", "exclude": ["en"],
            "test": {"kind": "above", "value": {"experiment": "a", "metric": "m"}, "bound": 0.5,
                     "noise": "deterministic"}}
    with pytest.raises(C.MissingResults, match="no language left to test"):
        C.evaluate(test, C.Data({"t": df}, artifact="t"))


# ----------------------------------------------------------------------------------------------- deciding or not
def test_deterministic_partly_needs_a_stated_minimum_effect_not_the_sign():
    fixed = lambda a, b: frame({"a": [a], "b": [b]}, seeds=[-1])  # noqa: E731
    test = greater(margin=0.1, noise="deterministic")
    assert verdict(test, fixed(0.50, 0.40)) == "reproduced"
    assert verdict(test, fixed(0.46, 0.40)) == "partly"            # 0.06 ≥ half the margin
    assert verdict(test, fixed(0.4003, 0.40)) == "not reproduced"  # the right sign alone
    assert verdict({**test, "partly_margin": 0.08}, fixed(0.46, 0.40)) == "not reproduced"


def _claim(test, **kw):
    return {"id": "c", "chapter": "ch", "section": "§1", "quote": "q", "claim": "a beats b", "artifact": "t",
            "test": test, "why": "w", **kw}


def test_a_failed_precondition_makes_the_verdict_inconclusive_and_keeps_the_evidence():
    df = frame({"a": [0.60, 0.61, 0.59], "b": [0.40, 0.41, 0.39], "base": [0.20, 0.21, 0.19]})
    learned = {"name": "base_learned", "says": "the base model learned (above 0.25)",
               "test": {"kind": "above", "value": {"experiment": "base", "metric": "m"}, "bound": 0.25,
                        "noise": "2se"}}
    table = C.claims_table("p", "ch", {"t": df}, claims=[_claim(greater(), requires=[learned])])
    row = table.iloc[0]
    assert row["verdict"] == "inconclusive" and row["precondition_met"] == "no"
    assert row["reason"] == "precondition:base_learned"
    assert "precondition failed: the base model learned" in row["evidence"] and "The test itself: reproduced" in \
        row["evidence"]
    met = {**learned, "test": {**learned["test"], "bound": 0.1}}
    row = C.claims_table("p", "ch", {"t": df}, claims=[_claim(greater(), requires=[met])]).iloc[0]
    assert (row["verdict"], row["precondition_met"], row["reason"]) == ("reproduced", "yes", "")
    none = C.claims_table("p", "ch", {"t": df}, claims=[_claim(greater())]).iloc[0]
    assert (none["verdict"], none["precondition"], none["precondition_met"], none["reason"]) == \
        ("reproduced", "", "", "")


def test_a_claim_a_null_model_passes_too_is_inconclusive():
    rows = [{"experiment": "bert", "seed": -1, "metric": "acc", "layer": layer, "value": v}
            for layer, v in ((0, 0.99), (12, 0.99))]
    test = {"kind": "above", "value": {"experiment": "bert", "metric": "acc", "layer": 12}, "bound": 0.9,
            "noise": "deterministic"}
    null = {"says": "bag of tokens (layer 0)", "set": {"layer": 0}, "into": ["value"]}
    row = C.claims_table("p", "ch", {"t": pd.DataFrame(rows)}, claims=[_claim(test, nulls=[null])]).iloc[0]
    assert row["verdict"] == "inconclusive" and "a null model passes the same test (bag of tokens" in row["evidence"]
    assert row["reason"] == "null:layer=0"  # named by what it sets
    named = C.claims_table("p", "ch", {"t": pd.DataFrame(rows)},
                           claims=[_claim(test, nulls=[{**null, "name": "bag_of_tokens"}])]).iloc[0]
    assert named["reason"] == "null:bag_of_tokens"
    rows[0]["value"] = 0.5  # the null fails: the claim is decided
    row = C.claims_table("p", "ch", {"t": pd.DataFrame(rows)}, claims=[_claim(test, nulls=[null])]).iloc[0]
    assert row["verdict"] == "reproduced"
    assert "Must fail on the null model: bag of tokens (layer 0)." in row["criterion"]


def test_fewer_seeds_than_the_test_needs_is_inconclusive():
    df = frame({"a": [0.60, 0.61, 0.59], "b": [0.40, 0.41, 0.39]})
    assert C.claims_table("p", "ch", {"t": df}, claims=[_claim(greater(), min_seeds=3)]).iloc[0]["verdict"] == \
        "reproduced"
    row = C.claims_table("p", "ch", {"t": df}, claims=[_claim(greater(), min_seeds=5)]).iloc[0]
    assert row["verdict"] == "inconclusive" and "needs 5 seeds to decide; the run has 3" in row["evidence"]
    assert row["reason"] == "min_seeds"


def test_an_inconclusive_part_leaves_the_whole_undecided():
    df = frame({"a": [0.78, 0.62, 0.80], "b": [0.60, 0.61, 0.59]})
    underpowered = {"kind": "within", "value": {"experiment": "a", "metric": "m"}, "target": 0.7, "tolerance": 0.1,
                    "noise": "2se"}
    fine = {"kind": "above", "value": {"experiment": "b", "metric": "m"}, "bound": 0.5, "noise": "2se"}
    assert verdict({"kind": "all", "parts": [fine, underpowered]}, df) == "inconclusive"
    data = C.Data({"t": df}, artifact="t")
    # a: mean 0.733, 2 SE = 0.11 ≥ tolerance 0.1 and gap 0.033 not beyond it: underpowered
    assert C.outcome(underpowered, data).reason == "underpowered"
    assert C.outcome({"kind": "all", "parts": [fine, underpowered]}, data)[::2] == ("inconclusive", "underpowered")
    assert C.outcome(fine, data)[::2] == ("reproduced", "")
    each = {"kind": "each", "over": "experiment", "values": ["a", "b"], "test": {**underpowered, "value": {
        "metric": "m"}}}
    assert C.outcome(each, data)[::2] == ("inconclusive", "underpowered")  # b (0.6 ± 0.01) is decided: not


def test_every_cause_is_in_the_reason_in_order_the_test_s_own_last():
    # the base fails its precondition, the claim asks 5 seeds of 3, and its within test is underpowered
    df = frame({"a": [0.78, 0.62, 0.80], "base": [0.20, 0.21, 0.19]})
    learned = {"name": "base_learned", "says": "the base model learned (above 0.25)",
               "test": {"kind": "above", "value": {"experiment": "base", "metric": "m"}, "bound": 0.25,
                        "noise": "2se"}}
    within = {"kind": "within", "value": {"experiment": "a", "metric": "m"}, "target": 0.7, "tolerance": 0.1,
              "noise": "2se"}
    j = C.judge(_claim(within, requires=[learned], min_seeds=5), C.Data({"t": df}, artifact="t"))
    assert (j.verdict, j.reason) == ("inconclusive", "precondition:base_learned;min_seeds;underpowered")
    alone = C.judge(_claim(within), C.Data({"t": df}, artifact="t"))
    assert (alone.verdict, alone.reason) == ("inconclusive", "underpowered")


def test_reason_codes_are_checked_and_put_in_words():
    assert C.reason_code("precondition:a", "", "underpowered;precondition:a") == "precondition:a;underpowered"
    with pytest.raises(ValueError, match="unknown reason 'seeds'; valid reasons: precondition, null, min_seeds"):
        C.reason_code("seeds")
    claim = {"requires": [{"name": "base", "says": "the base transfers"}], "min_seeds": 5,
             "nulls": [{"says": "the input embeddings", "set": {"layer": 0}}]}
    assert C.reason_words("precondition:base", claim) == "precondition not met: the base transfers"
    assert C.reason_words("null:layer=0", claim) == "a null model passes the test too (the input embeddings)"
    assert C.reason_words("min_seeds", claim) == "the run has fewer seeds than the 5 the test needs"
    assert C.reason_words("precondition:gone") == "precondition not met: gone"  # not in the claims file any more
    assert C.reason_words("all_runs_failed") == "every run of a model it compares failed (health.csv)"
    with pytest.raises(ValueError, match="valid reasons"):
        C.reason_words("tired")
    with pytest.raises(ValueError, match="a null's name is one word"):
        C._check_null({"says": "x", "set": {"layer": 0}, "name": "two words"}, "claim 'c'")


def test_failed_runs_are_left_out_of_every_selection_and_named():
    # seed 2 of model a diverged: loss 50 against 2 and 2.2; its accuracy drags the mean down
    df = pd.DataFrame([{"experiment": e, "seed": s, "metric": m, "value": v}
                       for e, s, m, v in [("a", 0, "loss", 2.0), ("a", 1, "loss", 2.2), ("a", 2, "loss", 50.0),
                                          ("a", 0, "acc", 0.80), ("a", 1, "acc", 0.81), ("a", 2, "acc", 0.10),
                                          ("b", 0, "loss", 2.1), ("b", 1, "loss", 2.0), ("b", 2, "loss", 2.1),
                                          ("b", 0, "acc", 0.60), ("b", 1, "acc", 0.61), ("b", 2, "acc", 0.60)]])
    from xlrepro import health as H
    rule = {"name": "diverged", "reads": {"artifact": "t", "metric": "loss"}, "kind": "above_median", "factor": 5,
            "covers": ["t"], "why": "a diverged seed ends far above its siblings"}
    health = H.assess([rule], {"t": df})
    assert health[health.status == "failed"][["experiment", "seed"]].values.tolist() == [["a", 2]]
    assert len(health) == 6 and "50 > 5 × its seeds' median 2.2" in health.loc[2, "reason"]
    test = {"kind": "greater", "left": {"experiment": "a", "metric": "acc"}, "right": {"experiment": "b",
            "metric": "acc"}, "margin": 0.1, "noise": "2se"}
    kept = C.claims_table("p", "ch", {"t": df}, claims=[_claim(test)], health=health.iloc[:0]).iloc[0]
    assert kept["verdict"] == "not reproduced"  # 0.57 − 0.60 with the diverged seed in
    row = C.claims_table("p", "ch", {"t": df}, claims=[_claim(test)], health=health).iloc[0]
    assert row["verdict"] == "reproduced" and "a acc 0.805 (2 seeds)" in row["evidence"]
    assert "Left out as failed runs (health.csv): model a seed 2 (diverged: loss 50" in row["evidence"]
    other = {**test, "left": {"experiment": "b", "metric": "acc"}, "right": {"experiment": "b", "metric": "acc"}}
    assert "Left out" not in C.claims_table("p", "ch", {"t": df}, claims=[_claim(other)], health=health).iloc[0][
        "evidence"]  # a selection that never read the failed run does not name it


def test_health_rules_are_checked():
    from xlrepro import health as H
    good = {"name": "r", "reads": {"artifact": "t", "metric": "acc"}, "kind": "at_most", "bound": 0.26,
            "covers": ["t"], "why": "w"}
    H.check_rule(good)
    with pytest.raises(ValueError, match="valid kinds: above_median, at_most, at_least"):
        H.check_rule({**good, "kind": "sometimes"})
    with pytest.raises(ValueError, match="needs a number 'factor' greater than 1"):
        H.check_rule({**good, "kind": "above_median"})
    with pytest.raises(ValueError, match="unknown keys"):
        H.check_rule({**good, "treshold": 1})
    df = frame({"a": [0.2536, 0.2536, 0.80]}, metric="acc")
    h = H.assess([good], {"t": df})
    assert h.status.tolist() == ["failed", "failed", "ok"]


def test_preconditions_and_nulls_in_a_claims_file_are_checked(tmp_path):
    base = {"claims": [_claim(greater(), requires=["learned"])],
            "preconditions": {"learned": {"says": "it learned", "test": greater()}}}
    import yaml
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump(base))
    claims = C.load_claims("p", path)
    assert claims[0]["requires"][0]["name"] == "learned" and claims[0]["requires"][0]["says"] == "it learned"
    path.write_text(yaml.safe_dump({**base, "claims": [_claim(greater(), requires=["lerned"])]}))
    with pytest.raises(ValueError, match="unknown precondition 'lerned'; defined: learned"):
        C.load_claims("p", path)
    path.write_text(yaml.safe_dump({**base, "claims": [_claim(greater(), nulls=[{"says": "x", "set": {"lyer": 0}}])]}))
    with pytest.raises(ValueError, match="unknown selector keys"):
        C.load_claims("p", path)
    path.write_text(yaml.safe_dump({**base, "gates": []}))
    with pytest.raises(ValueError, match="valid keys: claims, preconditions, health"):
        C.load_claims("p", path)


def test_a_health_bound_can_be_read_from_the_results():
    from xlrepro import health as H
    df = pd.DataFrame([{"experiment": e, "seed": s, "metric": "acc", "language": "en", "value": v}
                       for e, s, v in [("clf", 0, 0.90), ("clf", 1, 0.27), ("majority", -1, 0.26)]])
    rule = {"name": "at_majority", "reads": {"artifact": "t", "experiment": "clf", "metric": "acc", "language": "en"},
            "kind": "at_most", "bound_from": {"artifact": "t", "experiment": "majority", "metric": "acc"},
            "margin": 0.02, "covers": ["t"], "why": "w"}
    H.check_rule(rule)
    h = H.assess([rule], {"t": df})
    assert h.status.tolist() == ["ok", "failed"] and "acc en 0.27 ≤ 0.28" in h.loc[1, "reason"]
    with pytest.raises(ValueError, match="not both"):
        H.check_rule({**rule, "bound": 0.3})


def test_a_claim_reads_the_strongest_recipe_that_holds_every_model_it_reads():
    """Base results: a barely above b (not reproduced at margin 0.1). A stronger recipe retrained a and b (a far above
    b) but not c: the claim on a and b reads the recipe, its evidence saying so; the claim on a and c reads the base
    results, even though the recipe has a (no mixing); a model absent from both stays pending."""
    base_frame = frame({"a": [0.50, 0.51, 0.52], "b": [0.52, 0.49, 0.51], "c": [0.10, 0.11, 0.12]})
    strong = frame({"a": [0.80, 0.81, 0.82], "b": [0.40, 0.41, 0.42]})
    common = {"chapter": "c", "section": "§1", "quote": "q", "why": "w", "artifact": "t"}
    claims = [{**common, "id": "ab", "claim": "a > b", "test": greater(margin=0.1)},
              {**common, "id": "ac", "claim": "a > c",
               "test": greater(margin=0.1, right={"experiment": "c", "metric": "m"})},
              {**common, "id": "az", "claim": "a > z",
               "test": greater(margin=0.1, right={"experiment": "z", "metric": "m"})}]
    alone = C.claims_table("p", "c", {"t": base_frame}, claims=claims)
    assert alone["verdict"].tolist() == ["not reproduced", "reproduced", "pending"]
    t = C.claims_table("p", "c", {"t": base_frame}, claims=claims, recipes=[("more text", {"t": strong})])
    assert t["verdict"].tolist() == ["reproduced", "reproduced", "pending"]
    assert t.loc[0, "evidence"].startswith("At more text: ") and "0.4" in t.loc[0, "evidence"]
    assert t.loc[1, "evidence"] == alone.loc[1, "evidence"]  # c was not retrained: the base results decide
    assert not t.loc[2, "evidence"].startswith("At ")
    # a null that reads a model the recipe lacks (c into b's place): the base results decide that claim too
    nulled = [{**claims[0], "nulls": [{"says": "c in place of b", "set": {"experiment": "c"}, "into": ["right"]}]}]
    t = C.claims_table("p", "c", {"t": base_frame}, claims=nulled, recipes=[("more text", {"t": strong})])
    assert not t.loc[0, "evidence"].startswith("At ") and t.loc[0, "verdict"] == "not reproduced"
    strong_c = pd.concat([strong, frame({"c": [0.38, 0.39, 0.40]})])  # with c retrained, a null that passes there
    t = C.claims_table("p", "c", {"t": base_frame}, claims=nulled, recipes=[("more text", {"t": strong_c})])
    assert t.loc[0, "evidence"].startswith("At more text: ") and t.loc[0, "reason"] == "null:experiment=c"


def test_recipes_are_read_from_the_index_beside_the_results(tmp_path):
    """recipes.json names each recipe's folder, strongest first; a folder it names must exist, and each entry has
    name, label and folder (and may give parts)."""
    import json

    from xlrepro.config import ConfigError
    from xlrepro.papers import get_paper
    from xlrepro.verdicts import recipe_frames
    paper = get_paper("k2020")
    assert recipe_frames(paper, "mixed_pairs", tmp_path) == []  # no index: no recipe
    (tmp_path / "recipe_x").mkdir()
    (tmp_path / "recipe_x" / "mixed_pairs.csv").write_text(
        "experiment,seed,language,task,metric,value\nenfake-es,0,es,sections,accuracy,0.5\n")
    (tmp_path / "recipes.json").write_text(json.dumps([{"name": "x", "label": "more", "folder": "recipe_x"}]))
    [(label, frames)] = recipe_frames(paper, "mixed_pairs", tmp_path)
    assert label == "more" and frames["transfer"]["value"].tolist() == [0.5]  # the paper's own frames of that folder
    (tmp_path / "recipes.json").write_text(json.dumps([{"name": "y", "label": "l", "folder": "recipe_y"}]))
    with pytest.raises(ConfigError, match="does not exist"):
        recipe_frames(paper, "mixed_pairs", tmp_path)
    (tmp_path / "recipes.json").write_text(json.dumps([{"name": "x", "folder": "recipe_x"}]))
    with pytest.raises(ConfigError, match="needs name, label and folder"):
        recipe_frames(paper, "mixed_pairs", tmp_path)


def test_a_recipe_that_holds_only_some_of_an_unnamed_selection_does_not_read_the_claim():
    """An `each` test over whatever models the frame has (no experiment named): on base results {a, b} it reads both;
    a recipe holding only a would test a alone, so the base results decide. Two recipes: the first lacks b, the
    second holds both and reads the claim."""
    base_frame = frame({"a": [0.6, 0.61, 0.62], "b": [0.3, 0.31, 0.32]})
    claim = {"id": "every", "chapter": "c", "section": "§1", "quote": "q", "why": "w", "artifact": "t",
             "claim": "every model above 0.5",
             "test": {"kind": "each", "over": "experiment",
                      "test": {"kind": "above", "value": {"metric": "m"}, "bound": 0.5, "noise": "2se"}}}
    alone = C.claims_table("p", "c", {"t": base_frame}, claims=[claim])
    only_a = ("only a", {"t": frame({"a": [0.9, 0.91, 0.92]})})
    t = C.claims_table("p", "c", {"t": base_frame}, claims=[claim], recipes=[only_a])
    assert t.loc[0, "evidence"] == alone.loc[0, "evidence"] and not t.loc[0, "evidence"].startswith("At ")
    both = ("both", {"t": frame({"a": [0.9, 0.91, 0.92], "b": [0.8, 0.81, 0.82]})})
    t = C.claims_table("p", "c", {"t": base_frame}, claims=[claim], recipes=[only_a, both])
    assert t.loc[0, "evidence"].startswith("At both: ") and t.loc[0, "verdict"] == "reproduced"


def test_a_recipe_s_failed_runs_come_from_the_health_given_for_it():
    """The recipe's health (as its health.csv holds it) names run b/1 failed: that run is left out there, the
    evidence saying so; one health frame per recipe, else ValueError."""
    base_frame = frame({"a": [0.6, 0.61, 0.62], "b": [0.3, 0.31, 0.32]})
    claim = {"id": "b_high", "chapter": "c", "section": "§1", "quote": "q", "why": "w", "artifact": "t",
             "claim": "b above 0.5",
             "test": {"kind": "above", "value": {"experiment": "b", "metric": "m"}, "bound": 0.5, "noise": "2se"}}
    strong = ("more text", {"t": frame({"a": [0.9, 0.91, 0.92], "b": [0.8, 0.1, 0.82]})})
    health = pd.DataFrame([{"rule": "r", "experiment": "b", "seed": 1, "value": 0.1, "status": "failed",
                            "reason": "never left the majority class", "covers": "t"}])
    t = C.claims_table("p", "c", {"t": base_frame}, claims=[claim], recipes=[strong], recipe_health=[health])
    assert t.loc[0, "evidence"].startswith("At more text: ")
    assert "Left out as failed runs (the recipe's health.csv): model b seed 1" in t.loc[0, "evidence"]
    with pytest.raises(ValueError, match="one health frame per recipe: 1 recipes, 0 frames"):
        C.claims_table("p", "c", {"t": base_frame}, claims=[claim], recipes=[strong], recipe_health=[])


def test_verdicts_recomputed_from_the_book_read_k2020_s_recipe_and_write_its_health(tmp_path):
    """The published K et al. results with their alltext4x recipe: recomputed, the Spanish word-order claim is read
    on the recipe (reproduced there, not reproduced on the lab recipe), a claim on cells the recipe has not retrained
    (Hindi's permuted ones) stays on the lab results, and the recipe's runs get a health.csv of their own."""
    import shutil

    from xlrepro.verdicts import recompute
    shutil.copytree(ROOT / "book" / "results" / "k2020", tmp_path / "book" / "results" / "k2020")
    tables = recompute("k2020", root=tmp_path, notebooks=False)
    ling = tables["linguistic"].set_index("id")
    assert ling.loc["permutation_monotone_es", "evidence"].startswith("At all the text, 16,000 steps: ")
    assert ling.loc["permutation_monotone_es", "verdict"] == "reproduced"
    assert not ling.loc["permutation_monotone_hi", "evidence"].startswith("At ")  # hi's perm cells: lab only
    health = pd.read_csv(tmp_path / "book" / "results" / "k2020" / "recipe_alltext4x" / "health.csv")
    assert {"enfake-es/perm1", "enfake-es/unigram"} <= set(health["experiment"])
