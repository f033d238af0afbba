//! Table 2, the stability table: for each method and window k, the mean over tasks of the
//! final-stage scores and fluctuation measures, and on how many tasks each measure is lower than
//! with single checkpoints (same steps). Per-task rows: `analysis/stability.csv` of the run.

use analysis::compare::StabilityRow;
use anyhow::{bail, Result};
use clap::Parser;
use experiments::{csv_text, markdown_table, mean, Args, Output, Run};
use run::Method;

struct Summary {
    method: Method,
    k: usize,
    tasks: usize,
    final_score: f64,
    mean_score: f64,
    task_mtv: f64,
    example_mtv: f64,
    is: f64,
    /// tasks where task MTV, example MTV, IS are lower than single checkpoints'
    lower: [usize; 3],
    cost: usize,
}

/// Only tasks with example-level rows for every method count, so every row averages the same tasks.
fn summarise(rows: &[StabilityRow]) -> Vec<Summary> {
    let mut variants: Vec<(Method, usize)> = rows.iter().map(|r| (r.method, r.k)).collect();
    variants.sort();
    variants.dedup();
    // an ensemble of one checkpoint is the single checkpoint
    variants.retain(|(m, k)| *m == Method::Single || *k > 1);
    let mut tasks: Vec<&str> = rows.iter().map(|r| r.task.as_str()).collect();
    tasks.sort_unstable();
    tasks.dedup();
    tasks.retain(|t| {
        variants.iter().all(|(m, k)| {
            rows.iter().any(|r| {
                r.task == *t
                    && r.method == *m
                    && r.k == *k
                    // the smoothing baseline is a task-level series: no example rows
                    && (*m == Method::Smoothing || (r.flip_rate.is_some() && r.instability.is_some()))
            })
        })
    });
    let get = |t: &str, m: Method, k: usize| rows.iter().find(|r| r.task == t && r.method == m && r.k == k).unwrap();
    variants
        .into_iter()
        .map(|(m, k)| {
            let rs: Vec<&StabilityRow> = tasks.iter().map(|t| get(t, m, k)).collect();
            let base: Vec<&StabilityRow> = tasks.iter().map(|t| get(t, Method::Single, 1)).collect();
            let f = |g: fn(&StabilityRow) -> f64| mean(&rs.iter().map(|r| g(r)).collect::<Vec<_>>());
            let lower = |g: fn(&StabilityRow) -> f64| rs.iter().zip(&base).filter(|(r, b)| g(r) < g(b)).count();
            let (mtv, flip, is): (fn(&StabilityRow) -> f64, fn(&StabilityRow) -> f64, fn(&StabilityRow) -> f64) =
                (|r| r.mtv, |r| r.flip_rate.unwrap_or(f64::NAN), |r| r.instability.unwrap_or(f64::NAN));
            Summary {
                tasks: rs.len(),
                final_score: f(|r| r.final_score),
                mean_score: f(|r| r.mean_score),
                task_mtv: f(mtv),
                example_mtv: f(flip),
                is: f(is),
                lower: [lower(mtv), lower(flip), lower(is)],
                cost: rs.first().map_or(k, |r| r.inference_cost),
                method: m,
                k,
            }
        })
        .collect()
}

fn main() -> Result<()> {
    let args = Args::parse();
    let run = Run::new(&args.run)?;
    let rows = run.stability()?;
    let s = summarise(&rows);
    if s.first().map_or(true, |s| s.tasks == 0) {
        bail!("{}: analysis/stability.csv has no task with example-level rows for every method", run.dir.display());
    }
    let n = s[0].tasks;
    let header = [
        "method",
        "k",
        "final score",
        "mean score",
        "task MTV",
        "example MTV",
        "IS",
        "task MTV lower",
        "example MTV lower",
        "IS lower",
        "forward passes",
    ];
    let num = |v: f64| if v.is_nan() { "-".to_string() } else { format!("{v:.4}") };
    let cells = |x: &Summary, frac: &dyn Fn(usize) -> String| -> Vec<String> {
        vec![
            x.method.to_string(),
            x.k.to_string(),
            format!("{:.3}", x.final_score),
            format!("{:.3}", x.mean_score),
            format!("{:.4}", x.task_mtv),
            num(x.example_mtv),
            num(x.is),
            frac(x.lower[0]),
            if x.example_mtv.is_nan() { "-".into() } else { frac(x.lower[1]) },
            if x.is.is_nan() { "-".into() } else { frac(x.lower[2]) },
            x.cost.to_string(),
        ]
    };
    let md_rows: Vec<Vec<String>> = s
        .iter()
        .map(|x| {
            cells(x, &|c| {
                if x.method == Method::Single {
                    "-".into()
                } else {
                    format!("{c}/{n}")
                }
            })
        })
        .collect();
    let csv_rows: Vec<Vec<String>> = s.iter().map(|x| cells(x, &|c| c.to_string())).collect();
    let mut md = markdown_table(&header, &md_rows);
    md += &format!("\nMeans over the {n} tasks scored by every method, over the final-stage steps all variants share; smoothing: the k-moving average of the single checkpoints' scores (a task-level series, so no example measures); ensemble: mean of option distributions, ensemble_vote: majority vote; \"lower\": tasks on which the measure is below that of single checkpoints. Paired intervals of every difference: `{}/analysis/differences.csv` and Table 3. Per-task rows with 95% bootstrap intervals: `{}/analysis/stability.csv`.\n", run.dir.display(), run.dir.display());
    let csv_header = [
        "method",
        "k",
        "final_score",
        "mean_score",
        "task_mtv",
        "example_mtv",
        "is",
        "tasks_task_mtv_lower",
        "tasks_example_mtv_lower",
        "tasks_is_lower",
        "forward_passes",
    ];
    Output::new(&args.out, "table2_stability")?.table(&md, &csv_text(&csv_header, &csv_rows)?, &run)
}
