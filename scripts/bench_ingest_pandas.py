#!/usr/bin/env python3
"""The anchor of `bench_ingest`: what a plain pandas script does with an lm-eval output folder.

Reads every `samples_<task>_<stamp>.jsonl` below the folder with pandas' JSON-lines reader, takes
each checkpoint's step from its folder name (`..._step_<N>`) and each sample's lm-eval `acc`, and
computes per task only the task MTV (mean |accuracy change| between consecutive checkpoints) and
the mean example flip rate (the share of an example's consecutive checkpoint pairs that change):
no intervals, no nulls, no decisions. Prints one line per task.

usage: bench_ingest_pandas.py <folder>
"""
import re
import sys
from pathlib import Path

import pandas as pd


def main():
    root = Path(sys.argv[1])
    frames = []
    for f in sorted(root.rglob("samples_*.jsonl")):
        step = int(re.search(r"step_?(\d+)", str(f.parent)).group(1))
        task = re.match(r"samples_(.+)_\d{4}-\d+-\d+T", f.name).group(1)
        df = pd.read_json(f, lines=True)
        frames.append(pd.DataFrame({"step": step, "task": task, "doc_id": df["doc_id"], "acc": df["acc"]}))
    data = pd.concat(frames, ignore_index=True)
    for task, g in data.groupby("task"):
        wide = g.pivot(index="doc_id", columns="step", values="acc").sort_index(axis=1)
        scores = wide.mean(axis=0).to_numpy()
        mtv = abs(scores[1:] - scores[:-1]).mean()
        flips = (wide.diff(axis=1).iloc[:, 1:] != 0).mean(axis=1).mean()
        print(f"{task}: {wide.shape[1]} checkpoints x {wide.shape[0]} examples, MTV {mtv:.4f}, flip rate {flips:.4f}")


if __name__ == "__main__":
    main()
