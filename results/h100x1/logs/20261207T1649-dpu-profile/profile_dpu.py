"""Profile fused GPU Adam's step and the delayed update's step of one member: per-step times,
the launching thread's CUDA launch costs, and per-thread CPU time (torch.profiler).
usage: python profile_dpu.py MEMBER OUTDIR [device]"""
import collections, gzip, os, shutil, sys, time
import torch
from torch.profiler import ProfilerActivity, profile
from impl.presets import preset
from impl.workloads import build_model
from impl.hybrid import build_trainer
from impl.hybrid.base import HybridOptions, learning_rate
from suite.bench_hybrid import mlp_loss, parameter_count
from suite.harness import batches

member, out = sys.argv[1], sys.argv[2]
dev = torch.device(sys.argv[3] if len(sys.argv) > 3 else "cuda")
os.makedirs(out, exist_ok=True)
w = preset(member)
loss = mlp_loss(w)
data = batches(w, dev, rank=0)
threads = max(1, (os.cpu_count() or 2) - 1)
opts = HybridOptions(cpu_threads=threads, lr=learning_rate(w.kind, parameter_count(w)))
sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
for variant in ("device-adam", "offload-overlap-dpu", "device-adam"):
    trainer = build_trainer(variant, build_model(w, dev), loss, opts)
    drain = getattr(trainer, "drain", lambda: None)
    for i in range(6):
        trainer.step(data[i % 2])
    drain(); sync(); trainer.finish_timeline()
    times = []
    for i in range(9):
        t0 = time.perf_counter(); trainer.step(data[i % 2]); sync()
        times.append((time.perf_counter() - t0) * 1e3)
        trainer.finish_timeline()
    drain(); sync()
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])) as prof:
        for i in range(3):
            trainer.step(data[i % 2])
        drain(); sync()
    trainer.finish_timeline()
    name = f"{out}/{variant}-{int(time.time())}.json"
    prof.export_chrome_trace(name)
    with open(name, "rb") as f, gzip.open(name + ".gz", "wb") as g:
        shutil.copyfileobj(f, g)
    os.remove(name)
    per_thread = collections.Counter(); launches = collections.defaultdict(list)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CPU:
            per_thread[e.thread] += e.self_cpu_time_total
            if e.name in ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel"):
                launches[e.thread].append(e.cpu_time_total)
    times.sort()
    print(f"== {variant}: step ms median {times[len(times)//2]:.1f} min {times[0]:.1f} max {times[-1]:.1f}")
    for t, us in per_thread.most_common(8):
        l = launches.get(t, [])
        print(f"   thread {t}: self cpu {us/1e3:.1f} ms over 3 steps; launches {len(l)}"
              + (f", mean {sum(l)/len(l):.1f} us, p90 {sorted(l)[int(0.9*len(l))]:.1f} us" if l else ""))
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18))
    trainer.close()
