//! Checkpoint ensembling from stored per-option log-likelihoods and generated texts, with no
//! model run.
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
//!
//! # Generation tasks: the vote over texts
//!
//! A generation row (`ExampleRecord::is_generation`: gold texts, no options) stores the text the
//! member generated, not a distribution, so a mean of distributions has no meaning for it: the
//! `Distribution` and `Sequence` rules leave generation rows out, and **`Vote` is the rule for
//! text** ([`vote_text`]). For each example and each window of k members (oldest first):
//!
//! 1. every member's output is normalised ([`normalise`]): Unicode NFKC (`textmatch::nfkc`,
//!    llm-jp-eval's `normalize`), then leading and trailing whitespace removed and every inner
//!    run of whitespace (Unicode `White_Space`, as `str::split_whitespace`) replaced by one
//!    space; case, punctuation and everything else are kept;
//! 2. the normalised text most members produce wins;
//! 3. a tie between several texts goes to the one of highest mean character F1
//!    (`textmatch::char_f1`, llm-jp-eval's `char_f1`) to the outputs of the members that produced
//!    another text (over the normalised texts). Tied texts have the same number of supporters,
//!    so this orders them as the mean over all other members would; the sums are compared
//!    exactly, in whole percentage points (`char_f1` is a multiple of 0.01), so float rounding
//!    cannot make or break a tie;
//! 4. a tie left after that goes to the text whose latest supporter is the latest member.
//!
//! The ensemble's row is the row of the **latest member that produced the winning text**
//! (among its supporters, which agree up to normalisation): its raw output, `correct` flags,
//! targets and stored scores carried over unchanged, since the chosen text is exactly what that
//! member generated, with `step` set to the window's last step (as every ensemble here) and
//! the item hash of the window (its first known one). Members whose gold texts differ, or whose
//! item hashes differ, are refused. With k = 1 every row is the single checkpoint's.

use anyhow::{bail, Result};
use records::{argmax, ExampleRecord};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
pub enum Rule {
    /// mean of the members' distributions over the options
    Distribution,
    /// log-mean-exp of the options' sequence probabilities
    Sequence,
    /// majority vote over the members' chosen options; for generation tasks, over their
    /// normalised generated texts (the one rule that ensembles text)
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

    /// Whether the rule ensembles generation rows (only the vote: a text has no distribution to
    /// average).
    pub fn ensembles_text(self) -> bool {
        self == Rule::Vote
    }
}

/// The form in which members' generated texts are compared and counted: NFKC, whitespace
/// trimmed and every inner run of whitespace collapsed to one space; case kept.
pub fn normalise(text: &str) -> String {
    textmatch::nfkc(text).split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The vote over the generated texts of a window's members (oldest first): the index of the
/// member whose row the ensemble takes (see the module doc: most frequent normalised text, ties
/// by mean char F1 to the other members' texts, then by the latest supporter; the latest member
/// among the winning text's supporters).
pub fn vote_text<S: AsRef<str>>(outputs: &[S]) -> usize {
    assert!(!outputs.is_empty(), "a vote needs at least one member");
    let norm: Vec<String> = outputs.iter().map(|o| normalise(o.as_ref())).collect();
    // distinct texts with their supporters (member indices, ascending)
    let mut texts: Vec<(&str, Vec<usize>)> = Vec::new();
    for (j, t) in norm.iter().enumerate() {
        match texts.iter_mut().find(|(x, _)| *x == t.as_str()) {
            Some((_, who)) => who.push(j),
            None => texts.push((t, vec![j])),
        }
    }
    let top = texts.iter().map(|(_, who)| who.len()).max().unwrap();
    let tied: Vec<&(&str, Vec<usize>)> = texts.iter().filter(|(_, who)| who.len() == top).collect();
    let best = if tied.len() == 1 {
        tied[0]
    } else {
        // sum of char F1 (in percentage points) to the members that produced another text;
        // every tied text has k - top of them
        let agreement = |t: &str| -> u64 {
            norm.iter().filter(|o| o.as_str() != t).map(|o| (textmatch::char_f1(t, o) * 100.0).round() as u64).sum()
        };
        *tied.iter().max_by_key(|(t, who)| (agreement(t), *who.last().unwrap())).unwrap()
    };
    *best.1.last().unwrap()
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

/// The members of one example must have scored the same text wherever they say which
/// (item_hash); refused otherwise, naming the example and both steps.
fn check_same_item(task: &str, id: &str, seq: &[&ExampleRecord]) -> Result<()> {
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
    Ok(())
}

/// The first item hash a window's members know, or "" (unknown).
fn window_hash(window: &[&ExampleRecord]) -> String {
    window.iter().map(|r| r.item_hash.as_str()).find(|h| !h.is_empty()).unwrap_or("").to_string()
}

/// Ensembles of the `k` checkpoints ending at each step (from the k-th step on), for every
/// example of every multiple-choice or minimal-pair task in `rows`, and, with [`Rule::Vote`],
/// of every generation task ([`vote_text`]); the mean rules leave generation rows out.
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
        check_same_item(task, id, &seq)?;
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
                item_hash: window_hash(window),
                targets: Vec::new(),
                score_names: Vec::new(),
                score_values: Vec::new(),
            });
        }
    }
    if rule.ensembles_text() {
        out.extend(vote_rows(rows, k)?);
    }
    out.sort_by(|a, b| (a.step, &a.task, &a.example_id).cmp(&(b.step, &b.task, &b.example_id)));
    Ok(out)
}

/// The vote over texts ([`vote_text`]) of every generation example of `rows`, per window of `k`.
fn vote_rows(rows: &[ExampleRecord], k: usize) -> Result<Vec<ExampleRecord>> {
    let mut by_example: BTreeMap<(&str, &str), Vec<&ExampleRecord>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.is_generation()) {
        by_example.entry((&r.task, &r.example_id)).or_default().push(r);
    }
    let mut out = Vec::new();
    for ((task, id), mut seq) in by_example {
        seq.sort_by_key(|r| r.step);
        check_same_item(task, id, &seq)?;
        if let Some(r) = seq.iter().find(|r| r.targets != seq[0].targets) {
            bail!(
                "task {task} example {id}: other gold texts at step {} than at step {}; the checkpoints scored different answers",
                r.step,
                seq[0].step
            );
        }
        for end in k - 1..seq.len() {
            let window = &seq[end + 1 - k..=end];
            let chosen = window[vote_text(&window.iter().map(|r| r.output.as_str()).collect::<Vec<_>>())];
            out.push(ExampleRecord { step: window[k - 1].step, item_hash: window_hash(window), ..chosen.clone() });
        }
    }
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

    fn gen(step: u64, output: &str) -> ExampleRecord {
        ExampleRecord {
            step,
            task: "g".into(),
            example_id: "g/0".into(),
            output: output.into(),
            correct: output.trim() == "42",
            correct_norm: output.trim() == "42",
            gold_is_greedy: output.trim() == "42",
            targets: vec!["42".into()],
            score_names: vec!["exact_match".into()],
            score_values: vec![f64::from(u8::from(output.trim() == "42"))],
            ..Default::default()
        }
    }

    #[test]
    fn normalisation_is_nfkc_with_whitespace_trimmed_and_collapsed_and_case_kept() {
        assert_eq!(normalise("  ＡＢ１\t\n two   words\u{3000}"), "AB1 two words");
        assert_eq!(normalise("Paris"), "Paris");
        assert_ne!(normalise("Paris"), normalise("paris"), "case is kept");
        assert_eq!(normalise(""), "");
    }

    /// Two of three members say the same text up to whitespace: it wins, and the row is the
    /// later of those two; a unanimous window takes the latest member.
    #[test]
    fn the_majority_text_wins_and_its_latest_supporter_gives_the_row() {
        assert_eq!(vote_text(&["42", "the answer is 7", " 42\n"]), 2);
        assert_eq!(vote_text(&[" 42", "42  ", "the answer is 7"]), 1);
        assert_eq!(vote_text(&["a", "a", "a"]), 2);
        assert_eq!(vote_text(&["only"]), 0);
        // a two-way tie: char F1 is symmetric, so the latest supporter decides
        assert_eq!(vote_text(&["x y", "x", "x", "x y"]), 3);
        assert_eq!(vote_text(&["x y", "x", "x y", "x"]), 3);
    }

    /// The mean rules leave generation rows out; the vote ensembles them and leaves the
    /// multiple-choice rows as it makes them without generation rows.
    #[test]
    fn only_the_vote_ensembles_text_and_mixed_tables_keep_their_choice_ensembles() {
        let mc = vec![row(0, vec![-1.0, -2.0, -3.0]), row(10, vec![-2.0, -1.0, -3.0]), row(20, vec![-1.0, -3.0, -2.0])];
        let text = vec![gen(0, "42"), gen(10, "41"), gen(20, " 42 ")];
        let mixed: Vec<ExampleRecord> = mc.iter().chain(&text).cloned().collect();
        for rule in [Rule::Distribution, Rule::Sequence, Rule::Vote] {
            for k in 1..=3 {
                let alone = ensemble_rows(&mc, k, rule).unwrap();
                let both = ensemble_rows(&mixed, k, rule).unwrap();
                let choice: Vec<ExampleRecord> = both.iter().filter(|r| !r.is_generation()).cloned().collect();
                assert_eq!(choice, alone, "{rule:?} k={k}");
                let texts = both.len() - choice.len();
                assert_eq!(texts, if rule == Rule::Vote { 4 - k } else { 0 }, "{rule:?} k={k}");
            }
        }
        let v = ensemble_rows(&text, 3, Rule::Vote).unwrap();
        assert_eq!(v, vec![ExampleRecord { step: 20, ..text[2].clone() }]);
        let v = ensemble_rows(&text, 2, Rule::Vote).unwrap();
        // windows {0, 10} and {10, 20}: 1-1 ties, the latest member wins each
        assert_eq!(v, vec![text[1].clone(), text[2].clone()]);
    }

    /// Members of a generation example whose gold texts or item hashes differ are refused.
    #[test]
    fn members_of_other_gold_texts_are_refused() {
        let other = ExampleRecord { targets: vec!["43".into()], ..gen(10, "42") };
        let err = ensemble_rows(&[gen(0, "42"), other], 2, Rule::Vote).unwrap_err().to_string();
        assert!(err.contains("example g/0") && err.contains("gold texts") && err.contains("step 10"), "{err}");
        let h = |step, c: &str| ExampleRecord { item_hash: c.repeat(64), ..gen(step, "42") };
        let err = ensemble_rows(&[h(0, "a"), h(10, "b")], 1, Rule::Vote).unwrap_err().to_string();
        assert!(err.contains("other text at step 10"), "{err}");
    }
}
