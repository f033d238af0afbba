"""Parity of greedy generation with the real lm_eval (`just interop`, generate_until).

On three checkpoints of a run (the smoke run in CI) this
1. exports each checkpoint with `lm export` to a Hugging Face folder (reusing the folders
   scripts/interop.py wrote under <work>/hf/ when their weights are the checkpoint's),
2. builds a local lm_eval task of `--examples` held-out paragraphs
   (data/tasks/heldout_continuation.jsonl: the first 25 words of a paragraph as the prompt, the
   next words as the target), `output_type: generate_until`, greedy, 16 new tokens, stop at
   "\\n", metric `exact_match`, and two filters: `none` (take_first) and `first-word` (regex
   `^\\s*(\\S+)`, then take_first),
3. runs the real `lm_eval --model hf ... --log_samples` on each folder,
4. decodes the same prompts with our decoder (`lm generate`, same max_new_tokens and stop) and
   compares the texts with lm_eval's `resps` per doc (fails if fewer than 99% are identical),
5. runs `analysis report` on lm_eval's folder and checks that it read the task per example:
   both filter trails, every doc at every step, the generated texts equal to the samples'
   `filtered_resps` (read back from the report's ingest cache), lm_eval's stored `exact_match`
   carried, and each example's instability score (1 - char F1 of consecutive filtered texts,
   computed here with fuzzywuzzy) equal to the report's.
Every command is printed before it runs; the numbers go to <work>/parity-generate.json.
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

MAX_GEN_TOKS = 16
UNTIL = "\n"
PROMPT_WORDS = 25
FILTERS = ["none", "first-word"]
MIN_IDENTICAL = 0.99


def sh(*cmd, log=None, capture=False):
    """Runs a command, printed first; with `log`, its output goes there (shown if it fails);
    with `capture`, its stdout is returned."""
    shown = [str(c) for c in cmd]
    if "--prompt" in shown:  # `lm generate`: the prompts are long, say how many
        n = shown.count("--prompt")
        shown = shown[: shown.index("--prompt")] + [f"--prompt ... ({n} prompts)"]
    print("$ " + " ".join(shown) + (f"   > {log}" if log else ""), flush=True)
    t = time.time()
    if capture:
        r = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            sys.stderr.write(r.stderr[-6000:])
            fail(f"{cmd[0]} {cmd[1]} exited with {r.returncode}")
        return r.stdout, time.time() - t
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
    print(f"interop_generate: FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


def rust_debug_str(s):
    """The string a Rust `{:?}` of a `str` prints (quoted, escaped), read back."""
    if len(s) < 2 or s[0] != '"' or s[-1] != '"':
        raise ValueError(f"not a quoted Rust string: {s!r}")
    out, i, body = [], 0, s[1:-1]
    simple = {"n": "\n", "r": "\r", "t": "\t", "0": "\0", "\\": "\\", '"': '"', "'": "'"}
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        if e in simple:
            out.append(simple[e])
            i += 2
        elif e == "u":
            end = body.index("}", i)
            out.append(chr(int(body[i + 3 : end], 16)))
            i = end + 1
        else:
            raise ValueError(f"unknown escape \\{e} in {s!r}")
    return "".join(out)


def our_generations(lm, ckpt, prompts, batch=8):
    """`lm generate` on the prompts, `batch` at a time (lm_eval's batch size): their texts."""
    texts, secs = [], 0.0
    pat = re.compile(r'^\[(\d+)\] continuation \(\d+ tokens, (?:stopped at ".*?"|end of text|max_new_tokens)\): (".*")$')
    for b in range(0, len(prompts), batch):
        chunk = prompts[b : b + batch]
        args = [lm, "generate", "--checkpoint", ckpt, "--max-new-tokens", MAX_GEN_TOKS, "--until", "\\n"]
        for p in chunk:
            args += ["--prompt", p]
        out, t = sh(*args, capture=True)
        secs += t
        got = {}
        for line in out.splitlines():
            m = pat.match(line)
            if m:
                got[int(m.group(1))] = rust_debug_str(m.group(2))
        if sorted(got) != list(range(1, len(chunk) + 1)):
            fail(f"lm generate printed continuations {sorted(got)} for {len(chunk)} prompts:\n{out[-2000:]}")
        texts += [got[i + 1] for i in range(len(chunk))]
    return texts, secs


def char_f1(a, b):
    """llm-jp-eval's char_f1 (the instability score's similarity): NFKC, then fuzzywuzzy's
    token_sort_ratio / 100, as crates/textmatch computes it."""
    from fuzzywuzzy import fuzz

    return fuzz.token_sort_ratio(unicodedata.normalize("NFKC", a), unicodedata.normalize("NFKC", b)) / 100.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", default="runs/smoke")
    ap.add_argument("--work", default="runs/interop")
    ap.add_argument("--steps", default="100,150,200")
    ap.add_argument("--examples", type=int, default=40)
    ap.add_argument("--tasks-dir", default="data/tasks")
    ap.add_argument("--bin", default="target/release")
    args = ap.parse_args()
    for var in ["HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"]:
        os.environ.setdefault(var, "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    t_start = time.time()
    lm, analysis = (f"{args.bin}/{b}" for b in ["lm", "analysis"])
    run, work = Path(args.run), Path(args.work)
    steps = [int(s) for s in args.steps.split(",")]
    if len(steps) < 3:
        fail("--steps: give at least three checkpoints")
    work.mkdir(parents=True, exist_ok=True)
    timings = {}

    # 1. the Hugging Face folders: scripts/interop.py's where they hold this checkpoint's weights
    hf = work / "hf"
    ckpts = {}
    t = time.time()
    exported = []
    for s in steps:
        side = run / "checkpoints" / f"step_{s:06d}.json"
        if not side.is_file():
            fail(f"{side}: missing; train the run first (`just reproduce smoke`)")
        ckpts[s] = side
        meta = json.loads(side.read_text())
        folder = hf / f"step_{s:06d}"
        prov = folder / "provenance.json"
        ok = (folder / "model.safetensors").is_file() and prov.is_file() and json.loads(prov.read_text()).get("source", {}).get("weights_sha256") == meta["weights_sha256"]
        if not ok:
            sh(lm, "export", side, folder, "--force")
            exported.append(s)
    timings["lm export"] = time.time() - t
    print(f"Hugging Face folders: {'exported steps ' + ','.join(map(str, exported)) if exported else 'reused'} under {hf}")

    # 2. the local generate_until task
    src = Path(args.tasks_dir) / "heldout_continuation.jsonl"
    if not src.is_file():
        fail(f"{src}: missing; run `just data`")
    docs = []
    for line in src.read_text().splitlines():
        if not line.strip():
            continue
        ex = json.loads(line)
        gold = ex["choices"][ex["gold"]]
        ctx, cont = gold["context"], gold["continuation"].strip()
        if len(ctx.split()) != PROMPT_WORDS or not cont:
            fail(f"{src}: {ex['id']}: expected a {PROMPT_WORDS}-word context and a continuation")
        docs.append({"id": ex["id"], "context": ctx, "target": cont})
        if len(docs) == args.examples:
            break
    if len(docs) < args.examples:
        fail(f"{src}: only {len(docs)} examples, {args.examples} asked")
    name = "interop_generate"
    tasks = work / "lm_eval_gen_tasks"
    tasks.mkdir(exist_ok=True)
    data = (tasks / f"{name}.jsonl").resolve()
    data.write_text("".join(json.dumps(d) + "\n" for d in docs))
    # lm_eval 0.4.13: filters `take_first` (filters/selection.py) and `regex` (filters/extraction.py:
    # regex_pattern, group_select, fallback); exact_match's options ignore_case, ignore_punctuation
    (tasks / f"{name}.yaml").write_text(
        f"task: {name}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    validation: {data}\n"
        "validation_split: validation\noutput_type: generate_until\n"
        "doc_to_text: context\ndoc_to_target: target\n"
        f"generation_kwargs:\n  until:\n    - \"\\n\"\n  max_gen_toks: {MAX_GEN_TOKS}\n  do_sample: false\n"
        "metric_list:\n  - metric: exact_match\n    aggregation: mean\n    higher_is_better: true\n"
        "    ignore_case: false\n    ignore_punctuation: false\n"
        "filter_list:\n"
        "  - name: \"none\"\n    filter:\n      - function: \"take_first\"\n"
        "  - name: \"first-word\"\n    filter:\n      - function: \"regex\"\n"
        "        regex_pattern: \"^\\\\s*(\\\\S+)\"\n        group_select: 0\n        fallback: \"[invalid]\"\n"
        "      - function: \"take_first\"\n"
        "metadata:\n  version: 1.0\n"
    )

    # 3. lm_eval on the exported folders
    out = work / "lm_eval_gen"
    shutil.rmtree(out, ignore_errors=True)
    t = time.time()
    for s in steps:
        sh(Path(sys.executable).parent / "lm_eval", "--model", "hf", "--model_args", f"pretrained={hf / f'step_{s:06d}'},dtype=float32", "--device", "cpu", "--batch_size", "8",
           "--include_path", tasks, "--tasks", name, "--log_samples", "--output_path", out, log=work / f"lm_eval_gen-step_{s:06d}.log")
    timings["lm_eval"] = time.time() - t

    # the samples: per step, per filter, per doc
    samples = {}
    for s in steps:
        files = sorted(glob.glob(str(out / f"*step_{s:06d}" / f"samples_{name}_*.jsonl")))
        if len(files) != 1:
            fail(f"{out}: {len(files)} lm_eval samples files for step {s}, expected 1")
        for line in Path(files[0]).read_text().splitlines():
            r = json.loads(line)
            if docs[r["doc_id"]]["id"] != r["doc"]["id"]:
                fail(f"{files[0]}: doc_id {r['doc_id']} holds {r['doc']['id']}, not the task's doc {r['doc_id']}")
            samples[(s, r["filter"], r["doc"]["id"])] = r
    for s in steps:
        for f in FILTERS:
            missing = [d["id"] for d in docs if (s, f, d["id"]) not in samples]
            if missing:
                fail(f"lm_eval wrote no sample of filter {f} at step {s} for {missing[:5]}")
    ctx_differs = sum(1 for r in samples.values() if r["arguments"]["gen_args_0"]["arg_0"] != r["doc"]["context"])
    if ctx_differs:
        fail(f"lm_eval's prompt differs from the doc's context in {ctx_differs} samples")

    # 4. our decoder on the same prompts
    compared, identical, mismatches = 0, 0, []
    t = time.time()
    ours_by = {}
    for s in steps:
        texts, _ = our_generations(lm, ckpts[s], [d["context"] for d in docs])
        for d, mine in zip(docs, texts):
            theirs = samples[(s, "none", d["id"])]["resps"][0][0]
            ours_by[(s, d["id"])] = mine
            compared += 1
            if mine == theirs:
                identical += 1
            else:
                mismatches.append({"step": s, "doc": d["id"], "lm_generate": mine, "lm_eval": theirs})
    timings["lm generate"] = time.time() - t
    # lm_eval's own filters on its texts, checked here so a wrong filter name fails loudly
    fw = re.compile(r"^\s*(\S+)")
    for (s, f, i), r in samples.items():
        text = r["resps"][0][0]
        want = text if f == "none" else (fw.findall(text)[0].strip() if fw.findall(text) else "[invalid]")
        if r["filtered_resps"] != [want] and r["filtered_resps"] != want:
            fail(f"step {s} {i} filter {f}: filtered_resps {r['filtered_resps']!r}, expected {want!r}")
        if r["exact_match"] != float(r["filtered_resps"][0] == r["target"] if isinstance(r["filtered_resps"], list) else r["filtered_resps"] == r["target"]):
            fail(f"step {s} {i} filter {f}: exact_match {r['exact_match']} for {r['filtered_resps']!r} vs {r['target']!r}")

    # 5. analysis report on lm_eval's folder, then the per-example rows it read (ingest cache)
    rep = work / "analysis-lm_eval-gen"
    t = time.time()
    sh(analysis, "report", out, "--out", rep, "--no-cache")
    timings["analysis report"] = time.time() - t
    cached = work / "analysis-lm_eval-gen-rows"
    shutil.rmtree(cached, ignore_errors=True)
    shutil.rmtree(work / "analysis-lm_eval-gen-rows.ingest", ignore_errors=True)
    sh(analysis, "report", out, "--out", cached, "--cache", work / "analysis-lm_eval-gen-rows.ingest", "--bootstrap", "50")
    import csv

    import pyarrow.parquet as pq

    trails = {"none": name, "first-word": f"{name}/first-word"}
    bad = []
    with open(rep / "task_metrics.csv") as fh:
        tm = list(csv.DictReader(fh))
    for f, trail in trails.items():
        row = [r for r in tm if r["task"] == trail and r["window"] == "all" and r["metric"] == "acc"]
        if len(row) != 1:
            bad.append(f"task_metrics.csv: no all-checkpoint acc row for trail {trail}")
            continue
        row = row[0]
        if (int(row["examples"]), int(row["checkpoints"])) != (len(docs), len(steps)):
            bad.append(f"trail {trail}: {row['examples']} examples x {row['checkpoints']} checkpoints, expected {len(docs)} x {len(steps)}")
        want_final = sum(samples[(steps[-1], f, d["id"])]["exact_match"] for d in docs) / len(docs)
        if abs(float(row["final_score"]) - want_final) > 1e-12:
            bad.append(f"trail {trail}: final acc {row['final_score']}, lm_eval's exact_match mean {want_final}")
    # the instability score of each example: 1 - char F1 of consecutive filtered texts
    with open(rep / "example_metrics.csv") as fh:
        em = {(r["task"], r["example_id"]): r for r in csv.DictReader(fh) if r["window"] == "all"}
    is_checked, is_max_diff = 0, 0.0
    for f, trail in trails.items():
        for i, d in enumerate(docs):
            key = (trail, f"{trail}/{i}")
            if key not in em:
                bad.append(f"example_metrics.csv: no row for {key}")
                continue
            texts = [samples[(s, f, d["id"])]["filtered_resps"][0] for s in steps]
            want = sum(1.0 - char_f1(texts[k], texts[k + 1]) for k in range(len(steps) - 1)) / (len(steps) - 1)
            diff = abs(float(em[key]["instability"]) - want)
            is_max_diff = max(is_max_diff, diff)
            is_checked += 1
    if is_max_diff > 1e-9:
        bad.append(f"the instability scores differ from 1 - char F1 of lm_eval's filtered texts by up to {is_max_diff:.2e}")
    # the rows the reader made: one per (step, trail, doc), output = filtered_resps
    rows = []
    for unit in sorted((work / "analysis-lm_eval-gen-rows.ingest" / "units").glob("*.parquet")):
        tbl = pq.read_table(unit, columns=["step", "task", "example_id", "output", "correct", "score_names", "score_values"])
        rows += tbl.to_pylist()
    keys = {(r["step"], r["task"], r["example_id"]) for r in rows}
    want_keys = {(s, trail, f"{trail}/{i}") for s in steps for trail in trails.values() for i in range(len(docs))}
    if len(rows) != len(want_keys) or keys != want_keys:
        bad.append(f"the reader made {len(rows)} rows ({len(keys)} distinct), expected {len(want_keys)}: missing {sorted(want_keys - keys)[:3]}, extra {sorted(keys - want_keys)[:3]}")
    out_equal = 0
    for r in rows:
        f = next(k for k, v in trails.items() if v == r["task"])
        sample = samples[(r["step"], f, docs[int(r["example_id"][len(r["task"]) + 1 :])]["id"])]
        em_stored = dict(zip(r["score_names"], r["score_values"])).get("exact_match")
        if r["output"] == sample["filtered_resps"][0] and em_stored == sample["exact_match"] and r["correct"] == (sample["exact_match"] >= 1):
            out_equal += 1
    if out_equal != len(want_keys):
        bad.append(f"{len(want_keys) - out_equal} of {len(want_keys)} rows differ from the samples (output vs filtered_resps, exact_match)")

    share = identical / compared
    em_by = {f: {s: sum(samples[(s, f, d["id"])]["exact_match"] for d in docs) for s in steps} for f in FILTERS}
    changed = sum(1 for d in docs if len({samples[(s, "none", d["id"])]["resps"][0][0] for s in steps}) > 1)
    timings["total"] = time.time() - t_start
    result = {
        "task": name, "examples": len(docs), "steps": steps, "max_gen_toks": MAX_GEN_TOKS, "until": [UNTIL],
        "filters": FILTERS,
        "generations_compared": compared, "generations_identical": identical, "identical_share": share,
        "mismatches": mismatches[:20],
        "docs_whose_text_changes_over_steps": changed,
        "exact_match_count": em_by,
        "report_rows": len(rows), "report_rows_equal_to_samples": out_equal,
        "instability_checked": is_checked, "instability_max_diff": is_max_diff,
        "seconds": timings,
    }
    (work / "parity-generate.json").write_text(json.dumps(result, indent=2))
    print(f"\n== interop generate_until parity on {len(docs)} held-out prompts, checkpoints {steps} ({work}/parity-generate.json)")
    print(f"   greedy texts identical, lm generate vs lm_eval (transformers): {identical} of {compared} ({share:.2%})   (must be >= {MIN_IDENTICAL:.0%})")
    print(f"   docs whose text changes between checkpoints: {changed} of {len(docs)}; exact_match hits per filter and step: {em_by}")
    print(f"   analysis report: trails {list(trails.values())}, {len(rows)} rows read, {out_equal} equal to the samples (filtered_resps, exact_match); "
          f"instability of {is_checked} examples = 1 - char F1 of consecutive filtered texts (max diff {is_max_diff:.1e})")
    print(f"   seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))
    if share < MIN_IDENTICAL:
        for m in mismatches[:5]:
            print(f"   differs: {m}", file=sys.stderr)
        bad.append(f"only {identical} of {compared} generations identical ({share:.2%} < {MIN_IDENTICAL:.0%})")
    if bad:
        fail("; ".join(bad))
    print("interop_generate: all checks passed")


if __name__ == "__main__":
    main()
