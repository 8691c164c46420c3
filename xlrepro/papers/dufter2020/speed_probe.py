"""GPU probe for the training engine: which lever pays for the Dufter & Schütze stacks.

Real data (the lab corpus), steady-state ms/step after every padded width has been seen (and compiled/captured):
variants of precision (bf16 autocast / fp32) and torch.compile, for a stack of 20 BERT-small models and one
BERT-base; a kernel profile of the eager steps; a check that compiled dropout draws new masks at every graph replay.
Usage (on a GPU machine): python -m xlrepro.papers.dufter2020.speed_probe [--only small|base] [--out DIR]
"""
import argparse
import functools
import gc
import json
import os
import time
import types

import torch

import xlrepro.papers.dufter2020.grid as grid
from xlrepro.papers.dufter2020.config import load_chapter
from xlrepro.papers.dufter2020.lab import load_lab
from xlrepro.engine import fused_bert
from xlrepro.engine import noise as noise_module
from xlrepro.engine.pretrain import new_stack

from xlrepro.paths import runs_dir


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=None)
    ap.add_argument("--out", default=str(runs_dir() / "probes"), help="default: runs/probes")
    ap.add_argument("--variants", default="bf16,fp32,bf16+compile,fp32+compile")
    ap.add_argument("--profile", default="", help="variants to profile, e.g. bf16,bf16+compile")
    ap.add_argument("--eval", action="store_true", help="time the evaluation of one small model (Table 1 metrics)")
    ap.add_argument("--cases", default="small:20,base:1", help="kind:models,... e.g. small:20,small:50,base:5")
    ap.add_argument("--warmup", type=int, default=210)
    ap.add_argument("--steps", type=int, default=140)
    args = ap.parse_args()
    if os.environ.get("PROBE_DUMP_S"):  # print every thread's stack periodically: where does a slow compile spend its time
        import faulthandler
        faulthandler.dump_traceback_later(int(os.environ["PROBE_DUMP_S"]), repeat=True)
    if os.environ.get("PROBE_INDUCTOR"):  # Inductor settings to try, e.g. PROBE_INDUCTOR=split_reductions=0,max_autotune=1
        import torch._inductor.config as inductor_config
        for item in os.environ["PROBE_INDUCTOR"].split(","):
            name, value = item.split("=")
            *path, leaf = name.split(".")  # e.g. triton.persistent_reductions
            where = functools.reduce(getattr, path, inductor_config)
            old = getattr(where, leaf)  # an unknown name fails here
            setattr(where, leaf, type(old)(int(value)) if isinstance(old, (bool, int)) else value)
            print(f"inductor {name}: {old} -> {getattr(where, leaf)}", flush=True)
    os.makedirs(args.out, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    print(torch.cuda.get_device_name(0), torch.__version__, flush=True)
    ch, lab = load_chapter("dufter2020"), load_lab()
    dev = "cuda:0"
    results = []


    def rng_check():
        """A captured graph of a compiled function with dropout must draw a new mask at every replay."""
        f = torch.compile(lambda x: torch.nn.functional.dropout(x, 0.5, True).sum())
        x = torch.ones(4096, device=dev)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                f(x)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = f(x)
        vals = []
        for _ in range(3):
            g.replay()
            vals.append(float(out))
        print("compiled dropout under graph replay, sums:", vals, "-> distinct" if len(set(vals)) == 3 else "-> REPEATED",
              flush=True)
        return len(set(vals)) == 3


    def members(kind, count):
        ids = ["0", "1", "2", "4", "5", "6", "7", "8", "3", "9"] if kind == "small" else ["16", "15", "17"]
        return [grid.Member(ch.experiment(e), s) for e in ids for s in ch.seeds][:count]


    _mask_tokens = grid.mask_tokens
    _uniform = noise_module.uniform


    def use_variant(variant):
        """Set up the engine a variant names and return StackRun's compile argument: precision (bf16/fp32: the chapter's
        training precision is bf16, so an fp32 variant runs bf16 unless the chapter says otherwise); "+compile"
        regional compilation, "+compile-full" the whole loss as one graph; "+sdpa" / "+math" the attention path of the
        compiled stacks (default "auto"); "+mm" the linear layers' bias outside the batched product
        (`Levers(linear="mm")`); "+nonoise" PyTorch's generator for masking and dropout instead of each model's own
        draws (`noise.py`): what the per-model draws cost (with them, attention is always spelled out; without, "auto"
        may take SDPA); "+hash64" the per-model draws hashed in int64 (their first form) instead of int32; "+force"
        compiles a stack of one model even of a size the grid trains eagerly (`grid.stack_compile`)."""
        compile_mode = ("full" if "compile-full" in variant else "regional") if "compile" in variant else None
        stack = new_stack
        grid.mask_tokens = _mask_tokens
        noise_module.uniform = _uniform
        if "+nonoise" in variant:
            def stack(*a, seeds=None, rows=None, _make=stack, **k):  # the fused loss without per-model draws
                s = _make(*a, seeds=None, **k)
                s.noise = types.SimpleNamespace(rows=None, step=torch.zeros((), dtype=torch.int64, device=s.device))
                return s
            grid.mask_tokens = lambda *a, noise=None, **k: _mask_tokens(*a, noise=None, **k)
        if "+hash64" in variant:
            noise_module.uniform = lambda keys, index: noise_module.uniform_int64(
                keys, noise_module.from_bits32(index) if index.dtype == torch.int32 else index)
        grid.new_stack = stack
        fused_bert.ATTENTION = "sdpa" if variant.endswith("+sdpa") else "math" if variant.endswith("+math") else "auto"
        return compile_mode


    def measure(kind, count, variant):
        compile_mode = use_variant(variant)
        run = grid.StackRun(ch, members(kind, count), lab, "/tmp/probe", dev, compile=compile_mode,
                            linear="mm" if "+mm" in variant else "baddbmm")
        if "+force" in variant:  # compile a stack of one whatever its size (`grid.stack_compile`)
            run.compile = compile_mode
        t0 = time.time()
        try:
            sec = run.time_steps(args.steps, warmup=args.warmup)
        except Exception as err:  # report and go on with the other variants
            print(f"{kind} x{count} {variant}: FAILED {type(err).__name__}: {str(err)[:400]}", flush=True)
            return
        total = time.time() - t0
        row = {"case": f"{kind} x{count}", "variant": variant, "ms_per_step": sec * 1e3, "ms_per_model_step": sec * 1e3 / count,
               "warmup_and_compile_s": total - sec * args.steps, "peak_gb": torch.cuda.max_memory_allocated() / 1e9,
               "device": torch.cuda.get_device_name(0)}
        results.append(row)
        print(json.dumps(row), flush=True)
        del run
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


    def profile(kind, count, variant):
        from xlrepro.bench import profile_step
        compile_mode = use_variant(variant)
        run = grid.StackRun(ch, members(kind, count), lab, "/tmp/probe", dev, compile=compile_mode)
        stack, batches, _ = run._new_stack()  # one stack: the profile holds steps only, not the set-up's copies
        d = run._device_data()
        lengths = [run.sets[m.exp.id].lengths for m in run.members]
        steps = iter(range(25))

        def step():
            s = next(steps)
            return run._step(stack, d, batches.rows(s), lengths, False)

        for _ in range(20):  # every width compiled before the profile
            step()
        kinds, table = profile_step(step, dev, steps=5)
        lines = [f"--- kernel profile ({variant}, no CUDA graph), {kind} x{count}: ms per step (5 steps)"]
        lines += [f"  {k['kind']:38s} {k['ms_per_step']:8.2f}  {k['share']:6.1%}" for k in kinds]
        text = "\n".join(lines + ["", table])
        print(text, flush=True)
        with open(os.path.join(args.out, f"profile-{kind}{count}-{variant}.txt"), "w") as f:
            f.write(text + "\n")
        del run
        gc.collect()
        torch.cuda.empty_cache()


    ok = rng_check()
    cases = [(c.split(":")[0], int(c.split(":")[1])) for c in args.cases.split(",")]
    cases = [(k, c) for k, c in cases if not args.only or k == args.only]
    if args.eval:
        from xlrepro.models import init_model
        run = grid.StackRun(ch, members("small", 1), lab, "/tmp/probe", dev)
        models = [init_model(run.size, run.vocab_size, 0)]
        for k in range(3):
            torch.cuda.synchronize()
            t = time.time()
            run._evaluate(None, models, 0)
            torch.cuda.synchronize()
            print(f"evaluation of one small model, call {k}: {time.time() - t:.2f} s", flush=True)
    for variant in filter(None, args.profile.split(",")):
        for kind, count in cases:
            profile(kind, count, variant)
    skip = set(os.environ.get("PROBE_SKIP", "").split(","))
    for variant in args.variants.split(","):  # cheap variants first: a slow compile must not cost the others
        for kind, count in cases:
            if (kind == "base" and variant.startswith("fp32")) or (c := f"{kind}:{count}:{variant}") in skip:
                continue
            measure(kind, count, variant)
            json.dump({"rng_distinct": ok, "rows": results}, open(os.path.join(args.out, "speed_probe.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
