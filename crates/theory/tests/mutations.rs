//! Mutation checks: each property of `properties.rs` that is run here against a deliberately
//! broken implementation must fail, so the properties are shown able to fail.

mod common;

use common::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

fn runner() -> TestRunner {
    TestRunner::new(Config { cases: 1000, failure_persistence: None, ..Config::default() })
}

/// Var(mean of k i.i.d.) with k - 1 in the denominator (the sample-variance slip).
fn iid_divided_by_k_minus_1(sigma2: f64, k: usize) -> f64 {
    sigma2 / (k as f64 - 1.0).max(1.0)
}

/// The AR(1) formula with the factor 2 of the off-diagonal terms lost.
fn ar1_missing_factor_two(sigma2: f64, rho: f64, k: usize) -> f64 {
    let k_f = k as f64;
    let lagged: f64 = (1..k).map(|h| (k - h) as f64 * rho.powi(h as i32)).sum();
    sigma2 / (k_f * k_f) * (k_f + lagged)
}

/// A "moving average" that divides the window sum by k - 1.
fn ma_divided_by_k_minus_1(x: &[f64], k: usize) -> Vec<f64> {
    x.windows(k).map(|w| w.iter().sum::<f64>() / (k as f64 - 1.0).max(1.0)).collect()
}

/// An "ensemble" that sums the members' probabilities instead of averaging them.
fn ensemble_sum(members: &[Vec<f64>]) -> Vec<f64> {
    (0..members[0].len()).map(|c| members.iter().map(|p| p[c]).sum()).collect()
}

#[test]
fn iid_variance_property_catches_k_minus_1() {
    let r = runner().run(&(1e-3..1e3f64, 1usize..64), |(s, k)| iid_formula_matches_definition(s, k, iid_divided_by_k_minus_1));
    assert!(r.is_err(), "the broken formula passed");
    // and the real formula passes the same run
    runner().run(&(1e-3..1e3f64, 1usize..64), |(s, k)| iid_formula_matches_definition(s, k, theory::noise::var_mean_iid)).unwrap();
}

#[test]
fn ar1_variance_property_catches_a_lost_factor() {
    let strat = (1e-3..1e3f64, -0.95..0.95f64, 1usize..64);
    assert!(runner().run(&strat, |(s, r, k)| ar1_formula_matches_definition(s, r, k, ar1_missing_factor_two)).is_err());
    runner().run(&strat, |(s, r, k)| ar1_formula_matches_definition(s, r, k, theory::noise::var_mean_ar1)).unwrap();
}

#[test]
fn total_variation_property_catches_a_mis_scaled_moving_average() {
    let strat = (series(3), 2usize..20).prop_map(|(x, k)| {
        let k = k.min(x.len());
        (x, k)
    });
    assert!(runner().run(&strat, |(x, k)| ma_never_raises_total_variation(&x, k, ma_divided_by_k_minus_1)).is_err());
    runner().run(&strat, |(x, k)| ma_never_raises_total_variation(&x, k, theory::sequence::moving_average)).unwrap();
}

#[test]
fn distribution_property_catches_a_summed_ensemble() {
    let strat = members(8).prop_filter("two or more members", |m| m.len() >= 2);
    assert!(runner().run(&strat, |m| ensemble_is_a_distribution(&m, ensemble_sum)).is_err());
    runner().run(&strat, |m| ensemble_is_a_distribution(&m, theory::mixture::ensemble)).unwrap();
}
