"""The smallest CPU run of each paper's training path, reduced to the numbers it produces ("same numbers").

Each `record_<path>(tmp)` trains at tiny sizes in the folder `tmp` and returns a JSON-able dict of its losses and
metrics and a checksum of its weights. `tests/test_engine_equivalence.py` compares the dict with
`tests/fixtures/engine_equivalence/<path>.json`, recorded before the training loops moved into `xlrepro/engine/`;
moving a loop must leave every number as it was (integers exactly, floats to the CPU's rounding: see `differences`).
To record them again (only when a change is MEANT to change numbers, and say so in the commit):

    XLREPRO_RECORD_EQUIVALENCE=1 OMP_NUM_THREADS=1 python -m pytest tests/test_engine_equivalence.py

Every run is single-threaded CPU float32 (the test suite sets one thread), which is deterministic run to run on one
machine; CPUs of another instruction set may round a sum differently.
"""
from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path

import numpy as np
import torch

FIXTURES = Path(__file__).parent / "fixtures" / "engine_equivalence"


def weights_checksum(state: dict) -> dict[str, float]:
    """Sum and sum of absolute values of every floating-point tensor (float64 sums, names sorted): two runs whose
    weights differ in any element differ here in practice."""
    total = absolute = 0.0
    for k in sorted(state):
        v = state[k]
        if torch.is_tensor(v) and v.is_floating_point():
            total += float(v.double().sum())
            absolute += float(v.double().abs().sum())
    return {"sum": total, "abs_sum": absolute}


# --- mini-mBERT's sampled-language MLM loop (also Liu et al.'s BERTs) -------------------------------------------
def _sampled_rows(vocab: int = 40, sizes=(20, 10, 5), width: int = 16, seed: int = 0):
    """Three "languages" of random sentences: ids [R, W] (padding 0, [CLS] 2, [SEP] 3), lengths [R], starts [3]."""
    rng = np.random.default_rng(seed)
    rows, lengths, starts = [], [], []
    for n in sizes:
        starts.append(len(rows))
        for _ in range(n):
            k = int(rng.integers(4, width + 1))
            row = np.zeros(width, np.int64)
            row[:k] = [2, *rng.integers(5, vocab, k - 2), 3]
            rows.append(row)
            lengths.append(k)
    return torch.as_tensor(np.stack(rows)), torch.as_tensor(lengths), np.array(starts), np.array(sizes)


def record_mini_mbert(tmp: Path) -> dict:
    """`train_sampled_mlm` for 6 steps on hand-made rows, evaluated at steps 0, 3 and 6, run whole and run again
    stopped after its first step and resumed (a resumed run re-seeds its masks, so its numbers are its own)."""
    from xlrepro.config import ModelSize
    from xlrepro.engine.models import init_model
    from xlrepro.engine.pretrain import train_sampled_mlm
    from xlrepro.engine.stacked import OptimConfig

    ids, lengths, starts, sizes = _sampled_rows()
    p = np.array([0.5, 0.3, 0.2])
    size = ModelSize("tiny", 16, 2, 2, 32, 1e-3)
    optim = OptimConfig(lr=1e-3, weight_decay=0.01, eps=1e-6, warmup_steps=2, total_steps=6, max_grad_norm=1.0)
    out = {}
    for name, limits in (("whole", [None]), ("resumed", [0, None])):
        evals = []

        def on_eval(stack, losses, seconds):
            evals.append([stack.step_count, weights_checksum(stack.export(0).state_dict())["abs_sum"]])

        ckpt = tmp / name / "checkpoint.pt"
        ckpt.parent.mkdir(parents=True)
        for limit in limits:
            model = init_model(size, 40, 0, attn="sdpa", positions=16)
            done = train_sampled_mlm(model, optim, torch.device("cpu"), ids, lengths, p, sizes, starts, seed=0, steps=6,
                                     batch_size=8, mask_id=4, vocab_size=40, mlm_probability=0.15, checkpoint=ckpt,
                                     time_limit=limit, t0=time.time(), progress=False, desc=name, loss_every=1,
                                     on_eval=on_eval, eval_every=3)
        stack, losses, _ = done
        out[name] = {"losses": losses, "evals": evals, "weights": weights_checksum(stack.export(0).state_dict())}
    return out


def record_liu2020(tmp: Path) -> dict:
    """Liu et al.'s `pretrain_bert` (mBERT's vocabulary, rows given by hand) for 4 steps of 2 rows of 512."""
    from safetensors.torch import load_file

    from xlrepro.config import ModelSize
    from xlrepro.papers.liu2020.bert import BertRunConfig, pretrain_bert

    ids, lengths, starts, sizes = _sampled_rows(vocab=1000, sizes=(6, 4), width=24)
    config = BertRunConfig(size="small", window=512, model=ModelSize("tiny", 16, 1, 2, 32, 1e-3), steps=4,
                           tokens_per_step=1024)
    out = pretrain_bert(config, root=tmp, progress=False, languages=("en", "fr"),
                        rows=(ids, lengths, np.append(starts, len(ids))), loss_every=1)
    info = json.loads((out / "training.json").read_text())
    return {"losses": info["losses"], "weights": weights_checksum(load_file(str(out / "model.safetensors")))}


# --- Dufter & Schütze: the grid's stacks (StackRun.run) ----------------------------------------------------------
def record_dufter2020_grid(tmp: Path) -> dict:
    """Experiments 0 and 3, seed 0, in one stack: 2 epochs of 24 sentences a language, batch 8 (the grid test's)."""
    from xlrepro.papers.dufter2020.config import load_chapter
    from xlrepro.papers.dufter2020.grid import grid_members, member_dir, run_grid

    tiny = dict(epochs=2, max_sentences=24, batch_size=8)
    assert run_grid("dufter2020", ["0", "3"], [0], root=tmp, device="cpu", progress=False, **tiny)
    ch = load_chapter("dufter2020")
    out = {}
    for m in grid_members(ch, ["0", "3"], [0], **tiny):
        folder = member_dir(tmp, m)
        metrics = json.loads((folder / "metrics.json").read_text())
        out[m.key] = {"steps": metrics["steps"], "metrics": metrics["metrics"]}
        if (folder / "curve.json").exists():
            out[m.key]["curve"] = json.loads((folder / "curve.json").read_text())
    return out


# --- Dufter & Schütze: Table 3 on real languages (Table3Stack.pretrain) ------------------------------------------
def record_dufter2020_table3(tmp: Path) -> dict:
    """The smoke recipe's stack of experiments 3 (inv-order) and 30 (knn-replace), pretrained only, the loss of
    every step. The prepared tokenizers and neighbour table are the fixture's (HF's WordPiece trainer breaks ties
    in an order that varies between runs)."""
    from safetensors.torch import load_file

    from xlrepro.papers.dufter2020 import real_languages as rl
    cfg = rl.load_config(smoke=True)
    prepared, saved = rl.prepared_dir(cfg, True, tmp), FIXTURES / "dufter2020_table3_prepared"
    if saved.exists():
        shutil.copytree(saved, prepared)
    else:
        rl.prepare(cfg, smoke=True, root=tmp, progress=False)
        shutil.copytree(prepared, saved)
    every = rl.LOSS_EVERY
    rl.LOSS_EVERY = 1
    try:
        stack = rl.Table3Stack(cfg, [("3", 0), ("30", 43)], tmp, smoke=True)
        assert stack.run(pretrain_only=True, progress=False)
    finally:
        rl.LOSS_EVERY = every
    curve = json.loads((stack.folder / "pretrain_loss.json").read_text())
    return {"curve": curve, "weights": [weights_checksum(load_file(str(stack.member_dir(i) / "model.safetensors")))
                                        for i in range(2)]}


# --- K et al.: a cell's stack (StackTrainer) and the NSP cell alone (Cell._pretrain_alone) --------------------------
def _k2020_plan(steps: int):
    import dataclasses

    from xlrepro.papers.k2020.config import load_plan
    plan = load_plan()
    prof = plan.profiles["smoke"]
    prof = dataclasses.replace(prof, pretrain=dataclasses.replace(prof.pretrain, steps=steps))
    return dataclasses.replace(plan, profiles={**plan.profiles, "smoke": prof})


def _k2020_cell(plan, name: str, seeds, root: Path):
    """A cell whose vocabulary is the fixture's (HF's WordPiece trainer breaks ties in an order that varies between
    runs, so the vocabulary is recorded once and copied in)."""
    from xlrepro.papers.k2020.bbert import Cell
    cell = Cell(plan, "smoke", name, seeds, root=root)
    tok = FIXTURES / f"k2020_{name.split('/')[0]}_tokenizer.json"
    cell.dir.mkdir(parents=True, exist_ok=True)
    if tok.exists():
        shutil.copy(tok, cell.dir / "tokenizer.json")
    else:
        cell.tokenizer()
        FIXTURES.mkdir(parents=True, exist_ok=True)
        shutil.copy(cell.dir / "tokenizer.json", tok)
    return cell


def record_k2020(tmp: Path) -> dict:
    """enfake-es seed 0 beside enfake-es/id seed 2 in one stack for 4 steps, the loss of every step; and the NSP
    cell (HF's BertForPreTraining, trained alone) for 3 steps."""
    from safetensors.torch import load_file

    from xlrepro.papers.k2020 import stacks, trainer
    every = trainer.LOSS_EVERY
    trainer.LOSS_EVERY = 1
    try:
        plan = _k2020_plan(4)
        a = _k2020_cell(plan, "enfake-es", [0], tmp / "stack")
        b = _k2020_cell(plan, "enfake-es/id", [2], tmp / "stack")
        assert stacks.StackTrainer([(a, 0), (b, 2)]).run(progress=False)
    finally:
        trainer.LOSS_EVERY = every
    timing = json.loads(next((tmp / "stack" / "stacks").glob("*/timing.json")).read_text())
    out = {"stack": {"curve": timing["mlm_loss_curve"],
                     "weights": [weights_checksum(load_file(str(c.dir / f"model_{s}.safetensors")))
                                 for c, s in ((a, 0), (b, 2))]}}
    nsp = _k2020_cell(_k2020_plan(3), "enfake-es/nsp", [0], tmp / "nsp")
    assert nsp.pretrain(progress=False)
    out["nsp"] = {"weights": weights_checksum(load_file(str(nsp.dir / "model_0.safetensors")))}
    return out


# --- Wu & Dredze (and every paper's fine-tuning): training/finetune.py ---------------------------------------------
def record_finetune(tmp: Path) -> dict:
    """`finetune` of a 2-layer BERT (hidden 16) on a task decided by the first piece: 4 epochs of 64 pairs."""
    from transformers import BertConfig, BertModel

    from xlrepro.training.finetune import EncodedPairs, FinetuneConfig, finetune

    def task(n, seed):
        rng = np.random.default_rng(seed)
        labels = rng.integers(0, 2, n)
        rows = [([4 + y, *rng.integers(6, 30, rng.integers(1, 5))], list(rng.integers(6, 30, rng.integers(1, 4))))
                for y in labels]
        ids = [np.array([2, *a, 3, *b, 3]) for a, b in rows]
        types = [np.array([0] * (len(a) + 2) + [1] * (len(b) + 1)) for a, b in rows]
        return EncodedPairs(ids, types, np.asarray(labels, np.int64))

    torch.manual_seed(0)
    encoder = BertModel(BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                   intermediate_size=32)).eval()
    model, history = finetune(FinetuneConfig(lr=5e-3, batch_size=16, epochs=4, seed=3), encoder, task(64, 0), 2,
                              dev=task(40, 1), progress=False)
    return {"loss": history["loss"], "dev_accuracy": history["dev_accuracy"], "steps": history["steps"],
            "weights": weights_checksum(model.state_dict())}


def record_token_finetune(tmp: Path) -> dict:
    """`finetune_tokens` of a 2-layer BERT (hidden 16) on a tagging task decided by the piece: 3 epochs of 40
    sequences, labels at every other piece."""
    from transformers import BertConfig, BertModel

    from xlrepro.training.finetune import FinetuneConfig
    from xlrepro.training.token_finetune import EncodedTokens, finetune_tokens, predict_tokens

    rng = np.random.default_rng(0)
    ids, labels = [], []
    for _ in range(40):
        x = np.array([2, *rng.integers(5, 30, int(rng.integers(2, 9))), 3])
        y = np.where((np.arange(len(x)) % 2 == 1) & (x > 3), x % 3, -100)
        ids.append(x)
        labels.append(y)
    torch.manual_seed(0)
    encoder = BertModel(BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                   intermediate_size=32)).eval()
    data = EncodedTokens(ids, labels)
    model, history = finetune_tokens(FinetuneConfig(lr=5e-3, batch_size=8, epochs=3, seed=1), encoder, data, 3,
                                     progress=False)
    tags = predict_tokens(model, data)
    return {"loss": history["loss"], "steps": history["steps"], "weights": weights_checksum(model.state_dict()),
            "tags": [t.tolist() for t in tags[:5]]}


RECORDERS = {"mini_mbert": record_mini_mbert, "liu2020": record_liu2020, "dufter2020_grid": record_dufter2020_grid,
             "dufter2020_table3": record_dufter2020_table3,
             "k2020": record_k2020, "finetune": record_finetune,
             "token_finetune": record_token_finetune}


def finite(x) -> bool:
    """Every number in a nested record is finite (a NaN would compare unequal to itself)."""
    if isinstance(x, dict):
        return all(finite(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return all(finite(v) for v in x)
    return not isinstance(x, float) or math.isfinite(x)


def differences(got, recorded, rel: float, where: str = "") -> list[str]:
    """Where two nested records differ: keys, lengths, types, integers and strings exactly; two floats beyond a
    relative tolerance `rel` (float32 kernels are chosen by the CPU's instruction set, so two CPUs may differ in the
    last bits of a sum, and training carries that on; a changed random draw or recipe step moves the numbers by more)."""
    here = where or "/"
    if isinstance(recorded, dict):
        if not isinstance(got, dict):
            return [f"{here}: {got!r} != a record with keys {sorted(recorded)}"]
        if set(got) != set(recorded):
            return [f"{here}: keys {sorted(got)} != {sorted(recorded)}"]
        return [d for k in sorted(recorded) for d in differences(got[k], recorded[k], rel, f"{where}/{k}")]
    if isinstance(recorded, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(recorded):
            return [f"{here}: {got!r} != {recorded!r}"]
        return [d for i, (g, r) in enumerate(zip(got, recorded)) for d in differences(g, r, rel, f"{where}[{i}]")]
    if type(got) is float and type(recorded) is float:
        return [] if math.isclose(got, recorded, rel_tol=rel, abs_tol=0.0) else [f"{here}: {got!r} != {recorded!r}"]
    return [] if type(got) is type(recorded) and got == recorded else [f"{here}: {got!r} != {recorded!r}"]
