"""Where a BERT-base training step goes, and what bounds it: diagnostics beside `xlrepro bench` (GPU only).

Variants (in one process, on the bench's base case unless --case says otherwise; each timed as the bench times its
rows: median of --repeats runs of --steps steps after --warmup steps, then profiled by kind of kernel):
  ours, ours-nomask, hf-compile       the bench's engines, for reference in the same process
  ours-mm, ours-nomask-mm             the same with the bias outside the batched product (`Levers(linear="mm")`)
  stackN, stackN-mm                   N models of the case in one compiled stack (per model-step figures)
  nodrop                              ours with dropout 0 (hidden and attention): the cost of the random masks.
                                      A diagnostic, not an engine: it is not the same training
  nomask-flash / -cudnn / -efficient  ours + no mask with one SDPA backend forced (torch.nn.attention.sdpa_kernel)
  autotune                            ours with Inductor's max_autotune_gemm (Triton matmul templates tried against
                                      cuBLAS at compile time, with fused epilogues)
  gemm                                the floor: only the step's matrix products (12 layers x 6 forward and 12 backward
                                      products at the case's shapes, bf16, torch.mm), no other work
  gemm-fp8                            the same products as `Fp8Linear` runs them: forward and input gradient in FP8
                                      (torch._scaled_mm, a scale per row; quantising not counted), weight gradient bf16
  ours-fp8                            ours with FP8 linear layers (`Levers(linear="fp8")`, `fused_bert.Fp8Linear`)
  attention                           SDPA forward + backward alone at the case's shapes, dropout 0.1, per backend
Writes --out/base_probe.json (rows, after every variant) and base_probe-<variant>.txt (kernel profiles).
Usage (on a GPU machine): python -m xlrepro.probes.base --variants gemm,attention,ours,nodrop,... [--case base]
"""
import argparse
import gc
import json
import os
import statistics
import time

import torch

from xlrepro import bench

from xlrepro.paths import runs_dir


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="base", choices=sorted(bench.CASES))
    ap.add_argument("--variants", default="gemm,attention,ours,nodrop,nomask-flash,nomask-cudnn,nomask-efficient,autotune")
    ap.add_argument("--out", default=str(runs_dir() / "probes"), help="default: runs/probes")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--batch", type=int, help="sentences per step instead of the case's (e.g. the Dufter grid's 256)")
    ap.add_argument("--length", type=int, help="row width instead of the case's (e.g. 24: the Dufter lab corpus)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--budget-s", type=float, default=480, help="no variant starts after this many seconds")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    dev = args.device
    cuda = dev.startswith("cuda")
    case = bench.CASES[args.case]
    if args.batch or args.length:
        from dataclasses import replace
        case = replace(case, batch=args.batch or case.batch, length=args.length or case.length)
    inputs = bench.make_inputs(case, dev)
    flops = bench.model_flops(case.size, case.vocab, case.batch, case.length, lengths=inputs.lengths)
    peak = bench.peak_flops(dev)
    rows, start = [], time.perf_counter()
    name = torch.cuda.get_device_name(0) if cuda else "cpu"
    print(name, torch.__version__, flush=True)


    def gemm_step():
        """The step's matrix products alone: per layer Q, K, V, output (n x h x h), FFN in (n x h x f), FFN out
        (n x f x h) forward, and for each the gradients of its input and of its weight."""
        n, h, f = case.batch * case.length, case.size.hidden, case.size.ffn
        bf = dict(device=dev, dtype=torch.bfloat16)
        x, g = torch.randn(n, h, **bf), torch.randn(n, h, **bf)            # [n, h]: a layer's input, an output's grad
        inner, ginner = torch.randn(n, f, **bf), torch.randn(n, f, **bf)  # [n, f]: the FFN's inner activation, its grad
        wh, w1, w2 = torch.randn(h, h, **bf), torch.randn(f, h, **bf), torch.randn(h, f, **bf)
        out_h, out_f, dw_h, dw_1, dw_2 = (torch.empty(n, h, **bf), torch.empty(n, f, **bf), torch.empty(h, h, **bf),
                                          torch.empty(f, h, **bf), torch.empty(h, f, **bf))

        def step():
            for _ in range(case.size.layers):
                for _ in range(4):
                    torch.mm(x, wh.t(), out=out_h)       # forward
                    torch.mm(g, wh, out=out_h)           # grad of the input
                    torch.mm(g.t(), x, out=dw_h)         # grad of the weight
                torch.mm(x, w1.t(), out=out_f)
                torch.mm(ginner, w1, out=out_h)
                torch.mm(ginner.t(), x, out=dw_1)
                torch.mm(inner, w2.t(), out=out_h)
                torch.mm(g, w2, out=out_f)
                torch.mm(g.t(), inner, out=dw_2)
        gemm_flops = 3 * case.size.layers * 2 * n * (4 * h * h + 2 * h * f)
        return step, gemm_flops


    def gemm_fp8_step():
        """`gemm_step`'s products as `Fp8Linear` runs them: the forward product and the input's gradient in FP8 (unit
        row scales: quantising is not counted), the weight's gradient in bf16."""
        n, h, f = case.batch * case.length, case.size.hidden, case.size.ffn
        bf = dict(device=dev, dtype=torch.bfloat16)
        e4 = lambda *shape: torch.randn(*shape, device=dev).to(torch.float8_e4m3fn)  # noqa: E731
        x, g, inner, ginner = e4(n, h), e4(n, h), e4(n, f), e4(n, f)
        wh, w1, w2 = e4(h, h), e4(f, h), e4(h, f)            # [out, in] row-major: .t() is column-major
        wht, w1t, w2t = e4(h, h), e4(h, f), e4(f, h)         # the transposed weights the input gradients read
        xb, gb, ib, gib = (torch.randn(n, h, **bf), torch.randn(n, h, **bf), torch.randn(n, f, **bf),
                           torch.randn(n, f, **bf))
        ones = {rows: torch.ones(rows, 1, device=dev) for rows in (n, h, f)}  # made once: not timed
        mm8 = lambda a, b: torch._scaled_mm(a, b.t(), scale_a=ones[a.shape[0]],  # noqa: E731
                                            scale_b=ones[b.shape[0]].t(), out_dtype=torch.bfloat16)

        def step():
            for _ in range(case.size.layers):
                for _ in range(4):
                    mm8(x, wh)           # forward [n, h]
                    mm8(g, wht)          # grad of the input
                    gb.t() @ xb          # grad of the weight, bf16
                mm8(x, w1)
                mm8(ginner, w1t)
                gib.t() @ xb
                mm8(inner, w2)
                mm8(g, w2t)
                gb.t() @ ib
        return step, 3 * case.size.layers * 2 * n * (4 * h * h + 2 * h * f)


    def attention_rows():
        """SDPA forward + backward alone, [B, heads, W, head size], dropout 0.1, no mask, per backend."""
        from torch.nn.attention import SDPBackend, sdpa_kernel
        heads = case.size.heads
        shape = (case.batch, heads, case.length, case.size.hidden // heads)
        q, k, v = (torch.randn(shape, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        out = []
        for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                              ("efficient", SDPBackend.EFFICIENT_ATTENTION), ("math", SDPBackend.MATH)):
            def step():
                with sdpa_kernel([backend]):
                    y = torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=0.1)
                y.backward(torch.ones_like(y))
            try:
                _, times = bench.measure(step, dev, args.steps, args.repeats, 3)
                out.append({"variant": f"attention-{name}", "ms_per_step_layer": 1e3 * statistics.median(times),
                            "ms_per_step_12_layers": 12e3 * statistics.median(times)})
            except Exception as err:  # noqa: BLE001 - a backend that does not apply here
                out.append({"variant": f"attention-{name}", "status": f"{type(err).__name__}: {str(err)[:200]}"})
        return out


    def ours(engine_key, dropout=True):
        engine = bench.ENGINES[engine_key]
        if not dropout:
            init = bench.init_model

            def no_dropout(*a, **k):
                model = init(*a, **k)
                model.config.hidden_dropout_prob = model.config.attention_probs_dropout_prob = 0.0
                return model
            bench.init_model = no_dropout
            try:
                return bench._ours_step(case, inputs, dev, engine)[0]
            finally:
                bench.init_model = init
        return bench._ours_step(case, inputs, dev, engine)[0]


    def build(variant):
        """(step, context manager factory or None, FLOPs a step counts)."""
        from contextlib import nullcontext
        if variant == "gemm":
            step, f = gemm_step()
            return step, None, f
        if variant == "gemm-fp8":
            step, f = gemm_fp8_step()
            return step, None, f
        if variant == "hf-compile":
            return bench._hf_step(case, inputs, dev, "hf-compile"), None, flops
        if variant in ("ours", "ours-nomask", "ours-mm", "ours-nomask-mm", "ours-fp8"):
            return ours(variant), None, flops
        if variant.startswith("stack"):
            n, _, linear = variant[len("stack"):].partition("-")
            engine = bench.Engine(variant, "ours", "all", models=int(n), linear=linear or "baddbmm")
            return bench._ours_step(case, inputs, dev, engine)[0], None, flops * int(n)
        if variant == "nodrop":
            return ours("ours", dropout=False), None, flops
        if variant.startswith("nomask-"):
            from torch.nn.attention import SDPBackend, sdpa_kernel
            backend = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                       "efficient": SDPBackend.EFFICIENT_ATTENTION}[variant.split("-", 1)[1]]
            return ours("ours-nomask"), lambda: sdpa_kernel([backend]), flops
        if variant == "autotune":
            import torch._inductor.config as inductor
            inductor.max_autotune_gemm = True
            return ours("ours"), None, flops
        raise SystemExit(f"unknown variant {variant}")


    for variant in args.variants.split(","):
        if time.perf_counter() - start > args.budget_s:
            rows.append({"variant": variant, "status": "skipped: budget spent"})
            continue
        t0 = time.perf_counter()
        try:
            if variant == "attention":
                rows.extend(attention_rows())
            else:
                step, context, f = build(variant)

                def run():
                    if context is None:
                        return step()
                    with context():
                        return step()
                warm, times = bench.measure(run, dev, args.steps, args.repeats, args.warmup)
                kinds, table = bench.profile_step(run, dev)
                with open(os.path.join(args.out, f"base_probe-{variant}.txt"), "w") as fh:
                    fh.write("\n".join(f"{k['kind']:38s} {k['ms_per_step']:8.2f} ms {k['share']:6.1%}" for k in kinds))
                    fh.write("\n\n" + table + "\n")
                med = statistics.median(times)
                models = int(variant[len("stack"):].partition("-")[0]) if variant.startswith("stack") else 1
                rows.append({"variant": variant, "ms_per_step": 1e3 * med, "ms_per_model_step": 1e3 * med / models,
                             "min": 1e3 * min(times), "max": 1e3 * max(times),
                             "tflops": f / med / 1e12, "mfu": None if peak is None else f / med / peak,
                             "warmup_s": warm, "peak_gb": torch.cuda.max_memory_allocated() / 1e9 if cuda else None,
                             "kinds": {k["kind"]: round(k["ms_per_step"], 3) for k in kinds}})
        except Exception as err:  # noqa: BLE001 - report and go on with the other variants
            rows.append({"variant": variant, "status": f"failed: {type(err).__name__}: {str(err)[:300]}"})
        finally:
            step = context = None
            gc.collect()
            if cuda:
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            torch._dynamo.reset()
            import torch._inductor.config as inductor
            inductor.max_autotune_gemm = False
        print(json.dumps(rows[-1]), f"({time.perf_counter() - t0:.0f} s)", flush=True)
        with open(os.path.join(args.out, "base_probe.json"), "w") as fh:
            json.dump({"case": args.case, "batch": case.batch, "length": case.length, "device": name,
                       "torch": torch.__version__,
                       "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
