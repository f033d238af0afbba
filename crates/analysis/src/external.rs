//! External model suites: the Pythia trails (EleutherAI's lm-evaluation-harness results over
//! training, vendored in `data/external/`), measured the way our own runs are.
//!
//! [`pythia_models`] reads every `pythia-<size>-deduped/` folder and computes the final-stage
//! (last 20%) task-level metrics of each size; [`size_trend`] fits ln(final-stage MTV) on
//! ln(parameters) per task and pooled ([`crate::trend`]); [`snr_rows`] gives each task's
//! signal-to-noise ratio across the sizes ([`crate::snr`]). The results files hold no
//! per-example data, so their noise figure is the independent-binomial upper bound.

use anyhow::{bail, Context, Result};
use records::TaskRecord;
use std::path::{Path, PathBuf};

use crate::snr::Snr;
use crate::stats::mean;
use crate::trend::Slope;
use crate::TaskMetrics;

/// The tasks of the Pythia results that every size has an accuracy for (as `just pythia`).
pub const PYTHIA_TASKS: [&str; 8] =
    ["arc_easy", "arc_challenge", "piqa", "sciq", "winogrande", "lambada_openai", "logiqa", "wsc"];

/// How many of [`PYTHIA_TASKS`] (the first ones) enter the pooled size trend: logiqa and wsc,
/// with n of 651 and 273, are fitted and reported but not pooled.
pub const POOLED_TASKS: usize = 6;

/// One Pythia model's lm-evaluation-harness results over training.
pub struct PythiaModel {
    /// e.g. `pythia-1.4b`
    pub name: String,
    pub params: f64,
    /// rows of [`PYTHIA_TASKS`] only
    pub rows: Vec<TaskRecord>,
    /// the final-stage (last 20%) task-level metrics of accuracy of every task in
    /// [`PYTHIA_TASKS`], in that order
    pub last: Vec<TaskMetrics>,
    /// the results files read
    pub files: Vec<PathBuf>,
}

/// "pythia-1.4b-deduped" -> 1.4e9
pub fn pythia_params(name: &str) -> Option<f64> {
    let size = name.strip_prefix("pythia-")?.split('-').next()?;
    let (num, unit) = size.split_at(size.len().checked_sub(1)?);
    Some(
        num.parse::<f64>().ok()?
            * match unit {
                "m" => 1e6,
                "b" => 1e9,
                _ => return None,
            },
    )
}

/// Every `pythia-<size>-deduped/` folder under `dir`, smallest model first.
pub fn pythia_models(dir: &Path) -> Result<Vec<PythiaModel>> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("{}: cannot list", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let mut models = vec![];
    for d in dirs {
        let name = d.file_name().unwrap_or_default().to_string_lossy().to_string();
        let Some(params) = pythia_params(&name) else {
            continue;
        };
        let mut files: Vec<PathBuf> = std::fs::read_dir(&d)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        let rows: Vec<TaskRecord> = records::harness::read_results_dir(&d)?
            .into_iter()
            .filter(|r| PYTHIA_TASKS.contains(&r.task.as_str()))
            .collect();
        for t in PYTHIA_TASKS {
            if !rows.iter().any(|r| r.task == t) {
                bail!("{}: no results for {t}", d.display());
            }
        }
        let (metrics, _) = crate::analyse(&rows, &[], &crate::Options::default())?;
        let last = PYTHIA_TASKS
            .iter()
            .map(|t| {
                metrics
                    .iter()
                    .find(|r| r.task == *t && r.window == "final" && r.metric == "acc")
                    .cloned()
                    .with_context(|| format!("{}: no final-stage metrics for {t}", d.display()))
            })
            .collect::<Result<_>>()?;
        models.push(PythiaModel { name: name.trim_end_matches("-deduped").to_string(), params, rows, last, files });
    }
    if models.is_empty() {
        bail!("{}: no pythia-<size>-deduped folders", dir.display());
    }
    models.sort_by(|a, b| a.params.total_cmp(&b.params));
    Ok(models)
}

/// The size trend of the trails: per task and pooled (task fixed effects over the first
/// [`POOLED_TASKS`]), the slope of ln(final-stage task MTV) on ln(parameters), 95% t intervals.
pub struct SizeTrend {
    pub per_task: Vec<(String, Option<Slope>)>,
    pub pooled: Option<Slope>,
    pub smallest: f64,
    pub largest: f64,
}

pub fn size_trend(models: &[PythiaModel]) -> SizeTrend {
    let x: Vec<f64> = models.iter().map(|m| m.params).collect();
    let ys: Vec<Vec<f64>> = (0..PYTHIA_TASKS.len()).map(|t| models.iter().map(|m| m.last[t].mtv).collect()).collect();
    let per_task =
        PYTHIA_TASKS.iter().zip(&ys).map(|(t, y)| (t.to_string(), crate::trend::loglog(&x, y, 0.95))).collect();
    let groups: Vec<(&[f64], &[f64])> = ys[..POOLED_TASKS].iter().map(|y| (x.as_slice(), y.as_slice())).collect();
    SizeTrend {
        per_task,
        pooled: crate::trend::pooled_loglog(&groups, 0.95),
        smallest: x.iter().cloned().fold(f64::INFINITY, f64::min),
        largest: x.iter().cloned().fold(0.0, f64::max),
    }
}

/// The scores of one task of a model, in step order: `acc`, or `acc_norm` where `norm` (None if
/// a checkpoint lacks it).
pub fn trail(rows: &[TaskRecord], task: &str, norm: bool) -> Option<Vec<f64>> {
    let mut r: Vec<&TaskRecord> = rows.iter().filter(|r| r.task == task).collect();
    r.sort_by_key(|r| r.step);
    r.iter().map(|r| if norm { r.acc_norm } else { Some(r.acc) }).collect()
}

/// One task and metric of the suite: its SNR across the sizes and the mean final-stage MTV.
pub struct SnrRow {
    pub task: String,
    pub metric: &'static str,
    pub snr: Snr,
    pub sizes: usize,
    /// the mean over sizes of the final-stage task MTV (accuracy rows; the results files' metric)
    pub mean_final_mtv: Option<f64>,
}

/// SNR per task, for `acc` and (where every checkpoint of every size has it) `acc_norm`: the
/// signal is the relative dispersion of the sizes' final scores, the noise each size's relative
/// sd over its final 20% of checkpoints, averaged over sizes.
pub fn snr_rows(models: &[PythiaModel]) -> Vec<SnrRow> {
    let mut out = vec![];
    for (t, task) in PYTHIA_TASKS.iter().enumerate() {
        let mtv = mean(&models.iter().map(|m| m.last[t].mtv).collect::<Vec<_>>());
        for (metric, norm) in [("acc", false), ("acc_norm", true)] {
            let windows: Option<Vec<Vec<f64>>> = models
                .iter()
                .map(|m| {
                    let a = trail(&m.rows, task, norm)?;
                    let w = crate::metrics::final_window(a.len(), 0.2, 3);
                    Some(a[w].to_vec())
                })
                .collect();
            let Some(windows) = windows else { continue };
            let refs: Vec<&[f64]> = windows.iter().map(Vec::as_slice).collect();
            if let Some(snr) = crate::snr::snr(&refs) {
                out.push(SnrRow {
                    task: task.to_string(),
                    metric,
                    snr,
                    sizes: models.len(),
                    mean_final_mtv: (!norm).then_some(mtv),
                });
            }
        }
    }
    out
}

/// The suite's SNR and size trend per task, as `analysis suite` prints them.
pub fn render(models: &[PythiaModel]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let names: Vec<&str> = models.iter().map(|m| m.name.as_str()).collect();
    writeln!(s, "{} sizes: {}", models.len(), names.join(", ")).unwrap();
    let snr = snr_rows(models);
    let trend = size_trend(models);
    writeln!(
        s,
        "{:<16} {:>8} {:>8} {:>7} {:>8} {:>8} {:>7} {:>8} {:>18} {:>7}",
        "task", "acc sig", "noise", "SNR", "norm sig", "noise", "SNR", "slope", "slope 95% CI", "pooled"
    )
    .unwrap();
    for (i, (task, slope)) in trend.per_task.iter().enumerate() {
        let cell = |metric: &str| match snr.iter().find(|r| &r.task == task && r.metric == metric) {
            Some(r) => format!("{:>8.3} {:>8.4} {:>7.1}", r.snr.signal, r.snr.noise, r.snr.snr),
            None => format!("{:>8} {:>8} {:>7}", "-", "-", "-"),
        };
        let sl = slope.as_ref().map_or(format!("{:>8} {:>18}", "-", "-"), |s| {
            format!("{:>+8.3} {:>18}", s.slope, format!("[{:+.3}, {:+.3}]", s.ci_low, s.ci_high))
        });
        writeln!(
            s,
            "{task:<16} {} {} {sl} {:>7}",
            cell("acc"),
            cell("acc_norm"),
            if i < POOLED_TASKS { "yes" } else { "no" }
        )
        .unwrap();
    }
    if let Some(p) = &trend.pooled {
        writeln!(s, "pooled slope (task fixed effects, {} points): {:+.3} [{:+.3}, {:+.3}]; the largest size keeps {:.2}x the smallest's MTV", p.points, p.slope, p.ci_low, p.ci_high, (trend.largest / trend.smallest).powf(p.slope)).unwrap();
    }
    writeln!(s, "signal: relative dispersion of the sizes' final scores; noise: mean over sizes of sd / |mean| over the final 20% of checkpoints; SNR = signal / noise (Heineman et al. 2025). slope: ln(final-stage task MTV) on ln(parameters), 95% t interval.").unwrap();
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_sizes_come_from_folder_names() {
        assert_eq!(pythia_params("pythia-1.4b-deduped"), Some(1.4e9));
        assert_eq!(pythia_params("pythia-70m-deduped"), Some(7e7));
        assert_eq!(pythia_params("LICENSE"), None);
        assert_eq!(pythia_params("pythia-"), None);
    }

    fn vendored() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/external/pythia-v1-zero-shot")
    }

    #[test]
    fn the_vendored_suite_loads_and_gives_a_trend_and_snr_per_task() {
        let models = pythia_models(&vendored()).unwrap();
        assert!(models.len() >= 8, "{} sizes", models.len());
        assert!(models.windows(2).all(|w| w[0].params < w[1].params));
        let t = size_trend(&models);
        assert_eq!(t.per_task.len(), PYTHIA_TASKS.len());
        let pooled = t.pooled.unwrap();
        assert_eq!(pooled.points, POOLED_TASKS * models.len() - pooled.skipped);
        assert!(pooled.ci_low < pooled.slope && pooled.slope < pooled.ci_high);
        let snr = snr_rows(&models);
        // every task has an accuracy SNR; the larger models separate from the smaller on
        // arc_easy by far more than a checkpoint's noise
        assert!(PYTHIA_TASKS.iter().all(|t| snr.iter().any(|r| r.task == *t && r.metric == "acc")));
        let arc = snr.iter().find(|r| r.task == "arc_easy" && r.metric == "acc").unwrap();
        assert!(arc.snr.snr > 5.0, "{}", arc.snr.snr);
    }
}
