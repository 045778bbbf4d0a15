"""Reference fp16 recipe (fp32 master + Adam, fp16 weights cast from master, static loss scale
from calibrated_loss_scale) on a GPT of the project's architecture, instrumented per step.

usage: python probe.py LAYERS HEADS WIDTH CONTEXT BATCH STEPS [device] [lr]
"""
import math, sys, time, itertools
import torch
import torch.nn.functional as F
from impl.workloads import GPTConfig, build_model, make_batch, loss_fn
from impl.hybrid.base import calibrated_loss_scale

L, H, W, C, B, STEPS = map(int, sys.argv[1:7])
dev = torch.device(sys.argv[7] if len(sys.argv) > 7 else "cpu")
lr = float(sys.argv[8]) if len(sys.argv) > 8 else 1e-3
cfg = GPTConfig("probe", layers=L, heads=H, width=W, context=C, batch=B, dtype="fp16")
model = build_model(cfg, dev)
loss = lambda o, t: loss_fn(cfg, o, t)
data = [make_batch(cfg, dev, seed=0, rank=0, step=s) for s in range(2)]  # BATCHES_IN_ROTATION=2
scale = calibrated_loss_scale(model, loss, data[0])
print(f"params={sum(p.numel() for p in model.parameters()):,} scale=2^{int(math.log2(scale))} lr={lr}", flush=True)

import os
if os.environ.get("DT") == "fp32":  # shadow run: same scale, fp32 arithmetic, magnitudes vs 65504
    model = model.float(); print("shadow fp32 run", flush=True)
params = list(model.parameters())
names = [n for n, _ in model.named_parameters()]
masters = [p.detach().float().clone() for p in params]
opt = torch.optim.Adam(masters, lr=lr, foreach=True)

F16MAX = 65504.0
stats = {}
def amax(t):
    return t.detach().abs().float().max().item()
def rec(key, v):
    stats[key] = max(stats.get(key, 0.0), v)

def block_hooks(i, blk):
    heads = blk.heads
    def qkv_hook(m, inp, out):
        b, l, w = out.shape
        q, k, v = out.detach().float().split(w // 3, dim=2)
        q = q.view(b, l, heads, -1).transpose(1, 2); k = k.view(b, l, heads, -1).transpose(1, 2)
        s = (q[:1] @ k[:1].transpose(-1, -2)) / math.sqrt(q.shape[-1])  # first sequence only
        rec("attn_logit", amax(s)); rec("qkv", amax(out))
    def fc_hook(m, inp, out): rec("mlp_hidden", amax(out))
    def out_hook(m, inp, out): rec("mlp_out", amax(out))
    def blk_hook(m, inp, out):
        rec("resid", amax(out))
        if out.requires_grad:
            out.register_hook(lambda g: rec("resid_grad", amax(g)))
    blk.qkv.register_forward_hook(qkv_hook)
    blk.fc.register_forward_hook(fc_hook)
    blk.out.register_forward_hook(out_hook)
    blk.register_forward_hook(blk_hook)
    def ghook(key):
        def h(m, i, o):
            if o.requires_grad:
                o.register_hook(lambda g: rec(key, amax(g)))
        return h
    blk.fc.register_forward_hook(ghook("mlp_hidden_grad"))
    blk.qkv.register_forward_hook(ghook("qkv_grad"))
for i, blk in enumerate(model.blocks):
    block_hooks(i, blk)
def head_hook(m, i, o):
    rec("logit", amax(o))
    if o.requires_grad:
        o.register_hook(lambda g: rec("logit_grad", amax(g)))
model.head.register_forward_hook(head_hook)
def norm_hook(m, i, o):
    rec("final_resid_in", amax(i[0]))
model.norm.register_forward_hook(norm_hook)

rot = itertools.cycle(data)
cols = ["loss", "gmax", "gname", "nonfin", "resid", "attn_logit", "mlp_hidden", "logit", "resid_grad", "mlp_hidden_grad", "qkv_grad", "logit_grad", "wmax", "wname"]
print(" ".join(cols), flush=True)
t0 = time.time()
for step in range(STEPS):
    batch = next(rot)
    stats.clear()
    for p in params: p.grad = None
    l = loss(model(batch.inputs), batch.targets)
    lv = l.item()
    if not math.isfinite(lv):
        print(f"step {step}: NON-FINITE LOSS {lv}  fwd stats { {k: f'{v:.3g}' for k, v in stats.items()} }", flush=True)
        break
    (l * scale).backward()
    g = [(p.grad.detach().abs().float().max().item(), n) for p, n in zip(params, names)]
    nonfin = [n for p, n in zip(params, names) if not torch.isfinite(p.grad).all()]
    gmax, gname = max(g)
    w = max((m.abs().max().item(), n) for m, n in zip(masters, names))
    print(f"{step:3d} {lv:.4f} g={gmax:.4g} ({gname}) nonfin={len(nonfin)}{(':' + ','.join(nonfin[:4])) if nonfin else ''} "
          + " ".join(f"{k}={stats.get(k, float('nan')):.4g}" for k in cols[4:12])
          + f" w={w[0]:.3g}({w[1]}) t={time.time()-t0:.0f}s", flush=True)
    for m, p in zip(masters, params):
        m.grad = p.grad.float() / scale
    if os.environ.get("DELAY") == "1":  # DPU: next forward reads the master before this update
        with torch.no_grad():
            torch._foreach_copy_(params, masters)
        opt.step()
    else:
        opt.step()
        with torch.no_grad():
            torch._foreach_copy_(params, masters)
