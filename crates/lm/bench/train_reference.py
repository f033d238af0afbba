"""PyTorch-eager reference of lm's model and training step, for the throughput benchmark.

Same architecture (RMSNorm, rotary, SwiGLU, tied embeddings, causal SDPA), same config file,
same token stream, same batch shape, AdamW with decay on matrices only, gradient clipping.
Prints one JSON line: tokens/s of each repetition and the time split of a step. `--bf16` runs
the forward pass under torch.autocast("cpu", torch.bfloat16) (PyTorch's own mixed precision:
bf16 matmuls and attention, fp32 weights and optimizer), the anchor of lm's bf16 training.
"""
import contextlib
import argparse, json, math, sys, time, tomllib
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(s, c):
        super().__init__()
        d, s.h = c["d_model"], c["n_heads"]
        s.attn_norm = nn.Parameter(torch.ones(d)); s.mlp_norm = nn.Parameter(torch.ones(d))
        s.qkv = nn.Linear(d, 3 * d, bias=False); s.wo = nn.Linear(d, d, bias=False)
        s.gate_up = nn.Linear(d, 2 * c["d_ff"], bias=False); s.down = nn.Linear(c["d_ff"], d, bias=False)
        s.eps = c["norm_eps"]

    def forward(s, x, cos, sin):
        b, t, d = x.shape
        hd = d // s.h
        q, k, v = s.qkv(F.rms_norm(x, (d,), s.attn_norm, s.eps)).view(b, t, 3, s.h, hd).permute(2, 0, 3, 1, 4)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + s.wo(y.transpose(1, 2).reshape(b, t, d))
        g, u = s.gate_up(F.rms_norm(x, (d,), s.mlp_norm, s.eps)).chunk(2, -1)
        return x + s.down(F.silu(g) * u)


def rope(x, cos, sin):
    t, hd = x.shape[2], x.shape[3]
    x1, x2 = x[..., : hd // 2], x[..., hd // 2 :]
    return x * cos[:t] + torch.cat([-x2, x1], -1) * sin[:t]


class Gpt(nn.Module):
    def __init__(s, c, vocab):
        super().__init__()
        s.wte = nn.Embedding(vocab, c["d_model"])
        s.blocks = nn.ModuleList(Block(c) for _ in range(c["n_layers"]))
        s.norm_f = nn.Parameter(torch.ones(c["d_model"]))
        hd = c["d_model"] // c["n_heads"]
        inv = 1.0 / c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
        ang = torch.outer(torch.arange(c["context"], dtype=torch.float64), inv)
        ang = torch.cat([ang, ang], -1)
        s.cos, s.sin = ang.cos().float(), ang.sin().float()
        s.eps = c["norm_eps"]
        for p in s.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, c["init_std"])

    def forward(s, x, y):
        h = s.wte(x)
        for b in s.blocks:
            h = b(h, s.cos, s.sin)
        logits = F.rms_norm(h, (h.shape[-1],), s.norm_f, s.eps) @ s.wte.weight.T
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--tokens", required=True, help="u16 token file of the training split")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=1, help="timed repetitions of --steps steps each")
    ap.add_argument("--bf16", action="store_true", help="forward under bf16 autocast")
    ap.add_argument("--serve", action="store_true", help='after the warm-up, print "ready", then time one repetition per "run" line of stdin (one JSON line each) until EOF')
    a = ap.parse_args()
    cfg = tomllib.load(open(a.config, "rb"))
    m, t = cfg["model"], cfg["train"]
    seed = cfg.get("init_seed", cfg.get("seed"))
    torch.manual_seed(seed)
    data = np.fromfile(a.tokens, dtype="<u2").astype(np.int64)
    model = Gpt(m, cfg["data"]["vocab_size"])
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": t["weight_decay"]}, {"params": other, "weight_decay": 0.0}],
                            lr=t["lr"], betas=(t["beta1"], t["beta2"]), eps=t["eps"])
    rng = np.random.default_rng(seed)
    autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if a.bf16 else contextlib.nullcontext
    B, T = t["batch_size"], m["context"]
    times = {"forward": 0.0, "backward": 0.0, "optimizer": 0.0}

    def step():
        starts = rng.integers(0, len(data) - T - 1, B)
        x = torch.from_numpy(np.stack([data[s : s + T] for s in starts]))
        y = torch.from_numpy(np.stack([data[s + 1 : s + T + 1] for s in starts]))
        t0 = time.perf_counter()
        with autocast():
            loss = model(x, y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), t["grad_clip"])
        opt.step(); opt.zero_grad(set_to_none=True)
        loss.item()
        t3 = time.perf_counter()
        times["forward"] += t1 - t0; times["backward"] += t2 - t1; times["optimizer"] += t3 - t2

    def rep():
        began = time.perf_counter()
        for _ in range(a.steps):
            step()
        return a.steps * B * T / (time.perf_counter() - began)

    for _ in range(a.warmup):
        step()
    times = {k: 0.0 for k in times}
    first, rates = time.perf_counter(), []
    if a.serve:
        print("ready", flush=True)
        for line in sys.stdin:
            if line.strip() == "run":
                rates.append(rep())
                print(json.dumps({"tokens_per_s": rates[-1]}), flush=True)
    else:
        rates = [rep() for _ in range(a.reps)]
    wall = time.perf_counter() - first
    print(json.dumps({"tokens_per_s": float(np.median(rates)) if rates else None, "reps_tokens_per_s": rates, "wall_s": wall, "threads": torch.get_num_threads(),
                      **{f"{k}_s": v for k, v in times.items()}, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
