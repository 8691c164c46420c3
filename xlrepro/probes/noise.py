"""GPU check of the per-model draws' int32 hash (`xlrepro.engine.noise`): the same bits as the int64 form, eager and
under torch.compile (Inductor's Triton code must wrap int32 products as the CPU does), and what each form costs.
Prints one JSON object and writes it to runs/probes/noise_gpu_check.json.
Usage (on a GPU machine): python -m xlrepro.probes.noise
"""
import json
import os
import time

import torch

from xlrepro.engine.noise import Noise, from_bits32, stream_key, uniform, uniform_int64

from xlrepro.paths import runs_dir


def main() -> None:
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # a CPU run (smaller sizes) checks the script
    small = dev.type == "cpu"
    out = {"device": torch.cuda.get_device_name(0) if not small else "cpu", "torch": torch.__version__}
    keys = stream_key(torch.tensor([0, 42, 101, 2**40 + 7], device=dev), 19, torch.tensor(12345, device=dev))
    edges = torch.tensor([2**31 - 1, 2**31, 2**32 - 1, 2**32, 3 * 2**31 + 11], device=dev)
    index = torch.cat([torch.arange(4_000 if small else 4_000_000, device=dev), edges]).unsqueeze(0)  # int64 coordinates
    want = uniform_int64(keys, index)
    out["eager_int32_equal"] = torch.equal(uniform(keys, index), want)
    out["compiled_int32_equal"] = torch.equal(torch.compile(uniform)(keys, index), want)
    out["compiled_int64_equal"] = torch.equal(torch.compile(uniform_int64)(keys, index), want)

    # the dropout masks of a BERT-base-sized stack step (5 models, 256 rows of width 40, 768 units), both forms
    noise = Noise(seeds=torch.tensor([0, 42, 43, 100, 101], device=dev), step=torch.tensor(7, device=dev),
                  rows=torch.arange(256, device=dev))
    x = torch.randn(5, 256 * 40, 32 if small else 768, device=dev, dtype=torch.bfloat16)


    def hidden():
        return noise.dropout_hidden(x, 0.1, 17, 40)


    def hidden64():
        import xlrepro.engine.noise as mod
        keep, mod.uniform = mod.uniform, lambda k, i: uniform_int64(k, from_bits32(i) if i.dtype == torch.int32 else i)
        try:
            return noise.dropout_hidden(x, 0.1, 17, 40)
        finally:
            mod.uniform = keep


    out["dropout_hidden_equal_eager"] = torch.equal(hidden(), hidden64())
    compiled = torch.compile(hidden)
    out["dropout_hidden_equal_compiled"] = torch.equal(compiled(), hidden64())


    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()


    def ms(f, n=20):
        for _ in range(3):
            f()
        sync()
        t = time.perf_counter()
        for _ in range(n):
            f()
        sync()
        return (time.perf_counter() - t) / n * 1e3


    out["ms_dropout_hidden_eager_int32"] = ms(hidden)
    out["ms_dropout_hidden_eager_int64"] = ms(hidden64)
    out["ms_dropout_hidden_compiled_int32"] = ms(compiled)
    out["ms_dropout_hidden_compiled_int64"] = ms(torch.compile(hidden64))
    print(json.dumps(out, indent=1), flush=True)
    os.makedirs(runs_dir() / "probes", exist_ok=True)
    with open(runs_dir() / "probes" / "noise_gpu_check.json", "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
