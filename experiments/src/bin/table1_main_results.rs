//! Table 1, the study's main result at this scale: per task, over the final-stage steps every
//! variant shares, the mean score, the example-level MTV (flip rate of 0/1 correctness) and the
//! instability score (IS) of single checkpoints, of checkpoint averaging and of checkpoint
//! ensembling, both over the largest window k they share. The lowest MTV and IS of a row are bold.
//! A second table puts the MTV of the task score side by side for single checkpoints, the
//! smoothing baseline (k-moving average of the single scores), averaging and ensembling (mean of
//! the members' option distributions), all at the same k.

use analysis::compare::StabilityRow;
use anyhow::{bail, Context, Result};
use clap::Parser;
use experiments::{csv_text, markdown_table, mean, task_names, Args, Output, Run};
use run::{Method, Variant};

/// The largest k that both averaging and ensembling were run with.
fn shared_k(rows: &[StabilityRow]) -> Option<usize> {
    let ks = |m: Method| rows.iter().filter(|r| r.method == m).map(|r| r.k).collect::<Vec<_>>();
    let (a, e) = (ks(Method::Average), ks(Method::EnsembleMean));
    a.into_iter().filter(|k| e.contains(k)).max()
}

fn main() -> Result<()> {
    let args = Args::parse();
    let run = Run::new(&args.run)?;
    let rows = run.stability()?;
    let k = shared_k(&rows).with_context(|| {
        format!("{}: analysis/stability.csv has no window k shared by averaging and ensembling", run.dir.display())
    })?;
    let methods = [(Method::Single, 1), (Method::Average, k), (Method::EnsembleMean, k)];
    let mut md_rows = vec![];
    let mut csv_rows = vec![];
    let mut columns: Vec<Vec<f64>> = vec![vec![]; 9];
    let task_level = [(Method::Single, 1), (Method::Smoothing, k), (Method::Average, k), (Method::EnsembleMean, k)];
    let mut tl_rows: Vec<Vec<String>> = vec![];
    let mut tl_columns: Vec<Vec<f64>> = vec![vec![]; 4];
    for task in task_names(rows.iter().map(|r| r.task.as_str())) {
        let found: Vec<&StabilityRow> = methods
            .iter()
            .filter_map(|(m, k)| rows.iter().find(|r| r.task == task && r.method == *m && r.k == *k))
            .collect();
        if found.len() < 3 || found.iter().any(|r| r.flip_rate.is_none() || r.instability.is_none()) {
            eprintln!("{task}: not every method has example-level rows (cloze tasks have no ensemble); left out");
            continue;
        }
        let values: Vec<f64> =
            found.iter().flat_map(|r| [r.mean_score, r.flip_rate.unwrap(), r.instability.unwrap()]).collect();
        for (c, v) in columns.iter_mut().zip(&values) {
            c.push(*v);
        }
        md_rows.push(row(&format!("{task} ({})", found[0].checkpoints), &values));
        // the task score's MTV of every method (the smoothing baseline may be missing when the
        // single checkpoints before the shared positions are not all there)
        let tl: Vec<Option<f64>> = task_level
            .iter()
            .map(|(m, k)| rows.iter().find(|r| r.task == task && r.method == *m && r.k == *k).map(|r| r.mtv))
            .collect();
        for (c, v) in tl_columns.iter_mut().zip(&tl) {
            c.extend(*v);
        }
        tl_rows.push(
            std::iter::once(task.clone())
                .chain(tl.iter().map(|v| v.map_or("-".into(), |v| format!("{v:.4}"))))
                .collect(),
        );
        csv_rows.push(
            std::iter::once(task.clone())
                .chain(std::iter::once(found[0].checkpoints.to_string()))
                .chain(values.iter().map(|v| format!("{v:.6}")))
                .chain(tl.iter().map(|v| v.map_or(String::new(), |v| format!("{v:.6}"))))
                .collect(),
        );
    }
    if md_rows.is_empty() {
        bail!("{}: no task has single, averaged and ensembled example-level rows", run.dir.display());
    }
    let means: Vec<f64> = columns.iter().map(|c| mean(c)).collect();
    md_rows.push(row(&format!("**mean of {} tasks**", columns[0].len()), &means));
    csv_rows.push(
        ["mean".to_string(), String::new()]
            .into_iter()
            .chain(means.iter().map(|v| format!("{v:.6}")))
            .chain(tl_columns.iter().map(|c| {
                if c.len() == columns[0].len() {
                    format!("{:.6}", mean(c))
                } else {
                    String::new()
                }
            }))
            .collect(),
    );

    let ka = format!("average k={k}");
    let ke = format!("ensemble k={k}");
    let header = [
        "task (checkpoints)",
        "single: score",
        "single: MTV",
        "single: IS",
        &format!("{ka}: score"),
        &format!("{ka}: MTV"),
        &format!("{ka}: IS"),
        &format!("{ke}: score"),
        &format!("{ke}: MTV"),
        &format!("{ke}: IS"),
    ];
    let mut md = markdown_table(&header, &md_rows);
    md += &format!("\nScore: mean accuracy over the final-stage steps; MTV: mean over examples of the example-level mean total variation (the flip rate of 0/1 correctness); IS: mean instability score (exact match of the chosen option). Ensembling: mean of the members' option distributions. Run `{}`.\n", run.dir.display());
    let n = tl_rows.len();
    tl_rows.push(
        std::iter::once(format!("**mean of {n} tasks**"))
            .chain(tl_columns.iter().map(|c| if c.len() == n { format!("{:.4}", mean(c)) } else { "-".into() }))
            .collect(),
    );
    md += &format!("\nMTV of the task score (accuracy) over the same steps, single checkpoints beside the smoothing baseline of the same window (k-moving average of the single scores: what window overlap alone gives):\n\n");
    md += &markdown_table(
        &[
            "task",
            &Variant::SINGLE.to_string(),
            &Variant::new(Method::Smoothing, k).to_string(),
            &Variant::new(Method::Average, k).to_string(),
            &Variant::new(Method::EnsembleMean, k).to_string(),
        ],
        &tl_rows,
    );
    let csv_header = [
        "task",
        "checkpoints",
        "single_score",
        "single_mtv",
        "single_is",
        "average_score",
        "average_mtv",
        "average_is",
        "ensemble_score",
        "ensemble_mtv",
        "ensemble_is",
        "single_task_mtv",
        "smoothing_task_mtv",
        "average_task_mtv",
        "ensemble_task_mtv",
    ];
    Output::new(&args.out, "table1_main_results")?.table(&md, &csv_text(&csv_header, &csv_rows)?, &run)
}

/// One Markdown row: scores plain, the lowest MTV and the lowest IS of the three methods bold.
fn row(label: &str, v: &[f64]) -> Vec<String> {
    let mut cells = vec![label.to_string()];
    for (i, x) in v.iter().enumerate() {
        let metric = i % 3;
        let best = metric > 0 && (0..3).all(|m| *x <= v[m * 3 + metric] + 1e-12);
        cells.push(if best { format!("**{x:.3}**") } else { format!("{x:.3}") });
    }
    cells
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_mtv_and_is_are_bold_scores_never() {
        let cells = row("t", &[0.5, 0.03, 0.04, 0.6, 0.01, 0.02, 0.55, 0.01, 0.03]);
        assert_eq!(
            cells,
            ["t", "0.500", "0.030", "0.040", "0.600", "**0.010**", "**0.020**", "0.550", "**0.010**", "0.030"]
        );
    }
}
