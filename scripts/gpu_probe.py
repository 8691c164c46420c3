"""First look at the GPU: seconds per step of stacked small/base models and one evaluation."""
import json, os, sys, time
import torch
from xlrepro.config import load_chapter
from xlrepro.data.lab import load_lab
from xlrepro.training.grid import Member, StackRun
from xlrepro.evaluation.multilinguality import evaluate
from xlrepro.models import init_model

out = {}
ch, lab = load_chapter("dufter2020"), load_lab()
dev = "cuda:0"
print(torch.cuda.get_device_name(0), flush=True)
small_ids = ["0", "1", "2", "4", "5", "6", "7", "8", "3", "9"]
for m_count in (1, 10, 50):
    members = [Member(ch.experiment(e), s) for s in ch.seeds for e in small_ids][:m_count]
    run = StackRun(ch, members, lab, "/tmp/probe", dev)
    sec = run.time_steps(30)
    out[f"small_x{m_count}"] = sec
    print(f"small stack of {m_count}: {sec*1000:.1f} ms/step, {sec/m_count*1000:.2f} ms per model-step", flush=True)
for m_count in (1, 5):
    members = [Member(ch.experiment("15"), s) for s in ch.seeds][:m_count]
    run = StackRun(ch, members, lab, "/tmp/probe", dev)
    sec = run.time_steps(20, warmup=3)
    out[f"base_x{m_count}"] = sec
    print(f"base stack of {m_count}: {sec*1000:.1f} ms/step", flush=True)
    del run; torch.cuda.empty_cache()
for size in ("small", "base"):
    model = init_model(ch.sizes[size], lab.fe.vocab_size, 0).to(dev)
    t = time.time(); r = evaluate(model, ch.experiment("0"), lab, device=dev); torch.cuda.synchronize()
    out[f"eval_{size}"] = time.time() - t
    print(f"eval {size}: {time.time()-t:.1f}s {r}", flush=True)
json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "probe.json"), "w"), indent=1)
