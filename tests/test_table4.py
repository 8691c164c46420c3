"""Table 4 (Dufter & Schütze appendix B.2) for readers and for the claims, on hand-made frames with known answers."""
import math

import pandas as pd
import pytest

from xlrepro.claims import claims_table, load_claims
from xlrepro.papers.dufter2020 import knn_chapter, word_order


def _ours(taus: dict, accs: dict, experiment="dice") -> pd.DataFrame:
    rows = [{"experiment": experiment, "seed": -1, "language": l, "metric": "kendall_tau", "value": v}
            for l, v in taus.items()]
    rows += [{"experiment": "zero-shot", "seed": s, "language": l, "metric": "zero_shot_accuracy", "value": v + d}
             for l, v in accs.items() for s, d in ((0, -0.01), (1, 0.01))]
    return pd.DataFrame(rows)


def _paper(taus: dict, accs: dict) -> pd.DataFrame:
    return pd.DataFrame([{"metric": f"kendall_tau_{l}", "mean": v} for l, v in taus.items()] +
                        [{"metric": f"xnli_{l}", "mean": v} for l, v in accs.items()])


class TestDufter2020Table4:
    def test_side_by_side_aligns_languages_and_leaves_blanks(self):
        ours = _ours({"en": 1.0, "fr": 0.6, "ko": 0.4}, {"en": 0.9, "fr": 0.4, "ko": 0.2})
        paper = _paper({"en": 1.0, "fr": 0.8, "th": 0.71}, {"en": 0.814, "fr": 0.738, "th": 0.558})
        t = knn_chapter.table4_side_by_side(ours, paper)
        assert t.index.tolist() == ["en", "fr", "ko", "th"]        # English, ours by τ, then the paper's others
        assert t.loc["ko", "τ distance, paper (mBERT)"] == "" and t.loc["th", "τ distance, ours (Dice)"] == ""
        assert t.loc["fr", "τ distance, ours (Dice)"] == "0.600"
        assert t.loc["fr", "zero-shot accuracy, ours (mini-mBERT, section task)"] == "0.400 ± 0.014 (n=2)"
        assert t.loc["th", "XNLI zero-shot accuracy, paper (mBERT)"] == "0.558"

    def test_correlations_without_and_with_english(self):
        # without English: τ and accuracy on a line (r = 1); English far off the line lowers r with it
        ours = _ours({"en": 1.0, "a": 0.5, "b": 0.6, "c": 0.7}, {"en": 0.1, "a": 0.2, "b": 0.3, "c": 0.4})
        paper = _paper({"en": 1.0, "a": 0.7, "b": 0.6, "c": 0.5}, {"en": 0.8, "a": 0.6, "b": 0.7, "c": 0.8})
        c = knn_chapter.table4_correlations(ours, paper, within=["a", "b"]).set_index(["source", "languages"])
        dice = knn_chapter.TABLE4_OURS["dice"]
        assert c.loc[(dice, "without English"), "Pearson r"] == pytest.approx(1.0)
        assert c.loc[(dice, "without English"), "n"] == 3 and c.loc[(dice, "with English"), "n"] == 4
        assert c.loc[(dice, "with English"), "Pearson r"] < 0          # en: highest τ, lowest accuracy
        assert math.isnan(c.loc[(dice, "within English's script, without English"), "Pearson r"])  # 2 < 3 languages
        assert c.loc[("paper: mBERT (XNLI)", "without English"), "Pearson r"] == pytest.approx(-1.0)
        assert c.loc[("paper: mBERT (XNLI)", "with English"), "paper states"] == 0.64

    def test_claim_reads_the_dice_rows_only(self):
        # the claim's pooled part reads every language, its within-script part these (English's script)
        latin = ["de", "es", "fr", "id", "it", "pl", "pt", "ro", "sw", "tl", "tr", "vi"]
        taus = {"en": 1.0, **{l: 0.4 + 0.02 * i for i, l in enumerate(latin)}}
        accs = {"en": 0.9, **{l: 0.2 + 0.02 * i for i, l in enumerate(latin)}}
        claim = [c for c in load_claims("dufter2020") if c["id"] == "word_order_correlates"]
        dice = _ours(taus, accs)
        # another similarity source with the opposite order, beside it: it must not be averaged in
        other = _ours({l: 1.4 - v if l != "en" else 1.0 for l, v in taus.items()}, {}, experiment="mini-mbert")
        for frame in (dice, pd.concat([dice, other], ignore_index=True)):
            t = claims_table("dufter2020", "knn_replace", {"table4": word_order.claim_frame(frame)},
                             claims=claim)
            assert t["verdict"].tolist() == ["reproduced"], t["evidence"].tolist()
        # the mini-mbert order alone, read as if it were the dice rows: the targets' correlation turns negative
        flipped = pd.concat([other.assign(experiment="dice"), dice[dice.metric == "zero_shot_accuracy"]])
        t = claims_table("dufter2020", "knn_replace", {"table4": flipped}, claims=claim)
        assert t["verdict"].tolist() == ["not reproduced"], t["evidence"].tolist()

    def test_claim_frame_rejects_two_taus_of_one_source_and_language(self):
        twice = _ours({"en": 1.0, "fr": 0.6}, {})
        with pytest.raises(ValueError, match="several kendall_tau rows"):
            word_order.claim_frame(pd.concat([twice, twice], ignore_index=True))

    def test_options_are_checked_before_any_work(self):
        with pytest.raises(ValueError, match="split must be one of dev, test"):
            word_order.check_options(["fr"], "train", 10, "ordered")
        with pytest.raises(ValueError, match="tie_break must be one of ordered, none"):
            word_order.check_options(["fr"], "dev", 10, "diagonal")
        with pytest.raises(ValueError, match="positive integer"):
            word_order.check_options(["fr"], "dev", 0, "ordered")
        with pytest.raises(ValueError):
            word_order.check_options(["xx"], "dev", 10, "ordered")
        assert word_order.check_options(["en", "fr", "fr"], "test", None, "none") == ["fr"]
        with pytest.raises(ValueError, match="published, compute"):
            knn_chapter.table4_ours("/nonexistent", "recompute")

    def test_words_follow_the_lab_tokenisation(self):
        assert word_order.words("And God said, Let there be light.", "en") == \
            ["and", "god", "said", "let", "there", "be", "light"]
        assert word_order.words("IŞIK olsun", "tr") == ["ışık", "olsun"]     # Turkish dotless i
        assert word_order.words("神说，要有光。", "zh") == ["神", "说", "要", "有", "光"]

    def test_the_published_table_holds_one_tau_per_language_and_every_target(self):
        from xlrepro.paths import repo_root
        from xlrepro.results import read_csv
        t = read_csv(repo_root() / word_order.DEFAULT_OUT)
        word_order.claim_frame(t)
        dice = t[(t.experiment == "dice") & (t.metric == "kendall_tau")]
        assert sorted(dice.language) == sorted(["en", *word_order.TARGETS])
        assert dice.set_index("language").at["en", "value"] == 1.0 and dice["value"].between(0, 1).all()
        acc = t[t.metric == "zero_shot_accuracy"]
        assert set(acc.experiment) == {"zero-shot"} and set(acc.language) == set(dice.language)


def test_mini_mbert_column_and_pending_box_follow_its_rows():
    dice = _ours({"en": 1.0, "fr": 0.6, "ko": 0.4, "de": 0.5}, {"en": 0.9, "fr": 0.4, "ko": 0.2, "de": 0.3})
    paper = _paper({"en": 1.0, "fr": 0.8}, {"en": 0.814, "fr": 0.738})
    t = knn_chapter.table4_side_by_side(dice, paper)
    assert "τ distance, ours (mini-mBERT middle layer)" not in t.columns
    assert "pending the GPU run" in knn_chapter.table4_pending(dice)
    assert "xlrepro train dufter2020 --part table4" in knn_chapter.table4_pending(dice)
    enc = _ours({"en": 1.0, "fr": 0.7, "ko": 0.3}, {}, experiment="mini-mbert")  # no de: a blank cell
    both = pd.concat([dice, enc], ignore_index=True)
    t = knn_chapter.table4_side_by_side(both, paper)
    col = t["τ distance, ours (mini-mBERT middle layer)"]
    assert col["fr"] == "0.700" and col["ko"] == "0.300" and col["de"] == ""
    assert t.loc["fr", "τ distance, ours (Dice)"] == "0.600"              # the Dice column is unchanged
    assert knn_chapter.table4_pending(both) == ""
    c = knn_chapter.table4_correlations(both, paper).set_index(["source", "languages"])
    assert c.loc[(knn_chapter.TABLE4_OURS["mini-mbert"], "without English"), "n"] == 2  # fr, ko (accuracy for both)
