//! The committed `results/<run>/` folders: [`pack`] writes one, [`verify`] checks a partial
//! rerun against one.
//!
//! `analysis pack`: a run's small outputs as the committed `results/<run>/` folder, laid out as
//! the run folder itself (so every tool that reads `runs/<name>` reads `results/<name>`): the
//! run config and training log, each evaluation variant (`eval/`, `eval-avg-k*/`) with its
//! examples (log-likelihoods as f32, [`records::compact_examples_frame`]), task scores and
//! provenance, the analysis tables, and `stages.csv` (wall time per stage) when the study wrote
//! one. Checkpoints are never packed. The folder is built aside and renamed into place; an
//! existing one is refused.

use anyhow::{bail, Context, Result};
use run::{RunDir, Variant};
use std::path::{Path, PathBuf};

/// Files copied as they are, relative to the run folder, when present.
const PLAIN: [&str; 3] = ["config.toml", "train_log.csv", "stages.csv"];
/// Files of every evaluation variant besides its examples.
const VARIANT_FILES: [&str; 3] = ["tasks.parquet", "tasks.csv", "provenance.json"];

/// What [`pack`] wrote.
#[derive(Debug)]
pub struct Packed {
    pub variants: Vec<String>,
    pub files: usize,
    pub bytes: u64,
}

/// The scored variants' eval folders (single and average; ensembles are rebuilt from `eval/`)
/// that hold examples, relative to the run folder.
fn variants(run: &Path) -> Result<Vec<String>> {
    if !run.is_dir() {
        bail!("{}: cannot list (not a folder)", run.display());
    }
    let mut v: Vec<String> = RunDir::new(run)
        .scored_variants()?
        .into_iter()
        .filter(|(_, dir)| dir.join("examples.parquet").is_file())
        .filter_map(|(_, dir)| Some(dir.strip_prefix(run).ok()?.to_str()?.to_owned()))
        .collect();
    v.sort();
    Ok(v)
}

/// Packs `run` into `out` (which must not exist).
pub fn pack(run: &Path, out: &Path) -> Result<Packed> {
    if out.exists() {
        bail!("{}: already exists; results are never overwritten (remove it to pack again)", out.display());
    }
    let variants = variants(run)?;
    let single = RunDir::new(run).eval_of(Variant::SINGLE).expect("single has an eval folder");
    if !single.join("examples.parquet").is_file() {
        bail!("{}: no eval/examples.parquet; run `lm eval` first", run.display());
    }
    let name = out.file_name().and_then(|n| n.to_str()).context("results folder has no name")?;
    let tmp: PathBuf = out.with_file_name(format!(".{name}.packing-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let result = (|| -> Result<(usize, u64)> {
        let (mut files, mut bytes) = (0, 0);
        let mut copy = |from: &Path, to: &Path| -> Result<()> {
            std::fs::create_dir_all(to.parent().unwrap())?;
            bytes += std::fs::copy(from, to).with_context(|| format!("{}: cannot copy", from.display()))?;
            files += 1;
            Ok(())
        };
        for f in PLAIN {
            if run.join(f).is_file() {
                copy(&run.join(f), &tmp.join(f))?;
            }
        }
        for v in &variants {
            for f in VARIANT_FILES {
                if run.join(v).join(f).is_file() {
                    copy(&run.join(v).join(f), &tmp.join(v).join(f))?;
                }
            }
        }
        let analysis = RunDir::new(run).analysis();
        if let Ok(dir) = std::fs::read_dir(&analysis) {
            for e in dir.flatten().filter(|e| e.path().is_file()) {
                copy(&e.path(), &RunDir::new(&tmp).analysis().join(e.file_name()))?;
            }
        }
        for v in &variants {
            let rows = records::read_examples(&run.join(v).join("examples.parquet"))?;
            let to = tmp.join(v).join("examples.parquet");
            records::write_frame(&to, &mut records::compact_examples_frame(&rows)?)?;
            bytes += std::fs::metadata(&to)?.len();
            files += 1;
        }
        Ok((files, bytes))
    })();
    match result {
        Ok((files, bytes)) => {
            std::fs::rename(&tmp, out).with_context(|| format!("{}: cannot rename into place", out.display()))?;
            Ok(Packed { variants, files, bytes })
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Err(e)
        }
    }
}

/// How a rerun's example rows agree with the committed ones.
#[derive(Debug, Clone, PartialEq)]
pub struct Agreement {
    /// Rows of the rerun found in the committed table (every rerun row must be found).
    pub rows: usize,
    pub steps: Vec<u64>,
    /// Rows whose predicted option (acc and acc_norm) and correctness differ.
    pub decisions_changed: usize,
    pub max_abs_loglik_diff: f64,
}

/// Compares `actual` (a rerun's example rows) with `expected` (the committed rows) on the
/// (step, task, example) keys of `actual`. Fails if a rerun row has no committed twin.
pub fn verify(expected: &[records::ExampleRecord], actual: &[records::ExampleRecord]) -> Result<Agreement> {
    use std::collections::HashMap;
    let index: HashMap<(u64, &str, &str), &records::ExampleRecord> =
        expected.iter().map(|r| ((r.step, r.task.as_str(), r.example_id.as_str()), r)).collect();
    let (mut changed, mut max_diff, mut steps) = (0, 0.0f64, Vec::new());
    for a in actual {
        let e = index.get(&(a.step, a.task.as_str(), a.example_id.as_str())).with_context(|| {
            format!("step {} task {} example {}: not in the committed results", a.step, a.task, a.example_id)
        })?;
        if e.logliks.len() != a.logliks.len() {
            bail!(
                "step {} example {}: {} options committed, {} rescored",
                a.step,
                a.example_id,
                e.logliks.len(),
                a.logliks.len()
            );
        }
        if (e.predicted, e.predicted_norm, e.correct, e.correct_norm)
            != (a.predicted, a.predicted_norm, a.correct, a.correct_norm)
        {
            changed += 1;
        }
        for (x, y) in e.logliks.iter().zip(&a.logliks) {
            max_diff = max_diff.max((x - y).abs());
        }
        steps.push(a.step);
    }
    steps.sort_unstable();
    steps.dedup();
    Ok(Agreement { rows: actual.len(), steps, decisions_changed: changed, max_abs_loglik_diff: max_diff })
}

/// `analysis verify`: the example rows of a rerun's eval folder `actual` against the committed
/// `expected`; an error if a decision changed or a log-likelihood moved by more than
/// `tolerance`. Returns the one-line summary.
pub fn verify_folders(expected: &Path, actual: &Path, tolerance: f64) -> Result<String> {
    let read = |d: &Path| records::read_examples(&d.join("examples.parquet"));
    let a = verify(&read(expected)?, &read(actual)?)?;
    let line = format!(
        "{} rows at steps {:?}: {} decisions changed, max |log-likelihood difference| {:.2e} (tolerance {tolerance:.0e})\n",
        a.rows, a.steps, a.decisions_changed, a.max_abs_loglik_diff
    );
    if a.decisions_changed > 0 || a.max_abs_loglik_diff > tolerance {
        print!("{line}");
        bail!("{}: the rerun differs from {}", actual.display(), expected.display());
    }
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(step: u64, ll: f64) -> records::ExampleRecord {
        records::ExampleRecord {
            step,
            task: "t".into(),
            example_id: "t/0".into(),
            gold: 0,
            predicted: 0,
            predicted_norm: 0,
            correct: true,
            correct_norm: true,
            logliks: vec![ll, -9.0],
            lengths_chars: vec![3, 3],
            lengths_tokens: vec![1, 1],
            lengths_bytes: vec![4, 4],
            gold_is_greedy: false,
            output: "0".into(),
            item_hash: String::new(),
            targets: Vec::new(),
            score_names: Vec::new(),
            score_values: Vec::new(),
        }
    }

    /// Identical rows agree up to the f32 rounding; a changed decision, a changed
    /// log-likelihood and a row missing from the committed table are each seen.
    #[test]
    fn verify_reports_changed_decisions_and_missing_rows() {
        let committed = vec![row(0, -1.0), row(20, -2.0)];
        let same = verify(&committed, &committed[1..]).unwrap();
        assert_eq!(
            (same.rows, same.steps.clone(), same.decisions_changed, same.max_abs_loglik_diff),
            (1, vec![20], 0, 0.0)
        );
        let mut moved = row(20, -2.5);
        moved.predicted = 1;
        moved.correct = false;
        let a = verify(&committed, &[moved]).unwrap();
        assert_eq!(a.decisions_changed, 1);
        assert!((a.max_abs_loglik_diff - 0.5).abs() < 1e-12);
        let e = verify(&committed, &[row(40, -1.0)]).unwrap_err().to_string();
        assert!(e.contains("step 40") && e.contains("not in the committed results"), "{e}");
    }

    #[test]
    fn packs_the_small_outputs_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        for v in ["eval", "eval-avg-k4"] {
            std::fs::create_dir_all(run.join(v)).unwrap();
            records::write_frame(
                &run.join(v).join("examples.parquet"),
                &mut records::examples_frame(&[row(10, -1.0 / 3.0)]).unwrap(),
            )
            .unwrap();
            std::fs::write(run.join(v).join("provenance.json"), "{}").unwrap();
        }
        std::fs::create_dir_all(run.join("checkpoints")).unwrap();
        std::fs::write(run.join("checkpoints/step_000010.safetensors"), "weights").unwrap();
        std::fs::write(run.join("train_log.csv"), "step\n").unwrap();
        let out = dir.path().join("results/run");
        let p = pack(&run, &out).unwrap();
        assert_eq!(p.variants, vec!["eval", "eval-avg-k4"]);
        assert!(!out.join("checkpoints").exists() && out.join("train_log.csv").is_file());
        let back = records::read_examples(&out.join("eval-avg-k4/examples.parquet")).unwrap();
        assert_eq!(back[0].logliks[0], (-1.0f64 / 3.0) as f32 as f64);
        let e = pack(&run, &out).unwrap_err().to_string();
        assert!(e.contains("already exists"), "{e}");
        assert_eq!(std::fs::read_dir(dir.path().join("results")).unwrap().count(), 1, "no temp folder left");
        // a run that was never evaluated is refused by name
        let e = pack(&dir.path().join("results"), &dir.path().join("other")).unwrap_err().to_string();
        assert!(e.contains("no eval/examples.parquet"), "{e}");
    }
}
