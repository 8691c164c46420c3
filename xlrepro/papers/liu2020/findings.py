"""What the Liu et al. chapters find, in a few sentences computed from their result frames ("What we find").

Each function takes the long frames the chapters write (experiment, seed, language, [layer,] metric, value) and
returns Markdown; a part whose results are absent is left out, so a chapter shows what its run has. The verdicts
stay the claims table's: these paragraphs only put the headline numbers into words.
"""
from __future__ import annotations

import pandas as pd


def _mean_mrr(df: pd.DataFrame | None, experiment: str) -> float | None:
    """Mean over languages of one experiment's MRR (rows of metric "mrr"); None where it has none."""
    if df is None or df.empty:
        return None
    rows = df[(df["experiment"] == experiment) & (df["metric"] == "mrr")]
    if "layer" in rows:
        rows = rows[rows["layer"] == rows["layer"].max()]
    return float(rows["value"].mean()) if len(rows) else None


def _target_accuracy(df: pd.DataFrame | None, experiment: str) -> tuple[float, float, int] | None:
    """Mean zero-shot accuracy over the target languages (English left out): (mean over seeds, std over seeds,
    seeds), each seed's value being its mean over the languages."""
    if df is None or df.empty:
        return None
    rows = df[(df["experiment"] == experiment) & (df["metric"] == "accuracy") & (df["language"] != "en")]
    if rows.empty:
        return None
    per_seed = rows.groupby("seed")["value"].mean()  # [seeds]
    return float(per_seed.mean()), float(per_seed.std(ddof=1)) if len(per_seed) > 1 else 0.0, len(per_seed)


def _acc(x: tuple[float, float, int] | None) -> str:
    if x is None:
        return "–"
    if x[2] == 1:  # one seed: no spread to show
        return f"{100 * x[0]:.1f} % (1 seed)"
    return f"{100 * x[0]:.1f} ± {100 * x[1]:.1f} % ({x[2]} seeds)"


def _mrr(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def static_vs_bert(static: pd.DataFrame | None, bert: pd.DataFrame | None, transfer: pd.DataFrame | None) -> str:
    """Mean MRR (last layer for BERT, window 512) and mean target accuracy of Word2Vec, GloVe and BERT per size."""
    parts = []
    for size in ("small", "big"):
        w2v, glove, b = (_mean_mrr(static, f"word2vec-{size}"), _mean_mrr(static, f"glove-{size}"),
                         _mean_mrr(bert, f"bert-{size}-w512"))
        if any(v is not None for v in (w2v, glove, b)):
            parts.append(f"On the **{size}** corpus the mean MRR over the languages is {_mrr(w2v)} for Word2Vec, "
                         f"{_mrr(glove)} for GloVe and {_mrr(b)} for BERT (window 512, last layer).")
    gains = [(_mean_mrr(static, f"word2vec-{s}"), _mean_mrr(bert, f"bert-{s}-w512")) for s in ("small", "big")]
    if all(v is not None for pair in gains for v in pair):
        parts.append(f"From the small to the big corpus Word2Vec's mean MRR changes by {gains[1][0] - gains[0][0]:+.3f} "
                     f"and BERT's by {gains[1][1] - gains[0][1]:+.3f}.")
    accs = {m: _target_accuracy(transfer, m) for m in
            ("word2vec-small", "glove-small", "bert-small-w512", "word2vec-big", "glove-big", "bert-big-w512")}
    if any(v is not None for v in accs.values()):
        parts.append("Zero-shot, the mean accuracy over the target languages is "
                     + "; ".join(f"{size}: Word2Vec {_acc(accs[f'word2vec-{size}'])}, GloVe {_acc(accs[f'glove-{size}'])}, "
                                 f"BERT {_acc(accs[f'bert-{size}-w512'])}" for size in ("small", "big")) + ".")
    return " ".join(parts)


def context_window(bert: pd.DataFrame | None, transfer: pd.DataFrame | None, windows: pd.DataFrame | None) -> str:
    """The 512 -> 20 change of mean MRR and of mean target accuracy per corpus size; Word2Vec's windows."""
    parts = []
    for size in ("small", "big"):
        m512, m20 = _mean_mrr(bert, f"bert-{size}-w512"), _mean_mrr(bert, f"bert-{size}-w20")
        a512, a20 = _target_accuracy(transfer, f"bert-{size}-w512"), _target_accuracy(transfer, f"bert-{size}-w20")
        bits = []
        if m512 is not None and m20 is not None:
            bits.append(f"mean MRR {m512:.3f} with window 512 and {m20:.3f} with 20 ({m20 - m512:+.3f})")
        if a512 is not None and a20 is not None:
            bits.append(f"mean target accuracy {100 * a512[0]:.1f} % and {100 * a20[0]:.1f} % "
                        f"({100 * (a20[0] - a512[0]):+.1f} points, {min(a512[2], a20[2])} seeds)")
        if bits:
            parts.append(f"On the **{size}** corpus: " + "; ".join(bits) + ".")
    if windows is not None and not windows.empty:
        means = {e: _mean_mrr(windows, e) for e in dict.fromkeys(windows["experiment"])}
        parts.append("Word2Vec on the small corpus, mean MRR by window: "
                     + ", ".join(f"{e} {_mrr(v)}" for e, v in means.items()) + ".")
    return " ".join(parts)


def part_of_speech(pos: pd.DataFrame | None, model: str = "bert-big-w512") -> str:
    """Mean MRR per word class (over the languages, the row "avg" left out) with the words per class."""
    if pos is None or pos.empty:
        return ""
    rows = pos[pos["experiment"].str.startswith(model + "/") & (pos["language"] != "avg")]
    if rows.empty:
        return ""
    cls = rows.assign(cls=rows["experiment"].str.split("/").str[1])
    mrr = cls[cls["metric"] == "mrr"].groupby("cls")["value"].mean()
    words = cls[cls["metric"] == "words"].groupby("cls")["value"].sum()
    order = [c for c in ("open", "closed", "noun", "adj", "adv", "verb") if c in mrr.index]
    return (f"BERT ({model.removeprefix('bert-')}), mean MRR over the languages by class: "
            + ", ".join(f"{c} {mrr[c]:.3f} ({int(words.get(c, 0))} word-language pairs)" for c in order) + ".")


def language_information(ident: pd.DataFrame | None, grid: pd.DataFrame | None, t4: pd.DataFrame | None,
                         layer: int = 10) -> str:
    """Language identification's lowest accuracy; the convert rate at `layer` by alpha; L Table 4's means."""
    parts = []
    if ident is not None and not ident.empty:
        acc = ident[ident["metric"] == "language_id_accuracy"]
        worst = acc.loc[acc["value"].idxmin()]
        parts.append(f"Nearest-mean language identification is at least {worst['value']:.3f} in every language and "
                     f"layer (lowest: {worst['language']}, layer {int(worst['layer'])}).")
    if grid is not None and not grid.empty:
        cr = grid[(grid["metric"] == "convert_rate") & (grid["layer"] == layer)]
        by_alpha = cr.groupby(cr["experiment"].astype(float))["value"].mean().sort_index()
        if len(by_alpha):
            parts.append(f"The convert rate at layer {layer}, mean over the directions, is "
                         + ", ".join(f"{v:.2f} at α {a:g}" for a, v in by_alpha.items()) + ".")
    if t4 is not None and not t4.empty:
        means = {e: _target_accuracy(t4, e) for e in ("finetune-all", "finetune-half", "finetune-half+MDS")}
        if any(v is not None for v in means.values()):
            parts.append("L Table 4, mean target accuracy: " + ", ".join(f"{e} {_acc(v)}" for e, v in means.items())
                         + ".")
    return " ".join(parts)
