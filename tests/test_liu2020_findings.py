"""The "What we find" paragraphs of the Liu et al. chapters, on hand-made frames with known means."""
import pandas as pd

from xlrepro.papers.liu2020 import findings as F


def mrr_rows(experiment, values, layer=None):
    rows = [{"experiment": experiment, "seed": -1, "language": l, "metric": "mrr", "value": v} for l, v in values.items()]
    rows += [{"experiment": experiment, "seed": -1, "language": l, "metric": "mrr_low", "value": 0.0} for l in values]
    return [dict(r, layer=layer) if layer is not None else r for r in rows]


def acc_rows(experiment, by_seed):
    return [{"experiment": experiment, "seed": s, "language": l, "metric": "accuracy", "value": v}
            for s, langs in by_seed.items() for l, v in langs.items()]


def test_static_vs_bert_means_over_languages_and_seeds():
    static = pd.DataFrame(mrr_rows("word2vec-small", {"fr": 0.1, "de": 0.2}) + mrr_rows("word2vec-big", {"fr": 0.3, "de": 0.3}))
    # BERT: only the last layer counts (layer 2), the earlier layer's high values must not
    bert = pd.DataFrame(mrr_rows("bert-small-w512", {"fr": 0.9, "de": 0.9}, layer=1)
                        + mrr_rows("bert-small-w512", {"fr": 0.05, "de": 0.15}, layer=2)
                        + mrr_rows("bert-big-w512", {"fr": 0.5, "de": 0.7}, layer=2))
    transfer = pd.DataFrame(acc_rows("bert-big-w512", {0: {"en": 0.9, "fr": 0.4, "de": 0.2},   # seed mean 0.3
                                                       1: {"en": 0.9, "fr": 0.5, "de": 0.3}}))  # seed mean 0.4
    text = F.static_vs_bert(static, bert, transfer)
    assert "**small** corpus the mean MRR over the languages is 0.150 for Word2Vec, – for GloVe and 0.100 for BERT" in text
    assert "0.300 for Word2Vec" in text and "0.600 for BERT" in text
    assert "Word2Vec's mean MRR changes by +0.150 and BERT's by +0.500" in text
    assert "big: Word2Vec –, GloVe –, BERT 35.0 ± 7.1 % (2 seeds)" in text  # English left out; std over seed means


def test_context_window_changes_and_windows():
    bert = pd.DataFrame(mrr_rows("bert-big-w512", {"fr": 0.2}, layer=3) + mrr_rows("bert-big-w20", {"fr": 0.1}, layer=3))
    transfer = pd.DataFrame(acc_rows("bert-big-w512", {0: {"fr": 0.5}, 1: {"fr": 0.5}})
                            + acc_rows("bert-big-w20", {0: {"fr": 0.4}, 1: {"fr": 0.4}}))
    windows = pd.DataFrame(mrr_rows("word2vec-small", {"fr": 0.1}) + mrr_rows("word2vec-small-w256", {"fr": 0.3}))
    text = F.context_window(bert, transfer, windows)
    assert "**small**" not in text  # nothing of the small corpus in these results: left out
    assert "mean MRR 0.200 with window 512 and 0.100 with 20 (-0.100)" in text
    assert "mean target accuracy 50.0 % and 40.0 % (-10.0 points, 2 seeds)" in text
    assert "word2vec-small 0.100, word2vec-small-w256 0.300" in text


def test_part_of_speech_skips_avg_and_counts_words():
    pos = pd.DataFrame([{"experiment": f"bert-big-w512/{c}", "seed": -1, "language": l, "metric": m, "value": v}
                        for c, vals in (("open", (0.2, 0.4, 9.0)), ("closed", (0.1, 0.1, 0.0)))
                        for l in ("fr", "de") for m, v in (("mrr", vals[0] if l == "fr" else vals[1]), ("words", 5))]
                       + [{"experiment": "bert-big-w512/open", "seed": -1, "language": "avg", "metric": "mrr",
                           "value": 99.0}])
    assert F.part_of_speech(pos) == ("BERT (big-w512), mean MRR over the languages by class: open 0.300 "
                                     "(10 word-language pairs), closed 0.100 (10 word-language pairs).")
    assert F.part_of_speech(None) == ""


def test_language_information_lowest_accuracy_and_convert_rate_by_alpha():
    ident = pd.DataFrame([{"experiment": "m", "seed": -1, "metric": "language_id_accuracy", "value": v,
                           "language": l, "layer": k} for l, k, v in (("fr", 0, 1.0), ("de", 3, 0.97), ("de", 4, 1.0))])
    grid = pd.DataFrame([{"experiment": a, "seed": -1, "metric": "convert_rate", "value": v, "language": d, "layer": k}
                         for a, d, k, v in (("1.0", "en-fr", 10, 0.2), ("1.0", "fr-en", 10, 0.4), ("3.0", "en-fr", 10, 1.0),
                                            ("3.0", "en-fr", 2, 0.0), ("-1.0", "en-fr", 10, 0.0))])
    text = F.language_information(ident, grid, None)
    assert "at least 0.970 in every language and layer (lowest: de, layer 3)" in text
    assert "is 0.00 at α -1, 0.30 at α 1, 1.00 at α 3." in text
    assert "Table 4" not in text


def test_one_seed_is_said_without_a_spread():
    from xlrepro.papers.liu2020.findings import _acc
    assert _acc((0.208, 0.0, 1)) == "20.8 % (1 seed)"
    assert _acc((0.35, 0.0707, 2)) == "35.0 ± 7.1 % (2 seeds)"
