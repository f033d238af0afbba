#!/usr/bin/env bash
# The study grid, one run at a time (`just study [runs]` builds and fetches data first, then calls
# this): each run goes through every stage of scripts/pipeline.sh with the study's eval config
# (configs/eval-study.toml), its final stage taken from its eval schedule, stage times recorded
# in stages.csv, and is packed into results/<run>/ (committed; checkpoints stay in runs/study/).
# A run whose results/<run>/ exists is skipped; an interrupted one resumes where it stopped.
set -euo pipefail
names=("$@"); [ ${#names[@]} -gt 0 ] || names=($(ls configs/study | sed 's/[.]toml$//'))
for name in "${names[@]}"; do
  cfg=configs/study/$name.toml
  [ -f $cfg ] || { echo "error: no study config $cfg; there are: $(ls configs/study | tr '\n' ' ')" >&2; exit 2; }
  if [ -d results/$name ]; then echo "== $name: done (results/$name)"; continue; fi
  echo "== $name: $(target/release/lm schedule --config $cfg | cut -c1-100)..."
  bash scripts/pipeline.sh --run runs/study/$name --config $cfg --eval-config configs/eval-study.toml \
    --last schedule --final-from schedule --stages-csv --pack results/$name
  echo "== $name: results/$name written; commit it (git add results/$name)"
done
