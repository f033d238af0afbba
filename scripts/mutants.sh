#!/usr/bin/env bash
# `just mutants CRATE SHARD [ARGS...]`: cargo-mutants on a disposable checkout of HEAD
# (target/mutants-tree-CRATE), one round-robin shard at a time; further arguments go to
# cargo-mutants. Results land in target/mutants/CRATE-SHARD/mutants.out (or $MUTANTS_OUT/mutants.out).
# MUTANTS_TESTS=lib runs the unit tests alone: a cheaper first pass whose caught mutants stay
# caught; a second pass with `--iterate` (same output) retests the rest with every test.
set -euo pipefail
crate=$1 shard=$2; shift 2
test -x .tools/bin/cargo-mutants || cargo install --locked cargo-mutants@27.1.0 --root .tools
mutants=$PWD/.tools/bin/cargo-mutants
tree=target/mutants-tree-$crate
# --in-place edits the tree's files: a run that was killed leaves its last mutant there (a checkout
# keeps local edits), so the tree is forced back to HEAD and cleaned (proptest's saved cases too)
if [ -d $tree ]; then
  git -C $tree checkout --quiet --force --detach $(git rev-parse HEAD) && git -C $tree clean -fdq
else
  git worktree add --detach $tree HEAD
fi
case $crate in
  theory) files=(--file 'crates/theory/src/*.rs'); tests=() ;;
  # the math files (statistics, nulls, intervals, decisions), each run whole or in round-robin
  # shards
  # (MUTANTS_FILES="sums proportion" picks some)
  analysis) files=(); for f in ${MUTANTS_FILES:-nulls bootstrap selection snr trend power continuous metrics claims stats seeds \
                                  proportion sums subsets stream decide compare}; do files+=(--file crates/analysis/src/$f.rs); done
            tests=(--cargo-test-arg=--lib)
            [ "${MUTANTS_TESTS:-all}" = lib ] || for t in analysis nulls_simulations decisions compare_runs; do tests+=(--cargo-test-arg=--test=$t); done ;;
  *) echo "error: mutants: crate is theory or analysis, not $crate" >&2; exit 2 ;;
esac
mkdir -p target/mutants
# a run killed mid-build can leave rustc's incremental cache holding a mutant's code (seen once: the
# baseline failed on an unmutated tree until this was dropped), so every run starts without it
rm -rf target/mutants-target-$crate/mutants/incremental/$crate-*
out=$(realpath -m "${MUTANTS_OUT:-target/mutants/$crate-${shard/\//-of-}}")
# a mutant that makes a loop run away (a count that wraps) times out: 300 s with every test, 60 s
# with the unit tests alone (their baseline takes 2-3 s; nulls.rs's first pass spent 5 minutes on
# each of several such mutants)
timeout=300; [ "${MUTANTS_TESTS:-all}" = lib ] && timeout=60
cd $tree && CARGO_TARGET_DIR=../mutants-target-$crate $mutants mutants --in-place --shard $shard --sharding round-robin \
    --no-shuffle --profile mutants --package $crate "${files[@]}" "${tests[@]}" \
    --output "$out" --timeout $timeout "$@"
