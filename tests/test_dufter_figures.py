"""Dufter & Schütze figures on hand-made inputs: shared colour scales and axes, the paper's numbers where drawn."""
import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from xlrepro.papers.dufter2020 import figures  # noqa: E402


class _Positions:
    """Just what the position figures read: model.bert.embeddings.position_embeddings.weight ([P, H])."""

    def __init__(self, weight):
        emb = torch.nn.Embedding(*weight.shape)
        emb.weight.data = weight
        self.bert = type("B", (), {"embeddings": type("E", (), {"position_embeddings": emb})()})()


def test_position_similarity_is_the_cosine_matrix():
    m = _Positions(torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0]]))
    sim = figures.position_similarity(m)
    assert sim.shape == (3, 3)
    assert np.allclose(np.diag(sim), 1) and sim[0, 1] == pytest.approx(0) and sim[0, 2] == pytest.approx(2 ** -0.5)


def test_figure5_and_8_one_panel_per_model_one_colour_scale():
    models = {"1: lang-pos": _Positions(torch.randn(8, 4)), "9: inv-order": _Positions(torch.randn(8, 4))}
    for fig, shape in ((figures.figure5(models, slots=8), (2, 1)), (figures.figure8(models, slots=8), (1, 2))):
        heat = [ax for ax in fig.axes if ax.get_title()]
        assert [ax.get_title() for ax in heat] == list(models)
        assert len(fig.axes) == 3  # two panels and one colour bar
        limits = {tuple(ax.collections[0].get_clim()) for ax in heat}
        assert limits == {(-1.0, 1.0)}
        rows = {round(ax.get_position().y0, 3) for ax in heat}
        assert len(rows) == shape[0]
    with pytest.raises(ValueError, match="2 models for a grid of 1 x 1"):
        figures._position_panels(models, 1, 1, (4, 4), 8)


def test_figure1_draws_the_papers_numbers_at_the_bars():
    ours = pd.DataFrame([{"experiment": e, "seed": s, "metric": m, "value": v}
                         for e, v in (("0", 0.8), ("8", 0.1)) for s in (0, 1) for m in figures.FIGURE1_METRICS])
    paper = pd.DataFrame({"experiment": ["0", "8"], "metric": ["retr_l8", "retr_l8"], "mean": [0.97, 0.05]})
    fig = figures.figure1(ours, paper, ["0", "8"], {"0": "original", "8": "lang-pos;shift-special;no-random"})
    ax = fig.axes[0]
    drawn = {tuple(np.round(o, 3)) for c in ax.collections for o in np.asarray(c.get_offsets()).reshape(-1, 2)
             if not np.isnan(o[1])}
    w = 0.8 / 3  # retrieval is the second of three bars: its centre is at x - 0.4 + 1.5 w
    assert (round(-0.4 + 1.5 * w, 3), 0.97) in drawn and (round(1 - 0.4 + 1.5 * w, 3), 0.05) in drawn


def test_figure6_marks_the_papers_end_of_training_number():
    curves = pd.DataFrame([{"experiment": "0", "seed": s, "step": st, "metric": m, "value": v}
                           for s in (0, 1) for st in (100, 200)
                           for m, v in (("retr_l0", 0.5), ("retr_l8", 0.6), ("trans_l0", 0.4), ("trans_l8", 0.5),
                                        ("mu", 0.5), ("ppl_train", 10.0), ("ppl_dev", 20.0))])
    paper = pd.DataFrame({"experiment": ["0"], "metric": ["mu"], "mean": [0.70]})
    fig = figures.figure6(curves, ["0"], {"0": "original"}, paper)
    points = [tuple(o) for c in fig.axes[0].collections for o in np.asarray(c.get_offsets()) if len(o)]
    assert (200.0, 0.70) in points


def test_figure4_prints_the_vocabulary_note_under_the_figure(tmp_path):
    from types import SimpleNamespace
    shift, hidden = 8, 4
    emb = torch.nn.Embedding(2 * shift, hidden)
    model = SimpleNamespace(bert=SimpleNamespace(embeddings=SimpleNamespace(word_embeddings=emb)))
    tok = SimpleNamespace(id_to_token=lambda i: f"w{i}")
    specials = np.array([0, 1])
    plain = figures.figure4(model, shift, specials, [3, 5], tok)
    assert not plain.texts
    fig = figures.figure4(model, shift, specials, [3, 5], tok, note="model 0/0: trained before vocabularies were fingerprinted")
    assert [t.get_text() for t in fig.texts] == ["Note: model 0/0: trained before vocabularies were fingerprinted"]
    labels = {t.get_text() for t in fig.axes[1].texts}
    assert labels == {"w3", "w5", "::w3", "::w5"}  # the sample keeps its labels
    fig.savefig(tmp_path / "f4.png", bbox_inches="tight")
