"""Liu et al. on the released mBERT (`xlrepro.papers.liu2020.paper`), on CPU against the fixtures of
tests/fixtures/paper/: the tiny random BERT stands in for mBERT, the MUSE en-de file for the dictionaries, the
wikiextractor folders (en, de, fr) for Wikipedia. The model learns nothing; the tests check the vectors against the
model's own hidden states, the files written, the bounds and invariants the numbers must keep, and the errors."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch

from xlrepro.config import ConfigError
from xlrepro.papers.liu2020.paper import (contextual_word_vectors, mean_difference_shift, resolve_liu_paths,
                                          word_retrieval_by_layer)

FIX = Path(__file__).resolve().parent / "fixtures" / "paper"


@pytest.fixture
def paper_env(paper_env_of):
    return paper_env_of("XLREPRO_MBERT", "XLREPRO_WIKI_DIR", "XLREPRO_MUSE_DIR")


def test_a_word_vector_is_the_mean_of_its_pieces_over_its_occurrences():
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(FIX / "tiny_bert").eval()
    tokenizer = AutoTokenizer.from_pretrained(FIX / "tiny_bert")
    texts = ["The cat sleeps in the house.", "A house, the cat said."]
    got = contextual_word_vectors(model, tokenizer, texts, {"cat", "house", "dog"}, max_contexts=1)
    assert sorted(got) == ["cat", "house"] and got["cat"].shape == (3, 32)  # embeddings + 2 layers, hidden 32
    with torch.no_grad():  # the first text alone: "cat" is its word 1, "house" its word 5
        enc = tokenizer(texts[0], return_tensors="pt")
        hs = torch.stack(model(**enc, output_hidden_states=True).hidden_states)[:, 0]  # [3, W, 32]
    for word, index in (("cat", 1), ("house", 5)):
        positions = [p for p, w in enumerate(enc.word_ids(0)) if w == index]
        assert torch.allclose(got[word], hs[:, positions].mean(dim=1), atol=1e-5)  # max_contexts=1: first only
    both = contextual_word_vectors(model, tokenizer, texts, {"cat"}, max_contexts=2)["cat"]
    assert not torch.allclose(both, got["cat"])  # a second context moves the mean
    # MUSE's words are lower-cased: "The" is "the" only when compared lower-cased
    assert "the" in contextual_word_vectors(model, tokenizer, texts, {"the"})
    assert contextual_word_vectors(model, tokenizer, texts, {"the"}, lowercase=False).keys() == {"the"}  # "the" (2nd)
    assert contextual_word_vectors(model, tokenizer, texts[:1], {"the"}, lowercase=False).keys() == {"the"}
    assert contextual_word_vectors(model, tokenizer, ["The cat."], {"the"}, lowercase=False) == {}


def test_word_retrieval_by_layer_writes_mrr_per_layer(paper_env):
    paths = resolve_liu_paths(languages=["de"], dictionary="full")  # the fixture is en-de.txt
    folder = word_retrieval_by_layer(paths, dictionary="full")
    assert folder == paper_env / "runs" / "liu2020" / "paper" / "tiny_bert" / "results"
    assert sorted(p.name for p in folder.iterdir()) == ["profile.json", "word_retrieval.csv"]
    table = pd.read_csv(folder / "word_retrieval.csv").pivot_table(index="layer", columns="metric", values="value")
    assert table.index.tolist() == [0, 1, 2]
    # the, house, cat, water are found in both languages' text (das/die, Haus, Katze, Wasser: lower-cased); 5 targets
    assert (table["words"] == 4).all()
    assert table["mrr"].between(1 / 5, 1).all()  # every rank is 1..5
    assert (table["mrr_low"] <= table["mrr"]).all() and (table["mrr"] <= table["mrr_high"]).all()
    profile = json.loads((folder / "profile.json").read_text())
    assert profile == {"profile": "paper", "encoder": "tests/fixtures/paper/tiny_bert",
                       "wikipedia": "tests/fixtures/paper/wiki", "muse": "tests/fixtures/paper/muse"}
    two = word_retrieval_by_layer(paths, dictionary="full", max_words=2, results=paper_env / "two")
    assert (pd.read_csv(two / "word_retrieval.csv").query("metric == 'words'")["value"] == 2).all()


def test_mean_difference_shift_writes_convert_rates(paper_env):
    paths = resolve_liu_paths(dictionary=None)
    assert paths.languages == ("de", "fr") and paths.muse is None
    folder = mean_difference_shift(paths, alphas=[0.0, 3.0], mean_paragraphs=4, shifted_paragraphs=3)
    mds = pd.read_csv(folder / "mds.csv")
    assert mds[["direction", "layer", "alpha"]].drop_duplicates().shape[0] == len(mds) == 2 * 2 * 2
    assert set(mds["direction"]) == {"en-de", "en-fr"} and set(mds["layer"]) == {1, 2}
    assert mds["value"].between(0, 1).all() and set(mds["metric"]) == {"convert_rate"}
    # alpha 0 shifts nothing: the same predictions, so the same convert rate at every layer
    unshifted = mds[mds["alpha"] == 0].groupby("direction")["value"].nunique()
    assert (unshifted == 1).all()
    back = mean_difference_shift(paths, source="de", layers=[2], alphas=[1.0], mean_paragraphs=2,
                                 shifted_paragraphs=2, results=paper_env / "back")
    assert pd.read_csv(back / "mds.csv")[["direction", "layer"]].values.tolist() == [["de-en", 2]]


def test_errors_name_what_is_wrong(paper_env, monkeypatch):
    paths = resolve_liu_paths(dictionary=None)
    with pytest.raises(ConfigError, match="valid choices: 1..2"):
        mean_difference_shift(paths, layers=[3])
    with pytest.raises(ConfigError, match="valid choices: en, de, fr"):
        mean_difference_shift(paths, source="sw")
    with pytest.raises(ConfigError, match="leave none to shift"):
        mean_difference_shift(paths, mean_paragraphs=7)
    with pytest.raises(ConfigError, match="en-de.5000-6500.txt, en-fr.5000-6500.txt .*not in"):
        resolve_liu_paths()
    with pytest.raises(ConfigError, match="valid choices: de, fr"):
        resolve_liu_paths(languages=["sw"], dictionary=None)
    with pytest.raises(ConfigError, match="valid choices: test, full"):
        resolve_liu_paths(languages=["de"], dictionary="train")
    monkeypatch.delenv("XLREPRO_MUSE_DIR")
    monkeypatch.setenv("XLREPRO_CACHE", str(paper_env / "cache"))
    with pytest.raises(ConfigError, match="XLREPRO_MUSE_DIR unset") as err:
        resolve_liu_paths(languages=["de"], dictionary="full")
    assert "\n" not in str(err.value)
