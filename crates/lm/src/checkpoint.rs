//! Checkpoints: `step_NNNNNN.safetensors` (the model's weights, plain safetensors that any tool
//! reads), `step_NNNNNN.optim.safetensors` (AdamW moments, kept for the newest two checkpoints
//! only, for resuming) and `step_NNNNNN.json` (the sidecar: step, tokens seen, losses, hashes of
//! config, tokenizer and weights, seed, git commit). Each file is written to a temp name and
//! renamed; the sidecar goes last, so a checkpoint without one never counts.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tch::{nn::VarStore, Tensor};

use crate::config::Config;
use crate::provenance::sha256_file;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Sidecar {
    pub step: u64,
    pub tokens_seen: u64,
    /// Mean training loss over the steps since the previous checkpoint (none at step 0).
    pub train_loss: Option<f64>,
    pub val_loss: f64,
    pub lr: f64,
    pub seed: u64,
    pub config_hash: String,
    pub tokenizer_sha256: String,
    pub weights_file: String,
    pub weights_sha256: String,
    pub optimizer_file: Option<String>,
    pub git_commit: String,
    pub config: Config,
}

pub fn stem(step: u64) -> String {
    format!("step_{step:06}")
}

/// Writes named tensors as safetensors through a temp file; returns the sha256 of the result.
pub fn write_tensors(path: &Path, tensors: &[(String, Tensor)]) -> Result<String> {
    let tmp = path.with_extension("partial");
    Tensor::write_safetensors(tensors, &tmp).with_context(|| format!("{}: cannot write", tmp.display()))?;
    let hash = sha256_file(&tmp)?;
    std::fs::rename(&tmp, path).with_context(|| format!("{}: cannot rename into place", path.display()))?;
    Ok(hash)
}

/// The model's variables sorted by name.
pub fn named_weights(vs: &VarStore) -> Vec<(String, Tensor)> {
    let mut v: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// Saves weights (+ optimizer state) and the sidecar into `dir`. `meta.weights_*` and
/// `meta.optimizer_file` are filled in here.
pub fn save(dir: &Path, vs: &VarStore, optim: Option<Vec<(String, Tensor)>>, mut meta: Sidecar) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let s = stem(meta.step);
    meta.weights_file = format!("{s}.safetensors");
    meta.weights_sha256 = write_tensors(&dir.join(&meta.weights_file), &named_weights(vs))?;
    if let Some(state) = optim {
        let f = format!("{s}.optim.safetensors");
        write_tensors(&dir.join(&f), &state)?;
        meta.optimizer_file = Some(f);
    }
    let sidecar = dir.join(format!("{s}.json"));
    corpus::write_atomic(&sidecar, serde_json::to_string_pretty(&meta)?.as_bytes())?;
    Ok(sidecar)
}

/// Reads a sidecar, naming the file if it is missing, truncated or malformed.
pub fn read_sidecar(path: &Path) -> Result<Sidecar> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read checkpoint sidecar", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: malformed or truncated checkpoint sidecar", path.display()))
}

/// Sidecars of every checkpoint in `dir`, by step.
pub fn list(dir: &Path) -> Result<Vec<(PathBuf, Sidecar)>> {
    let mut out = Vec::new();
    if !dir.is_dir() {
        return Ok(out);
    }
    for entry in std::fs::read_dir(dir).with_context(|| format!("{}: cannot list", dir.display()))? {
        let p = entry?.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("step_") && name.ends_with(".json") {
            out.push((p.clone(), read_sidecar(&p)?));
        }
    }
    out.sort_by_key(|(_, s)| s.step);
    Ok(out)
}

/// Loads the weights named by a sidecar into `vs`, after checking that the tokenizer is the one
/// the checkpoint was trained with and that the weights file is intact (its sha256).
pub fn load(sidecar_path: &Path, vs: &mut VarStore, tokenizer_sha256: &str) -> Result<Sidecar> {
    let meta = read_sidecar(sidecar_path)?;
    let dir = sidecar_path.parent().unwrap_or(Path::new("."));
    let weights = dir.join(&meta.weights_file);
    if meta.tokenizer_sha256 != tokenizer_sha256 {
        bail!(
            "{}: trained with tokenizer {}, but the tokenizer given has sha256 {}; pass the tokenizer of this run",
            sidecar_path.display(),
            &meta.tokenizer_sha256[..12.min(meta.tokenizer_sha256.len())],
            &tokenizer_sha256[..12.min(tokenizer_sha256.len())]
        );
    }
    let actual = sha256_file(&weights)?;
    if actual != meta.weights_sha256 {
        bail!("{}: corrupt or truncated checkpoint (sha256 {} differs from {} in {})", weights.display(), &actual[..12], &meta.weights_sha256[..12], sidecar_path.display());
    }
    load_tensors_into(&weights, vs)?;
    Ok(meta)
}

/// Copies tensors from a safetensors file into the same-named variables of `vs`; every variable
/// must be present with its shape.
pub fn load_tensors_into(path: &Path, vs: &mut VarStore) -> Result<()> {
    let saved: std::collections::HashMap<String, Tensor> =
        Tensor::read_safetensors(path).with_context(|| format!("{}: not a readable safetensors file", path.display()))?.into_iter().collect();
    for (name, mut var) in vs.variables() {
        let Some(src) = saved.get(&name) else { bail!("{}: tensor `{name}` missing", path.display()) };
        if src.size() != var.size() {
            bail!("{}: tensor `{name}` has shape {:?}, the model expects {:?}", path.display(), src.size(), var.size());
        }
        tch::no_grad(|| var.copy_(src));
    }
    Ok(())
}
