//! Table 8: the study's claims at the level of the training recipe (issue 30 item 1). For every
//! configuration the grid holds with several seeds (runs equal but for their init and data
//! seeds: `study::seed_groups`), each claim of Table 3 is decided on every run, and the runs'
//! estimates are combined into one recipe-level estimate whose interval holds the between-seed
//! variance: the mean over runs with a t interval on runs - 1 degrees of freedom at the table's
//! family level (`analysis::seeds::recipe_estimate`; its coverage on simulated grids is tested
//! there). The table shows the recipe-level verdict, each run's estimate and verdict, whether any
//! run's verdict disagrees with the recipe's, and how many seeds would decide an inconclusive
//! claim at the runs' observed mean and spread. A claim over every metric is combined here on
//! its first metric (acc), whose estimate Table 3 shows.

use analysis::claims::{self, Verdict, FAMILY, FAMILY_LEVEL};
use analysis::seeds::{recipe_estimate, runs_needed};
use anyhow::Result;
use clap::Parser;
use experiments::study::{load_results, seed_groups};
use experiments::{csv_text, markdown_table, Args, Output, Run};

fn main() -> Result<()> {
    let args = Args::parse();
    let prov = Run::new(&args.results)?;
    let runs = load_results(&args.results, &prov)?;
    let models = experiments::pythia_models(&args.pythia, &prov)?;
    let header = [
        "recipe",
        "",
        "claim of the study",
        "recipe estimate [family-level t interval]",
        "recipe verdict",
        "each run: estimate, verdict",
        "a run disagrees",
        "seeds to decide",
    ];
    let (mut rows, mut csv_rows) = (vec![], vec![]);
    let mut groups_shown = vec![];
    for group in seed_groups(&runs).into_iter().filter(|g| g.len() >= 2) {
        let per_run: Vec<Vec<claims::Claim>> =
            group.iter().map(|r| experiments::run_claims(&Run::new(&r.dir)?, &models)).collect::<Result<_>>()?;
        let recipe = format!("{} {:.1}M ({})", group[0].schedule, group[0].params as f64 / 1e6, group.len());
        groups_shown.push(format!(
            "{}: {}",
            recipe,
            group.iter().map(|r| r.name.as_str()).collect::<Vec<_>>().join(", ")
        ));
        for (i, c) in per_run[0].iter().enumerate() {
            let est: Vec<f64> = per_run.iter().map(|cs| cs[i].estimate).collect();
            let each = group
                .iter()
                .zip(&per_run)
                .map(|(r, cs)| format!("{} {:+.4} {}", r.name, cs[i].estimate, cs[i].verdict.label()))
                .collect::<Vec<_>>()
                .join("; ");
            let (cell, verdict, needed) = match (recipe_estimate(&est, FAMILY_LEVEL), c.against) {
                (Some(e), Some((side, threshold))) => {
                    let v = claims::decide(e.estimate, e.low, e.high, side, threshold, e.se, 1).verdict;
                    let needed = (v == Verdict::Inconclusive)
                        .then(|| runs_needed(&est, threshold, FAMILY_LEVEL, 1000))
                        .flatten()
                        .map_or(if v == Verdict::Inconclusive { "> 1000 or never" } else { "-" }.into(), |n| {
                            n.to_string()
                        });
                    (format!("{:+.4} [{:+.4}, {:+.4}]", e.estimate, e.low, e.high), Some(v), needed)
                }
                _ if est.iter().all(|&v| v == est[0]) => {
                    ("- (every run gives the same estimate: the claim does not depend on the run, or the runs are copies)".into(), None, "-".into())
                }
                _ => ("- (not estimated in every run)".into(), None, "-".into()),
            };
            let disagrees = verdict.map_or("-".to_string(), |v| {
                if per_run.iter().any(|cs| cs[i].verdict != v) { "yes" } else { "no" }.to_string()
            });
            let row = vec![
                recipe.clone(),
                c.id.to_string(),
                c.claim.to_string(),
                cell,
                verdict.map_or("-".into(), |v| v.label().to_string()),
                each,
                disagrees,
                needed,
            ];
            rows.push(row.clone());
            csv_rows.push(row);
        }
    }
    let mut md = markdown_table(&header, &rows);
    md += &format!(
        "\nRecipes with several seeds: {}. Each run's claims are decided as in Table 3 (rules in `crates/analysis/src/claims.rs`); the recipe estimate is the mean of the runs' estimates, its interval a Student t interval on runs - 1 degrees of freedom from the runs' spread, which holds both the between-seed variance and each run's eval-set noise, at the table's family level {:.2}% = 1 - 0.05/{FAMILY} (`analysis::seeds::recipe_estimate`; coverage 90-99% on simulated grids with known between-seed variance). \"a run disagrees\": some run's own verdict differs from the recipe's. \"seeds to decide\": how many runs the recipe interval needs to exclude the threshold if the runs' mean and spread stay as observed (inconclusive claims). With two or three seeds the t quantile is large (204 for two and 17.9 for three at this level), so most recipe verdicts are inconclusive: that is the honest reading of a grid this small.\n",
        if groups_shown.is_empty() { "none".to_string() } else { groups_shown.join("; ") },
        100.0 * FAMILY_LEVEL,
    );
    Output::new(&args.out, "table8_recipe_claims")?.table(
        &md,
        &csv_text(
            &[
                "recipe",
                "id",
                "claim",
                "recipe_estimate",
                "recipe_verdict",
                "runs",
                "a_run_disagrees",
                "seeds_to_decide",
            ],
            &csv_rows,
        )?,
        &prov,
    )
}
