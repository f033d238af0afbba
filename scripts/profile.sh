#!/usr/bin/env bash
# `just profile train|eval`: where the time goes, by perf (software cpu-clock sampling at 499 Hz:
# these VMs expose no hardware counters) — lm's bf16 training step (bench_train --only bf16) or
# lm's packed fp32 scorer (`lm eval` of the bench checkpoint on the study's tasks, 64 each).
# Writes runs/bench/profile-<what>/{perf.data,by-library.txt,by-symbol.txt} and prints the share
# of samples per library and the top symbols.
set -euo pipefail
what=${1:-train}
out=runs/bench/profile-$what
mkdir -p $out
case $what in
  train) cmd=(target/release/examples/bench_train --config configs/default.toml --only bf16 --steps 10 --reps 3) ;;
  eval)
    ckpt=runs/bench/eval-model/checkpoints
    [ -f $ckpt/step_000020.json ] || target/release/lm train --config configs/default.toml --out runs/bench/eval-model --stop-after 20 --quiet
    rm -rf $out/eval
    cmd=(target/release/lm eval --checkpoints $ckpt --config configs/eval-study.toml --max-examples 64 --out $out/eval --quiet) ;;
  *) echo "error: just profile train|eval, not $what" >&2; exit 2 ;;
esac
perf record -e cpu-clock -F 499 -g -o $out/perf.data.tmp -- "${cmd[@]}"
mv $out/perf.data.tmp $out/perf.data
perf report -i $out/perf.data --stdio --no-children --sort dso -g none 2>/dev/null | grep -v '^#' | grep . > $out/by-library.txt
perf report -i $out/perf.data --stdio --no-children --sort dso,sym -g none 2>/dev/null | grep -v '^#' | grep . > $out/by-symbol.txt
echo "== $what: samples per library"; head -8 $out/by-library.txt
echo "== $what: top symbols"; head -25 $out/by-symbol.txt | cut -c1-160
