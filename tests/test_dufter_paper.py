"""Dufter & Schütze's Table 4 with the released mBERT's similarities (`xlrepro.papers.dufter2020.paper_table4`), on CPU
against the fixtures of tests/fixtures/paper/: the tiny random BERT stands in for mBERT, XNLI's dev file (en, de, fr:
3 parallel premises each) for XNLI. The model learns nothing; the tests check the files, a case with a known answer
(a language whose premises are English's own: every word aligned to itself, distance 1.0) and the errors."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from xlrepro.config import ConfigError
from xlrepro.papers.dufter2020.paper_table4 import mbert_table4, parallel_premises, resolve_table4_paths, words

FIX = Path(__file__).resolve().parent / "fixtures" / "paper"


@pytest.fixture
def paper_env(paper_env_of):
    return paper_env_of("XLREPRO_MBERT", "XLREPRO_XNLI_DIR")


def test_table4_writes_tau_per_language_and_the_accuracies(paper_env):
    zero = paper_env / "zero_shot.csv"
    pd.DataFrame([{"experiment": "zero-shot", "seed": 0, "language": l, "metric": m, "value": 0.5}
                  for l in ("en", "de", "fr", "es") for m in ("accuracy", "macro_f1")]).to_csv(zero, index=False)
    folder = mbert_table4(resolve_table4_paths(), ["de", "fr"], layer=1, accuracies=zero)
    assert folder == paper_env / "runs" / "dufter2020" / "paper" / "tiny_bert" / "results"
    assert sorted(p.name for p in folder.iterdir()) == ["profile.json", "table4.csv"]
    table = pd.read_csv(folder / "table4.csv")
    tau = table[table["metric"] == "kendall_tau"].set_index("language")["value"]
    assert tau.index.tolist() == ["en", "de", "fr"] and tau["en"] == 1.0 and tau.between(0, 1).all()
    wide = table[table["experiment"] == "mbert"].pivot(index="language", columns="metric", values="value")
    assert (wide.loc[["de", "fr"], "verses"] + wide.loc[["de", "fr"], "skipped"] == 3).all()  # 3 premises each
    assert (wide.loc[["de", "fr"], "layer"] == 1).all()
    acc = table[table["metric"] == "zero_shot_accuracy"]
    assert acc["language"].tolist() == ["en", "de", "fr"] and set(acc["experiment"]) == {"zero-shot"}  # es left out
    assert json.loads((folder / "profile.json").read_text())["table4"] == "tests/fixtures/paper/xnli"


def test_a_language_that_is_english_word_for_word_has_distance_one(paper_env, tmp_path):
    lines = (FIX / "xnli" / "xnli.dev.tsv").read_text(encoding="utf-8").splitlines()
    english = [line for line in lines[1:] if line.startswith("en\t")]
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "xnli.dev.tsv").write_text("\n".join([lines[0], *english, *("fr" + line[2:] for line in english)])
                                                    + "\n", encoding="utf-8")
    premises = parallel_premises(tmp_path / "copy" / "xnli.dev.tsv", ["fr"])
    assert premises["fr"].tolist() == premises["en"].tolist() == [
        "The cat sat on the mat.", '"No," he said to the offer.', "The train left at noon."]
    folder = mbert_table4(resolve_table4_paths(xnli=tmp_path / "copy"), ["fr"], layer=2, results=tmp_path / "out")
    wide = pd.read_csv(folder / "table4.csv").pivot(index="language", columns="metric", values="value")
    assert wide.loc["fr", "kendall_tau"] == 1.0 and wide.loc["fr", "verses"] == 3
    # every word aligned to itself: 7, 10 and 6 words (BERT's pre-tokenizer splits off the punctuation)
    assert wide.loc["fr", "aligned_pairs"] == pytest.approx((7 + 10 + 6) / 3)


def test_words_follow_the_encoders_pre_tokenizer(paper_env):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(FIX / "tiny_bert")
    assert words(tokenizer, '"No," he said.') == ['"', "No", ",", '"', "he", "said", "."]


def test_errors(paper_env, monkeypatch):
    with pytest.raises(ConfigError, match="layer must be in 0..2"):
        mbert_table4(resolve_table4_paths(), ["de"], layer=8)
    with pytest.raises(ConfigError, match="valid choices: ar, bg"):
        mbert_table4(resolve_table4_paths(), ["tl"])
    with pytest.raises(ConfigError, match="does not exist"):
        mbert_table4(resolve_table4_paths(), ["de"], accuracies=paper_env / "none.csv")
    monkeypatch.delenv("XLREPRO_XNLI_DIR")
    monkeypatch.setenv("XLREPRO_CACHE", str(paper_env / "cache"))
    with pytest.raises(ConfigError, match="XLREPRO_XNLI_DIR unset") as err:
        resolve_table4_paths()
    assert "\n" not in str(err.value)
