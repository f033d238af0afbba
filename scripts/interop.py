"""Parity of our checkpoints with the tools practitioners use (`just interop`).

On three checkpoints of a run (the smoke run in CI) this
1. scores them with `lm eval` on one task (a fixed subset of its examples),
2. exports each with `lm export` to a Hugging Face folder,
3. runs the real `lm_eval --model hf ... --log_samples` on the folders, with a local task built
   from the same examples (`--include_path`),
4. runs `analysis report` on the lm_eval output folder and on our eval tables,
   `integrate average` on the Hugging Face folders and `integrate ensemble` on the lm_eval output,
and checks three parity numbers, failing loudly if one is off:
- max |logit| difference between transformers' LlamaForCausalLM on an exported folder and our
  model on the same tokens (< 1e-4);
- agreement of per-example decisions (acc) between lm_eval and `lm eval` (>= 99.5%);
- the example-level MTV (mean flip rate) of `analysis report` on lm_eval's folder and on our
  tables (equal, up to what the disagreeing decisions can move it).
Every command is printed before it runs; the numbers go to <work>/parity.json.
"""

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd


def read_examples(path):
    """An example table without its lists of strings (`targets`, `score_names`, table version 4):
    polars writes them as list<string_view>, which pandas cannot convert (pyarrow 'Not implemented
    type for Arrow list to pandas'); the parity checks need none of them."""
    import pyarrow.parquet as pq
    cols = [c for c in pq.read_schema(path).names if c not in ("targets", "score_names")]
    return pd.read_parquet(path, columns=cols)


def sh(*cmd, log=None):
    """Runs a command, printed first; with `log`, its output goes there (shown if it fails)."""
    print("$ " + " ".join(str(c) for c in cmd) + (f"   > {log}" if log else ""), flush=True)
    t = time.time()
    if log is None:
        subprocess.run([str(c) for c in cmd], check=True)
    else:
        with open(log, "w") as f:
            r = subprocess.run([str(c) for c in cmd], stdout=f, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            sys.stderr.write(Path(log).read_text()[-6000:])
            fail(f"{cmd[0]} exited with {r.returncode} (log: {log})")
    return time.time() - t


def fail(msg):
    print(f"interop: FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", default="runs/smoke")
    ap.add_argument("--work", default="runs/interop")
    ap.add_argument("--task", default="arc_easy")
    ap.add_argument("--steps", default="100,150,200")
    ap.add_argument("--examples", type=int, default=200)
    ap.add_argument("--tasks-dir", default="data/tasks")
    ap.add_argument("--bin", default="target/release")
    args = ap.parse_args()
    for var in ["HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"]:
        os.environ.setdefault(var, "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    lm, analysis, integrate = (f"{args.bin}/{b}" for b in ["lm", "analysis", "integrate"])
    run, work = Path(args.run), Path(args.work)
    steps = [int(s) for s in args.steps.split(",")]
    if len(steps) < 3:
        fail("--steps: give at least three checkpoints")
    timings = {}

    # 1. the checkpoints, one task, and `lm eval` on them
    ckpts = work / "checkpoints"
    ckpts.mkdir(parents=True, exist_ok=True)
    for s in steps:
        side = run / "checkpoints" / f"step_{s:06d}.json"
        if not side.is_file():
            fail(f"{side}: missing; train the run first (`just reproduce smoke`)")
        meta = json.loads(side.read_text())
        for f in [side, side.parent / meta["weights_file"]]:
            dst = ckpts / f.name
            if not dst.exists() or dst.stat().st_size != f.stat().st_size or dst.stat().st_mtime < f.stat().st_mtime:
                shutil.copy2(f, dst)
    manifest = json.loads((Path(args.tasks_dir) / "manifest.json").read_text())
    info = next((t for t in manifest if t["name"] == args.task), None)
    if info is None:
        fail(f"{args.tasks_dir}/manifest.json: no task {args.task}; run `just data`")
    if info["kind"] != "multiple_choice":
        fail(f"task {args.task} is {info['kind']}; pick a multiple-choice task with one context per example")
    tasks = work / "tasks"
    tasks.mkdir(exist_ok=True)
    shutil.copy2(Path(args.tasks_dir) / info["file"], tasks / info["file"])
    (tasks / "manifest.json").write_text(json.dumps([info], indent=2))
    (work / "eval.toml").write_text(f'tasks = "{tasks}"\nseed = 1234\nshots = 0\nmax_examples = {args.examples}\nbatch_tokens = 8192\n')
    timings["lm eval"] = sh(lm, "eval", "--checkpoints", ckpts, "--config", work / "eval.toml", "--out", work / "eval", "--quiet")
    ours = read_examples(work / "eval" / "examples.parquet")

    # 2. export
    hf = work / "hf"
    t = time.time()
    for s in steps:
        sh(lm, "export", ckpts / f"step_{s:06d}.json", hf / f"step_{s:06d}", "--force")
    timings["lm export"] = time.time() - t

    # 3. lm_eval on the exported folders, with a local task of the same examples
    by_id = {}
    for line in (tasks / info["file"]).read_text().splitlines():
        if line.strip():
            ex = json.loads(line)
            by_id[ex["id"]] = ex
    ids = sorted(set(ours.loc[ours.task == args.task, "example_id"]))
    name = f"interop_{args.task}"
    lm_tasks = work / "lm_eval_tasks"
    lm_tasks.mkdir(exist_ok=True)
    docs = []
    for i in ids:
        ex = by_id[i]
        ctx = {c["context"] for c in ex["choices"]}
        conts = [c["continuation"] for c in ex["choices"]]
        if len(ctx) != 1 or not all(c.startswith(" ") for c in conts):
            fail(f"{args.task} example {i}: lm_eval's multiple_choice needs one context and continuations after a space")
        docs.append({"id": i, "context": ctx.pop(), "choices": [c[1:] for c in conts], "gold": ex["gold"]})
    data = (lm_tasks / f"{name}.jsonl").resolve()
    data.write_text("".join(json.dumps(d) + "\n" for d in docs))
    (lm_tasks / f"{name}.yaml").write_text(
        f"task: {name}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    validation: {data}\n"
        "validation_split: validation\noutput_type: multiple_choice\n"
        "doc_to_text: context\ndoc_to_choice: choices\ndoc_to_target: gold\ntarget_delimiter: \" \"\n"
        "metric_list:\n  - metric: acc\n    aggregation: mean\n    higher_is_better: true\n"
        "  - metric: acc_norm\n    aggregation: mean\n    higher_is_better: true\n"
    )
    out = work / "lm_eval"
    shutil.rmtree(out, ignore_errors=True)
    t = time.time()
    for s in steps:
        sh(Path(sys.executable).parent / "lm_eval", "--model", "hf", "--model_args", f"pretrained={hf / f'step_{s:06d}'},dtype=float32", "--device", "cpu", "--batch_size", "16",
           "--include_path", lm_tasks, "--tasks", name, "--log_samples", "--output_path", out, log=work / f"lm_eval-step_{s:06d}.log")
    timings["lm_eval"] = time.time() - t

    # 4. the analysis and the remedies on the folders
    sh(analysis, "report", out, "--out", work / "analysis-lm_eval", "--bootstrap", "200", "--html")
    # the page of the lm_eval run, opened in headless Chromium (scripts/check_report.py)
    sh("bash", "scripts/setup-browser.sh")
    sh(sys.executable, "scripts/check_report.py", work / "analysis-lm_eval" / "report.html", "--screenshot", work / "analysis-lm_eval" / "report.png")
    sh(analysis, "report", work / "eval", "--out", work / "analysis-ours", "--bootstrap", "200")
    sh(integrate, "average", "--window", len(steps), *[hf / f"step_{s:06d}" for s in steps], "-o", work / "hf-average", "--force")
    sh(integrate, "ensemble", "--eval", out, "--windows", len(steps), "--out", work / "ensembled-lm_eval")
    sh(integrate, "ensemble", "--eval", work / "eval", "--windows", len(steps), "--out", work / "ensembled-ours")

    # parity 1: logits of transformers on the exported folder against ours, same tokens
    import torch
    from safetensors.numpy import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    last = steps[-1]
    # solved examples one after another: more than the context, so every position is compared
    text = "\n\n".join(d["context"] + " " + d["choices"][d["gold"]] for d in docs[:12])
    sh(lm, "logits", "--checkpoint", ckpts / f"step_{last:06d}.json", "--text", text, "--out", work / "logits.json")
    mine = json.loads((work / "logits.json").read_text())
    tok = AutoTokenizer.from_pretrained(hf / f"step_{last:06d}")
    model = AutoModelForCausalLM.from_pretrained(hf / f"step_{last:06d}", dtype=torch.float32).eval()
    hf_ids = tok(text, add_special_tokens=False)["input_ids"]
    if hf_ids[: len(mine["tokens"])] != mine["tokens"]:
        fail(f"transformers' tokenizer encodes the text as {hf_ids[:20]}..., ours as {mine['tokens'][:20]}...")
    with torch.no_grad():
        theirs = model(torch.tensor([mine["tokens"]])).logits[0].numpy()
    max_logit_diff = float(np.abs(theirs - np.array(mine["logits"], dtype=np.float32)).max())
    # and the average of the folders is the mean of their weights and loads
    avg = load_file(work / "hf-average" / "model.safetensors")
    ins = [load_file(hf / f"step_{s:06d}" / "model.safetensors") for s in steps]
    avg_diff = max(float(np.abs(avg[k] - np.mean([w[k] for w in ins], axis=0)).max()) for k in avg)
    AutoModelForCausalLM.from_pretrained(work / "hf-average", dtype=torch.float32)
    AutoTokenizer.from_pretrained(work / "hf-average")

    # parity 2: per-example decisions of lm_eval against `lm eval`
    theirs_rows = []
    for s in steps:
        files = sorted(glob.glob(str(out / f"*step_{s:06d}" / f"samples_{name}_*.jsonl")))
        if not files:
            fail(f"{out}: no lm_eval samples for step {s}")
        for line in Path(files[-1]).read_text().splitlines():
            r = json.loads(line)
            lls = [float(x[0]) for x in r["filtered_resps"]]
            theirs_rows.append({"step": s, "example_id": r["doc"]["id"], "acc_lm_eval": r["acc"] > 0.5, "acc_norm_lm_eval": r["acc_norm"] > 0.5, "lls_lm_eval": lls})
    theirs_df = pd.DataFrame(theirs_rows)
    both = ours[ours.task == args.task].merge(theirs_df, on=["step", "example_id"], how="outer", indicator=True)
    if (both["_merge"] != "both").any():
        fail(f"lm_eval and lm eval scored different examples: {both[both._merge != 'both'][['step', 'example_id']].head()}")
    agree = float((both["correct"] == both["acc_lm_eval"]).mean())
    agree_norm = float((both["correct_norm"] == both["acc_norm_lm_eval"]).mean())
    ll_diff = float(max(np.abs(np.array(a) - np.array(b)).max() for a, b in zip(both["logliks"], both["lls_lm_eval"])))
    disagree = int((both["correct"] != both["acc_lm_eval"]).sum())

    # parity 3: example MTV of `analysis report` on lm_eval's folder and on our tables
    def row(path, task):
        m = pd.read_csv(path)
        r = m[(m.task == task) & (m.window == "all") & (m.metric == "acc")]
        if len(r) != 1:
            fail(f"{path}: no all-checkpoint acc row for {task}")
        return r.iloc[0]

    a, b = row(work / "analysis-ours" / "task_metrics.csv", args.task), row(work / "analysis-lm_eval" / "task_metrics.csv", name)
    n = len(ids)
    # one disagreeing decision moves at most two of an example's m - 1 transitions
    allowed = 2 * disagree / (n * (len(steps) - 1))
    mtv_diff = abs(a.mean_flip_rate - b.mean_flip_rate)
    ens_a = read_examples(work / "ensembled-ours" / f"k{len(steps)}" / "examples.parquet")
    ens_b = read_examples(work / "ensembled-lm_eval" / f"k{len(steps)}" / "examples.parquet")
    ens_acc = (float(ens_a.correct.mean()), float(ens_b.correct.mean()))

    result = {
        "task": args.task, "examples": n, "steps": steps,
        "max_logit_diff": max_logit_diff, "logit_tokens": len(mine["tokens"]),
        "decision_agreement": agree, "decision_agreement_acc_norm": agree_norm, "decisions_compared": len(both),
        "max_loglik_diff": ll_diff,
        "example_mtv_ours": float(a.mean_flip_rate), "example_mtv_lm_eval": float(b.mean_flip_rate), "example_mtv_diff": mtv_diff,
        "task_mtv_ours": float(a.mtv), "task_mtv_lm_eval": float(b.mtv),
        "ensemble_accuracy_ours_lm_eval": ens_acc,
        "average_max_weight_diff": avg_diff,
        "seconds": timings,
    }
    (work / "parity.json").write_text(json.dumps(result, indent=2))
    print(f"\n== interop parity on {n} examples of {args.task}, checkpoints {steps} ({work}/parity.json)")
    print(f"   max |logit| difference, transformers vs lm ({len(mine['tokens'])} tokens): {max_logit_diff:.2e}   (must be < 1e-4)")
    print(f"   per-example decisions equal, lm_eval vs lm eval: {agree:.2%} of {len(both)} (acc_norm {agree_norm:.2%}; max |loglik| difference {ll_diff:.2e})   (must be >= 99.5%)")
    print(f"   example MTV, analysis report on lm_eval's folder vs our tables: {b.mean_flip_rate:.4f} vs {a.mean_flip_rate:.4f} (|diff| {mtv_diff:.4f}; task MTV {b.mtv:.4f} vs {a.mtv:.4f})")
    print(f"   k={len(steps)} ensemble accuracy, from lm_eval samples vs our tables: {ens_acc[1]:.4f} vs {ens_acc[0]:.4f}; average of the folders = mean of their weights (max diff {avg_diff:.1e})")
    bad = []
    if not max_logit_diff < 1e-4:
        bad.append(f"max logit difference {max_logit_diff:.2e} >= 1e-4")
    if not agree >= 0.995:
        bad.append(f"decision agreement {agree:.4f} < 0.995")
    if mtv_diff > allowed + 1e-12:
        bad.append(f"example MTV differs by {mtv_diff:.4f}, more than the {disagree} disagreeing decisions allow ({allowed:.4f})")
    if avg_diff > 1e-6:
        bad.append(f"the average of the folders is not the mean of their weights ({avg_diff:.1e})")
    if bad:
        fail("; ".join(bad))
    print("interop: all parity checks passed")


if __name__ == "__main__":
    main()
