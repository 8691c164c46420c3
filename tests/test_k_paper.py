"""K et al.'s paper profile (`xlrepro.papers.k2020.paper`) on the fixtures of tests/fixtures/paper/: Wikipedia in
en, de and fr (wikiextractor format), ten MultiNLI lines (nine with a gold label), XNLI test pairs of de, en, es and
fr (six each). The B-BERT is tiny (hidden 16, 2 layers, 3 steps) and learns nothing: the tests check the files, the
cache, the Fake-English text and the errors."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from xlrepro.cli import main
from xlrepro.config import ConfigError
from xlrepro.papers.k2020 import paper as K
from xlrepro.papers.k2020.paper import BBert, PaperSettings, resolve_paths, run_paper

TINY = dict(steps=3, batch_size=4, vocab_size=200, hidden=16, layers=2, heads=2, ffn=32, max_length=48,
            finetune_epochs=1, finetune_batch_size=4)


@pytest.fixture
def paper_env(paper_env_of):
    return paper_env_of("XLREPRO_WIKI_DIR", "XLREPRO_MULTINLI_DIR", "XLREPRO_XNLI_DIR")


def test_run_paper_writes_long_rows_and_reuses_its_model(paper_env, monkeypatch):
    path = run_paper("en-de", seeds=(0, 1), **TINY)
    assert path == paper_env / "runs" / "k2020" / "paper" / "results" / "paper" / "en-de.csv"
    frame = pd.read_csv(path)
    assert frame.columns.tolist() == ["experiment", "seed", "language", "task", "metric", "value"]
    assert set(frame["experiment"]) == {"en-de"} and set(frame["task"]) == {"xnli"}
    assert sorted(frame["seed"].unique()) == [0, 1]
    scores = frame[frame["metric"].isin(["accuracy", "macro_f1"])]
    assert sorted(scores["language"].unique()) == ["de", "en"] and len(scores) == 2 * 2 * 2
    assert scores["value"].between(0, 1).all()
    assert (frame[frame["metric"] == "test_pairs"]["value"] == 6).all()  # the fixture's six pairs a language
    record = json.loads(path.with_suffix(".json").read_text())
    assert record["settings"]["pair"] == "en-de" and record["wikipedia"] == "tests/fixtures/paper/wiki"
    models = sorted((paper_env / "runs" / "k2020" / "paper").glob("en-de-*/model_*.safetensors"))
    assert [m.name for m in models] == ["model_0.safetensors", "model_1.safetensors"]
    stamps = [m.stat().st_mtime_ns for m in models]

    from xlrepro.papers.k2020 import trainer
    monkeypatch.setattr(trainer.StackTrainer, "run", lambda *a, **k: pytest.fail("pre-trained again"))
    again = run_paper("en-de", seeds=(0, 1), results=paper_env / "published", **TINY)  # the same run key
    assert again == paper_env / "published" / "paper" / "en-de.csv"
    assert [m.stat().st_mtime_ns for m in models] == stamps
    with pytest.raises(pytest.fail.Exception, match="pre-trained again"):  # other settings: another key
        run_paper("en-de", seeds=(0,), **{**TINY, "steps": 4})


def test_fake_english_shares_no_character_with_the_target(paper_env):
    settings = PaperSettings(pair="en-de", fake=True, seeds=(0,), **TINY)
    assert settings.name == "enfake-de" and settings.source == "enfake"
    bbert = BBert(settings, resolve_paths(settings), root=paper_env / "models")
    text = bbert.corpora()
    assert list(text) == ["enfake", "de"]
    fake, target = (set("".join(lines)) - {" "} for lines, _ in text.values())
    assert fake and target and not fake & target
    assert all(ord(c) >= 200_000 for c in fake)  # every English character moved past Unicode's assigned planes
    # the first English paragraph of the fixture, shifted: its first character is "A" moved by 200000
    first = text["enfake"][0][0]
    assert ord(first[0]) == ord("A") + 200_000
    # the joint vocabulary: the two sides' pairs share only the special pieces
    table = bbert.table()
    sides = [set(table.ids[o:o + n][table.maskable[o:o + n]].tolist()) for o, n in zip(table.offsets, table.sizes)]
    assert sides[0] and sides[1] and not sides[0] & sides[1]


def test_bad_settings_name_the_valid_choices(paper_env):
    with pytest.raises(ConfigError, match="valid choices: en-ar, en-bg, en-de, .*en-zh"):
        PaperSettings(pair="de-en")
    with pytest.raises(ConfigError, match="unknown target language of the pair 'xx'; valid choices: ar, bg"):
        PaperSettings(pair="en-xx")
    with pytest.raises(ConfigError, match="seeds must be distinct integers >= 0"):
        PaperSettings(seeds=(0, 0))
    with pytest.raises(ConfigError, match="steps must be a positive integer; got 0"):
        PaperSettings(steps=0)
    with pytest.raises(ConfigError, match="max_chars must be None"):
        PaperSettings(max_chars=0)
    with pytest.raises(ConfigError, match="hidden 15 must be a multiple of heads 2"):
        PaperSettings(hidden=15, heads=2)
    with pytest.raises(ConfigError, match="fake must be True or False"):
        PaperSettings(fake="yes")
    with pytest.raises(ConfigError, match="unknown setting 'hiden'; valid choices: batch_size, lr"):
        run_paper("en-de", hiden=16)
    assert not (paper_env / "runs").exists()  # nothing was written


def test_missing_resources_stop_in_one_line(paper_env, monkeypatch):
    with pytest.raises(ConfigError, match=r"no es/ in XLREPRO_WIKI_DIR=.*its languages: de, en, fr"):
        resolve_paths(PaperSettings(pair="en-es"))
    monkeypatch.setenv("XLREPRO_CACHE", str(paper_env / "empty-cache"))  # nothing prepared there
    for variable in ("XLREPRO_XNLI_DIR", "XLREPRO_MULTINLI_DIR", "XLREPRO_WIKI_DIR"):
        monkeypatch.delenv(variable)
        with pytest.raises(ConfigError, match=f"{variable} unset") as err:
            run_paper("en-de", **TINY)
        assert "`xlrepro prepare --profile paper --only k2020/paper.run_paper`" in str(err.value)
        assert "\n" not in str(err.value)
    assert not (paper_env / "runs").exists()


def test_the_train_command_reaches_the_paper_profile(paper_env, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(K, "run_paper", lambda *a, **k: calls.append((a, k)) or paper_env / "x.csv")
    argv = ["train", "k2020", "--profile", "paper", "--pair", "en-de", "--fake", "--steps", "5", "--seeds", "1", "2"]
    assert main(argv) == 2  # a full-size model on the CPU
    assert "would train on the CPU" in capsys.readouterr().err and not calls
    assert main([*argv, "--allow-cpu"]) == 0
    (args, kwargs), = calls
    assert args == ("en-de", True, (1, 2), 5) and kwargs["device"] == "cpu"
    for extra, message in ((["--part", "t1"], "--part applies to --profile lab and smoke"),
                           (["--dry-run"], "--dry-run apply to --profile lab and smoke"),
                           (["--pair", "en-xx"], "unknown target language of the pair 'xx'; valid choices: ar")):
        assert main(["train", "k2020", "--profile", "paper", *extra]) == 2
        assert message in capsys.readouterr().err
    assert main(["train", "k2020", "--profile", "lab", "--fake", "--part", "t1"]) == 2
    assert "--fake apply to --profile paper" in capsys.readouterr().err
    assert main(["train", "k2020", "--profile", "lab"]) == 2
    assert "--profile lab needs --part" in capsys.readouterr().err
    assert main(["train", "k2020", "--profile", "huge", "--part", "t1"]) == 2
    assert "valid choices: lab, alltext, alltext2x, alltext4x, alltext8x, smoke, paper" in capsys.readouterr().err
    monkeypatch.delenv("XLREPRO_WIKI_DIR")
    monkeypatch.setenv("XLREPRO_CACHE", str(paper_env / "empty-cache"))
    assert main(["train", "k2020", "--profile", "paper", "--allow-cpu"]) == 2
    assert "XLREPRO_WIKI_DIR unset" in capsys.readouterr().err and len(calls) == 1
