//! Signal-plus-noise sequences and the exact variance of the mean of k of their terms.
//!
//! Three noise models: i.i.d. with variance sigma^2; stationary AR(1),
//! `e_t = rho e_{t-1} + sqrt(1 - rho^2) sigma z_t` (marginal variance sigma^2, lag-h correlation
//! rho^|h|); and k members with common variance sigma^2 and pairwise correlation rho.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Var(mean of k i.i.d. terms) = sigma^2 / k.
pub fn var_mean_iid(sigma2: f64, k: usize) -> f64 {
    sigma2 / k as f64
}

/// Var(mean of k consecutive stationary AR(1) terms), by the covariance sum:
/// `sigma^2 / k^2 * (k + 2 sum_{h=1}^{k-1} (k - h) rho^h)`.
pub fn var_mean_ar1(sigma2: f64, rho: f64, k: usize) -> f64 {
    let k_f = k as f64;
    let lagged: f64 = (1..k).map(|h| (k - h) as f64 * rho.powi(h as i32)).sum();
    sigma2 / (k_f * k_f) * (k_f + 2.0 * lagged)
}

/// The same variance in closed form (geometric sums done), for rho != 1:
/// `sigma^2 / k^2 * ( k (1 + rho) / (1 - rho) - 2 rho (1 - rho^k) / (1 - rho)^2 )`.
pub fn var_mean_ar1_closed(sigma2: f64, rho: f64, k: usize) -> f64 {
    let k_f = k as f64;
    sigma2 / (k_f * k_f)
        * (k_f * (1.0 + rho) / (1.0 - rho) - 2.0 * rho * (1.0 - rho.powi(k as i32)) / (1.0 - rho).powi(2))
}

/// Var(mean of k members with variance sigma^2 and pairwise correlation rho)
/// = sigma^2 (rho + (1 - rho) / k).
pub fn var_mean_equicorrelated(sigma2: f64, rho: f64, k: usize) -> f64 {
    sigma2 * (rho + (1.0 - rho) / k as f64)
}

/// Var(mean) straight from a covariance matrix: `1/k^2 * sum_ij C_ij` (the definition, used to
/// check the formulas above).
pub fn var_mean_from_cov(cov: impl Fn(usize, usize) -> f64, k: usize) -> f64 {
    let mut s = 0.0;
    for i in 0..k {
        for j in 0..k {
            s += cov(i, j);
        }
    }
    s / (k * k) as f64
}

/// A standard normal draw (Box-Muller; deterministic for a seeded generator).
pub fn std_normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = rng.gen_range(f64::EPSILON..1.0);
    let u2: f64 = rng.gen();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// n terms of a stationary AR(1) sequence with marginal variance sigma^2.
pub fn ar1(rng: &mut ChaCha8Rng, n: usize, rho: f64, sigma: f64) -> Vec<f64> {
    let mut out = Vec::with_capacity(n);
    let mut e = sigma * std_normal(rng);
    for _ in 0..n {
        out.push(e);
        e = rho * e + (1.0 - rho * rho).sqrt() * sigma * std_normal(rng);
    }
    out
}

/// Unbiased sample variance.
pub fn sample_variance(x: &[f64]) -> f64 {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)
}
