//! Table 9, generated text (issue 27): for every committed run with generation results
//! (`results/<run>/generation/`, `just study-gen`, analysed again by `just reproduce` into
//! `runs/results/<run>/generation/`), per generation task the final exact match (Wilson interval)
//! and char F1 (bootstrap interval over examples), the char-F1 MTV of the final stage with its
//! paired sign-flip null, and the instability score of the texts (IS: mean over transitions of
//! 1 - char F1 of consecutive outputs) over the final stage, with a normal interval over examples
//! (mean +- 1.96 sd / sqrt n of the per-example IS), and over every checkpoint; then the IS of
//! the single checkpoints, the averages and the vote ensembles over the positions they share
//! (`analysis compare`). Below, the text claims (`analysis::claims::generation_claims`) per run
//! and, for a configuration with several seeds, at the recipe level as table 3 combines them.

use analysis::claims::{generation_claims, recipe_claim, Claim, FAMILY_LEVEL};
use analysis::compare::{DifferenceRow, StabilityRow};
use analysis::{ExampleMetrics, TaskMetrics};
use anyhow::Result;
use clap::Parser;
use experiments::study::{load_run, seed_groups};
use experiments::{csv_text, markdown_table, read_csv, Args, Output, Run};
use run::Method;

/// The window of the averages and vote ensembles the table shows and the claims compare.
const K: usize = 4;

fn ci(e: f64, lo: Option<f64>, hi: Option<f64>) -> String {
    match (lo, hi) {
        (Some(lo), Some(hi)) => format!("{e:.3} [{lo:.3}, {hi:.3}]"),
        _ => format!("{e:.3}"),
    }
}

/// Mean and normal 95% interval of the per-example IS of one task and window.
fn is_interval(ex: &[ExampleMetrics], task: &str, window: &str) -> Option<(f64, f64, f64)> {
    let v: Vec<f64> = ex.iter().filter(|e| e.task == task && e.window == window).map(|e| e.instability).collect();
    if v.len() < 2 {
        return None;
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let h = 1.96 * sd / n.sqrt();
    Some((mean, (mean - h).max(0.0), (mean + h).min(1.0)))
}

fn main() -> Result<()> {
    let args = Args::parse();
    let prov = Run::new(&args.results)?;
    let out = Output::new(&args.out, "table9_generation")?;
    let mut names: Vec<String> = std::fs::read_dir(&args.results)?
        .flatten()
        .filter(|e| e.path().join("generation/config.toml").is_file())
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .collect();
    names.sort();
    let header = [
        "run",
        "task",
        "n",
        "exact match, final [95%]",
        "char F1, final [95%]",
        "char-F1 MTV, final 20% [95%]",
        "null ratio (p)",
        "IS, final 20% [95%]",
        "IS, all",
        "IS single",
        "IS average k=4",
        "IS vote k=4",
    ];
    let (mut rows, mut runs, mut claims): (Vec<Vec<String>>, Vec<_>, Vec<Vec<Claim>>) = (vec![], vec![], vec![]);
    for name in &names {
        let rel = format!("{name}/generation/analysis");
        let tm: Vec<TaskMetrics> = read_csv(&prov.file(&format!("{rel}/task_metrics.csv"))?)?;
        let ex: Vec<ExampleMetrics> = read_csv(&prov.file(&format!("{rel}/example_metrics.csv"))?)?;
        let st: Vec<StabilityRow> = read_csv(&prov.file(&format!("{rel}/stability.csv"))?)?;
        let diffs: Vec<DifferenceRow> = read_csv(&prov.file(&format!("{rel}/differences.csv"))?)?;
        let row = |task: &str, window: &str, metric: &str| {
            tm.iter().find(|m| m.task == task && m.window == window && m.metric == metric)
        };
        let is_of = |task: &str, method: Method, k: usize| {
            st.iter()
                .find(|r| r.task == task && r.metric == "acc" && r.method == method && r.k == k)
                .and_then(|r| r.instability)
                .map_or("-".to_string(), |v| format!("{v:.3}"))
        };
        let mut tasks: Vec<&str> = tm.iter().filter(|m| m.metric == "char_f1").map(|m| m.task.as_str()).collect();
        tasks.dedup();
        for task in tasks {
            let (Some(em), Some(f1), Some(em_all)) =
                (row(task, "final", "acc"), row(task, "final", "char_f1"), row(task, "all", "acc"))
            else {
                continue;
            };
            let null = match (f1.null_ratio, f1.null_p_value) {
                (Some(r), Some(p)) => format!("{r:.2}x ({p:.3})"),
                (None, Some(p)) => format!("- ({p:.3})"),
                _ => "-".into(),
            };
            let is_final =
                is_interval(&ex, task, "final").map_or("-".into(), |(m, lo, hi)| format!("{m:.3} [{lo:.3}, {hi:.3}]"));
            rows.push(vec![
                name.clone(),
                task.to_string(),
                em.examples.map_or("-".into(), |n| n.to_string()),
                ci(em.final_score, em.final_ci_low, em.final_ci_high),
                ci(f1.final_score, f1.final_ci_low, f1.final_ci_high),
                ci(f1.mtv_bias_corrected.unwrap_or(f1.mtv), f1.mtv_ci_low, f1.mtv_ci_high),
                null,
                is_final,
                em_all.mean_instability.map_or("-".into(), |v| format!("{v:.3}")),
                is_of(task, Method::Single, 1),
                is_of(task, Method::Average, K),
                is_of(task, Method::EnsembleVote, K),
            ]);
        }
        claims.push(generation_claims(&tm, &diffs, K));
        runs.push(load_run(&args.results.join(name).join("generation"), &prov)?);
    }

    let mut md = String::from(
        "Generated text of the runs trained again for it (`just study-gen`; their multiple-choice results are the rows of tables 6 and 7). \
         Exact match: Wilson interval; char F1: llm-jp-eval's char_f1 (best over the answers), bootstrap interval over examples; \
         char-F1 MTV: bias-corrected, two-sided interval where the paired null is rejected, else an upper bound; \
         IS: mean over transitions of 1 - char F1 of consecutive outputs, per example, averaged (interval: normal over examples); \
         the last three columns over the positions the single checkpoints, averages and vote ensembles share.\n\n",
    );
    if rows.is_empty() {
        md.push_str("No committed run has generation results yet (`just study-gen RUN` makes them).\n");
    } else {
        md.push_str(&markdown_table(&header, &rows));
    }

    // the claims on text, per run and per seed group
    let claim_header = ["run", "", "claim on generated text", "estimate [family-level interval]", "verdict"];
    let mut claim_rows: Vec<Vec<String>> = vec![];
    for (name, cs) in names.iter().zip(&claims) {
        for c in cs {
            claim_rows.push(vec![
                name.clone(),
                c.id.to_string(),
                c.claim.to_string(),
                format!("{:+.4} [{:+.4}, {:+.4}]", c.estimate, c.ci_low, c.ci_high),
                c.verdict.label().to_string(),
            ]);
        }
    }
    for group in seed_groups(&runs).iter().filter(|g| g.len() > 1) {
        let idx: Vec<usize> =
            group.iter().map(|r| runs.iter().position(|x| std::ptr::eq(x, *r)).expect("a run of the list")).collect();
        let label = idx.iter().map(|&i| names[i].as_str()).collect::<Vec<_>>().join(" + ");
        for (j, c) in claims[idx[0]].iter().enumerate() {
            let cs: Vec<&Claim> = idx.iter().map(|&i| &claims[i][j]).collect();
            let r = recipe_claim(&cs, FAMILY_LEVEL, 1000);
            let estimate = match &r {
                analysis::claims::RecipeClaim::Combined { parts, .. } => parts
                    .iter()
                    .map(|p| {
                        p.estimate.as_ref().map_or("-".into(), |e| {
                            format!("{:+.4} [{:+.4}, {:+.4}] (t, {} df)", e.estimate, e.low, e.high, e.df)
                        })
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
                analysis::claims::RecipeClaim::Identical { .. } => {
                    "- (the same in every run: the runs are copies)".into()
                }
                analysis::claims::RecipeClaim::NotEstimated => "- (not estimated in every run)".into(),
            };
            claim_rows.push(vec![
                format!("recipe: {label}"),
                c.id.to_string(),
                c.claim.to_string(),
                estimate,
                r.verdict().map_or("not estimated".into(), |v| v.label().to_string()),
            ]);
        }
    }
    if !claim_rows.is_empty() {
        md.push_str(
            "\nThe claims on generated text (pooled over the tasks whose texts score above 0 char F1; k = 4):\n\n",
        );
        md.push_str(&markdown_table(&claim_header, &claim_rows));
    }
    let mut csv_rows = rows.clone();
    for c in &claim_rows {
        let mut r = vec![c[0].clone(), format!("claim {}", c[1]), String::new()];
        r.extend([c[2].clone(), c[3].clone(), c[4].clone()]);
        r.resize(header.len(), String::new());
        csv_rows.push(r);
    }
    out.table(&md, &csv_text(&header, &csv_rows)?, &prov)
}
