#!/usr/bin/env bash
# `just reproduce` (the study): the smoke chain from scratch (it checks the whole chain), then the
# committed study runs under results/ analysed again (scripts/results.sh), then every figure and
# table and the paper from them. usage: scripts/reproduce.sh JUST HEADLINE
set -euo pipefail
just=$1 headline=$2
t0=$SECONDS
echo "== the smoke chain (train -> eval -> average -> ensemble -> analysis -> figures -> paper; from scratch in a clean clone, each step skips what is up to date)"
$just _chain smoke
t1=$SECONDS
if ! ls results/*/config.toml >/dev/null 2>&1; then
  echo "== no committed study run under results/ yet (\`just study\` makes them): figures/ and paper/ are left as they are"
  exit 0
fi
echo "== the committed study runs: ensembles, analysis and comparison rebuilt from results/"
bash scripts/results.sh
t2=$SECONDS
$just _figures study
# the analysis page of the headline run (analysis report --html in scripts/results.sh)
cp runs/results/$headline/analysis/report.html figures/report-$headline.html
$just _paper study
echo "== summary of reproduce: smoke chain $((t1 - t0)) s, study analysis $((t2 - t1)) s, figures and paper $((SECONDS - t2)) s, total $((SECONDS - t0)) s"
echo "== figures in figures/, paper paper/paper.md (headline run results/$headline; every run in table6, table7, fig8)"
