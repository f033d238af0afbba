//! `analysis report`: reads a run's evaluation tables (or a folder of lm-evaluation-harness
//! results files), writes the metric tables as parquet and CSV with their provenance, and renders
//! a readable summary.

use anyhow::{Context, Result};
use records::{ExampleRecord, TaskRecord};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::{analyse, ExampleMetrics, Options, TaskMetrics};

/// What a report was computed from.
pub struct Input {
    pub tasks: Vec<TaskRecord>,
    pub examples: Vec<ExampleRecord>,
    pub sources: Vec<PathBuf>,
}

/// A run folder (`<run>/eval/tasks.parquet`, `<run>/eval/examples.parquet`), an eval folder
/// itself, or a folder of lm-evaluation-harness results JSON files (task level only).
pub fn load_input(dir: &Path) -> Result<Input> {
    for eval in [dir.join("eval"), dir.to_path_buf()] {
        let t = eval.join("tasks.parquet");
        if t.is_file() {
            let e = eval.join("examples.parquet");
            let examples = if e.is_file() { records::read_examples(&e)? } else { Vec::new() };
            let mut sources = vec![t.clone()];
            if e.is_file() {
                sources.push(e);
            }
            return Ok(Input { tasks: records::read_tasks(&t)?, examples, sources });
        }
    }
    let tasks = records::harness::read_results_dir(dir).with_context(|| format!("{}: neither a run with eval/tasks.parquet nor a folder of harness results", dir.display()))?;
    Ok(Input { tasks, examples: Vec::new(), sources: vec![dir.to_path_buf()] })
}

fn f(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.3}"))
}

/// The summary printed to stdout (and snapshot-tested).
pub fn render(metrics: &[TaskMetrics], window: &str) -> String {
    let mut s = String::new();
    writeln!(s, "window: {window}").unwrap();
    writeln!(s, "{:<22} {:>5} {:>7} {:>7} {:>6} {:>15} {:>7} {:>5} {:>6} {:>6} {:>6} {:>6} {:>6}", "task", "ckpts", "final", "best", "MTV", "MTV 95% CI", "noise", "p", "dirchg", "drop", "flip", "IS", "regret").unwrap();
    for m in metrics.iter().filter(|m| m.window == window) {
        let ci = match (m.mtv_ci_low, m.mtv_ci_high) {
            (Some(a), Some(b)) => format!("[{a:.3}, {b:.3}]"),
            _ => "-".into(),
        };
        writeln!(
            s,
            "{:<22} {:>5} {:>7.3} {:>7.3} {:>6.3} {:>15} {:>7} {:>5} {:>6} {:>6.3} {:>6} {:>6} {:>6}",
            m.task,
            m.checkpoints,
            m.final_score,
            m.best_score,
            m.mtv,
            ci,
            m.noise_ratio.filter(|r| r.is_finite()).map_or("-".into(), |r| format!("{r:.2}x")),
            m.noise_p_value.map_or("-".into(), |p| format!("{p:.3}")),
            m.direction_changes,
            m.largest_drop,
            f(m.mean_flip_rate),
            f(m.mean_instability),
            f(m.selection_regret),
        )
        .unwrap();
    }
    s
}

pub const LEGEND: &str = "MTV: mean |score change| between consecutive checkpoints; noise: MTV / MTV expected from binomial sampling noise alone (p: simulated p-value); dirchg: direction changes; drop: largest fall between consecutive checkpoints; flip: mean example flip rate (example-level MTV); IS: mean instability score of outputs; regret: best test score minus the test score of the checkpoint a validation half picks.";

/// Analyses `input` and writes task_metrics / example_metrics (.parquet, .csv) and
/// provenance.json into `out`, as one set (the folder is locked meanwhile).
pub fn write(input: &Input, out: &Path, opts: &Options) -> Result<(Vec<TaskMetrics>, Vec<ExampleMetrics>)> {
    if input.tasks.is_empty() {
        anyhow::bail!("{}: no task scores to analyse (after the --tasks filter)", input.sources.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "));
    }
    let (tm, em) = analyse(&input.tasks, &input.examples, opts)?;
    let lock = output::FolderLock::acquire(out, "analysis report")?;
    let mut set = output::FileSet::begin(&lock, out)?;
    let mut df = records::frame_of(&tm)?;
    records::stage_frame(&mut set, "task_metrics.parquet", &mut df)?;
    records::stage_frame(&mut set, "task_metrics.csv", &mut df)?;
    if !em.is_empty() {
        let mut df = records::frame_of(&em)?;
        records::stage_frame(&mut set, "example_metrics.parquet", &mut df)?;
        records::stage_frame(&mut set, "example_metrics.csv", &mut df)?;
    }
    let provenance = serde_json::json!({
        "inputs": input.sources, "options": {"final_fraction": opts.final_fraction, "bootstrap": opts.bootstrap, "noise_sims": opts.noise_sims, "seed": opts.seed, "acc_norm": opts.use_acc_norm},
        "git_commit": output::provenance::git_commit(),
    });
    set.write("provenance.json", serde_json::to_string_pretty(&provenance)?.as_bytes())?;
    set.commit()?;
    Ok((tm, em))
}
