//! `analysis compare`: single checkpoints against the smoothing baseline, averaged and ensembled
//! ones, on the same steps and the same examples, with paired intervals of every difference.
//!
//! A run folder may hold, beside `eval/` (single checkpoints): `eval-avg-k<K>/` (`lm eval` of the
//! averaged checkpoints that `integrate sweep` wrote), `ensembled/k<K>/` (`integrate ensemble`,
//! mean of the members' option distributions) and `ensembled-vote/k<K>/` (majority vote; for a
//! generation task the vote over the members' generated texts, the one ensemble of text: a
//! generation task is compared without the mean ensembles, which leave it out). Every
//! variant is cut to the steps all variants share (a window of k only starts at the k-th
//! checkpoint; averages may cover only the final stage), so MTV and flip rates are compared over
//! the same checkpoint positions.
//!
//! The **smoothing baseline** of window k is the k-moving average of the single checkpoints'
//! scores at the same positions: a k-window overlaps its neighbour in k - 1 checkpoints, so some
//! smoothing comes for free; averaging or ensembling helps beyond it only if it beats this line.
//!
//! Uncertainty: one bootstrap draw of examples is applied to every method, checkpoint and metric
//! of a task (the eval set is shared), so the interval of a difference is paired. Pooled rows
//! (`task = "pooled"`) average a statistic over the tasks whose single-checkpoint final accuracy
//! is above chance (its 95% interval excludes chance), with draw b of every task averaged
//! together (a stratified bootstrap). Each difference carries a 95% interval and one at the
//! claims table's family-wise level ([`crate::claims::FAMILY_LEVEL`], Bonferroni).

use anyhow::{bail, Context, Result};
use ndarray::{ArrayView2, Axis};
use rayon::prelude::*;
use records::{ExampleRecord, TaskRecord};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::continuous::Metric;
use crate::panel::Panel;
use crate::{bootstrap, Options, LEVEL};
use run::{Method, RunDir, Variant};
use theory::sequence::{exact_match, instability, moving_average, mtv};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct StabilityRow {
    pub task: String,
    pub metric: String,
    pub method: Method,
    pub k: usize,
    pub checkpoints: usize,
    pub first_step: u64,
    pub final_score: f64,
    pub mean_score: f64,
    pub mtv: f64,
    pub mtv_ci_low: Option<f64>,
    pub mtv_ci_high: Option<f64>,
    /// example-level MTV (flip rate for 0/1 metrics); not defined for the smoothing baseline
    pub flip_rate: Option<f64>,
    pub flip_rate_ci_low: Option<f64>,
    pub flip_rate_ci_high: Option<f64>,
    /// instability score of the chosen options (accuracy metrics; of a generation task, of its
    /// texts by char F1, as the report computes it)
    pub instability: Option<f64>,
    /// selection on half the examples, reported on the other half (0/1 metrics; not defined
    /// for the smoothing baseline): regret and optimism over stratified random splits, with
    /// their 95% intervals (see [`crate::selection`])
    pub selection_regret: Option<f64>,
    pub selection_regret_ci_low: Option<f64>,
    pub selection_regret_ci_high: Option<f64>,
    pub selection_optimism: Option<f64>,
    pub selection_optimism_ci_low: Option<f64>,
    pub selection_optimism_ci_high: Option<f64>,
    /// forward passes per prediction, relative to one checkpoint
    pub inference_cost: usize,
}

/// A paired difference `method(k) - baseline(baseline_k)` of one statistic.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DifferenceRow {
    /// a task, or `pooled` (mean over the tasks above chance)
    pub task: String,
    pub tasks: usize,
    pub metric: String,
    /// `mtv`, `flip_rate`, `instability`, `mean_score`
    pub statistic: String,
    pub method: Method,
    pub k: usize,
    pub baseline: Method,
    pub baseline_k: usize,
    pub estimate: f64,
    /// bootstrap standard deviation of the difference
    pub se: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    /// the interval at the claims table's family-wise level
    pub ci_low_family: f64,
    pub ci_high_family: f64,
    pub examples: usize,
}

struct Scored {
    variant: Variant,
    dir: PathBuf,
    tasks: Vec<TaskRecord>,
    examples: Vec<ExampleRecord>,
}

fn load(variant: Variant, dir: PathBuf) -> Result<Scored> {
    let tasks = records::read_tasks(&dir.join("tasks.parquet"))?;
    let examples = records::read_examples(&dir.join("examples.parquet"))?;
    Ok(Scored { variant, dir, tasks, examples })
}

/// All variants found in a run folder ([`run::RunDir::variants`]); single checkpoints must be
/// there.
fn variants(run: &Path) -> Result<Vec<Scored>> {
    let found = RunDir::new(run).variants()?;
    if found.first().map(|f| f.0) != Some(Variant::SINGLE) {
        bail!("{}: no eval/ tables; run `lm eval` first", run.display());
    }
    let mut out = Vec::new();
    for (i, (v, dir)) in found.into_iter().enumerate() {
        let scored = load(v, dir);
        out.push(if i == 0 {
            scored.with_context(|| format!("{}: no eval/ tables; run `lm eval` first", run.display()))?
        } else {
            scored?
        });
    }
    Ok(out)
}

/// One method's trail of a task on the shared positions.
struct Trail {
    variant: Variant,
    panel: Panel,
}

/// The statistics of one method on one (resampled) set of examples.
#[derive(Clone, Copy, Default)]
struct Stats {
    mtv: f64,
    final_score: f64,
    mean_score: f64,
    flip_rate: f64,
    instability: f64,
}

/// Everything compared for one task and metric: per method (in `trails` order, then one
/// smoothing baseline per k) the estimate and its bootstrap draws.
struct TaskComparison {
    labels: Vec<Variant>,
    estimate: Vec<Stats>,
    draws: Vec<Vec<Stats>>,
    has_examples: Vec<bool>,
    /// per label: selection regret and optimism (0/1 metrics, trails with examples)
    selection: Vec<Option<crate::selection::Selection>>,
    above_chance: bool,
    examples: usize,
}

fn per_example_mtv(v: ArrayView2<f64>) -> Vec<f64> {
    v.axis_iter(Axis(1)).map(|c| mtv(&c.to_vec()).unwrap_or(0.0)).collect()
}

fn compare_task(
    single_full: &Panel,
    trails: &[Trail],
    metric: Metric,
    ks: &[usize],
    opts: &Options,
) -> Option<TaskComparison> {
    let n = single_full.examples();
    let shared = &trails[0].panel.steps;
    let first = single_full.steps.binary_search(&shared[0]).ok()?;
    let values: Vec<ArrayView2<f64>> = trails.iter().map(|t| t.panel.values(metric)).collect::<Option<_>>()?;
    let full = single_full.values(metric)?;
    // the baseline needs the k - 1 single checkpoints before the shared positions, and those
    // positions consecutive among the single checkpoints
    let contiguous = single_full.steps.get(first..first + shared.len()) == Some(shared.as_slice());
    let smooth_ks: Vec<usize> = ks.iter().copied().filter(|&k| contiguous && k > 1 && first + 1 >= k).collect();
    let ex_mtv: Vec<Vec<f64>> = values.iter().map(|v| per_example_mtv(*v)).collect();
    let ex_is: Vec<Option<Vec<f64>>> = trails
        .iter()
        .map(|t| {
            metric.is_binary().then(|| {
                let outs = if metric == Metric::AccNorm { &t.panel.outputs_norm } else { &t.panel.outputs };
                // as the report: a generation task's texts compared by char F1 (the paper's soft
                // match), chosen options by exact match
                outs.iter()
                    .map(|o| {
                        if t.panel.generation {
                            instability(o, |a, b| textmatch::char_f1(a, b))
                        } else {
                            instability(o, |a, b| exact_match(a, b))
                        }
                        .unwrap_or(0.0)
                    })
                    .collect()
            })
        })
        .collect();
    let m = shared.len();
    let stats_of = |idx: &[usize]| -> Vec<Stats> {
        let mut out: Vec<Stats> = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let s = bootstrap::resampled_scores(*v, idx).to_vec();
                let mean_of = |x: &[f64]| idx.iter().map(|&e| x[e]).sum::<f64>() / idx.len() as f64;
                Stats {
                    mtv: mtv(&s).unwrap_or(0.0),
                    final_score: s[m - 1],
                    mean_score: s.iter().sum::<f64>() / m as f64,
                    flip_rate: mean_of(&ex_mtv[i]),
                    instability: ex_is[i].as_deref().map_or(f64::NAN, mean_of),
                }
            })
            .collect();
        let s_full = bootstrap::resampled_scores(full, idx).to_vec();
        for &k in &smooth_ks {
            let ma = moving_average(&s_full[first + 1 - k..first + m], k);
            out.push(Stats {
                mtv: mtv(&ma).unwrap_or(0.0),
                final_score: ma[m - 1],
                mean_score: ma.iter().sum::<f64>() / m as f64,
                flip_rate: f64::NAN,
                instability: f64::NAN,
            });
        }
        out
    };
    let all: Vec<usize> = (0..n).collect();
    let estimate = stats_of(&all);
    let draws: Vec<Vec<Stats>> =
        bootstrap::draws(n, opts.bootstrap, crate::seed_for(opts.seed, &single_full.task, "compare"))
            .par_iter()
            .map(|idx| stats_of(idx))
            .collect();
    let mut labels: Vec<Variant> = trails.iter().map(|t| t.variant).collect();
    labels.extend(smooth_ks.iter().map(|&k| Variant::new(Method::Smoothing, k)));
    let mut has_examples = vec![true; trails.len()];
    has_examples.extend(smooth_ks.iter().map(|_| false));
    // selection on the same positions for every trail, strata gold option x final correctness
    // of that trail, as `analysis report` does for single checkpoints
    let mut selection: Vec<Option<crate::selection::Selection>> = values
        .iter()
        .zip(trails)
        .map(|(v, t)| {
            metric.is_binary().then(|| {
                let strata: Vec<u32> = (0..n).map(|e| 2 * t.panel.gold[e] + u32::from(v[[m - 1, e]] > 0.5)).collect();
                let seed = crate::seed_for(
                    opts.seed,
                    &format!("{}/{}/{}/{}", single_full.task, metric.name(), t.variant.method, t.variant.k),
                    "compare-selection",
                );
                crate::selection::selection(*v, &strata, opts.splits, opts.bootstrap.min(200), 10, seed)
            })
        })
        .collect();
    selection.extend(smooth_ks.iter().map(|_| None));
    // above chance: the single checkpoints' final accuracy interval excludes chance (the Wilson
    // interval of `analysis report`, so both name the same tasks)
    let observed = *single_full.scores(Metric::Acc)?.last()?;
    let above_chance = crate::proportion::wilson_of_mean(observed, n, LEVEL)?.0 > single_full.chance;
    Some(TaskComparison { labels, estimate, draws, has_examples, selection, above_chance, examples: n })
}

type Pick = fn(&Stats) -> f64;
const STATISTICS: [(&str, Pick); 4] = [
    ("mtv", |s| s.mtv),
    ("flip_rate", |s| s.flip_rate),
    ("instability", |s| s.instability),
    ("mean_score", |s| s.mean_score),
];

/// The pairs of (method, baseline) that the figures and claims read.
fn pairs(labels: &[Variant]) -> Vec<(usize, usize)> {
    let find = |m: Method, k: usize| labels.iter().position(|l| *l == Variant::new(m, k));
    let mut out = vec![];
    for (i, &Variant { method: m, k }) in labels.iter().enumerate() {
        if m == Method::Single {
            continue;
        }
        out.push((i, find(Method::Single, 1).unwrap()));
        if m != Method::Smoothing {
            if let Some(b) = find(Method::Smoothing, k) {
                out.push((i, b));
            }
        }
        if m.is_ensemble() {
            if let Some(b) = find(Method::Average, k) {
                out.push((i, b));
            }
        }
        // the largest window against the smallest one above 1, per method
        let ks: Vec<usize> = labels.iter().filter(|l| l.method == m && l.k > 1).map(|l| l.k).collect();
        if ks.is_empty() {
            continue;
        }
        let (lo, hi) = (*ks.iter().min().unwrap(), *ks.iter().max().unwrap());
        if k == hi && lo < hi {
            out.push((i, find(m, lo).unwrap()));
        }
    }
    out
}

fn difference(
    task: &str,
    tasks: usize,
    metric: Metric,
    stat: &str,
    labels: (Variant, Variant),
    estimate: f64,
    draws: &[f64],
    examples: usize,
) -> Option<DifferenceRow> {
    if !estimate.is_finite() || draws.iter().any(|d| !d.is_finite()) {
        return None;
    }
    let iv = bootstrap::interval(estimate, draws, LEVEL, f64::NEG_INFINITY);
    let fam = bootstrap::interval(estimate, draws, crate::claims::FAMILY_LEVEL, f64::NEG_INFINITY);
    Some(DifferenceRow {
        task: task.into(),
        tasks,
        metric: metric.name().into(),
        statistic: stat.into(),
        method: labels.0.method,
        k: labels.0.k,
        baseline: labels.1.method,
        baseline_k: labels.1.k,
        estimate,
        se: crate::stats::sample_sd(draws),
        ci_low: iv.low,
        ci_high: iv.high,
        ci_low_family: fam.low,
        ci_high_family: fam.high,
        examples,
    })
}

/// The stability table and the paired differences of a run folder, and the folders read.
pub fn compare(run: &Path, opts: &Options) -> Result<(Vec<StabilityRow>, Vec<DifferenceRow>, Vec<PathBuf>)> {
    let c = compare_full(run, opts)?;
    Ok((c.rows, c.diffs, c.inputs))
}

/// Everything [`compare`] finds, with what the decisions ([`crate::decide`]) need beside it.
pub struct Comparison {
    pub rows: Vec<StabilityRow>,
    pub diffs: Vec<DifferenceRow>,
    /// the variants' folders read
    pub inputs: Vec<PathBuf>,
    /// per variant, its per-example panels by task (all its steps)
    pub panels: BTreeMap<Variant, BTreeMap<String, Panel>>,
    /// the steps every variant shares (the positions compared)
    pub shared_steps: Vec<u64>,
    /// per (task, variant): the p-value of the paired sign-flip null of its trail on the shared
    /// steps, primary metric
    pub null_p: BTreeMap<(String, Variant), f64>,
}

/// [`compare`], keeping the panels and the null of each trail.
pub fn compare_full(run: &Path, opts: &Options) -> Result<Comparison> {
    let vs = variants(run)?;
    // the tasks of the single checkpoints, and the steps every variant has
    let tasks: BTreeSet<String> = vs[0].tasks.iter().map(|t| t.task.clone()).collect();
    let mut steps: BTreeSet<u64> = vs[0].tasks.iter().map(|t| t.step).collect();
    for v in &vs[1..] {
        steps = steps.intersection(&v.tasks.iter().map(|t| t.step).collect()).cloned().collect();
    }
    if steps.len() < 3 {
        bail!("{}: the variants share only {} steps", run.display(), steps.len());
    }
    let shared: Vec<u64> = steps.into_iter().collect();
    let mut ks: Vec<usize> = vs.iter().map(|v| v.variant.k).collect();
    ks.sort_unstable();
    ks.dedup();
    let panels: Vec<BTreeMap<String, Panel>> = vs.iter().map(|v| Panel::all(&v.examples)).collect::<Result<_>>()?;
    let (mut rows, mut diffs, mut null_p) = (Vec::new(), Vec::new(), BTreeMap::new());
    // per (metric, statistic, method pair): the per-task draws of the tasks above chance, in the
    // order of the methods' names (the order of the pooled rows in differences.csv)
    let mut pooled: BTreeMap<
        (Metric, &str, (&'static str, usize), (&'static str, usize)),
        (Vec<f64>, Vec<Vec<f64>>, usize, (Variant, Variant)),
    > = BTreeMap::new();
    for task in &tasks {
        let Some(single_full) = panels[0].get(task) else { continue };
        // a task is compared where every variant has it (ensembles skip cloze tasks, so those go
        // whenever an ensemble is there), except that a generation task does without the mean
        // ensembles, which never hold text (only the vote ensembles generated texts)
        let mut trails: Vec<Trail> = Vec::new();
        let mut scored: Vec<&Scored> = Vec::new();
        let mut complete = true;
        for (v, p) in vs.iter().zip(&panels) {
            match p.get(task).map(|panel| panel.restrict(&shared).ok()) {
                Some(Some(panel)) => {
                    trails.push(Trail { variant: v.variant, panel });
                    scored.push(v);
                }
                Some(None) => complete = false,
                None if single_full.generation && v.variant.method == Method::EnsembleMean => {}
                None => complete = false,
            }
        }
        if !complete {
            continue;
        }
        // columns are examples in id order: every variant must have scored the same examples
        for (t, v) in trails.iter().zip(&scored) {
            if t.panel.ids != single_full.ids {
                bail!("{}: task {task} has {} examples, {} has {}, or their ids differ; every variant must score the same examples", v.dir.display(), t.panel.ids.len(), vs[0].dir.display(), single_full.ids.len());
            }
        }
        for t in &trails {
            if let Some(v) = t.panel.values(opts.primary()) {
                let seed = crate::seed_for(opts.seed, &format!("{task}/{}", t.variant), "compare-null");
                if let Some(x) = crate::nulls::sign_flip_null(v, opts.noise_sims, seed) {
                    null_p.insert((task.clone(), t.variant), x.p_value);
                }
            }
        }
        for metric in Metric::ALL {
            let Some(c) = compare_task(single_full, &trails, metric, &ks, opts) else { continue };
            for (i, &Variant { method, k }) in c.labels.iter().enumerate() {
                let pick = |f: Pick| -> Vec<f64> { c.draws.iter().map(|d| f(&d[i])).collect() };
                let e = &c.estimate[i];
                let mi = bootstrap::mtv_interval(e.mtv, &pick(|s| s.mtv), LEVEL, 0.0);
                let fi =
                    c.has_examples[i].then(|| bootstrap::interval(e.flip_rate, &pick(|s| s.flip_rate), LEVEL, 0.0));
                rows.push(StabilityRow {
                    task: task.clone(),
                    metric: metric.name().into(),
                    method,
                    k,
                    checkpoints: shared.len(),
                    first_step: shared[0],
                    final_score: e.final_score,
                    mean_score: e.mean_score,
                    mtv: e.mtv,
                    mtv_ci_low: Some(mi.low),
                    mtv_ci_high: Some(mi.high),
                    flip_rate: fi.map(|_| e.flip_rate),
                    flip_rate_ci_low: fi.map(|x| x.low),
                    flip_rate_ci_high: fi.map(|x| x.high),
                    instability: Some(e.instability).filter(|v| v.is_finite()),
                    selection_regret: c.selection[i].as_ref().map(|s| s.regret.estimate),
                    selection_regret_ci_low: c.selection[i].as_ref().map(|s| s.regret.low),
                    selection_regret_ci_high: c.selection[i].as_ref().map(|s| s.regret.high),
                    selection_optimism: c.selection[i].as_ref().map(|s| s.optimism.estimate),
                    selection_optimism_ci_low: c.selection[i].as_ref().map(|s| s.optimism.low),
                    selection_optimism_ci_high: c.selection[i].as_ref().map(|s| s.optimism.high),
                    inference_cost: method.inference_cost(k),
                });
            }
            for (a, b) in pairs(&c.labels) {
                for (stat, f) in STATISTICS {
                    let d: Vec<f64> = c.draws.iter().map(|x| f(&x[a]) - f(&x[b])).collect();
                    let est = f(&c.estimate[a]) - f(&c.estimate[b]);
                    if let Some(row) =
                        difference(task, 1, metric, stat, (c.labels[a], c.labels[b]), est, &d, c.examples)
                    {
                        if c.above_chance {
                            let name = |v: Variant| (v.method.name(), v.k);
                            let p = pooled
                                .entry((metric, stat, name(c.labels[a]), name(c.labels[b])))
                                .or_insert_with(|| (vec![], vec![], 0, (c.labels[a], c.labels[b])));
                            p.0.push(est);
                            p.1.push(d);
                            p.2 += c.examples;
                        }
                        diffs.push(row);
                    }
                }
            }
        }
    }
    for ((metric, stat, ..), (est, draws, examples, (a, b))) in pooled {
        let t = est.len() as f64;
        let mean_draws: Vec<f64> = (0..draws[0].len()).map(|j| draws.iter().map(|d| d[j]).sum::<f64>() / t).collect();
        if let Some(row) =
            difference("pooled", est.len(), metric, stat, (a, b), est.iter().sum::<f64>() / t, &mean_draws, examples)
        {
            diffs.push(row);
        }
    }
    rows.sort_by(|a, b| (&a.task, &a.metric, a.method, a.k).cmp(&(&b.task, &b.metric, b.method, b.k)));
    let inputs = vs.iter().map(|v| v.dir.clone()).collect();
    let panels = vs.iter().map(|v| v.variant).zip(panels).collect();
    Ok(Comparison { rows, diffs, inputs, panels, shared_steps: shared, null_p })
}

/// `analysis compare`: compares the run's variants and writes stability and differences
/// (parquet and CSV) with their provenance into `<run>/analysis/` as one set; returns the text
/// report (the acc table and the differences).
pub fn write(run: &Path, opts: &Options) -> Result<String> {
    opts.check()?;
    let (rows, diffs, inputs) = compare(run, opts)?;
    if rows.is_empty() {
        bail!("{}: nothing to compare (no averaged or ensembled evaluations sharing steps with eval/)", run.display());
    }
    let out = RunDir::new(run).analysis();
    let lock = output::FolderLock::acquire(&out, "analysis compare")?;
    let mut set = output::FileSet::begin(&lock, &out)?;
    let mut df = records::frame_of(&rows)?;
    records::stage_frame(&mut set, "stability.parquet", &mut df)?;
    records::stage_frame(&mut set, "stability.csv", &mut df)?;
    let mut dd = records::frame_of(&diffs)?;
    records::stage_frame(&mut set, "differences.parquet", &mut dd)?;
    records::stage_frame(&mut set, "differences.csv", &mut dd)?;
    let prov = serde_json::json!({"inputs": inputs, "bootstrap": opts.bootstrap, "seed": opts.seed, "family_level": crate::claims::FAMILY_LEVEL, "git_commit": output::provenance::git_commit(), "threads": rayon::current_num_threads()});
    set.write("stability.provenance.json", serde_json::to_string_pretty(&prov)?.as_bytes())?;
    set.commit()?;
    Ok(format!(
        "{}\n{}cost: forward passes per prediction relative to one checkpoint (averaging also reads k checkpoints once to build each model)\n",
        render(&rows, "acc"),
        render_differences(&diffs)
    ))
}

fn ci(lo: Option<f64>, hi: Option<f64>) -> String {
    match (lo, hi) {
        (Some(a), Some(b)) => format!("[{a:.3}, {b:.3}]"),
        _ => "-".into(),
    }
}

/// The stability table of one metric, as printed.
pub fn render(rows: &[StabilityRow], metric: &str) -> String {
    let mut s = String::new();
    writeln!(s, "metric: {metric}").unwrap();
    writeln!(
        s,
        "{:<21} {:<13} {:>3} {:>5} {:>7} {:>7} {:>6} {:>15} {:>6} {:>15} {:>6} {:>5}",
        "task", "method", "k", "ckpts", "final", "mean", "MTV", "MTV 95% CI", "flip", "flip 95% CI", "IS", "cost"
    )
    .unwrap();
    for r in rows.iter().filter(|r| r.metric == metric) {
        writeln!(
            s,
            "{:<21} {:<13} {:>3} {:>5} {:>7.3} {:>7.3} {:>6.3} {:>15} {:>6} {:>15} {:>6} {:>5}",
            r.task,
            r.method,
            r.k,
            r.checkpoints,
            r.final_score,
            r.mean_score,
            r.mtv,
            ci(r.mtv_ci_low, r.mtv_ci_high),
            r.flip_rate.map_or("-".into(), |v| format!("{v:.3}")),
            ci(r.flip_rate_ci_low, r.flip_rate_ci_high),
            r.instability.map_or("-".into(), |v| format!("{v:.3}")),
            r.inference_cost
        )
        .unwrap();
    }
    s
}

/// The pooled differences, as printed.
pub fn render_differences(diffs: &[DifferenceRow]) -> String {
    let mut s = String::new();
    writeln!(s, "paired differences, pooled over the tasks above chance (95% CI; family-wise CI for the claims)")
        .unwrap();
    writeln!(
        s,
        "{:<13} {:<11} {:<20} {:<16} {:>8} {:>19} {:>19}",
        "metric", "statistic", "method", "baseline", "diff", "95% CI", "family CI"
    )
    .unwrap();
    for d in diffs.iter().filter(|d| d.task == "pooled" && (d.statistic == "mtv" || d.statistic == "flip_rate")) {
        writeln!(
            s,
            "{:<13} {:<11} {:<20} {:<16} {:>+8.4} {:>19} {:>19}",
            d.metric,
            d.statistic,
            format!("{} k={}", d.method, d.k),
            format!("{} k={}", d.baseline, d.baseline_k),
            d.estimate,
            format!("[{:+.4}, {:+.4}]", d.ci_low, d.ci_high),
            format!("[{:+.4}, {:+.4}]", d.ci_low_family, d.ci_high_family)
        )
        .unwrap();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    /// Each method against single checkpoints, against smoothing of its own k, an ensemble against
    /// the average of its k, and a method's largest window against its smallest one above 1.
    #[test]
    fn the_pairs_the_figures_read() {
        let v = Variant::new;
        let labels = [
            v(Method::Single, 1),
            v(Method::Average, 3),
            v(Method::Average, 5),
            v(Method::EnsembleMean, 3),
            v(Method::Smoothing, 3),
            v(Method::Smoothing, 5),
        ];
        let want = [(1, 0), (1, 4), (2, 0), (2, 5), (2, 1), (3, 0), (3, 4), (3, 1), (4, 0), (5, 0), (5, 4)];
        assert_eq!(pairs(&labels), want);
        // no smoothing, no average: only the baseline of single checkpoints
        assert_eq!(pairs(&[v(Method::Single, 1), v(Method::EnsembleVote, 2)]), [(1, 0)]);
        assert_eq!(pairs(&[v(Method::Single, 1)]), []);
        // each method's windows on their own: the average's k = 4 against its k = 2, the
        // ensemble's 5 against its 3 (not against another method's smallest or largest)
        let labels = [
            v(Method::Single, 1),
            v(Method::Average, 2),
            v(Method::Average, 4),
            v(Method::EnsembleMean, 3),
            v(Method::EnsembleMean, 5),
        ];
        assert_eq!(pairs(&labels), [(1, 0), (2, 0), (2, 1), (3, 0), (4, 0), (4, 3)]);
        // a window of 1 is not a window: an average of one checkpoint is no smallest window
        assert_eq!(pairs(&[v(Method::Single, 1), v(Method::Average, 1), v(Method::Average, 3)]), [(1, 0), (2, 0)]);
    }

    /// A difference is refused where the estimate or a draw is not finite; otherwise its
    /// intervals are the bootstrap's at 95% and at the family level, its se the draws' sd.
    #[test]
    fn a_difference_and_its_intervals() {
        let labels = (Variant::new(Method::Average, 3), Variant::new(Method::Single, 1));
        let draws = [-0.02, -0.01, -0.015, -0.03, 0.0, -0.012];
        let d = difference("arc", 2, Metric::Acc, "mtv", labels, -0.014, &draws, 500).unwrap();
        let iv = bootstrap::interval(-0.014, &draws, LEVEL, f64::NEG_INFINITY);
        let fam = bootstrap::interval(-0.014, &draws, crate::claims::FAMILY_LEVEL, f64::NEG_INFINITY);
        assert_eq!((d.ci_low, d.ci_high, d.ci_low_family, d.ci_high_family), (iv.low, iv.high, fam.low, fam.high));
        assert!(d.ci_low_family <= d.ci_low && d.ci_high <= d.ci_high_family, "{d:?}");
        assert_eq!(d.se, crate::stats::sample_sd(&draws));
        assert_eq!((d.task.as_str(), d.tasks, d.metric.as_str(), d.statistic.as_str()), ("arc", 2, "acc", "mtv"));
        assert_eq!((d.method, d.k, d.baseline, d.baseline_k, d.examples), (Method::Average, 3, Method::Single, 1, 500));
        assert!(difference("arc", 2, Metric::Acc, "mtv", labels, f64::NAN, &draws, 500).is_none());
        assert!(difference("arc", 2, Metric::Acc, "mtv", labels, 0.1, &[0.1, f64::INFINITY], 500).is_none());
    }

    #[test]
    fn per_example_mtv_and_intervals_as_printed() {
        // columns: 0 1 0 (2 changes of 1 over 2 transitions), 1 1 1, 0.5 0 1
        let v = array![[0.0, 1.0, 0.5], [1.0, 1.0, 0.0], [0.0, 1.0, 1.0]];
        assert_eq!(per_example_mtv(v.view()), vec![1.0, 0.0, 0.75]);
        assert_eq!(per_example_mtv(ndarray::Array2::<f64>::zeros((1, 2)).view()), vec![0.0, 0.0]);
        assert_eq!(ci(Some(0.01234), Some(0.5)), "[0.012, 0.500]");
        assert_eq!(ci(Some(0.1), None), "-");
        assert_eq!(ci(None, Some(0.1)), "-");
    }

    /// A panel of task `t` from predicted options `[checkpoint][example]` (3 options; right where
    /// the prediction is the gold option), the gold option always predicted under `acc_norm`.
    fn panel<const N: usize>(predicted: &[[u32; N]], gold: [u32; N], steps: &[u64]) -> Panel {
        let rows: Vec<ExampleRecord> = predicted
            .iter()
            .zip(steps)
            .flat_map(|(row, &step)| {
                row.iter().enumerate().map(move |(e, &p)| {
                    let mut logliks = vec![-3.0, -2.0, -2.5];
                    logliks[p as usize] = -1.0;
                    ExampleRecord {
                        step,
                        task: "t".into(),
                        example_id: format!("t/{e}"),
                        gold: gold[e],
                        predicted: p,
                        // under acc_norm always the gold option: its outputs differ from acc's
                        predicted_norm: gold[e],
                        correct: p == gold[e],
                        correct_norm: true,
                        logliks,
                        lengths_chars: vec![1; 3],
                        lengths_tokens: vec![1; 3],
                        lengths_bytes: vec![2; 3],
                        output: p.to_string(),
                        ..Default::default()
                    }
                })
            })
            .collect();
        Panel::build("t", &rows.iter().collect::<Vec<_>>()).unwrap()
    }

    /// Each checkpoint's score on the examples `idx` (with repeats), by hand.
    fn scores_by_hand(correct: &[[u32; 4]], idx: &[usize]) -> Vec<f64> {
        correct.iter().map(|r| idx.iter().map(|&e| f64::from(r[e])).sum::<f64>() / idx.len() as f64).collect()
    }

    /// What `compare_task` computes of one method on the examples `idx`, by hand from its
    /// correctness and chosen options: MTV, final and mean score, flip rate, instability.
    fn by_hand(correct: &[[u32; 4]], chosen: &[[u32; 4]], idx: &[usize]) -> [f64; 5] {
        let s = scores_by_hand(correct, idx);
        let m = s.len();
        let mtv = (1..m).map(|t| (s[t] - s[t - 1]).abs()).sum::<f64>() / (m - 1) as f64;
        // the share of transitions at which an example's value changes, averaged over `idx`
        let changes = |x: &[[u32; 4]]| {
            idx.iter().map(|&e| (1..m).filter(|&t| x[t][e] != x[t - 1][e]).count() as f64 / (m - 1) as f64).sum::<f64>()
                / idx.len() as f64
        };
        let (flip, is) = (changes(correct), changes(chosen));
        [mtv, s[m - 1], s.iter().sum::<f64>() / m as f64, flip, is]
    }

    fn stats(s: &Stats) -> [f64; 5] {
        [s.mtv, s.final_score, s.mean_score, s.flip_rate, s.instability]
    }

    fn close(a: [f64; 5], b: [f64; 5]) -> bool {
        a.iter().zip(&b).all(|(x, y)| (x.is_nan() && y.is_nan()) || (x - y).abs() < 1e-12)
    }

    /// Single checkpoints at five steps, an average of k = 2 on the last three: the estimates of
    /// both, the smoothing baselines of k = 2 and 3 (k = 4 needs a checkpoint before the first),
    /// every bootstrap draw the same examples for every method, the selection of each trail on
    /// its own strata, and which tasks are above chance.
    #[test]
    fn a_task_compared_by_hand() {
        let gold = [0, 1, 2, 0];
        // right: 1000 / 1100 / 1110 / 1010 / 1111
        let single = [[0, 0, 0, 1], [0, 1, 1, 2], [0, 1, 2, 1], [0, 2, 2, 2], [0, 1, 2, 0]];
        let average = [[0, 1, 1, 2], [0, 1, 2, 2], [0, 1, 2, 1]];
        let correct = |p: &[[u32; 4]]| -> Vec<[u32; 4]> {
            p.iter().map(|r| std::array::from_fn(|e| u32::from(r[e] == gold[e]))).collect()
        };
        let (right_single, right_average) = (correct(&single), correct(&average));
        let full = panel(&single, gold, &[10, 20, 30, 40, 50]);
        let shared = [30, 40, 50];
        let trails = [
            Trail { variant: Variant::SINGLE, panel: full.restrict(&shared).unwrap() },
            Trail { variant: Variant::new(Method::Average, 2), panel: panel(&average, gold, &shared) },
        ];
        let opts = Options { bootstrap: 9, splits: 6, ..Default::default() };
        let c = compare_task(&full, &trails, Metric::Acc, &[1, 2, 3, 4], &opts).unwrap();
        let smoothing = |k| Variant::new(Method::Smoothing, k);
        assert_eq!(c.labels, [Variant::SINGLE, Variant::new(Method::Average, 2), smoothing(2), smoothing(3)]);
        assert_eq!(c.has_examples, [true, true, false, false]);
        assert_eq!(c.examples, 4);
        // the smoothing baselines: k-moving averages of the single checkpoints' scores ending at
        // the shared positions (0.25 0.5 0.75 0.5 1 before)
        let smooth = |idx: &[usize], k: usize| -> [f64; 5] {
            let all = scores_by_hand(&right_single, idx);
            let ma: Vec<f64> = (2..5).map(|t| all[t + 1 - k..=t].iter().sum::<f64>() / k as f64).collect();
            let mtv = ((ma[1] - ma[0]).abs() + (ma[2] - ma[1]).abs()) / 2.0;
            [mtv, ma[2], ma.iter().sum::<f64>() / 3.0, f64::NAN, f64::NAN]
        };
        let all = [0, 1, 2, 3];
        let want = [
            by_hand(&right_single[2..], &single[2..], &all),
            by_hand(&right_average, &average, &all),
            smooth(&all, 2),
            smooth(&all, 3),
        ];
        // the numbers themselves: scores 0.75 0.5 1 and 0.5 0.75 0.75; moving averages
        // 0.625 0.625 0.75 and 0.5 0.583 0.75
        assert!(close(want[0], [0.375, 1.0, 0.75, 0.375, 0.5]), "{:?}", want[0]);
        assert!(close(want[1], [0.125, 0.75, 2.0 / 3.0, 0.125, 0.25]), "{:?}", want[1]);
        assert!(close(want[2], [0.0625, 0.75, 2.0 / 3.0, f64::NAN, f64::NAN]), "{:?}", want[2]);
        assert!(close(want[3], [0.125, 0.75, 11.0 / 18.0, f64::NAN, f64::NAN]), "{:?}", want[3]);
        for (got, want) in c.estimate.iter().zip(&want) {
            assert!(close(stats(got), *want), "{:?} != {want:?}", stats(got));
        }
        // every draw: the same resampled examples for every method
        let idx = bootstrap::draws(4, 9, crate::seed_for(opts.seed, "t", "compare"));
        assert_eq!(c.draws.len(), 9);
        for (d, idx) in c.draws.iter().zip(&idx) {
            let want = [
                by_hand(&right_single[2..], &single[2..], idx),
                by_hand(&right_average, &average, idx),
                smooth(idx, 2),
                smooth(idx, 3),
            ];
            for (got, want) in d.iter().zip(&want) {
                assert!(close(stats(got), *want), "{idx:?}: {:?} != {want:?}", stats(got));
            }
        }
        // selection: strata gold option x right at the trail's last checkpoint
        for (i, strata) in [[1, 3, 5, 1], [1, 3, 5, 0]].iter().enumerate() {
            let t = &trails[i];
            let seed =
                crate::seed_for(opts.seed, &format!("t/acc/{}/{}", t.variant.method, t.variant.k), "compare-selection");
            let want = crate::selection::selection(t.panel.values(Metric::Acc).unwrap(), strata, 6, 9, 10, seed);
            let got = c.selection[i].as_ref().unwrap();
            assert_eq!((got.regret, got.optimism), (want.regret, want.optimism), "trail {i}");
        }
        assert!(c.selection[2..].iter().all(Option::is_none));
        // 4 of 4 right at the end: Wilson's lower bound 0.51, above the chance of 1/3; 3 of 4
        // (the average's last checkpoint as the single ones'): 0.30, not above
        assert!(c.above_chance);
        let mut lower = single;
        lower[4] = [0, 1, 2, 1];
        let full_lower = panel(&lower, gold, &[10, 20, 30, 40, 50]);
        let trails_lower = [Trail { variant: Variant::SINGLE, panel: full_lower.restrict(&shared).unwrap() }];
        assert!(!compare_task(&full_lower, &trails_lower, Metric::Acc, &[1], &opts).unwrap().above_chance);
        // no smoothing where the shared positions are not consecutive single checkpoints, or
        // where a window would reach before the first one
        let gapped = [Trail { variant: Variant::SINGLE, panel: full.restrict(&[20, 40, 50]).unwrap() }];
        let c = compare_task(&full, &gapped, Metric::Acc, &[1, 2], &opts).unwrap();
        assert_eq!(c.labels, [Variant::SINGLE]);
        let early = [Trail { variant: Variant::SINGLE, panel: full.restrict(&[20, 30, 40]).unwrap() }];
        let c = compare_task(&full, &early, Metric::Acc, &[1, 2, 3], &opts).unwrap();
        assert_eq!(c.labels, [Variant::SINGLE, smoothing(2)]);
        assert!(close(stats(&c.estimate[1]), [0.125, 0.625, 1.625 / 3.0, f64::NAN, f64::NAN]));
        // a first shared step the single checkpoints lack, or a metric the task has no values of
        let elsewhere = [Trail { variant: Variant::SINGLE, panel: panel(&average, gold, &[35, 40, 50]) }];
        assert!(compare_task(&full, &elsewhere, Metric::Acc, &[1], &opts).is_none());
        assert!(compare_task(&full, &trails, Metric::CharF1, &[1], &opts).is_none());
        // acc_norm reads its own outputs (the gold option throughout: no change at all)
        let c = compare_task(&full, &trails, Metric::AccNorm, &[1], &opts).unwrap();
        assert!(close(stats(&c.estimate[0]), [0.0, 1.0, 1.0, 0.0, 0.0]), "{:?}", stats(&c.estimate[0]));
    }

    /// A run folder without single-checkpoint tables is told to run `lm eval`, whether eval/ is
    /// missing or holds no tables (then with the read error of its tasks.parquet beside it).
    #[test]
    fn a_run_without_eval_tables() {
        let run = tempfile::tempdir().unwrap();
        let err = |run: &Path| format!("{:#}", variants(run).err().expect("refused"));
        std::fs::create_dir(run.path().join("eval-avg-k2")).unwrap();
        assert!(err(run.path()).contains("no eval/ tables; run `lm eval` first"), "{}", err(run.path()));
        std::fs::create_dir(run.path().join("eval")).unwrap();
        let e = err(run.path());
        assert!(e.contains("no eval/ tables; run `lm eval` first") && e.contains("tasks.parquet"), "{e}");
    }

    /// The selection's strata are gold option x right at the trail's last checkpoint (`2 gold +
    /// right`): here gold 0 right (1) and gold 1 wrong (2) among them, which `2 + gold + right`
    /// would merge.
    #[test]
    fn selection_strata_by_hand() {
        let gold = [0, 1, 2, 0, 1, 2, 0, 1];
        // rows of churn (t^2 + 3e + te mod 3), the last with gold 0 right and gold 1 wrong
        let mut predicted: Vec<[u32; 8]> =
            (0..6u32).map(|t| std::array::from_fn(|e| (t * t + 3 * e as u32 + t * e as u32) % 3)).collect();
        predicted.push([0, 0, 2, 1, 1, 0, 0, 2]);
        let steps: Vec<u64> = (1..=7).map(|t| 10 * t).collect();
        let p = panel(&predicted, gold, &steps);
        let trails = [Trail { variant: Variant::SINGLE, panel: p.restrict(&steps).unwrap() }];
        let opts = Options { bootstrap: 30, splits: 40, ..Default::default() };
        let c = compare_task(&p, &trails, Metric::Acc, &[1], &opts).unwrap();
        let seed = crate::seed_for(opts.seed, "t/acc/single/1", "compare-selection");
        let with =
            |strata: &[u32]| crate::selection::selection(p.values(Metric::Acc).unwrap(), strata, 40, 30, 10, seed);
        let got = c.selection[0].as_ref().unwrap();
        let (want, merged) = (with(&[1, 2, 5, 0, 3, 4, 1, 2]), with(&[3, 3, 5, 2, 4, 4, 3, 3]));
        assert_eq!((got.regret, got.optimism), (want.regret, want.optimism));
        assert_ne!((got.regret, got.optimism), (merged.regret, merged.optimism), "the strata must matter here");
    }

    /// One task's rows at `steps`, right where `right(t, e)`: multiple choice with 3 options
    /// (gold 0) or, with `generation`, a generated text scored against one gold text.
    fn task_rows(
        task: &str,
        n: usize,
        steps: &[u64],
        generation: bool,
        right: impl Fn(usize, usize) -> bool,
    ) -> Vec<ExampleRecord> {
        let mut out = Vec::new();
        for (t, &step) in steps.iter().enumerate() {
            for e in 0..n {
                let ok = right(t, e);
                let p = if ok { 0 } else { 1 + (e as u32 % 2) };
                let mut r = ExampleRecord {
                    step,
                    task: task.into(),
                    example_id: format!("{task}/{e}"),
                    correct: ok,
                    correct_norm: ok,
                    output: p.to_string(),
                    ..Default::default()
                };
                if generation {
                    r.targets = vec!["the answer".into()];
                    r.output = if ok { "the answer".into() } else { format!("an answer {}", (t + e) % 3) };
                } else {
                    let mut ll = vec![-2.0 - 0.1 * ((t + e) % 4) as f64, -2.5, -3.0];
                    ll[p as usize] = -1.0 - 0.05 * (e % 3) as f64;
                    (r.predicted, r.predicted_norm, r.logliks) = (p, p, ll);
                    (r.lengths_chars, r.lengths_tokens, r.lengths_bytes) = (vec![4; 3], vec![1; 3], vec![4; 3]);
                }
                out.push(r);
            }
        }
        out
    }

    /// One variant's rows of the run folder below: right with a probability rising with t (a
    /// deterministic scramble of t, e and `salt`); tasks `c` and `g` only `with_all`.
    fn variant_rows(salt: usize, steps: &[u64], with_all: bool) -> Vec<ExampleRecord> {
        let churn =
            |salt: usize, rate: usize| move |t: usize, e: usize| (t * 37 + e * 53 + salt * 11) % 100 < rate + 2 * t;
        let mut rows = task_rows("a", 40, steps, false, churn(salt, 80));
        rows.extend(task_rows("a2", 40, steps, false, churn(salt + 1, 75)));
        rows.extend(task_rows("b", 40, steps, false, move |t, e| (t + e + salt) % 4 == 0));
        if with_all {
            rows.extend(task_rows("c", 20, steps, false, churn(salt + 2, 60)));
            rows.extend(task_rows("g", 20, steps, true, churn(salt + 3, 50)));
        }
        rows
    }

    /// Writes a variant's tables (`tasks.parquet`, `examples.parquet`) into `dir`.
    fn write_variant(dir: &Path, rows: &[ExampleRecord]) {
        std::fs::create_dir_all(dir).unwrap();
        let tasks = records::summarise(rows).unwrap();
        records::write_frame(&dir.join("tasks.parquet"), &mut records::tasks_frame(&tasks).unwrap()).unwrap();
        records::write_frame(&dir.join("examples.parquet"), &mut records::examples_frame(rows).unwrap()).unwrap();
    }

    /// `compare_full` on a run folder of single checkpoints (8 steps), averages and mean
    /// ensembles of k = 2 (the last 7): tasks `a` and `a2` (well above chance), `b` (below), `c`
    /// (which the ensembles lack: not compared) and the generation task `g` (which the mean
    /// ensembles never hold: compared without them). Each difference is the paired one of its
    /// task's draws; each pooled row the mean over the tasks above chance, draw by draw.
    #[test]
    fn a_run_folder_compared_by_hand() {
        let steps: Vec<u64> = (1..=8).map(|t| 10 * t).collect();
        let later = &steps[1..];
        let run = tempfile::tempdir().unwrap();
        let (single, average, ensemble) =
            (variant_rows(0, &steps, true), variant_rows(5, later, true), variant_rows(9, later, false));
        write_variant(&run.path().join("eval"), &single);
        write_variant(&run.path().join("eval-avg-k2"), &average);
        write_variant(&run.path().join("ensembled/k2"), &ensemble);
        let opts = Options { bootstrap: 40, splits: 10, noise_sims: 50, ..Default::default() };
        let c = compare_full(run.path(), &opts).unwrap();
        assert_eq!(c.shared_steps, later);
        let methods = |task: &str| -> BTreeSet<(Method, usize)> {
            c.rows.iter().filter(|r| r.task == task && r.metric == "acc").map(|r| (r.method, r.k)).collect()
        };
        let all = BTreeSet::from([
            (Method::Single, 1),
            (Method::Smoothing, 2),
            (Method::Average, 2),
            (Method::EnsembleMean, 2),
        ]);
        assert_eq!(methods("a"), all);
        assert_eq!(methods("b"), all);
        assert!(methods("c").is_empty(), "the ensembles lack c");
        assert_eq!(methods("g"), BTreeSet::from([(Method::Single, 1), (Method::Smoothing, 2), (Method::Average, 2)]));
        // each task's difference: the estimates' difference, the spread of the paired draws
        let panels = |rows: &[ExampleRecord]| Panel::all(rows).unwrap();
        let (ps, pa, pe) = (panels(&single), panels(&average), panels(&ensemble));
        let draws_of = |task: &str, a: usize, b: usize| -> (f64, Vec<f64>) {
            let mut trails = vec![
                Trail { variant: Variant::SINGLE, panel: ps[task].restrict(later).unwrap() },
                Trail { variant: Variant::new(Method::Average, 2), panel: pa[task].restrict(later).unwrap() },
            ];
            if let Some(p) = pe.get(task) {
                trails
                    .push(Trail { variant: Variant::new(Method::EnsembleMean, 2), panel: p.restrict(later).unwrap() });
            }
            let t = compare_task(&ps[task], &trails, Metric::Acc, &[1, 2], &opts).unwrap();
            (t.estimate[a].mtv - t.estimate[b].mtv, t.draws.iter().map(|d| d[a].mtv - d[b].mtv).collect())
        };
        let stab = |task: &str, m: Method| {
            c.rows.iter().find(|r| r.task == task && r.metric == "acc" && r.method == m).unwrap()
        };
        let diff = |task: &str| {
            c.diffs
                .iter()
                .find(|d| {
                    (d.task.as_str(), d.metric.as_str(), d.statistic.as_str(), d.method, d.baseline)
                        == (task, "acc", "mtv", Method::Average, Method::Single)
                })
                .unwrap()
        };
        let mut per_task = vec![];
        for task in ["a", "a2", "b", "g"] {
            let d = diff(task);
            assert_eq!((d.tasks, d.examples), (1, if task == "g" { 20 } else { 40 }));
            assert!((d.estimate - (stab(task, Method::Average).mtv - stab(task, Method::Single).mtv)).abs() < 1e-15);
            let (est, draws) = draws_of(task, 1, 0);
            assert_eq!((d.estimate, d.se), (est, crate::stats::sample_sd(&draws)), "{task}");
            per_task.push((task, est, draws));
        }
        // pooled over a, a2 and g (b's final accuracy, 10 of 40, is not above the chance of 1/3)
        let pooled = diff("pooled");
        let above: Vec<_> = per_task.iter().filter(|p| p.0 != "b").collect();
        let mean_draws: Vec<f64> = (0..40).map(|j| above.iter().map(|p| p.2[j]).sum::<f64>() / 3.0).collect();
        assert_eq!((pooled.tasks, pooled.examples), (3, 100));
        assert!((pooled.estimate - above.iter().map(|p| p.1).sum::<f64>() / 3.0).abs() < 1e-15);
        assert!(
            (pooled.se - crate::stats::sample_sd(&mean_draws)).abs() < 1e-15,
            "{} {}",
            pooled.se,
            crate::stats::sample_sd(&mean_draws)
        );
        // three shared steps compare; two do not
        write_variant(&run.path().join("ensembled/k2"), &variant_rows(9, &steps[5..], false));
        assert_eq!(compare_full(run.path(), &opts).unwrap().shared_steps, &steps[5..]);
        write_variant(&run.path().join("ensembled/k2"), &variant_rows(9, &steps[6..], false));
        let err = format!("{:#}", compare_full(run.path(), &opts).err().expect("two steps refused"));
        assert!(err.contains("the variants share only 2 steps"), "{err}");
    }

    /// `analysis compare` writes the stability and difference tables with their provenance
    /// into `<run>/analysis/` and prints the acc table and the pooled MTV and flip-rate rows.
    #[test]
    fn the_written_set_and_the_printed_tables() {
        let steps: Vec<u64> = (1..=6).map(|t| 10 * t).collect();
        let run = tempfile::tempdir().unwrap();
        write_variant(&run.path().join("eval"), &variant_rows(0, &steps, true));
        write_variant(&run.path().join("eval-avg-k2"), &variant_rows(5, &steps[1..], true));
        let opts = Options { bootstrap: 30, splits: 10, noise_sims: 50, ..Default::default() };
        let text = write(run.path(), &opts).unwrap();
        let (rows, diffs, _) = compare(run.path(), &opts).unwrap();
        let out = run.path().join("analysis");
        for f in [
            "stability.parquet",
            "stability.csv",
            "differences.parquet",
            "differences.csv",
            "stability.provenance.json",
        ] {
            assert!(out.join(f).is_file(), "{f}");
        }
        let csv = std::fs::read_to_string(out.join("differences.csv")).unwrap();
        assert_eq!(csv.lines().count(), diffs.len() + 1);
        let prov: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("stability.provenance.json")).unwrap()).unwrap();
        assert_eq!((prov["bootstrap"].as_u64(), prov["seed"].as_u64()), (Some(30), Some(1234)));
        assert_eq!(text, format!("{}\n{}cost: forward passes per prediction relative to one checkpoint (averaging also reads k checkpoints once to build each model)\n", render(&rows, "acc"), render_differences(&diffs)));
        // the acc table: a header, the metric's name, one line per acc row (a, a2, b, c, g x
        // single, smoothing, average), none of another metric
        let acc = render(&rows, "acc");
        let lines: Vec<&str> = acc.lines().collect();
        assert_eq!(lines[0], "metric: acc");
        assert!(
            lines[1].starts_with("task ") && lines[1].contains("MTV 95% CI") && lines[1].ends_with("cost"),
            "{}",
            lines[1]
        );
        assert_eq!(lines.len(), 2 + 15, "{acc}");
        let a = rows.iter().find(|r| r.task == "a" && r.metric == "acc" && r.method == Method::Average).unwrap();
        let line = format!(
            "{:<21} {:<13} {:>3} {:>5} {:>7.3} {:>7.3} {:>6.3} {:>15} {:>6} {:>15} {:>6} {:>5}",
            "a",
            "average",
            2,
            5,
            a.final_score,
            a.mean_score,
            a.mtv,
            ci(a.mtv_ci_low, a.mtv_ci_high),
            format!("{:.3}", a.flip_rate.unwrap()),
            ci(a.flip_rate_ci_low, a.flip_rate_ci_high),
            format!("{:.3}", a.instability.unwrap()),
            1
        );
        assert!(lines.contains(&line.as_str()), "{line}\n{acc}");
        assert_eq!(render(&rows, "margin").lines().count(), 2 + 12, "margin: the multiple-choice tasks alone");
        // the differences: pooled rows of MTV and flip rate only
        let printed = render_differences(&diffs);
        let want =
            diffs.iter().filter(|d| d.task == "pooled" && (d.statistic == "mtv" || d.statistic == "flip_rate")).count();
        assert!(want > 0 && diffs.iter().any(|d| d.task == "pooled" && d.statistic == "mean_score"));
        assert_eq!(printed.lines().count(), 2 + want, "{printed}");
        assert!(printed.starts_with("paired differences, pooled over the tasks above chance"));
        let d = diffs.iter().find(|d| d.task == "pooled" && d.metric == "acc" && d.statistic == "flip_rate").unwrap();
        let line = format!(
            "{:<13} {:<11} {:<20} {:<16} {:>+8.4} {:>19} {:>19}",
            "acc",
            "flip_rate",
            "average k=2",
            "single k=1",
            d.estimate,
            format!("[{:+.4}, {:+.4}]", d.ci_low, d.ci_high),
            format!("[{:+.4}, {:+.4}]", d.ci_low_family, d.ci_high_family)
        );
        assert!(printed.lines().any(|l| l == line), "{line}\n{printed}");
    }
}
