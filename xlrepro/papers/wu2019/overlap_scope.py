"""Q4 (Wu & Dredze §5.4): the correlation of subword overlap with zero-shot accuracy, pooled and within a script.

Over all target languages the correlation mixes two groups: languages in the Latin script share many subwords with
English (p_type above 10%), the others (Cyrillic, Arabic, CJK, Devanagari, ...) almost none. A pooled r then mostly
measures the script split. `overlap_correlations` reports it beside the correlation within the languages that share
the script, where overlap varies for other reasons.
"""
from __future__ import annotations

import pandas as pd
from scipy import stats

MIN_TYPE_OVERLAP = 10.0  # percent of a language's word-piece types shared with English: the script split


def shared_script_languages(overlap: pd.DataFrame, min_type_overlap: float = MIN_TYPE_OVERLAP,
                            source: str = "en") -> list[str]:
    """Target languages whose p_type exceeds `min_type_overlap` percent (overlap.csv's long format), sorted."""
    if "p_type" not in set(overlap["metric"]):
        raise ValueError(f"overlap frame has no p_type rows; metrics: {', '.join(sorted(set(overlap['metric'])))}")
    t = overlap[overlap["metric"] == "p_type"].groupby("language")["value"].mean()
    return sorted(l for l, v in t.items() if v > min_type_overlap and l != source)


def overlap_correlations(overlap: pd.DataFrame, zero_shot: pd.DataFrame, min_type_overlap: float = MIN_TYPE_OVERLAP,
                         source: str = "en") -> pd.DataFrame:
    """Pearson r and p of p_type and p_token with the seed-mean zero-shot accuracy, over every target language
    ("pooled") and over those above `min_type_overlap` ("within script"). Columns: overlap, scope, languages, r, p;
    r and p are NaN in a scope of fewer than 3 languages (a run restricted to a few)."""
    acc = zero_shot[(zero_shot["experiment"] == "zero-shot") & (zero_shot["metric"] == "accuracy")]
    acc = acc.groupby("language")["value"].mean().drop(source, errors="ignore")
    within = shared_script_languages(overlap, min_type_overlap, source)
    rows = []
    for metric in ("p_type", "p_token"):
        o = overlap[overlap["metric"] == metric].groupby("language")["value"].mean()
        for scope, langs in (("pooled", [l for l in acc.index if l in o.index]),
                             (f"within script (p_type > {min_type_overlap:g}%)", [l for l in within if l in acc.index])):
            if len(langs) < 3:  # e.g. a run restricted to a few languages: no correlation, said by NaN
                rows.append({"overlap": metric, "scope": scope, "languages": len(langs), "r": float("nan"),
                             "p": float("nan")})
                continue
            r, p = stats.pearsonr(o[langs], acc[langs])
            rows.append({"overlap": metric, "scope": scope, "languages": len(langs), "r": float(r), "p": float(p)})
    return pd.DataFrame(rows)
