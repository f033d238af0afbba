//! The claims of the study as rules that can fail, decided on intervals.
//!
//! Each claim names a statistic, the side of a threshold it claims, and where the statistic
//! comes from; the rule is fixed here, before any data is read. A claim **holds** when its
//! interval at the family-wise level lies wholly on the claimed side, **does not hold** when it
//! lies wholly on the other side, and is **inconclusive** otherwise, with the number of examples
//! per task that would give 80% power for the observed effect. The family is the whole table:
//! every interval is at level `1 - 0.05 / FAMILY` (Bonferroni), so the chance that any verdict
//! of the table is wrong in its direction is at most 5%.
//!
//! Pooled statistics average over the tasks whose final accuracy is above chance (its 95%
//! interval excludes chance). Statistics from `analysis report` pool per-task estimates with
//! their bootstrap standard errors (tasks use disjoint examples, so they are independent);
//! differences between methods come pooled from `analysis compare` (a stratified paired
//! bootstrap). A claim over "every metric" (acc, acc_norm, gold log-prob, margin) holds only if
//! it holds on each, and does not hold if it fails on any.

use serde::Serialize;

use crate::compare::DifferenceRow;
use crate::continuous::Metric;
use crate::power::{n_for_power, z};
use crate::seeds::{self, RecipeEstimate};
use crate::stats::mean;
use crate::trend::Slope;
use crate::TaskMetrics;
use run::Method;

/// Claims in the table: the Bonferroni family.
pub const FAMILY: usize = 16;
/// Level of every claim's interval.
pub const FAMILY_LEVEL: f64 = 1.0 - 0.05 / FAMILY as f64;

/// The normal quantile of a two-sided interval at the family level.
fn family_z() -> f64 {
    z(1.0 - (1.0 - FAMILY_LEVEL) / 2.0)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Holds,
    DoesNotHold,
    Inconclusive,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Holds => "holds",
            Verdict::DoesNotHold => "does not hold",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

/// Which side of the threshold a claim says the statistic lies on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Side {
    Above,
    Below,
}

#[derive(Debug, Clone, Serialize)]
pub struct Claim {
    pub id: &'static str,
    pub claim: &'static str,
    /// the rule in words: statistic, side, threshold
    pub rule: String,
    pub estimate: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub verdict: Verdict,
    /// examples per task for 80% power at the observed effect (inconclusive claims)
    pub n_needed: Option<u64>,
    /// what else the verdict rests on (per-metric verdicts, tasks pooled)
    pub detail: String,
    /// the command that checks it (`RUN`: the run folder analysed)
    pub command: &'static str,
    /// the side and threshold of the rule (of its first metric for a claim over every metric)
    #[serde(skip)]
    pub against: Option<(Side, f64)>,
    /// each metric's decision (one part for a pooled claim, one per metric for a claim over
    /// several metrics), what a recipe-level combination ([`recipe_claim`]) decides on
    #[serde(skip)]
    pub parts: Vec<Part>,
}

/// One metric's decision inside a claim.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// `acc`, `acc_norm`, `gold_logprob`, `margin`, or the statistic of a pooled claim
    pub metric: &'static str,
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
    pub verdict: Verdict,
    /// None where nothing could be estimated
    pub against: Option<(Side, f64)>,
}

impl Part {
    fn of(metric: &'static str, d: &Decided) -> Part {
        Part { metric, estimate: d.estimate, low: d.low, high: d.high, verdict: d.verdict, against: d.against }
    }
}

/// One decided statistic.
#[derive(Debug, Clone)]
pub struct Decided {
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
    pub verdict: Verdict,
    pub n_needed: Option<u64>,
    /// the side and threshold it was decided against (None where nothing could be estimated)
    pub against: Option<(Side, f64)>,
}

/// Decides `estimate` (with its interval) against `threshold` on `side`; `se` and `n` give the
/// examples per task needed for 80% power when inconclusive.
pub fn decide(estimate: f64, low: f64, high: f64, side: Side, threshold: f64, se: f64, n: usize) -> Decided {
    let verdict = match side {
        Side::Above if low > threshold => Verdict::Holds,
        Side::Above if high < threshold => Verdict::DoesNotHold,
        Side::Below if high < threshold => Verdict::Holds,
        Side::Below if low > threshold => Verdict::DoesNotHold,
        _ => Verdict::Inconclusive,
    };
    let n_needed = (verdict == Verdict::Inconclusive)
        .then(|| n_for_power(estimate - threshold, se, n.max(1), 1.0 - FAMILY_LEVEL, 0.8))
        .flatten();
    Decided { estimate, low, high, verdict, n_needed, against: Some((side, threshold)) }
}

/// Pools independent per-task estimates with standard errors: mean, and a normal interval at
/// the family level.
pub fn pool(values: &[(f64, f64)]) -> Option<(f64, f64, f64, f64)> {
    if values.is_empty() || values.iter().any(|(v, s)| !v.is_finite() || !s.is_finite()) {
        return None;
    }
    let t = values.len() as f64;
    let est = mean(&values.iter().map(|v| v.0).collect::<Vec<_>>());
    let se = values.iter().map(|v| v.1 * v.1).sum::<f64>().sqrt() / t;
    let h = family_z() * se;
    Some((est, est - h, est + h, se))
}

/// Combines per-metric decisions: holds if all hold, does not hold if any fails.
fn combine(ds: &[(Metric, Decided)]) -> Verdict {
    if !ds.is_empty() && ds.iter().all(|d| d.1.verdict == Verdict::Holds) {
        Verdict::Holds
    } else if ds.iter().any(|d| d.1.verdict == Verdict::DoesNotHold) {
        Verdict::DoesNotHold
    } else {
        Verdict::Inconclusive
    }
}

fn metric_list(ds: &[(Metric, Decided)]) -> String {
    ds.iter()
        .map(|(m, d)| format!("{} {:+.4} [{:+.4}, {:+.4}] {}", m.name(), d.estimate, d.low, d.high, d.verdict.label()))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The tasks the pooled claims use: final accuracy above chance.
pub fn headline_tasks(tm: &[TaskMetrics]) -> Vec<String> {
    let mut t: Vec<String> = tm
        .iter()
        .filter(|m| m.window == "final" && m.metric == "acc" && m.above_chance == Some(true))
        .map(|m| m.task.clone())
        .collect();
    t.sort();
    t.dedup();
    t
}

fn rows<'a>(tm: &'a [TaskMetrics], tasks: &[String], window: &str) -> Vec<&'a TaskMetrics> {
    tasks.iter().filter_map(|t| tm.iter().find(|m| &m.task == t && m.window == window && m.metric == "acc")).collect()
}

/// The metric a claim decided on one pooled statistic is over (what the recipe level combines).
fn part_metric(id: &str) -> &'static str {
    match id {
        "C16" => "slope",
        "G1" | "G4" | "G5" => "char_f1",
        "G2" | "G3" => "instability",
        _ => "acc",
    }
}

fn claim_from(
    id: &'static str,
    claim: &'static str,
    rule: String,
    d: Decided,
    detail: String,
    command: &'static str,
) -> Claim {
    let parts = if d.against.is_some() { vec![Part::of(part_metric(id), &d)] } else { vec![] };
    Claim {
        parts,
        id,
        claim,
        rule,
        estimate: d.estimate,
        ci_low: d.low,
        ci_high: d.high,
        verdict: d.verdict,
        n_needed: d.n_needed,
        detail,
        command,
        against: d.against,
    }
}

fn from_pool(values: &[(f64, f64)], side: Side, threshold: f64, n: usize) -> Decided {
    match pool(values) {
        Some((e, lo, hi, se)) => decide(e, lo, hi, side, threshold, se, n),
        None => Decided {
            estimate: f64::NAN,
            low: f64::NAN,
            high: f64::NAN,
            verdict: Verdict::Inconclusive,
            n_needed: None,
            against: None,
        },
    }
}

fn pooled_diff<'a>(
    diffs: &'a [DifferenceRow],
    metric: Metric,
    stat: &str,
    method: Method,
    k: usize,
    baseline: Method,
    baseline_k: usize,
) -> Option<&'a DifferenceRow> {
    diffs.iter().find(|d| {
        d.task == "pooled"
            && d.metric == metric.name()
            && d.statistic == stat
            && d.method == method
            && d.k == k
            && d.baseline == baseline
            && d.baseline_k == baseline_k
    })
}

fn from_diff(d: Option<&DifferenceRow>, side: Side) -> Option<Decided> {
    let d = d?;
    Some(decide(d.estimate, d.ci_low_family, d.ci_high_family, side, 0.0, d.se, d.examples / d.tasks.max(1)))
}

/// A claim on paired differences over several metrics (and optionally the flip rate).
#[allow(clippy::too_many_arguments)]
fn diff_claim(
    id: &'static str,
    claim: &'static str,
    diffs: &[DifferenceRow],
    stat: &str,
    metrics: &[Metric],
    method: Method,
    k: usize,
    baseline: Method,
    baseline_k: usize,
    side: Side,
    command: &'static str,
) -> Claim {
    let ds: Vec<(Metric, Decided)> = metrics
        .iter()
        .filter_map(|&m| Some((m, from_diff(pooled_diff(diffs, m, stat, method, k, baseline, baseline_k), side)?)))
        .collect();
    let verdict = if ds.len() < metrics.len() { Verdict::Inconclusive } else { combine(&ds) };
    let head = ds.first().map(|d| d.1.clone()).unwrap_or(Decided {
        estimate: f64::NAN,
        low: f64::NAN,
        high: f64::NAN,
        verdict,
        n_needed: None,
        against: None,
    });
    let tasks = pooled_diff(diffs, metrics[0], stat, method, k, baseline, baseline_k).map_or(0, |d| d.tasks);
    let rel = if side == Side::Below { "<" } else { ">" };
    let n_needed = ds.iter().filter_map(|d| d.1.n_needed).max();
    Claim {
        parts: ds.iter().map(|(m, d)| Part::of(m.name(), d)).collect(),
        id,
        claim,
        rule: format!(
            "{stat}({method} k={k}) - {stat}({baseline} k={baseline_k}) {rel} 0 on {}, pooled over {tasks} tasks",
            metrics.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ")
        ),
        estimate: head.estimate,
        ci_low: head.low,
        ci_high: head.high,
        verdict,
        n_needed: (verdict == Verdict::Inconclusive).then_some(n_needed).flatten(),
        detail: metric_list(&ds),
        command,
        against: head.against,
    }
}

/// The windows the claims compare.
#[derive(Debug, Clone, Copy)]
pub struct Windows {
    /// the largest window both averaging and ensembling have
    pub k: usize,
    /// the smallest ensembling window above 1
    pub ensemble_small: usize,
    /// the smallest averaging window above 1
    pub average_small: usize,
}

/// Every claim of the table, on the windows `windows`; `size` is the pooled Pythia size slope
/// over models from `size_range.0` to `size_range.1` parameters.
pub fn claims(
    tm: &[TaskMetrics],
    diffs: &[DifferenceRow],
    windows: Windows,
    size: Option<&Slope>,
    size_range: (f64, f64),
) -> Vec<Claim> {
    let k = windows.k;
    let tasks = headline_tasks(tm);
    let (fin, all) = (rows(tm, &tasks, "final"), rows(tm, &tasks, "all"));
    let n = fin.iter().filter_map(|m| m.examples).min().unwrap_or(0);
    let detail = format!("{} tasks above chance: {}", tasks.len(), tasks.join(", "));
    let mut out = vec![];

    let v: Vec<(f64, f64)> =
        fin.iter().filter_map(|m| Some((m.mtv_bias_corrected? - m.null_mtv?, m.mtv_se?))).collect();
    out.push(claim_from(
        "C1",
        "Task-level scores fluctuate beyond evaluation noise late in training",
        "final 20%, acc: bias-corrected MTV - MTV of the paired sign-flip null > 0, pooled".into(),
        from_pool(&v, Side::Above, 0.0, n),
        detail.clone(),
        "just figure fig1_scores",
    ));

    let v: Vec<(f64, f64)> = all
        .iter()
        .filter_map(|m| {
            let f = m.mean_flip_rate.filter(|f| *f > 0.0)?;
            Some((m.mtv / f, m.mtv_se? / f))
        })
        .collect();
    out.push(claim_from(
        "C2",
        "Gains and losses of different examples cancel: task-level MTV is less than half the example flip rate",
        "all checkpoints, acc: task MTV / mean example flip rate < 0.5, pooled".into(),
        from_pool(&v, Side::Below, 0.5, n),
        detail.clone(),
        "just figure fig3_flip_rates",
    ));

    let v: Vec<(f64, f64)> = tasks
        .iter()
        .filter_map(|t| {
            let f = fin.iter().find(|m| &m.task == t)?;
            let a = all.iter().find(|m| &m.task == t)?.mean_flip_rate.filter(|a| *a > 0.0)?;
            Some((f.mean_flip_rate? / a, f.flip_rate_se? / a))
        })
        .collect();
    out.push(claim_from(
        "C3",
        "Example-level fluctuation persists to the end of training",
        "acc: flip rate of the final 20% / flip rate over all checkpoints > 0.5, pooled".into(),
        from_pool(&v, Side::Above, 0.5, n),
        detail.clone(),
        "just figure fig2_example_heatmap",
    ));

    let v: Vec<(f64, f64)> =
        all.iter().filter_map(|m| Some((m.selection_optimism?, m.selection_optimism_se?))).collect();
    out.push(claim_from("C4", "Picking the best checkpoint by its score overstates how good it is", "all checkpoints, acc: selection optimism (score on the half it was picked on - score on the other half, 200 stratified splits) > 0, pooled".into(), from_pool(&v, Side::Above, 0.0, n), detail.clone(), "target/release/analysis report RUN"));

    let every = &Metric::CLAIMS;
    out.push(diff_claim(
        "C5",
        "Checkpoint averaging lowers task-level fluctuation (MTV) on every metric",
        diffs,
        "mtv",
        every,
        Method::Average,
        k,
        Method::Single,
        1,
        Side::Below,
        "just figure fig4_integration",
    ));
    out.push(diff_claim(
        "C6",
        "Checkpoint ensembling lowers task-level fluctuation (MTV) on every metric",
        diffs,
        "mtv",
        every,
        Method::EnsembleMean,
        k,
        Method::Single,
        1,
        Side::Below,
        "just figure fig4_integration",
    ));
    out.push(diff_claim(
        "C7",
        "Averaging lowers MTV more than the smoothing baseline (k-moving average of single scores)",
        diffs,
        "mtv",
        every,
        Method::Average,
        k,
        Method::Smoothing,
        k,
        Side::Below,
        "just figure fig4_integration",
    ));
    out.push(diff_claim(
        "C8",
        "Ensembling lowers MTV more than the smoothing baseline",
        diffs,
        "mtv",
        every,
        Method::EnsembleMean,
        k,
        Method::Smoothing,
        k,
        Side::Below,
        "just figure fig4_integration",
    ));
    let flips = [Metric::Acc, Metric::AccNorm];
    out.push(diff_claim(
        "C9",
        "Checkpoint averaging lowers example-level fluctuation (flip rate)",
        diffs,
        "flip_rate",
        &flips,
        Method::Average,
        k,
        Method::Single,
        1,
        Side::Below,
        "just figure table2_stability",
    ));
    out.push(diff_claim(
        "C10",
        "Checkpoint ensembling lowers example-level fluctuation (flip rate)",
        diffs,
        "flip_rate",
        &flips,
        Method::EnsembleMean,
        k,
        Method::Single,
        1,
        Side::Below,
        "just figure table2_stability",
    ));
    out.push(diff_claim(
        "C11",
        "Larger windows lower fluctuation further (ensembling, largest vs smallest k)",
        diffs,
        "mtv",
        every,
        Method::EnsembleMean,
        k,
        Method::EnsembleMean,
        windows.ensemble_small,
        Side::Below,
        "just figure fig5_window_size",
    ));
    out.push(diff_claim(
        "C12",
        "Larger windows lower fluctuation further (averaging, largest vs smallest k)",
        diffs,
        "mtv",
        every,
        Method::Average,
        k,
        Method::Average,
        windows.average_small,
        Side::Below,
        "just figure fig5_window_size",
    ));
    out.push(diff_claim(
        "C13",
        "Ensembling stabilises examples more than averaging (at k times the inference cost)",
        diffs,
        "flip_rate",
        &flips,
        Method::EnsembleMean,
        k,
        Method::Average,
        k,
        Side::Below,
        "just figure table2_stability",
    ));
    out.push(diff_claim(
        "C14",
        "Averaging raises the mean score too",
        diffs,
        "mean_score",
        &flips,
        Method::Average,
        k,
        Method::Single,
        1,
        Side::Above,
        "just figure table1_main_results",
    ));
    out.push(diff_claim(
        "C15",
        "Ensembling raises the mean score too",
        diffs,
        "mean_score",
        &flips,
        Method::EnsembleMean,
        k,
        Method::Single,
        1,
        Side::Above,
        "just figure table1_main_results",
    ));

    // the size claim: MTV at the largest size is at least half of that at the smallest
    let threshold = 0.5f64.ln() / (size_range.1 / size_range.0).ln();
    let d = match size {
        Some(s) => {
            let h = (s.ci_high - s.ci_low) / 2.0;
            let zl = z(1.0 - (1.0 - s.level) / 2.0);
            let zf = family_z();
            let se = h / zl;
            decide(s.slope, s.slope - zf * se, s.slope + zf * se, Side::Above, threshold, se, s.points)
        }
        None => Decided {
            estimate: f64::NAN,
            low: f64::NAN,
            high: f64::NAN,
            verdict: Verdict::Inconclusive,
            n_needed: None,
            against: None,
        },
    };
    out.push(claim_from("C16", "The fluctuation does not vanish with model size (Pythia 70M to 12B)", format!("pooled slope of ln(final-20% task MTV) on ln(parameters) > {threshold:.3} (the largest size keeps at least half the smallest's MTV)"), d, size.map_or(String::new(), |s| format!("{} points, t interval widened to the family level", s.points)), "just figure fig7_pythia"));
    out.iter_mut().filter(|c| c.id == "C16").for_each(|c| c.n_needed = None);
    debug_assert_eq!(out.len(), FAMILY);
    out
}

/// One metric of a claim at the level of the training recipe.
#[derive(Debug, Clone, PartialEq)]
pub struct RecipePart {
    pub metric: &'static str,
    /// the runs' estimates, in run order
    pub runs: Vec<f64>,
    /// the random-effects combination ([`seeds::recipe_estimate`]); None where every run gives
    /// the same value
    pub estimate: Option<RecipeEstimate>,
    pub verdict: Verdict,
    /// runs that would decide this metric at the runs' observed mean and spread
    /// ([`seeds::runs_needed`]); None when decided, or never within the search
    pub runs_needed: Option<usize>,
    pub against: (Side, f64),
}

/// How a claim reads over runs that differ only in their seeds.
#[derive(Debug, Clone, PartialEq)]
pub enum RecipeClaim {
    /// Decided on the combination of the runs' estimates, metric by metric, and combined as a
    /// single run's claim is (holds if every metric holds, does not hold if any fails).
    Combined {
        parts: Vec<RecipePart>,
        verdict: Verdict,
        /// for an inconclusive claim, the runs that would decide it at the observed means and
        /// spreads: the fewest that decide a metric whose mean is on the wrong side (one such
        /// metric failing is enough), else the most any metric needs to hold (every metric must);
        /// None when decided or when no number up to the search's maximum would do
        seeds_to_decide: Option<usize>,
    },
    /// Every run gives the same estimates and intervals: the claim does not depend on the run
    /// (it is decided on data outside the runs, such as the Pythia suite) or the runs are
    /// copies; the runs' common verdict stands, and more seeds would not change it.
    Identical { verdict: Verdict },
    /// Some run has no estimate for some metric of the claim.
    NotEstimated,
}

impl RecipeClaim {
    /// The verdict at the recipe level (None where not every run has an estimate).
    pub fn verdict(&self) -> Option<Verdict> {
        match self {
            RecipeClaim::Combined { verdict, .. } | RecipeClaim::Identical { verdict } => Some(*verdict),
            RecipeClaim::NotEstimated => None,
        }
    }

    /// The runs (indices) whose own verdict differs from the recipe's.
    pub fn disagreeing(&self, runs: &[&Claim]) -> Vec<usize> {
        match self.verdict() {
            Some(v) => (0..runs.len()).filter(|&i| runs[i].verdict != v).collect(),
            None => vec![],
        }
    }
}

/// One claim of several runs of a recipe (the same claim of each run, in run order), combined
/// at `level` with the random-effects t interval of [`seeds::recipe_estimate`] metric by
/// metric; `max_runs` bounds the search for the seeds that would decide an inconclusive claim.
pub fn recipe_claim(runs: &[&Claim], level: f64, max_runs: usize) -> RecipeClaim {
    let Some(first) = runs.first() else { return RecipeClaim::NotEstimated };
    let same_parts = |c: &&Claim| {
        c.parts.len() == first.parts.len()
            && c.parts.iter().zip(&first.parts).all(|(a, b)| a.metric == b.metric && a.against == b.against)
    };
    if first.parts.is_empty()
        || !runs.iter().all(same_parts)
        || runs.iter().flat_map(|c| &c.parts).any(|p| p.against.is_none() || !p.estimate.is_finite())
    {
        return RecipeClaim::NotEstimated;
    }
    if runs.iter().all(|c| c.parts == first.parts && c.verdict == first.verdict) {
        return RecipeClaim::Identical { verdict: first.verdict };
    }
    let parts: Vec<RecipePart> = first
        .parts
        .iter()
        .enumerate()
        .map(|(m, p)| {
            let (side, threshold) = p.against.expect("checked above");
            let est: Vec<f64> = runs.iter().map(|c| c.parts[m].estimate).collect();
            let estimate = seeds::recipe_estimate(&est, level);
            let verdict = estimate
                .as_ref()
                .map_or(Verdict::Inconclusive, |e| decide(e.estimate, e.low, e.high, side, threshold, e.se, 1).verdict);
            let runs_needed = (verdict == Verdict::Inconclusive)
                .then(|| seeds::runs_needed(&est, threshold, level, max_runs))
                .flatten();
            RecipePart { metric: p.metric, runs: est, estimate, verdict, runs_needed, against: (side, threshold) }
        })
        .collect();
    let verdict = if parts.iter().all(|p| p.verdict == Verdict::Holds) {
        Verdict::Holds
    } else if parts.iter().any(|p| p.verdict == Verdict::DoesNotHold) {
        Verdict::DoesNotHold
    } else {
        Verdict::Inconclusive
    };
    let seeds_to_decide = (verdict == Verdict::Inconclusive).then(|| seeds_to_decide(&parts)).flatten();
    RecipeClaim::Combined { parts, verdict, seeds_to_decide }
}

/// Whether a metric's mean over runs lies on the side its claim does not claim.
fn wrong_side(p: &RecipePart) -> bool {
    let m = crate::stats::mean(&p.runs);
    match p.against {
        (Side::Above, t) => m < t,
        (Side::Below, t) => m > t,
    }
}

/// The runs that decide an inconclusive claim over several metrics: one metric failing decides
/// it (the fewest runs over the metrics whose mean is on the wrong side), else every metric
/// must hold (the most over them, None if one is never decided).
fn seeds_to_decide(parts: &[RecipePart]) -> Option<usize> {
    let wrong: Vec<&RecipePart> = parts.iter().filter(|p| wrong_side(p)).collect();
    if wrong.is_empty() {
        parts
            .iter()
            .map(|p| if p.verdict == Verdict::Holds { Some(p.runs.len()) } else { p.runs_needed })
            .try_fold(0, |a, r| Some(a.max(r?)))
    } else {
        wrong.iter().filter_map(|p| p.runs_needed).min()
    }
}

/// The generation tasks the text claims pool over: every task of `tm` with `char_f1` rows whose
/// final char F1 is above 0 (a task whose texts never share a character with an answer says
/// nothing about how texts move).
pub fn text_tasks(tm: &[TaskMetrics]) -> Vec<String> {
    let mut t: Vec<String> = tm
        .iter()
        .filter(|m| m.window == "final" && m.metric == "char_f1" && m.final_score > 0.0)
        .map(|m| m.task.clone())
        .collect();
    t.sort();
    t.dedup();
    t
}

/// Per-task paired differences of one statistic, pooled over `tasks` as the per-run claims pool
/// ([`pool`]: mean, family-level normal interval).
fn per_task_pool(
    diffs: &[DifferenceRow],
    tasks: &[String],
    metric: &str,
    stat: &str,
    (method, k): (Method, usize),
    (baseline, baseline_k): (Method, usize),
    side: Side,
) -> Decided {
    let rows: Vec<&DifferenceRow> = tasks
        .iter()
        .filter_map(|t| {
            diffs.iter().find(|d| {
                &d.task == t
                    && d.metric == metric
                    && d.statistic == stat
                    && d.method == method
                    && d.k == k
                    && d.baseline == baseline
                    && d.baseline_k == baseline_k
            })
        })
        .collect();
    let n = rows.iter().map(|d| d.examples).min().unwrap_or(0);
    from_pool(&rows.iter().map(|d| (d.estimate, d.se)).collect::<Vec<_>>(), side, 0.0, n)
}

/// The study's claims on generated text (issue 27), decided on one run's generation tables
/// (`results/<run>/generation/`, `just study-gen`) with the rules of the other claims: pooled over
/// [`text_tasks`], family-level intervals. The instability score (IS) is the paper's
/// reference-free one: the mean over transitions of 1 - char F1 of consecutive outputs; `k` is
/// the window averaging and the vote over texts share. The vote is the ensemble of text (the mean
/// of distributions needs the models; `lm generate` does it, the study does not run it).
pub fn generation_claims(tm: &[TaskMetrics], diffs: &[DifferenceRow], k: usize) -> Vec<Claim> {
    let tasks = text_tasks(tm);
    let detail = format!("{} generation tasks with texts above 0 char F1: {}", tasks.len(), tasks.join(", "));
    let fin: Vec<&TaskMetrics> = tasks
        .iter()
        .filter_map(|t| tm.iter().find(|m| &m.task == t && m.window == "final" && m.metric == "char_f1"))
        .collect();
    let n = fin.iter().filter_map(|m| m.examples).min().unwrap_or(0);
    let v: Vec<(f64, f64)> =
        fin.iter().filter_map(|m| Some((m.mtv_bias_corrected? - m.null_mtv?, m.mtv_se?))).collect();
    let mut out = vec![claim_from(
        "G1",
        "The char F1 of generated text fluctuates beyond evaluation noise late in training",
        "final 20%, char_f1: bias-corrected MTV - MTV of the paired sign-flip null > 0, pooled".into(),
        from_pool(&v, Side::Above, 0.0, n),
        detail.clone(),
        "target/release/analysis report RUN/generation",
    )];
    let single = (Method::Single, 1);
    let rules: [(&'static str, &'static str, &str, &str, Method, Method); 4] = [
        (
            "G2",
            "Checkpoint averaging lowers the instability of generated text (IS)",
            "acc",
            "instability",
            Method::Average,
            Method::Single,
        ),
        (
            "G3",
            "Ensembling by a vote over texts lowers the instability of generated text (IS)",
            "acc",
            "instability",
            Method::EnsembleVote,
            Method::Single,
        ),
        (
            "G4",
            "Averaging lowers char-F1 MTV more than the smoothing baseline",
            "char_f1",
            "mtv",
            Method::Average,
            Method::Smoothing,
        ),
        (
            "G5",
            "The vote over texts lowers char-F1 MTV more than the smoothing baseline",
            "char_f1",
            "mtv",
            Method::EnsembleVote,
            Method::Smoothing,
        ),
    ];
    for (id, claim, metric, stat, method, baseline) in rules {
        let base = if baseline == Method::Single { single } else { (baseline, k) };
        let d = per_task_pool(diffs, &tasks, metric, stat, (method, k), base, Side::Below);
        let stat_name = if stat == "instability" { "IS (1 - char F1 of consecutive texts)" } else { "char-F1 MTV" };
        out.push(claim_from(
            id,
            claim,
            format!("{stat_name}({method} k={k}) - {stat_name}({baseline} k={}) < 0, per task, pooled", base.1),
            d,
            detail.clone(),
            "target/release/analysis compare RUN/generation",
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A claim of one run with the given parts (metric, estimate, verdict), decided against 0
    /// below (as the remedies' claims are).
    fn run_claim(parts: &[(&'static str, f64, Verdict)]) -> Claim {
        let parts: Vec<Part> = parts
            .iter()
            .map(|&(metric, estimate, verdict)| Part {
                metric,
                estimate,
                low: estimate - 0.001,
                high: estimate + 0.001,
                verdict,
                against: Some((Side::Below, 0.0)),
            })
            .collect();
        let combined = if parts.iter().all(|p| p.verdict == Verdict::Holds) {
            Verdict::Holds
        } else if parts.iter().any(|p| p.verdict == Verdict::DoesNotHold) {
            Verdict::DoesNotHold
        } else {
            Verdict::Inconclusive
        };
        Claim {
            id: "C5",
            claim: "",
            rule: String::new(),
            estimate: parts[0].estimate,
            ci_low: parts[0].low,
            ci_high: parts[0].high,
            verdict: combined,
            n_needed: None,
            detail: String::new(),
            command: "",
            against: parts[0].against,
            parts,
        }
    }

    /// By hand: acc over three runs -1, -2, -3 (mean -2, sd 1, se 1/sqrt 3), t_{0.975, 2} =
    /// 4.3027: [-4.48, +0.48], inconclusive, although each run holds; 4 runs at that mean and sd
    /// would decide it (`seeds::runs_needed`).
    #[test]
    fn a_recipe_claim_by_hand() {
        let h = Verdict::Holds;
        let runs = [run_claim(&[("acc", -1.0, h)]), run_claim(&[("acc", -2.0, h)]), run_claim(&[("acc", -3.0, h)])];
        let refs: Vec<&Claim> = runs.iter().collect();
        let r = recipe_claim(&refs, 0.95, 100);
        let RecipeClaim::Combined { parts, verdict, seeds_to_decide } = &r else { panic!("{r:?}") };
        let e = parts[0].estimate.as_ref().unwrap();
        assert_eq!((e.estimate, e.df), (-2.0, 2));
        assert!((e.high - (-2.0 + 4.302653 / 3f64.sqrt())).abs() < 1e-5, "{e:?}");
        assert_eq!((*verdict, *seeds_to_decide), (Verdict::Inconclusive, Some(4)));
        assert_eq!(parts[0].runs, [-1.0, -2.0, -3.0]);
        // every run holds on its own, so each disagrees with the inconclusive recipe
        assert_eq!(r.disagreeing(&refs), [0, 1, 2]);
        // a tight spread decides it, and no run disagrees
        let runs = [run_claim(&[("acc", -1.0, h)]), run_claim(&[("acc", -1.01, h)]), run_claim(&[("acc", -0.99, h)])];
        let refs: Vec<&Claim> = runs.iter().collect();
        let r = recipe_claim(&refs, FAMILY_LEVEL, 100);
        assert_eq!(r.verdict(), Some(Verdict::Holds));
        assert!(r.disagreeing(&refs).is_empty());
        assert!(matches!(r, RecipeClaim::Combined { seeds_to_decide: None, .. }));
    }

    /// A claim over several metrics is combined metric by metric, as one run's is: a metric whose
    /// recipe interval lies on the wrong side decides it (does not hold) whatever acc says, and an
    /// inconclusive claim needs the most runs any metric needs when every mean is on the claimed
    /// side, the fewest a wrong-side metric needs otherwise.
    #[test]
    fn a_recipe_claim_over_several_metrics_holds_only_if_each_holds() {
        let (h, n, i) = (Verdict::Holds, Verdict::DoesNotHold, Verdict::Inconclusive);
        let three = |acc: [f64; 3], other: [f64; 3]| -> Vec<Claim> {
            (0..3).map(|r| run_claim(&[("acc", acc[r], i), ("margin", other[r], h)])).collect()
        };
        let decided = |runs: &[Claim]| recipe_claim(&runs.iter().collect::<Vec<_>>(), FAMILY_LEVEL, 1000);
        // acc inconclusive (spread over 0), margin clearly above 0: does not hold
        let r = decided(&three([-0.01, 0.0, 0.01], [1.0, 1.001, 0.999]));
        assert_eq!(r.verdict(), Some(n), "{r:?}");
        // acc inconclusive, margin holds: inconclusive; acc's mean (-0.1) on the claimed side,
        // so the claim needs what acc needs
        let r = decided(&three([-0.2, -0.1, 0.0], [-1.0, -1.001, -0.999]));
        let RecipeClaim::Combined { parts, verdict, seeds_to_decide } = &r else { panic!("{r:?}") };
        assert_eq!((*verdict, parts[1].verdict), (i, h));
        let acc = seeds::runs_needed(&[-0.2, -0.1, 0.0], 0.0, FAMILY_LEVEL, 1000);
        assert!(acc.is_some_and(|n| n > 3));
        assert_eq!(*seeds_to_decide, acc);
        // both inconclusive, margin's mean on the wrong side: the runs margin needs to fail
        let r = decided(&three([-0.2, -0.1, 0.0], [0.1, 0.0, 0.2]));
        let RecipeClaim::Combined { verdict, seeds_to_decide, .. } = &r else { panic!("{r:?}") };
        assert_eq!(*verdict, i);
        assert_eq!(*seeds_to_decide, seeds::runs_needed(&[0.1, 0.0, 0.2], 0.0, FAMILY_LEVEL, 1000));
    }

    /// Runs that give one claim the same estimates (the Pythia claim, or copies of one run) keep
    /// their common verdict; a run without an estimate leaves the recipe undecided.
    #[test]
    fn identical_and_missing_runs_in_a_recipe() {
        let h = Verdict::Holds;
        let runs = [run_claim(&[("acc", -1.0, h)]), run_claim(&[("acc", -1.0, h)])];
        let refs: Vec<&Claim> = runs.iter().collect();
        assert_eq!(recipe_claim(&refs, FAMILY_LEVEL, 100), RecipeClaim::Identical { verdict: h });
        let mut missing = run_claim(&[("acc", -1.0, h)]);
        missing.parts[0].against = None;
        let refs = vec![&runs[0], &missing];
        assert_eq!(recipe_claim(&refs, FAMILY_LEVEL, 100), RecipeClaim::NotEstimated);
        assert_eq!(RecipeClaim::NotEstimated.disagreeing(&refs), Vec::<usize>::new());
        // a run missing a metric the others have
        let short = run_claim(&[("acc", -2.0, h)]);
        let long = run_claim(&[("acc", -1.0, h), ("margin", -1.0, h)]);
        assert_eq!(recipe_claim(&[&short, &long], FAMILY_LEVEL, 100), RecipeClaim::NotEstimated);
        assert_eq!(recipe_claim(&[], FAMILY_LEVEL, 100), RecipeClaim::NotEstimated);
    }

    proptest::proptest! {
        /// Over random runs: a recipe verdict is the combination of its metrics' verdicts, each
        /// metric's verdict is its interval's side of the threshold, and the seeds an
        /// inconclusive claim needs are more than the runs it has.
        #[test]
        fn recipe_verdicts_follow_their_intervals(
            est in proptest::collection::vec((-0.02f64..0.02, -0.02f64..0.02), 2..6),
        ) {
            let i = Verdict::Inconclusive;
            let runs: Vec<Claim> = est.iter().map(|&(a, m)| run_claim(&[("acc", a, i), ("margin", m, i)])).collect();
            let refs: Vec<&Claim> = runs.iter().collect();
            let r = recipe_claim(&refs, FAMILY_LEVEL, 1000);
            if let RecipeClaim::Combined { parts, verdict, seeds_to_decide } = &r {
                for p in parts {
                    let e = p.estimate.as_ref().unwrap();
                    let want = if e.high < 0.0 { Verdict::Holds } else if e.low > 0.0 { Verdict::DoesNotHold } else { i };
                    proptest::prop_assert_eq!(p.verdict, want);
                }
                let all_hold = parts.iter().all(|p| p.verdict == Verdict::Holds);
                let any_fails = parts.iter().any(|p| p.verdict == Verdict::DoesNotHold);
                let want = if all_hold { Verdict::Holds } else if any_fails { Verdict::DoesNotHold } else { i };
                proptest::prop_assert_eq!(*verdict, want);
                if let Some(n) = seeds_to_decide {
                    proptest::prop_assert!(*n > runs.len(), "{} runs, {} to decide", runs.len(), n);
                }
                proptest::prop_assert!(*verdict == i || seeds_to_decide.is_none());
            }
        }
    }

    #[test]
    fn verdicts_follow_the_interval() {
        assert_eq!(decide(0.3, 0.1, 0.5, Side::Above, 0.0, 0.1, 100).verdict, Verdict::Holds);
        assert_eq!(decide(-0.3, -0.5, -0.1, Side::Above, 0.0, 0.1, 100).verdict, Verdict::DoesNotHold);
        let d = decide(0.1, -0.1, 0.3, Side::Above, 0.0, 0.1, 100);
        assert_eq!(d.verdict, Verdict::Inconclusive);
        // effect 0.1 at se 0.1 (n = 100): needs about ((z_.998 + z_.8) * 1)^2 * 100 examples
        let n = d.n_needed.unwrap();
        assert!((1300..1700).contains(&n), "{n}");
        assert_eq!(decide(-0.3, -0.5, -0.1, Side::Below, 0.0, 0.1, 100).verdict, Verdict::Holds);
        assert_eq!(decide(0.6, 0.55, 0.7, Side::Below, 0.5, 0.1, 100).verdict, Verdict::DoesNotHold);
    }

    #[test]
    fn an_interval_touching_the_threshold_is_inconclusive() {
        for side in [Side::Above, Side::Below] {
            assert_eq!(decide(0.2, 0.0, 0.4, side, 0.0, 0.1, 100).verdict, Verdict::Inconclusive);
            assert_eq!(decide(-0.2, -0.4, 0.0, side, 0.0, 0.1, 100).verdict, Verdict::Inconclusive);
        }
    }

    #[test]
    fn a_claim_on_several_metrics_holds_only_if_each_holds() {
        let d = |verdict| {
            (Metric::Acc, Decided { estimate: 0.0, low: 0.0, high: 0.0, verdict, n_needed: None, against: None })
        };
        let (h, n, i) = (Verdict::Holds, Verdict::DoesNotHold, Verdict::Inconclusive);
        assert_eq!(combine(&[d(h), d(h)]), h);
        assert_eq!(combine(&[d(h), d(n)]), n);
        assert_eq!(combine(&[d(h), d(i)]), i);
        assert_eq!(combine(&[d(i), d(n)]), n);
        assert_eq!(combine(&[]), i);
    }

    const WINDOWS: Windows = Windows { k: 16, ensemble_small: 2, average_small: 4 };
    /// Pythia's 70M to 12B
    const SIZES: (f64, f64) = (7e7, 1.2e10);

    fn task(task: &str, window: &str, above_chance: bool) -> TaskMetrics {
        TaskMetrics {
            task: task.into(),
            window: window.into(),
            metric: "acc".into(),
            examples: Some(500),
            above_chance: Some(above_chance),
            ..Default::default()
        }
    }

    /// Two tasks above chance with hand-picked final-stage and whole-run rows, one at chance and
    /// an acc_norm row that must not be read: the pooled estimates of C1-C4 by hand.
    fn hand_rows() -> Vec<TaskMetrics> {
        let mut rows = vec![];
        for (name, bc, null, flip_final, mtv_all, flip_all, optimism) in
            [("a", 0.03, 0.01, 0.04, 0.02, 0.10, 0.01), ("b", 0.05, 0.02, 0.06, 0.03, 0.20, 0.03)]
        {
            rows.push(TaskMetrics {
                mtv_bias_corrected: Some(bc),
                null_mtv: Some(null),
                mtv_se: Some(0.002),
                mean_flip_rate: Some(flip_final),
                flip_rate_se: Some(0.003),
                ..task(name, "final", true)
            });
            rows.push(TaskMetrics {
                mtv: mtv_all,
                mtv_se: Some(0.002),
                mean_flip_rate: Some(flip_all),
                selection_optimism: Some(optimism),
                selection_optimism_se: Some(0.004),
                ..task(name, "all", true)
            });
        }
        rows.push(TaskMetrics {
            mtv_bias_corrected: Some(0.9),
            null_mtv: Some(0.0),
            mtv_se: Some(0.002),
            ..task("c", "final", false)
        });
        rows.push(TaskMetrics {
            metric: "acc_norm".into(),
            mtv_bias_corrected: Some(0.9),
            null_mtv: Some(0.0),
            mtv_se: Some(0.002),
            ..task("a", "final", true)
        });
        rows
    }

    #[test]
    fn pooled_claims_read_the_right_rows() {
        let out = claims(&hand_rows(), &[], WINDOWS, None, SIZES);
        let est = |id: &str| out.iter().find(|c| c.id == id).unwrap().estimate;
        assert!((est("C1") - (0.02 + 0.03) / 2.0).abs() < 1e-12, "{}", est("C1"));
        assert!((est("C2") - (0.02 / 0.10 + 0.03 / 0.20) / 2.0).abs() < 1e-12, "{}", est("C2"));
        assert!((est("C3") - (0.04 / 0.10 + 0.06 / 0.20) / 2.0).abs() < 1e-12, "{}", est("C3"));
        assert!((est("C4") - 0.02).abs() < 1e-12, "{}", est("C4"));
        assert_eq!(out[0].detail, "2 tasks above chance: a, b");
        assert_eq!(out.len(), FAMILY);
    }

    fn pooled(metric: Metric, estimate: f64, se: f64) -> DifferenceRow {
        let h = family_z() * se;
        DifferenceRow {
            task: "pooled".into(),
            tasks: 2,
            metric: metric.name().into(),
            statistic: "flip_rate".into(),
            method: Method::Average,
            k: 16,
            baseline: Method::Single,
            baseline_k: 1,
            estimate,
            se,
            ci_low: estimate - 2.0 * se,
            ci_high: estimate + 2.0 * se,
            ci_low_family: estimate - h,
            ci_high_family: estimate + h,
            examples: 1000,
        }
    }

    #[test]
    fn an_inconclusive_difference_states_the_examples_per_task_it_needs() {
        let diffs = [pooled(Metric::Acc, -0.004, 0.003), pooled(Metric::AccNorm, -0.004, 0.003)];
        let c9 = claims(&hand_rows(), &diffs, WINDOWS, None, SIZES).into_iter().find(|c| c.id == "C9").unwrap();
        assert_eq!(c9.verdict, Verdict::Inconclusive);
        // 1,000 examples over 2 tasks: the power calculation starts from 500 per task
        assert_eq!(c9.n_needed, n_for_power(-0.004, 0.003, 500, 1.0 - FAMILY_LEVEL, 0.8));
        assert!(c9.n_needed.is_some_and(|n| n > 500));
        let decided = [pooled(Metric::Acc, -0.02, 0.003), pooled(Metric::AccNorm, -0.02, 0.003)];
        let c9 = claims(&hand_rows(), &decided, WINDOWS, None, SIZES).into_iter().find(|c| c.id == "C9").unwrap();
        assert_eq!((c9.verdict, c9.n_needed), (Verdict::Holds, None));
    }

    /// The text claims by hand: G1 pools the char-F1 rows of the tasks whose texts score above 0
    /// (not the acc rows, not a task at 0 char F1); G2-G5 pool the per-task differences of the
    /// right statistic, method, window and baseline (not the pooled rows compare writes over the
    /// tasks above chance, which leave out tasks of exact match 0); a missing baseline leaves a
    /// claim inconclusive without an estimate.
    #[test]
    fn text_claims_pool_the_generation_tasks_by_hand() {
        let f1 = |name: &str, final_score: f64, bc: f64, null: f64| TaskMetrics {
            metric: "char_f1".into(),
            final_score,
            mtv_bias_corrected: Some(bc),
            null_mtv: Some(null),
            mtv_se: Some(0.001),
            above_chance: None,
            ..task(name, "final", false)
        };
        // the rows of other tasks come first, so a lookup that took another task's row would show
        let mut tm = vec![f1("dead", 0.0, 0.9, 0.0), f1("cont", 0.30, 0.020, 0.010), f1("qa", 0.10, 0.012, 0.008)];
        tm.push(TaskMetrics {
            mtv_bias_corrected: Some(0.9),
            null_mtv: Some(0.0),
            mtv_se: Some(0.001),
            ..task("cont", "final", true)
        });
        assert_eq!(text_tasks(&tm), ["cont", "qa"]);
        let diff =
            |task: &str, metric: &str, stat: &str, method: Method, baseline: Method, bk: usize, e: f64| DifferenceRow {
                task: task.into(),
                metric: metric.into(),
                statistic: stat.into(),
                method,
                k: 4,
                baseline,
                baseline_k: bk,
                ..pooled(Metric::Acc, e, 0.002)
            };
        let diffs = vec![
            diff("dead", "acc", "instability", Method::Average, Method::Single, 1, 0.9),
            diff("pooled", "acc", "instability", Method::Average, Method::Single, 1, 0.9),
            diff("cont", "acc", "instability", Method::Average, Method::Single, 1, -0.05),
            diff("qa", "acc", "instability", Method::Average, Method::Single, 1, -0.03),
            diff("cont", "acc", "instability", Method::Average, Method::Single, 16, 0.9),
            diff("cont", "acc", "instability", Method::EnsembleVote, Method::Single, 1, 0.01),
            diff("qa", "acc", "instability", Method::EnsembleVote, Method::Single, 1, 0.02),
            diff("cont", "char_f1", "mtv", Method::Average, Method::Smoothing, 4, -0.001),
            diff("qa", "char_f1", "mtv", Method::Average, Method::Smoothing, 4, 0.001),
        ];
        let out = generation_claims(&tm, &diffs, 4);
        let c = |id: &str| out.iter().find(|c| c.id == id).unwrap();
        assert_eq!(out.iter().map(|c| c.id).collect::<Vec<_>>(), ["G1", "G2", "G3", "G4", "G5"]);
        assert!((c("G1").estimate - (0.010 + 0.004) / 2.0).abs() < 1e-12, "{:?}", c("G1"));
        assert_eq!(c("G1").verdict, Verdict::Holds);
        assert!((c("G2").estimate - (-0.04)).abs() < 1e-12);
        assert_eq!((c("G2").verdict, c("G3").verdict), (Verdict::Holds, Verdict::DoesNotHold));
        assert!(c("G4").estimate.abs() < 1e-12 && c("G4").verdict == Verdict::Inconclusive);
        assert!(c("G5").estimate.is_nan() && c("G5").verdict == Verdict::Inconclusive && c("G5").parts.is_empty());
        assert_eq!((c("G1").parts[0].metric, c("G2").parts[0].metric), ("char_f1", "instability"));
        assert_eq!(c("G2").detail, "2 generation tasks with texts above 0 char F1: cont, qa");
        assert_eq!(
            c("G2").rule,
            "IS (1 - char F1 of consecutive texts)(average k=4) - IS (1 - char F1 of consecutive texts)(single k=1) < 0, per task, pooled"
        );
        assert_eq!(c("G4").rule, "char-F1 MTV(average k=4) - char-F1 MTV(smoothing k=4) < 0, per task, pooled");
        assert_eq!(c("G4").parts[0].metric, "char_f1");
    }

    #[test]
    fn the_size_claim_widens_the_slope_interval_to_the_family_level() {
        let (slope, se) = (-0.2, 0.05);
        let zl = z(0.975);
        let s = Slope {
            slope,
            intercept: 0.0,
            se,
            ci_low: slope - zl * se,
            ci_high: slope + zl * se,
            level: 0.95,
            df: 30,
            points: 32,
            skipped: 0,
        };
        let c16 = claims(&hand_rows(), &[], WINDOWS, Some(&s), SIZES).into_iter().find(|c| c.id == "C16").unwrap();
        let zf = family_z();
        assert!(
            (c16.ci_low - (slope - zf * se)).abs() < 1e-9 && (c16.ci_high - (slope + zf * se)).abs() < 1e-9,
            "{c16:?}"
        );
        // threshold ln 0.5 / ln(1.2e10 / 7e7) = -0.135: the interval [-0.34, -0.06] straddles it
        assert_eq!(c16.verdict, Verdict::Inconclusive);
        assert_eq!(c16.n_needed, None);
        assert!(
            c16.rule.starts_with("pooled slope of ln(final-20% task MTV) on ln(parameters) > -0.135 "),
            "{}",
            c16.rule
        );
        assert_eq!(
            (c16.detail.as_str(), c16.parts[0].metric),
            ("32 points, t interval widened to the family level", "slope")
        );
    }

    #[test]
    fn pooling_shrinks_the_interval_with_more_tasks() {
        let (e1, lo1, hi1, _) = pool(&[(0.1, 0.05)]).unwrap();
        let (e4, lo4, hi4, se4) = pool(&[(0.1, 0.05); 4]).unwrap();
        assert_eq!((e1, e4), (0.1, 0.1));
        assert!((se4 - 0.025).abs() < 1e-12);
        assert!((hi4 - lo4) * 2.0 - (hi1 - lo1) < 1e-12);
        assert!(pool(&[]).is_none());
    }

    /// C1-C4's intervals by hand (family z = 2.955167, the pooled se sqrt(sum se^2) / tasks), and
    /// a third task above chance whose whole-run flip rate is 0: left out of the ratios C2 and C3
    /// (it would divide by 0), counted among the tasks.
    #[test]
    fn the_pooled_claims_intervals_by_hand() {
        let mut tm = hand_rows();
        tm.push(TaskMetrics { mean_flip_rate: Some(0.05), flip_rate_se: Some(0.003), ..task("z", "final", true) });
        tm.push(TaskMetrics { mtv: 0.01, mtv_se: Some(0.002), mean_flip_rate: Some(0.0), ..task("z", "all", true) });
        let out = claims(&tm, &[], WINDOWS, None, SIZES);
        let zf = 2.955_166_847;
        // (estimate, se, verdict): C1 (0.02, 0.002) and (0.03, 0.002); C2 (0.2, 0.02) and
        // (0.15, 0.01); C3 (0.4, 0.03) and (0.3, 0.015), its interval below 0.5; C4 (0.01, 0.004)
        // and (0.03, 0.004)
        let want = [
            ("C1", 0.025, 0.002 * 2f64.sqrt() / 2.0, Verdict::Holds),
            ("C2", 0.175, 0.0005f64.sqrt() / 2.0, Verdict::Holds),
            ("C3", 0.35, 0.001125f64.sqrt() / 2.0, Verdict::DoesNotHold),
            ("C4", 0.02, 0.004 * 2f64.sqrt() / 2.0, Verdict::Holds),
        ];
        for (c, (id, e, se, verdict)) in out.iter().zip(want) {
            assert_eq!((c.id, c.verdict), (id, verdict), "{c:?}");
            assert!((c.estimate - e).abs() < 1e-12, "{c:?}");
            assert!((c.ci_low - (e - zf * se)).abs() < 1e-8 && (c.ci_high - (e + zf * se)).abs() < 1e-8, "{c:?}");
            assert_eq!(c.n_needed, None);
        }
        assert_eq!(out[0].detail, "3 tasks above chance: a, b, z");
        assert_eq!(
            out[2].parts,
            vec![Part {
                metric: "acc",
                estimate: out[2].estimate,
                low: out[2].ci_low,
                high: out[2].ci_high,
                verdict: Verdict::DoesNotHold,
                against: Some((Side::Above, 0.5))
            }]
        );
    }

    /// C5-C15 each read their own pooled differences (statistic, metrics, method and window,
    /// baseline and its window), not the per-task rows with the same keys: every row has an
    /// estimate of its own. C9 is inconclusive on both metrics (the examples per task the
    /// harder one needs), C11 lacks its margin row (inconclusive although every other metric
    /// holds), C13 fails on acc_norm.
    #[test]
    fn every_difference_claim_reads_its_own_rows() {
        use Method::{Average as A, EnsembleMean as E, Single as S, Smoothing as Sm};
        let every: &[Metric] = &Metric::CLAIMS;
        let two: &[Metric] = &[Metric::Acc, Metric::AccNorm];
        let rules: [(&str, &str, &[Metric], Method, Method, usize, Side); 11] = [
            ("C5", "mtv", every, A, S, 1, Side::Below),
            ("C6", "mtv", every, E, S, 1, Side::Below),
            ("C7", "mtv", every, A, Sm, 16, Side::Below),
            ("C8", "mtv", every, E, Sm, 16, Side::Below),
            ("C9", "flip_rate", two, A, S, 1, Side::Below),
            ("C10", "flip_rate", two, E, S, 1, Side::Below),
            ("C11", "mtv", every, E, E, 2, Side::Below),
            ("C12", "mtv", every, A, A, 4, Side::Below),
            ("C13", "flip_rate", two, E, A, 16, Side::Below),
            ("C14", "mean_score", two, A, S, 1, Side::Above),
            ("C15", "mean_score", two, E, S, 1, Side::Above),
        ];
        let row = |task: &str, stat: &str, m: Metric, method, baseline, baseline_k, e: f64, se: f64| DifferenceRow {
            task: task.into(),
            statistic: stat.into(),
            method,
            baseline,
            baseline_k,
            ..pooled(m, e, se)
        };
        // claim i, metric j: 0.01 (i + 1) + 0.001 j on the claimed side, se 0.001
        let estimate = |i: usize, j: usize, side: Side| {
            let e = 0.01 * (i + 1) as f64 + 0.001 * j as f64;
            if side == Side::Below {
                -e
            } else {
                e
            }
        };
        // every claim's own pooled rows, in metric order, as they are written
        let (mut diffs, mut own) = (vec![], vec![]);
        for (i, &(id, stat, metrics, method, baseline, bk, side)) in rules.iter().enumerate() {
            let mut rows = vec![];
            for (j, &m) in metrics.iter().enumerate() {
                diffs.push(row("a", stat, m, method, baseline, bk, 0.5, 0.001)); // a task's own row
                if id == "C11" && m == Metric::Margin {
                    continue;
                }
                let (e, se) = match (id, m) {
                    ("C9", Metric::Acc) => (-0.004, 0.003),
                    ("C9", _) => (-0.003, 0.003),
                    ("C13", Metric::AccNorm) => (0.02, 0.001),
                    _ => (estimate(i, j, side), 0.001),
                };
                let own_row = row("pooled", stat, m, method, baseline, bk, e, se);
                diffs.push(own_row.clone());
                rows.push(own_row);
            }
            own.push(rows);
        }
        let out = claims(&hand_rows(), &diffs, WINDOWS, None, SIZES);
        for (i, (&(id, _, _, _, _, _, side), own)) in rules.iter().zip(&own).enumerate() {
            let c = out.iter().find(|c| c.id == id).unwrap();
            let parts: Vec<(&str, f64, f64, f64)> =
                c.parts.iter().map(|p| (p.metric, p.estimate, p.low, p.high)).collect();
            let want: Vec<(&str, f64, f64, f64)> =
                own.iter().map(|d| (d.metric.as_str(), d.estimate, d.ci_low_family, d.ci_high_family)).collect();
            assert_eq!(parts, want, "{id}");
            assert_eq!(
                (c.estimate, c.ci_low, c.ci_high),
                (own[0].estimate, own[0].ci_low_family, own[0].ci_high_family),
                "{id}"
            );
            assert_eq!(c.against, Some((side, 0.0)), "{id}");
            let verdict = match id {
                "C9" | "C11" => Verdict::Inconclusive,
                "C13" => Verdict::DoesNotHold,
                _ => Verdict::Holds,
            };
            assert_eq!(c.verdict, verdict, "{id}: {c:?}");
            let expected_first = if id == "C9" { -0.004 } else { estimate(i, 0, side) };
            assert!((c.estimate - expected_first).abs() < 1e-12, "{id}");
            if id != "C9" {
                assert_eq!(c.n_needed, None, "{id}");
            }
        }
        let c = |id: &str| out.iter().find(|c| c.id == id).unwrap();
        // the harder of C9's two metrics: -0.003 at se 0.003 on 500 examples a task
        assert_eq!(c("C9").n_needed, Some(7208));
        assert_eq!(
            c("C9").detail,
            "acc -0.0040 [-0.0129, +0.0049] inconclusive; acc_norm -0.0030 [-0.0119, +0.0059] inconclusive"
        );
        assert!(c("C13").detail.ends_with("acc_norm +0.0200 [+0.0170, +0.0230] does not hold"), "{}", c("C13").detail);
        assert_eq!(
            c("C5").rule,
            "mtv(average k=16) - mtv(single k=1) < 0 on acc, acc_norm, gold_logprob, margin, pooled over 2 tasks"
        );
        assert_eq!(
            c("C11").rule,
            "mtv(ensemble k=16) - mtv(ensemble k=2) < 0 on acc, acc_norm, gold_logprob, margin, pooled over 2 tasks"
        );
        assert_eq!(
            c("C14").rule,
            "mean_score(average k=16) - mean_score(single k=1) > 0 on acc, acc_norm, pooled over 2 tasks"
        );
        assert_eq!(c("C11").parts.len(), 3);
        assert_eq!(
            (Verdict::Holds.label(), Verdict::DoesNotHold.label(), Verdict::Inconclusive.label()),
            ("holds", "does not hold", "inconclusive")
        );
    }

    /// The examples an inconclusive claim needs measure its distance to the threshold, not to 0
    /// (worked in Python's statistics.NormalDist: z(1 - 0.05/16/2) = 2.95517, z(0.8) = 0.84162).
    #[test]
    fn the_examples_needed_measure_the_distance_to_the_threshold() {
        // 0.3 against 0.2: effect 0.1, se 0.2 at 100 examples: 100 (3.79679 * 2)^2 = 5,766.2
        let above = decide(0.3, -0.1, 0.7, Side::Above, 0.2, 0.2, 100);
        assert_eq!((above.verdict, above.n_needed), (Verdict::Inconclusive, Some(5767)));
        // 0.7 below 1.0: effect -0.3, se 0.05 at 40 examples: 40 (3.79679 / 6)^2 = 16.02
        let below = decide(0.7, 0.6, 1.1, Side::Below, 1.0, 0.05, 40);
        assert_eq!((below.verdict, below.n_needed), (Verdict::Inconclusive, Some(17)));
        assert_eq!(below.against, Some((Side::Below, 1.0)));
        // a decided claim needs no more examples
        assert_eq!(decide(0.7, 0.6, 0.8, Side::Below, 1.0, 0.05, 40).n_needed, None);
    }

    /// The pooled claims' tasks are those above chance at the final stage, by their acc row: not
    /// a task above chance over the whole run only, not one above chance by acc_norm only.
    #[test]
    fn the_headline_tasks_are_above_chance_at_the_final_stage() {
        let mut tm = hand_rows();
        tm.push(task("d", "all", true));
        tm.push(task("d", "final", false));
        tm.push(task("e", "final", true));
        tm.push(TaskMetrics { metric: "acc_norm".into(), ..task("f", "final", true) });
        assert_eq!(headline_tasks(&tm), ["a", "b", "e"]);
    }

    /// A pooled estimate needs every value and every standard error finite.
    #[test]
    fn pooling_refuses_what_is_not_finite() {
        assert!(pool(&[(0.1, 0.05), (0.2, 0.05)]).is_some());
        for bad in [(f64::NAN, 0.05), (f64::INFINITY, 0.05), (0.2, f64::NAN), (0.2, f64::INFINITY)] {
            assert_eq!(pool(&[(0.1, 0.05), bad]), None, "{bad:?}");
        }
    }

    /// An inconclusive claim with one metric on the wrong side needs what that metric needs to
    /// fail, whether the metric on the claimed side needs fewer runs (acc's spread 0.1 against
    /// margin's 0.2) or more (0.2 against 0.1): not the fewest over every metric, not the most;
    /// claims below 0 and, the values negated, above it.
    #[test]
    fn the_seeds_to_decide_follow_the_wrong_side_metric() {
        let i = Verdict::Inconclusive;
        let needed = |v: &[f64]| seeds::runs_needed(v, 0.0, FAMILY_LEVEL, 1000);
        let cases = [([-0.2, -0.1, 0.0], [0.3, -0.1, 0.1]), ([-0.3, -0.1, 0.1], [0.1, 0.0, 0.2])];
        for (side, (acc, margin)) in [Side::Below, Side::Above].into_iter().flat_map(|s| cases.map(|c| (s, c))) {
            let sign = if side == Side::Above { -1.0 } else { 1.0 };
            let (acc, margin) = (acc.map(|v| sign * v), margin.map(|v| sign * v));
            let runs: Vec<Claim> = (0..3)
                .map(|r| {
                    let mut c = run_claim(&[("acc", acc[r], i), ("margin", margin[r], i)]);
                    c.parts.iter_mut().for_each(|p| p.against = Some((side, 0.0)));
                    c
                })
                .collect();
            let r = recipe_claim(&runs.iter().collect::<Vec<_>>(), FAMILY_LEVEL, 1000);
            let RecipeClaim::Combined { parts, verdict, seeds_to_decide } = &r else { panic!("{r:?}") };
            assert_eq!((*verdict, parts[0].verdict, parts[1].verdict), (i, i, i));
            let (a, m) = (needed(&acc).unwrap(), needed(&margin).unwrap());
            assert_ne!(a, m);
            assert_eq!(*seeds_to_decide, Some(m), "{side:?}: acc needs {a}, margin {m}");
        }
    }

    /// Runs are combined only when each has the same metrics against the same thresholds, each
    /// with a finite estimate: a run whose metric differs (same count), whose threshold is
    /// missing or whose estimate is not finite leaves the recipe undecided.
    #[test]
    fn a_recipe_needs_the_same_finite_metrics_in_every_run() {
        let h = Verdict::Holds;
        let first = run_claim(&[("acc", -1.0, h), ("margin", -1.0, h)]);
        let other_metric = run_claim(&[("acc", -1.1, h), ("gold_logprob", -1.1, h)]);
        assert_eq!(recipe_claim(&[&first, &other_metric], FAMILY_LEVEL, 100), RecipeClaim::NotEstimated);
        for bad in [f64::NAN, f64::INFINITY] {
            let mut run = run_claim(&[("acc", -1.1, h), ("margin", -1.1, h)]);
            run.parts[1].estimate = bad;
            assert_eq!(recipe_claim(&[&first, &run], FAMILY_LEVEL, 100), RecipeClaim::NotEstimated, "{bad}");
        }
        let same = run_claim(&[("acc", -1.1, h), ("margin", -1.1, h)]);
        assert!(matches!(recipe_claim(&[&first, &same], FAMILY_LEVEL, 100), RecipeClaim::Combined { .. }));
    }
}
