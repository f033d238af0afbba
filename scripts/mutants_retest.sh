#!/usr/bin/env bash
# `bash scripts/mutants_retest.sh FILE...`: the survivors (missed; not the timed out, which hang
# again) of each finished file of scripts/mutants_files.sh run again with every test of HEAD, into
# target/mutants/analysis-FILE.retest, after new tests were written for them; the ones caught
# there are the table's "killed by a new test" (scripts/mutants_table.py).
set -uo pipefail
cd "$(dirname "$0")/.."
for f in "$@"; do
  out=target/mutants/analysis-$f/mutants.out
  [ -f target/mutants/analysis-$f/complete ] || { echo "=== $f: not finished, nothing to retest"; continue; }
  args=()
  while IFS= read -r m; do
    [ -n "$m" ] && args+=(-F "^$(printf '%s' "$m" | sed 's/[][\\.*^$+?(){}|/]/\\&/g')\$")
  done < $out/missed.txt
  [ ${#args[@]} -gt 0 ] || { echo "=== $f: no survivors"; continue; }
  echo "=== $f retest of $((${#args[@]} / 2)) survivors $(date)"
  rm -rf target/mutants/analysis-$f.retest
  MUTANTS_FILES=$f MUTANTS_OUT=target/mutants/analysis-$f.retest bash scripts/mutants.sh analysis 0/1 "${args[@]}"
  echo "=== $f retest done (exit $?) $(date)"
done
