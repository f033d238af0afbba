//! Table 3, the claims table, at the level of the training recipe (issue 30 item 1). Each claim
//! of the original study is a rule fixed in `analysis::claims` before any data is read. For every
//! configuration the grid holds with several seeds (runs equal but for their init and data seeds:
//! `study::seed_groups`), the claim is decided on every run and the runs' estimates are combined
//! metric by metric into one recipe-level estimate whose interval holds the between-seed
//! variance: the mean over runs with a t interval on runs - 1 degrees of freedom at the table's
//! family level (`analysis::claims::recipe_claim`, on `analysis::seeds::recipe_estimate`, whose
//! coverage on simulated grids is tested there). A claim over several metrics holds at the recipe
//! level only if each metric's recipe interval holds, as on one run. The table shows the recipe
//! verdict, each run's estimate and verdict (the per-run column), which runs' verdicts disagree
//! with the recipe's, and how many seeds would decide an inconclusive claim at the runs' observed
//! means and spreads.
//!
//! Below it, the rules and the headline run (`--run`) on its own: the estimate, its interval at
//! the family level, the examples per task that would decide an inconclusive claim, and the
//! command that shows it. The CSV holds the recipe rows and every run's own rows.

use analysis::claims::{self, recipe_claim, Claim, RecipeClaim, Verdict, FAMILY, FAMILY_LEVEL};
use analysis::seeds::t_quantile;
use anyhow::Result;
use clap::Parser;
use experiments::recipe::{grid_claims, recipe_label, recipes};
use experiments::study::load_results;
use experiments::{csv_text, markdown_table, Args, Output, Run};

/// The most seeds the search for "seeds to decide" tries.
const MAX_SEEDS: usize = 1000;

fn interval(e: f64, lo: f64, hi: f64) -> String {
    format!("{e:+.4} [{lo:+.4}, {hi:+.4}]")
}

/// The recipe estimate cell: the headline metric's estimate and interval, and each other
/// metric's with its verdict for a claim over several metrics.
fn recipe_cell(r: &RecipeClaim, first: &Claim) -> String {
    match r {
        RecipeClaim::Combined { parts, .. } => {
            let one = |p: &claims::RecipePart| {
                p.estimate
                    .as_ref()
                    .map_or("- (equal in every run)".to_string(), |e| interval(e.estimate, e.low, e.high))
            };
            if parts.len() == 1 {
                one(&parts[0])
            } else {
                parts
                    .iter()
                    .map(|p| format!("{} {} {}", p.metric, one(p), p.verdict.label()))
                    .collect::<Vec<_>>()
                    .join("; ")
            }
        }
        RecipeClaim::Identical { .. } => format!(
            "{} (the same in every run: decided on data outside the runs, or the runs are copies)",
            interval(first.estimate, first.ci_low, first.ci_high)
        ),
        RecipeClaim::NotEstimated => "- (not estimated in every run)".into(),
    }
}

fn seeds_cell(r: &RecipeClaim) -> String {
    match r {
        RecipeClaim::Combined { verdict: Verdict::Inconclusive, seeds_to_decide, .. } => {
            seeds_to_decide.map_or(format!("> {MAX_SEEDS} or never"), |n| n.to_string())
        }
        _ => "-".into(),
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let run = Run::new(&args.run)?;
    let models = experiments::pythia_models(&args.pythia, &run)?;
    let headline = experiments::run_claims(&run, &models)?;
    let runs = load_results(&args.results, &run)?;
    let per_run = grid_claims(&runs, &models, &run)?;
    let groups = recipes(&runs);

    // the recipe level
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
    let mut summaries = vec![];
    for g in &groups {
        let group: Vec<&_> = g.iter().map(|&i| &runs[i]).collect();
        let recipe = recipe_label(&group);
        let mut count = [0usize; 4]; // holds, does not hold, inconclusive, a run disagrees
        let mut same = vec![]; // claims the same in every run, with their verdict
        for (i, c) in per_run[g[0]].iter().enumerate() {
            let cs: Vec<&Claim> = g.iter().map(|&r| &per_run[r][i]).collect();
            let r = recipe_claim(&cs, FAMILY_LEVEL, MAX_SEEDS);
            let verdict = r.verdict();
            let disagree = r.disagreeing(&cs);
            match (&r, verdict) {
                (RecipeClaim::Identical { verdict }, _) => same.push(format!("{} {}", c.id, verdict.label())),
                (_, Some(Verdict::Holds)) => count[0] += 1,
                (_, Some(Verdict::DoesNotHold)) => count[1] += 1,
                _ => count[2] += 1,
            }
            count[3] += usize::from(!disagree.is_empty());
            let each = group
                .iter()
                .zip(&cs)
                .map(|(r, c)| format!("{} {:+.4} {}", r.name, c.estimate, c.verdict.label()))
                .collect::<Vec<_>>()
                .join("; ");
            let disagrees = match verdict {
                None => "-".to_string(),
                Some(_) if disagree.is_empty() => "no".into(),
                Some(_) => {
                    format!("yes: {}", disagree.iter().map(|&k| group[k].name.as_str()).collect::<Vec<_>>().join(", "))
                }
            };
            let cell = recipe_cell(&r, c);
            let row = vec![
                recipe.clone(),
                c.id.to_string(),
                c.claim.to_string(),
                cell.clone(),
                verdict.map_or("-".into(), |v| v.label().to_string()),
                each.clone(),
                disagrees.clone(),
                seeds_cell(&r),
            ];
            rows.push(row);
            let (e, lo, hi) = match &r {
                RecipeClaim::Combined { parts, .. } => {
                    parts[0].estimate.as_ref().map_or((f64::NAN, f64::NAN, f64::NAN), |e| (e.estimate, e.low, e.high))
                }
                RecipeClaim::Identical { .. } => (c.estimate, c.ci_low, c.ci_high),
                RecipeClaim::NotEstimated => (f64::NAN, f64::NAN, f64::NAN),
            };
            csv_rows.push(vec![
                "recipe".into(),
                recipe.clone(),
                group.iter().map(|r| r.name.as_str()).collect::<Vec<_>>().join(" "),
                c.id.to_string(),
                c.claim.to_string(),
                c.rule.clone(),
                format!("{e:.6}"),
                format!("{lo:.6}"),
                format!("{hi:.6}"),
                verdict.map_or("-".into(), |v| v.label().to_string()),
                cell,
                disagrees,
                seeds_cell(&r),
                "-".into(),
                c.command.to_string(),
            ]);
        }
        summaries.push(format!(
            "{recipe} ({}): {} hold, {} do not hold, {} inconclusive{}; a run's own verdict differs from the recipe's on {} of {}",
            group.iter().map(|r| r.name.as_str()).collect::<Vec<_>>().join(", "),
            count[0],
            count[1],
            count[2],
            if same.is_empty() { String::new() } else { format!(", the same in every run: {}", same.join(", ")) },
            count[3],
            per_run[g[0]].len(),
        ));
    }
    let mut md = if groups.is_empty() {
        format!(
            "No configuration under `{}` has several seeds, so no claim is decided at the level of the recipe (it needs at least two runs equal but for their seeds); the headline run's own verdicts follow.\n",
            args.results.display()
        )
    } else {
        let mut md = markdown_table(&header, &rows);
        md += &format!(
            "\nRecipes with several seeds, each a family of {FAMILY} claims: {}. Each run's claims are decided by the rules below (`crates/analysis/src/claims.rs`); the recipe estimate is the mean of the runs' estimates, its interval a Student t interval on runs - 1 degrees of freedom from the runs' spread, which holds both the between-seed variance and each run's eval-set noise, at the family level {:.2}% = 1 - 0.05/{FAMILY} (`analysis::claims::recipe_claim` on `analysis::seeds::recipe_estimate`; coverage 90-99% on simulated grids with known between-seed variance). A claim over several metrics is combined metric by metric and holds only if every metric's recipe interval holds (the cell lists each metric; the per-run column gives each run's headline estimate and its own combined verdict). \"a run disagrees\": the runs whose own verdict differs from the recipe's. \"seeds to decide\": how many runs the recipe interval needs to decide the claim if the runs' means and spreads stay as observed (a metric on the wrong side of its threshold failing, or every metric holding). With two or three seeds the t quantile is large ({:.0} for two and {:.1} for three at this level), so most recipe verdicts are inconclusive: that is the honest reading of a grid this small. The Pythia claim (C16) is decided on the Pythia suite, the same in every run.\n",
            summaries.join("; "),
            100.0 * FAMILY_LEVEL,
            t_quantile(1, FAMILY_LEVEL),
            t_quantile(2, FAMILY_LEVEL),
        );
        md
    };

    // the rules and the headline run on its own
    let run_name = run.dir.file_name().and_then(|n| n.to_str()).unwrap_or("?").to_string();
    let count = |v: Verdict| headline.iter().filter(|c| c.verdict == v).count();
    let row = |c: &Claim, command: String| {
        vec![
            c.id.to_string(),
            c.claim.to_string(),
            if c.detail.is_empty() { c.rule.clone() } else { format!("{}; {}", c.rule, c.detail) },
            format!("{:+.4}", c.estimate),
            format!("[{:+.4}, {:+.4}]", c.ci_low, c.ci_high),
            c.verdict.label().to_string(),
            c.n_needed.map_or("-".into(), |n| n.to_string()),
            command,
        ]
    };
    let one: Vec<Vec<String>> = headline
        .iter()
        .map(|c| row(c, format!("`{}`", c.command.replace("RUN", &run.dir.display().to_string()))))
        .collect();
    md += &format!(
        "\n*The rules, and the headline run `{run_name}` on its own* (one of the runs combined above where it belongs to a recipe with several seeds):\n\n"
    );
    md += &markdown_table(
        &[
            "",
            "claim of the study",
            "rule (decided before the data is read)",
            "estimate",
            "interval",
            "verdict",
            "n for 80% power",
            "command",
        ],
        &one,
    );
    md += &format!(
        "\nOn `{run_name}` alone, {} claims: {} hold, {} do not hold, {} are inconclusive. Each interval is at level {:.2}% = 1 - 0.05/{FAMILY} (Bonferroni over the table), so the chance that any verdict is wrong in its direction is at most 5%. A claim holds when its interval lies on the claimed side of the threshold, does not hold when it lies on the other side, and is inconclusive otherwise, with the examples per task that would give 80% power for the observed effect. Pooled over the tasks whose final accuracy is above chance; \"every metric\" = acc, acc_norm, gold log-prob, margin (holds only if it holds on each). Ensembling: mean of the members' option distributions. From `{}` and the vendored Pythia results; every run's own rows are in the CSV.\n",
        headline.len(),
        count(Verdict::Holds),
        count(Verdict::DoesNotHold),
        count(Verdict::Inconclusive),
        100.0 * FAMILY_LEVEL,
        run.dir.display()
    );

    // every run's own rows (the headline run's too, if it is not one of the grid's)
    let canonical = |p: &std::path::Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let mut own: Vec<(String, &Vec<Claim>)> = runs.iter().zip(&per_run).map(|(r, cs)| (r.name.clone(), cs)).collect();
    if !runs.iter().any(|r| canonical(&r.dir) == canonical(&run.dir)) {
        own.insert(0, (run_name.clone(), &headline));
    }
    for (name, cs) in own {
        for c in cs {
            csv_rows.push(vec![
                "run".into(),
                "-".into(),
                name.clone(),
                c.id.to_string(),
                c.claim.to_string(),
                c.rule.clone(),
                format!("{:.6}", c.estimate),
                format!("{:.6}", c.ci_low),
                format!("{:.6}", c.ci_high),
                c.verdict.label().to_string(),
                c.detail.clone(),
                "-".into(),
                "-".into(),
                c.n_needed.map_or("-".into(), |n| n.to_string()),
                c.command.to_string(),
            ]);
        }
    }
    Output::new(&args.out, "table3_claims")?.table(
        &md,
        &csv_text(
            &[
                "level",
                "recipe",
                "runs",
                "id",
                "claim",
                "rule",
                "estimate",
                "ci_low",
                "ci_high",
                "verdict",
                "detail",
                "runs_disagreeing",
                "seeds_to_decide",
                "n_for_80pct_power",
                "command",
            ],
            &csv_rows,
        )?,
        &run,
    )
}
