//! The decisions a team takes from a trail of checkpoints scored on one fixed eval set, each said
//! as a verdict with its evidence (olmo-eval's paired per-item tests and minimum detectable
//! effect; Signal and Noise's averaging of the last checkpoints):
//!
//! - **Is the latest change real?** ([`latest_changes`]) The newest transition, and the final
//!   stage from its first to its last checkpoint: the paired change on the same examples
//!   ([`paired_change`]: exact McNemar for 0/1 scores, the sign-flip test for continuous ones),
//!   its 95% interval, and the smallest change this eval set can detect at 80% power given the
//!   observed discordance (the MDE).
//! - **Which checkpoint to keep?** ([`keep`]) The best final-stage checkpoint, the checkpoints not
//!   distinguishable from it (exact McNemar against the best, Holm's step-down over the
//!   comparisons), and the selection-corrected estimate of the chosen one's score (the best score
//!   minus the split-half selection optimism of [`crate::selection`]); where averaged or ensembled
//!   evaluations exist, each one's last checkpoint against the best single one on the same
//!   examples, and against the smoothing baseline.
//! - **Which window to average?** ([`window`]) For each evaluated k, the final-stage MTV and mean
//!   score against k = 1 (paired intervals from [`crate::compare`]) and whether its remaining
//!   fluctuation is within paired noise (the sign-flip null of its trail); the recommendation is
//!   the smallest such k that costs no mean score, or none, with the evidence beside it.
//!
//! Every decision is on the primary metric (`acc`, or `acc_norm`), in points (100 x accuracy).
//! The interval of a paired change is the Wald interval of a mean of per-example differences
//! (for 0/1 scores: `(c - b) / n` with variance `((b + c) / n - change^2) / n`); the verdict
//! follows the test, so near the boundary an interval that just excludes 0 may still be "within
//! noise" (the exact test is the more conservative).

use ndarray::{s, ArrayView2};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::compare::{DifferenceRow, StabilityRow};
use crate::panel::Panel;
use crate::power::z;
use crate::{nulls, Options, TaskMetrics};
use run::{Method, Variant};

/// Level of every test here.
pub const ALPHA: f64 = 0.05;
/// Power at which the minimum detectable effect is given.
pub const POWER: f64 = 0.8;

/// What a paired test says about a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    WithinNoise,
    RealRise,
    RealDrop,
}

/// A change between two score vectors on the same examples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairedChange {
    pub examples: usize,
    /// mean of `after - before` over the examples
    pub change: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub p_value: f64,
    /// the smallest |change| a two-sided level-[`ALPHA`] test detects with power [`POWER`] at
    /// this discordance: `(z(1 - alpha/2) + z(power)) sqrt(mean(d^2) / n)`
    pub mde: f64,
    /// `exact McNemar` or `sign-flip`
    pub test: &'static str,
    /// 0/1 scores: examples right before and wrong after (b), wrong before and right after (c)
    pub worse: Option<u64>,
    pub better: Option<u64>,
    pub verdict: Verdict,
}

fn is_binary(x: &[f64]) -> bool {
    x.iter().all(|&v| v == 0.0 || v == 1.0)
}

/// The paired change from `before` to `after` (per-example scores of one eval set, same order).
/// 0/1 scores are tested with the exact McNemar test, others with the sign-flip test (`draws`
/// random sign vectors from `seed`).
pub fn paired_change(before: &[f64], after: &[f64], draws: usize, seed: u64) -> PairedChange {
    assert_eq!(before.len(), after.len(), "paired scores of one eval set");
    let n = before.len();
    let d: Vec<f64> = after.iter().zip(before).map(|(a, b)| a - b).collect();
    let nf = n.max(1) as f64;
    let change = d.iter().sum::<f64>() / nf;
    let second = d.iter().map(|x| x * x).sum::<f64>() / nf;
    let se = ((second - change * change).max(0.0) / nf).sqrt();
    let zc = z(1.0 - ALPHA / 2.0);
    let binary = is_binary(before) && is_binary(after);
    let (p_value, test, worse, better) = if binary {
        let b = d.iter().filter(|&&x| x < 0.0).count() as u64;
        let c = d.iter().filter(|&&x| x > 0.0).count() as u64;
        (nulls::mcnemar_exact(b, c), "exact McNemar", Some(b), Some(c))
    } else {
        let v = ndarray::Array2::from_shape_fn((2, n), |(t, i)| if t == 0 { before[i] } else { after[i] });
        let p = nulls::sign_flip_null(v.view(), draws, seed).map_or(1.0, |x| x.p_value);
        (p, "sign-flip", None, None)
    };
    let verdict = if p_value >= ALPHA || change == 0.0 {
        Verdict::WithinNoise
    } else if change > 0.0 {
        Verdict::RealRise
    } else {
        Verdict::RealDrop
    };
    PairedChange {
        examples: n,
        change,
        ci_low: change - zc * se,
        ci_high: change + zc * se,
        p_value,
        mde: (zc + z(POWER)) * (second / nf).sqrt(),
        test,
        worse,
        better,
        verdict,
    }
}

/// `2.1` for 0.021: a score difference in points.
fn points(x: f64) -> String {
    format!("{:.1}", 100.0 * x)
}

fn signed_points(x: f64) -> String {
    format!("{:+.1}", 100.0 * x)
}

impl PairedChange {
    /// One line: "real drop of 2.1 points [0.8, 3.4] (exact McNemar p = 0.001)", or "within
    /// noise: -0.4 points [-1.3, 0.5], p = 0.41; the smallest detectable change is 1.8 points".
    pub fn sentence(&self) -> String {
        let p = format_p(self.p_value);
        match self.verdict {
            Verdict::RealDrop => format!(
                "real drop of {} points [{}, {}] ({} p {p})",
                points(-self.change),
                points(-self.ci_high),
                points(-self.ci_low),
                self.test
            ),
            Verdict::RealRise => format!(
                "real rise of {} points [{}, {}] ({} p {p})",
                points(self.change),
                points(self.ci_low),
                points(self.ci_high),
                self.test
            ),
            Verdict::WithinNoise if self.worse.zip(self.better).is_some_and(|(b, c)| b + c == 0) => {
                "within noise: no example changed".into()
            }
            Verdict::WithinNoise => format!(
                "within noise: {} points [{}, {}], p {p}; detectable at 80% power: {} points",
                signed_points(self.change),
                signed_points(self.ci_low),
                signed_points(self.ci_high),
                points(self.mde)
            ),
        }
    }
}

impl PairedChange {
    /// A few words: "real drop: 2.1 [0.8, 3.4]", "within noise (MDE 1.8)".
    pub fn headline(&self) -> String {
        match self.verdict {
            Verdict::RealDrop | Verdict::RealRise => format!(
                "real {}: {} [{}, {}] points",
                if self.verdict == Verdict::RealDrop { "drop" } else { "rise" },
                signed_points(self.change),
                signed_points(self.ci_low),
                signed_points(self.ci_high)
            ),
            Verdict::WithinNoise => format!(
                "within noise: {} [{}, {}]; detectable {}",
                signed_points(self.change),
                signed_points(self.ci_low),
                signed_points(self.ci_high),
                points(self.mde)
            ),
        }
    }
}

/// `= 0.041`, `< 0.001`.
pub fn format_p(p: f64) -> String {
    if p < 0.001 {
        "< 0.001".into()
    } else {
        format!("= {p:.3}")
    }
}

/// One row of `decisions.csv`: a decision about one task, its verdict in words and its numbers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DecisionRow {
    pub task: String,
    /// `latest_change`, `final_stage_change`, `keep`, `window`
    pub decision: String,
    pub metric: String,
    pub from_step: Option<u64>,
    pub to_step: Option<u64>,
    /// the change (latest, final stage), the chosen checkpoint's selection-corrected score (keep),
    /// or the recommended window's MTV minus single checkpoints' (window)
    pub estimate: Option<f64>,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    pub p_value: Option<f64>,
    pub mde: Option<f64>,
    /// `within_noise`, `real_rise`, `real_drop` (changes)
    pub verdict: Option<Verdict>,
    /// the checkpoint or window chosen: `step 4000`, `average k=4`, `none`
    pub choice: Option<String>,
    /// the decision in a few words (the report's summary table)
    pub headline: String,
    /// the decision in one line, with its evidence
    pub summary: String,
}

/// The change of a task's trail at its newest transition and over its final stage.
#[derive(Debug, Clone, PartialEq)]
pub struct LatestChange {
    pub task: String,
    pub metric: String,
    /// `latest` (the newest transition) or `final stage` (its first to its last checkpoint)
    pub span: &'static str,
    pub from_step: u64,
    pub to_step: u64,
    pub change: PairedChange,
}

/// The newest transition and the final stage's change of one task (primary metric).
pub fn latest_changes(p: &Panel, opts: &Options) -> Vec<LatestChange> {
    let metric = opts.primary();
    let Some(v) = p.values(metric) else { return vec![] };
    let t = p.steps.len();
    if t < 2 {
        return vec![];
    }
    let fin = crate::windows(&p.steps, opts)[1].1.clone();
    let row = |i: usize| v.row(i).to_vec();
    let mut out = vec![];
    for (span, a) in [("latest", t - 2), ("final stage", fin.start)] {
        if span == "final stage" && a == t - 2 {
            continue; // the same comparison as the latest one
        }
        let seed = crate::seed_for(opts.seed, &p.task, &format!("decide/{span}"));
        out.push(LatestChange {
            task: p.task.clone(),
            metric: metric.name().into(),
            span,
            from_step: p.steps[a],
            to_step: p.steps[t - 1],
            change: paired_change(&row(a), &row(t - 1), opts.noise_sims, seed),
        });
    }
    out
}

/// Holm's step-down at level `alpha`: which hypotheses are rejected (same order as `p`).
pub fn holm(p: &[f64], alpha: f64) -> Vec<bool> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut rejected = vec![false; m];
    for (rank, &i) in order.iter().enumerate() {
        if p[i] <= alpha / (m - rank) as f64 {
            rejected[i] = true;
        } else {
            break;
        }
    }
    rejected
}

/// A remedy's last checkpoint against the best single checkpoint (same examples) and against the
/// smoothing baseline of its window.
#[derive(Debug, Clone, PartialEq)]
pub struct RemedyVsBest {
    pub variant: Variant,
    pub step: u64,
    pub score: f64,
    /// remedy minus the best single checkpoint, paired on the examples
    pub vs_best: PairedChange,
    /// remedy minus the smoothing baseline of the same k: difference of the mean score over the
    /// compared steps with its paired bootstrap interval (`analysis compare`), where it exists
    pub vs_smoothing: Option<(f64, f64, f64)>,
}

/// Which final-stage checkpoint to keep, and how sure that choice is.
#[derive(Debug, Clone, PartialEq)]
pub struct Keep {
    pub task: String,
    pub metric: String,
    pub window_steps: Vec<u64>,
    pub best_step: u64,
    pub best_score: f64,
    /// the final-stage checkpoints whose score is not distinguishable from the best one's
    /// (exact McNemar against the best, Holm at [`ALPHA`]), the best included, in step order
    pub indistinguishable: Vec<u64>,
    /// the best score minus the split-half selection optimism, with its interval
    pub corrected: Option<(f64, f64, f64)>,
    pub remedies: Vec<RemedyVsBest>,
}

/// The checkpoint to keep among a task's final-stage checkpoints. `tm` is the task's final-window
/// row of the primary metric (its selection optimism); `remedies` are the panels of averaged or
/// ensembled trails (restricted to the steps they share with the single ones) with the compare
/// differences, to set the remedies against the best single checkpoint.
pub fn keep(
    p: &Panel,
    tm: Option<&TaskMetrics>,
    remedies: &[(Variant, &Panel)],
    diffs: &[DifferenceRow],
    opts: &Options,
) -> Option<Keep> {
    let metric = opts.primary();
    let v = p.values(metric)?;
    let w = crate::windows(&p.steps, opts)[1].1.clone();
    let scores: Vec<f64> = (w.clone()).map(|t| v.row(t).mean().unwrap_or(f64::NAN)).collect();
    let best = w.start + records::argmax(&scores);
    let others: Vec<usize> = w.clone().filter(|&t| t != best).collect();
    let p_values: Vec<f64> = others
        .iter()
        .map(|&t| {
            let seed = crate::seed_for(opts.seed, &p.task, &format!("decide/keep/{t}"));
            paired_change(&v.row(best).to_vec(), &v.row(t).to_vec(), opts.noise_sims, seed).p_value
        })
        .collect();
    let rejected = holm(&p_values, ALPHA);
    let mut indistinguishable: Vec<u64> =
        others.iter().zip(&rejected).filter(|(_, &r)| !r).map(|(&t, _)| p.steps[t]).collect();
    indistinguishable.push(p.steps[best]);
    indistinguishable.sort_unstable();
    let best_score = scores[best - w.start];
    let corrected = tm.and_then(|tm| {
        let (o, lo, hi) = (tm.selection_optimism?, tm.selection_optimism_ci_low?, tm.selection_optimism_ci_high?);
        Some((best_score - o, best_score - hi, best_score - lo))
    });
    let best_row = v.row(best).to_vec();
    let remedies = remedies
        .iter()
        .filter_map(|(variant, rp)| {
            let rv = rp.values(metric)?;
            if rp.ids != p.ids {
                return None;
            }
            let last = rp.steps.len() - 1;
            let seed = crate::seed_for(opts.seed, &p.task, &format!("decide/keep/{variant}"));
            let vs_smoothing = diffs
                .iter()
                .find(|d| {
                    d.task == p.task
                        && d.metric == metric.name()
                        && d.statistic == "mean_score"
                        && d.method == variant.method
                        && d.k == variant.k
                        && d.baseline == Method::Smoothing
                        && d.baseline_k == variant.k
                })
                .map(|d| (d.estimate, d.ci_low, d.ci_high));
            Some(RemedyVsBest {
                variant: *variant,
                step: rp.steps[last],
                score: rv.row(last).mean().unwrap_or(f64::NAN),
                vs_best: paired_change(&best_row, &rv.row(last).to_vec(), opts.noise_sims, seed),
                vs_smoothing,
            })
        })
        .collect();
    Some(Keep {
        task: p.task.clone(),
        metric: metric.name().into(),
        window_steps: p.steps[w].to_vec(),
        best_step: p.steps[best],
        best_score,
        indistinguishable,
        corrected,
        remedies,
    })
}

impl Keep {
    pub fn sentence(&self) -> String {
        let m = self.window_steps.len();
        let mut s = format!(
            "keep step {} ({:.3}); {} of the {m} final-stage checkpoints are indistinguishable from it",
            self.best_step,
            self.best_score,
            self.indistinguishable.len()
        );
        if let Some((e, lo, hi)) = self.corrected {
            s += &format!("; selection-corrected score {e:.3} [{lo:.3}, {hi:.3}]");
        }
        for r in &self.remedies {
            s += &format!("; {} at step {} vs the best: {}", r.variant, r.step, remedy_words(&r.vs_best));
            if let Some((e, lo, hi)) = r.vs_smoothing {
                s += &format!(", {} [{}, {}] vs smoothing", signed_points(e), signed_points(lo), signed_points(hi));
            }
        }
        s
    }
}

fn remedy_words(c: &PairedChange) -> String {
    format!(
        "{} [{}, {}] points{}",
        signed_points(c.change),
        signed_points(c.ci_low),
        signed_points(c.ci_high),
        if c.verdict == Verdict::WithinNoise { " (within noise)" } else { " (real)" }
    )
}

/// One evaluated window of one method, against single checkpoints over the compared steps.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowOption {
    pub variant: Variant,
    pub mtv: f64,
    pub mtv_ci: (f64, f64),
    /// MTV minus the single checkpoints' MTV, with its paired interval
    pub mtv_vs_single: Option<(f64, f64, f64)>,
    /// mean score minus the single checkpoints' mean score, with its paired interval
    pub mean_vs_single: Option<(f64, f64, f64)>,
    /// p-value of the paired sign-flip null of this trail (is what remains of its fluctuation noise?)
    pub null_p: Option<f64>,
}

/// The window the data supports for one method, with the evidence for every k evaluated.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowAdvice {
    pub task: String,
    pub metric: String,
    pub method: Method,
    pub single_mtv: f64,
    pub single_null_p: Option<f64>,
    pub options: Vec<WindowOption>,
    /// the recommended k (1: single checkpoints already move within noise), or None
    pub recommended: Option<usize>,
    pub reason: String,
}

/// The window to average (and, where ensembles were evaluated, to ensemble) for every task of a
/// comparison: `rows`, `diffs` and `null_p` (per task and variant, the sign-flip null's p-value
/// of its trail on the compared steps) from [`crate::compare::compare_full`].
pub fn window(
    rows: &[StabilityRow],
    diffs: &[DifferenceRow],
    null_p: &BTreeMap<(String, Variant), f64>,
    metric: &str,
) -> Vec<WindowAdvice> {
    let mut out = vec![];
    let tasks: std::collections::BTreeSet<&str> = rows.iter().map(|r| r.task.as_str()).collect();
    for task in tasks {
        let of = |m: Method| -> Vec<&StabilityRow> {
            rows.iter().filter(|r| r.task == task && r.metric == metric && r.method == m).collect()
        };
        let Some(single) = of(Method::Single).into_iter().next() else { continue };
        let single_null_p = null_p.get(&(task.to_string(), Variant::SINGLE)).copied();
        for method in [Method::Average, Method::EnsembleMean] {
            let diff = |k: usize, stat: &str| {
                diffs
                    .iter()
                    .find(|d| {
                        d.task == task
                            && d.metric == metric
                            && d.statistic == stat
                            && d.method == method
                            && d.k == k
                            && d.baseline == Method::Single
                    })
                    .map(|d| (d.estimate, d.ci_low, d.ci_high))
            };
            let options: Vec<WindowOption> = of(method)
                .into_iter()
                .filter(|r| r.k > 1)
                .map(|r| WindowOption {
                    variant: Variant::new(method, r.k),
                    mtv: r.mtv,
                    mtv_ci: (r.mtv_ci_low.unwrap_or(f64::NAN), r.mtv_ci_high.unwrap_or(f64::NAN)),
                    mtv_vs_single: diff(r.k, "mtv"),
                    mean_vs_single: diff(r.k, "mean_score"),
                    null_p: null_p.get(&(task.to_string(), Variant::new(method, r.k))).copied(),
                })
                .collect();
            if options.is_empty() {
                continue;
            }
            let (recommended, reason) = recommend(single.mtv, single_null_p, &options);
            out.push(WindowAdvice {
                task: task.to_string(),
                metric: metric.to_string(),
                method,
                single_mtv: single.mtv,
                single_null_p,
                options,
                recommended,
                reason,
            });
        }
    }
    out
}

/// The smallest k whose trail moves within paired noise and whose mean score is not lower than
/// the single checkpoints' (its interval reaches 0 or above), with the reason in words.
fn recommend(single_mtv: f64, single_null_p: Option<f64>, options: &[WindowOption]) -> (Option<usize>, String) {
    if let Some(p) = single_null_p.filter(|&p| p >= ALPHA) {
        return (
            Some(1),
            format!(
                "k = 1: the single checkpoints already move within paired noise (MTV {single_mtv:.4}, null p {}); \
                 averaging adds no stability this eval set can see",
                format_p(p)
            ),
        );
    }
    let fine =
        |o: &WindowOption| o.null_p.is_some_and(|p| p >= ALPHA) && o.mean_vs_single.is_none_or(|(_, _, hi)| hi >= 0.0);
    let mut sorted: Vec<&WindowOption> = options.iter().collect();
    sorted.sort_by_key(|o| o.variant.k);
    match sorted.iter().find(|o| fine(o)) {
        Some(o) => {
            let mut s = format!(
                "k = {}: its trail moves within paired noise (MTV {:.4} vs {single_mtv:.4} single, null p {})",
                o.variant.k,
                o.mtv,
                format_p(o.null_p.unwrap_or(f64::NAN))
            );
            if let Some((e, lo, hi)) = o.mean_vs_single {
                s += &format!(
                    " at a mean score of {} points [{}, {}] vs single",
                    signed_points(e),
                    signed_points(lo),
                    signed_points(hi)
                );
            }
            (Some(o.variant.k), s)
        }
        None => {
            let ks: Vec<String> = sorted.iter().map(|o| o.variant.k.to_string()).collect();
            let best = sorted
                .iter()
                .filter_map(|o| o.null_p.map(|p| (p, o.variant.k)))
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map_or(String::new(), |(p, k)| format!(" (largest null p {} at k = {k})", format_p(p)));
            (
                None,
                format!(
                    "none: no window evaluated (k = {}) brings the fluctuation within paired noise without a loss of mean score{best}",
                    ks.join(", ")
                ),
            )
        }
    }
}

/// Every decision of one analysis.
#[derive(Debug, Clone, Default)]
pub struct Decisions {
    pub latest: Vec<LatestChange>,
    pub keep: Vec<Keep>,
    pub window: Vec<WindowAdvice>,
    /// tasks without per-example data: no paired decision is possible
    pub task_level_only: Vec<String>,
}

/// What the decisions of a run need beyond its single checkpoints: the compared variants.
pub struct Remedies<'a> {
    pub panels: &'a BTreeMap<Variant, BTreeMap<String, Panel>>,
    pub shared_steps: Vec<u64>,
    pub rows: &'a [StabilityRow],
    pub diffs: &'a [DifferenceRow],
    pub null_p: &'a BTreeMap<(String, Variant), f64>,
}

/// The decisions of every task: `panels` the single checkpoints' per-example panels, `tasks` the
/// tasks scored (those without a panel are task-level only), `metrics` the report's rows.
pub fn decide(
    panels: &BTreeMap<String, Panel>,
    tasks: &[String],
    metrics: &[TaskMetrics],
    remedies: Option<&Remedies>,
    opts: &Options,
) -> Decisions {
    let primary = opts.primary().name();
    let mut d = Decisions::default();
    for task in tasks {
        let Some(p) = panels.get(task) else {
            d.task_level_only.push(task.clone());
            continue;
        };
        d.latest.extend(latest_changes(p, opts));
        let tm = metrics.iter().find(|m| &m.task == task && m.window == "final" && m.metric == primary);
        let restricted: Vec<(Variant, Panel)> = remedies
            .map(|r| {
                r.panels
                    .iter()
                    .filter(|(v, _)| v.method != Method::Single)
                    .filter_map(|(v, ps)| Some((*v, ps.get(task)?.restrict(&r.shared_steps).ok()?)))
                    .collect()
            })
            .unwrap_or_default();
        let refs: Vec<(Variant, &Panel)> = restricted.iter().map(|(v, p)| (*v, p)).collect();
        if let Some(k) = keep(p, tm, &refs, remedies.map_or(&[], |r| r.diffs), opts) {
            d.keep.push(k);
        }
    }
    if let Some(r) = remedies {
        d.window = window(r.rows, r.diffs, r.null_p, primary).into_iter().filter(|w| tasks.contains(&w.task)).collect();
    }
    d
}

impl Decisions {
    /// The rows of `decisions.csv`.
    pub fn rows(&self) -> Vec<DecisionRow> {
        let mut out = vec![];
        for l in &self.latest {
            let c = &l.change;
            out.push(DecisionRow {
                task: l.task.clone(),
                decision: if l.span == "latest" { "latest_change" } else { "final_stage_change" }.into(),
                metric: l.metric.clone(),
                from_step: Some(l.from_step),
                to_step: Some(l.to_step),
                estimate: Some(c.change),
                ci_low: Some(c.ci_low),
                ci_high: Some(c.ci_high),
                p_value: Some(c.p_value),
                mde: Some(c.mde),
                verdict: Some(c.verdict),
                choice: None,
                headline: c.headline(),
                summary: format!("step {} -> {}: {}", l.from_step, l.to_step, c.sentence()),
            });
        }
        for k in &self.keep {
            out.push(DecisionRow {
                task: k.task.clone(),
                decision: "keep".into(),
                metric: k.metric.clone(),
                from_step: k.window_steps.first().copied(),
                to_step: k.window_steps.last().copied(),
                estimate: k.corrected.map(|c| c.0),
                ci_low: k.corrected.map(|c| c.1),
                ci_high: k.corrected.map(|c| c.2),
                choice: Some(format!("step {}", k.best_step)),
                headline: format!(
                    "step {} ({:.3}); {} of {} tied{}",
                    k.best_step,
                    k.best_score,
                    k.indistinguishable.len(),
                    k.window_steps.len(),
                    k.corrected.map_or(String::new(), |(e, lo, hi)| format!("; corrected {e:.3} [{lo:.3}, {hi:.3}]"))
                ),
                summary: k.sentence(),
                ..Default::default()
            });
        }
        for w in &self.window {
            let chosen = w.recommended.and_then(|k| w.options.iter().find(|o| o.variant.k == k));
            out.push(DecisionRow {
                task: w.task.clone(),
                decision: "window".into(),
                metric: w.metric.clone(),
                estimate: chosen.and_then(|o| o.mtv_vs_single.map(|x| x.0)),
                ci_low: chosen.and_then(|o| o.mtv_vs_single.map(|x| x.1)),
                ci_high: chosen.and_then(|o| o.mtv_vs_single.map(|x| x.2)),
                p_value: chosen.and_then(|o| o.null_p).or(w.single_null_p.filter(|_| w.recommended == Some(1))),
                choice: Some(match w.recommended {
                    Some(1) => Method::Single.name().into(),
                    Some(k) => Variant::new(w.method, k).to_string(),
                    None => "none".into(),
                }),
                headline: format!(
                    "{}: {}",
                    w.method,
                    match w.recommended {
                        Some(1) => "not needed (single checkpoints within noise)".to_string(),
                        Some(k) => format!("k = {k}"),
                        None => "none of the evaluated k".to_string(),
                    }
                ),
                summary: format!("{}: {}", w.method, w.reason),
                ..Default::default()
            });
        }
        for t in &self.task_level_only {
            out.push(DecisionRow {
                task: t.clone(),
                decision: "latest_change".into(),
                headline: "not decidable without per-example data".into(),
                summary: "not decidable: no per-example data (lm_eval --log_samples keeps it)".into(),
                ..Default::default()
            });
        }
        out.sort_by(|a, b| (&a.task, order(&a.decision)).cmp(&(&b.task, order(&b.decision))));
        out
    }

    /// The decisions as text, one block per task.
    pub fn render(&self) -> String {
        let mut s = String::from("decisions (paired on the eval set's examples; points = 100 x accuracy):\n");
        let rows = self.rows();
        let mut last = "";
        for r in &rows {
            if r.task != last {
                s += &format!("{}\n", r.task);
                last = &r.task;
            }
            let what = match r.decision.as_str() {
                "latest_change" => "latest change",
                "final_stage_change" => "final stage ",
                "keep" => "keep        ",
                _ => "window      ",
            };
            s += &format!("  {what}  {}\n", r.summary);
        }
        s
    }
}

fn order(decision: &str) -> usize {
    ["latest_change", "final_stage_change", "keep", "window"].iter().position(|d| *d == decision).unwrap_or(9)
}

/// The paired-noise band of a trail, for the plots: at each checkpoint t >= 1, the scores a change
/// from checkpoint t - 1 must leave to be significant at [`ALPHA`] (normal approximation of the
/// paired test at the observed discordance: `s_{t-1} +- z sqrt(mean(d^2) / n)`); None at t = 0.
pub fn noise_band(v: ArrayView2<f64>) -> Vec<Option<(f64, f64)>> {
    let (t_len, n) = v.dim();
    let zc = z(1.0 - ALPHA / 2.0);
    (0..t_len)
        .map(|t| {
            if t == 0 || n == 0 {
                return None;
            }
            let prev = v.slice(s![t - 1, ..]);
            let cur = v.slice(s![t, ..]);
            let second = cur.iter().zip(prev.iter()).map(|(a, b)| (a - b) * (a - b)).sum::<f64>() / n as f64;
            let h = zc * (second / n as f64).sqrt();
            let s0 = prev.mean().unwrap_or(f64::NAN);
            Some((s0 - h, s0 + h))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn bits(x: &[bool]) -> Vec<f64> {
        x.iter().map(|&b| f64::from(u8::from(b))).collect()
    }

    /// Hand-worked: 10 examples, 3 right -> wrong, 1 wrong -> right.
    #[test]
    fn a_hand_worked_mcnemar_change() {
        let before = bits(&[true, true, true, true, false, false, true, false, true, false]);
        let after = bits(&[false, false, false, true, true, false, true, false, true, false]);
        let c = paired_change(&before, &after, 100, 1);
        assert_eq!((c.worse, c.better, c.test), (Some(3), Some(1), "exact McNemar"));
        assert!((c.change + 0.2).abs() < 1e-12);
        // P(X <= 1), X ~ Bin(4, 1/2) = 5/16; two-sided 10/16
        assert!((c.p_value - 0.625).abs() < 1e-12, "{}", c.p_value);
        // variance of d: (b + c) / n - change^2 = 0.4 - 0.04 = 0.36; se = 0.6 / sqrt(10)
        let se = 0.6 / 10f64.sqrt();
        assert!((c.ci_low - (-0.2 - 1.959964 * se)).abs() < 1e-5);
        // MDE: (1.96 + 0.8416) sqrt(0.4 / 10)
        assert!((c.mde - 2.801585 * 0.2).abs() < 1e-5, "{}", c.mde);
        assert_eq!(c.verdict, Verdict::WithinNoise);
        assert!(c.sentence().starts_with("within noise: -20.0 points"), "{}", c.sentence());
    }

    #[test]
    fn no_change_at_all_is_within_noise() {
        let x = bits(&[true, false, true]);
        let c = paired_change(&x, &x, 100, 1);
        assert_eq!((c.change, c.p_value, c.verdict), (0.0, 1.0, Verdict::WithinNoise));
        assert_eq!(c.sentence(), "within noise: no example changed");
    }

    /// A real drop of 3 points on n = 2,000 (60 examples right -> wrong beyond 40 of churn each
    /// way) is found, with the truth inside its interval.
    #[test]
    fn a_real_drop_of_three_points_on_2000_examples_is_found() {
        let n = 2000;
        let before: Vec<f64> = (0..n).map(|i| f64::from(u8::from(i % 2 == 0))).collect();
        let mut after = before.clone();
        let right: Vec<usize> = (0..n).filter(|i| i % 2 == 0).collect();
        let wrong: Vec<usize> = (0..n).filter(|i| i % 2 == 1).collect();
        for &i in &right[..100] {
            after[i] = 0.0; // 100 right -> wrong
        }
        for &i in &wrong[..40] {
            after[i] = 1.0; // 40 wrong -> right
        }
        let c = paired_change(&before, &after, 100, 1);
        assert!((c.change + 0.03).abs() < 1e-12);
        assert_eq!(c.verdict, Verdict::RealDrop, "{c:?}");
        assert!(c.ci_low < -0.03 && c.ci_high > -0.03 && c.ci_high < 0.0);
        assert!(c.sentence().starts_with("real drop of 3.0 points ["), "{}", c.sentence());
    }

    /// Simulated trails with per-example churn around fixed probabilities (population accuracy
    /// constant): the newest transition is called within noise in >= 90% of 200 seeded trails;
    /// with a drop of 3 points on n = 2,000 (moderate churn) it is found in >= 80%.
    #[test]
    fn pure_churn_is_within_noise_and_a_drop_is_found_in_simulations() {
        let n = 2000;
        let (mut noise, mut found) = (0, 0);
        for sim in 0..200u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(sim);
            // an example's probability of being right: mostly settled, some undecided
            let p: Vec<f64> =
                (0..n).map(|_| if rng.gen_bool(0.2) { 0.5 } else { f64::from(rng.gen_bool(0.4)) }).collect();
            let draw = |rng: &mut ChaCha8Rng, shift: f64| -> Vec<f64> {
                p.iter().map(|&q| f64::from(u8::from(rng.gen_bool((q + shift).clamp(0.0, 1.0))))).collect()
            };
            let before = draw(&mut rng, 0.0);
            let same = draw(&mut rng, 0.0);
            if paired_change(&before, &same, 100, sim).verdict == Verdict::WithinNoise {
                noise += 1;
            }
            // a drop: every undecided example loses 0.15 (0.2 x 0.15 = 3 points)
            let after: Vec<f64> =
                p.iter().map(|&q| f64::from(u8::from(rng.gen_bool(if q == 0.5 { 0.35 } else { q })))).collect();
            if paired_change(&before, &after, 100, sim).verdict == Verdict::RealDrop {
                found += 1;
            }
        }
        assert!(noise >= 180, "pure churn within noise in {noise} of 200");
        assert!(found >= 160, "a 3-point drop found in {found} of 200");
    }

    #[test]
    fn continuous_scores_use_the_sign_flip_test() {
        let before: Vec<f64> = (0..200).map(|i| (i as f64 * 0.37).sin()).collect();
        let after: Vec<f64> = before.iter().map(|x| x + 0.5).collect();
        let c = paired_change(&before, &after, 500, 3);
        assert_eq!((c.test, c.verdict), ("sign-flip", Verdict::RealRise));
        assert!((c.change - 0.5).abs() < 1e-12 && c.p_value < 0.01);
    }

    #[test]
    fn holm_steps_down() {
        // m = 3: 0.01 <= 0.05/3, 0.02 <= 0.05/2, 0.04 <= 0.05/1: all rejected
        assert_eq!(holm(&[0.04, 0.01, 0.02], 0.05), vec![true, true, true]);
        // 0.03 > 0.05/2 stops the procedure: only the smallest is rejected
        assert_eq!(holm(&[0.01, 0.03, 0.04], 0.05), vec![true, false, false]);
        assert_eq!(holm(&[0.2, 0.3], 0.05), vec![false, false]);
        assert!(holm(&[], 0.05).is_empty());
    }

    fn option(k: usize, null_p: f64, mean_hi: f64) -> WindowOption {
        WindowOption {
            variant: Variant::new(Method::Average, k),
            mtv: 0.01 / k as f64,
            mtv_ci: (0.0, 0.02),
            mtv_vs_single: Some((-0.005, -0.008, -0.002)),
            mean_vs_single: Some((mean_hi - 0.01, mean_hi - 0.02, mean_hi)),
            null_p: Some(null_p),
        }
    }

    #[test]
    fn the_window_recommended_is_the_smallest_within_noise_at_no_loss() {
        let opts = [option(2, 0.01, 0.01), option(4, 0.2, -0.001), option(8, 0.3, 0.01), option(16, 0.5, 0.02)];
        // k = 4 is within noise but loses mean score; k = 8 is the answer
        let (k, why) = recommend(0.02, Some(0.001), &opts);
        assert_eq!(k, Some(8), "{why}");
        assert!(why.starts_with("k = 8: its trail moves within paired noise"), "{why}");
        // single checkpoints already within noise
        assert_eq!(recommend(0.02, Some(0.4), &opts).0, Some(1));
        // nothing qualifies
        let (k, why) = recommend(0.02, Some(0.001), &opts[..2]);
        assert_eq!(k, None);
        assert!(why.contains("k = 2, 4") && why.contains("largest null p = 0.200 at k = 4"), "{why}");
    }

    /// A panel of one task from a correctness matrix [checkpoint][example].
    fn panel(correct: &[Vec<bool>], steps: &[u64]) -> Panel {
        let rows: Vec<records::ExampleRecord> = correct
            .iter()
            .enumerate()
            .flat_map(|(t, row)| {
                row.iter().enumerate().map(move |(e, &ok)| records::ExampleRecord {
                    step: steps[t],
                    task: "t".into(),
                    example_id: format!("t/{e:04}"),
                    gold: 0,
                    predicted: u32::from(!ok),
                    predicted_norm: u32::from(!ok),
                    correct: ok,
                    correct_norm: ok,
                    logliks: if ok { vec![-1.0, -2.0] } else { vec![-2.0, -1.0] },
                    lengths_chars: vec![1, 1],
                    lengths_tokens: vec![1, 1],
                    lengths_bytes: vec![2, 2],
                    gold_is_greedy: false,
                    output: u32::from(!ok).to_string(),
                    item_hash: String::new(),
                    targets: Vec::new(),
                    score_names: Vec::new(),
                    score_values: Vec::new(),
                })
            })
            .collect();
        Panel::build("t", &rows.iter().collect::<Vec<_>>()).unwrap()
    }

    /// Five final-stage checkpoints on 1,000 examples: four within 1 point of each other (a few
    /// examples swapped), one 10 points lower. The best is kept, the four are indistinguishable
    /// from it, the low one is not (Holm over the four paired tests).
    #[test]
    fn the_checkpoint_to_keep_and_its_ties_on_a_constructed_trail() {
        let n = 1000;
        let base: Vec<bool> = (0..n).map(|e| e % 2 == 0).collect();
        // extra examples right or wrong, then churn of its own at each checkpoint `t`: 20 right
        // examples turned wrong and 20 wrong ones turned right (no net change)
        let with = |extra_right: usize, extra_wrong: usize, t: usize| -> Vec<bool> {
            let mut r = base.clone();
            for e in (1..n).step_by(2).take(extra_right) {
                r[e] = true;
            }
            for e in (0..n).step_by(2).take(extra_wrong) {
                r[e] = false;
            }
            for e in (0..n).step_by(2).skip(200 + 20 * t).take(20) {
                r[e] = false;
            }
            for e in (1..n).step_by(2).skip(200 + 20 * t).take(20) {
                r[e] = true;
            }
            r
        };
        // scores 0.505, 0.510, 0.500, 0.400, 0.505: the 1-point gaps are within the churn, the
        // 11-point one is not
        let m = vec![with(5, 0, 0), with(10, 0, 1), with(0, 0, 2), with(0, 100, 3), with(8, 3, 4)];
        let steps = [10, 20, 30, 40, 50];
        let p = panel(&m, &steps);
        let opts = Options { final_fraction: 1.0, noise_sims: 200, ..Default::default() };
        let k = keep(&p, None, &[], &[], &opts).unwrap();
        assert_eq!((k.best_step, k.best_score), (20, 0.51));
        assert_eq!(k.indistinguishable, vec![10, 20, 30, 50]);
        assert_eq!(k.window_steps, steps);
        assert!(
            k.sentence().starts_with("keep step 20 (0.510); 4 of the 5 final-stage checkpoints"),
            "{}",
            k.sentence()
        );
        // a remedy scored on the same examples is set against the best one
        let remedy = panel(&[with(12, 0, 5), with(30, 0, 1)], &[40, 50]);
        let k = keep(&p, None, &[(Variant::new(Method::Average, 2), &remedy)], &[], &opts).unwrap();
        let r = &k.remedies[0];
        assert_eq!((r.step, r.score), (50, 0.53));
        assert!((r.vs_best.change - 0.02).abs() < 1e-12 && r.vs_best.better == Some(20), "{r:?}");
    }

    #[test]
    fn the_noise_band_is_centred_on_the_previous_score() {
        let v = ndarray::array![[1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]];
        let b = noise_band(v.view());
        assert_eq!(b[0], None);
        let (lo, hi) = b[1].unwrap();
        // previous score 0.5; mean(d^2) = 0.5; h = 1.96 sqrt(0.5 / 4)
        let h = 1.959964 * (0.125f64).sqrt();
        assert!((lo - (0.5 - h)).abs() < 1e-5 && (hi - (0.5 + h)).abs() < 1e-5);
    }

    /// Right on examples `lo..hi` of 20, wrong on the others.
    fn right(lo: usize, hi: usize) -> Vec<bool> {
        (0..20).map(|e| (lo..hi).contains(&e)).collect()
    }

    /// 20 examples, steps 10-50, scores 0.25, 0.35, 0.5, 0.6, 0.2; the final stage (the last 3
    /// checkpoints at the default 20%) is steps 30-50. Latest change 40 -> 50: 8 examples right ->
    /// wrong, none back (b = 8, c = 0); final stage 30 -> 50: b = 8, c = 2.
    fn trail() -> Panel {
        panel(&[right(0, 5), right(0, 7), right(0, 10), right(0, 12), right(8, 12)], &[10, 20, 30, 40, 50])
    }

    fn difference(
        what: (&str, &str, &str),
        method: Method,
        k: usize,
        baseline: (Method, usize),
        e: (f64, f64, f64),
    ) -> DifferenceRow {
        DifferenceRow {
            task: what.0.into(),
            tasks: 1,
            metric: what.1.into(),
            statistic: what.2.into(),
            method,
            k,
            baseline: baseline.0,
            baseline_k: baseline.1,
            estimate: e.0,
            se: 0.01,
            ci_low: e.1,
            ci_high: e.2,
            ci_low_family: e.1,
            ci_high_family: e.2,
            examples: 20,
        }
    }

    /// The changes, the worked numbers of every verdict's words (exact McNemar, Wald interval;
    /// computed by hand: z = 1.959964, z(0.8) = 0.841621).
    #[test]
    fn the_words_of_each_verdict_by_hand() {
        let (a, b) = (bits(&right(0, 12)), bits(&right(8, 12)));
        // b = 8, c = 0: change -0.4, se sqrt((0.4 - 0.16) / 20), p = 2 / 2^8
        let drop = paired_change(&a, &b, 10, 1);
        assert_eq!(drop.sentence(), "real drop of 40.0 points [18.5, 61.5] (exact McNemar p = 0.008)");
        assert_eq!(drop.headline(), "real drop: -40.0 [-61.5, -18.5] points");
        let rise = paired_change(&b, &a, 10, 1);
        assert_eq!(rise.verdict, Verdict::RealRise);
        assert_eq!(rise.sentence(), "real rise of 40.0 points [18.5, 61.5] (exact McNemar p = 0.008)");
        assert_eq!(rise.headline(), "real rise: +40.0 [+18.5, +61.5] points");
        // b = 8, c = 2: p = 2 x 56 / 1024; the interval excludes 0, the exact test does not
        let stage = paired_change(&bits(&right(0, 10)), &b, 10, 1);
        assert_eq!(
            stage.sentence(),
            "within noise: -30.0 points [-58.1, -1.9], p = 0.109; detectable at 80% power: 44.3 points"
        );
        assert_eq!(stage.headline(), "within noise: -30.0 [-58.1, -1.9]; detectable 44.3");
        // examples changed both ways (b = c = 2), or one way only (b = 2, c = 0): not "no example"
        let both = paired_change(&bits(&right(0, 10)), &bits(&right(2, 12)), 10, 1);
        assert_eq!((both.worse, both.better, both.change), (Some(2), Some(2), 0.0));
        assert_eq!(
            both.sentence(),
            "within noise: +0.0 points [-19.6, +19.6], p = 1.000; detectable at 80% power: 28.0 points"
        );
        let one_way = paired_change(&bits(&right(0, 12)), &bits(&right(0, 10)), 10, 1);
        assert_eq!(
            one_way.sentence(),
            "within noise: -10.0 points [-23.1, +3.1], p = 0.500; detectable at 80% power: 19.8 points"
        );
        assert_eq!(
            (format_p(0.000_999), format_p(0.001), format_p(0.0414)),
            ("< 0.001".into(), "= 0.001".into(), "= 0.041".into())
        );
        // no examples: no band at all
        assert_eq!(noise_band(ndarray::Array2::<f64>::zeros((2, 0)).view()), vec![None, None]);
    }

    /// The newest transition and the final stage of a 5-checkpoint trail; a 2-checkpoint trail
    /// has one change only (its final stage is its newest transition), a single checkpoint none.
    #[test]
    fn latest_changes_by_hand() {
        let opts = Options { noise_sims: 10, ..Default::default() };
        let l = latest_changes(&trail(), &opts);
        let spans: Vec<_> =
            l.iter().map(|c| (c.span, c.from_step, c.to_step, c.metric.as_str(), c.task.as_str())).collect();
        assert_eq!(spans, vec![("latest", 40, 50, "acc", "t"), ("final stage", 30, 50, "acc", "t")]);
        assert_eq!((l[0].change.worse, l[0].change.better, l[0].change.verdict), (Some(8), Some(0), Verdict::RealDrop));
        assert_eq!(
            (l[1].change.worse, l[1].change.better, l[1].change.verdict),
            (Some(8), Some(2), Verdict::WithinNoise)
        );
        let norm = Options { use_acc_norm: true, ..opts };
        assert_eq!(latest_changes(&trail(), &norm)[0].metric, "acc_norm");
        let two = panel(&[right(0, 12), right(8, 12)], &[40, 50]);
        let l = latest_changes(&two, &opts);
        assert_eq!(l.iter().map(|c| (c.span, c.from_step)).collect::<Vec<_>>(), vec![("latest", 40)]);
        assert!(latest_changes(&panel(&[right(0, 12)], &[40]), &opts).is_empty());
    }

    /// Every decision of a run with an average of k = 2 and 4 evaluated (and an ensemble whose
    /// examples differ), each looked up among rows that differ from the right one in one field
    /// only, and their rows and text by hand.
    #[test]
    fn the_decisions_of_a_run_by_hand() {
        let avg = |k| Variant::new(Method::Average, k);
        let opts = Options { noise_sims: 10, ..Default::default() };
        let mut panels = BTreeMap::new();
        panels.insert("t".to_string(), trail());
        // the selection optimism: the final window's acc row, beside rows of another window,
        // metric and task
        let tm = |task: &str, window: &str, metric: &str, o: f64| TaskMetrics {
            task: task.into(),
            window: window.into(),
            metric: metric.into(),
            selection_optimism: Some(o),
            selection_optimism_ci_low: Some(o - 0.04),
            selection_optimism_ci_high: Some(o + 0.03),
            ..Default::default()
        };
        let metrics = [
            tm("t", "all", "acc", 0.3),
            tm("t", "final", "acc_norm", 0.3),
            tm("u", "final", "acc", 0.3),
            tm("t", "final", "acc", 0.05),
        ];
        // remedies: the single checkpoints (not a remedy), an average of 2 scored at one more step
        // than the single ones, an ensemble on 19 examples (other examples: left out)
        let mut remedy_panels: BTreeMap<Variant, BTreeMap<String, Panel>> = BTreeMap::new();
        remedy_panels.insert(Variant::SINGLE, [("t".to_string(), trail())].into());
        let averaged = panel(&[right(0, 10), right(0, 12), right(0, 13), right(0, 20)], &[30, 40, 50, 60]);
        remedy_panels.insert(avg(2), [("t".to_string(), averaged)].into());
        let fewer = panel(&[(0..19).map(|e| e < 10).collect(), (0..19).map(|e| e < 10).collect()], &[40, 50]);
        remedy_panels.insert(Variant::new(Method::EnsembleMean, 2), [("t".to_string(), fewer)].into());
        let sm = (Method::Smoothing, 2);
        let single = (Method::Single, 1);
        let near = |e: f64| (e, e - 0.01, e + 0.01);
        let low = (-0.05, -0.08, -0.03);
        let diffs = vec![
            // the keep decision's: average k=2 against smoothing k=2 on the mean score
            difference(("v", "acc", "mean_score"), Method::Average, 2, sm, near(0.1)),
            difference(("t", "acc_norm", "mean_score"), Method::Average, 2, sm, near(0.2)),
            difference(("t", "acc", "mtv"), Method::Average, 2, sm, near(0.3)),
            difference(("t", "acc", "mean_score"), Method::EnsembleMean, 2, sm, near(0.4)),
            difference(("t", "acc", "mean_score"), Method::Average, 3, sm, near(0.5)),
            difference(("t", "acc", "mean_score"), Method::Average, 2, (Method::Single, 2), near(0.6)),
            difference(("t", "acc", "mean_score"), Method::Average, 2, (Method::Smoothing, 3), near(0.7)),
            difference(("t", "acc", "mean_score"), Method::Average, 2, sm, (0.01, -0.02, 0.04)),
            // the window decision's: average k=4 against single checkpoints (mean score below 0)
            difference(("v", "acc", "mean_score"), Method::Average, 4, single, low),
            difference(("t", "acc_norm", "mean_score"), Method::Average, 4, single, low),
            difference(("t", "acc", "flip_rate"), Method::Average, 4, single, low),
            difference(("t", "acc", "mean_score"), Method::EnsembleMean, 4, single, low),
            difference(("t", "acc", "mean_score"), Method::Average, 8, single, low),
            difference(("t", "acc", "mean_score"), Method::Average, 4, sm, low),
            difference(("t", "acc", "mtv"), Method::Average, 4, single, (-0.15, -0.2, -0.1)),
            // no loss of mean score: the interval reaches 0 exactly
            difference(("t", "acc", "mean_score"), Method::Average, 4, single, (-0.01, -0.02, 0.0)),
        ];
        let stability = |task: &str, metric: &str, method: Method, k: usize, mtv: f64| StabilityRow {
            task: task.into(),
            metric: metric.into(),
            method,
            k,
            mtv,
            mtv_ci_low: Some(mtv - 0.02),
            mtv_ci_high: Some(mtv + 0.02),
            ..Default::default()
        };
        let rows = vec![
            stability("t", "acc", Method::Single, 1, 0.2),
            stability("t", "acc", Method::Average, 4, 0.05),
            stability("t", "acc", Method::Average, 1, 0.15),
            stability("t", "acc", Method::Average, 2, 0.1),
            stability("t", "acc_norm", Method::Average, 3, 0.12),
            stability("v", "acc", Method::Single, 1, 0.2),
            stability("v", "acc", Method::Average, 2, 0.1),
        ];
        let null_p: BTreeMap<(String, Variant), f64> = [
            (("t".to_string(), Variant::SINGLE), 0.01),
            (("t".to_string(), avg(1)), 0.9),
            (("t".to_string(), avg(2)), 0.03),
            (("t".to_string(), avg(3)), 0.5),
            (("t".to_string(), avg(4)), 0.2),
            (("v".to_string(), Variant::SINGLE), 0.5),
        ]
        .into();
        let remedies = Remedies {
            panels: &remedy_panels,
            shared_steps: vec![30, 40, 50],
            rows: &rows,
            diffs: &diffs,
            null_p: &null_p,
        };
        let tasks = ["t".to_string(), "u".to_string()];
        let d = decide(&panels, &tasks, &metrics, Some(&remedies), &opts);

        assert_eq!(d.latest, latest_changes(&trail(), &opts));
        assert_eq!(d.task_level_only, vec!["u".to_string()]);
        let [k] = &d.keep[..] else { panic!("{:?}", d.keep) };
        // best: step 40 (0.6); step 30 (b = 2, c = 0: p = 0.5) is tied with it, step 50 (b = 8,
        // c = 0: p = 0.0078 <= 0.05 / 2) is not
        assert_eq!(
            (k.best_step, k.best_score, &k.indistinguishable, &k.window_steps),
            (40, 0.6, &vec![30, 40], &vec![30, 40, 50])
        );
        // 0.6 - optimism 0.05 [0.01, 0.08]
        let (e, lo, hi) = k.corrected.unwrap();
        assert!(
            (e - 0.55).abs() < 1e-12 && (lo - 0.52).abs() < 1e-12 && (hi - 0.59).abs() < 1e-12,
            "{:?}",
            k.corrected
        );
        let [r] = &k.remedies[..] else { panic!("{:?}", k.remedies) };
        // the average's step 50 (the last shared step): 13 right, one more than the best
        assert_eq!(
            (r.variant, r.step, r.score, r.vs_best.better, r.vs_best.worse),
            (avg(2), 50, 0.65, Some(1), Some(0))
        );
        assert_eq!(r.vs_smoothing, Some((0.01, -0.02, 0.04)));
        let [w] = &d.window[..] else { panic!("{:?}", d.window) };
        assert_eq!(
            (w.task.as_str(), w.metric.as_str(), w.method, w.single_mtv, w.single_null_p),
            ("t", "acc", Method::Average, 0.2, Some(0.01))
        );
        let ks: Vec<(usize, f64, Option<f64>)> = w.options.iter().map(|o| (o.variant.k, o.mtv, o.null_p)).collect();
        assert_eq!(ks, vec![(4, 0.05, Some(0.2)), (2, 0.1, Some(0.03))]);
        assert_eq!(w.options[0].mtv_ci, (0.05 - 0.02, 0.05 + 0.02));
        assert_eq!(w.options[0].mtv_vs_single, Some((-0.15, -0.2, -0.1)));
        assert_eq!(w.options[0].mean_vs_single, Some((-0.01, -0.02, 0.0)));
        assert_eq!(w.options[1].mean_vs_single, Some(near(0.6)));
        assert_eq!(w.recommended, Some(4), "{}", w.reason);

        let latest = "step 40 -> 50: real drop of 40.0 points [18.5, 61.5] (exact McNemar p = 0.008)";
        let stage =
            "step 30 -> 50: within noise: -30.0 points [-58.1, -1.9], p = 0.109; detectable at 80% power: 44.3 points";
        let keep = "keep step 40 (0.600); 2 of the 3 final-stage checkpoints are indistinguishable from it; \
                    selection-corrected score 0.550 [0.520, 0.590]; average k=2 at step 50 vs the best: \
                    +5.0 [-4.6, +14.6] points (within noise), +1.0 [-2.0, +4.0] vs smoothing";
        let window =
            "average: k = 4: its trail moves within paired noise (MTV 0.0500 vs 0.2000 single, null p = 0.200) \
                      at a mean score of -1.0 points [-2.0, +0.0] vs single";
        assert_eq!(
            d.render(),
            format!(
                "decisions (paired on the eval set's examples; points = 100 x accuracy):\nt\n  latest change  {latest}\n  \
                 final stage   {stage}\n  keep          {keep}\n  window        {window}\nu\n  latest change  not decidable: \
                 no per-example data (lm_eval --log_samples keeps it)\n"
            )
        );
        let rows = d.rows();
        let c = &d.latest[0].change;
        assert!((c.p_value - 2.0 / 256.0).abs() < 1e-12, "{}", c.p_value);
        let expected_latest = DecisionRow {
            task: "t".into(),
            decision: "latest_change".into(),
            metric: "acc".into(),
            from_step: Some(40),
            to_step: Some(50),
            estimate: Some(-0.4),
            ci_low: Some(c.ci_low),
            ci_high: Some(c.ci_high),
            p_value: Some(c.p_value),
            mde: Some(c.mde),
            verdict: Some(Verdict::RealDrop),
            choice: None,
            headline: "real drop: -40.0 [-61.5, -18.5] points".into(),
            summary: latest.into(),
        };
        assert_eq!(rows[0], expected_latest);
        assert_eq!(
            (rows[1].decision.as_str(), rows[1].from_step, rows[1].verdict),
            ("final_stage_change", Some(30), Some(Verdict::WithinNoise))
        );
        assert_eq!(rows[1].summary, stage);
        let expected_keep = DecisionRow {
            task: "t".into(),
            decision: "keep".into(),
            metric: "acc".into(),
            from_step: Some(30),
            to_step: Some(50),
            estimate: Some(e),
            ci_low: Some(lo),
            ci_high: Some(hi),
            choice: Some("step 40".into()),
            headline: "step 40 (0.600); 2 of 3 tied; corrected 0.550 [0.520, 0.590]".into(),
            summary: keep.into(),
            ..Default::default()
        };
        assert_eq!(rows[2], expected_keep);
        let expected_window = DecisionRow {
            task: "t".into(),
            decision: "window".into(),
            metric: "acc".into(),
            estimate: Some(-0.15),
            ci_low: Some(-0.2),
            ci_high: Some(-0.1),
            p_value: Some(0.2),
            choice: Some("average k=4".into()),
            headline: "average: k = 4".into(),
            summary: window.into(),
            ..Default::default()
        };
        assert_eq!(rows[3], expected_window);
        assert_eq!(
            (rows[4].task.as_str(), rows[4].decision.as_str(), rows[4].headline.as_str()),
            ("u", "latest_change", "not decidable without per-example data")
        );
        assert_eq!(rows.len(), 5);

        // without remedies: no window, and the kept checkpoint is set against nothing
        let d = decide(&panels, &tasks, &metrics, None, &opts);
        assert!(d.window.is_empty() && d.keep[0].remedies.is_empty());
    }

    /// The rows of the other two window outcomes (single checkpoints already within noise; no
    /// window qualifies), and the order of a task's rows whatever the order they were found in.
    #[test]
    fn the_rows_of_every_window_outcome_in_order() {
        let advice = |task: &str, recommended: Option<usize>| WindowAdvice {
            task: task.into(),
            metric: "acc".into(),
            method: Method::EnsembleMean,
            single_mtv: 0.2,
            single_null_p: Some(0.4),
            options: vec![option(2, 0.3, 0.01)],
            recommended,
            reason: "why".into(),
        };
        let l = latest_changes(&trail(), &Options { noise_sims: 10, ..Default::default() });
        // found in the other order: the final stage before the newest transition, the window
        // before the keep decision
        let d = Decisions {
            latest: vec![l[1].clone(), l[0].clone()],
            keep: vec![],
            window: vec![advice("a", Some(1)), advice("b", None)],
            task_level_only: vec![],
        };
        let rows = d.rows();
        let what: Vec<(&str, &str)> = rows.iter().map(|r| (r.task.as_str(), r.decision.as_str())).collect();
        assert_eq!(what, vec![("a", "window"), ("b", "window"), ("t", "latest_change"), ("t", "final_stage_change")]);
        let (a, b) = (&rows[0], &rows[1]);
        assert_eq!(
            (a.choice.as_deref(), a.p_value, a.estimate, a.headline.as_str(), a.summary.as_str()),
            (
                Some("single"),
                Some(0.4),
                None,
                "ensemble: not needed (single checkpoints within noise)",
                "ensemble: why"
            )
        );
        assert_eq!(
            (b.choice.as_deref(), b.p_value, b.estimate, b.headline.as_str()),
            (Some("none"), None, None, "ensemble: none of the evaluated k")
        );
        let mut with_keep = d.clone();
        with_keep.latest.clear();
        with_keep.window = vec![advice("t", None)];
        let k = keep(&trail(), None, &[], &[], &Options { noise_sims: 10, ..Default::default() }).unwrap();
        assert_eq!(k.corrected, None);
        with_keep.keep = vec![k];
        let rows = with_keep.rows();
        assert_eq!(rows.iter().map(|r| r.decision.as_str()).collect::<Vec<_>>(), vec!["keep", "window"]);
        assert_eq!(rows[0].headline, "step 40 (0.600); 2 of 3 tied");
    }

    /// 0/1 scores on one side only (a continuous metric that happens to be 0/1 at a checkpoint):
    /// not McNemar's pairs, the sign-flip test.
    #[test]
    fn scores_binary_on_one_side_only_use_the_sign_flip_test() {
        let before = bits(&right(0, 10));
        let after: Vec<f64> = before.iter().map(|x| x * 0.5 + 0.25).collect();
        for (a, b) in [(&before, &after), (&after, &before)] {
            let c = paired_change(a, b, 100, 1);
            assert_eq!((c.test, c.worse, c.better), ("sign-flip", None, None), "{c:?}");
        }
    }
}
