"""GPU probe: the benchmark (plain HF vs ours) and real-data step times of the grid's stacks."""
import gc, json, os, time
import torch
from xlrepro.bench import write_bench
from xlrepro.papers.dufter2020.config import load_chapter
from xlrepro.papers.dufter2020.lab import load_lab
from xlrepro.papers.dufter2020.grid import Member, StackRun
from xlrepro.papers.dufter2020.multilinguality import evaluate
from xlrepro.models import init_model

OUT = os.environ.get("OUT", "/tmp")
print(torch.cuda.get_device_name(0), flush=True)
ch, lab = load_chapter("dufter2020"), load_lab()
dev = "cuda:0"
out = {}
small_ids = ["0", "1", "2", "4", "5", "6", "7", "8", "3", "9"]
for exp, count in (("small", 1), ("small", 20), ("base", 1)):
    ids = small_ids if exp == "small" else ["15"]
    members = [Member(ch.experiment(e), s) for s in ch.seeds for e in ids][:count]
    run = StackRun(ch, members, lab, "/tmp/probe", dev)
    sec = run.time_steps(60, warmup=10)
    out[f"{exp}_x{count}"] = sec
    print(f"real data: {exp} stack of {count}: {sec*1000:.1f} ms/step, {sec/count*1000:.2f} ms per model-step, "
          f"peak mem {torch.cuda.max_memory_allocated()/1e9:.1f} GB", flush=True)
    del run; gc.collect(); torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()
for size in ("small", "base"):
    model = init_model(ch.sizes[size], lab.fe.vocab_size, 0).to(dev)
    t = time.time(); r = evaluate(model, ch.experiment("0"), lab, device=dev, batch_size=2048 if size == "small" else 512)
    torch.cuda.synchronize(); out[f"eval_{size}"] = time.time() - t
    print(f"eval {size}: {time.time()-t:.1f}s", flush=True)
json.dump(out, open(os.path.join(OUT, "probe.json"), "w"), indent=1)
print(write_bench(folder=OUT), flush=True)
import pandas as pd
print(pd.read_csv(os.path.join(OUT, "bench.csv")).to_string(), flush=True)
