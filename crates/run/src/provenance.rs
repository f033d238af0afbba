//! What a run's outputs record about where they came from, typed where another crate reads it:
//! [`EvalProvenance`], written by `lm eval` beside an eval folder's tables and read by the
//! figures (its eval config), and [`Input`], a file with its sha256 as every output lists its
//! inputs.

use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

use crate::config::EvalConfig;

/// An input file and the sha256 of its bytes when it was read.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Input {
    pub path: PathBuf,
    pub sha256: String,
}

impl Input {
    /// Hashes `path` now.
    pub fn of(path: &Path) -> Result<Input> {
        Ok(Input { path: path.to_path_buf(), sha256: output::provenance::sha256_file(path)? })
    }
}

/// `provenance.json` of an eval folder (`lm eval`; written with its keys sorted).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EvalProvenance {
    /// The checkpoint folder scored.
    pub checkpoints: PathBuf,
    pub eval_config: EvalConfig,
    pub eval_config_hash: String,
    /// (task, version) of every task scored.
    pub tasks: Vec<(String, String)>,
    pub tokenizer_sha256: String,
    /// `lm`'s scoring version (a change rescored every checkpoint); absent in the oldest folders.
    #[serde(default)]
    pub scoring_version: Option<u32>,
    pub git_commit: String,
    /// The machine: CPU, threads, OS (`output::provenance::host`); absent in the oldest folders.
    #[serde(default)]
    pub host: serde_json::Value,
    /// (step, weights sha256) of every checkpoint scored.
    pub weights: Vec<(u64, String)>,
}

impl EvalProvenance {
    /// Reads `<eval>/provenance.json`, naming the file if it is missing or malformed.
    pub fn read(eval: &Path) -> Result<EvalProvenance> {
        use anyhow::Context;
        let p = eval.join("provenance.json");
        let text = std::fs::read_to_string(&p).with_context(|| format!("{}: cannot read", p.display()))?;
        serde_json::from_str(&text).with_context(|| format!("{}: not the provenance `lm eval` writes", p.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The eval provenance of every committed eval folder reads, the oldest (no host, no scoring
    /// version: the smoke fixture) included, so the figures keep recording their eval config.
    #[test]
    fn committed_eval_folders_read() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut folders = vec![root.join("experiments/tests/fixtures/smoke/eval")];
        for run in std::fs::read_dir(root.join("results")).unwrap().flatten() {
            folders.push(run.path().join("eval"));
        }
        assert!(folders.len() >= 2, "{folders:?}");
        for f in folders {
            let p = EvalProvenance::read(&f).unwrap_or_else(|e| panic!("{e:#}"));
            assert!(p.eval_config.max_examples > 0 && !p.weights.is_empty(), "{}", f.display());
        }
        let e = format!("{:#}", EvalProvenance::read(&root.join("no-such-folder")).unwrap_err());
        assert!(e.contains("no-such-folder/provenance.json"), "{e}");
    }
}
