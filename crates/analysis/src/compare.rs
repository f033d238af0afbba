//! `analysis compare`: single checkpoints against averaged and ensembled ones, on the same steps.
//!
//! A run folder may hold, beside `eval/` (single checkpoints): `eval-avg-k<K>/` (`lm eval` of the
//! averaged checkpoints that `integrate sweep` wrote) and `ensembled/k<K>/` (`integrate
//! ensemble`). Every variant is cut to the steps that all variants share (a window of k only
//! starts at the k-th checkpoint; averages may cover only the final stage), so MTV and flip rates
//! are compared over the same checkpoint positions, then analysed exactly like the single run.

use anyhow::{bail, Context, Result};
use records::{ExampleRecord, TaskRecord};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::{analyse, Options};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StabilityRow {
    pub task: String,
    pub method: String,
    pub k: usize,
    pub checkpoints: usize,
    pub first_step: u64,
    pub final_score: f64,
    pub mean_score: f64,
    pub mtv: f64,
    pub mtv_ci_low: Option<f64>,
    pub mtv_ci_high: Option<f64>,
    pub flip_rate: Option<f64>,
    pub flip_rate_ci_low: Option<f64>,
    pub flip_rate_ci_high: Option<f64>,
    pub instability: Option<f64>,
    /// forward passes per prediction, relative to one checkpoint
    pub inference_cost: usize,
}

struct Variant {
    method: &'static str,
    k: usize,
    dir: PathBuf,
    tasks: Vec<TaskRecord>,
    examples: Vec<ExampleRecord>,
}

fn k_of(name: &str, prefix: &str) -> Option<usize> {
    name.strip_prefix(prefix)?.parse().ok()
}

fn load(method: &'static str, k: usize, dir: PathBuf) -> Result<Variant> {
    let tasks = records::read_tasks(&dir.join("tasks.parquet"))?;
    let examples = records::read_examples(&dir.join("examples.parquet"))?;
    Ok(Variant { method, k, dir, tasks, examples })
}

/// All variants found in a run folder.
fn variants(run: &Path) -> Result<Vec<Variant>> {
    let mut out = vec![load("single", 1, run.join("eval")).with_context(|| format!("{}: no eval/ tables; run `lm eval` first", run.display()))?];
    let mut entries: Vec<PathBuf> = std::fs::read_dir(run)?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in &entries {
        if let Some(k) = p.file_name().and_then(|n| n.to_str()).and_then(|n| k_of(n, "eval-avg-k")) {
            out.push(load("average", k, p.clone())?);
        }
    }
    let ens = run.join("ensembled");
    if ens.is_dir() {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&ens)?.filter_map(|e| e.ok().map(|e| e.path())).collect();
        dirs.sort();
        for p in dirs {
            if let Some(k) = p.file_name().and_then(|n| n.to_str()).and_then(|n| k_of(n, "k")) {
                out.push(load("ensemble", k, p)?);
            }
        }
    }
    Ok(out)
}

/// The stability table of a run folder.
pub fn compare(run: &Path, opts: &Options) -> Result<(Vec<StabilityRow>, Vec<PathBuf>)> {
    let vs = variants(run)?;
    // tasks every variant has (ensembles skip cloze tasks), and steps every variant has
    let mut tasks: BTreeSet<String> = vs[0].tasks.iter().map(|t| t.task.clone()).collect();
    let mut steps: BTreeSet<u64> = vs[0].tasks.iter().map(|t| t.step).collect();
    for v in &vs[1..] {
        tasks = tasks.intersection(&v.tasks.iter().map(|t| t.task.clone()).collect()).cloned().collect();
        steps = steps.intersection(&v.tasks.iter().map(|t| t.step).collect()).cloned().collect();
    }
    if steps.len() < 3 {
        bail!("{}: the variants share only {} steps", run.display(), steps.len());
    }
    let mut rows = Vec::new();
    for v in &vs {
        let t: Vec<TaskRecord> = v.tasks.iter().filter(|r| tasks.contains(&r.task) && steps.contains(&r.step)).cloned().collect();
        let e: Vec<ExampleRecord> = v.examples.iter().filter(|r| tasks.contains(&r.task) && steps.contains(&r.step)).cloned().collect();
        let (tm, _) = analyse(&t, &e, opts)?;
        for m in tm.into_iter().filter(|m| m.window == "all") {
            rows.push(StabilityRow {
                task: m.task,
                method: v.method.into(),
                k: v.k,
                checkpoints: m.checkpoints,
                first_step: m.first_step,
                final_score: m.final_score,
                mean_score: m.mean_score,
                mtv: m.mtv,
                mtv_ci_low: m.mtv_ci_low,
                mtv_ci_high: m.mtv_ci_high,
                flip_rate: m.mean_flip_rate,
                flip_rate_ci_low: m.flip_rate_ci_low,
                flip_rate_ci_high: m.flip_rate_ci_high,
                instability: m.mean_instability,
                inference_cost: if v.method == "ensemble" { v.k } else { 1 },
            });
        }
    }
    rows.sort_by(|a, b| (&a.task, a.method != "single", &a.method, a.k).cmp(&(&b.task, b.method != "single", &b.method, b.k)));
    Ok((rows, vs.into_iter().map(|v| v.dir).collect()))
}

fn ci(lo: Option<f64>, hi: Option<f64>) -> String {
    match (lo, hi) {
        (Some(a), Some(b)) => format!("[{a:.3}, {b:.3}]"),
        _ => "-".into(),
    }
}

pub fn render(rows: &[StabilityRow]) -> String {
    let mut s = String::new();
    writeln!(s, "{:<21} {:<9} {:>3} {:>5} {:>6} {:>6} {:>6} {:>15} {:>6} {:>15} {:>6} {:>5}", "task", "method", "k", "ckpts", "final", "mean", "MTV", "MTV 95% CI", "flip", "flip 95% CI", "IS", "cost").unwrap();
    for r in rows {
        writeln!(
            s,
            "{:<21} {:<9} {:>3} {:>5} {:>6.3} {:>6.3} {:>6.3} {:>15} {:>6} {:>15} {:>6} {:>5}",
            r.task,
            r.method,
            r.k,
            r.checkpoints,
            r.final_score,
            r.mean_score,
            r.mtv,
            ci(r.mtv_ci_low, r.mtv_ci_high),
            r.flip_rate.map_or("-".into(), |v| format!("{v:.3}")),
            ci(r.flip_rate_ci_low, r.flip_rate_ci_high),
            r.instability.map_or("-".into(), |v| format!("{v:.3}")),
            r.inference_cost
        )
        .unwrap();
    }
    s
}
