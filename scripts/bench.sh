#!/usr/bin/env bash
# `just bench`: every benchmark in one run (~30 minutes on 2 idle cores), then one table. Each
# bench writes its headline rows (ours, its anchor, its bound, each a median of 5 repetitions
# with min and max) to runs/bench/<bench>.summary.json; `bench_table` prints them as one table,
# writes runs/bench/summary.csv and replaces the table in BENCHMARKS.md. The evaluation bench
# scores a checkpoint this script trains (runs/bench/eval-model, 20 steps of the default model;
# kept and reused). The generation bench decodes with the smoke run's last checkpoint (trained
# here if runs/smoke lacks it) against transformers' `generate`, which needs the venv of
# `just setup-interop`. bf16 training's 300-step accuracy check is `just bench-precision`.
set -euo pipefail
out=runs/bench
mkdir -p $out
stamp=$out/.bench-started; touch $stamp
t0=$SECONDS
step() { local t=$SECONDS; echo; echo "== $1"; shift; "$@"; echo "($((SECONDS - t)) s)"; }
step "train: matmul peaks, lm fp32 and bf16, PyTorch fp32 and bf16 autocast" \
  target/release/examples/bench_train --config configs/default.toml --steps 10 --reps 5
step "eval: a 20-step checkpoint of the default model to score" \
  target/release/lm train --config configs/default.toml --out $out/eval-model --stop-after 20 --quiet
step "eval: packed and per-request scoring against PyTorch, the study's tasks at 64 examples each" \
  target/release/examples/bench_eval --checkpoint $out/eval-model/checkpoints/step_000020.json \
    --eval-config configs/eval-study.toml --max-examples 64 --repeats 5
step "average: k = 4 and k = 16 inputs of 256 MB" bash -c \
  "target/release/examples/bench_average 4 256 5 && target/release/examples/bench_average 16 256 5"
step "analysis: streaming metrics against numpy" target/release/examples/bench_analysis 1000 100000 5 5
step "stats: the statistics on 1 thread and on every core" target/release/examples/bench_stats 1000 41 5
[ -f runs/smoke/checkpoints/step_000200.json ] ||
  step "generate: the smoke run to decode with (runs/smoke, as \`just reproduce\` trains it)" \
    target/release/lm train --config configs/smoke.toml --quiet
step "generate: greedy decoding, lm against transformers' generate, parity and memory bound" \
  target/release/examples/bench_generate --checkpoint runs/smoke/checkpoints/step_000200.json --repeats 5
step "ingest: analysis report on 300k lm-eval sample lines, cold, warm and one new checkpoint, against pandas" \
  just bench-ingest 50 6 1000 300k 3
benches=(train eval average-k4-256mb average-k16-256mb analysis stats generate ingest-300k)
for b in "${benches[@]}"; do
  [ $out/$b.summary.json -nt $stamp ] || { echo "error: $out/$b.summary.json was not written by this run" >&2; exit 1; }
done
echo; echo "== the table ($((SECONDS - t0)) s in all)"
target/release/examples/bench_table --date "$(date -u +%Y-%m-%d)" "${benches[@]}"
