"""Wu & Dredze beyond Table 3 in the paper profile, on CPU against the fixtures of tests/fixtures/paper/ (the tiny
BERT stands in for mBERT): Figure 1's frozen layers on XNLI (`xnli.figure1`), Table 5's POS tagging on UD
(`pos.table5`) and §6's language identification per layer on Wikipedia text (`language_id.language_id`). The
tiny model learns nothing; the tests check the files each writes, the runs it caches, its errors, and the numbers
that do not depend on training."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from xlrepro.config import ConfigError

FIX = Path(__file__).resolve().parent / "fixtures" / "paper"


@pytest.fixture
def paper_env(paper_env_of):
    return paper_env_of("XLREPRO_MBERT", "XLREPRO_XNLI_DIR", "XLREPRO_MULTINLI_DIR", "XLREPRO_UD_DIR", "XLREPRO_WIKI_DIR")


# --- Figure 1: frozen layers on XNLI -----------------------------------------------------------------------------

def test_figure1_runs_each_frozen_depth_and_writes_frozen_csv(paper_env):
    from xlrepro.papers.wu2019.xnli import XnliLab, figure1, resolve_paths

    lab = XnliLab(resolve_paths(), languages=["de"], max_train_pairs=4, epochs=1)
    assert lab.freeze_levels() == [0, 1, 2]  # 0, 1/4 (0), 1/2, 3/4 (1.5 -> 2) of 2 layers: the paper's 0, 3, 6, 9 of 12
    folder = figure1(resolve_paths(), languages=["de"], seeds=[0], max_train_pairs=4, epochs=1)
    assert sorted(p.name for p in folder.iterdir()) == ["frozen.csv", "profile.json", "selection.csv"]
    frozen = pd.read_csv(folder / "frozen.csv")
    assert frozen["experiment"].drop_duplicates().tolist() == ["all", "freeze-0", "freeze-1", "freeze-2",
                                                           "feature-based"]
    assert len(frozen) == 5 * 2 * 2  # experiments x languages (en, de) x metrics
    assert frozen["value"].between(0, 1).all()
    modes = sorted(p.name for p in (lab.root / "finetune" / "en").iterdir())
    assert modes == ["all", "feature-based", "freeze-0", "freeze-1", "freeze-2"]
    # the feature-based run at the plan's feature_lr, the others at the selected rate of the paper's grid
    [feature] = (lab.root / "finetune" / "en" / "feature-based").glob("*.json")
    assert json.loads(feature.read_text())["config"]["lr"] == 1e-3


def test_frozen_depths_are_checked(paper_env):
    from xlrepro.papers.wu2019.xnli import XnliLab, resolve_paths

    lab = XnliLab(resolve_paths(), languages=["de"], max_train_pairs=4, epochs=1)
    for bad in (3, -2, 1.5):
        with pytest.raises(ConfigError, match=r"-1 \(fine-tune all\) or 0..2"):
            lab.frozen([0], levels=[bad])


# --- Table 5: POS on Universal Dependencies ------------------------------------------------------------------------

def test_table5_writes_its_files(paper_env):
    from xlrepro.papers.wu2019.pos import resolve_pos_paths, table5

    folder = table5(resolve_pos_paths(languages=["de", "es"]), languages=["de", "es"], seeds=[0], epochs=1)
    assert sorted(p.name for p in folder.iterdir()) == ["pos.csv", "pos_selection.csv", "profile.json"]
    pos = pd.read_csv(folder / "pos.csv")
    assert pos["language"].tolist() == ["en", "de", "es"] and set(pos["metric"]) == {"accuracy"}
    assert pos["value"].between(0, 1).all()
    assert pd.read_csv(folder / "pos_selection.csv")["lr"].tolist() == [2e-5, 3e-5, 5e-5]
    assert json.loads((folder / "profile.json").read_text())["pos"] == "tests/fixtures/paper/ud"
    assert len(list((folder.parent / "pos" / "en").glob("*.json"))) == 3  # seed 0 at each rate: seed 0 is reused


def test_pos_accuracy_counts_words_and_cut_words_as_wrong(paper_env, monkeypatch):
    from xlrepro.papers.wu2019 import pos
    from xlrepro.papers.wu2019.pos import UPOS, PosLab, resolve_pos_paths

    lab = PosLab(resolve_pos_paths(languages=["de"]), languages=["de"])
    assert lab.sentences("de", "test")[1] == (("Das", "Haus", "ist", "alt", "."), ("DET", "NOUN", "AUX", "ADJ", "PUNCT"))
    noun = UPOS.index("NOUN")
    monkeypatch.setattr(pos, "predict_tokens", lambda model, data, *a, **k: [
        np.full(int((lab_row != -100).sum()), noun) for lab_row in data.labels])
    assert lab.accuracy(None, "de", "test") == pytest.approx(2 / 9)  # Katze, Haus: 2 nouns of 9 words
    monkeypatch.setattr(lab.encoder.config, "max_position_embeddings", 3)  # [CLS] + 1 piece + [SEP]: the first word
    assert lab.accuracy(None, "de", "test") == 0  # Die, Das (determiners) guessed NOUN; the nouns cut: wrong


def test_pos_resources_missing_name_the_files(monkeypatch, tmp_path):
    from xlrepro.papers.wu2019.pos import resolve_pos_paths

    monkeypatch.delenv("XLREPRO_UD_DIR", raising=False)
    monkeypatch.setenv("XLREPRO_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ConfigError, match="en_ewt-ud-train.conllu.*XLREPRO_UD_DIR unset") as err:
        resolve_pos_paths(languages=["de"])
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="UD_Bulgarian-BTB/bg_btb-ud-test.conllu .*not in"):
        resolve_pos_paths(FIX / "tiny_bert", FIX / "ud", languages=["bg"])
    with pytest.raises(ConfigError, match="valid choices: en, bg"):
        resolve_pos_paths(FIX / "tiny_bert", FIX / "ud", languages=["zh"])


# --- §6: language identification per layer on Wikipedia ------------------------------------------------------------

def test_language_id_writes_one_accuracy_per_layer_and_seed(paper_env):
    from xlrepro.papers.wu2019.language_id import language_id, resolve_wiki_paths

    paths = resolve_wiki_paths()
    assert paths.languages == ("de", "en", "fr")  # the language folders of the Wikipedia folder
    folder = language_id(paths, train_per_language=2, test_per_language=2, seeds=[0, 1])
    assert sorted(p.name for p in folder.iterdir()) == ["language_id.csv", "profile.json"]
    probe = pd.read_csv(folder / "language_id.csv")
    assert probe[["layer", "seed"]].values.tolist() == [[0, 0], [1, 0], [2, 0], [0, 1], [1, 1], [2, 1]]
    assert set(probe["experiment"]) == {"language-id"} and set(probe["metric"]) == {"accuracy"}
    # 6 test paragraphs (2 a language): every accuracy is a multiple of 1/6
    assert np.allclose(probe["value"] * 6, np.round(probe["value"] * 6))
    assert json.loads((folder / "profile.json").read_text())["language_id"] == "tests/fixtures/paper/wiki"


def test_language_id_samples_disjoint_paragraphs(paper_env):
    from xlrepro.papers.wu2019.language_id import LanguageIdLab, paragraphs, resolve_wiki_paths

    every = ["Anarchism is a political philosophy and movement.", "It is sceptical of authority.",
             "Humans lived in societies without formal hierarchies.", "Autism is a neurodevelopmental disorder.",
             "The cat is a domestic animal.", "The cat sleeps in the house.",
             "The house is old and the cat drinks water."]
    assert paragraphs(FIX / "wiki" / "en", 10) == every  # body lines in file order (wiki_00, wiki_01), no titles
    assert paragraphs(FIX / "wiki" / "en", 2) == every[:2]
    lab = LanguageIdLab(resolve_wiki_paths(languages=["en", "de"]))
    train, test = lab.sample("en", "train", 5), lab.sample("en", "test", 2)
    assert sorted(train + test) == sorted(every)  # a shuffle of the 7, no paragraph in both
    assert lab.sample("en", "train", 5) == train  # the same sample again
    with pytest.raises(ConfigError, match="gives 7 paragraphs .* 5 train \\+ 3 test"):
        lab.sample("en", "test", 3)
    with pytest.raises(ConfigError, match="valid choices: en, de"):
        lab.sample("fr", "train", 1)


def test_wiki_paths_errors(monkeypatch, tmp_path):
    from xlrepro.papers.wu2019.language_id import resolve_wiki_paths

    monkeypatch.delenv("XLREPRO_WIKI_DIR", raising=False)
    monkeypatch.setenv("XLREPRO_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ConfigError, match="XLREPRO_WIKI_DIR unset"):
        resolve_wiki_paths()
    with pytest.raises(ConfigError, match="at least two languages"):
        resolve_wiki_paths(FIX / "tiny_bert", FIX / "wiki", languages=["en"])


# --- the chapters under -p profile paper (a kernel each: about half a minute) --------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("chapter, artifact, extra", [
    ("q2_layers", "frozen.csv", ["-p", "max_train_pairs", "4", "-p", "epochs", "1", "-p", "languages", "['de']"]),
    ("q3_language_id", "language_id.csv", ["-p", "train_per_language", "2", "-p", "test_per_language", "2"]),
    ("q4_subword_overlap", "overlap.csv", ["-p", "max_train_pairs", "4", "-p", "epochs", "1", "-p", "languages",
                                           "['de', 'es', 'fr']"]),  # a correlation needs 3 target languages
])
def test_chapter_runs_in_the_paper_profile(paper_env, capsys, chapter, artifact, extra):
    from xlrepro.cli import main
    from xlrepro.papers.wu2019.constants import results_profile

    assert main(["run", f"wu2019/{chapter}", "-p", "profile", "paper", "-p", "seeds", "[0]", *extra]) == 0
    executed = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert "Paper profile." in executed.read_text()
    results = executed.parent / "results"  # `xlrepro run`'s exploratory folder, never book/
    assert (results / artifact).is_file() and results_profile(results) == "paper"
