//! Table 7: one row per run of the study grid (`results/<run>/`, `just study`): what it varies
//! (schedule, size, seeds), its training tokens and final validation loss, how many tasks end
//! above chance, and the final-stage task MTV pooled over those tasks for single checkpoints,
//! the smoothing baseline (k-moving average of the single scores), checkpoint averaging and
//! ensembling at k = 4 and 16 (`analysis compare`'s stability table), and the paired differences
//! that say whether a remedy's gain is more than noise: averaging against single checkpoints and
//! averaging and ensembling against the smoothing baseline, at k = 16, each with its 95% interval.

use anyhow::Result;
use clap::Parser;
use experiments::study::load_results;
use experiments::{csv_text, markdown_table, Args, Output, Run};
use run::{Method, Variant};

/// The pooled-MTV columns, headed by the variant's label (`single`, `smoothing k=4`, ...).
const METHODS: [(Method, usize); 7] = [
    (Method::Single, 1),
    (Method::Smoothing, 4),
    (Method::Average, 4),
    (Method::EnsembleMean, 4),
    (Method::Smoothing, 16),
    (Method::Average, 16),
    (Method::EnsembleMean, 16),
];

/// Paired differences of pooled MTV shown: (method, k, baseline, baseline k, column).
const DIFFERENCES: [(Method, usize, Method, usize, &str); 3] = [
    (Method::Average, 16, Method::Single, 1, "average k=16 - single [95%]"),
    (Method::Average, 16, Method::Smoothing, 16, "average k=16 - smoothing k=16 [95%]"),
    (Method::EnsembleMean, 16, Method::Smoothing, 16, "ensemble k=16 - smoothing k=16 [95%]"),
];

fn main() -> Result<()> {
    let args = Args::parse();
    let prov = Run::new(&args.results)?;
    let runs = load_results(&args.results, &prov)?;
    let mut header =
        vec!["run", "schedule", "parameters", "tokens", "init/data seed", "final val loss", "tasks above chance"];
    let labels: Vec<String> = METHODS.iter().map(|&(m, k)| Variant::new(m, k).to_string()).collect();
    header.extend(labels.iter().map(String::as_str));
    header.extend(DIFFERENCES.iter().map(|d| d.4));
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            let above = r.above_chance();
            let mut row = vec![
                r.name.clone(),
                r.schedule.clone(),
                format!("{:.2}M", r.params as f64 / 1e6),
                format!("{:.1}M", r.tokens as f64 / 1e6),
                format!("{}/{}", r.init_seed, r.data_seed),
                r.final_val_loss.map_or("-".into(), |v| format!("{v:.4}")),
                format!("{}/{}", above.len(), r.tasks.len()),
            ];
            row.extend(
                METHODS.iter().map(|(m, k)| r.pooled_mtv(&above, *m, *k).map_or("-".into(), |v| format!("{v:.4}"))),
            );
            row.extend(DIFFERENCES.iter().map(|(m, k, b, bk, _)| {
                r.mtv_difference(*m, *k, *b, *bk)
                    .map_or("-".into(), |d| format!("{:.4} [{:.4}, {:.4}]", d.estimate, d.ci_low, d.ci_high))
            }));
            row
        })
        .collect();
    let mut md = markdown_table(&header, &rows);
    md += "\nMTV columns: final-stage task MTV of accuracy, mean over the run's tasks above chance that have options (cloze tasks, which cannot be ensembled, are left out, as in the claims table; the pooled set differs between runs where the tasks above chance do; `table6_study_tasks` lists them). Smoothing: the k-moving average of the single checkpoints' scores, the baseline any k-window method must beat, since neighbouring windows share k-1 checkpoints. Tokens: steps x batch x context. Val loss on the whole validation split. Differences: pooled MTV of the first method minus the second (negative: the remedy fluctuates less) with its 95% interval from `analysis compare`'s paired, stratified bootstrap over the shared eval examples (its pool: the options tasks above chance); an interval that excludes 0 is a difference beyond example noise within this run, not across seeds (compare it with the seed runs' spread).\n";
    Output::new(&args.out, "table7_study_runs")?.table(&md, &csv_text(&header, &rows)?, &prov)
}
