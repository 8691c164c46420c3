"""knn-replace (Dufter & Schütze model 30): the experiment's declaration, its run key, and the neighbour table."""
import json

import numpy as np
import pytest

from xlrepro.config import ConfigError
from xlrepro.papers.dufter2020 import grid
from xlrepro.papers.dufter2020.config import Experiment, load_chapter


def test_model_30_is_declared_with_the_papers_probabilities():
    ch = load_chapter("dufter2020")
    e = ch.experiment("30")
    assert e.knn_replace and e.knn_k == 1 and e.curve
    assert e.mask_probs == (0.5, 0.1, 0.1, 0.3)
    assert ch.experiment("0").mask_probs == (0.8, 0.1, 0.1, 0.0)
    assert ch.experiment("4").mask_probs == (0.8, 0.2, 0.0, 0.0)
    assert "30" in ch.tables["table1"] and ch.tables["fig7"] == ("0", "30")
    assert len(ch.tables["table1"]) == 16  # the paper's Table 1 has 16 model IDs


def test_knn_fields_enter_the_key_only_when_set():
    ch = load_chapter("dufter2020")
    zero = grid.grid_members(ch, ["0"], [0])[0].config
    assert "knn_replace" not in zero["experiment"] and "knn" not in zero  # earlier runs keep their keys
    thirty = grid.grid_members(ch, ["30"], [0])[0].config
    assert thirty["experiment"]["knn_replace"] is True
    assert thirty["knn"]["mapping"]["tool"] == "vecmap-unsupervised" and thirty["knn"]["embeddings"]["dim"] == 300
    smoke = grid.grid_members(ch, ["30"], [0], max_sentences=8)[0].config
    assert smoke["knn"]["embeddings"]["dim"] != 300  # a smoke table is keyed apart


def test_bad_knn_settings_are_refused():
    with pytest.raises(ConfigError, match="separate masking schemes"):
        Experiment(id="x", description="x", knn_replace=True, no_random=True)
    with pytest.raises(ConfigError, match="positive integer"):
        Experiment(id="x", description="x", knn_replace=True, knn_k=0)


def test_knn_models_get_their_own_stack():
    ch = load_chapter("dufter2020")
    stacks = grid.plan_stacks(grid.grid_members(ch, ["0", "1", "30"], [0, 42]))
    assert sorted(sorted(m.exp.id for m in s) for s in stacks) == [["0", "0", "1", "1"], ["30", "30"]]


@pytest.mark.slow
def test_smoke_table_maps_pieces_to_the_other_language_and_model_30_trains(tmp_path, lab):
    """The shrunk table (built on the first 32 sentences) and a two-step run of model 30 on the CPU."""
    from xlrepro.papers.dufter2020.knn import knn_report, load_neighbours
    from xlrepro.papers.dufter2020.lab import load_lab

    fe = load_lab("lab").fe
    table = load_neighbours("lab", 1, max_sentences=32)
    assert table.shape == (fe.vocab_size, 1)
    lab = load_lab("lab").subset(32)
    seen = np.setdiff1d(np.unique(np.concatenate(lab.train_pieces)), fe.special_ids)  # a smoke table's pieces
    assert (table[seen, 0] >= fe.shift).all()                      # English pieces -> Fake-English
    assert (table[seen + fe.shift, 0] < fe.shift).all()            # Fake-English pieces -> English
    assert (table[fe.special_ids, 0] == fe.special_ids).all()      # specials stay
    unseen = np.setdiff1d(np.arange(fe.shift), np.concatenate([seen, fe.special_ids]))
    assert (table[unseen, 0] == unseen).all()                      # pieces without a vector stay themselves
    assert knn_report("lab", 1, max_sentences=32)["report"]["pieces"] == len(seen)
    assert grid.run_grid("dufter2020", ["30"], [0], epochs=1, max_sentences=32, batch_size=8, device="cpu",
                         progress=False, root=tmp_path)
    metrics = json.loads(next(tmp_path.glob("30/0/*/metrics.json")).read_text())["metrics"]
    assert 0 <= metrics["mu"] <= 1


def test_table_is_checked_against_the_caches_vocabulary(lab):
    """The table records the vocabulary it was built on; a table built on another one is refused, naming both."""
    from xlrepro.papers.dufter2020.knn import knn_folder, load_neighbours
    from xlrepro.papers.dufter2020.lab import lab_cache, load_lab, prepare_lab
    from xlrepro.tokenization import vocab_fingerprint

    fe = load_lab("lab").fe
    load_neighbours("lab", 1, max_sentences=32)
    manifest = knn_folder("lab", 1, max_sentences=32) / "knn.json"
    saved = json.loads(manifest.read_text())
    assert saved["vocabulary"] == vocab_fingerprint(fe.tokenizer)
    try:
        manifest.write_text(json.dumps({**saved, "vocabulary": "0123456789abcdef"}))
        with pytest.raises(RuntimeError, match=f"0123456789abcdef.*{saved['vocabulary']}"):
            load_neighbours("lab", 1, max_sentences=32)
        manifest.write_text(json.dumps({k: v for k, v in saved.items() if k != "vocabulary"}))
        assert load_neighbours("lab", 1, max_sentences=32).shape == (fe.vocab_size, 1)  # an older table: unchecked
    finally:
        manifest.write_text(json.dumps(saved))
    # preparing again keeps the prepared vocabulary (the one the table and the runs were made with)
    tokenizer = lab_cache("lab") / "tokenizer.json"
    before = tokenizer.stat().st_mtime_ns
    prepare_lab("lab")
    assert tokenizer.stat().st_mtime_ns == before
