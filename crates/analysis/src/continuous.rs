//! Per-example metrics derived from the stored option log-likelihoods, beside 0/1 accuracy.
//!
//! Every example row keeps each option's summed log-likelihood, and its length in characters,
//! tokens and UTF-8 bytes, so these are derived offline, for any checkpoint, average or ensemble:
//! - `acc`, `acc_norm`: 0/1 correctness (lm-evaluation-harness's definitions);
//! - `gold_logprob`: the gold continuation's summed log-likelihood (nats);
//! - `gold_prob`: the gold option's probability normalised over the options,
//!   `exp(ll_gold) / sum_j exp(ll_j)` (multiple choice only);
//! - `margin`: `ll_gold - max_{j != gold} ll_j` (multiple choice only; > 0 iff `acc` is right
//!   apart from ties);
//! - `bits_per_byte`: `-ll_gold / (ln 2 * bytes_gold)` (lower is better; needs byte counts,
//!   which tables of version 1 lack);
//! - `char_f1`: llm-jp-eval's character F1 of a generation task's output against its gold
//!   texts, the best over them (`textmatch::char_f1`; generation rows only).
//!
//! A generation row (gold texts, no options: `ExampleRecord::is_generation`) has `acc` (its exact
//! match) and `char_f1`, nothing else: no log-likelihoods, and `acc_norm` would repeat `acc`.
//!
//! Continuous metrics move when a model grows more or less sure of an answer without the
//! decision changing, so their fluctuation is measured with far less evaluation noise than
//! accuracy's.

use records::ExampleRecord;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    Acc,
    AccNorm,
    GoldLogprob,
    GoldProb,
    Margin,
    BitsPerByte,
    CharF1,
}

impl Metric {
    pub const ALL: [Metric; 7] = [
        Metric::Acc,
        Metric::AccNorm,
        Metric::GoldLogprob,
        Metric::GoldProb,
        Metric::Margin,
        Metric::BitsPerByte,
        Metric::CharF1,
    ];
    /// The metrics the claims are checked on ("every metric" of the claims table).
    pub const CLAIMS: [Metric; 4] = [Metric::Acc, Metric::AccNorm, Metric::GoldLogprob, Metric::Margin];

    pub fn name(self) -> &'static str {
        match self {
            Metric::Acc => "acc",
            Metric::AccNorm => "acc_norm",
            Metric::GoldLogprob => "gold_logprob",
            Metric::GoldProb => "gold_prob",
            Metric::Margin => "margin",
            Metric::BitsPerByte => "bits_per_byte",
            Metric::CharF1 => "char_f1",
        }
    }

    pub fn parse(s: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == s)
    }

    /// 0/1 per example (the sign-flip null then has its exact McNemar form).
    pub fn is_binary(self) -> bool {
        matches!(self, Metric::Acc | Metric::AccNorm)
    }

    /// The metric's value on one example row, `None` where it is not defined (one option for
    /// `gold_prob` and `margin`; no byte count for `bits_per_byte`; `char_f1` of a
    /// multiple-choice row; anything but `acc` and `char_f1` of a generation row).
    pub fn value(self, r: &ExampleRecord) -> Option<f64> {
        let g = r.gold as usize;
        let ll = &r.logliks;
        if r.is_generation() {
            return match self {
                Metric::Acc => Some(f64::from(u8::from(r.correct))),
                Metric::CharF1 => Some(textmatch::best_of(&r.output, &r.targets, textmatch::char_f1)),
                _ => None,
            };
        }
        match self {
            Metric::Acc => Some(f64::from(u8::from(r.correct))),
            Metric::AccNorm => Some(f64::from(u8::from(r.correct_norm))),
            Metric::GoldLogprob => ll.get(g).copied(),
            Metric::GoldProb if ll.len() > 1 => {
                let max = ll.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let z: f64 = ll.iter().map(|l| (l - max).exp()).sum();
                Some((ll[g] - max).exp() / z)
            }
            Metric::Margin if ll.len() > 1 => {
                let other =
                    ll.iter().enumerate().filter(|(j, _)| *j != g).map(|(_, l)| *l).fold(f64::NEG_INFINITY, f64::max);
                Some(ll[g] - other)
            }
            Metric::BitsPerByte => match r.lengths_bytes.get(g) {
                Some(&b) if b > 0 => Some(-ll[g] / (std::f64::consts::LN_2 * b as f64)),
                _ => None,
            },
            Metric::GoldProb | Metric::Margin | Metric::CharF1 => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(logliks: Vec<f64>, gold: u32, bytes: Vec<u32>) -> ExampleRecord {
        let n = logliks.len();
        let pred = records::argmax(&logliks) as u32;
        ExampleRecord {
            step: 0,
            task: "t".into(),
            example_id: "t/0".into(),
            gold,
            predicted: pred,
            predicted_norm: pred,
            correct: pred == gold,
            correct_norm: pred == gold,
            logliks,
            lengths_chars: vec![1; n],
            lengths_tokens: vec![1; n],
            lengths_bytes: bytes,
            gold_is_greedy: false,
            output: pred.to_string(),
            item_hash: String::new(),
            targets: Vec::new(),
            score_names: Vec::new(),
            score_values: Vec::new(),
        }
    }

    #[test]
    fn hand_worked_values() {
        // ln 2, ln 1, ln 1: probabilities 2/4, 1/4, 1/4
        let r = row(vec![2f64.ln() - 5.0, -5.0, -5.0], 0, vec![4, 5, 6]);
        assert_eq!(Metric::Acc.value(&r), Some(1.0));
        assert!((Metric::GoldProb.value(&r).unwrap() - 0.5).abs() < 1e-12);
        assert!((Metric::Margin.value(&r).unwrap() - 2f64.ln()).abs() < 1e-12);
        assert!((Metric::GoldLogprob.value(&r).unwrap() - (2f64.ln() - 5.0)).abs() < 1e-12);
        // -ll / (ln 2 * bytes): 5 - ln 2 nats over 4 bytes
        assert!((Metric::BitsPerByte.value(&r).unwrap() - (5.0 - 2f64.ln()) / (2f64.ln() * 4.0)).abs() < 1e-12);
        let wrong = row(vec![-3.0, -1.0], 0, vec![]);
        assert_eq!(Metric::Acc.value(&wrong), Some(0.0));
        assert!((Metric::Margin.value(&wrong).unwrap() + 2.0).abs() < 1e-12);
        assert_eq!(Metric::BitsPerByte.value(&wrong), None, "no byte counts (table version 1)");
        let cloze = row(vec![-3.0], 0, vec![3]);
        assert_eq!((Metric::GoldProb.value(&cloze), Metric::Margin.value(&cloze)), (None, None));
        // very negative log-likelihoods do not underflow the normalised probability
        let far = row(vec![-2000.0, -2001.0], 0, vec![1, 1]);
        assert!((Metric::GoldProb.value(&far).unwrap() - 1.0 / (1.0 + (-1f64).exp())).abs() < 1e-12);
        for m in Metric::ALL {
            assert_eq!(Metric::parse(m.name()), Some(m));
        }
        assert_eq!(Metric::CharF1.value(&r), None, "multiple choice has no char F1");
    }

    /// A generation row: acc is its exact match, char_f1 the best over its gold texts, and no
    /// metric of the options is defined (no panic on the empty log-likelihoods).
    #[test]
    fn generation_rows_have_acc_and_char_f1_only() {
        let mut r = row(vec![], 0, vec![]);
        r.output = "the cat sat".into();
        r.targets = vec!["a dog".into(), "the cat sat down".into()];
        (r.correct, r.correct_norm) = (false, false);
        assert_eq!(Metric::Acc.value(&r), Some(0.0));
        let f1 = Metric::CharF1.value(&r).unwrap();
        assert_eq!(f1, textmatch::char_f1("the cat sat", "the cat sat down"));
        assert!(f1 > textmatch::char_f1("the cat sat", "a dog") && f1 < 1.0);
        for m in [Metric::AccNorm, Metric::GoldLogprob, Metric::GoldProb, Metric::Margin, Metric::BitsPerByte] {
            assert_eq!(m.value(&r), None, "{}", m.name());
        }
        r.output = "a dog".into();
        assert_eq!(Metric::CharF1.value(&r), Some(1.0));
        assert!(!Metric::CharF1.is_binary());
    }

    /// An empty gold continuation (0 bytes) has no bits per byte, not an infinite one (the
    /// survivor of mutation testing: the guard `b > 0` replaced by `true` or `>=`).
    #[test]
    fn no_bits_per_byte_of_an_empty_continuation() {
        let empty = row(vec![-1.0, -2.0], 0, vec![0, 3]);
        assert_eq!(Metric::BitsPerByte.value(&empty), None);
        let one = row(vec![-1.0, -2.0], 0, vec![1, 3]);
        assert!((Metric::BitsPerByte.value(&one).unwrap() - 1.0 / 2f64.ln()).abs() < 1e-12);
    }
}
