//! The checkpoint sidecar `step_NNNNNN.json`: what `lm train` records beside each checkpoint's
//! weights (step, tokens, losses, hashes of config, tokenizer, weights and optimizer state, seed,
//! git commit, the config itself) and, for an averaged checkpoint, how `integrate sweep` made it.
//! `lm` writes and verifies it (with libtorch); every other crate reads it through this type.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

use crate::config::Config;

/// Version of the sidecar layout this build writes. 1: no `schema_version` and no
/// `optimizer_sha256` (still read; such optimizer state is checked by its names and shapes only).
pub const SIDECAR_VERSION: u32 = 2;

fn version_1() -> u32 {
    1
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Sidecar {
    #[serde(default = "version_1")]
    pub schema_version: u32,
    pub step: u64,
    pub tokens_seen: u64,
    /// Mean training loss over the steps since the previous checkpoint (none at step 0).
    pub train_loss: Option<f64>,
    /// Mean loss over the `val_windows` sample of the validation split.
    pub val_loss: f64,
    /// Mean loss over the whole validation split (at the checkpoints a schedule scores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_loss_full: Option<f64>,
    pub lr: f64,
    pub seed: u64,
    pub config_hash: String,
    pub tokenizer_sha256: String,
    pub weights_file: String,
    pub weights_sha256: String,
    pub optimizer_file: Option<String>,
    #[serde(default)]
    pub optimizer_sha256: Option<String>,
    pub git_commit: String,
    pub config: Config,
    /// Set on an averaged checkpoint (`integrate sweep`): the recipe and its inputs. A checkpoint
    /// of training has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integration: Option<Integration>,
}

/// How an averaged checkpoint was made: the uniform average of `k` checkpoints of a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Integration {
    pub method: String,
    pub k: usize,
    /// The accumulation precision (`F64` or `F32`, as `integrate::average::Accumulate` names it).
    pub accumulate: String,
    pub inputs: Vec<IntegrationInput>,
}

/// One checkpoint averaged into another: its step, weights file and their sha256.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct IntegrationInput {
    pub step: u64,
    pub file: PathBuf,
    pub sha256: String,
}

/// The file stem of the checkpoint at `step`: `step_000120`.
pub fn stem(step: u64) -> String {
    format!("step_{step:06}")
}

/// Reads a sidecar, naming the file if it is missing, truncated or malformed.
pub fn read_sidecar(path: &Path) -> Result<Sidecar> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("{}: cannot read checkpoint sidecar", path.display()))?;
    let meta: Sidecar = serde_json::from_str(&text)
        .with_context(|| format!("{}: malformed or truncated checkpoint sidecar", path.display()))?;
    if meta.schema_version > SIDECAR_VERSION {
        bail!(
            "{}: sidecar schema {} is newer than this build reads ({SIDECAR_VERSION}); update the workspace",
            path.display(),
            meta.schema_version
        );
    }
    Ok(meta)
}

/// Every `step_*.json` in `dir`, read or with the reason it cannot be, by file name.
pub fn list_all(dir: &Path) -> Result<Vec<(PathBuf, Result<Sidecar>)>> {
    let mut out = Vec::new();
    if !dir.is_dir() {
        return Ok(out);
    }
    for entry in std::fs::read_dir(dir).with_context(|| format!("{}: cannot list", dir.display()))? {
        let p = entry?.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("step_") && name.ends_with(".json") {
            let meta = read_sidecar(&p);
            out.push((p, meta));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Sidecars of every checkpoint in `dir`, by step; a sidecar that cannot be read is an error.
pub fn list(dir: &Path) -> Result<Vec<(PathBuf, Sidecar)>> {
    let mut out = Vec::new();
    for (p, m) in list_all(dir)? {
        out.push((p, m?));
    }
    out.sort_by_key(|(_, s)| s.step);
    Ok(out)
}
