//! Turns evaluation tables into the measurements the study is about.
//!
//! [`analyse`] takes the per-task rows (and, where they exist, the per-example rows) of a run and
//! returns one [`TaskMetrics`] row per task, window (`all` checkpoints, and the `final` 20% of
//! them, where the paper measures) and metric, plus one [`ExampleMetrics`] row per example.
//! With per-example data every figure carries its uncertainty, against the right null: the eval
//! set is fixed and shared by all checkpoints, so consecutive scores are paired
//! ([`nulls::sign_flip_null`]; [`nulls::permutation_null`] beside it for 0/1 scores), final accuracies get a Wilson interval ([`proportion`]), and one bootstrap draw of examples is applied to every checkpoint
//! ([`bootstrap`]); continuous metrics ([`continuous`]) sit beside accuracy. Without it
//! (lm-evaluation-harness results files) only the task level is computed, with the
//! independent-binomial noise figure as a conservative upper bound on noise.
//! The modules, one idea each: [`panel`] (checkpoint x example matrices), [`continuous`],
//! [`nulls`], [`bootstrap`], [`selection`], [`snr`], [`trend`], [`power`], [`seeds`] (intervals
//! over a few seeds), [`stats`] (the descriptive statistics: mean, sample and population sd,
//! quantile), [`metrics`] (the fluctuation measures), [`compare`] (single vs smoothing vs
//! averaged vs ensembled), [`claims`] (the study's claims as rules decided on intervals),
//! [`external`] (the Pythia suite: size trend and SNR).

pub mod bootstrap;
pub mod claims;
pub mod compare;
pub mod continuous;
pub mod decide;
pub mod external;
pub mod html;
pub mod metrics;
pub mod nulls;
pub mod panel;
pub mod power;
pub mod proportion;
pub mod report;
pub mod results;
pub mod runs;
pub mod seeds;
pub mod selection;
pub mod snr;
pub mod stats;
pub mod stream;
pub mod subsets;
pub mod sums;
pub mod trend;

use anyhow::{bail, Result};
use ndarray::{ArrayView2, Axis};
use rayon::prelude::*;
use records::TaskRecord;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use continuous::Metric;
use metrics::*;
use panel::Panel;
use stats::{mean, population_sd, quantile, sample_sd};
use theory::sequence::mtv;

#[derive(Debug, Clone)]
pub struct Options {
    /// Fraction of the last checkpoints that make the `final` window (the paper: 0.2).
    pub final_fraction: f64,
    /// The `final` window starts at this step instead (a run whose scored checkpoints are not
    /// evenly spaced: `lm schedule --final-start`); at least 3 checkpoints either way.
    pub final_from: Option<u64>,
    /// Bootstrap draws of examples (one draw shared by every checkpoint, metric and method).
    pub bootstrap: usize,
    /// Draws of the sign-flip null (and of the binomial bound's simulation).
    pub noise_sims: usize,
    /// Random balanced splits of the examples for the selection regret.
    pub splits: usize,
    pub seed: u64,
    /// The metric of the example-level measures and the selection: `acc_norm` instead of `acc`.
    pub use_acc_norm: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            final_fraction: 0.2,
            final_from: None,
            bootstrap: 1000,
            noise_sims: 2000,
            splits: 200,
            seed: 1234,
            use_acc_norm: false,
        }
    }
}

impl Options {
    /// Refuses options no analysis runs with, named as the command line names them.
    pub fn check(&self) -> anyhow::Result<()> {
        if !(self.final_fraction > 0.0 && self.final_fraction <= 1.0) {
            anyhow::bail!("--final-fraction {}: must lie in (0, 1]", self.final_fraction);
        }
        if self.bootstrap == 0 {
            anyhow::bail!("--bootstrap must be at least 1");
        }
        Ok(())
    }

    pub fn primary(&self) -> Metric {
        if self.use_acc_norm {
            Metric::AccNorm
        } else {
            Metric::Acc
        }
    }
}

/// Confidence level of every interval in the tables.
pub const LEVEL: f64 = 0.95;

/// One row per (task, window, metric).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TaskMetrics {
    pub task: String,
    pub window: String,
    /// `acc`, `acc_norm`, `gold_logprob`, `gold_prob`, `margin`, `bits_per_byte`
    pub metric: String,
    pub checkpoints: usize,
    pub first_step: u64,
    pub last_step: u64,
    pub examples: Option<usize>,
    /// accuracy of uniform guessing (accuracy metrics with per-example data)
    pub chance: Option<f64>,
    pub final_score: f64,
    pub final_se: Option<f64>,
    pub final_ci_low: Option<f64>,
    pub final_ci_high: Option<f64>,
    /// the final score's 95% interval lies above chance (accuracy metrics)
    pub above_chance: Option<bool>,
    pub mean_score: f64,
    pub best_score: f64,
    pub best_step: u64,
    /// mean |score change| between consecutive checkpoints (as observed)
    pub mtv: f64,
    /// MTV minus its bootstrap bias (resampling examples adds fluctuation)
    pub mtv_bias_corrected: Option<f64>,
    /// bootstrap standard deviation of the MTV
    pub mtv_se: Option<f64>,
    pub mtv_ci_low: Option<f64>,
    pub mtv_ci_high: Option<f64>,
    /// `two-sided` where the paired null is rejected; `upper bound` (one-sided, low = 0) where
    /// the changes may all be noise
    pub mtv_interval: Option<String>,
    /// the paired sign-flip null: its mean and 95% quantile of MTV, observed / mean, p-value
    pub null_mtv: Option<f64>,
    pub null_mtv_q95: Option<f64>,
    pub null_ratio: Option<f64>,
    pub null_p_value: Option<f64>,
    /// the checkpoint-permutation null (0/1 metrics): observed MTV / its mean MTV, and its p-value
    /// ([`nulls::permutation_null`]: exact under stationary churn, conservative under drift)
    #[serde(default)]
    pub permutation_ratio: Option<f64>,
    #[serde(default)]
    pub permutation_p_value: Option<f64>,
    /// share of transitions significant (exact McNemar or sign-flip, Benjamini-Hochberg 5%)
    pub transitions_significant: Option<f64>,
    /// independent-binomial noise figure (only without per-example data): a conservative upper
    /// bound on noise, as it ignores the pairing
    pub binomial_bound_ratio: Option<f64>,
    pub binomial_bound_p_value: Option<f64>,
    /// the noise of Heineman et al.'s SNR: sd / |mean| of the window's scores
    pub relative_std: Option<f64>,
    pub detrended_sd: f64,
    pub direction_changes: usize,
    pub largest_drop: f64,
    pub largest_drop_step: Option<u64>,
    pub selection_regret: Option<f64>,
    pub selection_regret_ci_low: Option<f64>,
    pub selection_regret_ci_high: Option<f64>,
    pub selection_optimism: Option<f64>,
    pub selection_optimism_se: Option<f64>,
    pub selection_optimism_ci_low: Option<f64>,
    pub selection_optimism_ci_high: Option<f64>,
    /// example-level MTV: the mean over examples of each example's MTV (the flip rate for 0/1
    /// metrics)
    pub mean_flip_rate: Option<f64>,
    pub flip_rate_se: Option<f64>,
    pub flip_rate_ci_low: Option<f64>,
    pub flip_rate_ci_high: Option<f64>,
    pub mean_instability: Option<f64>,
    pub flip_rate_p50: Option<f64>,
    pub flip_rate_p90: Option<f64>,
    pub learned_then_forgotten: Option<f64>,
    pub stable_over_window: Option<f64>,
    pub consecutive_agreement: Option<f64>,
}

/// One row per (task, window, example).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ExampleMetrics {
    pub task: String,
    pub window: String,
    pub example_id: String,
    pub flips_to_wrong: u32,
    pub flips_to_right: u32,
    pub flip_rate: f64,
    pub instability: f64,
    pub learned_then_forgotten: bool,
    pub stable_from_step: u64,
    pub final_correct: bool,
}

/// A seed of its own for each task (and purpose), so adding a task changes no other task's draws.
pub(crate) fn seed_for(seed: u64, task: &str, purpose: &str) -> u64 {
    use sha2::{Digest, Sha256};
    let h = Sha256::digest(format!("{seed}/{task}/{purpose}").as_bytes());
    u64::from_le_bytes(h[..8].try_into().unwrap())
}

/// Task-level description of one score series (steps ascending); no uncertainty yet.
fn series_row(task: &str, window: &str, metric: Metric, steps: &[u64], s: &[f64]) -> TaskMetrics {
    let xs: Vec<f64> = steps.iter().map(|&v| v as f64).collect();
    let best = records::argmax(s);
    let (drop, at) = largest_drop(s);
    TaskMetrics {
        task: task.into(),
        window: window.into(),
        metric: metric.name().into(),
        checkpoints: s.len(),
        first_step: steps[0],
        last_step: *steps.last().unwrap(),
        examples: None,
        chance: None,
        final_score: *s.last().unwrap(),
        final_se: None,
        final_ci_low: None,
        final_ci_high: None,
        above_chance: None,
        mean_score: mean(s),
        best_score: s[best],
        best_step: steps[best],
        mtv: mtv(s).unwrap_or(0.0),
        mtv_bias_corrected: None,
        mtv_se: None,
        mtv_ci_low: None,
        mtv_ci_high: None,
        mtv_interval: None,
        null_mtv: None,
        null_mtv_q95: None,
        null_ratio: None,
        null_p_value: None,
        permutation_ratio: None,
        permutation_p_value: None,
        transitions_significant: None,
        binomial_bound_ratio: None,
        binomial_bound_p_value: None,
        relative_std: snr::relative_std(s),
        detrended_sd: population_sd(&detrend(&xs, s)),
        direction_changes: direction_changes(s),
        largest_drop: drop,
        largest_drop_step: at.map(|i| steps[i]),
        selection_regret: None,
        selection_regret_ci_low: None,
        selection_regret_ci_high: None,
        selection_optimism: None,
        selection_optimism_se: None,
        selection_optimism_ci_low: None,
        selection_optimism_ci_high: None,
        mean_flip_rate: None,
        flip_rate_se: None,
        flip_rate_ci_low: None,
        flip_rate_ci_high: None,
        mean_instability: None,
        flip_rate_p50: None,
        flip_rate_p90: None,
        learned_then_forgotten: None,
        stable_over_window: None,
        consecutive_agreement: None,
    }
}

/// The windows of a trail of checkpoints at `steps` (ascending): all of them, and the final
/// stage (the last `final_fraction` of the checkpoints, or those from step `final_from`).
pub fn windows(steps: &[u64], opts: &Options) -> [(&'static str, std::ops::Range<usize>); 2] {
    let m = steps.len();
    let fin = match opts.final_from {
        Some(from) => final_window(m, 0.0, 3).start.min(steps.partition_point(|&s| s < from))..m,
        None => final_window(m, opts.final_fraction, 3),
    };
    [("all", 0..m), ("final", fin)]
}

/// Analyses a run. `examples` may be empty (task level only).
pub fn analyse(
    tasks: &[TaskRecord],
    examples: &[records::ExampleRecord],
    opts: &Options,
) -> Result<(Vec<TaskMetrics>, Vec<ExampleMetrics>)> {
    analyse_panels(tasks, &Panel::all(examples)?, opts)
}

/// [`analyse`] on panels already built from the example rows ([`Panel::all`]).
pub fn analyse_panels(
    tasks: &[TaskRecord],
    panels: &BTreeMap<String, Panel>,
    opts: &Options,
) -> Result<(Vec<TaskMetrics>, Vec<ExampleMetrics>)> {
    let mut by_task: BTreeMap<&str, Vec<&TaskRecord>> = BTreeMap::new();
    for r in tasks {
        by_task.entry(&r.task).or_default().push(r);
    }
    // the checks in task order, then the tasks analysed side by side (each also in parallel
    // inside; the rows are put back in task order)
    let mut jobs: Vec<(&str, Vec<&TaskRecord>, Option<&Panel>)> = Vec::new();
    for (task, mut rows) in by_task {
        rows.sort_by_key(|r| r.step);
        if rows.windows(2).any(|w| w[0].step == w[1].step) {
            bail!("task {task}: two scores for one step");
        }
        let steps: Vec<u64> = rows.iter().map(|r| r.step).collect();
        if let Some(r) = rows.iter().find(|r| !r.acc.is_finite()) {
            bail!("task {task}: non-finite score at step {}", r.step);
        }
        if steps.len() < 2 {
            continue;
        }
        let panel = panels.get(task);
        if panel.is_some_and(|p| p.steps != steps) {
            bail!("task {task}: the example table and the task table cover different steps");
        }
        jobs.push((task, rows, panel));
    }
    let done: Vec<(Vec<TaskMetrics>, Vec<ExampleMetrics>)> = jobs
        .into_par_iter()
        .map(|(task, rows, panel)| {
            let (mut out, mut per_example) = (Vec::new(), Vec::new());
            match panel {
                Some(p) => with_examples(p, opts, &mut out, &mut per_example),
                None => task_level_only(task, &rows, opts, &mut out),
            }
            (out, per_example)
        })
        .collect();
    let (mut out, mut per_example) = (Vec::new(), Vec::new());
    for (o, e) in done {
        out.extend(o);
        per_example.extend(e);
    }
    Ok((out, per_example))
}

/// Trails without per-example data: the scores, and the independent-binomial bound on noise.
fn task_level_only(task: &str, rows: &[&TaskRecord], opts: &Options, out: &mut Vec<TaskMetrics>) {
    let steps: Vec<u64> = rows.iter().map(|r| r.step).collect();
    let mut series = vec![(
        Metric::Acc,
        rows.iter().map(|r| r.acc).collect::<Vec<f64>>(),
        rows.iter().map(|r| r.acc_stderr).collect::<Vec<f64>>(),
    )];
    if let (Some(s), Some(se)) = (
        rows.iter().map(|r| r.acc_norm).collect::<Option<Vec<f64>>>(),
        rows.iter().map(|r| r.acc_norm_stderr).collect::<Option<Vec<f64>>>(),
    ) {
        series.push((Metric::AccNorm, s, se));
    }
    for (metric, s, se) in series {
        for (name, w) in windows(&steps, opts) {
            let mut tm = series_row(task, name, metric, &steps[w.clone()], &s[w.clone()]);
            let xs: Vec<f64> = steps[w.clone()].iter().map(|&v| v as f64).collect();
            if let Some(b) = nulls::independent_binomial_bound(
                &xs,
                &s[w.clone()],
                &se[w.clone()],
                opts.noise_sims,
                seed_for(opts.seed, task, "binomial"),
            ) {
                tm.binomial_bound_ratio = Some(b.ratio);
                tm.binomial_bound_p_value = Some(b.p_value);
            }
            out.push(tm);
        }
    }
}

/// Per-example MTV of each example (column) over the rows `w`.
fn example_mtvs(v: ArrayView2<f64>, w: &std::ops::Range<usize>) -> Vec<f64> {
    v.axis_iter(Axis(1)).map(|col| mtv(&col.slice(ndarray::s![w.clone()]).to_vec()).unwrap_or(0.0)).collect()
}

/// What one bootstrap draw gives for one (metric, window): MTV, final score, example-level MTV.
#[derive(Clone, Copy, Default)]
struct Drawn {
    mtv: f64,
    final_score: f64,
    example_mtv: f64,
}

fn with_examples(p: &Panel, opts: &Options, out: &mut Vec<TaskMetrics>, per_example: &mut Vec<ExampleMetrics>) {
    let (task, n) = (p.task.as_str(), p.examples());
    let wins = windows(&p.steps, opts);
    let metrics = p.metrics();
    let ex_mtv: Vec<[Vec<f64>; 2]> = metrics
        .iter()
        .map(|&k| {
            let v = p.values(k).unwrap();
            [example_mtvs(v, &wins[0].1), example_mtvs(v, &wins[1].1)]
        })
        .collect();
    // one draw of examples for every checkpoint, metric and window: the figures are paired; every
    // draw's scores at once: values (T x n) times the draws' multiplicities (n x B), per metric
    // ([`sums::weighted_sums`]: exact integers on 0/1 scores)
    let b_len = opts.bootstrap;
    let counts = bootstrap::multiplicities(n, b_len, seed_for(opts.seed, task, "bootstrap"));
    let resampled: Vec<ndarray::Array2<f64>> =
        metrics.par_iter().map(|&k| sums::weighted_sums(p.values(k).unwrap(), &counts) / n as f64).collect();
    // each draw's mean example-level MTV per metric and window: sum_i count_i * mtv_i / n
    let example_boot: Vec<[Vec<f64>; 2]> = ex_mtv
        .par_iter()
        .map(|per_window| {
            per_window.each_ref().map(|m| counts.weighted_by(m).into_iter().map(|a| a / n as f64).collect())
        })
        .collect();
    let boot: Vec<Vec<[Drawn; 2]>> = (0..b_len)
        .into_par_iter()
        .map(|b| {
            metrics
                .iter()
                .enumerate()
                .map(|(mi, _)| {
                    let s = resampled[mi].column(b).to_vec();
                    let mut r = [Drawn::default(); 2];
                    for (wi, (_, w)) in wins.iter().enumerate() {
                        r[wi] = Drawn {
                            mtv: mtv(&s[w.clone()]).unwrap_or(0.0),
                            final_score: s[w.end - 1],
                            example_mtv: example_boot[mi][wi][b],
                        };
                    }
                    r
                })
                .collect()
        })
        .collect();
    drop(counts);
    for (mi, &k) in metrics.iter().enumerate() {
        let v = p.values(k).unwrap();
        let s = p.scores(k).unwrap();
        for (wi, (name, w)) in wins.iter().enumerate() {
            let mut tm = series_row(task, name, k, &p.steps[w.clone()], &s[w.clone()]);
            tm.examples = Some(n);
            let pick = |f: fn(&Drawn) -> f64| -> Vec<f64> { boot.iter().map(|d| f(&d[mi][wi])).collect() };
            let window = v.slice(ndarray::s![w.clone(), ..]);
            let null = nulls::sign_flip_null(window, opts.noise_sims, seed_for(opts.seed, task, "null"));
            if let Some(x) = &null {
                tm.null_mtv = Some(x.null_mean);
                tm.null_mtv_q95 = Some(x.null_q95);
                tm.null_ratio = Some(x.ratio).filter(|r| r.is_finite());
                tm.null_p_value = Some(x.p_value);
                tm.transitions_significant = Some(x.share_significant);
            }
            // 0/1 metrics: the checkpoint-permutation null beside it, exact under stationary churn
            // where the sign-flip test is not; conservative while examples still drift (see
            // `nulls::permutation_null`), so it is reported, not used for the interval's form
            if k.is_binary() {
                if let Some(x) =
                    nulls::permutation_null(window, opts.noise_sims, seed_for(opts.seed, task, "permutation"))
                {
                    tm.permutation_ratio = Some(x.ratio).filter(|r| r.is_finite());
                    tm.permutation_p_value = Some(x.p_value);
                }
            }
            let real = null.as_ref().is_some_and(|x| x.p_value < 0.05);
            let iv = if real {
                bootstrap::mtv_interval(tm.mtv, &pick(|d| d.mtv), LEVEL, 0.0)
            } else {
                bootstrap::upper_bound(tm.mtv, &pick(|d| d.mtv), LEVEL, 0.0)
            };
            tm.mtv_bias_corrected = Some(iv.bias_corrected.max(0.0));
            tm.mtv_se = Some(sample_sd(&pick(|d| d.mtv)));
            tm.mtv_ci_low = Some(iv.low);
            tm.mtv_ci_high = Some(iv.high);
            // no example changed over the window: every bootstrap draw repeats MTV = 0, a [0, 0]
            // that claims certainty; MTV of 0/1 scores is at most the share of example-transitions
            // that change, so the Wilson bound of 0 changes out of n (T - 1) bounds it
            if k.is_binary() && tm.mtv == 0.0 {
                let cells = (n * (w.len() - 1)) as u64;
                tm.mtv_ci_high = proportion::wilson(0, cells, LEVEL).map(|(_, hi)| hi).or(tm.mtv_ci_high);
            }
            tm.mtv_interval = Some(if real { "two-sided" } else { "upper bound" }.into());
            // a 0/1 score is a proportion: the Wilson interval, which stays inside [0, 1] and is
            // not degenerate at 0/n ([`proportion`]); other metrics: the bootstrap over examples
            let (low, high) = match k.is_binary().then(|| proportion::wilson_of_mean(tm.final_score, n, LEVEL)) {
                Some(Some(w)) => w,
                _ => {
                    let fin = bootstrap::interval(tm.final_score, &pick(|d| d.final_score), LEVEL, f64::NEG_INFINITY);
                    (fin.low, fin.high)
                }
            };
            tm.final_se = Some(sample_sd(&pick(|d| d.final_score)));
            tm.final_ci_low = Some(low);
            tm.final_ci_high = Some(high);
            if k.is_binary() {
                tm.chance = Some(p.chance);
                tm.above_chance = Some(low > p.chance);
            }
            let em = mean(&ex_mtv[mi][wi]);
            let ev = bootstrap::interval(em, &pick(|d| d.example_mtv), LEVEL, 0.0);
            tm.mean_flip_rate = Some(em);
            tm.flip_rate_se = Some(sample_sd(&pick(|d| d.example_mtv)));
            tm.flip_rate_ci_low = Some(ev.low);
            tm.flip_rate_ci_high = Some(ev.high);
            // a generation task has no acc_norm: its example level is on acc (exact match)
            let primary = if p.generation { Metric::Acc } else { opts.primary() };
            if k == primary {
                example_level(&mut tm, per_example, p, v, w, opts);
            }
            out.push(tm);
        }
    }
}

/// The example-level description (flips, IS, forgetting) and the selection regret, on the
/// primary 0/1 metric. The instability score compares consecutive checkpoints' outputs: chosen
/// options by exact match; a generation task's texts by char F1 (`textmatch::char_f1`, the
/// paper's IS on text: the mean of 1 - char F1 over consecutive pairs).
fn example_level(
    tm: &mut TaskMetrics,
    per_example: &mut Vec<ExampleMetrics>,
    p: &Panel,
    v: ArrayView2<f64>,
    w: &std::ops::Range<usize>,
    opts: &Options,
) {
    let n = p.examples();
    let outputs = if opts.use_acc_norm && !p.generation { &p.outputs_norm } else { &p.outputs };
    let stats: Vec<ExampleStats> = (0..n)
        .map(|e| {
            let correct: Vec<bool> = v.column(e).slice(ndarray::s![w.clone()]).iter().map(|&x| x > 0.5).collect();
            let outs: Vec<&str> = outputs[e][w.clone()].iter().map(|t| &**t).collect();
            let mut s = example_stats(&correct, &outs);
            if p.generation {
                s.instability = theory::sequence::instability(&outs, |a, b| textmatch::char_f1(a, b)).unwrap_or(0.0);
            }
            s
        })
        .collect();
    let rates: Vec<f64> = stats.iter().map(|s| s.flip_rate).collect();
    let last = w.end - 1;
    let strata: Vec<u32> = (0..n).map(|e| 2 * p.gold[e] + u32::from(v[[last, e]] > 0.5)).collect();
    let sel = selection::selection_draws(
        v.slice(ndarray::s![w.clone(), ..]),
        &strata,
        opts.splits,
        opts.bootstrap.min(200),
        10,
        seed_for(opts.seed, &p.task, "selection"),
    );
    // the split-averaged estimate is unbiased, its bootstrap world is not: a centred interval on
    // de-noised draws (see `selection`)
    let (boot_regret, boot_optimism) = (
        selection::denoised(&sel.boot_regret, sel.mc_var_regret),
        selection::denoised(&sel.boot_optimism, sel.mc_var_optimism),
    );
    let (regret, optimism) = (
        bootstrap::centred(sel.regret, &boot_regret, LEVEL, f64::NEG_INFINITY),
        bootstrap::centred(sel.optimism, &boot_optimism, LEVEL, f64::NEG_INFINITY),
    );
    tm.selection_regret = Some(sel.regret);
    tm.selection_regret_ci_low = Some(regret.low);
    tm.selection_regret_ci_high = Some(regret.high);
    tm.selection_optimism = Some(sel.optimism);
    tm.selection_optimism_se = Some(sample_sd(&boot_optimism));
    tm.selection_optimism_ci_low = Some(optimism.low);
    tm.selection_optimism_ci_high = Some(optimism.high);
    tm.mean_instability = Some(mean(&stats.iter().map(|s| s.instability).collect::<Vec<_>>()));
    tm.flip_rate_p50 = Some(quantile(&rates, 0.5));
    tm.flip_rate_p90 = Some(quantile(&rates, 0.9));
    tm.learned_then_forgotten = Some(stats.iter().filter(|s| s.learned_then_forgotten).count() as f64 / n as f64);
    tm.stable_over_window = Some(stats.iter().filter(|s| s.stable_from == 0).count() as f64 / n as f64);
    tm.consecutive_agreement = Some(1.0 - mean(&rates));
    for (e, s) in stats.into_iter().enumerate() {
        per_example.push(ExampleMetrics {
            task: tm.task.clone(),
            window: tm.window.clone(),
            example_id: p.ids[e].clone(),
            flips_to_wrong: s.flips_to_wrong,
            flips_to_right: s.flips_to_right,
            flip_rate: s.flip_rate,
            instability: s.instability,
            learned_then_forgotten: s.learned_then_forgotten,
            stable_from_step: p.steps[w.start + s.stable_from],
            final_correct: s.final_correct,
        });
    }
}
