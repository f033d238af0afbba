#!/usr/bin/env bash
# `bash scripts/mutants_files.sh FILE...`: every mutant of each analysis math file (`sums`,
# `nulls`, ...), one file after another, in two passes into target/mutants/analysis-FILE: the unit
# tests alone (most mutants are caught there, at a few seconds each), then `--iterate` with every
# test of scripts/mutants.sh for the mutants the first pass left. A finished file gets
# target/mutants/analysis-FILE/complete; scripts/mutants_table.py makes the table from them. The
# first pass's verdicts are kept as pass1/: a file whose first pass finished resumes at the second,
# one whose first pass was stopped goes on from where it was; a file that was complete is run again
# from its first pass.
set -uo pipefail
cd "$(dirname "$0")/.."
# cargo-mutants exits 0 (all caught), 2 (some missed) or 3 (some timed out) after a full run; 1 or
# 4 (the unmutated baseline failed) means no verdicts: the file is not marked complete
verdicts() { [ "$1" = 0 ] || [ "$1" = 2 ] || [ "$1" = 3 ]; }
for f in "$@"; do
  d=target/mutants/analysis-$f
  [ -f $d/complete ] && rm -rf $d/pass1 $d/mutants.out $d/{caught,unviable}-before-stop.txt
  rm -f $d/complete
  if [ -d $d/pass1 ]; then
    echo "=== $f pass 1 kept from an earlier run"
  else
    # a first pass that was stopped (a session's end) goes on with `--iterate`, which skips the
    # mutants it found caught or unviable; those are kept in {caught,unviable}-before-stop.txt
    # (over several stops) and join the pass's verdicts at its end
    resume=()
    if [ -s $d/mutants.out/caught.txt ] || [ -s $d/mutants.out/unviable.txt ]; then
      for k in caught unviable; do
        touch $d/$k-before-stop.txt $d/mutants.out/$k.txt
        sort -u -o $d/$k-before-stop.txt $d/$k-before-stop.txt $d/mutants.out/$k.txt
      done
      resume=(--iterate)
      echo "=== $f pass 1 goes on: $(cat $d/{caught,unviable}-before-stop.txt | wc -l) mutants done before it was stopped"
    fi
    echo "=== $f pass 1 $(date)"
    MUTANTS_FILES=$f MUTANTS_TESTS=lib MUTANTS_OUT=$d bash scripts/mutants.sh analysis 0/1 "${resume[@]}"
    rc=$?
    verdicts $rc || { echo "=== $f pass 1 failed (exit $rc) $(date)"; continue; }
    cp -r $d/mutants.out $d/pass1
    if [ ${#resume[@]} -gt 0 ]; then
      for k in caught unviable; do
        sort -u -o $d/pass1/$k.txt $d/pass1/$k.txt $d/$k-before-stop.txt && rm $d/$k-before-stop.txt
      done
    fi
  fi
  echo "=== $f pass 2 $(date)"
  MUTANTS_FILES=$f MUTANTS_OUT=$d bash scripts/mutants.sh analysis 0/1 --iterate
  rc=$?
  verdicts $rc || { echo "=== $f pass 2 failed (exit $rc) $(date)"; continue; }
  touch $d/complete
  echo "=== $f done $(date)"
done
