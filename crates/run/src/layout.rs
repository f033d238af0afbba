//! The layout of a run folder, the one place its folder names are written:
//!
//! ```text
//! <run>/checkpoints/step_NNNNNN.{safetensors,json}   lm train
//! <run>/eval/                                        lm eval of the checkpoints (method single)
//! <run>/averaged/k<K>/step_NNNNNN.{safetensors,json} integrate sweep (average of K checkpoints)
//! <run>/eval-avg-k<K>/                               lm eval of averaged/k<K> (method average)
//! <run>/ensembled/k<K>/                              integrate ensemble, mean of distributions
//! <run>/ensembled-vote/k<K>/                         integrate ensemble --rule vote
//! <run>/analysis/                                    analysis report, analysis compare
//! ```
//!
//! An eval folder (any of `eval/`, `eval-avg-k<K>/`, `ensembled*/k<K>/`) holds examples.parquet
//! and tasks.parquet. The smoothing baseline has no folder: it is computed from `eval/`.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

use crate::method::{Method, Variant};

const CHECKPOINTS: &str = "checkpoints";
const EVAL: &str = "eval";
const AVERAGED: &str = "averaged";
const EVAL_AVERAGE_PREFIX: &str = "eval-avg-k";
const ENSEMBLED: &str = "ensembled";
const ENSEMBLED_VOTE: &str = "ensembled-vote";
const ANALYSIS: &str = "analysis";
/// Prefix of a window's subfolder (`k16`).
const WINDOW_PREFIX: &str = "k";

/// A run folder (it need not exist yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDir {
    root: PathBuf,
}

impl RunDir {
    pub fn new(root: impl Into<PathBuf>) -> RunDir {
        RunDir { root: root.into() }
    }

    /// The run folder a checkpoint folder (`<run>/checkpoints`) belongs to.
    pub fn of_checkpoints(checkpoints: &Path) -> RunDir {
        RunDir::new(checkpoints.parent().unwrap_or(checkpoints))
    }

    /// The run folder an eval folder (`<run>/eval`) belongs to.
    pub fn of_eval(eval: &Path) -> RunDir {
        RunDir::new(eval.parent().unwrap_or(eval))
    }

    pub fn checkpoints(&self) -> PathBuf {
        self.root.join(CHECKPOINTS)
    }

    /// Where `integrate sweep` writes averaged checkpoints, one `k<K>/` per window.
    pub fn averaged(&self) -> PathBuf {
        self.root.join(AVERAGED)
    }

    /// Where `integrate ensemble` writes a rule's ensembles, one `k<K>/` per window.
    pub fn ensembled(&self, method: Method) -> PathBuf {
        self.root.join(if method == Method::EnsembleVote { ENSEMBLED_VOTE } else { ENSEMBLED })
    }

    pub fn analysis(&self) -> PathBuf {
        self.root.join(ANALYSIS)
    }

    /// The eval folder of a variant; None for the smoothing baseline, which has none.
    pub fn eval_of(&self, v: Variant) -> Option<PathBuf> {
        match v.method {
            Method::Single => Some(self.root.join(EVAL)),
            Method::Smoothing => None,
            Method::Average => Some(self.root.join(format!("{EVAL_AVERAGE_PREFIX}{}", v.k))),
            Method::EnsembleMean | Method::EnsembleVote => Some(window_dir(&self.ensembled(v.method), v.k)),
        }
    }

    /// Every evaluated variant present (an eval folder exists), in table order: single, then
    /// average, ensemble and ensemble_vote by k. Whether its tables are complete is the reader's
    /// to check.
    pub fn variants(&self) -> Result<Vec<(Variant, PathBuf)>> {
        let mut out = Vec::new();
        let single = self.root.join(EVAL);
        if single.is_dir() {
            out.push((Variant::SINGLE, single));
        }
        for (k, p) in windows(&self.root, EVAL_AVERAGE_PREFIX)? {
            out.push((Variant::new(Method::Average, k), p));
        }
        for method in [Method::EnsembleMean, Method::EnsembleVote] {
            for (k, p) in windows(&self.ensembled(method), WINDOW_PREFIX)? {
                out.push((Variant::new(method, k), p));
            }
        }
        Ok(out)
    }

    /// The eval folders of the model variants, whose rows are scored from checkpoints and cannot
    /// be rebuilt from other tables: single and average (ensembles are rebuilt from `eval/`).
    pub fn scored_variants(&self) -> Result<Vec<(Variant, PathBuf)>> {
        Ok(self.variants()?.into_iter().filter(|(v, _)| !v.method.is_ensemble()).collect())
    }
}

/// The subfolder of window k: `<parent>/k<K>`.
pub fn window_dir(parent: &Path, k: usize) -> PathBuf {
    parent.join(format!("{WINDOW_PREFIX}{k}"))
}

/// Where `lm eval` writes the scores of a checkpoint folder by default: `<run>/eval` for
/// `<run>/checkpoints`, `<run>/eval-avg-k<K>` for `<run>/averaged/k<K>`, `<parent>/eval` for any
/// other folder.
pub fn default_eval_dir(checkpoints: &Path) -> PathBuf {
    let parent = checkpoints.parent().unwrap_or(checkpoints);
    let k = checkpoints.file_name().and_then(|n| n.to_str()).and_then(|n| k_of(n, WINDOW_PREFIX));
    match (k, parent.file_name().and_then(|n| n.to_str())) {
        (Some(k), Some(AVERAGED)) => {
            RunDir::new(parent.parent().unwrap_or(parent)).eval_of(Variant::new(Method::Average, k)).unwrap()
        }
        _ => parent.join(EVAL),
    }
}

fn k_of(name: &str, prefix: &str) -> Option<usize> {
    name.strip_prefix(prefix)?.parse().ok()
}

/// The `<prefix><K>` subfolders of `dir` by K (none if `dir` does not exist).
fn windows(dir: &Path, prefix: &str) -> Result<Vec<(usize, PathBuf)>> {
    if !dir.is_dir() {
        return Ok(vec![]);
    }
    let mut out: Vec<(usize, PathBuf)> = std::fs::read_dir(dir)
        .with_context(|| format!("{}: cannot list", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .filter_map(|p| Some((k_of(p.file_name()?.to_str()?, prefix)?, p)))
        .collect();
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_has_one_folder_and_is_found_again() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        let made = [
            Variant::SINGLE,
            Variant::new(Method::Average, 4),
            Variant::new(Method::Average, 16),
            Variant::new(Method::EnsembleMean, 2),
            Variant::new(Method::EnsembleVote, 4),
        ];
        for v in made.iter().rev() {
            std::fs::create_dir_all(run.eval_of(*v).unwrap()).unwrap();
        }
        // neither a file nor a folder of another name counts
        std::fs::write(dir.path().join("eval-avg-k8"), b"").unwrap();
        std::fs::create_dir_all(dir.path().join("eval-avg-kx")).unwrap();
        let found: Vec<Variant> = run.variants().unwrap().into_iter().map(|(v, _)| v).collect();
        assert_eq!(found, made);
        let scored: Vec<Variant> = run.scored_variants().unwrap().into_iter().map(|(v, _)| v).collect();
        assert_eq!(scored, made[..3]);
        assert_eq!(run.eval_of(Variant::new(Method::Smoothing, 4)), None);
        assert_eq!(run.eval_of(made[1]).unwrap(), dir.path().join("eval-avg-k4"));
        assert_eq!(run.eval_of(made[4]).unwrap(), dir.path().join("ensembled-vote/k4"));
    }

    #[test]
    fn default_eval_folders() {
        let run = RunDir::new("runs/x");
        assert_eq!(default_eval_dir(&run.checkpoints()), Path::new("runs/x/eval"));
        assert_eq!(default_eval_dir(&window_dir(&run.averaged(), 16)), Path::new("runs/x/eval-avg-k16"));
        assert_eq!(default_eval_dir(Path::new("elsewhere/k4")), Path::new("elsewhere/eval"));
        assert_eq!(RunDir::of_checkpoints(&run.checkpoints()), run);
    }
}
