"""Liu et al.'s pre-training evidence in the chapters: the per-language loss table, the training curves, the pilots'
curves and the baselines marked on the figures, on hand-made files with known answers."""
import json

import matplotlib
import pandas as pd

from xlrepro.papers.liu2020 import figures, report

matplotlib.use("Agg")


def write_loss(folder, model, loss, entropy):
    rows = [{"experiment": f"bert-{model}", "metric": m, "language": l, "value": v}
            for m, d in (("mlm_loss", loss), ("unigram_entropy", entropy)) for l, v in d.items()]
    (folder / "loss").mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(folder / "loss" / f"{model}.csv", index=False)


def test_loss_table_puts_each_model_beside_the_unigram_entropy(tmp_path):
    write_loss(tmp_path, "big-w512", {"en": 3.0, "fr": 2.5}, {"en": 6.0, "fr": 6.5})
    write_loss(tmp_path, "small-w512", {"en": 2.0, "fr": 1.0}, {"en": 6.0, "fr": 6.5})
    loss = report.pretraining_loss(tmp_path)
    assert set(loss["seed"]) == {-1} and len(loss) == 8
    t = report.loss_table(loss)
    assert list(t.columns) == ["small-w512", "big-w512", "unigram entropy", "big-w512 below unigram"]
    assert t.loc["fr"].tolist() == [1.0, 2.5, 6.5, 4.0]
    assert report.pretraining_loss(tmp_path / "nothing") is None


def test_training_curves_and_pilot_curves_read_their_records(tmp_path):
    (tmp_path / "training" / "big-w20").mkdir(parents=True)
    (tmp_path / "training" / "big-w20" / "training.json").write_text(json.dumps({"losses": [[0, 11.7], [100, 7.5]]}))
    curves = report.training_curves(tmp_path)
    assert curves.to_dict("records") == [{"experiment": "bert-big-w20", "step": 0, "value": 11.7},
                                         {"experiment": "bert-big-w20", "step": 100, "value": 7.5}]
    pilot = tmp_path / "results" / "pilot_x"
    pilot.mkdir(parents=True)
    pd.DataFrame([{"experiment": "p", "seed": 0, "step": 100, "metric": "train_loss", "value": 8.0},
                  {"experiment": "p", "seed": 0, "step": 100, "metric": "mrr", "value": 0.1}]).to_csv(
        pilot / "curve.csv", index=False)
    (pilot / "pilot.json").write_text(json.dumps({"config": {"model": {"layers": 6, "hidden": 512, "lr": 5e-4}}}))
    p = report.pilot_curves(tmp_path / "results")
    assert p.to_dict("records") == [{"pilot": "6 x 512, lr 0.0005", "step": 100, "value": 8.0}]


def test_level_marks_draw_one_bar_per_language_with_a_baseline():
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    figures.level_marks(ax, {"fr": 0.1, "zh": 0.3}, ["de", "fr", "zh"], "chance MRR")
    segments = [c.get_segments()[0].tolist() for c in ax.collections]
    assert segments == [[[0.55, 0.1], [1.45, 0.1]], [[1.55, 0.3], [2.45, 0.3]]]  # fr at x = 1, zh at x = 2
    assert ax.get_legend_handles_labels()[1] == ["chance MRR"]  # labelled once
    figures.level_marks(ax, None, ["de"], "x")  # nothing to mark
    assert len(ax.collections) == 2
    plt.close(fig)


def test_baselines_read_chance_and_majority(tmp_path):
    pd.DataFrame([{"experiment": "chance-identical", "seed": -1, "metric": "mrr", "value": 0.09, "language": "fr"},
                  {"experiment": "chance", "seed": -1, "metric": "mrr", "value": 0.02, "language": "fr"},
                  {"experiment": "majority-test", "seed": -1, "metric": "accuracy", "value": 0.27, "language": "fr"}
                  ]).to_csv(tmp_path / "baselines.csv", index=False)
    b = report.baselines(tmp_path)
    assert b.chance == {"fr": 0.09} and b.majority == {"fr": 0.27}
    assert report.baselines(tmp_path / "none") == report.Baselines()


def test_gpu_records_are_published_with_their_config(tmp_path):
    run = tmp_path / "gpu" / "training" / "big-w512"
    run.mkdir(parents=True)
    (run / "training.json").write_text(json.dumps({"steps": 8000, "seconds": 379.1, "device": "NVIDIA H200"}))
    (run / "config.json").write_text(json.dumps({"model": {"hidden": 512, "layers": 6}}))
    (written,) = report.publish_gpu_records(tmp_path / "gpu", tmp_path / "out")
    assert written == tmp_path / "out" / "gpu_run" / "big-w512-training.json"
    assert json.loads(written.read_text()) == {"experiment": "bert-big-w512", "steps": 8000, "seconds": 379.1,
                                               "device": "NVIDIA H200", "config": {"model": {"hidden": 512,
                                                                                             "layers": 6}}}
    assert report.publish_gpu_records(tmp_path / "none", tmp_path / "out") == []
