"""PyTorch-eager reference of lm's scoring, for the evaluation benchmark.

Loads the same checkpoint (safetensors, renaming lm's tensor names to the reference model's),
scores the same tokenized requests with the same batching (sorted by length, packed to
batch_tokens, right-padded; only continuation positions go through the output layer), one
request per row as lm-evaluation-harness does (each option recomputes its context), and prints
one JSON line: seconds (the fastest of --repeats passes after a warm-up pass) and every
request's log-likelihood.
"""
import argparse, json, re, sys, time, tomllib
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from train_reference import Gpt  # noqa: E402


def rename(k):
    k = re.sub(r"blocks\.(\d+)\.attn\.(qkv|wo)\.weight", r"blocks.\1.\2.weight", k)
    k = re.sub(r"blocks\.(\d+)\.mlp\.(gate_up|down)\.weight", r"blocks.\1.\2.weight", k)
    k = re.sub(r"(blocks\.\d+\.(attn_norm|mlp_norm)|norm_f)\.weight", r"\1", k)
    return k


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--requests", required=True, help="JSONL of [context_ids, continuation_ids]")
    ap.add_argument("--batch-tokens", type=int, default=8192)
    ap.add_argument("--repeats", type=int, default=1, help="timed passes after one warm-up; the fastest counts")
    ap.add_argument("--serve", action="store_true",
                    help="after the warm-up print 'ready', then time one pass per 'run' line read from stdin (one JSON line "
                         "each), so that a caller can interleave its own passes with ours; EOF ends with the log-likelihoods")
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads (0: torch's default)")
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    cfg = tomllib.load(open(a.config, "rb"))
    m = cfg["model"]
    model = Gpt(m, cfg["data"]["vocab_size"])
    model.load_state_dict({rename(k): v for k, v in load_file(a.weights).items()})
    model.eval()
    reqs = [json.loads(l) for l in open(a.requests)]
    T = m["context"]
    out = score(model, reqs, T, a.batch_tokens)  # warm-up
    if a.serve:
        print("ready", flush=True)
        for line in sys.stdin:
            if line.strip() == "run":
                t0 = time.perf_counter()
                out = score(model, reqs, T, a.batch_tokens)
                print(json.dumps({"seconds": time.perf_counter() - t0}), flush=True)
        print(json.dumps({"logliks": out, "threads": torch.get_num_threads()}), flush=True)
        return
    best = float("inf")
    for _ in range(max(a.repeats, 1)):
        t0 = time.perf_counter()
        out = score(model, reqs, T, a.batch_tokens)
        best = min(best, time.perf_counter() - t0)
    print(json.dumps({"seconds": best, "logliks": out, "threads": torch.get_num_threads()}))


def score(model, reqs, T, batch_tokens):
    laid = []
    for ctx, cont in reqs:
        full = (ctx + cont)[-(T + 1):]
        laid.append((full[:-1], full[1:], len(cont)))
    order = sorted(range(len(laid)), key=lambda i: -len(laid[i][0]))
    out = [0.0] * len(laid)
    i = 0
    with torch.no_grad():
        while i < len(order):
            width = len(laid[order[i]][0])
            rows = min(max(batch_tokens // width, 1), len(order) - i)
            batch = order[i : i + rows]
            x = torch.zeros(rows, width, dtype=torch.long)
            pos, tgt = [], []
            for b, r in enumerate(batch):
                inp, target, n = laid[r]
                x[b, : len(inp)] = torch.tensor(inp)
                for p in range(len(inp) - n, len(inp)):
                    pos.append(b * width + p); tgt.append(target[p])
            h = model.wte(x)
            for blk in model.blocks:
                h = blk(h, model.cos, model.sin)
            h = F.rms_norm(h, (h.shape[-1],), model.norm_f, model.eps).reshape(-1, h.shape[-1])[torch.tensor(pos)]
            lp = (h @ model.wte.weight.T).log_softmax(-1).gather(1, torch.tensor(tgt).unsqueeze(1)).squeeze(1).double()
            k = 0
            for r in batch:
                n = laid[r][2]
                out[r] = float(lp[k : k + n].sum()); k += n
            i += rows
    return out


if __name__ == "__main__":
    main()
