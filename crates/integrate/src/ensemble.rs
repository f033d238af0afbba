//! Checkpoint ensembling from stored per-option log-likelihoods, with no model run.
//!
//! For a scored-choice example, member j's predictive distribution over the options is the
//! softmax of its option log-likelihoods (of log-likelihood per character for `acc_norm`); the
//! ensemble of the k checkpoints ending at step t is the mean of those distributions, and it
//! predicts its argmax (`Distribution`, the default). The `Sequence` rule instead averages the
//! options' sequence probabilities (log-mean-exp of the log-likelihoods) before comparing them;
//! `Vote` takes the option most members choose (ties: the mean distribution decides). Whatever
//! the rule, the stored log-likelihood of each option is the ensemble's sequence log-likelihood,
//! log mean_j exp(ll_j), so continuous metrics (gold log-prob, margin, bits per byte) of an
//! ensemble are on the same scale as a single checkpoint's. Cloze tasks have one option: an
//! ensemble's greedy continuation needs the per-token distributions of running the models, so
//! they are left out here.

use anyhow::{bail, Result};
use records::{argmax, ExampleRecord};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
pub enum Rule {
    /// mean of the members' distributions over the options
    Distribution,
    /// log-mean-exp of the options' sequence probabilities
    Sequence,
    /// majority vote over the members' chosen options
    Vote,
}

impl Rule {
    /// The method a rule's ensembles are (and the folder they go to): a vote, or a mean.
    pub fn method(self) -> run::Method {
        match self {
            Rule::Vote => run::Method::EnsembleVote,
            Rule::Distribution | Rule::Sequence => run::Method::EnsembleMean,
        }
    }
}

/// The option most members choose; ties go to the option of highest `tiebreak`.
pub fn majority_vote(members: &[&[f64]], tiebreak: &[f64]) -> usize {
    let mut votes = vec![0usize; tiebreak.len()];
    for m in members {
        votes[argmax(m)] += 1;
    }
    let top = *votes.iter().max().unwrap();
    (0..votes.len())
        .filter(|&o| votes[o] == top)
        .fold(None, |best: Option<usize>, o| match best {
            Some(b) if tiebreak[b] >= tiebreak[o] => Some(b),
            _ => Some(o),
        })
        .unwrap()
}

/// softmax of `x`, computed stably.
pub fn softmax(x: &[f64]) -> Vec<f64> {
    let m = x.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = x.iter().map(|v| (v - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.into_iter().map(|v| v / s).collect()
}

/// The ensemble's distribution over options of members given by their option scores.
pub fn ensemble_distribution(members: &[&[f64]]) -> Vec<f64> {
    let n = members[0].len();
    let mut out = vec![0.0; n];
    for m in members {
        for (o, p) in out.iter_mut().zip(softmax(m)) {
            *o += p / members.len() as f64;
        }
    }
    out
}

/// log mean_j exp(x_j), per option.
pub fn log_mean_exp(members: &[&[f64]]) -> Vec<f64> {
    (0..members[0].len())
        .map(|o| {
            let m = members.iter().map(|x| x[o]).fold(f64::NEG_INFINITY, f64::max);
            m + (members.iter().map(|x| (x[o] - m).exp()).sum::<f64>() / members.len() as f64).ln()
        })
        .collect()
}

/// Ensembles of the `k` checkpoints ending at each step (from the k-th step on), for every
/// example of every multiple-choice or minimal-pair task in `rows`.
pub fn ensemble_rows(rows: &[ExampleRecord], k: usize, rule: Rule) -> Result<Vec<ExampleRecord>> {
    if k == 0 {
        bail!("window must be at least 1");
    }
    let mut by_example: BTreeMap<(&str, &str), Vec<&ExampleRecord>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.logliks.len() > 1) {
        by_example.entry((&r.task, &r.example_id)).or_default().push(r);
    }
    let mut out = Vec::new();
    for ((task, id), mut seq) in by_example {
        seq.sort_by_key(|r| r.step);
        // the members must have scored the same text wherever they say which (item_hash)
        let mut known: Option<&ExampleRecord> = None;
        for r in seq.iter().filter(|r| !r.item_hash.is_empty()) {
            match known {
                Some(f) if f.item_hash != r.item_hash => bail!(
                    "task {task} example {id}: other text at step {} than at step {} (item hashes {} and {}); the checkpoints scored different questions",
                    r.step,
                    f.step,
                    &r.item_hash[..r.item_hash.len().min(12)],
                    &f.item_hash[..f.item_hash.len().min(12)]
                ),
                Some(_) => {}
                None => known = Some(r),
            }
        }
        for end in k - 1..seq.len() {
            let window = &seq[end + 1 - k..=end];
            let ll: Vec<&[f64]> = window.iter().map(|r| r.logliks.as_slice()).collect();
            if ll.iter().any(|x| x.len() != ll[0].len()) {
                bail!("task {task} example {id}: option counts differ between checkpoints");
            }
            let chars = &window[0].lengths_chars;
            let per_char: Vec<Vec<f64>> =
                ll.iter().map(|x| x.iter().zip(chars).map(|(l, &c)| l / c.max(1) as f64).collect()).collect();
            let per_char: Vec<&[f64]> = per_char.iter().map(Vec::as_slice).collect();
            let (dist, dist_norm) = (ensemble_distribution(&ll), ensemble_distribution(&per_char));
            let (p, pn) = match rule {
                Rule::Distribution => (argmax(&dist), argmax(&dist_norm)),
                Rule::Sequence => (argmax(&log_mean_exp(&ll)), argmax(&log_mean_exp(&per_char))),
                Rule::Vote => (majority_vote(&ll, &dist), majority_vote(&per_char, &dist_norm)),
            };
            let scores = log_mean_exp(&ll);
            let last = window[k - 1];
            out.push(ExampleRecord {
                step: last.step,
                task: task.to_string(),
                example_id: id.to_string(),
                gold: last.gold,
                predicted: p as u32,
                predicted_norm: pn as u32,
                correct: p == last.gold as usize,
                correct_norm: pn == last.gold as usize,
                logliks: scores,
                lengths_chars: chars.clone(),
                lengths_tokens: last.lengths_tokens.clone(),
                lengths_bytes: last.lengths_bytes.clone(),
                gold_is_greedy: false,
                output: p.to_string(),
                item_hash: window
                    .iter()
                    .map(|r| r.item_hash.as_str())
                    .find(|h| !h.is_empty())
                    .unwrap_or("")
                    .to_string(),
                targets: Vec::new(),
                score_names: Vec::new(),
                score_values: Vec::new(),
            });
        }
    }
    out.sort_by(|a, b| (a.step, &a.task, &a.example_id).cmp(&(b.step, &b.task, &b.example_id)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn row(step: u64, ll: Vec<f64>) -> ExampleRecord {
        ExampleRecord {
            step,
            task: "t".into(),
            example_id: "t/0".into(),
            gold: 0,
            predicted: argmax(&ll) as u32,
            predicted_norm: 0,
            correct: argmax(&ll) == 0,
            correct_norm: true,
            logliks: ll,
            lengths_chars: vec![3, 3, 3],
            lengths_tokens: vec![1, 1, 1],
            lengths_bytes: vec![4, 4, 4],
            gold_is_greedy: false,
            output: String::new(),
            item_hash: String::new(),
            targets: Vec::new(),
            score_names: Vec::new(),
            score_values: Vec::new(),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]
        #[test]
        fn ensemble_probabilities_sum_to_one(ms in prop::collection::vec(prop::collection::vec(-50.0..0.0f64, 4), 1..10)) {
            let refs: Vec<&[f64]> = ms.iter().map(Vec::as_slice).collect();
            let p = ensemble_distribution(&refs);
            prop_assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            prop_assert!(p.iter().all(|&v| v >= 0.0));
        }

        #[test]
        fn an_ensemble_of_one_is_the_single_model(ll in prop::collection::vec(-50.0..0.0f64, 3)) {
            let rows = vec![row(0, ll.clone()), row(10, ll.iter().map(|v| v - 1.0).collect())];
            for rule in [Rule::Distribution, Rule::Sequence, Rule::Vote] {
                let e = ensemble_rows(&rows, 1, rule).unwrap();
                prop_assert_eq!(e.len(), 2);
                for (a, b) in e.iter().zip(&rows) {
                    prop_assert_eq!(a.predicted, b.predicted);
                    prop_assert_eq!(a.correct, b.correct);
                }
            }
        }
    }

    /// An ensembled row carries its members' item hash (members without one, from older
    /// tables, do not count); members that scored other text for one example are refused,
    /// naming the example and both steps.
    #[test]
    fn ensembles_keep_the_item_hash_and_refuse_members_of_other_text() {
        let with = |step: u64, h: &str| ExampleRecord { item_hash: h.into(), ..row(step, vec![-1.0, -2.0, -3.0]) };
        let (a, b) = ("a".repeat(64), "b".repeat(64));
        let rows = vec![with(0, ""), with(10, &a), with(20, &a)];
        let e = ensemble_rows(&rows, 2, Rule::Distribution).unwrap();
        assert_eq!(e.iter().map(|r| r.item_hash.as_str()).collect::<Vec<_>>(), vec![a.as_str(), a.as_str()]);
        let e = ensemble_rows(&rows[..1], 1, Rule::Vote).unwrap();
        assert_eq!(e[0].item_hash, "", "unknown stays unknown");
        let rows = vec![with(0, &a), with(10, ""), with(20, &b)];
        let err = ensemble_rows(&rows, 2, Rule::Distribution).unwrap_err().to_string();
        assert!(err.contains("example t/0") && err.contains("step 20") && err.contains("step 0"), "{err}");
    }

    #[test]
    fn two_members_by_hand() {
        // member 1 prefers option 1 slightly, member 2 prefers option 0 strongly
        let rows =
            vec![row(0, vec![(0.4f64).ln(), (0.6f64).ln(), -30.0]), row(1, vec![(0.9f64).ln(), (0.1f64).ln(), -30.0])];
        let e = ensemble_rows(&rows, 2, Rule::Distribution).unwrap();
        assert_eq!(e.len(), 1);
        assert_eq!((e[0].step, e[0].predicted, e[0].correct), (1, 0, true));
        assert!((e[0].logliks[0].exp() - 0.65).abs() < 1e-9);
        assert!((log_mean_exp(&[&[0.0], &[(3.0f64).ln()]])[0] - (2.0f64).ln()).abs() < 1e-12);
        // three members: two choose option 1 narrowly, one option 0 by far; the vote says 1,
        // the mean distribution says 0
        let three = vec![
            row(0, vec![(0.45f64).ln(), (0.55f64).ln(), -30.0]),
            row(1, vec![(0.45f64).ln(), (0.55f64).ln(), -30.0]),
            row(2, vec![(0.99f64).ln(), (0.01f64).ln(), -30.0]),
        ];
        assert_eq!(ensemble_rows(&three, 3, Rule::Vote).unwrap()[0].predicted, 1);
        assert_eq!(ensemble_rows(&three, 3, Rule::Distribution).unwrap()[0].predicted, 0);
        // a 1-1 tie between two members goes to the option the mean distribution prefers
        assert_eq!(majority_vote(&[&[0.0, -1.0], &[-3.0, 0.0]], &[0.6, 0.4]), 0);
        assert_eq!(majority_vote(&[&[0.0, -1.0], &[-3.0, 0.0]], &[0.3, 0.7]), 1);
    }
}
