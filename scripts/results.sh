#!/usr/bin/env bash
# The committed study results analysed again (`just reproduce`): each results/<run>/ is copied to
# runs/results/<run>/ (nothing is ever written into results/), and its ensembles, analysis and
# comparison are rebuilt there from the committed example rows, as `just study` built them.
set -euo pipefail
names=$(for d in results/*/; do [ -f "$d/config.toml" ] && basename "$d"; done 2>/dev/null || true)
[ -n "$names" ] || { echo "error: no committed study runs under results/ (folders with a config.toml); \`just study\` writes them" >&2; exit 2; }
mkdir -p runs/results
for name in $names; do
  res=results/$name; run=runs/results/$name
  echo "== $name"
  mkdir -p $run && cp -ru $res/. $run/
  from=$(target/release/lm schedule --config $run/config.toml --final-start)
  target/release/integrate ensemble --eval $run/eval --windows 1,2,4,8,16
  target/release/integrate ensemble --eval $run/eval --windows 4,16 --rule vote --out $run/ensembled-vote
  target/release/analysis report $run --final-from $from > $run/report.txt
  target/release/analysis compare $run > $run/analysis/stability.txt
  echo "   report: $run/report.txt, comparison: $run/analysis/stability.txt"
done
