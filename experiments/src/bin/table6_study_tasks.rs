//! Table 6: every task of the study grid (`results/<run>/`, `just study`), its final accuracy in
//! each run with the 95% interval against chance (a task is at chance where the interval
//! contains chance: marked and kept, never dropped), and, for the runs that differ only by seed,
//! the seed-to-seed sd of the final score (chi-square 95% interval) next to the
//! checkpoint-to-checkpoint spread within a run (sd of the final-stage scores, and their MTV):
//! the yardstick for what a "real" difference between checkpoints is; and each task's
//! signal-to-noise ratio across the model sizes committed (Heineman et al. 2025).

use anyhow::Result;
use clap::Parser;
use experiments::study::{
    load_results, seed_groups, seed_spread, size_difference, size_population, size_snr, yardstick,
};
use experiments::{csv_text, markdown_table, task_names, Args, Output, Run};

fn main() -> Result<()> {
    let args = Args::parse();
    let prov = Run::new(&args.results)?;
    let runs = load_results(&args.results, &prov)?;
    let groups = seed_groups(&runs);
    let seeds = yardstick(&groups);
    let spread = seed_spread(seeds);
    let sizes = size_population(&runs);
    let tasks = task_names(runs.iter().flat_map(|r| r.tasks.iter().map(|m| m.task.as_str())));
    let mut header: Vec<String> = vec!["task".into(), "n".into(), "chance".into()];
    header.extend(runs.iter().map(|r| r.name.clone()));
    header.extend([
        "seeds".into(),
        "between-seed sd [95%]".into(),
        "within-run sd".into(),
        "within-run MTV".into(),
        "SNR across sizes (signal / noise)".into(),
        "size difference, largest - smallest [95%]".into(),
    ]);
    let mut rows = vec![];
    for t in &tasks {
        let any = runs.iter().find_map(|r| r.task(t)).unwrap();
        let mut row = vec![
            t.clone(),
            any.examples.map_or("-".into(), |n| n.to_string()),
            any.chance.map_or("-".into(), |c| format!("{c:.3}")),
        ];
        for r in &runs {
            row.push(match r.task(t) {
                Some(m) => format!(
                    "{:.3} [{:.3}, {:.3}]{}",
                    m.final_score,
                    m.final_ci_low.unwrap_or(f64::NAN),
                    m.final_ci_high.unwrap_or(f64::NAN),
                    if m.above_chance == Some(true) { "" } else { " (chance)" }
                ),
                None => "-".into(),
            });
        }
        match spread.iter().find(|s| &s.task == t) {
            Some(s) => {
                row.push(s.seeds.to_string());
                row.push(match (s.between_seed_sd, s.between_seed_ci) {
                    // a chi-square interval scales the sample sd, so equal scores give [0, 0],
                    // which would read as certainty: no interval then
                    (Some(sd), _) if sd == 0.0 => "0 (equal final scores)".into(),
                    (Some(sd), Some((lo, hi))) => format!("{sd:.4} [{lo:.4}, {hi:.4}]"),
                    _ => "- (1 seed)".into(),
                });
                row.push(format!("{:.4}", s.within_run_sd));
                row.push(format!("{:.4}", s.within_run_mtv));
            }
            None => row.extend(["-".into(), "-".into(), "-".into(), "-".into()]),
        }
        row.push(
            size_snr(&sizes, t).map_or("-".into(), |s| format!("{:.2} ({:.3} / {:.3})", s.snr, s.signal, s.noise)),
        );
        row.push(match size_difference(&runs, t) {
            Some((d, lo, hi, ..)) if lo == hi => format!("{d:+.3} (equal seeds)"),
            Some((d, lo, hi, ..)) => format!("{d:+.3} [{lo:+.3}, {hi:+.3}]"),
            None => "-".into(),
        });
        rows.push(row);
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut md = markdown_table(&header, &rows);
    let chance: Vec<String> = tasks
        .iter()
        .filter(|t| runs.iter().all(|r| r.task(t).is_none_or(|m| m.above_chance != Some(true))))
        .cloned()
        .collect();
    md += &format!(
        "\nFinal accuracy of the last checkpoint with its 95% Wilson score interval (it stays inside [0, 1] and is not of zero width at 0/n); \"(chance)\": the interval contains chance (uniform guessing), so the task is listed but kept out of pooled means. At chance in every run: {}. Seeds: the {} runs {} differ only by init and data seeds; between-seed sd is the sample sd of their final scores (95% chi-square interval, {} values), within-run sd the sd of one run's scores over its final stage and MTV the mean |change| between consecutive checkpoints there (means over the seeds). SNR across sizes (Heineman et al. 2025): over the runs {} (cosine, the same seeds: {} size{}), signal the relative dispersion of their final scores (max - min over the mean), noise the mean relative sd of a run's scores over its final stage; \"-\" below two sizes. With {} sizes the signal is one difference, without an interval, and its noise is checkpoint noise only: a reading, not a test. Size difference: the mean final score over the seeds of the largest cosine size minus the smallest{}, with a 95% t interval from the pooled between-seed variance: the test of a size effect against seed noise.\n",
        if chance.is_empty() { "none".to_string() } else { chance.join(", ") },
        seeds.len(),
        seeds.iter().map(|r| r.name.as_str()).collect::<Vec<_>>().join(", "),
        seeds.len(),
        sizes.iter().map(|r| format!("{} ({:.1}M)", r.name, r.params as f64 / 1e6)).collect::<Vec<_>>().join(", "),
        sizes.len(),
        if sizes.len() == 1 { "" } else { "s" },
        sizes.len(),
        size_difference(&runs, &tasks[0]).map_or(" (\"-\": one size, or fewer than 3 runs)".to_string(), |(_, _, _, a, b)| format!(" ({a} against {b} runs, df {})", a + b - 2))
    );
    Output::new(&args.out, "table6_study_tasks")?.table(&md, &csv_text(&header, &rows)?, &prov)
}
