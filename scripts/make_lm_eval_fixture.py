#!/usr/bin/env python3
"""A synthetic lm-evaluation-harness output folder for the report checks (scripts/test_reports.sh).

    python3 scripts/make_lm_eval_fixture.py --out DIR [--seed 0] [--steps 100,200,300,400] [--docs 60]

It lays the files out as `lm_eval --model hf --model_args pretrained=runs/fixture/hf/step_000100
--tasks arc_easy,piqa --output_path DIR --log_samples` (lm-eval 0.4.13) writes them, one run
per checkpoint:

    DIR/runs__fixture__hf__step_000100/results_2025-01-01T12-00-00.000100.json
    DIR/runs__fixture__hf__step_000100/samples_arc_easy_2025-01-01T12-00-00.000100.jsonl
    DIR/runs__fixture__hf__step_000100/samples_piqa_2025-01-01T12-00-00.000100.jsonl
    ...

Two multiple-choice tasks (arc_easy: 4 options, piqa: 2), `--docs` made-up questions each. A
sample line has lm-eval's fields: doc_id, doc, target (the gold index as a string), arguments
({"gen_args_i": {"arg_0": context, "arg_1": " choice"}}), resps ([[["loglik", "False"]], ...]),
filtered_resps ([["loglik", "False"], ...]), filter, metrics, doc_hash, prompt_hash,
target_hash, acc and acc_norm (lm-eval's decisions: argmax of the log-likelihoods, and of the
log-likelihoods per character of the choice). A results file has `results` ({task: {"acc,none",
"acc_stderr,none", "acc_norm,none", "acc_norm_stderr,none", "alias"}}), and `config.model_args`
as 0.4.13's JSON object whose `pretrained` path names the step (step_000100), plus the other
top-level fields lm-eval writes. The log-likelihoods come from a seeded model of a skill that
grows over the checkpoints plus per-checkpoint noise, so decisions flip between checkpoints.
Standard library only; the same arguments give the same bytes.
"""

import argparse
import hashlib
import json
import math
import random
import sys
from pathlib import Path

WORDS = (
    "water light plant heat stone metal river cloud seed animal energy force sound ice wind sun "
    "moon soil salt sugar glass wood paper rope bottle cup spoon towel door window leaf root"
).split()
TASKS = {"arc_easy": 4, "piqa": 2}


def task_set(n):
    """The two tasks above, or with --tasks N != 2 (the ingest bench's folders), N four-option
    tasks arc_easy_00, arc_easy_01, ... made like arc_easy."""
    return dict(TASKS) if n == 2 else {f"arc_easy_{i:02d}": 4 for i in range(n)}


def sha(s):
    return hashlib.sha256(s.encode("utf-8")).hexdigest()


def phrase(rng, lo, hi):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def make_docs(rng, task, n):
    """(doc, context, choices, gold) per question, as the task's doc_to_* functions give them."""
    out = []
    for i in range(n):
        if task.startswith("arc_easy"):
            choices = [phrase(rng, 1, 4) for _ in range(4)]
            gold = rng.randrange(4)
            question = f"Which of these is made of {phrase(rng, 2, 5)}?"
            doc = {
                "id": f"Synthetic_{1000 + i}",
                "question": question,
                "choices": {"text": choices, "label": ["A", "B", "C", "D"]},
                "answerKey": "ABCD"[gold],
            }
            context = f"Question: {question}\nAnswer:"
        else:
            choices = [f"use the {phrase(rng, 2, 6)}" for _ in range(2)]
            gold = rng.randrange(2)
            goal = f"How do you keep {phrase(rng, 1, 3)} dry?"
            doc = {"goal": goal, "sol1": choices[0], "sol2": choices[1], "label": gold}
            context = f"Question: {goal}\nAnswer:"
        out.append((doc, context, choices, gold))
    return out


def argmax(xs):
    return max(range(len(xs)), key=lambda i: (xs[i], -i))  # the first of equal maxima, as numpy


def stderr_of(flags):
    n = len(flags)
    mean = sum(flags) / n
    var = sum((f - mean) ** 2 for f in flags) / (n - 1)
    return math.sqrt(var / n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="the output folder (new or empty)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", default="100,200,300,400", help="the checkpoint steps, comma-separated")
    ap.add_argument("--docs", type=int, default=60, help="questions per task")
    ap.add_argument("--tasks", type=int, default=2, help="2: arc_easy and piqa; else that many arc_easy-like tasks")
    args = ap.parse_args()
    TASKS = task_set(args.tasks)
    steps = [int(s) for s in args.steps.split(",")]
    if len(set(steps)) != len(steps) or args.docs < 2:
        sys.exit("make_lm_eval_fixture: the steps must differ and --docs be at least 2")
    if args.out.exists() and any(args.out.iterdir()):
        sys.exit(f"make_lm_eval_fixture: {args.out} is not empty")

    rng = random.Random(args.seed)
    docs = {t: make_docs(rng, t, args.docs) for t in TASKS}
    # per question: how hard it is, and how much each option's text costs per character
    hardness = {t: [rng.gauss(0.0, 1.0) for _ in docs[t]] for t in TASKS}
    per_char = {t: [[rng.uniform(0.6, 1.4) for _ in d[2]] for d in docs[t]] for t in TASKS}
    files = lines = 0
    for k, step in enumerate(sorted(steps)):
        skill = 2.5 * (1 - math.exp(-1.5 * (k + 1) / len(steps)))
        pretrained = f"runs/fixture/hf/step_{step:06d}"
        folder = args.out / pretrained.replace("/", "__")
        folder.mkdir(parents=True)
        stamp = f"2025-01-{k + 1:02d}T12-00-00.{step % 1000000:06d}"
        results, task_hashes = {}, {}
        for task, n_options in TASKS.items():
            samples, acc, acc_norm, hashes = [], [], [], []
            for doc_id, (doc, context, choices, gold) in enumerate(docs[task]):
                lls = []
                for j, choice in enumerate(choices):
                    ll = -per_char[task][doc_id][j] * len(choice) * 0.35 + rng.gauss(0.0, 1.2)
                    if j == gold:
                        ll += skill - hardness[task][doc_id]
                    lls.append(round(ll, 4))
                pred = argmax(lls)
                pred_norm = argmax([ll / len(c) for ll, c in zip(lls, choices)])
                a, an = float(pred == gold), float(pred_norm == gold)
                acc.append(a)
                acc_norm.append(an)
                greedy = ["False"] * n_options
                line = {
                    "doc_id": doc_id,
                    "doc": doc,
                    "target": str(gold),
                    "arguments": {
                        f"gen_args_{j}": {"arg_0": context, "arg_1": f" {c}"} for j, c in enumerate(choices)
                    },
                    "resps": [[[str(ll), g]] for ll, g in zip(lls, greedy)],
                    "filtered_resps": [[str(ll), g] for ll, g in zip(lls, greedy)],
                    "filter": "none",
                    "metrics": ["acc", "acc_norm"],
                    "doc_hash": sha(json.dumps(doc, indent=2, ensure_ascii=False)),
                    "prompt_hash": sha(context),
                    "target_hash": sha(str(gold)),
                    "acc": a,
                    "acc_norm": an,
                }
                samples.append(json.dumps(line, ensure_ascii=False))
                hashes.append(line["doc_hash"] + line["prompt_hash"] + line["target_hash"])
            (folder / f"samples_{task}_{stamp}.jsonl").write_text("\n".join(samples) + "\n", encoding="utf-8")
            files += 1
            lines += len(samples)
            task_hashes[task] = sha("".join(hashes))
            results[task] = {
                "alias": task,
                "acc,none": sum(acc) / len(acc),
                "acc_stderr,none": stderr_of(acc),
                "acc_norm,none": sum(acc_norm) / len(acc_norm),
                "acc_norm_stderr,none": stderr_of(acc_norm),
            }
        start = 1735732800.0 + 86400 * k  # 2025-01-01T12:00:00Z, a day per checkpoint
        doc = {
            "results": results,
            "group_subtasks": {t: [] for t in TASKS},
            "configs": {
                t: {
                    "task": t,
                    "dataset_path": "synthetic",
                    "output_type": "multiple_choice",
                    "doc_to_text": "Question: {{question}}\nAnswer:",
                    "target_delimiter": " ",
                    "num_fewshot": 0,
                    "metric_list": [
                        {"metric": "acc", "aggregation": "mean", "higher_is_better": True},
                        {"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True},
                    ],
                    "metadata": {"version": 1.0},
                }
                for t in TASKS
            },
            "versions": {t: 1.0 for t in TASKS},
            "n-shot": {t: 0 for t in TASKS},
            "higher_is_better": {t: {"acc": True, "acc_norm": True} for t in TASKS},
            "n-samples": {t: {"original": args.docs, "effective": args.docs} for t in TASKS},
            "config": {
                "model": "hf",
                "model_args": {"pretrained": pretrained, "dtype": "float32"},
                "model_num_parameters": 236544,
                "model_dtype": "torch.float32",
                "model_revision": "main",
                "model_sha": "",
                "batch_size": "16",
                "batch_sizes": [],
                "device": "cpu",
                "use_cache": None,
                "limit": None,
                "bootstrap_iters": 100000,
                "gen_kwargs": {},
                "random_seed": 0,
                "numpy_seed": 1234,
                "torch_seed": 1234,
                "fewshot_seed": 1234,
            },
            "git_hash": None,
            "date": start,
            "task_hashes": task_hashes,
            "model_source": "hf",
            "model_name": pretrained,
            "model_name_sanitized": folder.name,
            "system_instruction": None,
            "system_instruction_sha": None,
            "fewshot_as_multiturn": False,
            "chat_template": None,
            "chat_template_sha": None,
            "start_time": start,
            "end_time": start + 12.5,
            "total_evaluation_time_seconds": "12.5",
        }
        (folder / f"results_{stamp}.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False), encoding="utf-8")
        files += 1
    print(
        f"make_lm_eval_fixture: {args.out}: {len(steps)} checkpoints x {len(TASKS)} tasks "
        f"({', '.join(TASKS)}) x {args.docs} docs, {files} files, {lines} sample lines (seed {args.seed})"
    )


if __name__ == "__main__":
    main()
