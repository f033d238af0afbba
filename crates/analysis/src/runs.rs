//! `analysis compare-runs A B [C ...]`: which of two or more training runs (an ablation and its
//! baseline, each a trail of checkpoints) is better on the same benchmark items, and how much
//! that verdict depends on the checkpoint one happens to look at.
//!
//! # What is compared
//! Per task scored (with per-example rows) by every run, on the primary metric (`acc`, or
//! `acc_norm`), in points (100 x accuracy):
//! - **the items**: an item is matched across runs by the identity of its text (the rows'
//!   `item_hash`, [`crate::panel::Panel::hashes`]) where every run has one for it, else by its
//!   example id (tables written before table version 3 carry no hashes). Only the items every run
//!   scored are compared; an example id whose text differs between runs is a different item and
//!   never compared; with fewer than [`MIN_SHARED`] shared items (olmo-eval's minimum) the task is
//!   refused. The output says which identity matched the items (`text hash` when every compared
//!   item was matched by its text, else `example id`) and how many items each run had.
//! - **the final-stage mean** of each run: the mean, over the checkpoints of its final window
//!   ([`crate::windows`]: the last `--final-fraction` of its checkpoints, at least 3, or those from
//!   `--final-from`), of its task score on the shared items. Averaging the final stage rather than
//!   reading the last checkpoint is what Signal and Noise (Heineman et al.) recommend against
//!   checkpoint-to-checkpoint noise.
//! - **the difference** A - B of the final-stage means, with a 95% bootstrap interval over the
//!   shared items ([`crate::bootstrap::interval`]: the union of the bias-corrected and uncorrected intervals).
//! - **who wins the checkpoint pairs** (`a_wins`): the share of pairs (a checkpoint of A's final
//!   window, a checkpoint of B's final window) in which A's score beats B's, a tie counting one
//!   half; and the **decision consistency**, the share of those pairs won by the run with the
//!   higher final-stage mean: 1 means the leader wins whichever final-stage checkpoints one
//!   compares, 0.5 that the pick of checkpoints decides. This is DataDecide's decision accuracy
//!   (Magnusson et al.: the share of comparisons that agree with the decision) applied within the
//!   final stage.
//! - **the verdict**: "A better by X points [lo, hi]" (or B) where the interval excludes 0, else
//!   "no difference"; a verdict whose interval excludes 0 while the consistency lies strictly
//!   between 0.1 and 0.9, or whose consistency points the other way than the difference, says
//!   that it depends on the checkpoint.
//! - **more than two runs**: every pair as above, and the ranking by final-stage mean with its
//!   consistency: the share of joint picks (one final-window checkpoint per run, all picks equally
//!   likely) whose scores reproduce the ranking exactly, in strict order (a tie between two runs
//!   does not reproduce it). The share is computed exactly for any number of picks by counting
//!   along the ranking (the picks that put run k+1 below a given score of run k), never sampled.
//!
//! # Why paired draws
//! The runs were scored on the same items, so most of the eval-set noise is shared: an item that
//! is hard for one run is hard for the other. One bootstrap draw of items (seeded per task) is
//! applied to every run and every checkpoint, as olmo-eval's paired per-item bootstrap does, so
//! the interval of a difference carries only the noise that does not cancel; independent draws
//! per run would count the shared part twice and hide real differences.
//!
//! # Limits
//! - The interval is over the items only: the checkpoints of each final window are taken as
//!   given. How much the pick of checkpoints matters is what the consistency reports, beside it.
//!   The two answer different questions: a consistency of 0 or 1 with "no difference" says that
//!   every final-stage checkpoint of one run beats every one of the other on these items, but
//!   that the items are too few to tell the runs apart beyond them (all checkpoints are scored
//!   on the same items, so their agreement is no evidence about other items).
//! - Two runs are one seed each: a difference between them is a difference between those two
//!   trails, not between the two recipes (training seeds vary more than items; see
//!   `crate::seeds`).
//! - Items are matched within a task name; renamed tasks are not matched.
//! - Matching by example id where no text hash exists trusts the ids: tables of version 1 and 2
//!   cannot tell a changed question from the same one.

use anyhow::{bail, Result};
use ndarray::{s, Array2, Axis};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::panel::Panel;
use crate::report::Input;
use crate::stats::mean;
use crate::{bootstrap, seed_for, windows, Options, LEVEL};

/// Fewest items shared by every run for a task to be compared (as olmo-eval requires).
pub const MIN_SHARED: usize = 20;
/// `identity` of a task whose every compared item was matched by its text hash.
pub const BY_TEXT_HASH: &str = "text hash";
/// `identity` of a task where some compared item was matched by its example id only.
pub const BY_EXAMPLE_ID: &str = "example id";

/// The comparison of two or more runs, task by task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunsComparison {
    /// The runs' labels, in input order (the input paths as given, or `--names`).
    pub runs: Vec<String>,
    /// The primary metric: `acc` or `acc_norm`.
    pub metric: String,
    /// The final window in words, e.g. "the last 20% of each run's checkpoints (at least 3)".
    pub final_window: String,
    /// Bootstrap draws over the shared items.
    pub bootstrap: usize,
    pub seed: u64,
    /// The tasks compared, by name.
    pub tasks: Vec<TaskComparison>,
    /// What was skipped, restricted or refused, and why; the readers' notices, by run.
    pub notes: Vec<String>,
}

/// One task of a [`RunsComparison`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskComparison {
    pub task: String,
    /// [`BY_TEXT_HASH`] or [`BY_EXAMPLE_ID`].
    pub identity: String,
    /// Items (examples) of the task in each run, in run order.
    pub items: Vec<usize>,
    /// Items every run scored: those compared.
    pub shared: usize,
    /// The steps of each run's final window.
    pub final_steps: Vec<Vec<u64>>,
    /// Each run's score at each of its final-window checkpoints, on the shared items.
    pub final_scores: Vec<Vec<f64>>,
    /// Each run's final-stage mean: the mean of its `final_scores`.
    pub means: Vec<f64>,
    /// Every pair of runs (i < j in input order): `run_a` is run i.
    pub pairs: Vec<PairRow>,
    /// With more than two runs: the ranking by final-stage mean and its consistency.
    pub ranking: Option<Ranking>,
}

/// One row of `runs.parquet` / `runs.csv`: two runs on one task. Scores, differences and
/// intervals are accuracies (0 to 1); the verdict says them in points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairRow {
    pub task: String,
    pub run_a: String,
    pub run_b: String,
    pub metric: String,
    /// How the items were matched: [`BY_TEXT_HASH`] or [`BY_EXAMPLE_ID`].
    pub identity: String,
    pub items_a: usize,
    pub items_b: usize,
    /// Items compared: those every run scored.
    pub shared: usize,
    pub final_checkpoints_a: usize,
    pub final_checkpoints_b: usize,
    /// Final-stage means on the shared items.
    pub mean_a: f64,
    pub mean_b: f64,
    /// `mean_a - mean_b`, with its 95% paired bootstrap interval over the shared items.
    pub difference: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    /// Share of (final-stage checkpoint of A, final-stage checkpoint of B) pairs in which A's
    /// score beats B's; a tie counts one half.
    pub a_wins: f64,
    /// The decision consistency: the share of those pairs won by the run with the higher
    /// final-stage mean (A when the means are equal): 1 when every pair agrees with the verdict's
    /// direction, 0.5 when a coin would.
    pub consistency: f64,
    pub verdict: String,
}

/// The ranking of more than two runs on one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ranking {
    /// Run indices (into [`RunsComparison::runs`]), best final-stage mean first; equal means keep
    /// the input order.
    pub order: Vec<usize>,
    /// Share of joint picks (one final-window checkpoint per run) whose scores are in the
    /// ranking's order, strictly.
    pub consistency: f64,
    /// Number of joint picks: the product of the final windows' sizes (all of them counted).
    pub joint_picks: f64,
}

/// One row of `ranking.csv`: a run's place in a task's ranking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankingRow {
    pub task: String,
    pub rank: usize,
    pub run: String,
    pub metric: String,
    pub mean: f64,
    /// The whole ranking, best first, labels joined by " > ".
    pub ranking: String,
    pub ranking_consistency: f64,
    pub joint_picks: f64,
}

impl RunsComparison {
    /// The rows of `runs.parquet`: every task's pairs.
    pub fn pair_rows(&self) -> Vec<PairRow> {
        self.tasks.iter().flat_map(|t| t.pairs.iter().cloned()).collect()
    }

    /// The rows of `ranking.csv` (empty with two runs).
    pub fn ranking_rows(&self) -> Vec<RankingRow> {
        let mut out = Vec::new();
        for t in &self.tasks {
            let Some(r) = &t.ranking else { continue };
            let names: Vec<&str> = r.order.iter().map(|&i| self.runs[i].as_str()).collect();
            for (rank, &i) in r.order.iter().enumerate() {
                out.push(RankingRow {
                    task: t.task.clone(),
                    rank: rank + 1,
                    run: self.runs[i].clone(),
                    metric: self.metric.clone(),
                    mean: t.means[i],
                    ranking: names.join(" > "),
                    ranking_consistency: r.consistency,
                    joint_picks: r.joint_picks,
                });
            }
        }
        out
    }
}

/// Share of pairs `(a[i], b[j])` with `a[i] > b[j]`, a tie counting one half.
pub fn consistency(a: &[f64], b: &[f64]) -> f64 {
    let mut wins = 0.0;
    for x in a {
        for y in b {
            wins += if x > y {
                1.0
            } else if x == y {
                0.5
            } else {
                0.0
            };
        }
    }
    wins / (a.len() * b.len()) as f64
}

/// Share of joint picks (one value of each trail in `ordered`, all picks equally likely) that
/// are strictly decreasing along `ordered`. Exact: going up from the last trail, `p[t]` is the
/// share of picks of the trails below trail k that continue a strict descent from its value `t`.
pub fn ranking_consistency(ordered: &[&[f64]]) -> f64 {
    let Some((last, above)) = ordered.split_last() else { return f64::NAN };
    let mut below: Vec<(f64, f64)> = last.iter().map(|&v| (v, 1.0)).collect();
    for trail in above.iter().rev() {
        let n = below.len() as f64;
        below =
            trail.iter().map(|&v| (v, below.iter().filter(|(w, _)| *w < v).map(|(_, p)| p).sum::<f64>() / n)).collect();
    }
    below.iter().map(|(_, p)| p).sum::<f64>() / below.len() as f64
}

/// The verdict of a pair in points, from the difference `a - b`, its interval and the
/// consistency (the share of final-stage checkpoint pairs `a` wins).
pub fn verdict(a: &str, b: &str, difference: f64, low: f64, high: f64, consistency: f64) -> String {
    // + 0.0 turns -0.0 into 0.0
    let pts = |x: f64| 100.0 * x + 0.0;
    let mut v = if low > 0.0 {
        format!("{a} better by {:.1} points [{:.1}, {:.1}]", pts(difference), pts(low), pts(high))
    } else if high < 0.0 {
        format!("{b} better by {:.1} points [{:.1}, {:.1}]", pts(-difference), pts(-high), pts(-low))
    } else {
        format!("no difference ({:+.1} points [{:+.1}, {:+.1}])", pts(difference), pts(low), pts(high))
    };
    let decided = low > 0.0 || high < 0.0;
    let against = (difference > 0.0 && consistency < 0.5) || (difference < 0.0 && consistency > 0.5);
    if (decided && consistency > 0.1 && consistency < 0.9) || against {
        write!(
            v,
            "; the verdict depends on the checkpoint ({a} wins in {:.0}% of final-stage checkpoint pairs)",
            100.0 * consistency
        )
        .unwrap();
    }
    v
}

/// How the items of one task were matched across the runs.
#[derive(Debug, Default)]
struct Matching {
    /// `[run][item]`: the item's column in each run's panel; items in the first run's order.
    cols: Vec<Vec<usize>>,
    /// Items whose text hash is known and the same in every run.
    by_text: usize,
    /// Of those, items filed under different example ids in different runs.
    across_ids: usize,
    /// Example ids present in every run whose text hashes differ: not compared.
    other_text: usize,
}

/// Matches the items of one task across runs: first by text hash (a hash found exactly once in
/// every run), then, among the columns left, by example id where the known hashes agree.
fn match_items(panels: &[&Panel]) -> Matching {
    let runs = panels.len();
    let mut counts: Vec<HashMap<&str, (usize, usize)>> = vec![HashMap::new(); runs];
    for (r, p) in panels.iter().enumerate() {
        for (c, h) in p.hashes.iter().enumerate().filter(|(_, h)| !h.is_empty()) {
            let e = counts[r].entry(h.as_str()).or_insert((0, c));
            e.0 += 1;
        }
    }
    let mut used: Vec<Vec<bool>> = panels.iter().map(|p| vec![false; p.examples()]).collect();
    let mut items: Vec<(Vec<usize>, bool)> = Vec::new();
    let mut m = Matching::default();
    for (c0, h) in panels[0].hashes.iter().enumerate().filter(|(_, h)| !h.is_empty()) {
        let cols: Option<Vec<usize>> =
            counts.iter().map(|cs| cs.get(h.as_str()).filter(|(n, _)| *n == 1).map(|&(_, c)| c)).collect();
        if let Some(cols) = cols {
            debug_assert_eq!(cols[0], c0);
            if cols.iter().enumerate().any(|(r, &c)| panels[r].ids[c] != panels[0].ids[c0]) {
                m.across_ids += 1;
            }
            for (r, &c) in cols.iter().enumerate() {
                used[r][c] = true;
            }
            items.push((cols, true));
        }
    }
    let by_id: Vec<HashMap<&str, usize>> =
        panels.iter().map(|p| p.ids.iter().enumerate().map(|(c, id)| (id.as_str(), c)).collect()).collect();
    for c0 in (0..panels[0].examples()).filter(|&c| !used[0][c]) {
        let id = panels[0].ids[c0].as_str();
        let Some(cols) = by_id
            .iter()
            .enumerate()
            .map(|(r, ids)| ids.get(id).filter(|&&c| !used[r][c]).copied())
            .collect::<Option<Vec<usize>>>()
        else {
            continue;
        };
        let known: BTreeSet<&str> =
            cols.iter().enumerate().map(|(r, &c)| panels[r].hashes[c].as_str()).filter(|h| !h.is_empty()).collect();
        if known.len() > 1 {
            m.other_text += 1;
            continue;
        }
        let all_known = cols.iter().enumerate().all(|(r, &c)| !panels[r].hashes[c].is_empty());
        items.push((cols, all_known));
    }
    items.sort_by_key(|(cols, _)| cols[0]);
    m.by_text = items.iter().filter(|(_, t)| *t).count();
    m.cols = (0..runs).map(|r| items.iter().map(|(cols, _)| cols[r]).collect()).collect();
    m
}

/// Run letters for the text table: A, B, ... Z, then R27, R28, ...
fn letter(i: usize) -> String {
    if i < 26 {
        ((b'A' + i as u8) as char).to_string()
    } else {
        format!("R{}", i + 1)
    }
}

fn final_window_words(opts: &Options) -> String {
    match opts.final_from {
        Some(s) => format!("each run's checkpoints from step {s} (at least its last 3)"),
        // rounded: 100 x 0.1 is not 10 in floating point
        None => {
            format!("the last {}% of each run's checkpoints (at least 3)", (1e6 * opts.final_fraction).round() / 1e4)
        }
    }
}

/// One task: `None` (with a note) where it cannot be compared.
fn compare_task(
    task: &str,
    labels: &[String],
    panels: &[&Panel],
    opts: &Options,
    notes: &mut Vec<String>,
) -> Option<TaskComparison> {
    let metric = opts.primary();
    let values: Vec<_> = match panels.iter().map(|p| p.values(metric)).collect::<Option<Vec<_>>>() {
        Some(v) => v,
        None => {
            notes.push(format!("task {task}: {} is not defined on every example of every run: skipped", metric.name()));
            return None;
        }
    };
    let m = match_items(panels);
    let shared = m.cols[0].len();
    let items: Vec<usize> = panels.iter().map(|p| p.examples()).collect();
    let counts = || labels.iter().zip(&items).map(|(l, n)| format!("{l}: {n}")).collect::<Vec<_>>().join(", ");
    let other = if m.other_text > 0 {
        format!(
            "; {} example id{} with other text in another run (item hashes differ) not compared",
            m.other_text,
            if m.other_text == 1 { "" } else { "s" }
        )
    } else {
        String::new()
    };
    if shared < MIN_SHARED {
        notes.push(format!(
            "task {task}: refused: only {shared} items shared by every run ({}{other}); at least {MIN_SHARED} are needed (as olmo-eval requires)",
            counts()
        ));
        return None;
    }
    if items.iter().any(|&n| n != shared) || m.other_text > 0 {
        notes.push(format!("task {task}: compared on the {shared} items every run scored ({}{other})", counts()));
    }
    let identity = if m.by_text == shared { BY_TEXT_HASH } else { BY_EXAMPLE_ID };
    if m.by_text > 0 && m.by_text < shared {
        notes.push(format!(
            "task {task}: {} of {shared} items matched by example id only (a run's table has no item hashes for them, table version < 3)",
            shared - m.by_text
        ));
    }
    if m.across_ids > 0 {
        notes.push(format!("task {task}: {} items matched by their text under different example ids", m.across_ids));
    }
    // each run's final window, on the shared items: checkpoints x items
    let mut finals: Vec<Array2<f64>> = Vec::new();
    let mut final_steps = Vec::new();
    for (r, p) in panels.iter().enumerate() {
        let w = windows(&p.steps, opts)[1].1.clone();
        final_steps.push(p.steps[w.clone()].to_vec());
        finals.push(values[r].slice(s![w, ..]).select(Axis(1), &m.cols[r]));
    }
    let final_scores: Vec<Vec<f64>> = finals.iter().map(|v| bootstrap::scores(v.view()).to_vec()).collect();
    let means: Vec<f64> = final_scores.iter().map(|s| mean(s)).collect();
    // one draw of items for every run and checkpoint: the differences are paired
    let draws = bootstrap::draws(shared, opts.bootstrap, seed_for(opts.seed, task, "compare-runs"));
    let boot: Vec<Vec<f64>> = draws
        .par_iter()
        .map(|idx| {
            finals.iter().map(|v| bootstrap::resampled_scores(v.view(), idx).mean().unwrap_or(f64::NAN)).collect()
        })
        .collect();
    let mut pairs = Vec::new();
    for a in 0..labels.len() {
        for b in a + 1..labels.len() {
            let difference = means[a] - means[b];
            let diffs: Vec<f64> = boot.iter().map(|d| d[a] - d[b]).collect();
            let iv = bootstrap::interval(difference, &diffs, LEVEL, f64::NEG_INFINITY);
            let c = consistency(&final_scores[a], &final_scores[b]);
            pairs.push(PairRow {
                task: task.to_string(),
                run_a: labels[a].clone(),
                run_b: labels[b].clone(),
                metric: metric.name().to_string(),
                identity: identity.to_string(),
                items_a: items[a],
                items_b: items[b],
                shared,
                final_checkpoints_a: final_scores[a].len(),
                final_checkpoints_b: final_scores[b].len(),
                mean_a: means[a],
                mean_b: means[b],
                difference,
                ci_low: iv.low,
                ci_high: iv.high,
                a_wins: c,
                consistency: if difference < 0.0 { 1.0 - c } else { c },
                verdict: verdict(&labels[a], &labels[b], difference, iv.low, iv.high, c),
            });
        }
    }
    let ranking = (labels.len() > 2).then(|| {
        let mut order: Vec<usize> = (0..labels.len()).collect();
        order.sort_by(|&i, &j| means[j].total_cmp(&means[i]).then(i.cmp(&j)));
        let ordered: Vec<&[f64]> = order.iter().map(|&i| final_scores[i].as_slice()).collect();
        Ranking {
            consistency: ranking_consistency(&ordered),
            joint_picks: final_scores.iter().map(|s| s.len() as f64).product(),
            order,
        }
    });
    Some(TaskComparison {
        task: task.to_string(),
        identity: identity.to_string(),
        items,
        shared,
        final_steps,
        final_scores,
        means,
        pairs,
        ranking,
    })
}

/// Compares runs (label, what [`crate::report::load_inputs`] read), task by task: the tasks every
/// run scored with per-example rows, on the items every run scored (see the module docs). Tasks
/// left out are said in the notes; an error if none is left, or if labels repeat.
pub fn compare_runs(runs: &[(String, Input)], opts: &Options) -> Result<RunsComparison> {
    opts.check()?;
    if runs.len() < 2 {
        bail!("compare-runs needs at least two runs, got {}", runs.len());
    }
    let labels: Vec<String> = runs.iter().map(|(l, _)| l.clone()).collect();
    if let Some(l) = labels.iter().enumerate().find(|(i, l)| labels[..*i].contains(l)).map(|(_, l)| l) {
        bail!("run {l} is given twice; give every run its own label (--names)");
    }
    let mut notes: Vec<String> = Vec::new();
    for (label, input) in runs {
        notes.extend(input.notices.iter().map(|n| format!("{label}: {n}")));
    }
    let panels: Vec<&BTreeMap<String, Panel>> = runs.iter().map(|(_, input)| &input.panels).collect();
    let names: Vec<BTreeSet<&str>> = runs
        .iter()
        .map(|(_, input)| {
            input.tasks.iter().map(|t| t.task.as_str()).chain(input.panels.keys().map(String::as_str)).collect()
        })
        .collect();
    let all: BTreeSet<&str> = names.iter().flatten().copied().collect();
    let mut tasks = Vec::new();
    for task in all {
        let missing: Vec<&str> =
            labels.iter().zip(&names).filter(|(_, n)| !n.contains(task)).map(|(l, _)| l.as_str()).collect();
        if !missing.is_empty() {
            notes.push(format!("task {task}: not scored by {}: skipped", missing.join(", ")));
            continue;
        }
        let without: Vec<&str> =
            labels.iter().zip(&panels).filter(|(_, p)| !p.contains_key(task)).map(|(l, _)| l.as_str()).collect();
        if !without.is_empty() {
            notes.push(format!(
                "task {task}: no per-example data in {} (lm-evaluation-harness results without --log_samples?): skipped",
                without.join(", ")
            ));
            continue;
        }
        let ps: Vec<&Panel> = panels.iter().map(|p| &p[task]).collect();
        if let Some(t) = compare_task(task, &labels, &ps, opts, &mut notes) {
            tasks.push(t);
        }
    }
    if tasks.is_empty() {
        bail!(
            "no task to compare: {}",
            if notes.is_empty() { "the runs scored no task".into() } else { notes.join("; ") }
        );
    }
    Ok(RunsComparison {
        runs: labels,
        metric: opts.primary().name().to_string(),
        final_window: final_window_words(opts),
        bootstrap: opts.bootstrap,
        seed: opts.seed,
        tasks,
        notes,
    })
}

/// The text table of a comparison (stdout of `analysis compare-runs`; the notes go apart). Runs
/// are named by their labels where every label is short (at most 10 characters), else by
/// letters (A, B, ...) listed above the table.
pub fn render(c: &RunsComparison) -> String {
    let mut s = String::new();
    let pts = |x: f64| 100.0 * x + 0.0;
    writeln!(
        s,
        "compare-runs on {} in points (100 x accuracy); final stage: {}; {} paired bootstrap draws over the shared items, {:.0}% intervals",
        c.metric,
        c.final_window,
        c.bootstrap,
        100.0 * LEVEL
    )
    .unwrap();
    let short = c.runs.iter().all(|r| r.chars().count() <= 10);
    let tags: Vec<String> = if short { c.runs.clone() } else { (0..c.runs.len()).map(letter).collect() };
    if !short {
        for (tag, r) in tags.iter().zip(&c.runs) {
            writeln!(s, "  {tag} = {r}").unwrap();
        }
    }
    let index: HashMap<&str, usize> = c.runs.iter().enumerate().map(|(i, r)| (r.as_str(), i)).collect();
    let pair = |p: &PairRow| format!("{} vs {}", tags[index[p.run_a.as_str()]], tags[index[p.run_b.as_str()]]);
    let tw = c.tasks.iter().map(|t| t.task.chars().count()).max().unwrap_or(0).max(22);
    let pw = c.tasks.iter().flat_map(|t| t.pairs.iter().map(|p| pair(p).chars().count())).max().unwrap_or(0).max(8);
    writeln!(
        s,
        "{:<tw$} {:<10} {:<pw$} {:>11} {:>6} {:>6} {:>7} {:>7} {:>6} {:>15} {:>6}",
        "task", "identity", "pair", "items", "shared", "final", "mean a", "mean b", "a - b", "95% CI", "a wins"
    )
    .unwrap();
    for t in &c.tasks {
        for p in &t.pairs {
            writeln!(
                s,
                "{:<tw$} {:<10} {:<pw$} {:>11} {:>6} {:>6} {:>7.1} {:>7.1} {:>+6.1} {:>15} {:>5.0}%",
                t.task,
                p.identity,
                pair(p),
                format!("{}/{}", p.items_a, p.items_b),
                p.shared,
                format!("{}/{}", p.final_checkpoints_a, p.final_checkpoints_b),
                pts(p.mean_a),
                pts(p.mean_b),
                pts(p.difference),
                format!("[{:+.1}, {:+.1}]", pts(p.ci_low), pts(p.ci_high)),
                100.0 * p.a_wins
            )
            .unwrap();
            writeln!(s, "    {}", p.verdict).unwrap();
        }
    }
    let ranked: Vec<&TaskComparison> = c.tasks.iter().filter(|t| t.ranking.is_some()).collect();
    if !ranked.is_empty() {
        writeln!(
            s,
            "ranking by final-stage mean, and the share of joint picks (one final-stage checkpoint per run) that reproduce it strictly:"
        )
        .unwrap();
        for t in ranked {
            let r = t.ranking.as_ref().unwrap();
            let order: Vec<String> = r.order.iter().map(|&i| format!("{} ({:.1})", tags[i], pts(t.means[i]))).collect();
            writeln!(
                s,
                "{:<tw$} {}; {:.1}% of {} joint picks",
                t.task,
                order.join(" > "),
                100.0 * r.consistency,
                r.joint_picks
            )
            .unwrap();
        }
    }
    writeln!(
        s,
        "items: each run's / shared by all; final: final-stage checkpoints of a / b; a wins: share of (final-stage checkpoint of a, of b) pairs in which a scores higher, ties counting one half"
    )
    .unwrap();
    s
}

/// The folder a path is, or would be: its nearest existing ancestor resolved (links, `..`), with
/// the rest appended.
fn resolved(p: &Path) -> PathBuf {
    let abs = if p.is_absolute() { p.to_path_buf() } else { std::env::current_dir().unwrap_or_default().join(p) };
    let mut rest = Vec::new();
    let mut at = abs.as_path();
    loop {
        if let Ok(c) = at.canonicalize() {
            return rest.iter().rev().fold(c, |acc: PathBuf, part| acc.join(part));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                at = parent;
            }
            _ => return abs,
        }
    }
}

/// Refuses an output folder that is one of the inputs' folders (a run or eval folder, the folder
/// of a file read), or lies inside lm-evaluation-harness outputs: nothing is written into an input.
fn refuse_writing_into_inputs(out: &Path, inputs: &[(PathBuf, &Input)]) -> Result<()> {
    let o = resolved(out);
    for (path, input) in inputs {
        let p = resolved(path);
        let folders: Vec<PathBuf> =
            input.sources.iter().filter_map(|s| s.parent()).map(resolved).chain([p.clone()]).collect();
        if folders.contains(&o) || (input.harness && o.starts_with(&p)) {
            bail!(
                "--out {}: is the folder of input {} (compare-runs never writes into its inputs); choose another folder",
                out.display(),
                path.display()
            );
        }
    }
    Ok(())
}

/// `analysis compare-runs`: loads every input (as `analysis report` loads ONE input: a run
/// folder, an eval folder, lm-evaluation-harness outputs; steps by `step_from` / `step_map`),
/// keeps the tasks whose name contains one of `tasks` (all if empty), compares them, writes
/// `runs.parquet`, `runs.csv`, `ranking.csv` (more than two runs) and `provenance.json` into `out`
/// as one set, prints the notes to stderr and returns the text table.
pub fn run(
    inputs: &[PathBuf],
    names: &[String],
    out: &Path,
    step_from: Option<&str>,
    step_map: Option<&Path>,
    tasks: &[String],
    opts: &Options,
) -> Result<String> {
    opts.check()?;
    if inputs.len() < 2 {
        bail!("compare-runs needs at least two runs");
    }
    if !names.is_empty() && names.len() != inputs.len() {
        bail!("--names gives {} labels for {} runs", names.len(), inputs.len());
    }
    let rule = records::harness::StepRule::new(step_from, step_map)?;
    let mut runs = Vec::new();
    for (i, path) in inputs.iter().enumerate() {
        let ingest = records::source::Ingest { tasks: tasks.to_vec(), ..Default::default() };
        let input = crate::report::load_inputs(std::slice::from_ref(path), &rule, &ingest)?;
        let label = names.get(i).cloned().unwrap_or_else(|| path.display().to_string());
        runs.push((label, input));
    }
    let with_paths: Vec<(PathBuf, &Input)> = inputs.iter().cloned().zip(runs.iter().map(|(_, i)| i)).collect();
    refuse_writing_into_inputs(out, &with_paths)?;
    let cmp = compare_runs(&runs, opts)?;
    let mut provenance_runs = Vec::new();
    for ((label, input), path) in runs.iter().zip(inputs) {
        let files: Vec<::run::provenance::Input> =
            input.sources.iter().map(|f| ::run::provenance::Input::of(f)).collect::<Result<_>>()?;
        provenance_runs.push(serde_json::json!({
            "label": label, "input": path, "harness": input.harness, "sources": files, "notices": input.notices,
        }));
    }
    let provenance = serde_json::json!({
        "command": "analysis compare-runs",
        "runs": provenance_runs,
        "options": {
            "final_fraction": opts.final_fraction, "final_from": opts.final_from, "bootstrap": opts.bootstrap,
            "acc_norm": opts.use_acc_norm, "tasks": tasks, "step_from": step_from, "step_map": step_map,
        },
        "metric": cmp.metric,
        "seed": opts.seed,
        "min_shared_items": MIN_SHARED,
        "level": LEVEL,
        "notes": cmp.notes,
        "threads": rayon::current_num_threads(),
        "host": output::provenance::host(),
        "git_commit": output::provenance::git_commit(),
    });
    write(&cmp, &provenance, out)?;
    for n in &cmp.notes {
        eprintln!("note: {n}");
    }
    Ok(format!("{}tables written to {}\n", render(&cmp), out.display()))
}

/// Writes `runs.parquet`, `runs.csv`, `ranking.csv` (more than two runs; removed otherwise, as
/// an earlier comparison's would be stale) and `provenance.json` into `out`, as one set under
/// the folder's lock.
pub fn write(cmp: &RunsComparison, provenance: &serde_json::Value, out: &Path) -> Result<()> {
    let lock = output::FolderLock::acquire(out, "analysis compare-runs")?;
    let mut set = output::FileSet::begin(&lock, out)?;
    let mut df = records::frame_of(&cmp.pair_rows())?;
    records::stage_frame(&mut set, "runs.parquet", &mut df)?;
    records::stage_frame(&mut set, "runs.csv", &mut df)?;
    let ranking = cmp.ranking_rows();
    if ranking.is_empty() {
        set.remove("ranking.csv")?;
    } else {
        records::stage_frame(&mut set, "ranking.csv", &mut records::frame_of(&ranking)?)?;
    }
    set.write("provenance.json", serde_json::to_string_pretty(provenance)?.as_bytes())?;
    set.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use records::ExampleRecord;

    /// Rows of task `t` from a correctness matrix `[checkpoint][item]` (steps 10, 20, ...), item
    /// `e` with id `t/<e>` and the hash `hash(e)` (empty: none).
    fn rows(correct: &[Vec<bool>], hash: impl Fn(usize) -> String) -> Vec<ExampleRecord> {
        let mut out = Vec::new();
        for (t, c) in correct.iter().enumerate() {
            for (e, &ok) in c.iter().enumerate() {
                out.push(ExampleRecord {
                    step: 10 * (t as u64 + 1),
                    task: "t".into(),
                    example_id: format!("t/{e}"),
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
                    item_hash: hash(e),
                    targets: Vec::new(),
                    score_names: Vec::new(),
                    score_values: Vec::new(),
                });
            }
        }
        out
    }

    fn input(examples: Vec<ExampleRecord>) -> Input {
        Input {
            tasks: records::summarise(&examples).unwrap(),
            panels: Panel::all(&examples).unwrap(),
            sources: vec![],
            harness: false,
            notices: vec![],
            run: None,
        }
    }

    fn opts() -> Options {
        Options { bootstrap: 200, ..Default::default() }
    }

    fn h(e: usize) -> String {
        format!("{e:064x}")
    }

    /// `k` of `n` items right (the first k) at each checkpoint.
    fn trail(ks: &[usize], n: usize) -> Vec<Vec<bool>> {
        ks.iter().map(|&k| (0..n).map(|e| e < k).collect()).collect()
    }

    #[test]
    fn consistency_counts_ties_as_half_and_the_ranking_share_is_exact() {
        assert_eq!(consistency(&[0.6, 0.7], &[0.6, 0.5]), (0.5 + 1.0 + 1.0 + 1.0) / 4.0);
        // the counting against every joint pick, on uneven trails with ties
        let trails: [&[f64]; 4] = [&[0.5, 0.7, 0.9], &[0.4, 0.7, 0.6, 0.8], &[0.3, 0.6], &[0.1, 0.65, 0.2]];
        let mut hits = 0;
        let mut total = 0;
        for &a in trails[0] {
            for &b in trails[1] {
                for &c in trails[2] {
                    for &d in trails[3] {
                        total += 1;
                        hits += usize::from(a > b && b > c && c > d);
                    }
                }
            }
        }
        assert!((ranking_consistency(&trails) - hits as f64 / total as f64).abs() < 1e-15);
        assert_eq!(ranking_consistency(&[&[1.0], &[0.5], &[0.0]]), 1.0);
        assert_eq!(ranking_consistency(&[&[0.5], &[0.5], &[0.0]]), 0.0, "a tie does not reproduce a ranking");
    }

    #[test]
    fn verdicts_in_points_with_the_checkpoint_caveat() {
        assert_eq!(verdict("A", "B", 0.02, 0.01, 0.03, 1.0), "A better by 2.0 points [1.0, 3.0]");
        assert_eq!(verdict("A", "B", -0.02, -0.03, -0.01, 0.0), "B better by 2.0 points [1.0, 3.0]");
        assert_eq!(verdict("A", "B", 0.0, 0.0, 0.0, 0.5), "no difference (+0.0 points [+0.0, +0.0])");
        assert_eq!(
            verdict("A", "B", 0.02, 0.01, 0.03, 0.75),
            "A better by 2.0 points [1.0, 3.0]; the verdict depends on the checkpoint (A wins in 75% of final-stage checkpoint pairs)"
        );
        // no difference, but the checkpoints say the other way than the means
        assert!(verdict("A", "B", 0.005, -0.01, 0.02, 0.3).ends_with("(A wins in 30% of final-stage checkpoint pairs)"));
        assert!(!verdict("A", "B", 0.005, -0.01, 0.02, 0.6).contains("depends"));
    }

    /// Items are matched by text where every run knows it, else by id; an id with other text
    /// is another item; items under new ids but the same text are still the same item.
    #[test]
    fn items_match_by_text_then_by_id() {
        let n = 30;
        let a = rows(&trail(&[10, 12, 14], n), h);
        // b: ids 0-4 carry other text, ids 5-9 no hash (an older table), 10-29 the same text
        let b = rows(&trail(&[10, 12, 14], n), |e| {
            if e < 5 {
                h(100 + e)
            } else if e < 10 {
                String::new()
            } else {
                h(e)
            }
        });
        let pa = Panel::all(&a).unwrap().remove("t").unwrap();
        let pb = Panel::all(&b).unwrap().remove("t").unwrap();
        let m = match_items(&[&pa, &pb]);
        assert_eq!((m.cols[0].len(), m.by_text, m.other_text, m.across_ids), (25, 20, 5, 0));
        assert_eq!(m.cols[0], m.cols[1]);
        // the same text filed under other ids (a reordered lm-eval dataset)
        let shifted: Vec<ExampleRecord> = a
            .iter()
            .map(|r| {
                let e: usize = r.example_id[2..].parse().unwrap();
                ExampleRecord { example_id: format!("t/{}", (e + 1) % n), ..r.clone() }
            })
            .collect();
        let ps = Panel::all(&shifted).unwrap().remove("t").unwrap();
        let m = match_items(&[&pa, &ps]);
        assert_eq!((m.cols[0].len(), m.by_text, m.across_ids), (n, n, n));
        for (&ca, &cs) in m.cols[0].iter().zip(&m.cols[1]) {
            assert_eq!(pa.hashes[ca], ps.hashes[cs]);
        }
    }

    /// Three runs by hand: 20 items, three checkpoints each (the whole trail is the final
    /// window). A scores 12, 13, 16 items, B 11, 13, 15, C 10 at every checkpoint: A > B > C;
    /// A beats B in 5 of 9 checkpoint pairs and ties in one (consistency 5.5 / 9); C is below
    /// every B, so the joint picks that reproduce the ranking strictly are those 5 (A, B) pairs
    /// with any of C's 3 checkpoints: 15 of 27.
    #[test]
    fn three_runs_by_hand() {
        let runs = vec![
            ("A".to_string(), input(rows(&trail(&[12, 13, 16], 20), h))),
            ("B".to_string(), input(rows(&trail(&[11, 13, 15], 20), h))),
            ("C".to_string(), input(rows(&trail(&[10, 10, 10], 20), h))),
        ];
        let c = compare_runs(&runs, &opts()).unwrap();
        let t = &c.tasks[0];
        assert_eq!(t.identity, BY_TEXT_HASH);
        let r = t.ranking.as_ref().unwrap();
        assert_eq!((r.order.clone(), r.joint_picks), (vec![0, 1, 2], 27.0));
        assert!((r.consistency - 15.0 / 27.0).abs() < 1e-15, "{}", r.consistency);
        let pair = |a: &str, b: &str| t.pairs.iter().find(|p| p.run_a == a && p.run_b == b).unwrap();
        assert!((pair("A", "B").consistency - 5.5 / 9.0).abs() < 1e-15);
        assert_eq!((pair("A", "C").consistency, pair("B", "C").consistency), (1.0, 1.0));
        assert!((t.means[0] - 41.0 / 60.0).abs() < 1e-15 && (t.means[1] - 39.0 / 60.0).abs() < 1e-15);
        assert_eq!(t.pairs.len(), 3);
        let rows = c.ranking_rows();
        assert_eq!(rows.iter().map(|r| r.run.as_str()).collect::<Vec<_>>(), vec!["A", "B", "C"]);
        assert_eq!(rows[0].ranking, "A > B > C");
    }

    /// Identical runs: difference exactly 0, no difference, consistency one half; the same run
    /// with 2% of its items right where they were wrong, at every checkpoint: B better by 2
    /// points, and B wins every pair of final-stage checkpoints (A wins none: consistency 1).
    #[test]
    fn identical_runs_and_a_better_run() {
        let n = 2000;
        // A: items 40..1040 right, 1040..1050 right at some checkpoints only, the rest wrong
        let a: Vec<Vec<bool>> = (0..10)
            .map(|t| {
                (0..n).map(|e| (40..1040).contains(&e) || ((1040..1050).contains(&e) && (e + t) % 3 == 0)).collect()
            })
            .collect();
        let b: Vec<Vec<bool>> = a.iter().map(|c| c.iter().enumerate().map(|(e, &ok)| ok || e < 40).collect()).collect();
        let same =
            compare_runs(&[("A".into(), input(rows(&a, h))), ("B".into(), input(rows(&a, h)))], &opts()).unwrap();
        let p = &same.tasks[0].pairs[0];
        assert_eq!((p.difference, p.ci_low, p.ci_high, p.consistency), (0.0, 0.0, 0.0, 0.5));
        assert!(p.verdict.starts_with("no difference"), "{}", p.verdict);
        let better =
            compare_runs(&[("A".into(), input(rows(&a, h))), ("B".into(), input(rows(&b, h)))], &opts()).unwrap();
        let p = &better.tasks[0].pairs[0];
        assert!((p.difference + 0.02).abs() < 1e-12, "{}", p.difference);
        assert_eq!((p.a_wins, p.consistency), (0.0, 1.0));
        assert!(p.ci_high < 0.0 && p.verdict.starts_with("B better by 2.0 points ["), "{p:?}");
        assert!(!p.verdict.contains("depends"), "{}", p.verdict);
    }

    #[test]
    fn fewer_than_twenty_shared_items_are_refused_and_labels_must_differ() {
        let a = rows(&trail(&[5, 6, 7], 19), h);
        let e = compare_runs(&[("A".into(), input(a.clone())), ("B".into(), input(a.clone()))], &opts())
            .unwrap_err()
            .to_string();
        assert!(e.contains("task t: refused: only 19 items"), "{e}");
        let e =
            compare_runs(&[("A".into(), input(a.clone())), ("A".into(), input(a))], &opts()).unwrap_err().to_string();
        assert!(e.contains("run A is given twice"), "{e}");
    }
}
