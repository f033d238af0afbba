//! Checkpoints: `step_NNNNNN.safetensors` (the model's weights, plain safetensors that any tool
//! reads), `step_NNNNNN.optim.safetensors` (AdamW moments, kept for the newest two checkpoints
//! only, for resuming) and `step_NNNNNN.json` (the sidecar: step, tokens seen, losses, hashes of
//! config, tokenizer, weights and optimizer state, seed, git commit, schema version). Each file is
//! written to a temp name and renamed; the sidecar goes last, so a checkpoint without one never
//! counts. Loading verifies everything (hashes, names, shapes) before it copies anything, so a
//! failed load leaves the model as it was.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use tch::{nn::VarStore, Tensor};

use output::provenance::sha256_file;
pub use run::sidecar::{list, list_all, read_sidecar, stem, Sidecar, SIDECAR_VERSION};

/// Writes named tensors as safetensors through a temp file; returns the sha256 of the result.
pub fn write_tensors(path: &Path, tensors: &[(String, Tensor)]) -> Result<String> {
    let mut hash = String::new();
    output::write_atomic_via(path, |tmp| {
        Tensor::write_safetensors(tensors, tmp)?;
        hash = sha256_file(tmp)?;
        Ok(())
    })?;
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
    meta.schema_version = SIDECAR_VERSION;
    if let Some(state) = optim {
        let f = format!("{s}.optim.safetensors");
        meta.optimizer_sha256 = Some(write_tensors(&dir.join(&f), &state)?);
        meta.optimizer_file = Some(f);
    }
    let sidecar = dir.join(format!("{s}.json"));
    output::write_atomic(&sidecar, serde_json::to_string_pretty(&meta)?.as_bytes())?;
    Ok(sidecar)
}

/// Tensors read from a file and checked against the variables of `vs` (every variable present
/// with its shape), ready to be copied in.
pub struct Verified(Vec<(Tensor, Tensor)>);

impl Verified {
    /// Copies the verified tensors into their variables.
    pub fn apply(self) {
        tch::no_grad(|| {
            for (mut var, src) in self.0 {
                var.copy_(&src);
            }
        });
    }
}

/// Checks a file's sha256 against the one recorded in `sidecar_path`.
fn check_hash(file: &Path, expected: &str, sidecar_path: &Path) -> Result<()> {
    let actual = sha256_file(file)?;
    if actual != expected {
        bail!(
            "{}: corrupt or truncated (sha256 {} differs from {} recorded in {})",
            file.display(),
            &actual[..12],
            &expected[..12.min(expected.len())],
            sidecar_path.display()
        );
    }
    Ok(())
}

/// Reads and verifies the weights named by a sidecar, after checking that the tokenizer is the
/// one the checkpoint was trained with and that the weights file is intact (its sha256).
/// Nothing is copied into `vs` yet.
pub fn verify(sidecar_path: &Path, vs: &VarStore, tokenizer_sha256: &str) -> Result<(Sidecar, Verified)> {
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
    check_hash(&weights, &meta.weights_sha256, sidecar_path)?;
    let verified = read_verified(&weights, vs)?;
    Ok((meta, verified))
}

/// Reads and verifies the optimizer state a sidecar names (its sha256 where recorded).
pub fn verify_optimizer(sidecar_path: &Path, meta: &Sidecar) -> Result<Vec<(String, Tensor)>> {
    let dir = sidecar_path.parent().unwrap_or(Path::new("."));
    let Some(file) = &meta.optimizer_file else {
        bail!("{}: no optimizer state (kept for the newest two checkpoints only)", sidecar_path.display())
    };
    let path = dir.join(file);
    if !path.is_file() {
        bail!("{}: optimizer state missing", path.display());
    }
    if let Some(h) = &meta.optimizer_sha256 {
        check_hash(&path, h, sidecar_path)?;
    }
    Tensor::read_safetensors(&path).with_context(|| format!("{}: unreadable optimizer state", path.display()))
}

/// Loads the weights named by a sidecar into `vs` ([`verify`], then copy).
pub fn load(sidecar_path: &Path, vs: &mut VarStore, tokenizer_sha256: &str) -> Result<Sidecar> {
    let (meta, verified) = verify(sidecar_path, vs, tokenizer_sha256)?;
    verified.apply();
    Ok(meta)
}

/// Reads a safetensors file and pairs each variable of `vs` with its tensor; every variable
/// must be present with its shape and a floating-point dtype.
fn read_verified(path: &Path, vs: &VarStore) -> Result<Verified> {
    let mut saved: std::collections::HashMap<String, Tensor> = Tensor::read_safetensors(path)
        .with_context(|| format!("{}: not a readable safetensors file", path.display()))?
        .into_iter()
        .collect();
    let mut pairs = Vec::new();
    let mut vars: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, var) in vars {
        let Some(src) = saved.remove(&name) else { bail!("{}: tensor `{name}` missing", path.display()) };
        if src.size() != var.size() {
            bail!("{}: tensor `{name}` has shape {:?}, the model expects {:?}", path.display(), src.size(), var.size());
        }
        if !src.is_floating_point() {
            bail!("{}: tensor `{name}` has dtype {:?}, not a floating-point type", path.display(), src.kind());
        }
        pairs.push((var, src));
    }
    Ok(Verified(pairs))
}

/// Copies tensors from a safetensors file into the same-named variables of `vs`; every variable
/// must be present with its shape (checked for all before any is copied).
pub fn load_tensors_into(path: &Path, vs: &mut VarStore) -> Result<()> {
    read_verified(path, vs)?.apply();
    Ok(())
}
