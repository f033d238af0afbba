//! The property checks, written as functions of the implementation under test, so that
//! `properties.rs` runs them on the real definitions and `mutations.rs` shows that they fail on
//! deliberately broken ones.
//!
//! Floating-point tolerances: every quantity here is a sum of at most a few hundred terms of
//! magnitude <= 1e3. A sum of n terms computed in f64 is off by at most n * 2^-53 * sum|x_i|
//! (~1.1e-16 n sum|x_i|), so `close` allows 1e-9 relative plus 1e-12 absolute error: five orders
//! of magnitude above the worst rounding, and far below any real violation tested here.
#![allow(dead_code)]

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

pub fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()) + 1e-12
}

/// Scores in a range typical of accuracies and losses.
pub fn series(min_len: usize) -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(-100.0..100.0f64, min_len..60)
}

/// The sum form of the moving-average claim, for a given moving-average implementation:
/// `TV(MA_k(x)) <= TV(x)`.
pub fn ma_never_raises_total_variation(x: &[f64], k: usize, ma: fn(&[f64], usize) -> Vec<f64>) -> Result<(), TestCaseError> {
    let tv_x = theory::sequence::total_variation(x);
    let tv_ma = theory::sequence::total_variation(&ma(x, k));
    prop_assert!(tv_ma <= tv_x * (1.0 + 1e-12) + 1e-9, "TV(MA_{k}) = {tv_ma} > TV(x) = {tv_x}");
    Ok(())
}

/// An i.i.d.-mean variance formula against the definition `1/k^2 sum_ij Cov_ij` with
/// `Cov = sigma^2 I`.
pub fn iid_formula_matches_definition(sigma2: f64, k: usize, formula: fn(f64, usize) -> f64) -> Result<(), TestCaseError> {
    let def = theory::noise::var_mean_from_cov(|i, j| if i == j { sigma2 } else { 0.0 }, k);
    prop_assert!(close(formula(sigma2, k), def), "formula {} vs definition {def} (k = {k})", formula(sigma2, k));
    Ok(())
}

/// An AR(1)-mean variance formula against the definition with `Cov_ij = sigma^2 rho^|i-j|`.
pub fn ar1_formula_matches_definition(sigma2: f64, rho: f64, k: usize, formula: fn(f64, f64, usize) -> f64) -> Result<(), TestCaseError> {
    let def = theory::noise::var_mean_from_cov(|i, j| sigma2 * rho.powi((i as i32 - j as i32).abs()), k);
    prop_assert!(close(formula(sigma2, rho, k), def), "formula {} vs definition {def}", formula(sigma2, rho, k));
    Ok(())
}

/// Any ensembling rule must return a distribution: non-negative components summing to 1.
pub fn ensemble_is_a_distribution(members: &[Vec<f64>], rule: fn(&[Vec<f64>]) -> Vec<f64>) -> Result<(), TestCaseError> {
    let e = rule(members);
    prop_assert!(e.iter().all(|&p| p >= 0.0));
    prop_assert!((e.iter().sum::<f64>() - 1.0).abs() < 1e-12, "sums to {}", e.iter().sum::<f64>());
    Ok(())
}

/// k distributions over n classes, every component at least 1e-6 (so logs are finite).
pub fn members(max_k: usize) -> impl Strategy<Value = Vec<Vec<f64>>> {
    (2usize..8).prop_flat_map(move |n| {
        prop::collection::vec(prop::collection::vec(1e-6..1.0f64, n).prop_map(|w| theory::mixture::normalise(&w)), 1..=max_k)
    })
}
