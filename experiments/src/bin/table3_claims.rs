//! Table 3, the claims table: each claim of the original study with the rule that decides it,
//! the estimate, its interval at the table's family-wise level, the verdict and the command that
//! shows it. The rules live in `analysis::claims` (fixed before any data is read); this binary
//! only loads the run's tables and the Pythia size trend, and writes the table.

use analysis::claims::{self, Verdict, FAMILY, FAMILY_LEVEL};
use anyhow::Result;
use clap::Parser;
use experiments::{csv_text, markdown_table, Args, Output, Run};

fn main() -> Result<()> {
    let args = Args::parse();
    let run = Run::new(&args.run)?;
    let models = experiments::pythia_models(&args.pythia, &run)?;
    let cs = experiments::run_claims(&run, &models)?;

    let header = [
        "",
        "claim of the study",
        "rule (decided before the data is read)",
        "estimate",
        "interval",
        "verdict",
        "n for 80% power",
        "command",
    ];
    let row = |c: &claims::Claim, command: String| {
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
    let rows: Vec<Vec<String>> =
        cs.iter().map(|c| row(c, format!("`{}`", c.command.replace("RUN", &run.dir.display().to_string())))).collect();
    let count = |v: Verdict| cs.iter().filter(|c| c.verdict == v).count();
    let mut md = markdown_table(&header, &rows);
    md += &format!(
        "\n{} claims: {} hold, {} do not hold, {} are inconclusive. Each interval is at level {:.2}% = 1 - 0.05/{FAMILY} (Bonferroni over the table), so the chance that any verdict is wrong in its direction is at most 5%. A claim holds when its interval lies on the claimed side of the threshold, does not hold when it lies on the other side, and is inconclusive otherwise, with the examples per task that would give 80% power for the observed effect. Pooled over the tasks whose final accuracy is above chance; \"every metric\" = acc, acc_norm, gold log-prob, margin (holds only if it holds on each). Ensembling: mean of the members' option distributions. From `{}` and the vendored Pythia results; rules in `crates/analysis/src/claims.rs`.\n",
        cs.len(),
        count(Verdict::Holds),
        count(Verdict::DoesNotHold),
        count(Verdict::Inconclusive),
        100.0 * FAMILY_LEVEL,
        run.dir.display()
    );
    let csv_rows: Vec<Vec<String>> = cs.iter().map(|c| row(c, c.command.to_string())).collect();
    Output::new(&args.out, "table3_claims")?.table(
        &md,
        &csv_text(
            &["id", "claim", "rule", "estimate", "interval", "verdict", "n_for_80pct_power", "command"],
            &csv_rows,
        )?,
        &run,
    )
}
