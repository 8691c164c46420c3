"""Fine-tuning mechanics (xlrepro/training/finetune.py): known answers on tiny models and a hand-made tokenizer."""
import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn
from transformers import BertConfig, BertModel

from xlrepro.config import ConfigError
from xlrepro.training.finetune import (EncodedPairs, FinetuneConfig, PairClassifier, build_model, encode_pairs, evaluate,
                              finetune, freeze_encoder, macro_f1, predict)

WORDS = "[PAD] [UNK] [CLS] [SEP] a b c d e x y z".split()
CLS, SEP = 2, 3


def tiny_bert(seed=0, layers=4):
    torch.manual_seed(seed)
    return BertModel(BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=layers, num_attention_heads=2,
                                intermediate_size=32)).eval()


@pytest.fixture
def tokenizer():
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from tokenizers.processors import BertProcessing

    tok = Tokenizer(WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tok.pre_tokenizer = WhitespaceSplit()
    tok.post_processor = BertProcessing(("[SEP]", SEP), ("[CLS]", CLS))
    return tok


def pairs_data(rows, labels):
    """EncodedPairs from lists of content ids (a pair's first segment, second segment)."""
    ids = [np.array([CLS, *a, SEP, *b, SEP]) for a, b in rows]
    types = [np.array([0] * (len(a) + 2) + [1] * (len(b) + 1)) for a, b in rows]
    return EncodedPairs(ids, types, np.asarray(labels, np.int64))


# --- macro_f1 --------------------------------------------------------------------------------------------------
def test_macro_f1_known_answers():
    gold = np.array([0, 0, 0, 1, 1, 2])
    pred = np.array([0, 0, 1, 1, 0, 0])
    # label 0: tp 2, pred 4, gold 3 -> 4/7; label 1: tp 1, pred 2, gold 2 -> 1/2;
    # label 2 (gold, never predicted): 0; label 3 (neither gold nor predicted): 0
    assert macro_f1(gold, pred, 3) == pytest.approx((4 / 7 + 1 / 2 + 0) / 3)
    assert macro_f1(gold, pred, 4) == pytest.approx((4 / 7 + 1 / 2 + 0 + 0) / 4)
    assert macro_f1(gold, gold, 3) == 1.0
    assert macro_f1(gold, gold, 4) == pytest.approx(0.75)  # the absent label still counts, as 0
    assert macro_f1(np.array([0, 1]), np.array([1, 0]), 2) == 0.0


# --- freezing ----------------------------------------------------------------------------------------------------
def frozen_names(model):
    return {n for n, p in model.named_parameters() if not p.requires_grad}


def names_under(model, prefix):
    return {n for n, _ in model.named_parameters() if n.startswith(prefix)}


def test_freeze_encoder_levels():
    everything = {n for n, _ in tiny_bert().named_parameters()}
    emb = names_under(tiny_bert(), "embeddings.")
    layer = [names_under(tiny_bert(), f"encoder.layer.{i}.") for i in range(4)]
    assert emb and all(layer)

    m = tiny_bert(); freeze_encoder(m, None)
    assert frozen_names(m) == set()
    m = tiny_bert(); freeze_encoder(m, 0)
    assert frozen_names(m) == emb
    m = tiny_bert(); freeze_encoder(m, 2)
    assert frozen_names(m) == emb | layer[0] | layer[1]
    assert not frozen_names(m) & (layer[2] | layer[3])
    m = tiny_bert(); freeze_encoder(m, 4)
    assert frozen_names(m) == emb | set().union(*layer)
    m = tiny_bert(); freeze_encoder(m, None, feature_based=True)
    assert frozen_names(m) == everything
    with pytest.raises(ConfigError, match=r"0\.\.4"):
        freeze_encoder(tiny_bert(), 5)


def test_finetune_with_frozen_layers_leaves_them_untouched():
    encoder = tiny_bert()
    before = {n: p.detach().clone() for n, p in encoder.named_parameters()}
    data = pairs_data([([4 + i % 3], [9]) for i in range(8)], [i % 2 for i in range(8)])
    model, history = finetune(FinetuneConfig(lr=1e-2, batch_size=4, epochs=2, freeze=2, warmup=0.0), encoder,
                              data, 2, progress=False)
    assert history["steps"] == 4
    after = dict(model.encoder.named_parameters())
    frozen = names_under(encoder, "embeddings.") | names_under(encoder, "encoder.layer.0.") \
        | names_under(encoder, "encoder.layer.1.")
    for name in frozen:
        assert torch.equal(after[name], before[name]), name
    for name in names_under(encoder, "encoder.layer.2.") | names_under(encoder, "encoder.layer.3."):
        assert not torch.equal(after[name], before[name]), name
    for name, p in encoder.named_parameters():  # the caller's encoder is a template, never trained
        assert torch.equal(p, before[name]), name


# --- config ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, match", [
    ({"lr": 0}, "lr"), ({"lr": -1e-4}, "lr"), ({"epochs": 0}, "epochs"), ({"batch_size": 0}, "batch_size"),
    ({"freeze": -1}, "freeze"), ({"feature_based": True, "freeze": 2}, "feature_based"), ({"warmup": 1.0}, "warmup"),
])
def test_bad_config_values(kw, match):
    with pytest.raises(ConfigError, match=match):
        FinetuneConfig(**kw)


def test_config_modes():
    assert FinetuneConfig().mode == "all"
    assert FinetuneConfig(freeze=0).mode == "freeze-0"
    assert FinetuneConfig(freeze=3).mode == "freeze-3"
    assert FinetuneConfig(feature_based=True).mode == "feature-based"
    assert FinetuneConfig(lr=1e-3, seed=4).to_json()["lr"] == 1e-3


# --- encoding ----------------------------------------------------------------------------------------------------
def test_encode_pairs_ids_types_and_truncation(tokenizer):
    df = pd.DataFrame({"first": ["a b c", "a b c d e", "a b"], "second": ["x y", "x y", "x y z"], "label": [2, 1, 0]})
    enc = encode_pairs(tokenizer, df, max_length=7)
    # a=4 b=5 c=6 d=7 e=8 x=9 y=10 z=11
    # longest-first: each pair loses pieces from its longer segment until 7 pieces remain
    assert [e.tolist() for e in enc.ids] == [[CLS, 4, 5, SEP, 9, 10, SEP]] * 3
    assert [t.tolist() for t in enc.types] == [[0, 0, 0, 0, 1, 1, 1]] * 3
    assert enc.labels.tolist() == [2, 1, 0] and len(enc) == 3
    full = encode_pairs(tokenizer, df, max_length=128)
    assert [e.tolist() for e in full.ids] == [[CLS, 4, 5, 6, SEP, 9, 10, SEP], [CLS, 4, 5, 6, 7, 8, SEP, 9, 10, SEP],
                                              [CLS, 4, 5, SEP, 9, 10, 11, SEP]]
    assert full.types[1].tolist() == [0] * 7 + [1] * 3
    assert tokenizer.truncation is None  # the caller's tokenizer is not changed
    assert len(tokenizer.encode("a b c d e", "x y").ids) == 10


# --- prediction --------------------------------------------------------------------------------------------------
class FirstPiece(nn.Module):
    """Predicts the first content piece (position 1) as the label; checks that the padding is masked."""

    def __init__(self, n_labels=30):
        super().__init__()
        self.n = n_labels

    def forward(self, ids, mask, types):
        assert ((ids == 0) == (mask == 0)).all()
        return nn.functional.one_hot(ids[:, 1], self.n).float()


def test_predict_returns_input_order():
    # lengths decrease along the input, so the length-sorted batches reverse the order
    rows = [([4 + k] + [9] * (10 - k), [10]) for k in range(8)]
    data = pairs_data(rows, [0] * 8)
    assert predict(FirstPiece(), data, batch_size=3).tolist() == [4 + k for k in range(8)]
    model = PairClassifier(tiny_bert(), n_labels=7).eval()
    together = predict(model, data, batch_size=3)
    alone = [predict(model, EncodedPairs([data.ids[i]], [data.types[i]], data.labels[i:i + 1]))[0] for i in range(8)]
    assert together.tolist() == alone


# --- feature-based ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [0, 2, 4])
def test_feature_based_max_pools_the_chosen_layer_over_real_tokens(k):
    encoder = tiny_bert(seed=1)
    model = PairClassifier(encoder, n_labels=3, feature_based=True).eval()
    with torch.no_grad():
        model.mix.fill_(-1e4)
        model.mix[k] = 0.0
    assert torch.softmax(model.mix, 0)[k] == 1.0
    short = pairs_data([([4, 5], [9])], [0])
    both = pairs_data([([4, 5], [9]), ([6, 7, 8, 7, 6, 8, 7], [10, 11, 10])], [0, 0])

    from xlrepro.training.finetune import _batch
    ids, mask, types, _ = _batch(short, [0], "cpu")
    with torch.no_grad():
        hidden = encoder(input_ids=ids, attention_mask=mask, token_type_ids=types, output_hidden_states=True)
        expected = hidden.hidden_states[k][0].amax(0)  # alone: every token is real
        alone = model(ids, mask, types)[0]
        assert torch.allclose(alone, model.head(expected), atol=1e-6)
        ids2, mask2, types2, _ = _batch(both, [0, 1], "cpu")
        assert mask2[0].sum() == 6 and mask2.shape[1] == 13  # the short pair is padded in this batch
        padded = model(ids2, mask2, types2)[0]
    assert torch.allclose(padded, alone, atol=1e-5)


def test_feature_based_trains_only_the_mix_and_head():
    model = build_model(FinetuneConfig(feature_based=True), tiny_bert(), 3)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {"mix"} | {n for n, _ in model.named_parameters() if n.startswith("head.")}
    assert model.mix.shape == (5,)


# --- learning ----------------------------------------------------------------------------------------------------
def first_piece_task(n, seed):
    """label = whether the first piece is token A (4) or B (5); the rest is noise."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    rows = [([4 + y, *rng.integers(6, 30, rng.integers(1, 5))], list(rng.integers(6, 30, rng.integers(1, 4))))
            for y in labels]
    return pairs_data(rows, labels)


def test_finetune_learns_a_trivial_task_and_is_reproducible():
    train, test = first_piece_task(64, 0), first_piece_task(40, 1)
    config = FinetuneConfig(lr=5e-3, batch_size=16, epochs=15, seed=3)
    encoder = tiny_bert(layers=2)
    model, history = finetune(config, encoder, train, 2, dev=test, progress=False)
    assert history["steps"] == 60 and len(history["loss"]) == len(history["dev_accuracy"]) == 15
    assert history["loss"][-1] < 0.2 < history["loss"][0] and history["dev_accuracy"][-1] == 1.0
    assert evaluate(model, test) == (1.0, 1.0)
    assert not model.training
    again, history2 = finetune(config, encoder, train, 2, dev=test, progress=False)
    assert history2["loss"] == history["loss"] and history2["dev_accuracy"] == history["dev_accuracy"]
    for (n, p), (_, q) in zip(model.named_parameters(), again.named_parameters()):
        assert torch.equal(p, q), n
    other, history3 = finetune(FinetuneConfig(lr=5e-3, batch_size=16, epochs=15, seed=4), encoder, train, 2,
                               progress=False)
    assert history3["loss"] != history["loss"]  # the seed matters
