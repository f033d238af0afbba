#!/usr/bin/env bash
# The committed study results analysed again (`just reproduce`): each results/<run>/ is copied to
# runs/results/<run>/ (nothing is ever written into results/), and the stages of
# scripts/pipeline.sh that need no checkpoints (ensemble, analysis, compare) rebuild its
# ensembles, analysis and comparison there from the committed example rows; a run's generation
# results (results/<run>/generation/, `just study-gen`) the same way.
set -euo pipefail
names=$(for d in results/*/; do [ -f "$d/config.toml" ] && basename "$d"; done 2>/dev/null || true)
[ -n "$names" ] || { echo "error: no committed study runs under results/ (folders with a config.toml); \`just study\` writes them" >&2; exit 2; }
mkdir -p runs/results
for name in $names; do
  run=runs/results/$name
  echo "== $name"
  mkdir -p $run && cp -ru results/$name/. $run/
  bash scripts/pipeline.sh --run $run --config $run/config.toml --final-from schedule --stages ensemble,analysis,compare > $run/pipeline.log
  echo "   report: $run/report.txt, comparison: $run/analysis/stability.txt"
  # the generation tasks of a run trained again (`just study-gen`): the same stages on its texts
  if [ -f $run/generation/config.toml ]; then
    bash scripts/pipeline.sh --run $run/generation --config $run/generation/config.toml --final-from schedule --stages ensemble,analysis,compare > $run/generation/pipeline.log
    echo "   generation: $run/generation/report.txt, comparison: $run/generation/analysis/stability.txt"
  fi
done
