"""Rendering the Wu & Dredze chapters from their published results (xlrepro/papers/wu2019/published.py)."""
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

import xlrepro.devices
from xlrepro.config import ConfigError
from xlrepro.papers.wu2019.published import PublishedLab, choose_source
from xlrepro.papers.wu2019.transfer import chapter_lab, load_plan

ROOT = Path(__file__).resolve().parents[1]
LONG = ["experiment", "seed", "language", "metric", "value"]

# A hand-made published folder: two languages, the plan's three seeds, one in-language seed.
ZERO_SHOT = """experiment,seed,language,metric,value
zero-shot,0,en,accuracy,0.9
zero-shot,0,fr,accuracy,0.4
zero-shot,1,en,accuracy,0.8
zero-shot,1,fr,accuracy,0.5
zero-shot,2,en,accuracy,0.85
zero-shot,2,fr,accuracy,0.45
in-language,0,en,accuracy,0.875
in-language,0,fr,accuracy,0.625
majority,-1,en,accuracy,0.25
majority,-1,fr,accuracy,0.25
"""
FROZEN = "experiment,seed,language,metric,value\n" + "".join(
    f"{e},{s},{l},accuracy,{v}\n" for e, v in (("all", 0.5), ("freeze-2", 0.75)) for s in (0, 1, 2) for l in ("en", "fr"))


@pytest.fixture
def published(tmp_path, monkeypatch):
    """book/results/wu2019 of a repository at tmp_path (XLREPRO_ROOT), holding the tiny CSVs; a CPU."""
    folder = tmp_path / "book" / "results" / "wu2019"
    folder.mkdir(parents=True)
    (folder / "zero_shot.csv").write_text(ZERO_SHOT)
    (folder / "frozen.csv").write_text(FROZEN)
    monkeypatch.setenv("XLREPRO_ROOT", str(tmp_path))
    monkeypatch.setattr(xlrepro.devices, "default_device", lambda: "cpu")
    return folder


def test_published_lab_reads_the_csvs_and_lists_the_missing_in_language_runs(published):
    lab = PublishedLab("q1_zero_shot", folder=published)
    zero = lab.zero_shot([0, 1, 2])
    assert list(zero.columns) == LONG and set(zero["experiment"]) == {"zero-shot"}
    assert zero.loc[(zero.seed == 1) & (zero.language == "fr"), "value"].item() == 0.5
    assert lab.majority_baseline()["value"].tolist() == [0.25, 0.25]
    upper = lab.in_language()
    assert upper["value"].tolist() == [0.875, 0.625]
    # the plan's in-language seeds are 0, 1, 2: seed 0 exists for en and fr, nothing else does
    assert ("fr", 1) in lab.pending_runs and ("en", 2) in lab.pending_runs
    assert ("en", 0) not in lab.pending_runs and ("fr", 0) not in lab.pending_runs
    assert lab.depth == 4  # the plan's lab encoder, read from its config, not from a model
    with pytest.raises(ConfigError, match=r"published results hold seeds \[0, 1, 2\]; got seeds=\[0\]"):
        lab.zero_shot([0])


def test_save_checks_the_published_file_and_never_writes_it(published):
    lab = PublishedLab("q1_zero_shot", folder=published)
    path = published / "zero_shot.csv"
    before = path.stat().st_mtime_ns
    ours = pd.concat([lab.zero_shot(), lab.in_language(), lab.majority_baseline()], ignore_index=True)
    lab.save(ours, path)  # the same rows: accepted
    changed = ours.copy()
    changed.loc[0, "value"] = 0.91
    with pytest.raises(RuntimeError, match="differs from the published file"):
        lab.save(changed, path)
    assert path.read_text() == ZERO_SHOT and path.stat().st_mtime_ns == before


def test_chapter_lab_renders_the_published_run_and_says_so(published, capsys):
    lab, out = chapter_lab(publish=True, chapter="q2_layers", seeds=[0, 1, 2])
    assert isinstance(lab, PublishedLab) and out == published
    assert "source: published" in capsys.readouterr().out
    notice = lab.notice()
    assert notice.startswith("**Rendered from the published results** of 2026-11-26 (2 x NVIDIA H200")
    assert "`frozen.csv`" in notice and "`xlrepro run wu2019/q2_layers --publish`" in notice
    assert lab.frozen([0, 1, 2])["value"].tolist() == [0.5] * 6 + [0.75] * 6
    assert lab.run_notes()["training devices"] == "2 x NVIDIA H200 (the published run)"


@pytest.mark.parametrize("change, named", [
    ({"seeds": [0]}, "seeds=[0]"),
    ({"epochs": 1}, "epochs=1"),
    ({"languages": ["en", "fr"]}, "languages=['en', 'fr']"),
    ({"model": "smoke"}, "model='smoke'"),
    ({"results": "elsewhere"}, "results='elsewhere'"),
])
def test_a_changed_parameter_never_gets_published_numbers(published, change, named):
    source, why = choose_source("q2_layers", "auto", publish=True, **change)
    assert source == "train" and named in why
    with pytest.raises(ConfigError, match=re.escape(f"parameters differ from the published run's: {named}")):
        chapter_lab(publish=True, chapter="q2_layers", source="published", **change)


def test_changed_probe_sizes_train():
    plan = load_plan()
    source, why = choose_source("q3_language_id", publish=True, probe={"train_per_language": 60}, plan=plan,
                                device="cpu")
    assert source == "train" and "train_per_language=60" in why


def test_published_only_for_the_published_run_on_a_cpu_without_the_cache(published):
    assert choose_source("q2_layers", publish=True)[0] == "published"
    assert choose_source("q2_layers", publish=False)[0] == "train"  # an exploratory run
    assert choose_source("q2_layers", "train", publish=True)[0] == "train"
    source, why = choose_source("q2_layers", publish=True, device="cuda")
    assert source == "train" and "cuda" in why
    source, why = choose_source("q3_language_id", publish=True)  # no language_id.csv in the folder
    assert source == "train" and "language_id.csv" in why
    with pytest.raises(ConfigError, match="only for the published run"):
        choose_source("q2_layers", "published", publish=False)
    with pytest.raises(ConfigError, match="unknown source 'cached'; valid choices: auto, train, published"):
        choose_source("q2_layers", "cached", publish=True)


def test_the_cli_guard_still_stops_a_changed_parameter_on_a_cpu(published):
    from xlrepro.cli import check_training

    check_training("wu2019/q2_layers", {"publish": True}, allow_cpu=False)  # renders: nothing to guard
    with pytest.raises(ConfigError, match="would train on the CPU"):
        check_training("wu2019/q2_layers", {"publish": True, "seeds": [0]}, allow_cpu=False)
    with pytest.raises(ConfigError, match="would train on the CPU"):
        check_training("wu2019/q2_layers", {"publish": False}, allow_cpu=False)


def test_claims_recomputed_from_the_published_csvs_equal_the_published_verdicts(tmp_path):
    """The book's own results: each chapter's claims, computed the way the chapters compute them from the CSVs that
    a re-render reads, give the published claims.csv back (its verdicts, and every other cell)."""
    from xlrepro.claims import claims_table
    from xlrepro.results import read_claims

    source = ROOT / "book" / "results" / "wu2019"
    for name in ("zero_shot", "frozen", "language_id", "overlap", "paraphrase"):
        if name == "paraphrase" and not (source / f"{name}.csv").exists():
            continue  # the paraphrase task's runs are not published yet: its claims are pending
        shutil.copy(source / f"{name}.csv", tmp_path)
    published = read_claims(source / "claims.csv")
    labs = {c: PublishedLab(c, folder=tmp_path) for c in ("q1_zero_shot", "q2_layers", "q3_language_id",
                                                           "q4_subword_overlap")}
    for chapter in ("q1_zero_shot", "q2_layers", "q3_language_id"):
        claims_table("wu2019", chapter=chapter, results=tmp_path)
    # Q4's claims cell reads the frames of `claims_frames`, as `xlrepro verdicts` does: the folder's CSVs, which hold
    # what the chapter draws (its overlap.csv, Q1's zero-shot rows) and the majority rows its precondition reads
    from xlrepro.papers.wu2019.report import claims_frames
    lab = labs["q4_subword_overlap"]
    frames = claims_frames("q4_subword_overlap", tmp_path)
    assert frames["overlap"].equals(lab.overlap())
    zero = frames["zero_shot"]
    assert zero[zero["experiment"] == "zero-shot"].reset_index(drop=True).equals(lab.zero_shot())
    claims_table("wu2019", chapter="q4_subword_overlap", results=frames, out=tmp_path)
    ours = read_claims(tmp_path / "claims.csv")
    # claims added to claims.yaml after the published run (the paraphrase task's, written before its runs) are
    # pending, as they would be in a re-render; every claim the published run decided comes back unchanged
    added = ~ours["claim"].isin(published["claim"])
    assert set(ours.loc[added, "verdict"]) <= {"pending"}
    kept = ours[~added].reset_index(drop=True)
    assert len(kept) == len(published) >= 10
    assert kept["verdict"].tolist() == published["verdict"].tolist()
    pd.testing.assert_frame_equal(kept, published)
    # re-rendering one chapter alone keeps its rows where they were (no reordering of claims.csv)
    text = (tmp_path / "claims.csv").read_text()
    claims_table("wu2019", chapter="q2_layers", results=tmp_path)
    assert (tmp_path / "claims.csv").read_text() == text


def test_the_lab_chapter_renders_its_encoder_from_the_published_files_only_at_the_published_run(tmp_path, monkeypatch):
    from xlrepro.papers.wu2019.published import LAB_FILES, lab_source
    from xlrepro.papers.wu2019.transfer import mini_mbert_for

    monkeypatch.setenv("XLREPRO_CACHE", str(tmp_path / "cache"))  # no encoder in the cache
    folder = tmp_path / "multilingual"
    folder.mkdir()
    (folder / LAB_FILES[0]).write_text("{}")
    source, why = lab_source(publish=True, device="cpu", folder=folder)  # retrieval.csv missing
    assert source == "train" and "no published retrieval.csv" in why
    (folder / LAB_FILES[1]).write_text("language,layer,value\n")
    assert lab_source(publish=True, device="cpu", folder=folder)[0] == "published"
    assert lab_source(publish=False, device="cpu", folder=folder)[0] == "train"  # an exploratory run
    assert lab_source("train", publish=True, device="cpu", folder=folder)[0] == "train"
    source, why = lab_source(publish=True, device="cpu", folder=folder, retrieval_sentences=200)
    assert source == "train" and "retrieval_sentences=200" in why
    source, why = lab_source(publish=True, device="cuda", folder=folder)
    assert source == "train" and "cuda" in why
    with pytest.raises(ConfigError, match="only for the published run at its defaults; here: parameters differ"):
        lab_source("published", publish=True, folder=folder, languages=["en", "fr"])
    encoder = mini_mbert_for(load_plan(), "lab")[0].default_dir()  # the encoder in the cache: it is used
    encoder.mkdir(parents=True)
    (encoder / "training.json").write_text("{}")
    source, why = lab_source(publish=True, device="cpu", folder=folder)
    assert source == "train" and why == "the encoder is in the cache"
