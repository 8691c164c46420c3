"""K et al. 2020: a chapter rendered from a hand-made published folder (`published.chapter_frames`), and the source
checks (`published.choose_source`)."""
import pandas as pd
import pytest

from xlrepro.config import ConfigError
from xlrepro.papers.k2020 import report as R
from xlrepro.papers.k2020.published import chapter_frames, choose_source
from xlrepro.results import write_csv

# Table 11's three cells, one seed of accuracies each, and their majority baselines (mixed_pairs.csv)
ACCURACIES = {("enfake-es", "es"): [0.5, 0.6, 0.7], ("enfake-es", "enfake"): [0.9, 0.9, 0.9],
              ("enfake-es", "enfake>es"): [0.8, 0.8, 0.8], ("enfake-es", "es>enfake"): [0.6, 0.6, 0.6]}


def published_folder(folder):
    rows = [{"experiment": e, "seed": s, "language": lang, "task": "sections", "metric": "accuracy", "value": v}
            for (e, lang), values in ACCURACIES.items() for s, v in enumerate(values)]
    rows += [{"experiment": "majority/enfake-es", "seed": -1, "language": lang, "task": "sections",
              "metric": "accuracy", "value": 0.25} for lang in ("es", "enfake")]
    write_csv(pd.DataFrame(rows), folder / "mixed_pairs.csv")
    (folder / "run_record_mixed_pairs.json").write_text('{"pre-training": "12 worker-minutes"}\n')
    return folder


def test_chapter_renders_from_a_published_folder(tmp_path):
    folder = published_folder(tmp_path)
    before = (folder / "mixed_pairs.csv").read_text()
    K = chapter_frames("mixed_pairs", source="published", publish=True, folder=folder, device="cpu")
    assert K.source == "published" and K.folder == folder
    assert K.todo == ["enfake-hi", "enfake-ru", "enfake-es/adj", "enfake-hi/adj", "enfake-ru/adj"]  # not in the file
    table = R.ours_table(K.results, ["enfake-es"], "accuracy")
    assert table.loc["enfake-es", "es"] == "60.0\u00a0±\u00a010.0"  # mean ± sd of 50, 60, 70
    assert table.loc["majority/enfake-es", "es"] == "25.0"  # one cell: its own baseline row
    assert "the way from the target's pairs to Fake-English's" in R.mixed_reading(K.results)
    assert "`mixed_pairs.csv`" in K.notice()
    notes = K.run_notes()
    assert notes["source"] == "published results of 2026-11-27 (commit 8823996), re-rendered; nothing trained"
    assert notes["pre-training"] == "12 worker-minutes"  # the published run's record, carried over
    assert (folder / "mixed_pairs.csv").read_text() == before  # nothing written
    with pytest.raises(RuntimeError, match="differs from the published file"):
        K.save(K.results.assign(value=K.results["value"] + 0.01), "mixed_pairs")


def test_auto_renders_published_only_for_the_published_run_on_a_cpu_without_cells(tmp_path):
    folder = published_folder(tmp_path)
    assert choose_source("mixed_pairs", "auto", publish=True, device="cpu", folder=folder)[0] == "published"
    assert choose_source("mixed_pairs", "auto", publish=False, device="cpu", folder=folder)[0] == "runs"
    assert choose_source("mixed_pairs", "auto", publish=True, device="cuda", folder=folder)[0] == "runs"
    assert choose_source("mixed_pairs", "auto", publish=True, device="cpu", folder=folder, seeds=[0])[0] == "runs"
    assert choose_source("linguistic", "auto", publish=True, device="cpu", folder=folder)[0] == "runs"  # no CSV
    assert choose_source("mixed_pairs", "runs", publish=True, device="cpu", folder=folder)[0] == "runs"


def test_unknown_or_blocked_source_names_the_choices(tmp_path):
    with pytest.raises(ConfigError, match="unknown source 'train'; valid choices: auto, runs, published"):
        chapter_frames("mixed_pairs", source="train", publish=True, folder=tmp_path)
    with pytest.raises(ConfigError, match="seeds=\\[0\\]"):
        choose_source("mixed_pairs", "published", publish=True, folder=published_folder(tmp_path), seeds=[0])
    with pytest.raises(ConfigError, match="no published linguistic.csv, overlap.csv in "):
        choose_source("linguistic", "published", publish=True, folder=tmp_path)
    with pytest.raises(ConfigError, match="publish=False"):
        choose_source("mixed_pairs", "published", folder=tmp_path)
