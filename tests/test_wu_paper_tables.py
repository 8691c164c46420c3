"""Wu & Dredze's Table 2 (MLDoc, `mldoc.table2`) and Table 6 (UD parsing, `parsing.table6`) in the paper profile, on
CPU against the fixtures of tests/fixtures/paper/ (the tiny BERT stands in for mBERT and learns nothing): the files
each writes, the runs it caches and reuses, its errors, and the numbers that do not depend on training (the
attachment scores of hand-made parses, the encoder inputs)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from xlrepro.config import ConfigError

FIX = Path(__file__).resolve().parent / "fixtures" / "paper"


@pytest.fixture
def paper_env(paper_env_of):
    return paper_env_of("XLREPRO_MBERT", "XLREPRO_MLDOC_DIR", "XLREPRO_UD_DIR")


def _boom(*args, **kwargs):
    raise AssertionError("a cached run was trained again")


# --- Table 2: MLDoc ------------------------------------------------------------------------------------------------

def test_table2_writes_its_files_and_reuses_its_runs(paper_env, monkeypatch):
    from xlrepro.papers.wu2019 import mldoc
    from xlrepro.papers.wu2019.mldoc import resolve_mldoc_paths, table2

    folder = table2(resolve_mldoc_paths(languages=["de"]), languages=["de"], seeds=[0], epochs=1)
    assert sorted(p.name for p in folder.iterdir()) == ["profile.json", "table2.csv", "table2_selection.csv"]
    table = pd.read_csv(folder / "table2.csv")
    assert table.columns.tolist() == ["experiment", "seed", "language", "metric", "value"]
    assert table[["experiment", "seed", "language", "metric"]].values.tolist() == [
        ["zero-shot", 0, "en", "accuracy"], ["zero-shot", 0, "de", "accuracy"]]
    # 4 English and 3 German test documents: multiples of 1/4 and 1/3
    en, de = table["value"]
    assert en * 4 == pytest.approx(round(en * 4)) and de * 3 == pytest.approx(round(de * 3))
    selection = pd.read_csv(folder / "table2_selection.csv")
    assert selection.columns.tolist() == ["lr", "dev_accuracy"] and selection["lr"].tolist() == [2e-5, 3e-5, 5e-5]
    assert json.loads((folder / "profile.json").read_text())["mldoc"] == "tests/fixtures/paper/mldoc"
    runs = sorted((folder.parent / "mldoc" / "en").glob("*.json"))
    assert len(runs) == 3  # seed 0 at each rate of the grid; the selected one is reused for the table
    monkeypatch.setattr(mldoc, "finetune", _boom)  # a second call reads every run from the cache
    again = table2(resolve_mldoc_paths(languages=["de"]), languages=["de"], seeds=[0], epochs=1)
    assert pd.read_csv(again / "table2.csv").equals(table)
    assert sorted((folder.parent / "mldoc" / "en").glob("*.json")) == runs


def test_mldoc_reads_the_first_two_sentences_as_a_pair(paper_env):
    from xlrepro.papers.wu2019.mldoc import MldocLab, first_two_sentences, resolve_mldoc_paths

    assert first_two_sentences("Rates rose.  Markets  fell. Gold was flat.") == ("Rates rose.", "Markets fell.")
    assert first_two_sentences("The carmaker opened a factory.") == ("The carmaker opened a factory.", "")
    lab = MldocLab(resolve_mldoc_paths(languages=["de"]), languages=["de"])
    dev = lab.documents("en", "dev")
    assert dev.loc[0, ["first", "second"]].tolist() == ["The central bank raised interest rates.",
                                                        "Economists had expected the move."]
    assert dev["label"].tolist() == [1, 0, 3, 2]  # ECAT CCAT MCAT GCAT
    data = lab.encode("en", "dev", 128)
    cls, sep = lab.tokenizer.cls_token_id, lab.tokenizer.sep_token_id
    pair, single = data.ids[0], data.ids[1]  # two sentences; one ("The carmaker opened a new factory in Ohio.")
    assert pair[0] == cls and (pair == sep).sum() == 2 and set(data.types[0]) == {0, 1}
    assert single[0] == cls and (single == sep).sum() == 1 and set(data.types[1]) == {0}
    assert all(len(ids) <= 8 for ids in lab.encode("en", "dev", 8).ids)  # cut at the recipe's length
    with pytest.raises(ConfigError, match="English only"):
        lab.documents("de", "train")


def test_mldoc_arguments_are_checked(paper_env, monkeypatch, tmp_path):
    from xlrepro.papers.wu2019.mldoc import MldocLab, resolve_mldoc_paths, table2

    with pytest.raises(ConfigError, match="valid choices: en, de, es, fr, it, ja, ru, zh"):
        resolve_mldoc_paths(languages=["nl"])
    with pytest.raises(ConfigError, match="valid choices: 1000, 2000, 5000, 10000"):
        resolve_mldoc_paths(train_size=500)
    with pytest.raises(ConfigError, match=r"french.test \(not in .*mldoc\)"):
        resolve_mldoc_paths(languages=["fr"])
    with pytest.raises(ConfigError, match=r"files english.train.2000 \(not in"):
        resolve_mldoc_paths(languages=["de"], train_size=2000)
    paths = resolve_mldoc_paths(languages=["de"])
    with pytest.raises(ConfigError, match="max_train_sentences must be None or a positive integer"):
        MldocLab(paths, max_train_docs=0)
    with pytest.raises(ConfigError, match="seeds must be a non-empty list"):
        table2(paths, languages=["de"], seeds=[], epochs=1)
    monkeypatch.delenv("XLREPRO_MLDOC_DIR")
    monkeypatch.setenv("XLREPRO_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ConfigError, match="english.train.1000.*XLREPRO_MLDOC_DIR unset") as err:
        resolve_mldoc_paths(languages=["de"])
    assert "\n" not in str(err.value)


# --- Table 6: dependency parsing -----------------------------------------------------------------------------------

def test_attachment_scores_by_hand():
    from xlrepro.papers.wu2019.parsing import attachment_scores

    # one sentence: gold heads [2, 0, 2], predicted [2, 0, 1]: the third word's head is wrong
    one = dict(gold_heads=[[2, 0, 2]], gold_rels=[["nsubj:pass", "root", "obj"]], pred_heads=[[2, 0, 1]],
               pred_rels=[["nsubj", "root", "obj"]], upos=[["NOUN", "VERB", "NOUN"]])
    assert attachment_scores(**one) == pytest.approx((2 / 3, 2 / 3))  # nsubj:pass is scored as nsubj
    # and a second whose third word is punctuation (not scored) and whose first word has the wrong relation
    two = {k: v + [w] for (k, v), w in zip(one.items(), ([2, 0, 2], ["nsubj", "root", "punct"], [2, 0, 1],
                                                            ["obj", "root", "punct"], ["PRON", "VERB", "PUNCT"]))}
    assert attachment_scores(**two) == pytest.approx((4 / 5, 3 / 5))
    # a word without a prediction (cut off) counts as wrong; a symbol is not scored either
    assert attachment_scores([[2, 0, 2]], [["det", "root", "obj"]], [[2, 0]], [["det", "root"]],
                             [["DET", "NOUN", "VERB"]]) == pytest.approx((2 / 3, 2 / 3))
    assert attachment_scores([[2, 0]], [["dep", "root"]], [[0, 0]], [["dep", "root"]],
                             [["SYM", "NOUN"]]) == pytest.approx((1.0, 1.0))
    with pytest.raises(ConfigError, match="no word to score"):
        attachment_scores([[0]], [["punct"]], [[0]], [["punct"]], [["PUNCT"]])


def test_encode_trees_keeps_first_pieces_and_drops_cut_heads(paper_env):
    from xlrepro.papers.wu2019.parsing import RELATIONS, ParsingLab, encode_trees, resolve_parsing_paths

    lab = ParsingLab(resolve_parsing_paths(languages=["de"]), languages=["de"])
    [cat] = lab.sentences("en", "train")[:1]  # The cat sleeps .  (heads 2 3 0 3: det nsubj root punct)
    full = encode_trees(lab.tokenizer, [cat], 128)
    assert full.starts[0][0] == 1 and len(full.starts[0]) == 4 and np.all(np.diff(full.starts[0]) > 0)
    assert full.heads[0].tolist() == [2, 3, 0, 3]
    assert [RELATIONS[i] for i in full.rels[0]] == ["det", "nsubj", "root", "punct"]
    cut = encode_trees(lab.tokenizer, [cat], 3)  # [CLS] one piece [SEP]: "The" alone, its head (cat) cut off
    assert cut.starts[0].tolist() == [1] and cut.heads[0].tolist() == [-100] and cut.rels[0].tolist() == [-100]
    two_words = encode_trees(lab.tokenizer, [cat], 128, max_words=2)  # The cat: cat's head (sleeps) cut off
    assert two_words.heads[0].tolist() == [2, -100]


def test_biaffine_parser_masks_padding_and_self_loops(paper_env):
    from xlrepro.papers.wu2019.parsing import (RELATIONS, BiaffineParser, ParsingLab, _batch, encode_trees,
                                               resolve_parsing_paths)

    lab = ParsingLab(resolve_parsing_paths(languages=["de"]), languages=["de"])
    torch.manual_seed(0)
    model = BiaffineParser(lab.encoder, len(RELATIONS), arc_dim=8, rel_dim=4).eval()
    with torch.no_grad():  # non-zero biaffine weights, so that the scores differ
        for p in (model.arc_weight, model.arc_bias, model.rel_weight):
            p.normal_()
    sents = lab.sentences("en", "train")[:2]  # 4 and 5 words
    ids, mask, starts, word_mask, heads, _ = _batch(encode_trees(lab.tokenizer, sents, 128), [0, 1], "cpu", 0)
    with torch.no_grad():
        arc, rel = model(ids, mask, starts, word_mask)
    assert arc.shape == (2, 5, 6) and rel.shape == (2, 5, len(RELATIONS))
    low = torch.finfo(arc.dtype).min
    for i in range(5):
        assert arc[1, i, i + 1] == low  # a word never heads itself
    assert (arc[0, :, 5] == low).all()  # the first sentence has 4 words: node 5 is padding
    assert (arc[:, :, 0] > low).all()  # the root is a head for every word
    best = arc.argmax(-1)
    assert ((best >= 0) & (best <= torch.tensor([[4], [5]]))).all()


def test_table6_writes_its_files_and_reuses_its_runs(paper_env, monkeypatch):
    from xlrepro.papers.wu2019 import parsing
    from xlrepro.papers.wu2019.parsing import resolve_parsing_paths, table6

    folder = table6(resolve_parsing_paths(languages=["de", "es"]), languages=["de", "es"], seeds=[0], epochs=1)
    assert sorted(p.name for p in folder.iterdir()) == ["profile.json", "table6.csv", "table6_selection.csv"]
    table = pd.read_csv(folder / "table6.csv")
    assert table.columns.tolist() == ["experiment", "seed", "language", "metric", "value"]
    assert table[["language", "metric"]].values.tolist() == [["en", "uas"], ["en", "las"], ["de", "uas"],
                                                             ["de", "las"], ["es", "uas"], ["es", "las"]]
    assert set(table["experiment"]) == {"zero-shot"} and table["value"].between(0, 1).all()
    las, uas = table[table.metric == "las"]["value"].to_numpy(), table[table.metric == "uas"]["value"].to_numpy()
    assert (las <= uas).all()
    selection = pd.read_csv(folder / "table6_selection.csv")
    assert selection.columns.tolist() == ["lr", "dev_las"] and selection["lr"].tolist() == [2e-5, 3e-5, 5e-5]
    assert json.loads((folder / "profile.json").read_text())["parsing"] == "tests/fixtures/paper/ud"
    runs = sorted((folder.parent / "parsing" / "en").glob("*.json"))
    assert len(runs) == 3
    assert set(json.loads(runs[0].read_text())["test"]["de"]) == {"uas", "las"}
    monkeypatch.setattr(parsing, "finetune_parser", _boom)
    again = table6(resolve_parsing_paths(languages=["de", "es"]), languages=["de", "es"], seeds=[0], epochs=1)
    assert pd.read_csv(again / "table6.csv").equals(table)
    assert sorted((folder.parent / "parsing" / "en").glob("*.json")) == runs


def test_parsing_arguments_are_checked(paper_env, monkeypatch, tmp_path):
    from xlrepro.papers.wu2019.parsing import ParsingLab, resolve_parsing_paths, table6

    with pytest.raises(ConfigError, match="unknown parsing language 'el'; valid choices: en, ar, bg, ca, cs"):
        resolve_parsing_paths(languages=["el"])
    with pytest.raises(ConfigError, match=r"UD_French-GSD/fr_gsd-ud-test.conllu \(not in"):
        resolve_parsing_paths(languages=["fr"])
    paths = resolve_parsing_paths(languages=["de"])
    with pytest.raises(ConfigError, match="valid choices: en, ar, bg"):
        ParsingLab(paths, languages=["xx"])
    with pytest.raises(ConfigError, match="epochs must be None or a positive integer"):
        table6(paths, languages=["de"], epochs=0)
    monkeypatch.delenv("XLREPRO_UD_DIR")
    monkeypatch.setenv("XLREPRO_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ConfigError, match="en_ewt-ud-train.conllu.*XLREPRO_UD_DIR unset"):
        resolve_parsing_paths(languages=["de"])


def test_both_tables_are_prepared_with_their_resources(capsys):
    from xlrepro.cli import main
    from xlrepro.resources.registry import resources_for

    assert resources_for(["wu2019/mldoc.table2"]) == ["mbert", "mldoc"]
    assert resources_for(["wu2019/parsing.table6"]) == ["mbert", "ud"]
    assert main(["prepare", "--profile", "paper", "--only", "wu2019/parsing.table6", "--dry-run"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()[:2]] == ["mbert", "ud"]
