"""Table 4 with an encoder's similarities: word vectors pooled per pre-split word, cosine Match, known answers."""
import math
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from xlrepro.evaluation.probe import word_features
from xlrepro.evaluation.word_order import VectorSimilarity, corpus_word_order
from xlrepro.papers.dufter2020 import word_order

torch.set_num_threads(1)
N = 10  # English words w0..w9, their renamed counterparts z0..z9


class Lookup(nn.Module):
    """A stand-in encoder without context: every layer's hidden state of a piece is its row of `table`, so a word's
    vector is the mean of its pieces' rows (known by hand)."""

    def __init__(self, table: torch.Tensor, layers: int = 2):
        super().__init__()
        self.table = nn.Parameter(table, requires_grad=False)
        self.config = SimpleNamespace(num_hidden_layers=layers, max_position_embeddings=128)

    def forward(self, input_ids, attention_mask, token_type_ids, output_hidden_states):
        h = self.table[input_ids]  # [b, W, hidden]
        return SimpleNamespace(hidden_states=tuple(h + 0 for _ in range(self.config.num_hidden_layers + 1)))


@pytest.fixture(scope="module")
def stand_in():
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordPiece
    pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"w{i}" for i in range(N)),
              *(f"z{i}" for i in range(N)), "ab", "##cd"]
    vocab = {p: i for i, p in enumerate(pieces)}
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, lowercase=False, strip_accents=False)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    table = torch.zeros(len(pieces), len(pieces))
    for p, i in vocab.items():
        twin = "w" + p[1:] if p.startswith("z") else p  # z_i gets w_i's vector: a perfect translation
        table[i, vocab[twin]] = 1.0
    return Lookup(table), tok, vocab


def test_pieces_are_pooled_per_given_word(stand_in):
    model, tok, vocab = stand_in
    # "abcd" is two pieces (ab ##cd); "\x00" is removed by the normaliser: no piece, so no vector (NaN)
    (vec,) = word_features(model, tok, [["w1", "abcd", "\x00", "w2"]], layer=1)
    assert vec.shape == (4, len(vocab))
    assert vec[0, vocab["w1"]] == 1 and vec[0].sum() == 1
    expected = torch.zeros(len(vocab))
    expected[vocab["ab"]] = expected[vocab["##cd"]] = 0.5
    assert torch.equal(vec[1], expected)
    assert torch.isnan(vec[2]).all() and vec[3, vocab["w2"]] == 1
    # "w1.w2" is one given word that the pre-tokenizer cuts into three pieces: they stay one word
    (vec,) = word_features(model, tok, [["w1.w2", "w3"]], layer=0)
    assert vec.shape[0] == 2 and vec[0, vocab["w1"]] == pytest.approx(1 / 3) and vec[1, vocab["w3"]] == 1
    # pieces beyond max_length: [CLS] w1 w2 [SEP] leaves w3 without a vector
    (vec,) = word_features(model, tok, [["w1", "w2", "w3"]], layer=1, max_length=4)
    assert not torch.isnan(vec[1]).any() and torch.isnan(vec[2]).all()
    with pytest.raises(ValueError, match="layer must be in 0..2"):
        word_features(model, tok, [["w1"]], layer=3)


def test_renamed_corpus_gives_one_and_reversed_corpus_zero(stand_in):
    model, tok, _ = stand_in
    rng = np.random.default_rng(0)
    src = [[f"w{i}" for i in rng.choice(N, size=int(rng.integers(2, 8)), replace=False)] for _ in range(30)]
    renamed = [[w.replace("w", "z") for w in v] for v in src]
    vectors = lambda corpus: word_features(model, tok, corpus, layer=1, batch_size=7)  # batches of mixed lengths
    same = corpus_word_order(src, renamed, VectorSimilarity(vectors(src), vectors(renamed)))
    assert same["kendall_tau"] == 1.0 and same["sentences"] == 30 and same["skipped"] == 0
    assert same["aligned_pairs"] == pytest.approx(np.mean([len(v) for v in src]))
    reversed_ = [v[::-1] for v in renamed]
    rev = corpus_word_order(src, reversed_, VectorSimilarity(vectors(src), vectors(reversed_)))
    assert rev["kendall_tau"] == 0.0 and rev["sentences"] == 30


def test_vector_similarity_is_cosine_and_a_missing_vector_is_no_evidence():
    s = np.array([[3.0, 0.0], [1.0, 1.0]])
    t = np.array([[0.0, 2.0], [np.nan, np.nan], [2.0, 0.0]])
    m = VectorSimilarity([s], [t]).pair_matrix(0, ["a", "b"], ["x", "y", "z"])
    np.testing.assert_allclose(m, [[0.0, 0.0, 1.0], [math.sqrt(0.5), 0.0, math.sqrt(0.5)]])
    with pytest.raises(ValueError, match="2 x 2 words but 2 x 3 vectors"):
        VectorSimilarity([s], [t]).pair_matrix(0, ["a", "b"], ["x", "y"])
    with pytest.raises(ValueError, match="parallel"):
        VectorSimilarity([s], [])


def test_merge_keeps_the_other_sources_rows(tmp_path):
    row = lambda e, lang, v: {"experiment": e, "seed": -1, "language": lang, "metric": "kendall_tau", "value": v}
    path = tmp_path / "table4.csv"
    pd.DataFrame([row("dice", "fr", 0.6), row("mini-mbert", "fr", 0.1)]).to_csv(path, index=False)
    word_order.merge_into(pd.DataFrame([row("mini-mbert", "fr", 0.7), row("mini-mbert", "de", 0.5)]), path)
    got = pd.read_csv(path).set_index(["experiment", "language"])["value"].to_dict()
    assert got == {("dice", "fr"): 0.6, ("mini-mbert", "fr"): 0.7, ("mini-mbert", "de"): 0.5}


def test_options_checked_before_any_work(tmp_path, capsys):
    assert word_order.middle_layer(4) == 2 and word_order.middle_layer(2) == 1 and word_order.middle_layer(12) == 6
    with pytest.raises(FileNotFoundError, match="xlrepro pretrain mini-mbert"):
        word_order.check_encoder(tmp_path)
    r = subprocess.run([sys.executable, "-m", "xlrepro.papers.dufter2020.word_order", "--similarity", "bert",
                        "--out", str(tmp_path / "t.csv")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "must be one of dice, mini-mbert" in r.stderr
    # the same command line in this process: a second interpreter would spend seconds importing the encoder's modules
    with pytest.raises(SystemExit) as exit_:
        word_order.main(["--similarity", "mini-mbert", "--encoder", str(tmp_path), "--out", str(tmp_path / "t.csv")])
    assert exit_.value.code == 2 and "xlrepro pretrain mini-mbert" in capsys.readouterr().err
    assert not (tmp_path / "t.csv").exists()


def test_smoke_pass_with_a_tiny_mini_mbert(multilingual_cache, tmp_path):
    from xlrepro.config import ModelSize
    from xlrepro.training.mini_mbert import MiniMBertConfig, pretrain
    config = MiniMBertConfig(languages=("en", "fr", "de"), vocab_size=300, size=ModelSize("tiny", 16, 2, 2, 32, 1e-3),
                             batch_size=8, max_length=64, steps=4)
    encoder = pretrain(config, out_dir=tmp_path / "enc", max_sentences_per_language=50, progress=False)
    t = word_order.mini_mbert_table(["fr", "de"], max_verses=12, encoder_dir=encoder, device="cpu",
                                    common=["en", "fr", "de"], progress=False)
    v = t.set_index(["language", "metric"])["value"]
    assert set(t["experiment"]) == {"mini-mbert"} and v["en", "kendall_tau"] == 1.0
    for lang in ("fr", "de"):
        assert v[lang, "layer"] == 1 and v[lang, "verses"] + v[lang, "skipped"] == 12
        assert 0.0 <= v[lang, "kendall_tau"] <= 1.0 and v[lang, "aligned_pairs"] >= 2
