#!/usr/bin/env bash
# One new checkpoint on a large lm-eval folder (BENCHMARKS.md, "`analysis ingest`: one new
# checkpoint added in 1.2 s"): `analysis ingest` of it, the report after that ingest, a warm report
# after that, and the report with the new checkpoint and no ingest before it, each rep from a fresh
# copy of the warm cache; the three tables of the two reports are compared byte for byte.
#
#   bash scripts/ingest_new_checkpoint.sh BIN DATA HELD WORK [REPS]
#
# DATA: the folder (e.g. `make_lm_eval_fixture.py --steps 100,200,...,20100 --tasks 20 --docs 5000`)
# with its last checkpoint's folder moved to HELD; WORK: a scratch folder (its base.ingest, the warm
# cache, is built by a cold ingest the first time). Prints wall time and peak RSS (/usr/bin/time),
# the ingest notes and the report's own read / analysis split.
set -uo pipefail
B=$1 DATA=$2 HELD=$3 W=$4 reps=${5:-3}
mkdir -p "$W"
ck=$(ls "$HELD")
t() { local name=$1; shift; /usr/bin/time -f "$name %e s %M KB" "$@" > "$W/last.out" 2> "$W/last.err"; echo "$(grep -E "^$name " "$W/last.err") | $(grep -E 'read in|analysed|ingest:' "$W/last.err" | tr '\n' ' ') | $(head -c 200 "$W/last.out" | tr '\n' ' ')"; }
[ -d "$W/base.ingest" ] || t cold-ingest "$B" ingest "$DATA" --cache "$W/base.ingest"
for i in $(seq "$reps"); do t warm-report "$B" report "$DATA" --out "$W/out" --cache "$W/base.ingest"; done
for i in $(seq "$reps"); do
  rm -rf "$W/cur.ingest"; cp -r "$W/base.ingest" "$W/cur.ingest"; sync
  mv "$HELD/$ck" "$DATA/"
  t ingest-new "$B" ingest "$DATA" --cache "$W/cur.ingest"
  t report-after-ingest "$B" report "$DATA" --out "$W/out-i" --cache "$W/cur.ingest"
  t report-warm-after "$B" report "$DATA" --out "$W/out-i" --cache "$W/cur.ingest"
  rm -rf "$W/cur.ingest"; cp -r "$W/base.ingest" "$W/cur.ingest"; sync
  t report-new-no-ingest "$B" report "$DATA" --out "$W/out-n" --cache "$W/cur.ingest"
  mv "$DATA/$ck" "$HELD/"
  for f in task_metrics.csv example_metrics.csv decisions.csv; do
    cmp "$W/out-i/$f" "$W/out-n/$f" && echo "rep $i: $f identical (ingest then report vs report)"
  done
done
