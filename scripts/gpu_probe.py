"""First look at the GPU: seconds per step of stacked small/base models, eager vs CUDA graphs."""
import json, os, sys, time
import torch
from xlrepro.config import load_chapter
from xlrepro.data.lab import load_lab
from xlrepro.training.grid import Member, StackRun

out = {}
ch, lab = load_chapter("dufter2020"), load_lab()
dev = "cuda:0"
print(torch.cuda.get_device_name(0), flush=True)
small_ids = ["0", "1", "2", "4", "5", "6", "7", "8", "3", "9"]
for m_count in (1, 50):
    for graphs in (False, True):
        members = [Member(ch.experiment(e), s) for s in ch.seeds for e in small_ids][:m_count]
        run = StackRun(ch, members, lab, "/tmp/probe", dev)
        sec = run.time_steps(60, warmup=20, graphs=graphs)
        out[f"small_x{m_count}_graphs{graphs}"] = sec
        print(f"small stack of {m_count} graphs={graphs}: {sec*1000:.1f} ms/step, {sec/m_count*1000:.2f} ms per model-step, mem {torch.cuda.max_memory_allocated()/1e9:.1f} GB", flush=True)
        del run; torch.cuda.empty_cache()
for m_count in (5,):
    for graphs in (False, True):
        members = [Member(ch.experiment("15"), s) for s in ch.seeds][:m_count]
        run = StackRun(ch, members, lab, "/tmp/probe", dev)
        sec = run.time_steps(30, warmup=20, graphs=graphs)
        out[f"base_x{m_count}_graphs{graphs}"] = sec
        print(f"base stack of {m_count} graphs={graphs}: {sec*1000:.1f} ms/step mem {torch.cuda.max_memory_allocated()/1e9:.1f} GB", flush=True)
        del run; torch.cuda.empty_cache()
# does it learn? 10 small models, 400 steps with graphs
members = [Member(ch.experiment(e), 0) for e in small_ids]
run = StackRun(ch, members, lab, "/tmp/probe", dev)
stack, batches, total = run._new_stack(); d = run._device_data(); L = [run.sets[m.exp.id].lengths for m in members]
t = time.time()
for step in range(401):
    loss = run._step(stack, d, batches.rows(step), L, True)
    if step % 100 == 0: print(step, [round(x, 2) for x in loss.tolist()], f"{time.time()-t:.1f}s", flush=True)
json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "probe.json"), "w"), indent=1)
