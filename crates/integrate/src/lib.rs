//! The paper's two post-hoc remedies, applied without touching training:
//!
//! - [`average`]: checkpoint averaging, the (weighted) mean of the weights of k checkpoints,
//!   streamed over safetensors files of any size;
//! - [`ensemble`]: checkpoint ensembling, the mean of the predictive distributions of k
//!   checkpoints, computed from the per-option log-likelihoods that evaluation stored.
//!
//! [`sweep`] slides a window of k checkpoints along a run and writes one averaged checkpoint per
//! step, with a sidecar that `lm eval` reads like any checkpoint's, so averaged models are
//! scored and analysed exactly as single ones.

pub mod average;
pub mod ensemble;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

pub use output::provenance::{git_commit, sha256_file};
use output::{FileSet, FolderLock};

/// A checkpoint of an `lm` run: its sidecar (kept as JSON, so this crate needs no libtorch).
#[derive(Debug, Clone)]
pub struct RunCheckpoint {
    pub sidecar: PathBuf,
    pub meta: Value,
    pub step: u64,
    pub weights: PathBuf,
    pub weights_sha256: String,
}

/// The checkpoints of a run folder, by step.
pub fn run_checkpoints(dir: &Path) -> Result<Vec<RunCheckpoint>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("{}: cannot list", dir.display()))? {
        let p = entry?.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !(name.starts_with("step_") && name.ends_with(".json")) {
            continue;
        }
        let text = std::fs::read_to_string(&p).with_context(|| format!("{}: cannot read", p.display()))?;
        let meta: Value =
            serde_json::from_str(&text).with_context(|| format!("{}: malformed checkpoint sidecar", p.display()))?;
        let step = meta["step"].as_u64().with_context(|| format!("{}: no step", p.display()))?;
        let file = meta["weights_file"].as_str().with_context(|| format!("{}: no weights_file", p.display()))?;
        let sha = meta["weights_sha256"].as_str().unwrap_or("").to_string();
        out.push(RunCheckpoint { weights: dir.join(file), sidecar: p, meta, step, weights_sha256: sha });
    }
    if out.is_empty() {
        bail!("{}: no checkpoints (step_*.json)", dir.display());
    }
    out.sort_by_key(|c| c.step);
    Ok(out)
}

/// Writes, for every window size k and every step t from the k-th checkpoint on (or only the
/// last `last` steps), the uniform
/// average of the k checkpoints ending at t into `out/k<k>/step_NNNNNN.safetensors` with an
/// lm-compatible sidecar (each pair written as one [`FileSet`]). Existing outputs whose recorded
/// inputs match are kept. `out` is locked meanwhile. Returns the number written and kept.
pub fn sweep(
    ckpt_dir: &Path,
    windows: &[usize],
    last: Option<usize>,
    accumulate: average::Accumulate,
    out: &Path,
    mut progress: impl FnMut(usize, usize),
) -> Result<(usize, usize)> {
    let ckpts = run_checkpoints(ckpt_dir)?;
    if windows.contains(&0) {
        bail!("window sizes must be at least 1");
    }
    let lock = FolderLock::acquire(out, "integrate sweep")?;
    // the first step that ends a window: the k-th checkpoint, or only the last `last` steps
    let first_end = |k: usize| (k - 1).max(ckpts.len().saturating_sub(last.unwrap_or(usize::MAX)));
    let total: usize = windows.iter().map(|&k| ckpts.len().saturating_sub(first_end(k.max(1)))).sum();
    let (mut written, mut kept) = (0, 0);
    for &k in windows {
        let dir = out.join(format!("k{k}"));
        for end in first_end(k)..ckpts.len() {
            let window = &ckpts[end + 1 - k..=end];
            let last = &window[k - 1];
            let stem = format!("step_{:06}", last.step);
            let (wpath, spath) = (dir.join(format!("{stem}.safetensors")), dir.join(format!("{stem}.json")));
            let inputs: Vec<Value> =
                window.iter().map(|c| json!({"step": c.step, "file": c.weights, "sha256": c.weights_sha256})).collect();
            let up_to_date = std::fs::read_to_string(&spath)
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .is_some_and(|v| v["integration"]["inputs"] == Value::Array(inputs.clone()) && wpath.is_file());
            if up_to_date {
                kept += 1;
            } else {
                let opened: Vec<average::Checkpoint> =
                    window.iter().map(|c| average::Checkpoint::open(&c.weights)).collect::<Result<_>>()?;
                let mut set = FileSet::begin(&lock, &dir)?;
                let wname = format!("{stem}.safetensors");
                average::average_into(&opened, &average::uniform(k), accumulate, &mut set, &wname)?;
                let mut meta = last.meta.clone();
                meta["weights_file"] = json!(wname);
                meta["weights_sha256"] = json!(sha256_file(&set.staged(&wname))?);
                meta["optimizer_file"] = Value::Null;
                meta["optimizer_sha256"] = Value::Null;
                meta["git_commit"] = json!(git_commit());
                meta["integration"] =
                    json!({"method": "uniform average", "k": k, "accumulate": accumulate, "inputs": inputs});
                set.write(&format!("{stem}.json"), serde_json::to_string_pretty(&meta)?.as_bytes())?;
                set.commit()?;
                written += 1;
            }
            progress(written + kept, total);
        }
    }
    Ok((written, kept))
}
