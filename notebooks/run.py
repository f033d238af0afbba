"""Executes every notebook of this folder against one run, offline, and saves the executed copies.

    python notebooks/run.py runs/smoke      (what `just notebooks smoke` does)
"""
import os, sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

root = Path(__file__).resolve().parent.parent
run = sys.argv[1] if len(sys.argv) > 1 else "runs/default"
os.environ.update(RUN=run, REPO_ROOT=str(root))
out = root / run / "notebooks"
out.mkdir(parents=True, exist_ok=True)
for path in sorted((root / "notebooks").glob("*.ipynb")):
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(root / "notebooks")}}).execute()
    nbformat.write(nb, out / path.name)
    print(f"ran {path.relative_to(root)} on {run} -> {(out / path.name).relative_to(root)}")
