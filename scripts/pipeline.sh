#!/usr/bin/env bash
# The stages of one run, written once. `just reproduce`'s chain, `just study` (scripts/study.sh)
# and the re-analysis of committed results (scripts/results.sh) all run them through this file:
#
#   train -> eval -> average -> eval-averaged -> ensemble -> analysis -> compare [-> pack]
#
#   train          lm train: checkpoints under <run>/checkpoints (resumes an interrupted run)
#   eval           lm eval of the checkpoints: <run>/eval
#   average        integrate sweep: averages of the last k = 4, 16 checkpoints, <run>/averaged/k<K>
#   eval-averaged  lm eval of each averaged/k<K>: <run>/eval-avg-k<K> (lm eval's default folder)
#   ensemble       integrate ensemble: mean of distributions (k = 1..16) and majority vote (4, 16)
#   analysis       analysis report --html: <run>/analysis (tables, decisions, report.html), its text also in <run>/report.txt
#   compare        analysis compare: single vs smoothing, averages and ensembles, paired
#   pack           analysis pack into the committed results folder (only with --pack)
#
# Folder names come from the run contract (crates/run): the binaries' defaults put each output
# where the next stage looks. Each stage skips what is up to date.
#
# usage: scripts/pipeline.sh --run DIR --config FILE [--eval-config FILE] [--last N|schedule]
#          [--final-from STEP|schedule] [--stages a,b,...] [--stages-csv] [--pack DIR]
set -euo pipefail
lm=target/release/lm integrate=target/release/integrate analysis=target/release/analysis
# the averaging windows of the sweep and the ensembles' windows (mean of distributions, vote)
average_windows=4,16 ensemble_windows=1,2,4,8,16 vote_windows=4,16
run= config= eval_config=configs/eval.toml last= final_from= pack= stages_csv=
stages=train,eval,average,eval-averaged,ensemble,analysis,compare
die() { echo "error: pipeline: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --run) run=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --eval-config) eval_config=$2; shift 2 ;;
    --last) last=$2; shift 2 ;;
    --final-from) final_from=$2; shift 2 ;;
    --stages) stages=$2; shift 2 ;;
    --stages-csv) stages_csv=1; shift ;;
    --pack) pack=$2; shift 2 ;;
    *) die "unknown argument $1 (see the usage at the top of $0)" ;;
  esac
done
[ -n "$run" ] && [ -n "$config" ] || die "--run and --config are required"
[ -f "$config" ] || die "no config $config"
known=" train eval average eval-averaged ensemble analysis compare "
for stage in ${stages//,/ }; do
  [[ $known == *" $stage "* ]] || die "unknown stage $stage; the stages are $(echo $known | tr " " ",")"
done
[ -z "$pack" ] || [ ! -e "$pack" ] || die "$pack exists; results are never overwritten (remove it to pack again)"
# `schedule`: the final stage as the config's eval schedule defines it
[ "$last" = schedule ] && last=$($lm schedule --config $config --final-count)
[ "$final_from" = schedule ] && final_from=$($lm schedule --config $config --final-start)

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs | tr ',' ' ') threads=$(nproc)
if [ -n "$stages_csv" ]; then mkdir -p $run; [ -f $run/stages.csv ] || echo "stage,seconds,threads,host_cpu" > $run/stages.csv; fi
t0=$SECONDS names=() secs=()
# runs one timed step: its name, then the command
timed() {
  local name=$1 t=$SECONDS; shift
  echo "== $name ($((SECONDS - t0)) s so far)"
  "$@"
  names+=("$name"); secs+=($((SECONDS - t)))
  [ -z "$stages_csv" ] || echo "$name,$((SECONDS - t)),$threads,$cpu" >> $run/stages.csv
}
eval_averaged() {
  for k in ${average_windows//,/ }; do
    local dir=$run/averaged/k$k
    [ -d $dir ] || die "no averaged checkpoints $dir; run the average stage first"
    timed "eval_avg_k$k" $lm eval --checkpoints $dir --config $eval_config
  done
}
ensemble() {
  $integrate ensemble --eval $run/eval --windows $ensemble_windows
  $integrate ensemble --eval $run/eval --windows $vote_windows --rule vote
}
report() { $analysis report $run --html ${final_from:+--final-from $final_from} | tee $run/report.txt; }
compare() { $analysis compare $run > $run/analysis/stability.txt; }

for stage in ${stages//,/ }; do
  case $stage in
    train) timed train $lm train --config $config --out $run ;;
    eval) timed eval $lm eval --checkpoints $run/checkpoints --config $eval_config ;;
    average) timed average $integrate sweep --checkpoints $run/checkpoints --windows $average_windows ${last:+--last $last} ;;
    eval-averaged) eval_averaged ;;
    ensemble) timed ensemble ensemble ;;
    analysis) timed analysis report ;;
    compare) timed compare compare ;;
  esac
done
[ -z "$pack" ] || $analysis pack $run --out $pack
echo "== stages of $run"
for i in "${!names[@]}"; do printf '   %-22s %6d s\n' "${names[$i]}" "${secs[$i]}"; done
printf '   %-22s %6d s\n' total $((SECONDS - t0))
