#!/usr/bin/env bash
# `bash scripts/mutants_files.sh FILE...`: every mutant of each analysis math file (`sums`,
# `nulls`, ...), one file after another, in two passes into target/mutants/analysis-FILE: the unit
# tests alone (most mutants are caught there, at a few seconds each), then `--iterate` with every
# test of scripts/mutants.sh for the mutants the first pass left. A finished file gets
# target/mutants/analysis-FILE/complete; scripts/mutants_table.py makes the table from them. The
# first pass's verdicts are kept as pass1/: a file whose first pass finished resumes at the second;
# a file that was complete is run again from its first pass.
set -uo pipefail
cd "$(dirname "$0")/.."
# cargo-mutants exits 0 (all caught), 2 (some missed) or 3 (some timed out) after a full run; 1 or
# 4 (the unmutated baseline failed) means no verdicts: the file is not marked complete
verdicts() { [ "$1" = 0 ] || [ "$1" = 2 ] || [ "$1" = 3 ]; }
for f in "$@"; do
  [ -f target/mutants/analysis-$f/complete ] && rm -rf target/mutants/analysis-$f/pass1
  rm -f target/mutants/analysis-$f/complete
  if [ -d target/mutants/analysis-$f/pass1 ]; then
    echo "=== $f pass 1 kept from an earlier run"
  else
    echo "=== $f pass 1 $(date)"
    MUTANTS_FILES=$f MUTANTS_TESTS=lib MUTANTS_OUT=target/mutants/analysis-$f bash scripts/mutants.sh analysis 0/1
    rc=$?
    verdicts $rc || { echo "=== $f pass 1 failed (exit $rc) $(date)"; continue; }
    cp -r target/mutants/analysis-$f/mutants.out target/mutants/analysis-$f/pass1
  fi
  echo "=== $f pass 2 $(date)"
  MUTANTS_FILES=$f MUTANTS_OUT=target/mutants/analysis-$f bash scripts/mutants.sh analysis 0/1 --iterate
  rc=$?
  verdicts $rc || { echo "=== $f pass 2 failed (exit $rc) $(date)"; continue; }
  touch target/mutants/analysis-$f/complete
  echo "=== $f done $(date)"
done
