"""mini-mBERT: smoothed language sampling (known answers), and a tiny pretraining run on real verses."""
import json
import math

import numpy as np
import pytest
import torch

from xlrepro.config import ConfigError, ModelSize
from xlrepro.engine.pretrain import draw_batch, sampling_weights
from xlrepro.training.mini_mbert import MiniMBertConfig, load_mini_mbert, pretrain

LANGS = ("en", "fr", "tr")


def test_sampling_weights_known_answers():
    assert sampling_weights({"a": 100, "b": 1}, alpha=1.0) == pytest.approx({"a": 100 / 101, "b": 1 / 101})
    assert sampling_weights({"a": 100, "b": 1}, alpha=0.0) == pytest.approx({"a": 0.5, "b": 0.5})
    # 100^0.7 = 10^1.4 = 25.118864; p_a = 25.118864 / 26.118864
    assert sampling_weights({"a": 100, "b": 1}) == pytest.approx({"a": 0.961713, "b": 0.038287}, abs=1e-6)
    with pytest.raises(ValueError, match="empty"):
        sampling_weights({"a": 10, "b": 0})


def test_language_draws_follow_the_weights():
    p = np.array([0.6, 0.3, 0.1])
    sizes = np.array([50, 20, 5])
    langs, sents = zip(*(draw_batch(0, step, p, sizes, 256) for step in range(400)))
    langs, sents = np.concatenate(langs), np.concatenate(sents)
    n = len(langs)
    counts = np.bincount(langs, minlength=3)
    chi2 = ((counts - n * p) ** 2 / (n * p)).sum()
    assert chi2 < 13.8  # chi-square, 2 degrees of freedom, p = 0.001
    assert (sents < sizes[langs]).all() and (sents >= 0).all()
    assert set(sents[langs == 2]) == set(range(5))  # uniform within a language: every sentence comes up
    assert np.array_equal(draw_batch(0, 7, p, sizes, 256)[0], draw_batch(0, 7, p, sizes, 256)[0])


def test_bad_options_name_the_valid_choices():
    with pytest.raises(ConfigError, match="shared, mbert"):
        MiniMBertConfig(vocab="bpe")
    with pytest.raises(ConfigError, match="en, fr"):
        MiniMBertConfig(languages=("en", "xx"))


def tiny(steps=6):
    return MiniMBertConfig(languages=LANGS, vocab_size=300, size=ModelSize("tiny", 16, 2, 2, 32, 1e-3),
                           batch_size=8, max_length=32, steps=steps)


def test_tiny_pretraining_writes_a_loadable_model(multilingual_cache):
    config = tiny()
    out = pretrain(config, max_sentences_per_language=50, progress=False)
    assert out == multilingual_cache / "mini_mbert" / "shared-16x2"
    for name in ("model.safetensors", "tokenizer.json", "config.json", "training.json"):
        assert (out / name).exists(), name
    assert not (out / "checkpoint.pt").exists()
    info = json.loads((out / "training.json").read_text())
    assert info["steps"] == 6 and info["sentences"] == {"en": 50, "fr": 50, "tr": 50}
    assert [s for s, _ in info["losses"]] == [0, 5]
    assert all(math.isfinite(l) and l > 0 for _, l in info["losses"])
    assert info["losses"][0][1] == pytest.approx(math.log(info["vocab_size"]), rel=0.2)  # chance at the start

    model, tok = load_mini_mbert(out)
    assert model.config.hidden_size == 16 and model.config.vocab_size == tok.get_vocab_size() <= 300
    assert tok.encode("In the beginning").tokens[0] == "[CLS]"
    from safetensors.torch import load_file
    saved = load_file(str(out / "model.safetensors"))
    for k, v in model.state_dict().items():
        if k in saved:
            assert torch.equal(v, saved[k]), k
    assert torch.equal(model.cls.predictions.decoder.weight, model.bert.embeddings.word_embeddings.weight)
    assert pretrain(config, max_sentences_per_language=50) == out  # finished: returned at once
    with pytest.raises(ConfigError, match="another config"):
        pretrain(tiny(steps=7), max_sentences_per_language=50)


def test_interrupted_run_resumes(multilingual_cache, tmp_path):
    out = pretrain(tiny(), out_dir=tmp_path, time_limit=0, max_sentences_per_language=50, progress=False)
    assert (out / "checkpoint.pt").exists() and not (out / "training.json").exists()
    assert torch.load(out / "checkpoint.pt", weights_only=False)["stack"]["step"] == 1
    with pytest.raises(FileNotFoundError, match="pretrain"):
        load_mini_mbert(out)
    pretrain(tiny(), out_dir=tmp_path, max_sentences_per_language=50, progress=False)
    info = json.loads((out / "training.json").read_text())
    assert info["steps"] == 6 and [s for s, _ in info["losses"]] == [0, 5]
    assert not (out / "checkpoint.pt").exists()
    load_mini_mbert(out)
