"""The levels a Liu et al. 2020 result must clear to mean anything, computed from the chapters' own data.

``book/results/liu2020/baselines.csv`` (long format, seed -1, experiment = the baseline's name):

- ``chance`` / metric ``mrr``: the exact expected MRR of word retrieval (`retrieval.word_retrieval`) when the
  candidates are ranked at random, over the evaluation's test dictionaries (`lab.cached_dictionaries`, the same
  candidate set and gold sets): a source word with g gold translations among m candidates has E[1/rank] =
  sum_r (1/r) C(m-r, g-1) / C(m, g) (:func:`expected_reciprocal_rank`).
- ``chance-identical`` / ``mrr``: the same with the identical-string pairs counted as the evaluation counts them for
  a model with one vector per token (the static models, and BERT's input embeddings): a source word whose string is
  one of its gold translations has cosine 1 with it, rank 1; a source word whose string is another candidate (not
  its gold) has that candidate at rank 1, above every gold; the rest is random (:func:`chance_mrr`). This is the
  level of a model that learnt nothing across languages beyond the identity of shared tokens. ``chance`` /
  ``source_words`` is the number of source words (checked against the chapter's dictionaries.csv when written).
- ``majority-test`` / ``accuracy``: the share of the most frequent section label of the zero-shot test pairs (the
  best constant classifier on them); ``majority-train`` / ``accuracy``: the accuracy on the test pairs of always
  predicting the English training pairs' most frequent label (`xlrepro.tasks.sections.majority_baseline`). Both
  per test language (the test sets are translations of each other: the labels are the same in every language).
- ``unigram-big`` / ``entropy_nats``: the unigram entropy of each language's big corpus under mBERT's WordPiece, in
  nats per token: the MLM loss of a model that predicts every masked token from the language's token
  frequencies alone.

    python -m xlrepro.papers.liu2020.baselines      # writes book/results/liu2020/baselines.csv

It needs the prepared Bible cache (`xlrepro prepare --multilingual`) and the dictionaries (`make dictionaries`).
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Iterable, Mapping, Sequence

import pandas as pd

SEED = -1  # xlrepro.claims.DETERMINISTIC_SEED
COLUMNS = ["experiment", "seed", "metric", "value", "language"]


def expected_reciprocal_rank(m: int, g: int) -> float:
    """E[1/R] where R is the best rank of g gold items among m candidates in a uniformly random order.

    P(R = r) = C(m - r, g - 1) / C(m, g) for r = 1 .. m - g + 1."""
    if not 1 <= g <= m:
        raise ValueError(f"need 1 <= gold <= candidates; got gold {g}, candidates {m}")
    total = math.comb(m, g)
    return sum(math.comb(m - r, g - 1) / r for r in range(1, m - g + 2)) / total


def reciprocal_rank_chance(source: str, golds: Iterable[str], candidates: Sequence[str], *,
                           identical_first: bool) -> float:
    """The expected reciprocal rank of one source word under random ranking of `candidates` (its `golds` among
    them). With `identical_first`, a candidate spelled like the source has rank 1 (cosine 1 with one vector per
    token): 1 when it is a gold, else the golds are ranked at random among the other candidates below it."""
    golds = set(golds)
    cand = list(dict.fromkeys(candidates))
    if not golds or not golds <= set(cand):
        raise ValueError(f"{source!r}: every gold must be a candidate; missing {sorted(golds - set(cand))[:5]}")
    if identical_first and source in golds:
        return 1.0
    if identical_first and source in cand:
        # the source's own string is ranked first; the golds compete at random among the m - 1 others
        return sum(p / (r + 1) for r, p in _rank_distribution(len(cand) - 1, len(golds)))
    return expected_reciprocal_rank(len(cand), len(golds))


def _rank_distribution(m: int, g: int):
    total = math.comb(m, g)
    return [(r, math.comb(m - r, g - 1) / total) for r in range(1, m - g + 2)]


def chance_mrr(pairs: Sequence[tuple[str, str]], *, identical_first: bool = False) -> float:
    """The exact expected MRR of `retrieval.word_retrieval` on a dictionary `pairs` under random ranking: its
    source words (each once), its candidate set (every target of the dictionary) and its gold sets."""
    src = list(dict.fromkeys(s for s, _ in pairs))
    tgt = list(dict.fromkeys(t for _, t in pairs))
    gold: dict[str, set[str]] = {}
    for s, t in pairs:
        gold.setdefault(s, set()).add(t)
    return sum(reciprocal_rank_chance(s, gold[s], tgt, identical_first=identical_first) for s in src) / len(src)


def identical_share(pairs: Sequence[tuple[str, str]]) -> float:
    """The share of source words that have a gold translation spelled like themselves."""
    src = list(dict.fromkeys(s for s, _ in pairs))
    same = {s for s, t in pairs if s == t}
    return len(same) / len(src)


def majority_share(labels: Iterable[int]) -> float:
    """The accuracy of the best constant prediction: the share of the most frequent label."""
    counts = Counter(labels)
    if not counts:
        raise ValueError("majority_share needs at least one label")
    return max(counts.values()) / sum(counts.values())


def unigram_entropy(counts: Mapping[str, int]) -> float:
    """The entropy in nats of the unigram distribution given by token counts."""
    n = sum(counts.values())
    if n == 0:
        raise ValueError("unigram_entropy needs at least one token")
    return -sum(c / n * math.log(c / n) for c in counts.values() if c > 0)


def retrieval_rows(dictionaries: Mapping[str, Sequence[tuple[str, str]]]) -> list[dict]:
    rows = []
    for lang, pairs in dictionaries.items():
        rows += [{"experiment": "chance", "metric": "mrr", "value": chance_mrr(pairs), "language": lang},
                 {"experiment": "chance", "metric": "source_words", "value": len({s for s, _ in pairs}),
                  "language": lang},
                 {"experiment": "chance-identical", "metric": "mrr",
                  "value": chance_mrr(pairs, identical_first=True), "language": lang},
                 {"experiment": "chance-identical", "metric": "identical_share", "value": identical_share(pairs),
                  "language": lang}]
    return rows


def transfer_rows(train_labels: Sequence[int], test_labels: Mapping[str, Sequence[int]]) -> list[dict]:
    from xlrepro.tasks.sections import majority_baseline
    rows = []
    for lang, labels in test_labels.items():
        rows += [{"experiment": "majority-test", "metric": "accuracy", "value": majority_share(labels),
                  "language": lang},
                 {"experiment": "majority-train", "metric": "accuracy",
                  "value": majority_baseline(train_labels, labels), "language": lang},
                 {"experiment": "majority-test", "metric": "pairs", "value": len(labels), "language": lang}]
    return rows


def frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows).assign(seed=SEED)[COLUMNS]


def compute(languages: Sequence[str] | None = None) -> pd.DataFrame:
    """Every baseline, from the prepared data the evaluation reads (`evaluate.full_setup`)."""
    from xlrepro.data.mbert_vocab import mbert_tokenizer
    from xlrepro.tasks.sections import parallel_keys, verse_pairs

    from .corpora import LANGUAGES, tokenized_corpus
    from .lab import cached_dictionaries, corpus_counts
    from .plan import load_plan

    plan, tok = load_plan(), mbert_tokenizer()
    langs = tuple(languages or LANGUAGES)
    small = corpus_counts(tokenized_corpus("small", langs, tokenizer=tok))
    dictionaries, _ = cached_dictionaries(plan, small, tok, [l for l in langs if l != "en"])
    rows = retrieval_rows(dictionaries)
    t = plan.transfer  # the evaluation's pairs (evaluate.Data.pairs)
    keys = parallel_keys(langs, "test")
    test = {l: verse_pairs(l, "test", keys=keys, max_pairs=t.max_test_pairs)["label"].tolist() for l in langs}
    train = verse_pairs("en", "train", max_pairs=t.max_train_pairs)["label"].tolist()
    rows += transfer_rows(train, test)
    big = corpus_counts(tokenized_corpus("big", langs, tokenizer=tok))
    rows += [{"experiment": "unigram-big", "metric": "entropy_nats", "value": unigram_entropy(c), "language": l}
             for l, c in big.items()]
    return frame(rows)


def check_dictionaries(baselines: pd.DataFrame, dictionaries_csv) -> None:
    """Raise ValueError where the dictionaries the baselines were computed on are not those of a chapter's
    dictionaries.csv (the same source words per language): the chance levels would then be another test's."""
    from pathlib import Path
    if not Path(dictionaries_csv).exists():
        return
    d = pd.read_csv(dictionaries_csv)
    want = d[(d["metric"] == "source_words") & (d["value"] > 0)].set_index("language")["value"].astype(int)
    mine = baselines[(baselines["experiment"] == "chance") & (baselines["metric"] == "source_words")]
    have = dict(zip(mine["language"], mine["value"].astype(int)))
    bad = {l: (int(n), have.get(l)) for l, n in want.items() if have.get(l) != int(n)}
    if bad:
        raise ValueError(f"the test dictionaries differ from {dictionaries_csv} (source words, there vs here): {bad}")


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    from xlrepro.paths import repo_root
    p = argparse.ArgumentParser(prog="python -m xlrepro.papers.liu2020.baselines", description=__doc__.split("\n")[0])
    p.add_argument("--out", help="results folder (default: book/results/liu2020)")
    a = p.parse_args(argv)
    from pathlib import Path
    folder = Path(a.out) if a.out else repo_root() / "book" / "results" / "liu2020"
    df = compute()
    check_dictionaries(df, folder / "dictionaries.csv")
    folder.mkdir(parents=True, exist_ok=True)
    df.to_csv(folder / "baselines.csv", index=False)
    print(df.pivot_table(index="language", columns=["experiment", "metric"], values="value").round(4).to_string())
    print(f"wrote {folder / 'baselines.csv'}")


if __name__ == "__main__":
    main()
