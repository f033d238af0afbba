//! Helpers of `properties.rs`: tolerances, input strategies, and the exact-expectation
//! (enumeration) routine that several properties use as their independent truth.
//!
//! Floating-point tolerances: every quantity here is a sum of at most a few thousand terms of
//! magnitude <= 1e4. A sum of n terms computed in f64 is off by at most n * 2^-53 * sum|x_i|
//! (~1.1e-16 n sum|x_i|), so `close` allows 1e-9 relative plus 1e-12 absolute error: several
//! orders of magnitude above the worst rounding, and far below any real violation tested here
//! (a wrong constant, window, sign or index changes a value by a relative 1e-3 or more).
//! `close_to_scale` is the absolute form, for values that may cancel to near 0: error at most
//! 1e-9 times the magnitude of the inputs.
#![allow(dead_code)]

use proptest::prelude::*;

pub fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()) + 1e-12
}

/// `|a - b| <= 1e-9 * scale + 1e-12`, for a and b computed from inputs of magnitude <= scale.
pub fn close_to_scale(a: f64, b: f64, scale: f64) -> bool {
    (a - b).abs() <= 1e-9 * scale + 1e-12
}

/// Largest magnitude in x (at least 1).
pub fn scale_of(x: &[f64]) -> f64 {
    x.iter().fold(1.0, |m, v| m.max(v.abs()))
}

/// Scores in a range typical of accuracies and losses.
pub fn series(min_len: usize) -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(-100.0..100.0f64, min_len..60)
}

/// k distributions over n classes, every component at least 1e-6 before normalising (so logs
/// are finite).
pub fn members(max_k: usize) -> impl Strategy<Value = Vec<Vec<f64>>> {
    (2usize..8).prop_flat_map(move |n| {
        prop::collection::vec(
            prop::collection::vec(1e-6..1.0f64, n).prop_map(|w| theory::mixture::normalise(&w)),
            1..=max_k,
        )
    })
}

/// The sign (+1 or -1) of bit `i` of an outcome index.
pub fn sign(outcome: u64, i: usize) -> f64 {
    if (outcome >> i) & 1 == 1 {
        1.0
    } else {
        -1.0
    }
}

/// The exact variance of a statistic of `bits` independent fair signs (Rademacher variables), by
/// enumerating all 2^bits equally likely outcomes: the population variance of the statistic over
/// them. No sampling error: this is the expectation itself.
pub fn exact_variance_over_signs(bits: usize, stat: impl Fn(u64) -> f64) -> f64 {
    let n = 1u64 << bits;
    let values: Vec<f64> = (0..n).map(stat).collect();
    let mean = values.iter().sum::<f64>() / n as f64;
    values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64
}

/// The exact mean of a statistic of `bits` independent fair signs, by enumeration.
pub fn exact_mean_over_signs(bits: usize, stat: impl Fn(u64) -> f64) -> f64 {
    let n = 1u64 << bits;
    (0..n).map(stat).sum::<f64>() / n as f64
}
