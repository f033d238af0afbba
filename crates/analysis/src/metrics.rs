//! The fluctuation measures, on plain vectors.
//!
//! Task level, on a score series s_1..s_m ordered by checkpoint step: MTV (the paper's mean total
//! variation, `theory::sequence::mtv`), the standard deviation of the series around its least-
//! squares line in the step number (so uneven spacing is handled by the steps), the number of
//! direction changes, and the largest drop between consecutive checkpoints. (What noise alone
//! would produce is in [`crate::nulls`], with its uncertainty in [`crate::bootstrap`].)
//!
//! Example level, on each example's 0/1 correctness over checkpoints: flips (right->wrong and
//! wrong->right), the flip rate (= the example's MTV), the instability score of its outputs,
//! whether it was learned and later forgotten, and whether it is stable over the final stage.

use crate::stats::mean;
use theory::sequence::{exact_match, instability};

/// Least-squares line of `y` against `x`; returns the residuals.
pub fn detrend(x: &[f64], y: &[f64]) -> Vec<f64> {
    let (mx, my) = (mean(x), mean(y));
    let sxx: f64 = x.iter().map(|v| (v - mx).powi(2)).sum();
    let sxy: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    x.iter().zip(y).map(|(a, b)| b - (my + slope * (a - mx))).collect()
}

/// Number of sign changes between consecutive non-zero increments.
pub fn direction_changes(x: &[f64]) -> usize {
    let signs: Vec<f64> = x.windows(2).map(|w| w[1] - w[0]).filter(|d| *d != 0.0).map(f64::signum).collect();
    signs.windows(2).filter(|w| w[0] != w[1]).count()
}

/// Largest fall `s_t - s_{t+1}` (0 if the series never falls) and the index t+1 where it lands.
pub fn largest_drop(x: &[f64]) -> (f64, Option<usize>) {
    x.windows(2)
        .enumerate()
        .fold((0.0, None), |best, (i, w)| if w[0] - w[1] > best.0 { (w[0] - w[1], Some(i + 1)) } else { best })
}

/// The last `fraction` of a series' points (at least `min` of them, at most all).
pub fn final_window(m: usize, fraction: f64, min: usize) -> std::ops::Range<usize> {
    let k = ((m as f64 * fraction).ceil() as usize).max(min).min(m);
    m - k..m
}

/// Per-example statistics of one example's correctness (and outputs) over checkpoints.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExampleStats {
    pub flips_to_wrong: u32,
    pub flips_to_right: u32,
    /// flips / (m - 1): the example's MTV
    pub flip_rate: f64,
    /// instability score of the outputs under exact match
    pub instability: f64,
    pub learned_then_forgotten: bool,
    /// index of the first checkpoint from which correctness never changes again
    pub stable_from: usize,
    pub final_correct: bool,
}

pub fn example_stats(correct: &[bool], outputs: &[&str]) -> ExampleStats {
    let m = correct.len();
    let mut s = ExampleStats::default();
    for t in 1..m {
        match (correct[t - 1], correct[t]) {
            (true, false) => {
                s.flips_to_wrong += 1;
                s.learned_then_forgotten = true;
                s.stable_from = t;
            }
            (false, true) => {
                s.flips_to_right += 1;
                s.stable_from = t;
            }
            _ => {}
        }
    }
    if m >= 2 {
        s.flip_rate = (s.flips_to_wrong + s.flips_to_right) as f64 / (m - 1) as f64;
        s.instability = instability(outputs, |a, b| exact_match(a, b)).unwrap_or(0.0);
    }
    s.final_correct = correct.last().copied().unwrap_or(false);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use theory::sequence::mtv;

    #[test]
    fn hand_worked_series() {
        let x = [0.2, 0.5, 0.4, 0.4, 0.7, 0.3];
        assert!((mtv(&x).unwrap() - (0.3 + 0.1 + 0.0 + 0.3 + 0.4) / 5.0).abs() < 1e-12);
        assert_eq!(direction_changes(&x), 3); // up, down, (flat), up, down
        let (d, at) = largest_drop(&x);
        assert!((d - 0.4).abs() < 1e-12 && at == Some(5));
        assert_eq!(largest_drop(&[0.1, 0.2]), (0.0, None));
        let r = detrend(&[0., 1., 2., 3.], &[1., 3., 5., 7.]);
        assert!(r.len() == 4 && r.iter().all(|v| v.abs() < 1e-12));
        // off the line: slope 1 / 5, fitted 0.2, 0.4, 0.6, 0.8
        let r = detrend(&[0., 1., 2., 3.], &[0., 1., 0., 1.]);
        for (got, want) in r.iter().zip([-0.2, 0.6, -0.6, 0.2]) {
            assert!((got - want).abs() < 1e-12, "{r:?}");
        }
        assert_eq!(r.len(), 4);
        assert_eq!(final_window(27, 0.2, 3), 21..27);
        assert_eq!(final_window(4, 0.2, 3), 1..4);
    }

    #[test]
    fn hand_worked_example() {
        let c = [false, true, true, false, true, true];
        let o = ["1", "0", "0", "2", "0", "0"];
        let s = example_stats(&c, &o);
        assert_eq!((s.flips_to_right, s.flips_to_wrong), (2, 1));
        assert!((s.flip_rate - 0.6).abs() < 1e-12);
        assert!((s.instability - 0.6).abs() < 1e-12);
        assert!(s.learned_then_forgotten && s.final_correct);
        assert_eq!(s.stable_from, 4);
        // a wrong answer turning into another wrong answer: IS moves, MTV does not
        let s = example_stats(&[false, false, false], &["1", "2", "3"]);
        assert_eq!((s.flip_rate, s.instability, s.stable_from), (0.0, 1.0, 0));
    }

    /// The edges: two checkpoints (one transition), one, none.
    #[test]
    fn examples_with_one_transition_or_none() {
        let s = example_stats(&[true, false], &["0", "1"]);
        assert_eq!((s.flips_to_wrong, s.flip_rate, s.instability, s.stable_from), (1, 1.0, 1.0, 1));
        assert!(s.learned_then_forgotten && !s.final_correct);
        let s = example_stats(&[true], &["0"]);
        assert_eq!(s, ExampleStats { final_correct: true, ..ExampleStats::default() });
        assert_eq!(example_stats(&[], &[]), ExampleStats::default());
    }

    /// A series at one step (no spread in x) is detrended around its mean, not into NaN; of two
    /// equal drops the first is named; a final window longer than the series is all of it.
    #[test]
    fn degenerate_series() {
        let r = detrend(&[5.0, 5.0, 5.0], &[0.1, 0.4, 0.4]);
        for (got, want) in r.iter().zip([-0.2, 0.1, 0.1]) {
            assert!((got - want).abs() < 1e-12, "{r:?}");
        }
        assert_eq!(largest_drop(&[0.5, 0.25, 0.5, 0.25]), (0.25, Some(1)));
        assert_eq!(direction_changes(&[0.1, 0.1, 0.1]), 0);
        assert_eq!(direction_changes(&[0.1, 0.2, 0.2, 0.1, 0.1, 0.3]), 2);
        assert_eq!(final_window(2, 0.2, 3), 0..2);
        assert_eq!(final_window(10, 1.0, 1), 0..10);
        assert_eq!(final_window(10, 0.25, 1), 7..10);
    }
}
