#!/usr/bin/env bash
# `just verify RUN STEPS`: retrain the first STEPS steps of a committed study run from
# results/RUN/config.toml (same seeds), score the scheduled checkpoints among them, and compare
# the example rows (decisions identical, log-likelihoods within 1e-3; `analysis verify`) and the
# training log (losses within 1e-4 relative) with results/RUN/.
set -euo pipefail
run=$1 steps=$2 lm=target/release/lm
res=results/$run out=runs/verify/$run
[ -d $res ] || { echo "error: no committed results $res; there are: $(ls results 2>/dev/null | tr '\n' ' ')" >&2; exit 2; }
t0=$SECONDS
$lm train --config $res/config.toml --out $out --stop-after $steps --quiet
$lm eval --checkpoints $out/checkpoints --config configs/eval-study.toml --quiet
target/release/analysis verify $res/eval $out/eval
python3 - $res/train_log.csv $out/train_log.csv <<'PY'
import csv, sys
committed = {r["step"]: r for r in csv.DictReader(open(sys.argv[1]))}
rerun = list(csv.DictReader(open(sys.argv[2])))
worst = 0.0
for r in rerun:
    c = committed[r["step"]]
    for k in ("train_loss", "val_loss"):
        if r[k] and c[k]:
            worst = max(worst, abs(float(r[k]) - float(c[k])) / abs(float(c[k])))
print(f"training log: {len(rerun)} rows, max relative loss difference {worst:.2e} (tolerance 1e-4)")
sys.exit(worst > 1e-4)
PY
echo "== verify $run: ok in $((SECONDS - t0)) s"
