//! The study grid's committed results (`results/<run>/`, written by `just study`): which runs
//! exist, which axis each one varies (seed, model size, learning-rate schedule), and the numbers
//! the study's table and figure put side by side: each task's final accuracy against chance,
//! the checkpoint-to-checkpoint spread within a run, the seed-to-seed spread between runs, and
//! each task's signal-to-noise ratio across model sizes.
//!
//! A results folder is laid out as a run folder (`analysis pack`), so its tables are read with
//! [`Run`]'s readers; every file read is recorded as an input of the output's provenance.
//!
//! This module selects the data (which runs, which tasks); the statistics are `analysis`'s:
//! [`analysis::stats`] (mean, sample sd), [`analysis::seeds`] (the chi-square interval of an sd,
//! the pooled-variance t interval of a difference) and [`analysis::snr`].

use crate::{read_csv, Run};
use analysis::compare::{DifferenceRow, StabilityRow};
use analysis::seeds::{pooled_t_difference, sd_interval};
use analysis::stats::{mean, sample_sd};
use analysis::TaskMetrics;
use anyhow::{bail, Context, Result};
use run::Method;
use std::path::{Path, PathBuf};

/// One committed study run.
#[derive(Debug, Clone)]
pub struct StudyRun {
    pub name: String,
    pub dir: PathBuf,
    pub schedule: String,
    pub init_seed: u64,
    pub data_seed: u64,
    /// parameters, tied embeddings counted once (as `lm` counts them)
    pub params: u64,
    /// training tokens: steps x batch size x context
    pub tokens: u64,
    /// the last validation loss on the whole validation split, if the log has one
    pub final_val_loss: Option<f64>,
    /// accuracy metrics of the final stage, one per task
    pub tasks: Vec<TaskMetrics>,
    /// the stability table's accuracy rows (single, smoothing, average, ensemble)
    pub stability: Vec<StabilityRow>,
    /// `analysis compare`'s pooled paired differences of accuracy MTV between methods
    pub mtv_differences: Vec<DifferenceRow>,
}

impl StudyRun {
    /// The final-stage accuracy metrics of `task`.
    pub fn task(&self, task: &str) -> Option<&TaskMetrics> {
        self.tasks.iter().find(|m| m.task == task)
    }

    /// The tasks whose final accuracy is above chance (its 95% interval excludes chance).
    pub fn above_chance(&self) -> Vec<&str> {
        self.tasks.iter().filter(|m| m.above_chance == Some(true)).map(|m| m.task.as_str()).collect()
    }

    /// Mean over `tasks` of the final-stage task MTV of accuracy for a method (`single`,
    /// `smoothing`, `average`, `ensemble`) at window `k` (k = 1 for single checkpoints). Tasks the
    /// stability table leaves out (cloze tasks: no option distributions to ensemble) are skipped,
    /// as in the claims' pools; None if a remaining task lacks the method or none remains.
    pub fn pooled_mtv(&self, tasks: &[&str], method: Method, k: usize) -> Option<f64> {
        let v: Option<Vec<f64>> = tasks
            .iter()
            .filter(|t| self.stability.iter().any(|r| r.task == **t))
            .map(|t| self.stability.iter().find(|r| r.task == *t && r.method == method && r.k == k).map(|r| r.mtv))
            .collect();
        v.filter(|v| !v.is_empty()).map(|v| mean(&v))
    }

    /// The paired difference of final-stage accuracy MTV `method(k) - baseline(baseline_k)`,
    /// pooled over the tasks above chance with its 95% interval (`analysis compare`'s stratified
    /// bootstrap: one draw of examples shared by both methods); None if the run's table lacks it.
    pub fn mtv_difference(
        &self,
        method: Method,
        k: usize,
        baseline: Method,
        baseline_k: usize,
    ) -> Option<&DifferenceRow> {
        self.mtv_differences
            .iter()
            .find(|d| d.method == method && d.k == k && d.baseline == baseline && d.baseline_k == baseline_k)
    }

    /// The axis label of the run: `<schedule>, <params>M`.
    pub fn label(&self) -> String {
        format!("{}, {:.1}M", self.schedule, self.params as f64 / 1e6)
    }
}

/// The last non-empty `val_loss_full` (else `val_loss`) of a training log.
fn final_val_loss(path: &Path) -> Result<Option<f64>> {
    let mut r = csv::Reader::from_path(path).with_context(|| format!("{}: cannot open", path.display()))?;
    let headers = r.headers()?.clone();
    let col = |name: &str| headers.iter().position(|h| h == name);
    let Some(c) = col("val_loss_full").or_else(|| col("val_loss")) else { return Ok(None) };
    let mut last = None;
    for row in r.records() {
        let row = row.with_context(|| format!("{}: malformed row", path.display()))?;
        if let Some(v) = row.get(c).filter(|v| !v.is_empty()) {
            last = Some(v.parse::<f64>().with_context(|| format!("{}: bad loss {v:?}", path.display()))?);
        }
    }
    Ok(last)
}

/// Reads one results folder (`config.toml`, `train_log.csv`, `analysis/task_metrics.csv`,
/// `analysis/stability.csv`), recording each file as an input of `prov`.
pub fn load_run(dir: &Path, prov: &Run) -> Result<StudyRun> {
    let cfg_path = dir.join("config.toml");
    let cfg = run::Config::load(&cfg_path)?;
    prov.also_read(&cfg_path);
    let (init_seed, data_seed) = (cfg.init_seed(), cfg.data_seed());
    let params = cfg.n_params() as u64;
    let log = dir.join("train_log.csv");
    let final_val_loss = if log.is_file() {
        prov.also_read(&log);
        final_val_loss(&log)?
    } else {
        None
    };
    let analysis = run::RunDir::new(dir).analysis();
    let (tm_path, st_path, diff_path) =
        (analysis.join("task_metrics.csv"), analysis.join("stability.csv"), analysis.join("differences.csv"));
    for p in [&tm_path, &st_path, &diff_path] {
        if !p.is_file() {
            bail!("{}: missing; `just study {}` writes it", p.display(), cfg.name);
        }
        prov.also_read(p);
    }
    let tasks: Vec<TaskMetrics> =
        read_csv::<TaskMetrics>(&tm_path)?.into_iter().filter(|m| m.window == "final" && m.metric == "acc").collect();
    if tasks.is_empty() {
        bail!("{}: no final-stage accuracy rows", tm_path.display());
    }
    let stability = read_csv::<StabilityRow>(&st_path)?.into_iter().filter(|r| r.metric == "acc").collect();
    let mtv_differences = read_csv::<DifferenceRow>(&diff_path)?
        .into_iter()
        .filter(|d| d.task == "pooled" && d.metric == "acc" && d.statistic == "mtv")
        .collect();
    Ok(StudyRun {
        name: dir.file_name().and_then(|n| n.to_str()).unwrap_or("?").to_string(),
        dir: dir.to_path_buf(),
        schedule: cfg.train.schedule.name().to_string(),
        init_seed,
        data_seed,
        params,
        tokens: cfg.train.steps * (cfg.train.batch_size * cfg.model.context) as u64,
        final_val_loss,
        tasks,
        stability,
        mtv_differences,
    })
}

/// Every run under `results` (sub-folders with a `config.toml`), in name order.
pub fn load_results(results: &Path, prov: &Run) -> Result<Vec<StudyRun>> {
    let entries = std::fs::read_dir(results)
        .with_context(|| format!("{}: no results folder; `just study` writes results/<run>/", results.display()))?;
    let mut dirs: Vec<PathBuf> =
        entries.flatten().map(|e| e.path()).filter(|p| p.join("config.toml").is_file()).collect();
    dirs.sort();
    if dirs.is_empty() {
        bail!("{}: no study runs (folders with a config.toml); `just study` writes them", results.display());
    }
    dirs.iter().map(|d| load_run(d, prov)).collect()
}

/// Runs that differ only by their seeds: same schedule, same parameter count, same tokens.
pub fn seed_groups(runs: &[StudyRun]) -> Vec<Vec<&StudyRun>> {
    let mut groups: Vec<Vec<&StudyRun>> = vec![];
    for r in runs {
        match groups
            .iter_mut()
            .find(|g| g[0].schedule == r.schedule && g[0].params == r.params && g[0].tokens == r.tokens)
        {
            Some(g) => g.push(r),
            None => groups.push(vec![r]),
        }
    }
    groups
}

/// The seed group the study measures between-seed spread on: the one with the most runs.
pub fn yardstick<'a, 'r>(groups: &'a [Vec<&'r StudyRun>]) -> &'a [&'r StudyRun] {
    groups.iter().max_by_key(|g| g.len()).expect("load_results gives at least one run")
}

/// One task of a seed group: the seed-to-seed spread of the final score next to the
/// checkpoint-to-checkpoint spread within each run.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedSpread {
    pub task: String,
    pub seeds: usize,
    /// sample sd of the final-stage final score across seeds (None with one seed)
    pub between_seed_sd: Option<f64>,
    /// its 95% chi-square interval ([`analysis::seeds::sd_interval`])
    pub between_seed_ci: Option<(f64, f64)>,
    /// mean over seeds of the sd of a run's scores over its final stage
    pub within_run_sd: f64,
    /// mean over seeds of the final-stage task MTV
    pub within_run_mtv: f64,
    /// the task is above chance in every run of the group
    pub above_chance: bool,
}

/// Per task of a seed group (tasks every run of the group has).
pub fn seed_spread(group: &[&StudyRun]) -> Vec<SeedSpread> {
    let mut tasks: Vec<&str> = group[0].tasks.iter().map(|m| m.task.as_str()).collect();
    tasks.retain(|t| group.iter().all(|r| r.task(t).is_some()));
    tasks
        .into_iter()
        .map(|t| {
            let ms: Vec<&TaskMetrics> = group.iter().map(|r| r.task(t).unwrap()).collect();
            let finals: Vec<f64> = ms.iter().map(|m| m.final_score).collect();
            let sd = (finals.len() >= 2).then(|| sample_sd(&finals));
            let within: Vec<f64> = ms.iter().map(|m| m.relative_std.unwrap_or(0.0) * m.mean_score.abs()).collect();
            SeedSpread {
                task: t.to_string(),
                seeds: ms.len(),
                between_seed_sd: sd,
                between_seed_ci: sd.map(|s| sd_interval(s, ms.len())),
                within_run_sd: mean(&within),
                within_run_mtv: mean(&ms.iter().map(|m| m.mtv).collect::<Vec<_>>()),
                above_chance: ms.iter().all(|m| m.above_chance == Some(true)),
            }
        })
        .collect()
}

/// The runs the size axis compares: cosine runs of one seed pair (the pair found at the most
/// model sizes, the lowest on a tie), one run per parameter count, smallest first. Runs that
/// differ only in size, so a difference between them is the size's.
pub fn size_population(runs: &[StudyRun]) -> Vec<&StudyRun> {
    let mut pairs: Vec<(u64, u64)> =
        runs.iter().filter(|r| r.schedule == "cosine").map(|r| (r.init_seed, r.data_seed)).collect();
    pairs.sort();
    pairs.dedup();
    let sizes_of = |pair: (u64, u64)| -> Vec<&StudyRun> {
        let mut v: Vec<&StudyRun> =
            runs.iter().filter(|r| r.schedule == "cosine" && (r.init_seed, r.data_seed) == pair).collect();
        v.sort_by_key(|r| r.params);
        v.dedup_by_key(|r| r.params);
        v
    };
    // max_by_key keeps the last maximum: scan the pairs from the highest so the lowest wins a tie
    pairs.iter().rev().map(|&p| sizes_of(p)).max_by_key(|v| v.len()).unwrap_or_default()
}

/// A task's final score at the largest model size minus at the smallest, over the cosine runs of
/// every seed (the mean over each size's seeds), with its 95% t interval from the pooled
/// between-seed variance (df = runs - 2, [`analysis::seeds::pooled_t_difference`]): the size's
/// effect judged against seed noise, where [`size_snr`]'s noise is checkpoint noise only.
/// Returns (difference, low, high, runs at the largest size, runs at the smallest); None below
/// two sizes, without 3 runs in all, or where a run lacks the task.
pub fn size_difference(runs: &[StudyRun], task: &str) -> Option<(f64, f64, f64, usize, usize)> {
    let cosine: Vec<&StudyRun> = runs.iter().filter(|r| r.schedule == "cosine").collect();
    let (small, large) = (cosine.iter().map(|r| r.params).min()?, cosine.iter().map(|r| r.params).max()?);
    if small == large {
        return None;
    }
    let finals = |params: u64| -> Option<Vec<f64>> {
        cosine.iter().filter(|r| r.params == params).map(|r| r.task(task).map(|m| m.final_score)).collect()
    };
    let (a, b) = (finals(large)?, finals(small)?);
    let d = pooled_t_difference(&a, &b, 0.95)?;
    Some((d.estimate, d.low, d.high, a.len(), b.len()))
}

/// Heineman et al.'s signal-to-noise ratio of a task across model sizes
/// ([`analysis::snr::from_parts`]): signal the relative dispersion of the sizes' final scores,
/// noise the mean over the sizes of the relative sd of a run's scores over its final stage. None
/// with fewer than 2 sizes, where a size lacks the task or its relative sd, where a mean is 0,
/// or where the noise is 0.
pub fn size_snr(population: &[&StudyRun], task: &str) -> Option<analysis::snr::Snr> {
    let ms: Vec<&TaskMetrics> = population.iter().map(|r| r.task(task)).collect::<Option<_>>()?;
    let finals: Vec<f64> = ms.iter().map(|m| m.final_score).collect();
    let noises: Vec<f64> = ms.iter().map(|m| m.relative_std).collect::<Option<_>>()?;
    analysis::snr::from_parts(&finals, &noises).filter(|s| s.noise > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_run(
        root: &Path,
        name: &str,
        schedule: &str,
        d_model: u64,
        seeds: (u64, u64),
        finals: &[(&str, f64, bool)],
    ) {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("analysis")).unwrap();
        // the smoke config with this run's name, seeds, size and schedule
        let mut cfg = run::Config::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/smoke.toml")).unwrap();
        (cfg.schema_version, cfg.name, cfg.seed) = (2, name.to_string(), None);
        (cfg.init_seed, cfg.data_seed) = (Some(seeds.0), Some(seeds.1));
        (cfg.data.vocab_size, cfg.model.d_model, cfg.model.n_layers, cfg.model.d_ff) = (100, d_model as i64, 2, 32);
        (cfg.model.n_heads, cfg.model.context, cfg.train.batch_size, cfg.train.steps) = (2, 8, 4, 10);
        cfg.train.schedule = toml::Value::String(schedule.into()).try_into().unwrap();
        std::fs::write(dir.join("config.toml"), toml::to_string(&cfg).unwrap()).unwrap();
        std::fs::write(
            dir.join("train_log.csv"),
            "step,tokens,lr,train_loss,grad_norm,val_loss,val_loss_full\n0,0,0.1,5,1,5.5,5.4\n10,320,0.1,4,1,4.5,\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("analysis/differences.csv"),
            "task,tasks,metric,statistic,method,k,baseline,baseline_k,estimate,se,ci_low,ci_high,ci_low_family,ci_high_family,examples\n\
             pooled,1,acc,mtv,average,16,single,1,-0.01,0.002,-0.014,-0.006,-0.016,-0.004,10\n\
             a,1,acc,mtv,average,16,smoothing,16,0.5,0.1,0.3,0.7,0.2,0.8,10\n\
             pooled,1,acc,flip_rate,average,16,smoothing,16,0.5,0.1,0.3,0.7,0.2,0.8,10\n",
        )
        .unwrap();
        let mut tm = csv::Writer::from_path(dir.join("analysis/task_metrics.csv")).unwrap();
        let mut st = csv::Writer::from_path(dir.join("analysis/stability.csv")).unwrap();
        for (task, fin, above) in finals {
            let m = TaskMetrics {
                task: task.to_string(),
                window: "final".into(),
                metric: "acc".into(),
                final_score: *fin,
                mean_score: *fin,
                relative_std: Some(0.1),
                mtv: 0.02,
                above_chance: Some(*above),
                ..Default::default()
            };
            tm.serialize(&m).unwrap();
            for (method, k, mtv) in [(Method::Single, 1, 0.02), (Method::Average, 16, 0.01)] {
                st.serialize(StabilityRow {
                    task: task.to_string(),
                    metric: "acc".into(),
                    method,
                    k,
                    mtv,
                    ..Default::default()
                })
                .unwrap();
            }
        }
    }

    #[test]
    fn results_are_grouped_by_what_differs_and_spreads_are_computed_per_task() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        write_run(root, "cosine-s1", "cosine", 16, (1, 2), &[("a", 0.60, true), ("b", 0.25, false)]);
        write_run(root, "cosine-s2", "cosine", 16, (3, 4), &[("a", 0.62, true), ("b", 0.26, false)]);
        write_run(root, "cosine-s3", "cosine", 16, (5, 6), &[("a", 0.64, true), ("b", 0.24, false)]);
        write_run(root, "wsd-s1", "wsd", 16, (1, 2), &[("a", 0.70, true), ("b", 0.25, false)]);
        write_run(root, "size-s1", "cosine", 32, (1, 2), &[("a", 0.66, true), ("b", 0.25, false)]);
        std::fs::create_dir_all(root.join("not-a-run")).unwrap();
        let prov = Run::new(root).unwrap();
        let runs = load_results(root, &prov).unwrap();
        assert_eq!(
            runs.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            ["cosine-s1", "cosine-s2", "cosine-s3", "size-s1", "wsd-s1"]
        );
        assert_eq!(runs[0].params, 100 * 16 + 2 * (4 * 256 + 3 * 16 * 32 + 32) + 16);
        assert_eq!(runs[0].tokens, 10 * 4 * 8);
        assert_eq!(runs[0].final_val_loss, Some(5.4));
        assert_eq!(runs[0].above_chance(), ["a"]);
        assert_eq!(runs[0].pooled_mtv(&["a", "b"], Method::Average, 16), Some(0.01));
        assert_eq!(runs[0].pooled_mtv(&["a"], Method::EnsembleMean, 16), None);
        // a task the stability table leaves out (a cloze task) is skipped, not a hole in the pool
        assert_eq!(runs[0].pooled_mtv(&["a", "cloze"], Method::Average, 16), Some(0.01));
        assert_eq!(runs[0].pooled_mtv(&["cloze"], Method::Average, 16), None);
        // the pooled MTV differences only: per-task rows and other statistics are left out
        let d = runs[0].mtv_difference(Method::Average, 16, Method::Single, 1).unwrap();
        assert_eq!((d.estimate, d.ci_low, d.ci_high), (-0.01, -0.014, -0.006));
        assert!(runs[0].mtv_difference(Method::Average, 16, Method::Smoothing, 16).is_none());
        let groups = seed_groups(&runs);
        assert_eq!(groups.iter().map(|g| g.len()).collect::<Vec<_>>(), [3, 1, 1]);
        assert_eq!(yardstick(&groups).len(), 3);
        let spread = seed_spread(&groups[0]);
        let a = spread.iter().find(|s| s.task == "a").unwrap();
        assert!((a.between_seed_sd.unwrap() - 0.02).abs() < 1e-12);
        assert_eq!(a.between_seed_ci, Some(sd_interval(a.between_seed_sd.unwrap(), 3)));
        assert!((a.within_run_sd - 0.1 * 0.62).abs() < 1e-12);
        assert!(a.above_chance && !spread.iter().find(|s| s.task == "b").unwrap().above_chance);
        assert_eq!(seed_spread(&groups[1])[0].between_seed_sd, None);
        // the size axis: the cosine runs of seed pair (1, 2), smallest first; wsd-s1 shares the
        // seeds but not the schedule, cosine-s2/-s3 the schedule but not the seeds
        let pop = size_population(&runs);
        assert_eq!(pop.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["cosine-s1", "size-s1"]);
        // signal |0.66 - 0.60| / 0.63, noise the mean relative sd 0.1, so SNR 0.952
        let a = size_snr(&pop, "a").unwrap();
        assert!(
            (a.signal - 0.06 / 0.63).abs() < 1e-12
                && (a.noise - 0.1).abs() < 1e-12
                && (a.snr - 0.06 / 0.63 / 0.1).abs() < 1e-12,
            "{a:?}"
        );
        assert_eq!(size_snr(&pop[..1], "a"), None);
        // size difference: d_model 32 (size-s1 alone, 0.66) minus d_model 16 (cosine-s1, -s2,
        // -s3: 0.60, 0.62, 0.64; not wsd-s1), the interval `analysis::seeds`' (tested there)
        let (d, lo, hi, n_large, n_small) = size_difference(&runs, "a").unwrap();
        let want = pooled_t_difference(&[0.66], &[0.60, 0.62, 0.64], 0.95).unwrap();
        assert_eq!((d, lo, hi), (want.estimate, want.low, want.high));
        assert!((d - 0.04).abs() < 1e-12, "{d}");
        assert_eq!((n_large, n_small), (1, 3));
        assert_eq!(size_difference(&runs, "missing"), None);
        // one size only: no difference
        assert_eq!(size_difference(&runs[..3], "a"), None);
        assert_eq!(size_snr(&pop, "missing"), None);
        // every file read is an input of the provenance
        assert_eq!(prov.inputs().len(), 5 * 5);
    }

    #[test]
    fn an_empty_results_folder_is_an_error_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let prov = Run::new(tmp.path()).unwrap();
        let e = load_results(tmp.path(), &prov).unwrap_err().to_string();
        assert!(e.contains("no study runs") && e.contains(&tmp.path().display().to_string()), "{e}");
        write_run(tmp.path(), "r", "cosine", 16, (1, 2), &[("a", 0.6, true)]);
        std::fs::remove_file(tmp.path().join("r/analysis/stability.csv")).unwrap();
        let e = load_results(tmp.path(), &prov).unwrap_err().to_string();
        assert!(e.contains("stability.csv") && e.contains("just study r"), "{e}");
    }
}
