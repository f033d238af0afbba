#!/usr/bin/env bash
# Two builds of `analysis` side by side on one large lm-eval folder (BENCHMARKS.md, "Walked sums,
# subset masks, smaller chunks"): warm reports and one-new-checkpoint reports, alternating.
#
#   bash scripts/ingest_side_by_side.sh OLD_BIN NEW_BIN DATA HELD WORK [REPS]
#
# DATA: the folder (e.g. `make_lm_eval_fixture.py --steps 100,200,...,20100 --tasks 20 --docs 5000`
# with its last checkpoint's folder moved to HELD); WORK: a scratch folder. Each binary first builds
# its own cache (cold); then REPS warm reports each; then REPS reports with HELD's checkpoint added,
# each from a fresh copy of the warm cache (the checkpoint is moved back afterwards). Prints wall
# time and peak RSS (/usr/bin/time) and the report's own read / analysis split.
set -euo pipefail
old=$1 new=$2 data=$3 held=$4 work=$5 reps=${6:-3}
mkdir -p "$work"
ckpt=$(ls "$held")
run() { # name bin cache out
  /usr/bin/time -f "$1 %e s %M KB" "$2" report "$data" --out "$4" --cache "$3" > "$work/last.txt" 2>&1
  grep -E "read in|analysed|$1 " "$work/last.txt" | tr '\n' ' '; echo
}
for b in old new; do
  bin=$old; [ $b = new ] && bin=$new
  [ -d "$work/$b.ingest" ] || run "$b-cold" "$bin" "$work/$b.ingest" "$work/$b-out"
done
for i in $(seq "$reps"); do
  run old-warm "$old" "$work/old.ingest" "$work/old-out"
  run new-warm "$new" "$work/new.ingest" "$work/new-out"
done
for i in $(seq "$reps"); do
  for b in new old; do
    bin=$old; [ $b = new ] && bin=$new
    rm -rf "$work/cur.ingest"; cp -r "$work/$b.ingest" "$work/cur.ingest"; sync
    mv "$held/$ckpt" "$data/"
    run "$b-incr" "$bin" "$work/cur.ingest" "$work/incr-$b" || true
    mv "$data/$ckpt" "$held/"
  done
done
