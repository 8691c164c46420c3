"""The stacked evaluation (all models of a stack in one forward) gives each model's `evaluate` numbers.

Three experiments whose inputs differ (lang-pos: positions and token types; shift-special: Fake-English specials and
[MASK]; inv-order: reversed Fake-English and its gold alignment) in one stack of tiny BERTs, lightly trained so the
metrics are not at chance. The reference exports each model as a Hugging Face model and runs `evaluate`.

Tolerance: on the CPU both paths run in float32 and compute the same functions, with a different summation order
(batched matrix products, per-model stacks, other padded widths). Hidden states then agree to ~1e-6 relative;
perplexity, a mean of ~10^2 log-probabilities taken through exp, to rel 1e-5. Retrieval, translation and alignment
are counts of argmax hits, equal unless two similarities tie within ~1e-6, which these tiny sets do not: they must
be equal (abs 1e-12, i.e. as fractions of the same counts).
"""
import math

import numpy as np
import pytest
import torch

from xlrepro.papers.dufter2020.config import load_chapter
from xlrepro.papers.dufter2020.lab import load_lab
from xlrepro.papers.dufter2020.multilinguality import (EvalSets, _inputs, evaluate, evaluate_stack, mlm_perplexity,
                                                       mask_ids_for, perplexity_masks)
from xlrepro.papers.dufter2020.transforms import build_bilingual
from xlrepro.config import ModelSize
from xlrepro.engine.models import init_model
from xlrepro.engine.fused_bert import stacked_hidden_states
from xlrepro.engine.stacked import ModelStack, OptimConfig, select_masked

TINY = ModelSize("tiny", 16, 8, 1, 32, 1e-2)  # 8 layers: the paper's layer 8 is the last one
EXPS = ("1", "2", "3")  # lang-pos, shift-special, inv-order
BATCH = 16  # evaluate's batch size: it fixes the perplexity masks (drawn per batch)


@pytest.fixture(scope="module")
def trained():
    torch.manual_seed(0)
    ch = load_chapter("dufter2020")
    lab = load_lab("lab").subset(40)
    exps = [ch.experiment(e) for e in EXPS]
    sets = [EvalSets(lab, e, 128) for e in exps]
    models = [init_model(TINY, lab.fe.vocab_size, seed, attn="eager") for seed in (0, 1, 2)]
    stack = ModelStack(models, OptimConfig(1e-2, 0.0, 1e-6, 0, 20, 1.0), torch.device("cpu"), bf16=False,
                       seeds=[0, 1, 2])
    g = torch.Generator().manual_seed(0)
    for _ in range(15):  # a few steps on each model's own experiment, so that the models and metrics differ
        rows = [torch.randint(0, len(s.train), (8,), generator=g).numpy() for s in sets]
        batch = [_inputs(s.train, r, "cpu") for s, r in zip(sets, rows)]
        width = max(b["input_ids"].shape[1] for b in batch)
        pad = lambda t, v: torch.nn.functional.pad(t, (0, width - t.shape[1]), value=v)
        ids = torch.stack([pad(b["input_ids"], lab.fe.pad) for b in batch])
        labels = torch.where(torch.rand(ids.shape, generator=g) < 0.3, ids, -100)
        labels[ids == lab.fe.pad] = -100
        sel_index, sel_labels = select_masked(labels, 40)
        attention = torch.where(ids != lab.fe.pad, 0.0, -1e9)[:, :, None, None, :]
        stack.train_step(ids, attention, torch.stack([pad(b["position_ids"], 0) for b in batch]),
                         torch.stack([pad(b["token_type_ids"], 0) for b in batch]), sel_index, sel_labels)
    return lab, exps, sets, stack


def test_stacked_evaluation_gives_each_models_own_numbers(trained):
    lab, exps, sets, stack = trained
    stacked = evaluate_stack(stack.params, stack.template.config, exps, lab, sets, layers=(0, 8), batch_size=BATCH,
                             rows_per_model=7)  # other chunks than the reference's batches: the masks stay its own
    for i, (exp, s) in enumerate(zip(exps, sets)):
        ref = evaluate(stack.export(i), exp, lab, layers=(0, 8), batch_size=BATCH, device="cpu", sets=s)
        assert set(stacked[i]) == set(ref)
        for k, v in ref.items():
            tol = dict(rel=1e-5) if k.startswith("ppl") else dict(abs=1e-12)
            assert stacked[i][k] == pytest.approx(v, **tol), (exp.id, k)
    # not a vacuous agreement: the models (and experiments) differ, and the metrics are away from their bounds
    ppl = [r["ppl_dev"] for r in stacked]
    assert len({round(p, 3) for p in ppl}) == 3 and all(1 < p < math.inf for p in ppl)
    assert len({r["retr_l8"] for r in stacked} | {r["trans_l8"] for r in stacked}) > 1


def test_a_subset_of_the_stack_and_a_stack_of_one(trained):
    """Curve checkpoints evaluate some models of a stack: their rows of the parameters, same numbers."""
    lab, exps, sets, stack = trained
    both = evaluate_stack(stack.params, stack.template.config, exps, lab, sets, batch_size=BATCH)
    sub = {k: v[[2, 0]] for k, v in stack.params.items()}
    part = evaluate_stack(sub, stack.template.config, [exps[2], exps[0]], lab, [sets[2], sets[0]], batch_size=BATCH)
    for a, b in ((part[0], both[2]), (part[1], both[0])):
        assert a == pytest.approx(b, rel=1e-5)


@pytest.mark.parametrize("attention", ["math", "sdpa"])  # one head: "auto" picks math; BERT-base's 12 heads: SDPA
def test_hidden_states_equal_hugging_faces(trained, attention):
    """Each model's layer-0 and layer-8 states and last layer, from its own inputs, as HF's `hidden_states`."""
    lab, exps, sets, stack = trained
    n = len(sets[0].dev) // 2
    rows = np.r_[0:6, n:n + 6]  # English rows and their Fake-English twins
    inputs = [_inputs(s.dev, rows, "cpu") for s in sets]
    ids = torch.stack([b["input_ids"] for b in inputs])
    hidden, last = stacked_hidden_states(stack.params, stack.template.config, ids, ids != lab.fe.pad,
                                         torch.stack([b["position_ids"] for b in inputs]),
                                         torch.stack([b["token_type_ids"] for b in inputs]), layers=(0, 8),
                                         attention=attention)
    assert last.shape == (3, ids.shape[1] * ids.shape[2], TINY.hidden)
    for i in range(3):
        with torch.no_grad():
            ref = stack.export(i).eval().bert(**inputs[i], output_hidden_states=True).hidden_states
        keep = inputs[i]["attention_mask"].bool()
        for got, want in zip(hidden, (ref[0], ref[8])):
            torch.testing.assert_close(got[i][keep], want[keep], rtol=1e-5, atol=1e-5)
    # the three experiments' inputs differ: positions (lang-pos), ids (shift-special, inv-order)
    positions = torch.stack([b["position_ids"] for b in inputs])
    assert not torch.equal(positions[0], positions[1]) and not torch.equal(ids[0], ids[1])
    assert not torch.equal(ids[1], ids[2]) and not torch.equal(ids[0], ids[2])


def test_perplexity_masks_replay_the_reference_draws(trained):
    """The masks depend on the reference's batches; replayed, they give its perplexity, and another batch size does
    not (so the replay is what makes the two paths agree)."""
    lab, exps, sets, stack = trained
    dev = sets[1].dev
    masks = perplexity_masks(dev, BATCH)
    content = (torch.arange(dev.ids.shape[1])[None] >= 1) & (torch.arange(dev.ids.shape[1])[None]
                                                            < torch.as_tensor(dev.lengths)[:, None] - 1)
    assert not (masks & ~content).any() and 0.08 < masks.sum() / content.sum() < 0.22
    assert not torch.equal(masks, perplexity_masks(dev, BATCH + 1))
    model = stack.export(1).eval()
    ref = mlm_perplexity(model, dev, mask_ids_for(dev, lab, exps[1]), BATCH, "cpu")
    one = {k: v[1:2] for k, v in stack.params.items()}
    got = evaluate_stack(one, stack.template.config, exps[1:2], lab, sets[1:2], batch_size=BATCH)[0]["ppl_dev"]
    other = evaluate_stack(one, stack.template.config, exps[1:2], lab, sets[1:2], batch_size=BATCH + 1)[0]["ppl_dev"]
    assert got == pytest.approx(ref, rel=1e-5) and other != pytest.approx(ref, rel=1e-3)


def test_bad_arguments_are_refused_before_any_work(trained):
    lab, exps, sets, stack = trained
    with pytest.raises(ValueError, match="must agree"):
        evaluate_stack(stack.params, stack.template.config, exps[:2], lab, sets[:2])
    with pytest.raises(ValueError, match="valid layers are 0..8"):
        evaluate_stack(stack.params, stack.template.config, exps, lab, sets, layers=(0, 9))
    ch = load_chapter("dufter2020")
    np_sets = [EvalSets(lab, ch.experiment("0"), 128, build_bilingual(lab.fe, lab.train_pieces[:-1],
                                                                       ch.experiment("0"), 128))] + sets[1:]
    with pytest.raises(ValueError, match="sets of one size"):
        evaluate_stack(stack.params, stack.template.config, [ch.experiment("0")] + exps[1:], lab, np_sets)


def test_the_evaluation_benchmark_reports_both_paths():
    from xlrepro.papers.dufter2020.grid import time_stack_evaluation as time_evaluation
    from xlrepro.config import ConfigError

    with pytest.raises(ConfigError, match="valid choices"):
        time_evaluation(2, experiments=("0", "99"))
    with pytest.raises(ConfigError, match="BERT-small"):
        time_evaluation(2, experiments=("15",))
    r = time_evaluation(2, experiments=("0", "3"), max_sentences=4, device="cpu", repeats=1)
    assert r["per_model_s"] > 0 and r["stacked_s"] > 0 and r["models"] == 2 and r["sentences"] == 4
    assert set(r["max_abs_diff"]) >= {"retr_l8", "ppl_dev", "mu"} and max(r["max_abs_diff"].values()) < 1e-3


def test_the_grid_records_the_same_numbers_either_way(tmp_path):
    """A stack of four (two of them with checkpoint curves) trained twice, evaluated stacked and per model: the same
    metrics at every checkpoint; metrics.json says which evaluation ran; a bad choice fails before any work."""
    import json

    from xlrepro.config import ConfigError
    from xlrepro.papers.dufter2020.grid import grid_members, member_dir, run_grid

    tiny = dict(epochs=1, max_sentences=4, batch_size=4)
    with pytest.raises(ConfigError, match="valid choices are stacked, per-model"):
        run_grid("dufter2020", ["0"], [0], root=tmp_path / "bad", device="cpu", evaluation="fused", **tiny)
    assert not (tmp_path / "bad").exists()
    for how in ("stacked", "per-model"):
        assert run_grid("dufter2020", ["0", "3"], [0, 1], root=tmp_path / how, device="cpu", progress=False,
                        evaluation=how, **tiny)
    members = grid_members(load_chapter("dufter2020"), ["0", "3"], [0, 1], **tiny)
    read = lambda how, m, f: json.loads((member_dir(tmp_path / how, m) / f).read_text())
    for m in members:
        a, b = read("stacked", m, "metrics.json"), read("per-model", m, "metrics.json")
        assert (a["evaluation"], b["evaluation"], a["stack_size"]) == ("stacked", "per-model", 4)
        assert a["metrics"] == pytest.approx(b["metrics"], rel=1e-5)
        if m.exp.curve:  # model 0: checkpoints evaluated as a stack of two
            ca, cb = read("stacked", m, "curve.json"), read("per-model", m, "curve.json")
            assert len(ca) == len(cb) > 2 and all(x == pytest.approx(y, rel=1e-5) for x, y in zip(ca, cb))


def test_the_command_line_evaluates_stacked_unless_told_otherwise():
    from xlrepro.cli import build_parser
    parse = build_parser().parse_args
    assert parse(["train", "dufter2020", "--ids", "0"]).evaluation == "stacked"
    assert parse(["train", "dufter2020", "--ids", "0", "--evaluation", "per-model"]).evaluation == "per-model"
    with pytest.raises(SystemExit):  # argparse names the valid choices
        parse(["train", "dufter2020", "--ids", "0", "--evaluation", "fused"])
