#!/usr/bin/env bash
# `just mutants CRATE SHARD [ARGS...]`: cargo-mutants on a disposable checkout of HEAD
# (target/mutants-tree-CRATE), one round-robin shard at a time; further arguments go to
# cargo-mutants. Results land in target/mutants/CRATE-SHARD/mutants.out.
set -euo pipefail
crate=$1 shard=$2; shift 2
test -x .tools/bin/cargo-mutants || cargo install --locked cargo-mutants@27.1.0 --root .tools
mutants=$PWD/.tools/bin/cargo-mutants
tree=target/mutants-tree-$crate
if [ -d $tree ]; then git -C $tree checkout --quiet --detach $(git rev-parse HEAD); else git worktree add --detach $tree HEAD; fi
case $crate in
  theory) files=(--file 'crates/theory/src/*.rs'); tests=() ;;
  analysis) files=(); for f in nulls bootstrap selection snr trend power continuous metrics claims stats seeds; do files+=(--file crates/analysis/src/$f.rs); done
            tests=(--cargo-test-arg=--lib --cargo-test-arg=--test=analysis --cargo-test-arg=--test=nulls_simulations) ;;
  *) echo "error: mutants: crate is theory or analysis, not $crate" >&2; exit 2 ;;
esac
mkdir -p target/mutants
cd $tree && CARGO_TARGET_DIR=../mutants-target-$crate $mutants mutants --in-place --shard $shard --sharding round-robin \
    --no-shuffle --profile mutants --package $crate "${files[@]}" "${tests[@]}" \
    --output ../mutants/$crate-${shard/\//-of-} --timeout 400 "$@"
