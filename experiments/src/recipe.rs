//! The study's claims over the grid: every committed run's claims (Table 3's rules, decided on
//! each run), combined over the seeds of a recipe ([`analysis::claims::recipe_claim`], Table 3)
//! and contrasted between recipes that differ in one axis, schedule or size (Table 8).
//!
//! This module picks the runs and pairs them up; the statistics are `analysis`'s:
//! [`analysis::claims::recipe_claim`] (the random-effects t interval of
//! [`analysis::seeds::recipe_estimate`], metric by metric) and
//! [`analysis::seeds::pooled_t_difference`] (the contrast, as Table 6's size difference).

use crate::study::{seed_groups, yardstick, StudyRun};
use crate::{run_claims, PythiaModel, Run};
use analysis::claims::Claim;
use analysis::seeds::{contrast_runs_needed, pooled_t_difference, Difference};
use analysis::stats::{mean, sample_sd};
use anyhow::Result;

/// Every run's claims, in the order of `runs`; every table read is recorded as an input of `prov`.
pub fn grid_claims(runs: &[StudyRun], models: &[PythiaModel], prov: &Run) -> Result<Vec<Vec<Claim>>> {
    runs.iter()
        .map(|r| {
            let run = Run::new(&r.dir)?;
            let claims = run_claims(&run, models)?;
            run.inputs().iter().for_each(|p| prov.also_read(p));
            Ok(claims)
        })
        .collect()
}

/// The index of each run of `group` in `runs` (the groups of [`seed_groups`] borrow from it).
fn indices(runs: &[StudyRun], group: &[&StudyRun]) -> Vec<usize> {
    group.iter().map(|g| runs.iter().position(|r| std::ptr::eq(r, *g)).expect("a group borrows from runs")).collect()
}

/// A recipe's label: `<schedule> <params>M (<runs>)`.
pub fn recipe_label(group: &[&StudyRun]) -> String {
    format!("{} {:.1}M ({})", group[0].schedule, group[0].params as f64 / 1e6, group.len())
}

/// The seed groups with several runs, as indices into `runs`, in [`seed_groups`]' order.
pub fn recipes(runs: &[StudyRun]) -> Vec<Vec<usize>> {
    seed_groups(runs).into_iter().filter(|g| g.len() >= 2).map(|g| indices(runs, &g)).collect()
}

/// Two recipes that differ in one axis: `other` against `reference` (the seed group with the
/// most runs, whose seed spread is the yardstick).
#[derive(Debug, Clone)]
pub struct Pairing {
    /// "schedule" or "size"
    pub axis: &'static str,
    pub other: Vec<usize>,
    pub reference: Vec<usize>,
    pub label: String,
    pub reference_label: String,
}

/// Every seed group that differs from the reference group (the one with the most runs) in its
/// schedule only or its size only, schedules first, each in [`seed_groups`]' order. Groups that
/// differ in more than one axis, or in their tokens, are left out: their difference is not one
/// axis'.
pub fn pairings(runs: &[StudyRun]) -> Vec<Pairing> {
    let groups = seed_groups(runs);
    let reference = yardstick(&groups);
    let r0 = reference[0];
    let mut out = vec![];
    for axis in ["schedule", "size"] {
        for g in &groups {
            let same_schedule = g[0].schedule == r0.schedule;
            let same_size = g[0].params == r0.params;
            let differs = match axis {
                "schedule" => !same_schedule && same_size,
                _ => same_schedule && !same_size,
            };
            if differs && g[0].tokens == r0.tokens {
                out.push(Pairing {
                    axis,
                    other: indices(runs, g),
                    reference: indices(runs, reference),
                    label: recipe_label(g),
                    reference_label: recipe_label(reference),
                });
            }
        }
    }
    out
}

/// One claim's contrast between two recipes: the difference of the mean claim estimates (the
/// claim's headline statistic, acc for a claim over several metrics) with the pooled-variance t
/// interval of [`pooled_t_difference`], whose spread is the runs' between-seed spread.
#[derive(Debug, Clone)]
pub struct Contrast {
    pub other: Vec<f64>,
    pub reference: Vec<f64>,
    /// None with fewer than 3 runs in all, or where the runs have no spread (copies)
    pub at_95: Option<Difference>,
}

impl Contrast {
    pub fn new(other: Vec<f64>, reference: Vec<f64>) -> Contrast {
        let at_95 = pooled_t_difference(&other, &reference, 0.95).filter(|d| d.se > 0.0 && d.se.is_finite());
        Contrast { other, reference, at_95 }
    }

    /// The interval at `level` (the table's family level).
    pub fn at(&self, level: f64) -> Option<Difference> {
        self.at_95.as_ref()?;
        pooled_t_difference(&self.other, &self.reference, level)
    }

    /// Runs per arm that would exclude 0 at `level`, at the observed difference and spread.
    pub fn runs_needed(&self, level: f64, max: usize) -> Option<usize> {
        self.at_95.as_ref()?;
        contrast_runs_needed(&self.other, &self.reference, level, max)
    }

    /// The reference runs' mean and sample sd.
    pub fn reference_spread(&self) -> (f64, f64) {
        (mean(&self.reference), if self.reference.len() >= 2 { sample_sd(&self.reference) } else { f64::NAN })
    }
}

/// The contrast of claim `i` for a pairing (None where the claim gives every run of the grid the
/// same estimate, as the Pythia claim does: it is not a property of the runs).
pub fn contrast(per_run: &[Vec<Claim>], p: &Pairing, i: usize) -> Option<Contrast> {
    let all: Vec<f64> = per_run.iter().map(|cs| cs[i].estimate).collect();
    if all.iter().any(|v| !v.is_finite()) || all.iter().all(|&v| v == all[0]) {
        return None;
    }
    Some(Contrast::new(
        p.other.iter().map(|&r| per_run[r][i].estimate).collect(),
        p.reference.iter().map(|&r| per_run[r][i].estimate).collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use analysis::claims::Verdict;

    fn run(name: &str, schedule: &str, params: u64, tokens: u64) -> StudyRun {
        StudyRun {
            name: name.into(),
            dir: name.into(),
            schedule: schedule.into(),
            init_seed: 0,
            data_seed: 0,
            params,
            tokens,
            final_val_loss: None,
            tasks: vec![],
            stability: vec![],
            mtv_differences: vec![],
        }
    }

    fn claim(estimate: f64) -> Claim {
        Claim {
            id: "C1",
            claim: "",
            rule: String::new(),
            estimate,
            ci_low: estimate - 0.1,
            ci_high: estimate + 0.1,
            verdict: Verdict::Inconclusive,
            n_needed: None,
            detail: String::new(),
            command: "",
            against: None,
            parts: vec![],
        }
    }

    /// The grid's layout: three cosine seeds (the yardstick), one WSD and one constant run, two
    /// seeds of a smaller size; a run that differs in schedule and size, and one trained on other
    /// tokens, are no one-axis contrast.
    fn grid() -> Vec<StudyRun> {
        vec![
            run("constant-s1", "constant", 68, 8),
            run("cosine-s1", "cosine", 68, 8),
            run("cosine-s2", "cosine", 68, 8),
            run("cosine-s3", "cosine", 68, 8),
            run("long-s1", "cosine", 68, 16),
            run("size2m-s1", "cosine", 18, 8),
            run("size2m-s2", "cosine", 18, 8),
            run("wsd-small", "wsd", 18, 8),
            run("wsd-s1", "wsd", 68, 8),
        ]
    }

    #[test]
    fn recipes_and_one_axis_pairings() {
        let runs = grid();
        assert_eq!(recipes(&runs), [vec![1, 2, 3], vec![5, 6]]);
        let p = pairings(&runs);
        let shown: Vec<(&str, &str, Vec<usize>)> =
            p.iter().map(|p| (p.axis, p.label.as_str(), p.other.clone())).collect();
        assert_eq!(
            shown,
            [
                ("schedule", "constant 0.0M (1)", vec![0]),
                ("schedule", "wsd 0.0M (1)", vec![8]),
                ("size", "cosine 0.0M (2)", vec![5, 6]),
            ]
        );
        assert!(p.iter().all(|p| p.reference == [1, 2, 3] && p.reference_label == "cosine 0.0M (3)"));
    }

    /// A contrast is Table 6's pooled t difference of the runs' estimates; a claim that gives
    /// every run the same estimate (the Pythia claim) has none, and copies have no spread.
    #[test]
    fn contrasts_are_pooled_t_differences_of_the_claim_estimates() {
        let runs = grid();
        let est = [0.9, 0.60, 0.62, 0.64, 0.0, 0.7, 0.72, 0.0, 0.5];
        let per_run: Vec<Vec<Claim>> = est.iter().map(|&e| vec![claim(e), claim(-0.2)]).collect();
        let p = pairings(&runs);
        let c = contrast(&per_run, &p[2], 0).unwrap();
        let want = pooled_t_difference(&[0.7, 0.72], &[0.60, 0.62, 0.64], 0.95).unwrap();
        assert_eq!(c.at_95.as_ref(), Some(&want));
        assert_eq!(c.at(0.99), pooled_t_difference(&[0.7, 0.72], &[0.60, 0.62, 0.64], 0.99));
        assert_eq!(c.runs_needed(0.95, 100), contrast_runs_needed(&[0.7, 0.72], &[0.60, 0.62, 0.64], 0.95, 100));
        let (m, sd) = c.reference_spread();
        assert!((m - 0.62).abs() < 1e-12 && (sd - 0.02).abs() < 1e-12);
        // the Pythia claim: the same in every run
        assert!(contrast(&per_run, &p[2], 1).is_none());
        // copies of one run: no spread, no interval
        let copies: Vec<Vec<Claim>> = (0..runs.len()).map(|r| vec![claim(if r == 8 { 0.5 } else { 0.6 })]).collect();
        let c = contrast(&copies, &p[1], 0).unwrap();
        assert!(c.at_95.is_none() && c.at(0.99).is_none() && c.runs_needed(0.95, 100).is_none());
    }
}
