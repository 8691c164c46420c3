"""Wu & Dredze's Table 3 in the paper profile (`xlrepro.papers.wu2019.xnli`), on CPU against the fixtures of the
upstream formats: the tiny BERT of tests/fixtures/paper/ stands in for mBERT, 9 MultiNLI pairs for its training
data, XNLI's dev and test files in en, de and fr. The model learns nothing in one epoch; the tests check the
pipeline, its files and its errors, and the numbers that do not depend on training."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from xlrepro.cli import main
from xlrepro.config import ConfigError
from xlrepro.papers.wu2019.constants import PAPER_MISSING, results_profile
from xlrepro.papers.wu2019.transfer import chapter_lab
from xlrepro.papers.wu2019.xnli import XnliLab, resolve_paths, table3

FIX = Path(__file__).resolve().parent / "fixtures" / "paper"


@pytest.fixture
def paper_env(paper_env_of):
    return paper_env_of("XLREPRO_MBERT", "XLREPRO_XNLI_DIR", "XLREPRO_MULTINLI_DIR")


def test_table3_writes_its_runs_and_results_beside_the_labs(paper_env):
    folder = table3(resolve_paths(), languages=["de", "fr"], seeds=[0, 1], epochs=1)
    root = paper_env / "runs" / "wu2019" / "paper" / "tiny_bert-trNone-teNone-e1"
    assert folder == root / "results"
    assert sorted(p.name for p in folder.iterdir()) == ["profile.json", "selection.csv", "zero_shot.csv"]
    selection = pd.read_csv(folder / "selection.csv")
    assert selection["lr"].tolist() == [2e-5, 3e-5, 5e-5]  # the paper's grid (experiments.yaml, paper.lr_grid)
    results = pd.read_csv(folder / "zero_shot.csv")
    zero = results[results["experiment"] == "zero-shot"]
    assert len(zero) == 2 * 3 * 2  # seeds x languages (en always in) x metrics
    assert set(zero["language"]) == {"en", "de", "fr"} and set(zero["metric"]) == {"accuracy", "macro_f1"}
    assert zero["value"].between(0, 1).all()
    majority = results[results["experiment"] == "majority"].set_index("language")["value"]
    assert majority.to_dict() == pytest.approx({"en": 1 / 3, "de": 1 / 3, "fr": 1 / 3})  # 2 of 6 pairs per label
    runs = sorted(p.name.rsplit("-", 1)[0] for p in (root / "finetune" / "en" / "all").glob("*.json"))
    # the 3 learning rates at seed 0, then seed 1 at the one with the best English dev accuracy (the first on ties)
    best = selection.loc[selection["dev_accuracy"].idxmax(), "lr"]
    assert runs == sorted(["lr2e-05-seed0", "lr3e-05-seed0", "lr5e-05-seed0", f"lr{best:g}-seed1"])
    assert json.loads((folder / "profile.json").read_text())["profile"] == "paper"
    assert results_profile(folder) == "paper" and results_profile(paper_env) == "lab"


def test_a_second_run_reads_the_cache(paper_env):
    table3(resolve_paths(), languages=["de"], seeds=[0], epochs=1, max_train_pairs=4)
    files = sorted((paper_env / "runs").rglob("finetune/*/*/*.json"))
    stamps = [f.stat().st_mtime_ns for f in files]
    table3(resolve_paths(), languages=["de"], seeds=[0], epochs=1, max_train_pairs=4)
    assert sorted((paper_env / "runs").rglob("finetune/*/*/*.json")) == files
    assert [f.stat().st_mtime_ns for f in files] == stamps


def test_pairs_come_from_the_upstream_files(paper_env):
    lab = XnliLab(resolve_paths(), languages=["fr"], max_test_pairs=4, epochs=1)
    assert lab.languages == ["en", "fr"] and lab.depth == 2
    assert len(lab.pairs("en", "train")) == 9 and len(lab.pairs("en", "dev")) == 3 and len(lab.pairs("fr", "test")) == 4
    assert lab.in_language().empty
    with pytest.raises(ConfigError, match="English MultiNLI only"):
        lab.pairs("fr", "train")
    with pytest.raises(ConfigError, match="valid choices: ar, bg"):
        XnliLab(resolve_paths(), languages=["tl"])


def test_missing_resources_name_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("XLREPRO_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("XLREPRO_MULTINLI_DIR", raising=False)
    monkeypatch.setenv("XLREPRO_XNLI_DIR", str(FIX / "xnli"))
    with pytest.raises(ConfigError, match="set XLREPRO_MULTINLI_DIR") as err:
        resolve_paths()
    assert "\n" not in str(err.value)


def test_chapter_lab_paper_profile(paper_env, monkeypatch):
    from xlrepro.papers.wu2019.language_id import LanguageIdLab

    lab, folder = chapter_lab("paper", languages=["de"], max_train_pairs=4, epochs=1, chapter="q1_zero_shot")
    assert isinstance(lab, XnliLab) and folder == lab.root / "results" and results_profile(folder) == "paper"
    assert "Paper profile" in lab.notice() and "other panels" not in lab.notice()
    with pytest.raises(ConfigError, match="leave model at 'lab'"):
        chapter_lab("paper", model="smoke", chapter="q1_zero_shot")
    for chapter in ("q2_layers", "q4_subword_overlap"):  # XNLI's panel of the paper's figure; the rest named
        lab, folder = chapter_lab("paper", languages=["de"], max_train_pairs=4, epochs=1, chapter=chapter)
        assert isinstance(lab, XnliLab) and results_profile(folder) == "paper"
        assert "other panels are not run: MLDoc" in lab.notice()
    monkeypatch.setenv("XLREPRO_WIKI_DIR", str(FIX / "wiki"))
    lab, folder = chapter_lab("paper", languages=["en", "fr"], chapter="q3_language_id")
    assert isinstance(lab, LanguageIdLab) and lab.languages == ["en", "fr"] and results_profile(folder) == "paper"
    assert PAPER_MISSING == {}  # every chapter has a paper path


@pytest.mark.parametrize("chapter", ["q2_layers", "q4_subword_overlap"])
def test_cli_stops_xnli_chapters_without_their_data(capsys, paper_env, monkeypatch, chapter):
    monkeypatch.setattr("papermill.execute_notebook", lambda *a, **k: pytest.fail("a kernel started"))
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert main(["run", f"wu2019/{chapter}", "-p", "profile", "paper"]) == 2
    assert "fine-tuning mBERT on MultiNLI" in capsys.readouterr().err  # full size on a CPU
    monkeypatch.setenv("XLREPRO_CACHE", str(paper_env / "cache"))
    monkeypatch.delenv("XLREPRO_XNLI_DIR")
    assert main(["run", f"wu2019/{chapter}", "-p", "profile", "paper", "-p", "max_train_pairs", "4"]) == 2
    err = capsys.readouterr().err
    assert "set XLREPRO_XNLI_DIR" in err and err.count("\n") == 1


def test_cli_stops_q3_without_wikipedia_in_one_line(capsys, paper_env, monkeypatch):
    monkeypatch.setattr("papermill.execute_notebook", lambda *a, **k: pytest.fail("a kernel started"))
    monkeypatch.setenv("XLREPRO_CACHE", str(paper_env / "cache"))
    monkeypatch.delenv("XLREPRO_WIKI_DIR", raising=False)
    assert main(["run", "wu2019/q3_language_id", "-p", "profile", "paper"]) == 2
    err = capsys.readouterr().err
    assert "XLREPRO_WIKI_DIR unset" in err and err.count("\n") == 1
    monkeypatch.setenv("XLREPRO_WIKI_DIR", str(FIX / "wiki"))
    assert main(["run", "wu2019/q3_language_id", "-p", "profile", "paper", "-p", "languages", "['en', 'xx']"]) == 2
    assert "valid choices: de, en, fr" in capsys.readouterr().err


def test_cli_stops_q1_without_its_data_and_guards_the_full_run_on_a_cpu(capsys, paper_env, monkeypatch):
    monkeypatch.setattr("papermill.execute_notebook", lambda *a, **k: pytest.fail("a kernel started"))
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert main(["run", "wu2019/q1_zero_shot", "-p", "profile", "paper"]) == 2
    assert "fine-tuning mBERT on MultiNLI" in capsys.readouterr().err
    monkeypatch.setenv("XLREPRO_CACHE", str(paper_env / "cache"))
    monkeypatch.delenv("XLREPRO_XNLI_DIR")
    assert main(["run", "wu2019/q1_zero_shot", "-p", "profile", "paper", "-p", "max_train_pairs", "4"]) == 2
    assert "set XLREPRO_XNLI_DIR" in capsys.readouterr().err


@pytest.mark.slow
def test_q1_chapter_runs_in_the_paper_profile(paper_env, capsys):
    """The chapter itself under -p profile paper (a kernel: about half a minute)."""
    assert main(["run", "wu2019/q1_zero_shot", "-p", "profile", "paper", "-p", "max_train_pairs", "9", "-p", "epochs",
                 "1", "-p", "seeds", "[0]", "-p", "languages", "['de', 'fr']"]) == 0
    executed = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert "Paper profile." in executed.read_text()
    results = executed.parent / "results"  # `xlrepro run`'s exploratory folder, never book/
    assert len(pd.read_csv(results / "zero_shot.csv")) == 3 * 2 + 3  # zero-shot (en de fr x 2 metrics), majority
    assert results_profile(results) == "paper"
    runs = paper_env / "runs" / "wu2019" / "paper" / "tiny_bert-tr9-teNone-e1" / "finetune" / "en" / "all"
    assert len(list(runs.glob("*.json"))) == 3  # the learning-rate grid at seed 0


# --- Table 4 (NER) ----------------------------------------------------------------------------------------------

def test_table4_writes_its_files(paper_env):
    from xlrepro.papers.wu2019.ner import NerLab, resolve_ner_paths, table4

    paths = resolve_ner_paths(FIX / "tiny_bert", FIX / "conll")
    lab = NerLab(paths, epochs=1)
    # IOB1 of eng.train rewritten as IOB2: every entity opens with B-; I-LOC never continues an entity there
    assert lab.tags == ("O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-ORG", "I-PER")
    assert lab.sentences("eng.train")[2] == (("The", "European", "Commission", "said", "."),
                                             ("O", "B-ORG", "I-ORG", "O", "O"))
    assert lab.sentences("deu.testb")[0][0][1] == "Europäische"  # read as ISO-8859-1
    folder = table4(paths, seeds=[0], epochs=1)
    assert sorted(p.name for p in folder.iterdir()) == ["ner.csv", "ner_selection.csv", "profile.json"]
    ner = pd.read_csv(folder / "ner.csv")
    assert ner["language"].tolist() == ["en", "de", "es", "nl"] and set(ner["metric"]) == {"f1"}
    assert ner["value"].between(0, 1).all()
    assert pd.read_csv(folder / "ner_selection.csv")["lr"].tolist() == [2e-5, 3e-5, 5e-5]
    assert json.loads((folder / "profile.json").read_text())["ner"] == "tests/fixtures/paper/conll"  # no machine path


def test_ner_encoding_labels_first_pieces_only(paper_env):
    from xlrepro.papers.wu2019.ner import NerLab, resolve_ner_paths
    from xlrepro.training.token_finetune import IGNORE

    lab = NerLab(resolve_ner_paths(FIX / "tiny_bert", FIX / "conll"), languages=["es"], epochs=1)
    data, kept = lab.encode("esp.testb", max_length=128)
    assert kept == [9, 5]  # every word of both sentences
    first = data.labels[0][data.labels[0] != IGNORE]
    assert [lab.tags[i] for i in first] == ["B-LOC", "O", "O", "O", "O", "O", "B-ORG", "O", "O"]  # I-LOC unseen: O
    short, kept = lab.encode("esp.testb", max_length=5)  # [CLS] + 3 pieces + [SEP]
    assert all(len(x) <= 5 for x in short.ids) and kept[1] <= 3


def test_ner_resources_missing_name_the_files(monkeypatch, tmp_path):
    from xlrepro.papers.wu2019.ner import resolve_ner_paths

    monkeypatch.delenv("XLREPRO_CONLL_DIR", raising=False)
    with pytest.raises(ConfigError, match="eng.train, eng.testa, esp.testb .*XLREPRO_CONLL_DIR unset"):
        resolve_ner_paths(languages=["es"])
    with pytest.raises(ConfigError, match="valid choices: en, de, es, nl"):
        resolve_ner_paths(FIX / "tiny_bert", FIX / "conll", languages=["zh"])
