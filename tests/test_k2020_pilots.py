"""K et al.'s scaling pilots (`xlrepro.papers.k2020.pilots`) on hand-made results and loss records."""
import json

import pandas as pd
import pytest

from xlrepro.config import ConfigError

from xlrepro.papers.k2020 import pilots
from xlrepro.papers.k2020.gates import stronger_passes


def row(exp, seed, lang, metric, value):
    return {"experiment": exp, "seed": seed, "language": lang, "task": "sections", "metric": metric, "value": value}


def cell_rows(exp, target, tests, devs, source=0.9, major=0.25, major_dev=0.2):
    src = exp.split("-")[0]
    rows = [row(f"majority/{exp}", -1, target, "accuracy", major), row(f"majority/{exp}", -1, target,
                                                                      "dev_accuracy", major_dev)]
    for seed, (t, d) in enumerate(zip(tests, devs)):
        rows += [row(exp, seed, target, "accuracy", t), row(exp, seed, target, "dev_accuracy", d),
                 row(exp, seed, src, "accuracy", source)]
    return rows


def test_recipe_table_gives_the_gate_quantity_per_cell_and_recipe():
    lab = pd.DataFrame(cell_rows("en-es", "es", [0.40, 0.42, 0.44], [0.4, 0.4, 0.4])
                       + cell_rows("en-xx/variant", "xx", [0.9], [0.9]))  # not a base cell: left out
    more = pd.DataFrame(cell_rows("en-es", "es", [0.60], [0.50]))
    t = pilots.recipe_table({"lab": lab, "alltext2x": more}, cells=["en-es"])
    assert t["recipe"].tolist() == ["one edition, 4,000 steps", "all the text, 8,000 steps"]
    first = t.iloc[0]
    # mean 42, sd 2, SE 2/sqrt(3) = 1.1547; margin 42 - 2.3094 - 25 = 14.69
    assert first["seeds"] == 3 and first["target test"] == pytest.approx(42.0)
    assert first["target test sd"] == pytest.approx(2.0)
    assert first["margin - 2 SE"] == pytest.approx(14.6906, abs=1e-3)
    assert first["source test"] == pytest.approx(90.0) and first["majority dev"] == pytest.approx(20.0)
    second = t.iloc[1]
    assert second["seeds"] == 1 and pd.isna(second["margin - 2 SE"]) and second["target dev"] == pytest.approx(50.0)


def test_reading_counts_cells_by_each_recipes_test():
    lab = pd.DataFrame(cell_rows("en-es", "es", [0.40, 0.42, 0.44], [0.4] * 3)       # +14.7: transfers
                       + cell_rows("en-ru", "ru", [0.20, 0.30, 0.40], [0.3] * 3)      # 30 - 11.5 - 25 < 5
                       # 34 - 4.62 - 25 = 4.38 < 5 fails the gate; the difference 9 >= 5 and > 2 SE 4.62 separately
                       + cell_rows("en-hi", "hi", [0.30, 0.34, 0.38], [0.3] * 3))
    more = pd.DataFrame(cell_rows("en-ru", "ru", [0.3], [0.24]))                      # dev 24 - 20 = +4: not 5
    t = pilots.recipe_table({"lab": lab, "alltext2x": more}, cells=["en-es", "en-hi", "en-ru"])
    gates = pd.DataFrame([{"gate": "alltext2x_pilot_transfers", "value": 0, "threshold": 1, "passed": False,
                           "detail": "failing: en-ru"}])
    gates = pd.concat([gates, pd.DataFrame([{"gate": "alltext4x_pilot_transfers", "value": None, "threshold": 4,
                                             "passed": None, "detail": "no results"}])], ignore_index=True)
    gates = pd.concat([gates, pd.DataFrame([
        {"gate": "base_transfers", "value": 1, "threshold": 6, "passed": False, "detail": "failing: lab cells"},
        {"gate": "alltext2x_base_transfers", "value": None, "threshold": None, "passed": None,
         "detail": "superseded by alltext4x_base_transfers: its recipe failed"},
        {"gate": "alltext4x_base_transfers", "value": 3, "threshold": 6, "passed": False,
         "detail": "failing: en-hi"}])], ignore_index=True)
    text = pilots.scaling_reading(t, gates)
    assert "Gate `alltext4x_pilot_transfers`: pending (no results)." in text
    assert "Gate `alltext2x_base_transfers`: superseded by alltext4x_base_transfers. " in text
    assert "Gate `alltext4x_base_transfers`: failed (3 of 6; failing: en-hi)" in text
    assert "lab cells" not in text  # the one-edition gate is not a scaling profile's
    assert ("*one edition, 4,000 steps* (3 seeds): 1 of 3 cells transfer by the base gate's test (en-es), and en-hi "
            "too by the claims' looser reading;") in text  # en-ru: its difference 5 is within 2 SE
    assert ("The claims' preconditions read the same words more loosely: the difference at least 5 points and, "
            "separately, beyond 2 SE") in text
    assert "*all the text, 8,000 steps* (one seed, dev): 0 of 1 cells at least 5 points above" in text
    assert "Gate `alltext2x_pilot_transfers`: failed (0 of 1; failing: en-ru)" in text


def test_loss_curves_and_the_final_drop(tmp_path):
    folder = tmp_path / "pilot_alltext"
    folder.mkdir()
    (folder / "stack_abc.json").write_text(json.dumps({
        "members": ["en-es/0", "enfake-es/1"],
        "mlm_loss_curve": {"200": [7.0, 7.2], "400": [6.0, 6.4], "600": [5.5, 6.5]}}))
    curves = pilots.loss_curves(tmp_path, profiles=("alltext",))
    assert len(curves) == 6 and set(curves["recipe"]) == {"all the text, 4,000 steps"}
    assert curves[(curves["cell"] == "enfake-es")]["seed"].unique().tolist() == [1]
    drop = pilots.final_drop(curves, points=2).set_index("cell")
    assert drop.loc["en-es", "drop"] == pytest.approx(0.5) and drop.loc["en-es", "steps"] == 200
    assert drop.loc["enfake-es", "drop"] == pytest.approx(-0.1)  # rose at the end


def test_publish_checks_its_profile_first(tmp_path):
    from xlrepro.config import ConfigError
    with pytest.raises(ConfigError, match="valid choices: alltext, alltext2x, alltext4x, alltext8x"):
        pilots.publish("lab", tmp_path)


def test_a_run_that_never_learnt_its_source_task_is_left_out_and_counted():
    learnt = cell_rows("en-es", "es", [0.40, 0.42, 0.44], [0.4] * 3)
    # seed 3: source accuracy 0.26 against the source's majority 0.25, within the health rule's 2 points
    failed = [row("en-es", 3, "es", "accuracy", 0.25), row("en-es", 3, "es", "dev_accuracy", 0.2),
              row("en-es", 3, "en", "accuracy", 0.26)]
    majority_en = [row("majority/en-es", -1, "en", "accuracy", 0.25)]
    t = pilots.recipe_table({"lab": pd.DataFrame(learnt + failed + majority_en)}, cells=["en-es"]).iloc[0]
    assert t["seeds"] == 3 and t["failed runs"] == 1 and t["target test"] == pytest.approx(42.0)


def test_transfer_curves_read_each_snapshot_and_the_final_model_by_step(tmp_path):
    rows = []
    for step, (t, d, src) in {4000: (0.20, 0.22, 0.60), 16000: (0.35, 0.33, 0.88)}.items():
        rows += [{**r, "step": step} for r in cell_rows("enfake-ru", "ru", [t], [d], source=src, major=0.254)]
    # seed 1 trained without snapshots: its final model alone is no curve, and must not move the last point
    rows += [{**r, "step": 16000} for r in cell_rows("enfake-ru", "ru", [0.9, 0.9], [0.9] * 2, source=0.9)
             if r["seed"] == 1]
    pd.DataFrame(rows).to_csv(tmp_path / "pilot_alltext4x_curve.csv", index=False)
    c = pilots.transfer_curves(tmp_path, profiles=("alltext2x", "alltext4x"))  # alltext2x published no curve
    assert c["step"].tolist() == [4000, 16000] and set(c["recipe"]) == {"all the text, 16,000 steps"}
    assert c["target test"].tolist() == pytest.approx([20.0, 35.0])
    assert c["target dev"].tolist() == pytest.approx([22.0, 33.0])
    assert c["source test"].tolist() == pytest.approx([60.0, 88.0]) and c["majority"].tolist() == pytest.approx([25.4] * 2)
    assert len(pilots.transfer_figure(c).axes) == 1
    assert pilots.transfer_reading(c) == (
        "**Zero-shot accuracy along pre-training** (target test pairs, %): *all the text, 16,000 steps* (steps "
        "4,000, 16,000): enfake-ru 20.0 → 35.0 (1 run; majority 25.4). Between the last two points the target's "
        "accuracy rose in 1 of 1 cells at *all the text, 16,000 steps* (by at most 15.0 points).")
    # a second recipe with its own steps and two runs: named apart, each cell's points the mean of its runs
    longer = pd.DataFrame([{"recipe": "all the text, 32,000 steps", "cell": "enfake-ru", "seed": seed, "step": step,
                            "target test": v + seed, "target dev": v, "source test": 90.0, "majority": 25.4}
                           for seed in (0, 2) for step, v in ((8000, 30.0), (32000, 37.0))])
    both = pd.concat([c, longer], ignore_index=True)
    assert pilots.transfer_reading(both).endswith(
        "*all the text, 32,000 steps* (steps 8,000, 32,000): enfake-ru 31.0 → 38.0 (2 runs; majority 25.4). Between "
        "the last two points the target's accuracy rose in 1 of 1 cells at *all the text, 16,000 steps* (by at most "
        "15.0 points); in 1 of 1 cells at *all the text, 32,000 steps* (by at most 7.0 points).")
    lines = pilots.transfer_figure(both).axes[0].get_lines()
    assert len({ln.get_color() for ln in lines if ln.get_label().startswith("target")}) == 2  # a colour per recipe
    # two panels in the base part's order (enfake-hi, then enfake-ru), the longer recipe only in the first: the
    # legend still names both recipes
    fig = pilots.transfer_figure(pd.concat([c, longer.assign(cell="enfake-hi")], ignore_index=True))
    assert [ax.get_title() for ax in fig.axes] == ["enfake-hi", "enfake-ru"]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "target (all the text, 32,000 steps)", "source", "majority class", "target (all the text, 16,000 steps)"]


def test_the_failing_cells_curves_say_whether_more_steps_could_move_them():
    recipe = "all the text, 16,000 steps"

    def curve(cell, values, seed=3):
        return [{"recipe": recipe, "cell": cell, "seed": seed, "step": step, "target test": v, "majority": 25.4}
                for step, v in zip((4000, 8000, 12000, 16000), values)]
    # en-es, a passing cell, holds the largest move between neighbouring snapshots: 3.0 points (60 -> 63)
    curves = pd.DataFrame(curve("en-hi", [45.9, 45.8, 47.4, 46.4]) + curve("enfake-hi", [25.3, 23.0, 24.3, 23.8])
                          + curve("enfake-ru", [23.6, 26.5, 27.7, 29.4], seed=0) + curve("en-es", [60, 63, 63, 64])
                          + curve("ru-rise", [20.0, 21.0, 23.0, 25.0], seed=1))
    gates = pd.DataFrame([{"gate": "alltext4x_base_transfers", "passed": False,
                           "detail": "failing: en-hi (0.395 - 2 SE 0.105 vs majority 0.254); enfake-hi (0.211 - 2 SE "
                                     "0.097 vs majority 0.254); enfake-ru (0.297 - 2 SE 0.069 vs majority 0.254); "
                                     "ru-rise (0.2 - 2 SE 0.1 vs majority 0.254); en-ru (0.3 - 2 SE 0.1 vs majority "
                                     "0.254)"}])
    assert pilots.failing_curves(curves, gates) == (
        "**The curves of the cells that fail `alltext4x_base_transfers`** (single runs; one run's accuracy moves by up "
        "to 3.0 points between neighbouring snapshots in these curves, so only a larger gain over the second half "
        "reads as a rise): en-hi (seed 3) 45.8 → 46.4 from step 8,000 to 16,000 (+0.6 points), above the gate's level "
        "of 30.4 in this run: steps are not what it lacks (the gate reads the mean of the tables' seeds minus 2 SE); "
        "enfake-hi (seed 3) 23.0 → 23.8 from step 8,000 to 16,000 (+0.8 points), below the gate's level of 30.4 and "
        "flat: more steps at this recipe are unlikely to make it pass; enfake-ru (seed 0) 26.5 → 29.4 from step 8,000 "
        "to 16,000 (+2.9 points, up at every snapshot), below the gate's level of 30.4, rising within one run's noise: "
        "the curve cannot tell whether more steps would make it pass; ru-rise (seed 1) 21.0 → 25.0 from step 8,000 to "
        "16,000 (+4.0 points, up at every snapshot), below the gate's level of 30.4 and still rising: more steps "
        "might move it.")
    # enfake-ru passes at a stronger recipe (alltext8x's gate, whose cells are en-ru and enfake-ru): said after them
    longer = pd.DataFrame([{"recipe": "all the text, 32,000 steps", "cell": "enfake-ru", "seed": seed, "step": step,
                            "target test": v, "majority": 25.4} for seed in (0, 1)
                           for step, v in ((8000, 31.0), (16000, 36.0), (32000, 38.5))])
    passed = pd.concat([gates, pd.DataFrame([{"gate": "alltext8x_base_transfers", "passed": True,
                                              "detail": "every cell passes"}])], ignore_index=True)
    later = ("alltext8x_base_transfers", "all the text, 32,000 steps")
    assert stronger_passes(passed, "alltext4x_base_transfers") == {"enfake-ru": later, "en-ru": later}
    assert pilots.failing_curves(pd.concat([curves, longer]), passed).endswith(
        "might move it. At a stronger recipe (all the text, 32,000 steps) enfake-ru passes its transfer gate "
        "(`alltext8x_base_transfers`): 31.0 → 38.5 from step 8,000 to 32,000 (mean of 2 runs). At a stronger recipe "
        "(all the text, 32,000 steps) en-ru passes its transfer gate (`alltext8x_base_transfers`).")  # en-ru: no curve
    # with the gate recipe's final models (recipe_table): the stronger recipe's runs at the gate's last step beside
    # them. Its two runs at 16,000 steps: 35.0 and 37.0 (mean 36.0, sd 1.41, SE 1.0); the finals 29.7, sd 6.0 over 3
    # seeds (SE 3.46): gap +6.3, 2 SE of the difference 2 * sqrt(1.0 + 12.0) = 7.2
    longer.loc[(longer["step"] == 16000), "target test"] = [35.0, 37.0]
    finals = pd.DataFrame([{"recipe": recipe, "cell": "enfake-ru", "seeds": 3, "target test": 29.7,
                            "target test sd": 6.0}])
    assert ("(mean of 2 runs). At step 16,000, part-way through its longer schedule, those runs stood at 36.0 (sd "
            "1.4), where the final models of *all the text, 16,000 steps* (3 seeds) stood at 29.7 (sd 6.0): a gap of "
            "+6.3 points, within 2 SE of the difference (7.2). The two recipes differ in their learning-rate schedule "
            "as well as its length, so the curves cannot separate the extra steps from the schedule; from step 16,000 "
            "to 32,000 those runs moved by +2.5 points. At a stronger recipe") in \
        pilots.failing_curves(pd.concat([curves, longer]), passed, finals=finals)
    finals["target test sd"] = 1.0  # SE 0.58: 2 SE of the difference 2 * sqrt(1.0 + 0.33) = 2.3, below the gap
    assert "a gap of +6.3 points, beyond 2 SE of the difference (2.3)" in \
        pilots.failing_curves(pd.concat([curves, longer]), passed, finals=finals)
    assert stronger_passes(passed.assign(passed=[False, False]), "alltext4x_base_transfers") == {}
    assert stronger_passes(passed, "alltext8x_base_transfers") == {}  # it failed no cell
    # a curve of one point is no curve; a passed gate, another gate or no curve at the recipe: nothing to say
    one = pd.DataFrame(curve("en-hi", [45.0, 46.0, 47.0, 48.0])[:1] + curve("en-es", [60, 63, 63, 64]))
    assert pilots.failing_curves(one, gates) == ""
    assert pilots.failing_curves(curves, gates.assign(detail="every cell passes")) == ""
    assert pilots.failing_curves(curves, gates.assign(gate="other")) == ""
    assert pilots.failing_curves(curves.assign(recipe="x"), gates) == ""


def test_only_stacks_whose_every_model_was_evaluated_are_published():
    frame = pd.DataFrame(cell_rows("en-es", "es", [0.4], [0.4]) + cell_rows("en-hi", "hi", [0.3, 0.3], [0.3] * 2))
    assert pilots.all_evaluated({"members": ["en-es/0", "en-hi/1"]}, frame)
    assert not pilots.all_evaluated({"members": ["en-es/0", "en-es/1"]}, frame)  # seed 1's model was lost
    assert not pilots.all_evaluated({"members": ["enfake-hi/0"]}, frame)


def test_loss_reading_gives_each_recipe_s_fall_over_the_last_steps():
    drop = pd.DataFrame({"recipe": ["a", "a", "b"], "cell": ["x", "y", "x"], "seed": [0, 0, 0],
                         "steps": [1000, 1000, 1000], "drop": [0.2, 0.4, -0.01]})
    assert pilots.loss_reading(drop) == (
        "**Was the loss still falling?** Over each run's last 1,000 steps it fell in 2 of 3 runs, with the learning "
        "rate decaying linearly to 0 over those steps. Median fall in nats (range, runs): *a* 0.300 (0.200 to 0.400, "
        "2 runs); *b* -0.010 (-0.010 to -0.010, 1 run).")


def test_a_recipe_publishes_each_chapter_s_complete_cells_and_lists_itself_first(tmp_path, monkeypatch):
    """Part es at alltext4x, with enfake-es/char missing its seed 2: the char cell stays out, every other es cell
    goes into its chapter's CSV (Tables 8-10's into input_objective, Table 2's into linguistic), no chapter without
    an es cell gets a file, and recipes.json lists the recipe before one published earlier."""
    from xlrepro.papers.k2020 import report as R
    from xlrepro.papers.k2020.bbert import Cell
    monkeypatch.setattr(Cell, "evaluated", lambda self, s: not (self.name == "enfake-es/char" and s == 2))
    asked = []

    def collect(names, profile):
        asked.append((list(names), profile))
        return pd.DataFrame([row(n, s, "es", "accuracy", 0.5) for n in names for s in (0, 1, 2)])
    monkeypatch.setattr(R, "collect", collect)
    (tmp_path / "recipes.json").write_text(json.dumps([{"name": "alltext", "label": "old", "folder": "recipe_old"}]))
    folder = pilots.publish_recipe("alltext4x", ["es"], tmp_path)
    assert folder == tmp_path / "recipe_alltext4x" and all(p == "alltext4x" for _, p in asked)
    files = sorted(p.name for p in folder.glob("*.csv"))
    assert files == ["input_objective.csv", "linguistic.csv", "mixed_pairs.csv"]  # architecture has no es cell
    objective = set(pd.read_csv(folder / "input_objective.csv")["experiment"])
    assert objective == {"enfake-es", "enfake-es/nsp", "enfake-es/langid", "enfake-es/word"}
    assert {"enfake-es/perm1", "enfake-es/unigram", "en-es"} <= set(pd.read_csv(folder / "linguistic.csv")["experiment"])
    index = json.loads((tmp_path / "recipes.json").read_text())
    assert [r["name"] for r in index] == ["alltext4x", "alltext"]
    pilots.publish_recipe("alltext2x", ["es"], tmp_path)  # published after alltext4x, but weaker: listed after it
    assert [r["name"] for r in json.loads((tmp_path / "recipes.json").read_text())] == ["alltext4x", "alltext2x",
                                                                                       "alltext"]
    pilots.publish_recipe("alltext4x", ["t7"], tmp_path)  # a part added to a recipe keeps the parts before it
    again = json.loads((tmp_path / "recipes.json").read_text())[0]
    assert again["parts"] == ["es", "t7"] and (folder / "input_objective.csv").is_file()
    assert not list(tmp_path.glob(".recipe_*"))  # the folder built aside was put in place
    assert index[0] == {"name": "alltext4x", "label": "all the text, 16,000 steps", "folder": "recipe_alltext4x",
                        "parts": ["es"]}
    with pytest.raises(ConfigError, match="valid choices: alltext, alltext2x, alltext4x, alltext8x"):
        pilots.publish_recipe("lab", ["es"], tmp_path)


def test_a_chapter_shows_a_recipe_s_tables_only_for_the_cells_it_retrained(tmp_path):
    """Table 8's two es cells at a recipe: its heading and Table 8 with 50.0 and 40.0 (sd 0); Tables 9 and 10, with
    no cell there, are not shown; without recipes.json nothing is."""
    from xlrepro.papers.k2020 import report as R
    assert R.recipe_tables("input_objective", tmp_path) == []
    (tmp_path / "recipe_x").mkdir()
    rows = [row(e, s, "es", "accuracy", v) for e, v in (("enfake-es", 0.5), ("enfake-es/nsp", 0.4)) for s in (0, 1, 2)]
    rows += [row(f"majority/{e}", -1, "es", "accuracy", 0.25) for e in ("enfake-es", "enfake-es/nsp")]
    pd.DataFrame(rows).to_csv(tmp_path / "recipe_x" / "input_objective.csv", index=False)
    (tmp_path / "recipes.json").write_text(json.dumps([{"name": "x", "label": "more text", "folder": "recipe_x"}]))
    shown = R.recipe_tables("input_objective", tmp_path)
    assert len(shown) == 4 and "stronger recipe: more text" in shown[0].data and "2 of this chapter" in shown[0].data
    assert shown[1].data.startswith("**Table 8, ours at more text**")
    table = shown[2]
    assert list(table.index)[:2] == ["enfake-es", "enfake-es/nsp"]
    assert table.loc["enfake-es", "es"].startswith("50.0") and table.loc["enfake-es/nsp", "es"].startswith("40.0")
    assert "0 minutes of training time in 0 stacks" in shown[3].data  # no timing record published here
    (tmp_path / "recipe_x" / "stack_a.json").write_text(json.dumps({"train_seconds": 600, "device": "NVIDIA H200"}))
    (tmp_path / "recipe_x" / "stack_b.json").write_text(json.dumps({"train_seconds": 300, "device": "NVIDIA H200"}))
    assert "15 minutes of training time in 2 stacks" in R.recipe_tables("input_objective", tmp_path)[3].data


def test_a_recipe_names_the_commands_that_retrain_and_publish_it():
    from xlrepro.papers.k2020 import report as R
    text = R.recipe_commands({"name": "alltext4x", "label": "l", "folder": "f", "parts": ["es", "t7"]})
    assert "xlrepro train k2020 --part es,t7 --profile alltext4x --compile --no-snapshots --time-limit 540" in text
    assert "python -m xlrepro.papers.k2020.pilots alltext4x --part es --part t7" in text
    assert "xlrepro verdicts k2020" in text
    assert text.index("python -m xlrepro.papers.k2020.pilots alltext4x --restore") < text.index("xlrepro train")
    assert R.recipe_commands({"name": "x", "label": "l", "folder": "f"}) == ""  # no parts recorded: no command


def test_the_fp8_check_applies_both_criteria_to_hand_made_runs(tmp_path):
    """mm seeds end at losses 2.00, 2.02, 2.04 (their last five points), fp8 at 2.01 each: 0.01 nats apart, within
    0.02. es accuracies: mm 0.50, 0.54, 0.58 (sd 0.04, 2 SE 0.046), fp8 0.56 each: 0.02 apart, within 2 SE. Both hold;
    fp8 accuracies of 0.62 fail the second."""
    from xlrepro.config import ConfigError
    from xlrepro.papers.k2020 import fp8_check as F
    curve = {str(k): [9.0, 9.0, 9.0] for k in range(0, 400, 100)}
    curve.update({str(k): [2.00, 2.02, 2.04] for k in range(400, 900, 100)})
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "timing.json").write_text(json.dumps({"members": ["en-es/mm/0", "en-es/mm/1", "en-es/mm/2"],
                                                            "mlm_loss_curve": curve}))
    for s in range(3):  # one model per stack
        (tmp_path / f"f{s}").mkdir()
        (tmp_path / f"f{s}" / "timing.json").write_text(json.dumps({
            "members": [f"en-es/fp8/{s}"], "mlm_loss_curve": {str(k): [2.01] for k in range(400, 900, 100)}}))
    losses = F.final_losses(tmp_path)
    assert losses[("en-es/mm", 1)] == pytest.approx(2.02) and losses[("en-es/fp8", 2)] == pytest.approx(2.01)
    accuracy = {("en-es/mm", s): v for s, v in enumerate((0.50, 0.54, 0.58))}
    accuracy.update({("en-es/fp8", s): 0.56 for s in range(3)})
    out = F.check(losses, accuracy)
    assert out["loss_difference"] == pytest.approx(0.01) and out["es_2se_mm"] == pytest.approx(2 * 0.04 / 3 ** 0.5)
    assert out["criterion_1"] and out["criterion_2"] and out["adopted"]
    accuracy.update({("en-es/fp8", s): 0.62 for s in range(3)})
    assert not F.check(losses, accuracy)["adopted"]
    with pytest.raises(ConfigError, match="at least two seeds of en-es/fp8"):
        F.check(losses, {k: v for k, v in accuracy.items() if k[0] == "en-es/mm" or k[1] == 0})


def test_the_gate_line_names_the_bases_that_fail_the_recipe_s_gate_and_their_ablations_there(tmp_path):
    from xlrepro.papers.k2020 import report as R
    from xlrepro.papers.k2020.gates import failing_cells
    from xlrepro.papers.k2020.gates import base_transfers
    # the gate's own detail: en-hi (40 %, 2 SE 20 points) and enfake-ru (25.3 %) fail, en-es passes, the cells
    # without results fail
    rows = [{"experiment": e, "seed": s, "metric": "accuracy", "language": e.split("-")[1], "task": "sections",
             "value": v} for e, vs in (("en-es", (0.6, 0.6, 0.62)), ("en-hi", (0.5, 0.5, 0.2)),
                                       ("enfake-ru", (0.25, 0.26, 0.25))) for s, v in enumerate(vs)]
    rows += [{"experiment": f"majority/{e}", "seed": -1, "metric": "accuracy", "language": e.split("-")[1],
              "task": "sections", "value": 0.25} for e in ("en-es", "en-hi", "enfake-ru")]
    gate = {"artifact": "t", "sources": ["en", "enfake"], "targets": ["es", "hi", "ru"], "points": 5}
    detail = base_transfers(gate, {"t": pd.DataFrame(rows)})["detail"]
    assert failing_cells(detail) == ["en-hi", "en-ru", "enfake-es", "enfake-hi", "enfake-ru"]  # no results: failing
    gate2 = {**gate, "sources": ["en"], "targets": ["es", "hi"]}
    assert failing_cells(base_transfers(gate2, {"t": pd.DataFrame(rows)})["detail"]) == ["en-hi"]
    gate3 = {**gate, "sources": ["en"], "targets": ["es"]}
    passed = base_transfers(gate3, {"t": pd.DataFrame(rows)})["detail"]
    assert failing_cells(passed) == []  # every cell passes, each with its values (0.6, 0.6, 0.62: sd 0.0115)
    assert passed == "every cell passes: en-es (0.607 - 2 SE 0.013 vs majority 0.250)"
    assert failing_cells("pending: en-hi has seeds 0") == failing_cells(float("nan")) == []
    detail = "failing: en-hi (0.395 - 2 SE 0.105 vs majority 0.254); enfake-ru (0.297 - 2 SE 0.069 vs majority 0.254)"
    recipe = {"name": "x", "label": "more text", "folder": "recipe_x"}
    assert R.recipe_gate_line(tmp_path, recipe, ["enfake-ru"]) == ""  # no gates.csv
    pd.DataFrame([{"gate": "x_base_transfers", "detail": detail}, {"gate": "y_base_transfers",
                                                                   "detail": "failing: en-es (...)"}]
                 ).to_csv(tmp_path / "gates.csv", index=False)
    line = R.recipe_gate_line(tmp_path, recipe, ["enfake-es/nsp", "enfake-ru", "enfake-ru/nsp", "en-hi"])
    assert "the base B-BERTs en-hi, enfake-ru still fail the transfer gate (`x_base_transfers`" in line
    assert "a claim whose precondition needs one of them stays inconclusive" in line
    assert line.endswith("Their ablation cells retrained here (enfake-ru/nsp) are shown, their claims "
                         "inconclusive.")
    # the base retrained for another task is named apart: its claims have a precondition of their own
    both = R.recipe_gate_line(tmp_path, recipe, ["enfake-ru/nsp", "enfake-ru/adj", "en-hi"])
    assert both.endswith("Their ablation cells retrained here (enfake-ru/nsp) are shown, their claims inconclusive. "
                         "enfake-ru/adj (the base retrained for the adjacency task) is decided by its own transfer "
                         "precondition instead.")
    assert R.recipe_gate_line(tmp_path, recipe, ["enfake-ru/adj"]).endswith(
        "None of their ablation cells was retrained here. enfake-ru/adj (the base retrained for the adjacency task) "
        "is decided by its own transfer precondition instead.")
    assert R.recipe_gate_line(tmp_path, recipe, ["enfake-es/nsp"]).endswith("None of their ablation cells was "
                                                                           "retrained here.")
    pd.DataFrame([{"gate": "x_base_transfers", "detail": "every cell passes"}]).to_csv(tmp_path / "gates.csv")
    assert R.recipe_gate_line(tmp_path, recipe, ["enfake-ru/nsp"]) == ""
    # a failing cell that a stronger recipe's gate passed (alltext8x after alltext4x in constants.PILOTS) is named
    pd.DataFrame([{"gate": "alltext4x_base_transfers", "passed": False, "detail": detail},
                  {"gate": "alltext8x_base_transfers", "passed": True, "detail": "every cell passes"}]
                 ).to_csv(tmp_path / "gates.csv", index=False)
    four = {"name": "alltext4x", "label": "l", "folder": "recipe_alltext4x"}
    assert R.recipe_gate_line(tmp_path, four, ["enfake-ru/nsp"]).endswith(
        "Their ablation cells retrained here (enfake-ru/nsp) are shown, their claims inconclusive. At a stronger "
        "recipe (all the text, 32,000 steps) enfake-ru passes its transfer gate (`alltext8x_base_transfers`); by the "
        "rule declared with that gate, the ru cells of Tables 1-6 and 8-11 are to be retrained at that recipe (profile "
        "alltext8x, part ru of experiments.yaml), and their claims read there once they are.")


def test_a_recipe_table_shows_the_paper_s_numbers_of_its_rows_under_ours():
    """Table 8 (K et al.: enfake-es 78.7 / 72.7, enfake-es/nsp 78.5 / 70.9 on Fake-English / es): the paper's rows go
    under ours in our columns, blank where the paper has none; a row the paper lacks gets none; Table 11's same-language
    pairs "es>es" are our "es"."""
    from xlrepro.papers.k2020 import report as R
    mine = pd.DataFrame({"enfake": ["89.4 ± 0.1", "88.0 ± 0.2", "25.4"], "es": ["49.2 ± 6.6", "40.0 ± 1.0", "25.4"],
                         "hi": ["", "", ""]}, index=pd.Index(["enfake-es", "enfake-es/nsp", "majority class"],
                                                             name="experiment"))
    t = R.with_paper_rows(mine, "Table 8", ["enfake-es", "enfake-es/nsp", "enfake-es/id"])
    assert list(t.index) == ["enfake-es", "enfake-es/nsp", "majority class", "enfake-es, the paper",
                             "enfake-es/nsp, the paper"] and t.index.name == "experiment"
    assert t.loc["enfake-es, the paper"].tolist() == ["78.7", "72.7", ""]
    assert t.loc["enfake-es/nsp, the paper"].tolist() == ["78.5", "70.9", ""]
    assert R.with_paper_rows(mine, "Table 8", ["enfake-es/id"]) is mine
    t11 = R.with_paper_rows(pd.DataFrame({"es": ["50.0"], "enfake>es": ["60.0"]}, index=["enfake-es"]), "Table 11",
                            ["enfake-es"])
    assert t11.loc["enfake-es, the paper"].tolist() == ["70.9", "57.9"]


def test_a_curve_run_s_extra_seed_gets_its_final_point_from_its_own_file_and_stays_out_of_the_tables(
        tmp_path, monkeypatch):
    # en-hi: seed 3 (outside the plan's 0-2) trained with snapshots at step 4,000; the tables' seeds 0-2 without
    from xlrepro.papers.k2020 import bbert
    from xlrepro.papers.k2020.config import load_plan
    plan = load_plan()
    assert 3 not in plan.seeds and pilots.experiments_of(plan, "curve_hi") == ["en-hi", "enfake-hi"]
    steps = plan.profiles["alltext4x"].pretrain.steps

    class FakeCell:
        def __init__(self, plan, profile, name, seeds=None):
            self.dir = tmp_path / name

    monkeypatch.setattr(bbert, "Cell", FakeCell)
    hi = tmp_path / "en-hi"
    (hi / "snapshots").mkdir(parents=True)
    snap = [{**r, "step": 4000} for r in cell_rows("en-hi", "hi", [0, 0, 0, 0.30], [0, 0, 0, 0.3]) if r["seed"] == 3]
    pd.DataFrame(snap).to_csv(hi / "snapshots" / "results_3_step4000.csv", index=False)
    last = [r for r in cell_rows("en-hi", "hi", [0, 0, 0, 0.40], [0, 0, 0, 0.4]) if r["seed"] == 3]
    pd.DataFrame(last).to_csv(hi / "results_3.csv", index=False)
    # the tables' final results (seeds 0-2, from `publish`): seed 3 is not among them
    final = pd.DataFrame(cell_rows("en-hi", "hi", [0.2, 0.2, 0.2], [0.2] * 3))
    curve = pilots.snapshot_results("alltext4x", final)
    seed3 = curve[(curve["experiment"] == "en-hi") & (curve["seed"] == 3) & (curve["metric"] == "accuracy")
                  & (curve["language"] == "hi")]
    assert sorted(zip(seed3["step"], seed3["value"])) == [(4000, 0.30), (steps, 0.40)]
    # read back as a curve: seed 3 has two points; seeds 0-2 (a final model alone) are no curve
    curve.to_csv(tmp_path / "pilot_alltext4x_curve.csv", index=False)
    c = pilots.transfer_curves(tmp_path, profiles=("alltext4x",))
    assert set(c["seed"]) == {3} and c["target test"].tolist() == pytest.approx([30.0, 40.0])


def test_the_base_cells_without_a_curve_are_named_with_the_declared_part_that_adds_one():
    part, command, declared = pilots.CURVE_PART
    assert command.startswith(f"xlrepro train k2020 --part {part} ") and "--seeds 3" in command
    curves = pd.DataFrame({"cell": ["en-es", "enfake-es", "en-ru", "enfake-ru"], "seed": 0, "step": 4000})
    text = pilots.transfer_missing(curves)
    assert text.startswith("No learning curve is published for en-hi, enfake-hi: no snapshot of their runs was "
                           "evaluated")
    assert f"Part `curve_hi`, declared before its run (commit {declared}), adds one for en-hi, enfake-hi" in text
    # en-ru missing too: named, but the part does not cover it
    text = pilots.transfer_missing(curves[curves["cell"] != "en-ru"])
    assert "for en-hi, enfake-hi, en-ru:" in text and "adds one for en-hi, enfake-hi (" in text
    every = pd.DataFrame({"cell": ["en-es", "enfake-es", "en-hi", "enfake-hi", "en-ru", "enfake-ru"]})
    assert pilots.transfer_missing(every) == ""


def test_the_tables_collect_the_plan_s_seeds_only_so_a_curve_run_s_extra_seed_stays_out(monkeypatch):
    # every seed 0-3 of en-hi evaluated (seed 3: a curve_hi run): the chapters' results read seeds 0-2
    from xlrepro.papers.k2020 import report as R
    from xlrepro.papers.k2020.config import load_plan
    plan = load_plan()

    class FakeCell:
        def __init__(self, plan_, profile, name, seeds=None):
            self.name, self.seeds = name, list(plan.seeds if seeds is None else seeds)

        def evaluated(self, seed):
            return seed in (0, 1, 2, 3)

        def evaluate_seed(self, seed):
            return pd.DataFrame([row(self.name, seed, "hi", "accuracy", 0.3)])

        def majority(self):
            return pd.DataFrame([row(f"majority/{self.name}", -1, "hi", "accuracy", 0.25)])

    monkeypatch.setattr(R, "Cell", FakeCell)
    frame = R.collect(["en-hi"], "alltext4x")
    assert sorted(frame[frame["experiment"] == "en-hi"]["seed"]) == [0, 1, 2]


def test_restore_writes_the_published_results_back_where_the_planner_skips_them(tmp_path):
    """Published at alltext8x: en-ru in pilot_alltext8x.csv (seeds 0-2, sections and NER; seed 3 of a curve run;
    the majority rows; its config with the plan's run key) and enfake-ru/id (sections and NER; first with a config
    of another run key: an engine or recipe changed since, so it is not restored) in recipe_alltext8x/linguistic.csv,
    with a stack's timing record. Restored:
    each (cell, seed, task) gets its results file with the published rows as they were written, so every seed of
    both cells reads as evaluated, seed 3 gets nothing, the timing record lands under stacks/. A file already there
    is left as it is; an unknown task, or nothing published, is refused."""
    from xlrepro.papers.k2020.bbert import Cell
    from xlrepro.papers.k2020.config import load_plan
    published, runs = tmp_path / "results", tmp_path / "runs"
    (published / "recipe_alltext8x").mkdir(parents=True)
    rows = [row("majority/en-ru", -1, "ru", "accuracy", 0.25)]
    for seed in (0, 1, 2, 3):
        rows += [row("en-ru", seed, "ru", "accuracy", 0.5 + seed / 100),
                 {**row("en-ru", seed, "ru", "f1", 0.4), "task": "ner"}]
    pd.DataFrame(rows).to_csv(published / "pilot_alltext8x.csv", index=False)
    pd.DataFrame([row("enfake-ru/id", s, "ru", "accuracy", 0.123456789012345678) for s in (0, 1, 2)]
                 + [{**row("enfake-ru/id", s, "ru", "f1", 0.3), "task": "ner"} for s in (0, 1, 2)]
                 + [row("enfake-ru/id", 0, "ru", "top_prediction_class", "Psalms")]).to_csv(
        published / "recipe_alltext8x" / "linguistic.csv", index=False)
    (published / "recipe_alltext8x" / "stack_abc.json").write_text(json.dumps({"shape": "L12H12d192",
                                                                               "ms_per_model_step": 8.8}))
    plan = load_plan()
    en, fake = Cell(plan, "alltext8x", "en-ru", root=runs), Cell(plan, "alltext8x", "enfake-ru/id", root=runs)
    (published / "pilot_alltext8x").mkdir()
    config = {"key": en.key, "config": {"engine": "e"}, "recorded": {}}
    (published / "pilot_alltext8x" / "config_en-ru.json").write_text(json.dumps(config))
    (published / "recipe_alltext8x" / "config_enfake-ru__id.json").write_text(json.dumps({**config, "key": "old"}))
    assert pilots.restore("alltext8x", published, runs) == ["en-ru"]  # enfake-ru/id: another key, trained again
    assert json.loads((en.dir / "config.json").read_text()) == config and not fake.dir.exists()
    (published / "recipe_alltext8x" / "config_enfake-ru__id.json").unlink()  # no config published: restored
    assert pilots.restore("alltext8x", published, runs) == ["en-ru", "enfake-ru/id"]
    assert all(c.evaluated(s) for c in (en, fake) for s in (0, 1, 2)) and en.dir.parent == runs
    assert not (en.dir / "results_3.csv").exists() and not en.ner_results_path(3).exists()
    assert pd.read_csv(en.dir / "results_1.csv")["value"].tolist() == [0.51]
    assert pd.read_csv(en.ner_results_path(2))["metric"].tolist() == ["f1"]
    text = (fake.dir / "results_0.csv").read_text()
    assert "Psalms" in text and "0.12345678901234568" in text  # as pandas wrote the published value
    assert json.loads((runs / "stacks" / "abc" / "timing.json").read_text())["ms_per_model_step"] == 8.8
    (en.dir / "results_0.csv").write_text("kept")
    pilots.restore("alltext8x", published, runs)
    assert (en.dir / "results_0.csv").read_text() == "kept"
    pd.DataFrame([{**row("en-ru", 0, "ru", "accuracy", 0.5), "task": "xnli"}]).to_csv(
        published / "pilot_alltext8x.csv", index=False)
    with pytest.raises(ConfigError, match="valid choices: sections, ner, adjacency"):
        pilots.restore("alltext8x", published, runs)
    with pytest.raises(ConfigError, match="nothing of profile alltext4x is published"):
        pilots.restore("alltext4x", published, runs)
    with pytest.raises(ConfigError, match="valid choices: alltext, alltext2x, alltext4x, alltext8x"):
        pilots.restore("lab", published, runs)
