"""numpy reference of the streaming analysis metrics, on the same bit file; `reps` timed
repetitions (argument 5, default 1), their seconds printed as a list.

Loading and unpacking the bits is not timed (the Rust side's reading is); the metrics are:
per task the score series' MTV, detrended sd, direction changes and largest drop, and the
per-example flip counts, their mean, p50 and p90, learned-then-forgotten and stability over the
final 20% of checkpoints.
"""
import json, math, sys, time
import numpy as np

path, m, n, tasks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
reps = int(sys.argv[5]) if len(sys.argv) > 5 else 1
words = (n + 63) // 64
raw = np.fromfile(path, dtype="<u8").reshape(tasks, m, words)
mats = [np.unpackbits(raw[k].view(np.uint8), axis=1, bitorder="little")[:, :n].astype(bool) for k in range(tasks)]

def metrics():
    out = []
    for M in mats:
        acc = M.mean(axis=1)
        d = np.diff(acc)
        mtv = float(np.abs(d).mean())
        x = np.arange(m, dtype=float)
        slope, icpt = np.polyfit(x, acc, 1)
        detr = float(np.std(acc - (slope * x + icpt)))
        s = np.sign(d[d != 0])
        dirchg = int((s[1:] != s[:-1]).sum())
        drop = float(max(0.0, (-d).max()))
        down = (M[:-1] & ~M[1:])
        up = (~M[:-1] & M[1:])
        flips = down.sum(axis=0) + up.sum(axis=0)
        rates = flips / (m - 1)
        changed = down | up
        any_change = changed.any(axis=0)
        last = np.where(any_change, m - 1 - np.argmax(changed[::-1], axis=0), 0)
        final_start = m - min(max(math.ceil(m * 0.2), 1), m)
        out.append({
            "mtv": mtv, "detrended_sd": detr, "direction_changes": dirchg, "largest_drop": drop,
            "mean_flip_rate": float(rates.mean()), "flip_rate_p50": float(np.quantile(rates, 0.5)),
            "flip_rate_p90": float(np.quantile(rates, 0.9)), "learned_then_forgotten": float(down.any(axis=0).mean()),
            "stable_final": float((last <= final_start).mean()),
        })
    return out

seconds = []
for _ in range(reps):
    t0 = time.perf_counter()
    out = metrics()
    seconds.append(time.perf_counter() - t0)
print(json.dumps({"seconds": seconds, "tasks": out}))
