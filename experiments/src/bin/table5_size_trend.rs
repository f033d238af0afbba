//! Table 5: does the fluctuation shrink with model size? Per task and pooled, the slope of
//! ln(final-stage task MTV) on ln(parameters) over the Pythia suite (70M to 12B), with its 95%
//! t interval (`analysis::external::size_trend`). A slope b means MTV scales as parameters^b;
//! the claims table decides the size claim on the pooled slope. logiqa and wsc (n = 651 and 273)
//! are fitted and shown but not pooled.

use anyhow::Result;
use clap::Parser;
use experiments::{csv_text, markdown_table, pythia_models, Args, Output, Run};

fn main() -> Result<()> {
    let args = Args::parse();
    let run = Run::new(&args.run)?;
    let models = pythia_models(&args.pythia, &run)?;
    let trend = experiments::pythia_size_trend(&models);
    let ratio = trend.largest / trend.smallest;
    let header = ["task", "pooled", "slope", "95% interval", "MTV ratio largest/smallest", "points"];
    let row = |task: &str, pooled: &str, s: Option<&analysis::trend::Slope>| match s {
        Some(s) => vec![
            task.to_string(),
            pooled.into(),
            format!("{:+.3}", s.slope),
            format!("[{:+.3}, {:+.3}]", s.ci_low, s.ci_high),
            format!("{:.2}", ratio.powf(s.slope)),
            s.points.to_string(),
        ],
        None => vec![task.to_string(), pooled.into(), "-".into(), "-".into(), "-".into(), "-".into()],
    };
    let mut rows: Vec<Vec<String>> = trend
        .per_task
        .iter()
        .enumerate()
        .map(|(i, (t, s))| row(t, if i < analysis::external::POOLED_TASKS { "yes" } else { "no" }, s.as_ref()))
        .collect();
    rows.push(row("pooled (task fixed effects)", "-", trend.pooled.as_ref()));
    let mut md = markdown_table(&header, &rows);
    md += &format!(
        "\n{} Pythia sizes ({:.0}M to {:.0}B parameters), final 20% of each size's checkpoints. A slope b means MTV scales as parameters^b; the ratio column is the fitted MTV at the largest size over that at the smallest, {ratio:.0}^b. Pooled over the first six tasks with one intercept per task; logiqa and wsc have small eval sets and are not pooled.\n",
        models.len(),
        trend.smallest / 1e6,
        trend.largest / 1e9
    );
    Output::new(&args.out, "table5_size_trend")?.table(&md, &csv_text(&header, &rows)?, &run)
}
