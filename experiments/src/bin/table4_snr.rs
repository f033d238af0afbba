//! Table 4: signal-to-noise ratio per task (Heineman et al. 2025, "Signal and Noise", arXiv
//! 2508.13144), computed by `analysis::external::snr_rows`. Signal: the relative dispersion of
//! the final scores of the Pythia sizes (70M to 12B), max |m_j - m_k| / mean; noise: the relative
//! standard deviation of each size's scores over its final 20% of checkpoints, averaged over
//! sizes; SNR = signal / noise, for acc and acc_norm. Our run has one size, so it gives the noise
//! only, per metric (accuracy and the continuous metrics), beside its checkpoint-to-checkpoint
//! MTV; the seed-to-seed spread joins it when the study has seeds.

use anyhow::Result;
use clap::Parser;
use experiments::{csv_text, markdown_table, pythia_models, Args, Output, Run};

fn main() -> Result<()> {
    let args = Args::parse();
    let run = Run::new(&args.run)?;
    let models = pythia_models(&args.pythia, &run)?;
    let header = ["source", "task", "metric", "signal", "noise", "SNR", "final-stage MTV"];
    let mut rows: Vec<Vec<String>> = vec![];
    for r in analysis::external::snr_rows(&models) {
        let mtv = r.mean_final_mtv.map_or("-".into(), |v| format!("{v:.4}"));
        rows.push(vec![
            format!("Pythia, {} sizes", r.sizes),
            r.task,
            r.metric.into(),
            format!("{:.3}", r.snr.signal),
            format!("{:.4}", r.snr.noise),
            format!("{:.1}", r.snr.snr),
            mtv,
        ]);
    }
    for m in run.task_metrics_all()?.iter().filter(|m| m.window == "final") {
        rows.push(vec![
            format!("this run ({})", run.dir.display()),
            m.task.clone(),
            m.metric.clone(),
            "-".into(),
            m.relative_std.map_or("-".into(), |v| format!("{v:.4}")),
            "-".into(),
            format!("{:.4}", m.mtv),
        ]);
    }
    // the Markdown (and so the paper) shows this run's acc and acc_norm; the CSV every metric
    let md_rows: Vec<Vec<String>> =
        rows.iter().filter(|r| !r[0].starts_with("this run") || r[2] == "acc" || r[2] == "acc_norm").cloned().collect();
    let mut md = markdown_table(&header, &md_rows);
    md += "\nSignal: relative dispersion of the final scores across model sizes; noise: sd / |mean| of a model's scores over its final 20% of checkpoints (mean over sizes); SNR = signal / noise (Heineman et al. 2025). A benchmark with a low SNR cannot rank the sizes from one checkpoint. One size is trained here, so our rows give the noise only (SNR needs several sizes); `table4_snr.csv` has our noise for every metric (gold log-prob, probability, margin, bits per byte too).\n";
    Output::new(&args.out, "table4_snr")?.table(&md, &csv_text(&header, &rows)?, &run)
}
