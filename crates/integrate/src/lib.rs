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
pub mod commands;
pub mod ensemble;

use anyhow::{bail, Result};
use run::sidecar::{Integration, IntegrationInput, Sidecar};
use std::path::{Path, PathBuf};

pub use output::provenance::{git_commit, sha256_file};
use output::{FileSet, FolderLock};

/// A checkpoint of an `lm` run: its sidecar and weights file.
#[derive(Debug, Clone)]
pub struct RunCheckpoint {
    pub sidecar: PathBuf,
    pub meta: Sidecar,
    pub weights: PathBuf,
}

/// The checkpoints of a run folder, by step.
pub fn run_checkpoints(dir: &Path) -> Result<Vec<RunCheckpoint>> {
    let out: Vec<RunCheckpoint> = run::sidecar::list(dir)?
        .into_iter()
        .map(|(sidecar, meta)| RunCheckpoint { weights: dir.join(&meta.weights_file), sidecar, meta })
        .collect();
    if out.is_empty() {
        bail!("{}: no checkpoints (step_*.json)", dir.display());
    }
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
    progress: impl FnMut(usize, usize),
) -> Result<(usize, usize)> {
    let created = !out.exists();
    let result = sweep_into(ckpt_dir, windows, last, accumulate, out, progress);
    if result.is_err() && created {
        // a refused input leaves no empty folders behind (what was written stays)
        output::remove_empty_dirs(out);
    }
    result
}

fn sweep_into(
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
        let dir = run::layout::window_dir(out, k);
        for end in first_end(k)..ckpts.len() {
            let window = &ckpts[end + 1 - k..=end];
            let last = &window[k - 1];
            let stem = run::sidecar::stem(last.meta.step);
            let (wpath, spath) = (dir.join(format!("{stem}.safetensors")), dir.join(format!("{stem}.json")));
            let inputs: Vec<IntegrationInput> = window
                .iter()
                .map(|c| IntegrationInput {
                    step: c.meta.step,
                    file: c.weights.clone(),
                    sha256: c.meta.weights_sha256.clone(),
                })
                .collect();
            let up_to_date = run::sidecar::read_sidecar(&spath)
                .ok()
                .and_then(|m| m.integration)
                .is_some_and(|i| i.inputs == inputs && wpath.is_file());
            if up_to_date {
                kept += 1;
            } else {
                let opened: Vec<average::Checkpoint> =
                    window.iter().map(|c| average::Checkpoint::open(&c.weights)).collect::<Result<_>>()?;
                let mut set = FileSet::begin(&lock, &dir)?;
                let wname = format!("{stem}.safetensors");
                average::average_into(&opened, &average::uniform(k), accumulate, &mut set, &wname)?;
                let meta = Sidecar {
                    weights_file: wname.clone(),
                    weights_sha256: sha256_file(&set.staged(&wname))?,
                    optimizer_file: None,
                    optimizer_sha256: None,
                    git_commit: git_commit(),
                    integration: Some(Integration {
                        method: "uniform average".into(),
                        k,
                        accumulate: serde_json::to_value(accumulate)?.as_str().unwrap_or_default().to_string(),
                        inputs,
                    }),
                    ..last.meta.clone()
                };
                // through a Value: keys sorted, as the averaged sidecars have always been written
                set.write(
                    &format!("{stem}.json"),
                    serde_json::to_string_pretty(&serde_json::to_value(&meta)?)?.as_bytes(),
                )?;
                set.commit()?;
                written += 1;
            }
            progress(written + kept, total);
        }
    }
    Ok((written, kept))
}
