"""The section task's baselines card: what a model without any pre-training reaches, per test language.

A bilingual BERT fine-tuned on the English (or Fake-English) pairs of the section task (`xlrepro.tasks.sections`) and
tested zero-shot on a target is read against these numbers, measured on the very pairs K et al.'s chapters test on
(the keys shared by en, es, hi and ru: `parallel_keys`, as `BBert.test_keys` builds them; dev: each language's own
dev pairs, as the chapters' dev rows):

* ``majority``: always the majority class of the training language's train pairs.
* ``bow_word``: a bag of words (TF-IDF of word unigrams, the two verses of a pair joined) and a logistic regression,
  trained on the training language's train pairs and applied zero-shot to every test language. Only words spelled the
  same in both languages (names, numbers, loanwords) carry anything across: this is how much of the transfer shared
  surface strings alone could give.
* ``bow_char``: the same on character 3- to 5-grams within words (scikit-learn's ``char_wb``): shared spellings below
  the word (name stems, digits, punctuation next to a word).
* ``in_language_word``: the ``bow_word`` model trained on the test language's own train pairs (a single-side,
  supervised ceiling for a lexical model; for ``en`` it is ``bow_word`` itself).
* Fake-English (``train_language`` ``enfake``, K et al.'s `to_fake_unicode` of the English pairs, every character
  shifted): ``bow_word`` and ``bow_char`` trained on it share no word and no character n-gram with any real language,
  so every target pair is an empty vector (``empty_share`` 1) and gets the train majority class: these rows must
  equal ``majority``, a check of the card itself.

A pair with no feature the model knows gets the train majority class (`predict_bow`): the logistic regression's own
answer on an empty vector, the class of its largest intercept, is an extrapolation (``accuracy_raw`` keeps it).

Fixed choices (never tuned on test): TF-IDF with sublinear term frequency, features seen in at least 2 train pairs;
a multinomial logistic regression (L2, lbfgs); its inverse regularisation C is chosen from `C_GRID` on the *source's*
dev pairs only (English; the shifted English dev pairs for Fake-English), and the in-language ceilings reuse the C
chosen on English dev for the same features (so the source's own dev rows are optimistic). Everything is deterministic (lbfgs; `max_train_pairs` subsamples by the
task's seeded key hash).

Metrics per (baseline, train_language, test_language, split): accuracy, macro_f1 (`xlrepro.training.finetune.macro_f1`,
the one the chapters report), pairs, majority_share (the share of predictions that are the train majority class), and
for the lexical models accuracy_raw (without the back-off to the majority class), empty_share (the share of pairs with
no known feature), feature_coverage (the share of the test pairs' feature occurrences, words or n-grams, that the
trained vocabulary knows) and C.
"""
from __future__ import annotations

import argparse
import os
from typing import Sequence

import numpy as np

from xlrepro.data.multilingual import LANGUAGES, SPLITS, check_language, tokenize
from xlrepro.tasks.sections import SECTIONS, majority_class, parallel_keys, verse_pairs

FAKE = "enfake"  # K et al.'s Fake-English: the English pairs with every character shifted (xlrepro.papers.k2020.data)
FEATURES = ("word", "char")
BASELINES = ("majority", "bow_word", "bow_char", "in_language_word")
# inverse regularisation strengths tried, each chosen on the source's dev pairs (never on a target, never on test)
C_GRID = (0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
MIN_DF = 2            # a feature must occur in at least 2 train pairs
CHAR_NGRAMS = (3, 5)  # character n-grams within words (char_wb)
MAX_ITER = 2000
CARD_COLUMNS = ("baseline", "train_language", "test_language", "split", "metric", "value")
CARD_FILE = "task_card.csv"  # in book/results/k2020 (`xlrepro.results.results_dir`)


def check_features(features: str) -> str:
    if features not in FEATURES:
        raise ValueError(f"unknown features {features!r}; valid features: {', '.join(FEATURES)}")
    return features


def _fake(text: str) -> str:
    from .data import to_fake_unicode
    return to_fake_unicode(text)


def pair_documents(pairs, lang: str, features: str) -> list:
    """The documents a vectorizer reads, one per pair, the two verses joined: for "word" the token list
    (`tokenize`: lower-cased, punctuation stripped from the ends; written with the project's tokenizer because
    scikit-learn's default token pattern `\\w\\w+` cuts Devanagari words at every vowel sign), for "char" the text.
    `lang` FAKE shifts both verses as K et al.'s chapters do (`to_fake_unicode`, verse by verse) and tokenizes the
    result with the English rules."""
    check_features(features)
    first, second = pairs["first"].tolist(), pairs["second"].tolist()
    if lang == FAKE:
        first, second = [_fake(t) for t in first], [_fake(t) for t in second]
    rules = "en" if lang == FAKE else lang
    if features == "word":
        return [tokenize(a, rules) + tokenize(b, rules) for a, b in zip(first, second)]
    return [f"{a} {b}" for a, b in zip(first, second)]


def _tokens(doc):  # documents are already token lists (module level: the vectorizer stays picklable)
    return doc


def make_vectorizer(features: str):
    """A TF-IDF vectorizer of word unigrams (documents: token lists) or character 3-5-grams within words."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    if check_features(features) == "word":
        return TfidfVectorizer(analyzer=_tokens, min_df=MIN_DF, sublinear_tf=True)
    return TfidfVectorizer(analyzer="char_wb", ngram_range=CHAR_NGRAMS, min_df=MIN_DF, sublinear_tf=True,
                           lowercase=True)


def fit_bow(train_docs: list, train_labels, features: str, *, C: float, seed: int = 0):
    """(vectorizer, classifier) fitted on the train documents."""
    from sklearn.linear_model import LogisticRegression

    vec = make_vectorizer(features)
    x = vec.fit_transform(train_docs)
    clf = LogisticRegression(C=C, max_iter=MAX_ITER, random_state=seed)
    clf.fit(x, np.asarray(train_labels))
    return vec, clf


def choose_C(train_docs, train_labels, dev_docs, dev_labels, features: str, *, grid: Sequence[float] = C_GRID,
             seed: int = 0) -> float:
    """The C of `grid` with the best dev accuracy (ties: the smaller C)."""
    best, best_acc = None, -1.0
    for C in grid:
        vec, clf = fit_bow(train_docs, train_labels, features, C=C, seed=seed)
        acc = float((clf.predict(vec.transform(dev_docs)) == np.asarray(dev_labels)).mean())
        if acc > best_acc:
            best, best_acc = C, acc
    return best


def feature_coverage(vec, docs) -> float:
    """The share of the documents' feature occurrences (words, or n-grams) that the fitted vocabulary has."""
    analyze = vec.build_analyzer()
    vocab = vec.vocabulary_
    known = total = 0
    for doc in docs:
        grams = analyze(doc)
        total += len(grams)
        known += sum(1 for g in grams if g in vocab)
    return known / total if total else float("nan")


def predict_bow(vec, clf, docs, fallback: int):
    """(predictions, the classifier's own predictions, empty mask): a document with no feature the vectorizer knows
    gets `fallback` (the train majority class) instead of the classifier's guess. On an empty vector a logistic
    regression answers the class of its largest intercept, an extrapolation to a point no train pair is near (on the
    section task not the majority class: letters_revelation, 15 % of the test pairs); a lexical baseline that sees
    nothing it knows should answer the prior, so that it measures what the shared strings give and nothing else."""
    x = vec.transform(docs)
    raw = clf.predict(x)
    empty = np.asarray(x.getnnz(axis=1) == 0)
    return np.where(empty, fallback, raw), raw, empty


def scores(gold, pred, majority: int) -> dict[str, float]:
    """accuracy, macro_f1 (over the six sections), pairs and majority_share of predictions `pred`."""
    from xlrepro.training.finetune import macro_f1

    gold, pred = np.asarray(gold), np.asarray(pred)
    if not len(gold):
        raise ValueError("scores need at least one pair")
    return {"accuracy": float((pred == gold).mean()), "macro_f1": macro_f1(gold, pred, len(SECTIONS)),
            "pairs": float(len(gold)), "majority_share": float((pred == majority).mean())}


def baseline_card(langs: Sequence[str] = ("en", "es", "hi", "ru"), cache_dir: str | os.PathLike | None = None, *,
                  train_lang: str = "en", max_train_pairs: int | None = None, seed: int = 0,
                  fake: bool = True, progress: bool = False):
    """The section task's baselines as a long DataFrame with `CARD_COLUMNS`.

    Test pairs: the keys shared by `langs` and `train_lang` (`parallel_keys`; the defaults give K et al.'s test
    keys, en, es, hi, ru); dev pairs: each language's own. Train pairs: all of each language's (or `max_train_pairs`,
    subsampled by the task's key hash with `seed`). `fake` adds the Fake-English rows (train_language "enfake": the
    English pairs shifted; needs "en" in `langs` or as `train_lang`) and "enfake" as a test language of the
    English- and Fake-English-trained models."""
    import pandas as pd

    langs = list(dict.fromkeys(check_language(lang) for lang in langs))
    check_language(train_lang)
    if not langs:
        raise ValueError("baseline_card needs at least one test language")
    if max_train_pairs is not None and max_train_pairs < 1:
        raise ValueError(f"max_train_pairs must be >= 1 or None; got {max_train_pairs!r}")
    if fake and "en" not in (*langs, train_lang):
        raise ValueError("the Fake-English rows shift the English pairs: put 'en' in langs or pass fake=False")

    keys = parallel_keys(sorted(set(langs) | {train_lang}), "test", cache_dir)
    cache: dict = {}

    def pairs(lang, split):
        if (lang, split) not in cache:
            base = "en" if lang == FAKE else lang
            if split == "train":
                cache[lang, split] = verse_pairs(base, "train", cache_dir, max_pairs=max_train_pairs, seed=seed)
            else:
                cache[lang, split] = verse_pairs(base, split, cache_dir, keys=keys if split == "test" else None)
        return cache[lang, split]

    tests = [*langs, FAKE] if fake else langs
    evals = [(lang, split) for lang in tests for split in ("test", "dev")]
    rows = []

    def add(baseline, source, lang, split, values):
        rows.extend({"baseline": baseline, "train_language": source, "test_language": lang, "split": split,
                     "metric": m, "value": float(v)} for m, v in values.items())

    majority = majority_class(pairs(train_lang, "train")["label"])
    for lang, split in evals:
        gold = pairs(lang, split)["label"].to_numpy()
        add("majority", train_lang, lang, split, scores(gold, np.full(len(gold), majority), majority))

    def lexical(baseline, source, features, C, targets):
        train = pairs(source, "train")
        vec, clf = fit_bow(pair_documents(train, source, features), train["label"], features, C=C, seed=seed)
        src_majority = majority_class(train["label"])
        for lang, split in targets:
            p = pairs(lang, split)
            docs = pair_documents(p, lang, features)
            pred, raw, empty = predict_bow(vec, clf, docs, src_majority)
            values = scores(p["label"], pred, src_majority)
            add(baseline, source, lang, split, values | {
                "accuracy_raw": float((raw == p["label"].to_numpy()).mean()), "empty_share": float(empty.mean()),
                "feature_coverage": feature_coverage(vec, docs), "C": C})

    sources = [train_lang] + ([FAKE] if fake and train_lang != FAKE else [])
    chosen = {}
    jobs = [(s, f) for s in sources for f in FEATURES]
    from xlrepro.progress import progress as progress_bar
    bar = progress_bar(total=len(jobs) + len(langs), desc="section task baselines", disable=not progress)
    for source, features in jobs:
        train, dev = pairs(source, "train"), pairs(source, "dev")
        C = choose_C(pair_documents(train, source, features), train["label"], pair_documents(dev, source, features),
                     dev["label"], features, seed=seed)
        chosen[source, features] = C
        lexical(f"bow_{features}", source, features, C, evals)
        bar.update(1)
    for lang in langs:  # the in-language ceilings: each language's own train pairs, C as chosen on the source's dev
        lexical("in_language_word", lang, "word", chosen[train_lang, "word"], [(lang, "test"), (lang, "dev")])
        bar.update(1)
    bar.close()
    return pd.DataFrame(rows, columns=list(CARD_COLUMNS))


ADJACENCY_CARD_FILE = "adjacency_card.csv"  # in book/results/k2020: Table 11's adjacency task's baselines
ADJACENCY_C = 1.0  # the one-verse and joined bags of words check the task's construction; their C is not tuned


def adjacency_card(langs: Sequence[str] = ("en", "es", "hi", "ru"), cache_dir: str | os.PathLike | None = None, *,
                   train_lang: str = "en", max_train_pairs: int | None = None, seed: int = 0):
    """The adjacency task's baselines (`xlrepro.tasks.adjacency`, Table 11's stand-in) as a long DataFrame with
    `CARD_COLUMNS`, on the test pairs of K et al.'s chapters (keys shared by `langs` and `train_lang`):

    * ``majority``: the train majority class (the classes are equal: 50 %), on each language's pairs;
    * ``first_only``, ``second_only``: a bag of words (TF-IDF of word unigrams and a logistic regression, C
      `ADJACENCY_C`) of one verse, trained on `train_lang`'s train pairs and tested on its test pairs: 50 % exactly
      when each verse is as often in a positive as in a negative, a check of the task itself;
    * ``joined``: the same on both verses joined into one bag: a linear model of the summed words cannot relate
      the two verses, so about 50 %;
    * ``overlap``: the verses' word overlap (`jaccard`) above a threshold fitted on `train_lang`'s train pairs
      (`best_threshold`), a lexical model that does read both verses, on each language's pairs and on the mixed
      pairs ``enfake>X`` and ``X>enfake`` (Fake-English shares no word with X, so it falls to 50 %).
    Metrics: accuracy and pairs; the overlap rows add its threshold."""
    import pandas as pd

    from xlrepro.tasks.adjacency import adjacency_pairs, best_threshold, jaccard

    langs = list(dict.fromkeys(check_language(lang) for lang in langs))
    check_language(train_lang)
    if "en" not in langs:
        raise ValueError(f"the adjacency card's mixed pairs shift the English pairs into Fake-English: put 'en' in "
                         f"langs; got {langs}")
    keys = parallel_keys(sorted(set(langs) | {train_lang}), "test", cache_dir)
    train = adjacency_pairs(train_lang, "train", cache_dir, max_pairs=max_train_pairs, seed=seed)
    tests = {lang: adjacency_pairs(lang, "test", cache_dir, keys=keys) for lang in langs}
    rows = []

    def add(baseline, lang, values):
        rows.extend({"baseline": baseline, "train_language": train_lang, "test_language": lang, "split": "test",
                     "metric": m, "value": float(v)} for m, v in values.items())

    majority = majority_class(train["label"])
    for lang, t in tests.items():
        add("majority", lang, {"accuracy": float((t["label"] == majority).mean()), "pairs": len(t)})
    test = tests[train_lang] if train_lang in tests else adjacency_pairs(train_lang, "test", cache_dir, keys=keys)
    sides = {"first_only": lambda p: [tokenize(a, train_lang) for a in p["first"]],
             "second_only": lambda p: [tokenize(b, train_lang) for b in p["second"]],
             "joined": lambda p: [tokenize(a, train_lang) + tokenize(b, train_lang)
                                  for a, b in zip(p["first"], p["second"])]}
    for baseline, docs in sides.items():
        vec, clf = fit_bow(docs(train), train["label"], "word", C=ADJACENCY_C, seed=seed)
        pred, _, _ = predict_bow(vec, clf, docs(test), majority)
        add(baseline, train_lang, {"accuracy": float((pred == test["label"].to_numpy()).mean()), "pairs": len(test)})

    def words(texts, lang):
        if lang == FAKE:
            return [tokenize(_fake(t), "en") for t in texts]
        return [tokenize(t, lang) for t in texts]

    threshold = best_threshold(jaccard(words(train["first"], train_lang), words(train["second"], train_lang)),
                               train["label"])
    combos = [(lang, lang) for lang in langs] + [
        (a, b) for x in langs if x != "en" for a, b in ((FAKE, x), (x, FAKE))]
    for a, b in combos:
        t = tests["en" if a == FAKE else a]  # the same keys in every language: the rows align
        first, second = words(t["first"], a), words(tests["en" if b == FAKE else b]["second"], b)
        pred = jaccard(first, second) > threshold
        add("overlap", a if a == b else f"{a}>{b}", {
            "accuracy": float((pred == (t["label"].to_numpy() == 1)).mean()), "pairs": len(t),
            "threshold": threshold})
    return pd.DataFrame(rows, columns=list(CARD_COLUMNS))


def adjacency_table(card):
    """The adjacency card's accuracies (%) as baseline x test pairs, for readers."""
    acc = card[card["metric"] == "accuracy"]
    order = list(dict.fromkeys(acc["test_language"]))
    table = acc.pivot_table(index="baseline", columns="test_language", values="value", sort=False) * 100
    return table[order].round(1)


def accuracy_table(card, split: str = "test"):
    """Accuracy in % of `card` (`baseline_card`'s frame) on `split`: one row per (baseline, train_language), one
    column per test language; the in-language ceilings make one row, train_language "own"."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
    acc = card[(card["split"] == split) & (card["metric"] == "accuracy")]
    acc = acc.assign(train_language=acc["train_language"].where(acc["baseline"] != "in_language_word", "own"))
    return (100 * acc.pivot_table(index=["baseline", "train_language"], columns="test_language", values="value",
                                  sort=False))


#: K et al.'s base cells (source-target) the card is read against in their linguistic chapter
BASE_CELLS = ("en-es", "en-hi", "en-ru", "enfake-es", "enfake-hi", "enfake-ru")
ZERO_SHOT = ("majority", "bow_word", "bow_char")  # the baselines that see only the source's train pairs
BASELINE_NAMES = {"majority": "majority class", "bow_word": "words", "bow_char": "character n-grams",
                  "in_language_word": "words, in-language"}


def compare_zero_shot(card, results, cells: Sequence[str] = BASE_CELLS, split: str = "test"):
    """One row per cell of `cells` ("source-target") found in `results` (K et al.'s results frame: experiment,
    seed, language, task, metric, value): the cell's zero-shot accuracy on the target (mean over its seeds, `seeds`
    of them), the best of the `ZERO_SHOT` baselines trained on the same source (the majority class is the same for
    English and Fake-English) and which one it is, and the difference in points. Accuracies in %."""
    import pandas as pd

    if split not in ("test", "dev"):
        raise ValueError(f"unknown split {split!r}; valid splits: test, dev")
    metric = "accuracy" if split == "test" else "dev_accuracy"
    acc = card[(card["split"] == split) & (card["metric"] == "accuracy") & card["baseline"].isin(ZERO_SHOT)]
    res = results[(results["task"] == "sections") & (results["metric"] == metric)]
    rows = []
    for cell in cells:
        source, _, target = str(cell).partition("-")
        r = res[(res["experiment"].astype(str) == cell) & (res["language"] == target)]
        base = acc[(acc["test_language"] == target)
                   & ((acc["train_language"] == source) | (acc["baseline"] == "majority"))]
        if r.empty or base.empty:
            continue
        best = base.loc[base["value"].idxmax()]
        model = 100 * float(r["value"].mean())
        rows.append({"cell": cell, "source": source, "target": target, "bbert": model, "seeds": int(r["seed"].nunique()),
                     "best_baseline": 100 * float(best["value"]), "baseline": best["baseline"],
                     "difference": model - 100 * float(best["value"])})
    return pd.DataFrame(rows, columns=["cell", "source", "target", "bbert", "seeds", "best_baseline", "baseline",
                                       "difference"])


def comparison_sentence(comparison) -> str:
    """`compare_zero_shot`'s frame in one sentence (empty string for an empty frame)."""
    if comparison.empty:
        return ""
    above = int((comparison["difference"] > 0).sum())
    parts = [f"{r.cell} {r.bbert:.1f} vs {r.best_baseline:.1f} ({BASELINE_NAMES[r.baseline]})"
             for r in comparison.itertuples()]
    seeds = sorted(set(comparison["seeds"]))
    seeds = f"{seeds[0]} seeds" if len(seeds) == 1 and seeds[0] != 1 else (
        "1 seed" if seeds == [1] else f"{seeds[0]}-{seeds[-1]} seeds")
    return (f"The base B-BERT's zero-shot test accuracy (mean over {seeds}) is above the best baseline trained on the "
            f"same source without pre-training in {above} of {len(comparison)} cells: " + "; ".join(parts) + " (%).")


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m xlrepro.papers.k2020.task_card [--out CSV] [--languages ...]`: the section task's baselines card on
    K et al.'s test pairs, printed and written (long form) to --out."""
    import time

    import pandas as pd

    from xlrepro.atomic import atomic_path

    p = argparse.ArgumentParser(prog="python -m xlrepro.papers.k2020.task_card", description=main.__doc__)
    p.add_argument("--out", default=None, help=f"where to write the card (default: book/results/k2020/{CARD_FILE})")
    p.add_argument("--languages", nargs="+", default=["en", "es", "hi", "ru"], choices=LANGUAGES)
    p.add_argument("--train-language", default="en", choices=LANGUAGES)
    p.add_argument("--max-train-pairs", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--adjacency", action="store_true",
                   help=f"the adjacency task's card instead (Table 11; default --out: {ADJACENCY_CARD_FILE})")
    a = p.parse_args(argv)
    if a.out is None:
        from xlrepro.results import results_dir
        a.out = results_dir("k2020") / (ADJACENCY_CARD_FILE if a.adjacency else CARD_FILE)
    if a.max_train_pairs is not None and a.max_train_pairs < 1:
        p.error(f"--max-train-pairs must be a positive number of pairs; got {a.max_train_pairs}")
    t0 = time.time()
    if a.adjacency:
        card = adjacency_card(a.languages, train_lang=a.train_language, max_train_pairs=a.max_train_pairs,
                              seed=a.seed)
        with pd.option_context("display.width", 200, "display.max_columns", 20):
            print(adjacency_table(card))
        with atomic_path(a.out) as tmp:
            card.to_csv(tmp, index=False)
        print(f"wrote {a.out} ({time.time() - t0:.0f} s)")
        return
    card = baseline_card(a.languages, train_lang=a.train_language, max_train_pairs=a.max_train_pairs, seed=a.seed,
                         progress=True)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(accuracy_table(card, "test").round(1))
    with atomic_path(a.out) as tmp:
        card.to_csv(tmp, index=False)
    print(f"wrote {a.out} ({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
