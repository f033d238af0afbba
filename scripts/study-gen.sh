#!/usr/bin/env bash
# The study's generation tasks on committed grid runs (`just study-gen [runs]`, issue 27). Their
# checkpoints are not committed, so each run is trained again from results/<run>/config.toml (same
# seeds) into runs/study/<run>/ (resumed if interrupted; shared with `just study`), its training
# log compared with the committed one (training is deterministic on one host; hosts of another
# CPU differ in the last digits), then the stages of scripts/pipeline.sh run with
# configs/eval-study-gen.toml (the generation tasks only) in runs/study/<run>/generation/ (its
# checkpoints are the run's): eval, the averages of the last 4 and 16 checkpoints and their eval,
# the vote ensembles of generated text, the analysis and the comparison. The result is packed into
# results/<run>/generation/ (committed; with the retrained training log beside it). A run whose
# results/<run>/generation/ exists is skipped.
set -euo pipefail
lm=target/release/lm
names=("$@"); [ ${#names[@]} -gt 0 ] || { echo "usage: just study-gen RUN... (committed runs: $(ls results | tr '\n' ' '))" >&2; exit 2; }
for name in "${names[@]}"; do
  res=results/$name run=runs/study/$name
  [ -f $res/config.toml ] || { echo "error: no committed run $res; there are: $(ls results | tr '\n' ' ')" >&2; exit 2; }
  if [ -d $res/generation ]; then echo "== $name: done ($res/generation)"; continue; fi
  echo "== $name: training again from $res/config.toml into $run"
  t=$SECONDS
  $lm train --config $res/config.toml --out $run --quiet
  python3 - $res/train_log.csv $run/train_log.csv <<'PY'
import csv, sys
committed = {r["step"]: r for r in csv.DictReader(open(sys.argv[1]))}
rerun = list(csv.DictReader(open(sys.argv[2])))
worst = max((abs(float(r[k]) - float(committed[r["step"]][k])) / abs(float(committed[r["step"]][k]))
             for r in rerun for k in ("train_loss", "val_loss") if r[k] and committed[r["step"]][k]), default=0.0)
print(f"   training log: {len(rerun)} rows, max relative loss difference from the committed run {worst:.2e}")
PY
  gen=$run/generation
  mkdir -p $gen && ln -sfn ../checkpoints $gen/checkpoints
  cp $res/config.toml $gen/config.toml && cp $run/train_log.csv $gen/train_log.csv
  [ -f $gen/stages.csv ] || { echo "stage,seconds,threads,host_cpu" > $gen/stages.csv; echo "train,$((SECONDS - t)),$(nproc),$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs | tr ',' ' ')" >> $gen/stages.csv; }
  bash scripts/pipeline.sh --run $gen --config $res/config.toml --eval-config configs/eval-study-gen.toml \
    --last schedule --final-from schedule --stages eval,average,eval-averaged,ensemble,analysis,compare --stages-csv --pack $res/generation
  echo "== $name: $res/generation written; commit it (git add $res/generation)"
done
