//! Turns evaluation tables into the measurements the study is about.
//!
//! [`analyse`] takes the per-task rows (and, where they exist, the per-example rows) of a run and
//! returns one [`TaskMetrics`] row per task and window (`all` checkpoints, and the `final` 20%
//! of them, where the paper measures), plus one [`ExampleMetrics`] row per example.
//! Per-example data adds the example-level measures, bootstrap intervals over examples and the
//! selection regret; without it (lm-evaluation-harness results files) only the task level is
//! computed. Definitions are in [`metrics`].

pub mod compare;
pub mod metrics;
pub mod report;
pub mod stream;

use anyhow::{bail, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use records::{ExampleRecord, TaskRecord};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

use metrics::*;
use theory::sequence::mtv;

#[derive(Debug, Clone)]
pub struct Options {
    /// Fraction of the last checkpoints that make the `final` window (the paper: 0.2).
    pub final_fraction: f64,
    pub bootstrap: usize,
    pub noise_sims: usize,
    pub seed: u64,
    /// Score on `acc_norm` instead of `acc`.
    pub use_acc_norm: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { final_fraction: 0.2, bootstrap: 1000, noise_sims: 2000, seed: 1234, use_acc_norm: false }
    }
}

/// One row per (task, window).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TaskMetrics {
    pub task: String,
    pub window: String,
    pub checkpoints: usize,
    pub first_step: u64,
    pub last_step: u64,
    pub final_score: f64,
    pub mean_score: f64,
    pub best_score: f64,
    pub best_step: u64,
    pub mtv: f64,
    pub mtv_ci_low: Option<f64>,
    pub mtv_ci_high: Option<f64>,
    pub detrended_sd: f64,
    pub direction_changes: usize,
    pub largest_drop: f64,
    pub largest_drop_step: Option<u64>,
    pub noise_expected_mtv: Option<f64>,
    pub noise_ratio: Option<f64>,
    pub noise_p_value: Option<f64>,
    pub selection_regret: Option<f64>,
    pub selection_optimism: Option<f64>,
    pub examples: Option<usize>,
    pub mean_flip_rate: Option<f64>,
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

/// Each example's correctness and outputs over the steps of one task, examples in id order.
struct Matrix {
    steps: Vec<u64>,
    ids: Vec<String>,
    correct: Vec<Vec<bool>>,
    outputs: Vec<Vec<String>>,
}

fn matrix(rows: &[&ExampleRecord], use_norm: bool) -> Result<Matrix> {
    let mut steps: Vec<u64> = rows.iter().map(|r| r.step).collect();
    steps.sort_unstable();
    steps.dedup();
    let col: BTreeMap<u64, usize> = steps.iter().enumerate().map(|(i, s)| (*s, i)).collect();
    let mut by_id: BTreeMap<&str, (Vec<Option<bool>>, Vec<String>)> = BTreeMap::new();
    for r in rows {
        let e = by_id.entry(&r.example_id).or_insert_with(|| (vec![None; steps.len()], vec![String::new(); steps.len()]));
        let c = col[&r.step];
        if e.0[c].is_some() {
            bail!("task {}: example {} appears twice at step {}", r.task, r.example_id, r.step);
        }
        e.0[c] = Some(if use_norm { r.correct_norm } else { r.correct });
        e.1[c] = if use_norm { r.predicted_norm.to_string() } else { r.output.clone() };
    }
    let mut m = Matrix { steps, ids: vec![], correct: vec![], outputs: vec![] };
    for (id, (c, o)) in by_id {
        let Some(c) = c.into_iter().collect::<Option<Vec<bool>>>() else {
            bail!("example {id} is missing at some checkpoints; every checkpoint must score the same examples");
        };
        m.ids.push(id.to_string());
        m.correct.push(c);
        m.outputs.push(o);
    }
    Ok(m)
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// Task score series (mean correctness per checkpoint) over the examples `idx`.
fn scores(m: &Matrix, idx: &[usize], window: &std::ops::Range<usize>) -> Vec<f64> {
    window.clone().map(|t| idx.iter().filter(|&&e| m.correct[e][t]).count() as f64 / idx.len() as f64).collect()
}

fn percentile_ci(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (quantile(&v, 0.025), quantile(&v, 0.975))
}

/// Selection by a validation half, reported on the test half (halves split by the hash of the id).
fn selection(m: &Matrix, window: &std::ops::Range<usize>) -> (f64, f64) {
    let (val, test): (Vec<usize>, Vec<usize>) = (0..m.ids.len()).partition(|&e| Sha256::digest(m.ids[e].as_bytes())[0] % 2 == 0);
    if val.is_empty() || test.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let (v, t) = (scores(m, &val, window), scores(m, &test, window));
    let chosen = records::argmax(&v);
    let best_test = t.iter().cloned().fold(f64::MIN, f64::max);
    (best_test - t[chosen], v[chosen] - t[chosen])
}

/// Task-level measures of a score series (steps ascending).
fn task_level(task: &str, window: &str, steps: &[u64], s: &[f64], se: &[f64], opts: &Options) -> TaskMetrics {
    let xs: Vec<f64> = steps.iter().map(|&v| v as f64).collect();
    let best = records::argmax(s);
    let (drop, at) = largest_drop(s);
    let noise = noise_test(&xs, s, se, opts.noise_sims, opts.seed);
    TaskMetrics {
        task: task.into(),
        window: window.into(),
        checkpoints: s.len(),
        first_step: steps[0],
        last_step: *steps.last().unwrap(),
        final_score: *s.last().unwrap(),
        mean_score: mean(s),
        best_score: s[best],
        best_step: steps[best],
        mtv: mtv(s).unwrap_or(0.0),
        mtv_ci_low: None,
        mtv_ci_high: None,
        detrended_sd: sd(&detrend(&xs, s)),
        direction_changes: direction_changes(s),
        largest_drop: drop,
        largest_drop_step: at.map(|i| steps[i]),
        noise_expected_mtv: noise.as_ref().map(|n| n.expected_mtv),
        noise_ratio: noise.as_ref().map(|n| n.ratio),
        noise_p_value: noise.as_ref().map(|n| n.p_value),
        selection_regret: None,
        selection_optimism: None,
        examples: None,
        mean_flip_rate: None,
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

/// Analyses a run. `examples` may be empty (task level only).
pub fn analyse(tasks: &[TaskRecord], examples: &[ExampleRecord], opts: &Options) -> Result<(Vec<TaskMetrics>, Vec<ExampleMetrics>)> {
    let mut by_task: BTreeMap<&str, Vec<&TaskRecord>> = BTreeMap::new();
    for r in tasks {
        by_task.entry(&r.task).or_default().push(r);
    }
    let mut ex_by_task: BTreeMap<&str, Vec<&ExampleRecord>> = BTreeMap::new();
    for r in examples {
        ex_by_task.entry(&r.task).or_default().push(r);
    }
    let (mut out, mut per_example) = (Vec::new(), Vec::new());
    for (task, mut rows) in by_task {
        rows.sort_by_key(|r| r.step);
        if rows.windows(2).any(|w| w[0].step == w[1].step) {
            bail!("task {task}: two scores for one step");
        }
        let score = |r: &TaskRecord| if opts.use_acc_norm { r.acc_norm.unwrap_or(r.acc) } else { r.acc };
        let (steps, s, se): (Vec<u64>, Vec<f64>, Vec<f64>) = (rows.iter().map(|r| r.step).collect(), rows.iter().map(|r| score(r)).collect(), rows.iter().map(|r| r.acc_stderr).collect());
        if let Some(r) = rows.iter().find(|r| !score(r).is_finite()) {
            bail!("task {task}: non-finite score at step {}", r.step);
        }
        if s.len() < 2 {
            continue;
        }
        let m = match ex_by_task.get(task) {
            Some(rs) => Some(matrix(rs, opts.use_acc_norm)?),
            None => None,
        };
        for (name, w) in [("all", 0..s.len()), ("final", final_window(s.len(), opts.final_fraction, 3))] {
            let mut tm = task_level(task, name, &steps[w.clone()], &s[w.clone()], &se[w.clone()], opts);
            if let Some(m) = &m {
                if m.steps != steps {
                    bail!("task {task}: the example table and the task table cover different steps");
                }
                example_level(&mut tm, &mut per_example, m, &w, opts);
            }
            out.push(tm);
        }
    }
    Ok((out, per_example))
}

fn example_level(tm: &mut TaskMetrics, per_example: &mut Vec<ExampleMetrics>, m: &Matrix, w: &std::ops::Range<usize>, opts: &Options) {
    let n = m.ids.len();
    let stats: Vec<ExampleStats> = (0..n).map(|e| {
        let outs: Vec<&str> = m.outputs[e][w.clone()].iter().map(String::as_str).collect();
        example_stats(&m.correct[e][w.clone()], &outs)
    }).collect();
    let rates: Vec<f64> = stats.iter().map(|s| s.flip_rate).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
    let (mut boot_mtv, mut boot_rate) = (Vec::with_capacity(opts.bootstrap), Vec::with_capacity(opts.bootstrap));
    let mut idx = vec![0usize; n];
    for _ in 0..opts.bootstrap {
        for v in idx.iter_mut() {
            *v = rng.gen_range(0..n);
        }
        boot_mtv.push(mtv(&scores(m, &idx, w)).unwrap_or(0.0));
        boot_rate.push(idx.iter().map(|&e| rates[e]).sum::<f64>() / n as f64);
    }
    let (lo, hi) = percentile_ci(boot_mtv);
    let (rlo, rhi) = percentile_ci(boot_rate);
    let (regret, optimism) = selection(m, w);
    tm.mtv_ci_low = Some(lo);
    tm.mtv_ci_high = Some(hi);
    tm.selection_regret = Some(regret);
    tm.selection_optimism = Some(optimism);
    tm.examples = Some(n);
    tm.mean_flip_rate = Some(mean(&rates));
    tm.flip_rate_ci_low = Some(rlo);
    tm.flip_rate_ci_high = Some(rhi);
    tm.mean_instability = Some(stats.iter().map(|s| s.instability).sum::<f64>() / n as f64);
    tm.flip_rate_p50 = Some(quantile(&rates, 0.5));
    tm.flip_rate_p90 = Some(quantile(&rates, 0.9));
    tm.learned_then_forgotten = Some(stats.iter().filter(|s| s.learned_then_forgotten).count() as f64 / n as f64);
    tm.stable_over_window = Some(stats.iter().filter(|s| s.stable_from == 0).count() as f64 / n as f64);
    tm.consecutive_agreement = Some(1.0 - mean(&rates));
    for (e, s) in stats.into_iter().enumerate() {
        per_example.push(ExampleMetrics {
            task: tm.task.clone(),
            window: tm.window.clone(),
            example_id: m.ids[e].clone(),
            flips_to_wrong: s.flips_to_wrong,
            flips_to_right: s.flips_to_right,
            flip_rate: s.flip_rate,
            instability: s.instability,
            learned_then_forgotten: s.learned_then_forgotten,
            stable_from_step: m.steps[w.start + s.stable_from],
            final_correct: s.final_correct,
        });
    }
}
