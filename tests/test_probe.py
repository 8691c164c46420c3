"""Layer features, the language-ID probe and per-language retrieval, on hand-made cases with known answers."""
import pytest
import torch

from xlrepro.evaluation.probe import language_id_probe, layer_features, probe_layers, retrieval_by_language

torch.set_num_threads(1)

WORDS = "the cat sat on a mat and dog ran far away from home today with big red ball".split()


@pytest.fixture(scope="module")
def tiny():
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from tokenizers.processors import BertProcessing
    from transformers import BertConfig, BertForMaskedLM

    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS])}
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    tok.post_processor = BertProcessing(("[SEP]", vocab["[SEP]"]), ("[CLS]", vocab["[CLS]"]))
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                       intermediate_size=32, pad_token_id=0))
    return model.eval(), tok


def by_hand(model, ids: list[int]) -> torch.Tensor:
    """[3, 16]: every hidden state of one unpadded text, averaged over all its positions."""
    with torch.no_grad():
        out = model.bert(input_ids=torch.tensor([ids]), output_hidden_states=True)
    return torch.stack([h[0].mean(0) for h in out.hidden_states])


LONG = "the cat sat on a mat and the dog ran far away from home today"
SHORT = "red ball"
MID = "a big dog sat"


def test_layer_features_shape_and_hand_computation(tiny):
    model, tok = tiny
    feats = layer_features(model, tok, [SHORT, LONG])
    assert feats.shape == (3, 2, 16) and feats.dtype == torch.float32
    ids = tok.encode(SHORT).ids
    assert ids[0] == 2 and ids[-1] == 3 and len(ids) == 4  # [CLS] red ball [SEP]
    torch.testing.assert_close(feats[:, 0], by_hand(model, ids), atol=1e-5, rtol=0)
    torch.testing.assert_close(feats[:, 1], by_hand(model, tok.encode(LONG).ids), atol=1e-5, rtol=0)
    # the layers really differ, so an off-by-one in the layer index would be caught
    assert (feats[0] - feats[2]).abs().max() > 1e-2


def test_layer_features_batch_invariance_and_order(tiny):
    model, tok = tiny
    texts = [SHORT, LONG, MID, "cat"]
    alone = torch.stack([layer_features(model, tok, [t])[:, 0] for t in texts], dim=1)
    batched = layer_features(model, tok, texts, batch_size=2)  # sorted: [LONG, MID] and [SHORT, "cat"]
    torch.testing.assert_close(batched, alone, atol=1e-5, rtol=0)
    # SHORT padded next to LONG in one batch
    pair = layer_features(model, tok, [LONG, SHORT], batch_size=2)
    torch.testing.assert_close(pair[:, 1], alone[:, 0], atol=1e-5, rtol=0)
    # rows of different texts are different, so a lost order would show
    assert (alone[:, 0] - alone[:, 1]).abs().max() > 1e-3


def test_layer_features_truncation_keeps_sep(tiny):
    model, tok = tiny
    ids = tok.encode(LONG).ids
    feats = layer_features(model, tok, [LONG], max_length=5)
    torch.testing.assert_close(feats[:, 0], by_hand(model, [*ids[:4], ids[-1]]), atol=1e-5, rtol=0)


def test_layer_features_rejects_empty(tiny):
    with pytest.raises(ValueError):
        layer_features(*tiny, [])


def clusters(n: int, means: dict[str, torch.Tensor], gen: torch.Generator) -> dict[str, torch.Tensor]:
    return {lang: m + torch.randn(n, m.shape[0], generator=gen) for lang, m in means.items()}


def test_probe_separates_clusters():
    gen = torch.Generator().manual_seed(1)
    means = {lang: 8 * torch.eye(8)[k] for k, lang in enumerate(["de", "en", "fr"])}
    # 540 rows to fit: batch 16 gives the ~340 steps that lr 1e-3 needs
    res = language_id_probe(clusters(200, means, gen), clusters(100, means, gen), batch_size=16)
    assert res["languages"] == ["de", "en", "fr"]
    assert res["accuracy"] >= 0.99
    assert set(res["per_language"]) == {"de", "en", "fr"}
    assert min(res["per_language"].values()) >= 0.97


def test_probe_at_chance_when_labels_are_independent():
    gen = torch.Generator().manual_seed(2)
    means = {lang: torch.zeros(8) for lang in ["de", "en", "fr"]}
    res = language_id_probe(clusters(200, means, gen), clusters(200, means, gen), batch_size=16)
    assert abs(res["accuracy"] - 1 / 3) <= 0.15


def test_probe_is_seeded():
    gen = torch.Generator().manual_seed(3)
    means = {lang: 1.0 * torch.eye(8)[k] for k, lang in enumerate(["de", "en", "fr"])}  # overlapping: not 100%
    train, test = clusters(100, means, gen), clusters(100, means, gen)
    assert language_id_probe(train, test, seed=5) == language_id_probe(train, test, seed=5)


def test_probe_rejects_bad_inputs():
    x = torch.randn(10, 4)
    with pytest.raises(ValueError, match="same languages"):
        language_id_probe({"en": x, "de": x}, {"en": x, "fr": x})
    with pytest.raises(ValueError, match="at least 2"):
        language_id_probe({"en": x}, {"en": x})
    with pytest.raises(ValueError, match="no rows"):
        language_id_probe({"en": x, "de": x[:0]}, {"en": x, "de": x})


def test_probe_layers_scores_each_layer():
    gen = torch.Generator().manual_seed(4)

    def split(n):  # layer 0: same distribution for every language; layer 1: separated clusters
        return {lang: torch.stack([torch.randn(n, 8, generator=gen),
                                   8 * torch.eye(8)[k] + torch.randn(n, 8, generator=gen)])
                for k, lang in enumerate(["de", "en", "fr"])}

    df = probe_layers(split(200), split(200), seed=0, batch_size=16)
    assert list(df.columns) == ["layer", "metric", "value"]
    assert df["layer"].tolist() == [0, 1] and set(df["metric"]) == {"accuracy"}
    assert abs(df["value"][0] - 1 / 3) <= 0.15
    assert df["value"][1] >= 0.99


def test_retrieval_of_noisy_copy_is_perfect():
    gen = torch.Generator().manual_seed(5)
    en = torch.randn(3, 20, 16, generator=gen)
    feats = {"en": en, "de": en + 1e-4 * torch.randn(3, 20, 16, generator=gen)}
    df = retrieval_by_language(feats)
    assert list(df.columns) == ["language", "layer", "metric", "value"]
    assert len(df) == 3 and set(df["language"]) == {"de"} and set(df["metric"]) == {"retrieval_p1"}
    assert (df["value"] == 1.0).all()


def test_retrieval_of_permutation_counts_fixed_points():
    n, fixed = 10, 4
    perm = torch.tensor([0, 1, 2, 3, 5, 6, 7, 8, 9, 4])  # fixes 0..3, one 6-cycle on the rest
    assert int((perm == torch.arange(n)).sum()) == fixed
    gen = torch.Generator().manual_seed(6)
    en = torch.stack([torch.eye(n, 16) + 0.01 * torch.randn(n, 16, generator=gen) for _ in range(2)])
    df = retrieval_by_language({"en": en, "fr": en[:, perm], "de": en.clone()})
    got = {(r.language, r.layer): r.value for r in df.itertuples()}
    assert got == {("fr", 0): 0.4, ("fr", 1): 0.4, ("de", 0): 1.0, ("de", 1): 1.0}


def test_retrieval_rejects_bad_inputs():
    x = torch.randn(2, 5, 4)
    with pytest.raises(ValueError, match="source"):
        retrieval_by_language({"de": x, "fr": x})
    with pytest.raises(ValueError, match="sentences"):
        retrieval_by_language({"en": x, "de": x[:, :4]})
