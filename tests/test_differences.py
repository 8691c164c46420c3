"""Known-answer tests of the Dufter & Schütze "Where we differ" list (xlrepro/papers/dufter2020/differences.py)."""
import numpy as np
import pandas as pd
import pytest

from xlrepro import differences as shared
from xlrepro.config import ConfigError
from xlrepro.papers.dufter2020.differences import (UNKNOWN, differences, differences_markdown, load_causes,
                                                   parse_causes)


def long(rows):
    """{(experiment, metric): [values over seeds]} -> long frame (experiment, seed, metric, value)."""
    return pd.DataFrame([(e, s, m, v) for (e, m), vals in rows.items() for s, v in enumerate(vals)],
                        columns=["experiment", "seed", "metric", "value"])


# Our seeds: mean 0.50, sample std 0.10 for every metric below (0.4, 0.5, 0.6).
SEEDS = [0.4, 0.5, 0.6]
OURS = long({("0", "retr_l8"): SEEDS,      # paper 0.80: gap 0.30 = 3 std -> listed
             ("0", "trans_l8"): SEEDS,     # paper 0.60: gap 0.10 = 1 std -> not listed
             ("0", "extra"): SEEDS,        # the paper gives no number -> skipped
             ("5", "retr_l8"): SEEDS,      # paper 0.10: gap 0.40 = 4 std -> listed, no cause matches
             ("7", "mu"): [0.9]})          # one seed: spread = paper std 0.05; gap 0.6 = 12 spreads -> listed
PAPER = pd.DataFrame([("0", "retr_l8", 0.80, 0.01), ("0", "trans_l8", 0.60, 0.01), ("5", "retr_l8", 0.10, 0.02),
                      ("7", "mu", 0.30, 0.05), ("9", "retr_l8", 0.50, 0.01)],   # 9: not trained -> skipped
                     columns=["experiment", "metric", "mean", "std"])
CAUSES = parse_causes({"causes": [
    {"id": "retrieval", "experiments": ["0", "1?"], "metrics": ["retr_*"], "text": "Retrieval differs."},
    {"id": "seven", "experiments": ["7"], "metrics": ["*"], "text": "Model 7 differs."},
    {"id": "never", "experiments": ["3"], "metrics": ["*"], "text": "Not in the frame."}]})


class TestDufter2020Differences:
    """Named for the paper, so that `pytest -k dufter2020` selects these with the chapters' smoke runs."""

    def test_exactly_the_large_gaps_are_listed_largest_first_with_their_causes(self):
        d = differences(OURS, PAPER, CAUSES, rounding=0)
        assert list(zip(d.experiment, d.metric)) == [("7", "mu"), ("5", "retr_l8"), ("0", "retr_l8")]
        assert d.gap_in_std.round(6).tolist() == [12.0, 4.0, 3.0]
        assert d.gap.round(6).tolist() == [0.6, 0.4, -0.3]
        assert d.cause.tolist() == ["Model 7 differs.", UNKNOWN, "Retrieval differs."]
        assert d.causes.tolist() == ["seven", "", "retrieval"]

    def test_zero_seed_std_falls_back_to_the_papers_std_and_rounding_hides_printed_digits(self):
        ours = long({("3", "retr_l0"): [0.004, 0.004], ("3", "ppl_dev"): [300.0, 300.0]})
        paper = pd.DataFrame([("3", "retr_l0", 0.0, 0.0), ("3", "ppl_dev", 209.0, 14.4)],
                             columns=["experiment", "metric", "mean", "std"])
        d = differences(ours, paper, CAUSES)  # default rounding: 0.005 for fractions, 0.5 for perplexities
        assert list(zip(d.experiment, d.metric)) == [("3", "ppl_dev")]
        assert d.spread.tolist() == [14.4]
        assert len(differences(ours, paper, CAUSES, rounding=0)) == 2

    def test_a_curves_frame_is_cut_to_the_last_checkpoint(self):
        curves = pd.DataFrame({"experiment": ["0"] * 4, "seed": [0, 0, 1, 1], "step": [0, 10, 0, 10],
                               "metric": ["retr_l8"] * 4, "value": [0.0, 0.4, 0.0, 0.6]})
        d = differences(curves, PAPER, CAUSES, rounding=0)  # last checkpoints 0.4, 0.6: mean 0.5, std 0.141
        assert d.experiment.tolist() == ["0"] and round(float(d.ours_mean[0]), 6) == 0.5

    def test_markdown_table_has_one_row_per_gap_and_escapes_pipes(self):
        causes = parse_causes({"causes": [{"id": "p", "experiments": ["5"], "metrics": ["*"], "text": "a | b"}]})
        text = differences_markdown(OURS, PAPER, {"5": "lang-pos"}, causes, rounding=0, names={"mu": "µ"}).data
        lines = text.splitlines()
        assert lines[0] == "| model | metric | ours (mean ± std, seeds) | paper | gap in std | cause |"
        assert len(lines) == 2 + 3
        assert "| 5 lang-pos | retr_l8 | 0.50 ± 0.10 (3) | 0.10 ± 0.02 | 4.0 | a \\| b |" in lines
        assert "| 7 | µ | 0.90 (1) | 0.30 ± 0.05 | 12.0 | cause not known |" in lines

    def test_bad_yaml_key_names_the_valid_keys(self):
        with pytest.raises(ConfigError, match="unknown key 'metric'.*valid choices: id, experiments, metrics, text, languages"):
            parse_causes({"causes": [{"id": "x", "experiments": ["*"], "metric": ["*"], "text": "t"}]})
        with pytest.raises(ConfigError, match="valid choices: causes"):
            parse_causes({"cause": []})
        with pytest.raises(ConfigError, match="non-empty list of patterns"):
            parse_causes({"causes": [{"id": "x", "experiments": "0", "metrics": ["*"], "text": "t"}]})
        with pytest.raises(ConfigError, match="repeated: x"):
            parse_causes({"causes": [{"id": "x", "experiments": ["0"], "metrics": ["*"], "text": "t"}] * 2})

    def test_bad_arguments_are_refused(self):
        with pytest.raises(ValueError, match="lacks columns value"):
            differences(OURS.drop(columns="value"), PAPER, CAUSES)
        with pytest.raises(ValueError, match="positive number"):
            differences(OURS, PAPER, CAUSES, k=0)
        with pytest.raises(ValueError, match="rounding must be"):
            differences(OURS, PAPER, CAUSES, rounding=-1)

    def test_the_shipped_causes_load_and_cover_the_documented_ones(self):
        ids = {c.id for c in load_causes()}
        assert {"corpus-train", "corpus-dev", "updates", "seed0-did-not-learn", "base-updates",
                "untrained-vocabulary"} <= ids

    def test_no_gap_says_so(self):
        ours = long({("0", "retr_l8"): [0.79, 0.80, 0.81]})
        text = differences_markdown(ours, PAPER, causes=CAUSES).data
        assert text == "No gap to the paper is larger than 2 standard deviations of our seeds."


class TestSharedDifferences:
    """xlrepro.differences with an extra key (language) and per-language causes, as Wu & Dredze's chapters use it."""

    OURS = pd.DataFrame([("zero-shot", s, "accuracy", lang, v) for lang, vals in
                         {"en": [88.0, 89.0, 90.0], "fr": [40.0, 41.0, 42.0], "de": [70.5, 71.0, 71.5]}.items()
                         for s, v in enumerate(vals)], columns=["experiment", "seed", "metric", "language", "value"])
    PAPER = pd.DataFrame([("zero-shot", "accuracy", "en", 82.1, np.nan), ("zero-shot", "accuracy", "fr", 73.8, np.nan),
                          ("zero-shot", "accuracy", "de", 71.1, np.nan)],
                         columns=["experiment", "metric", "language", "mean", "std"])
    CAUSES = shared.parse_causes({"causes": [
        {"id": "task", "experiments": ["*"], "metrics": ["*"], "text": "Another task."},
        {"id": "targets", "experiments": ["*"], "metrics": ["*"], "languages": ["fr", "de"], "text": "Less transfer."}]})

    def test_numbers_are_compared_per_language_and_causes_match_their_languages(self):
        keys = ("experiment", "metric", "language")
        d = shared.differences(self.OURS, self.PAPER, self.CAUSES, keys=keys)
        # fr: 41 vs 73.8, std 1 -> 32.8 std; en: 89 vs 82.1 -> 6.9 std; de: 71 vs 71.1 -> 0.2 std, not listed
        assert d["language"].tolist() == ["fr", "en"]
        assert d["gap_in_std"].round(6).tolist() == [32.8, 6.9]
        assert d["causes"].tolist() == ["task;targets", "task"]

    def test_legend_lists_each_cause_once_below_the_table(self):
        text = shared.differences_markdown(self.OURS, self.PAPER, self.CAUSES, keys=("experiment", "metric", "language"),
                                           digits=lambda m, v: 1, legend=True).data
        lines = text.splitlines()
        assert lines[0] == "| model | metric | language | ours (mean ± std, seeds) | paper | gap in std | cause |"
        assert "| zero-shot | accuracy | fr | 41.0 ± 1.0 (3) | 73.8 | 32.8 | task, targets |" in lines
        assert lines[-2:] == ["- **task**: Another task.", "- **targets**: Less transfer."]

    def test_keys_must_include_experiment_and_metric(self):
        with pytest.raises(ValueError, match="include experiment, metric"):
            shared.differences(self.OURS, self.PAPER, self.CAUSES, keys=("experiment", "language"))
        with pytest.raises(ValueError, match="lacks columns language"):
            shared.differences(self.OURS.drop(columns="language"), self.PAPER, self.CAUSES,
                               keys=("experiment", "metric", "language"))

    def test_causes_load_from_a_package_or_a_path(self, tmp_path):
        assert {c.id for c in shared.load_causes("xlrepro.papers.wu2019")} >= {"task", "encoder", "frozen-depth"}
        path = tmp_path / "c.yaml"
        path.write_text("causes:\n  - {id: a, experiments: ['*'], metrics: ['*'], text: t}\n")
        assert [c.id for c in shared.load_causes(path)] == ["a"]
        with pytest.raises(FileNotFoundError):
            shared.load_causes(tmp_path / "missing.yaml")


class TestWu2019Differences:
    def test_q2_maps_our_frozen_depth_to_the_papers_and_scales_to_percent(self):
        from xlrepro.papers.wu2019.differences import comparison
        frozen = pd.DataFrame([("freeze-1", 0, "de", "accuracy", 0.5), ("all", 0, "de", "accuracy", 0.6),
                               ("freeze-1", 0, "de", "macro_f1", 0.4)],
                              columns=["experiment", "seed", "language", "metric", "value"])
        ours, paper = comparison("q2_layers", {"frozen": frozen}, depth=4)
        assert ours[["experiment", "language", "metric", "value"]].values.tolist() == [["freeze-1", "de", "accuracy",
                                                                                         50.0]]
        # our freeze-1 of 4 layers is the paper's "Lay 3" of 12 (Figure 1b, as transcribed)
        de = paper[(paper.experiment == "freeze-1") & (paper.language == "de")]["mean"].tolist()
        from xlrepro.reference import paper_numbers
        ref = paper_numbers("wu2019", "Figure 1b")
        assert de == ref[(ref.experiment == "mBERT/freeze-3") & (ref.language == "de")]["mean"].tolist()
        assert len(de) == 1

    def test_chapters_without_paper_numbers_say_so_and_bad_names_are_refused(self):
        from xlrepro.papers.wu2019.differences import where_we_differ
        assert "prints no numbers" in where_we_differ("q4_subword_overlap", {}).data
        assert "pending" in where_we_differ("q1_zero_shot", {}).data
        with pytest.raises(ValueError, match="valid choices: q1_zero_shot"):
            where_we_differ("q5", {})
