#!/usr/bin/env bash
# The study grid, one run at a time (`just study [runs]` builds and fetches data first, then calls
# this): per run, train -> eval of the scheduled checkpoints (configs/eval-study.toml) -> averages
# (k = 4, 16) of the final stage and their eval -> ensembles -> analysis -> `analysis pack` into
# results/<run>/ (committed; checkpoints stay in runs/study/). A run whose results/<run>/ exists is
# skipped; an interrupted one resumes where it stopped. Uses the binaries in target/release.
set -euo pipefail
lm=target/release/lm
names=("$@"); [ ${#names[@]} -gt 0 ] || names=($(ls configs/study | sed 's/[.]toml$//'))
for name in "${names[@]}"; do
  cfg=configs/study/$name.toml; run=runs/study/$name
  [ -f $cfg ] || { echo "error: no study config $cfg; there are: $(ls configs/study | tr '\n' ' ')" >&2; exit 2; }
  if [ -d results/$name ]; then echo "== $name: done (results/$name)"; continue; fi
  echo "== $name: $($lm schedule --config $cfg | cut -c1-100)..."
  mkdir -p $run; stages=$run/stages.csv; [ -f $stages ] || echo "stage,seconds,threads,host_cpu" > $stages
  cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs | tr ',' ' '); threads=$(nproc)
  stage() { local name=$1; shift; local t=$SECONDS; "$@"; echo "$name,$((SECONDS - t)),$threads,$cpu" >> $stages; }
  last=$($lm schedule --config $cfg --final-count); from=$($lm schedule --config $cfg --final-start)
  stage train $lm train --config $cfg --out $run
  stage eval $lm eval --checkpoints $run/checkpoints --config configs/eval-study.toml
  stage average target/release/integrate sweep --checkpoints $run/checkpoints --windows 4,16 --last $last
  for k in 4 16; do
    stage eval_avg_k$k $lm eval --checkpoints $run/averaged/k$k --out $run/eval-avg-k$k --config configs/eval-study.toml
  done
  stage ensemble target/release/integrate ensemble --eval $run/eval --windows 1,2,4,8,16
  stage analysis target/release/analysis report $run --final-from $from
  stage compare bash -c "target/release/analysis compare $run > $run/analysis/stability.txt"
  target/release/analysis pack $run --out results/$name
  echo "== $name: results/$name written; commit it (git add results/$name)"
done
