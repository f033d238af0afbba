#!/usr/bin/env python3
"""The mutation table of crates/theory/README.md from whole-file runs of `just mutants analysis`.

Each file `F` was run as a unit-test pass (`MUTANTS_TESTS=lib`) and then `--iterate` with every
test, both into target/mutants/analysis-F: the first pass is kept as pass1 (or, from runs before
that copy, as cargo-mutants' mutants.out.old) and the second is mutants.out. A mutant is caught if
either pass caught it, unviable if the first found it would not build; missed and timed out are
the second pass's verdicts. A file counts once
both passes are done (the `complete` file the driver leaves). Survivors retested after new tests
(`-F` on their names into target/mutants/analysis-F.retest) and caught there are counted as killed
by a new test. Prints a markdown table (one row per file, then the total) and the mutants still
missed.

    python3 scripts/mutants_table.py [target/mutants]
"""
import pathlib
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/mutants")


def lines(d, name):
    p = d / f"{name}.txt"
    return [l for l in p.read_text().splitlines() if l.strip()] if p.is_file() else []


rows, missed_all = [], []
for d in sorted(root.glob("analysis-*")):
    f = d.name[len("analysis-"):]
    first = d / "pass1" if (d / "pass1").is_dir() else d / "mutants.out.old"
    last = d / "mutants.out"
    if "." in f or not (d / "complete").is_file():
        continue
    if not first.is_dir():  # a single pass, every test
        first = None
    unviable = lines(first or last, "unviable")
    caught = (lines(first, "caught") if first else []) + lines(last, "caught")
    missed, timeout = lines(last, "missed"), lines(last, "timeout")
    total = len(unviable) + len(caught) + len(missed) + len(timeout)
    if first:
        # every mutant of the first pass has a verdict in one of the two
        n1 = sum(len(lines(first, k)) for k in ("caught", "missed", "timeout", "unviable"))
        assert n1 == total, f"{f}: {n1} mutants in the first pass, {total} with a verdict"
    killed = set(lines(root / f"analysis-{f}.retest" / "mutants.out", "caught")) & set(missed + timeout)
    rows.append((f, total, len(caught), len(missed), len(timeout), len(unviable), len(killed)))
    missed_all += [m for m in missed if m not in killed] + [f"{t} (timeout)" for t in timeout if t not in killed]

print("| file | mutants | caught | missed | timed out | unviable | killed by a new test |")
print("|---|---:|---:|---:|---:|---:|---:|")
for f, *n in rows:
    print(f"| `src/{f}.rs` | " + " | ".join(str(x) for x in n) + " |")
tot = [sum(r[i] for r in rows) for i in range(1, 7)]
print("| **all** | " + " | ".join(f"**{x}**" for x in tot) + " |")
if missed_all:
    print("\nstill missed (equivalent, or to be killed):")
    for m in missed_all:
        print("-", m)
