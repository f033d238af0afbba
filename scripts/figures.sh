#!/usr/bin/env bash
# Every figure and table binary (experiments/src/bin, all but `paper`), or the ones named, on the
# study (SIZE = study: the headline run runs/results/HEADLINE and every run under runs/results,
# into figures/) or on one run (runs/SIZE, into runs/SIZE/figures; its study tables show that run
# alone through the link runs/SIZE/study/SIZE). usage: scripts/figures.sh SIZE HEADLINE [NAME...]
set -euo pipefail
size=$1 headline=$2; shift 2
if [ "$size" = study ]; then
  args=(--run runs/results/$headline --results runs/results --out figures)
else
  mkdir -p runs/$size/study && ln -sfn .. runs/$size/study/$size
  args=(--run runs/$size --results runs/$size/study --out runs/$size/figures)
fi
names=("$@"); [ ${#names[@]} -gt 0 ] || names=($(ls experiments/src/bin | sed 's/[.]rs$//' | grep -v '^paper$'))
for b in "${names[@]}"; do target/release/$b "${args[@]}"; done
