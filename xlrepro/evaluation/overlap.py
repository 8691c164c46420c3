"""Sub-word overlap between the English training set and a target language, Wu & Dredze (2019), §5.4 and Figure 3.

Wu & Dredze, "Beto, Bentz, Becas: The Surprising Cross-Lingual Effectiveness of BERT" (EMNLP 2019), §5.4
("Does mBERT benefit by sharing subwords across languages?") define, verbatim:

    "we assume V^en_train is the set of all subwords in the English training set, V^ℓ_test is the set of all
    subwords in language ℓ test set, and c^ℓ_w is the count of subword w in test set of language ℓ. We then
    calculate the percentage of observed subwords at type-level p^ℓ_type and token-level p^ℓ_token for each
    target language ℓ.

        p^ℓ_type  = |V^ℓ_obs| / |V^ℓ_test| × 100

        p^ℓ_token = Σ_{w ∈ V^ℓ_obs} c^ℓ_w / Σ_{w ∈ V^ℓ_test} c^ℓ_w × 100

    where V^ℓ_obs = V^en_train ∩ V^ℓ_test."

and Figure 3's caption: "Relation between cross-lingual zero-shot transfer performance with mBERT and percentage of
observed subwords at both type-level and token-level. Pearson correlation coefficient and p-value are shown in red."
The text: "In Fig. 3, we show the relation between cross-lingual zero-shot transfer performance of mBERT and
p^ℓ_type or p^ℓ_token for all five tasks with Pearson correlation."

So, following the paper exactly:

* both measures are **percentages** (0-100, the paper's "× 100"), not fractions;
* the **denominator is always the target-language test set**: its word-piece types (``p_type``) or its word-piece
  tokens, i.e. every occurrence (``p_token``). The question asked is "what share of what the target test set contains
  was seen in the English training set", never the converse;
* the English training set enters **only as a set of types** (V^en_train): how often a piece occurs in English is
  irrelevant, only whether it occurs at least once;
* ``p_token`` weighs each observed target type by its count **in the target test set** (c^ℓ_w).

Pieces are compared as exact strings, so a WordPiece continuation ``"##s"`` and a word-initial ``"s"`` are different
types, as they are different vocabulary entries of mBERT. The functions count every piece they are given: pass
sentences tokenised into word pieces *without* special tokens ([CLS], [SEP], [PAD]), which would otherwise be shared
by every language and inflate both measures.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import pandas as pd
from scipy.stats import pearsonr
from ..tables import p_value

__all__ = ["subword_overlap", "overlap_vs_transfer", "plot_overlap_vs_transfer", "MEASURES"]

#: The two overlap measures of Figure 3, in the paper's order (left panel type-level, right panel token-level).
MEASURES = ("p_type", "p_token")
_LABELS = {"p_type": "type-level overlap p_type (%)", "p_token": "token-level overlap p_token (%)"}


def _check_sentence(sentence) -> Sequence[str]:
    # A bare string is a Sequence[str] of its characters: almost certainly a caller passing untokenised text.
    if isinstance(sentence, str):
        raise TypeError(f"expected a sequence of word pieces per sentence, got the string {sentence[:40]!r}")
    return sentence


def subword_overlap(source_pieces: Iterable[Sequence[str]], target_pieces: Iterable[Sequence[str]]) -> dict:
    """Wu & Dredze's p^ℓ_type and p^ℓ_token of a target test set against a source (English) training set.

    ``source_pieces`` is the English training set and ``target_pieces`` the language-ℓ test set, each an iterable of
    sentences, each sentence a sequence of word-piece strings (either may be a one-pass generator).

    Returns a dict with

    * ``p_type``  = |V_obs| / |V_test| × 100: percentage of the target's word-piece **types** that also occur in the
      source. Denominator: the number of distinct pieces of the target set, ``n_target_types``.
    * ``p_token`` = Σ_{w∈V_obs} c_w / Σ_{w∈V_test} c_w × 100: percentage of the target's word-piece **tokens**
      (occurrences, counted in the target set) whose type occurs in the source. Denominator: the total number of
      pieces of the target set, ``n_target_tokens``.
    * the counts behind them: ``n_source_types`` (|V^en_train|), ``n_target_types`` (|V^ℓ_test|),
      ``n_shared_types`` (|V^ℓ_obs|), ``n_target_tokens`` (Σ_{w∈V_test} c_w), ``n_shared_tokens``
      (Σ_{w∈V_obs} c_w), and ``n_source_tokens`` for reference (not used by either measure).

    Both measures are percentages in [0, 100], as in the paper. Raises ``ValueError`` for an empty target set (0/0).
    """
    source_types: set[str] = set()
    n_source_tokens = 0
    for sentence in source_pieces:
        sentence = _check_sentence(sentence)
        source_types.update(sentence)
        n_source_tokens += len(sentence)

    target_counts: Counter[str] = Counter()
    for sentence in target_pieces:
        target_counts.update(_check_sentence(sentence))

    n_target_tokens = sum(target_counts.values())
    if n_target_tokens == 0:
        raise ValueError("the target set has no word pieces: p_type and p_token are 0/0")

    shared = [w for w in target_counts if w in source_types]  # V_obs = V_train ∩ V_test
    n_shared_tokens = sum(target_counts[w] for w in shared)
    return {
        "p_type": 100.0 * len(shared) / len(target_counts),
        "p_token": 100.0 * n_shared_tokens / n_target_tokens,
        "n_source_types": len(source_types),
        "n_source_tokens": n_source_tokens,
        "n_target_types": len(target_counts),
        "n_target_tokens": n_target_tokens,
        "n_shared_types": len(shared),
        "n_shared_tokens": n_shared_tokens,
    }


def _merge(overlaps: pd.DataFrame, accuracy: pd.DataFrame) -> pd.DataFrame:
    """One row per language present in both frames: language, p_type, p_token, accuracy."""
    for name, frame, cols in (("overlaps", overlaps, ["language", *MEASURES]), ("accuracy", accuracy,
                                                                              ["language", "accuracy"])):
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            raise ValueError(f"{name} lacks column(s) {missing}")
        if frame["language"].duplicated().any():
            dup = sorted(frame.loc[frame["language"].duplicated(), "language"].astype(str).unique())
            raise ValueError(f"{name} has several rows for language(s) {dup}")
    return overlaps[["language", *MEASURES]].merge(accuracy[["language", "accuracy"]], on="language", how="inner")


def _correlate(merged: pd.DataFrame) -> pd.DataFrame:
    if len(merged) < 3:
        raise ValueError(f"need at least 3 languages with both an overlap and an accuracy, got {len(merged)}")
    rows = []
    for m in MEASURES:
        res = pearsonr(merged[m].to_numpy(float), merged["accuracy"].to_numpy(float))
        rows.append({"measure": m, "r": float(res.statistic), "p": float(res.pvalue), "n": len(merged)})
    return pd.DataFrame(rows, columns=["measure", "r", "p", "n"])


def overlap_vs_transfer(overlaps: pd.DataFrame, accuracy: pd.DataFrame) -> pd.DataFrame:
    """Figure 3's statistic: Pearson correlation, across target languages, of zero-shot accuracy with each overlap.

    ``overlaps`` has columns ``language, p_type, p_token`` (one row per language, e.g. from ``subword_overlap``);
    ``accuracy`` has ``language, accuracy`` (the zero-shot transfer score of that language). They are joined on
    ``language``; only languages in both count. Returns one row per measure, ``measure`` in ("p_type", "p_token"),
    with ``r`` and ``p`` from ``scipy.stats.pearsonr(overlap, accuracy)`` (two-sided) and ``n`` the number of
    languages. Pearson r is invariant to scaling, so percentages or fractions give the same r and p.
    Raises ``ValueError`` on missing columns, a duplicated language, or fewer than 3 joined languages.
    """
    return _correlate(_merge(overlaps, accuracy))


def plot_overlap_vs_transfer(df: pd.DataFrame, title: str | None = None):
    """Figure 3 for one task: accuracy against p_type (left) and p_token (right), points labelled by language.

    ``df`` has columns ``language, p_type, p_token, accuracy`` (one row per language, e.g. ``overlaps.merge(accuracy,
    on="language")``). Each panel's title gives Pearson r and p as computed by ``overlap_vs_transfer``, drawn in
    red as in the paper. Returns the matplotlib Figure (two axes).
    """
    import matplotlib.pyplot as plt

    merged = _merge(df[["language", *MEASURES]], df[["language", "accuracy"]])
    stats = _correlate(merged).set_index("measure")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, m in zip(axes, MEASURES):
        ax.scatter(merged[m], merged["accuracy"], s=18)
        for lang, x, y in zip(merged["language"], merged[m], merged["accuracy"]):
            ax.annotate(str(lang), (x, y), xytext=(3, 3), textcoords="offset points", fontsize=8)
        ax.set_xlabel(_LABELS[m])
        p = p_value(stats.at[m, "p"])
        ax.set_title(f"{m}: r = {stats.at[m, 'r']:.2f}, p {p if p.startswith('<') else '= ' + p}", color="red")
    axes[0].set_ylabel("zero-shot accuracy")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
