#!/usr/bin/env bash
# The HTML report checks of `just test`: `analysis report --html` on two fixtures, each report
# opened in headless Chromium by scripts/check_report.py (no console errors, every plot and task
# section there, not blank, nothing loaded from outside the file).
#   1. scripts/setup-browser.sh (installs chromium if missing)
#   2. check_report.py --self-test (proves the checker fails on a bad report)
#   3. the committed smoke run (experiments/tests/fixtures/smoke): 2 plots per task
#   4. a synthetic lm-eval --log_samples folder (scripts/make_lm_eval_fixture.py): 2 plots per task
# Screenshots and the HTML files are kept in runs/report-check/. Needs the release build.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${ANALYSIS_BIN:-target/release/analysis}  # another build of `analysis` may be named here
keep=runs/report-check
[ -x "$bin" ] || { echo "test_reports: $bin missing; build first: cargo build --release --workspace --all-targets" >&2; exit 1; }

step() { echo "== test_reports: $*"; }
fail() { echo "test_reports: FAILED: $*" >&2; exit 1; }

step "browser"
bash scripts/setup-browser.sh

step "check_report.py --self-test"
python3 scripts/check_report.py --self-test

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$keep"
rm -f "$keep"/*.png "$keep"/*.html

# tasks of an analysis folder: the distinct `task` values of task_metrics.csv; each must also
# have per-example rows in example_metrics.csv (both fixtures have per-example data)
tasks_of() {
  python3 - "$1" <<'EOF'
import csv, sys
from pathlib import Path
out = Path(sys.argv[1])
tasks = {r["task"] for r in csv.DictReader(open(out / "task_metrics.csv"))}
examples = {r["task"] for r in csv.DictReader(open(out / "example_metrics.csv"))}
if not tasks:
    sys.exit(f"{out}/task_metrics.csv has no tasks")
if tasks - examples:
    sys.exit(f"{out}: no per-example rows for {', '.join(sorted(tasks - examples))}")
print(len(tasks))
EOF
}

# check NAME INPUT [report args...]: the report with --html, and its HTML check
check() {
  local name=$1 input=$2
  shift 2
  local t0=$SECONDS
  "$bin" report "$input" --out "$tmp/$name" --html "$@" >"$tmp/$name.log" 2>&1 \
    || { cat "$tmp/$name.log" >&2; fail "analysis report $input --html"; }
  [ -f "$tmp/$name/report.html" ] || fail "analysis report $input --html wrote no $tmp/$name/report.html"
  local n
  n=$(tasks_of "$tmp/$name") || fail "$name: the report's tables"
  echo "$name: analysis report $input --html: $n tasks ($((SECONDS - t0)) s)"
  cp "$tmp/$name/report.html" "$keep/$name.html"
  python3 scripts/check_report.py "$keep/$name.html" --expect-plots $((2 * n)) --expect-tasks "$n" \
    --screenshot "$keep/$name.png" || fail "$name: the HTML report (kept at $keep/$name.html)"
}

step "the smoke run (experiments/tests/fixtures/smoke)"
check smoke experiments/tests/fixtures/smoke

step "an lm-eval --log_samples folder (scripts/make_lm_eval_fixture.py)"
python3 scripts/make_lm_eval_fixture.py --out "$tmp/lm_eval"
check lm_eval "$tmp/lm_eval"

echo "test_reports: ok: the self-test and both HTML reports pass; screenshots in $keep/"
