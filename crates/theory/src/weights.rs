//! Toy models in weight space: losses convex in the weights and one that is not, the uniform
//! average of k weight vectors (checkpoint averaging), and the noisy-checkpoint model
//! `theta_t = mu_t + eps_t`.

/// Uniform average of k weight vectors.
pub fn average(ws: &[Vec<f64>]) -> Vec<f64> {
    let k = ws.len() as f64;
    (0..ws[0].len()).map(|i| ws.iter().map(|w| w[i]).sum::<f64>() / k).collect()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Softmax-regression loss (convex in w): rows `x_c` give the logits `z_c = x_c . w`, and the
/// loss of label y is `logsumexp(z) - z_y`.
pub fn softmax_regression_loss(features: &[Vec<f64>], label: usize, w: &[f64]) -> f64 {
    let z: Vec<f64> = features.iter().map(|x| dot(x, w)).collect();
    let m = z.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    m + z.iter().map(|v| (v - m).exp()).sum::<f64>().ln() - z[label]
}

/// `0.5 ||B (w - a)||^2`, convex for every matrix B (rows of `b`).
pub fn quadratic_loss(b: &[Vec<f64>], a: &[f64], w: &[f64]) -> f64 {
    let d: Vec<f64> = w.iter().zip(a).map(|(x, y)| x - y).collect();
    0.5 * b.iter().map(|row| dot(row, &d).powi(2)).sum::<f64>()
}

/// A double well, `min(||w - a||^2, ||w + a||^2)`: two minima, not convex.
pub fn double_well_loss(a: &[f64], w: &[f64]) -> f64 {
    let sq = |s: f64| w.iter().zip(a).map(|(x, y)| (x - s * y).powi(2)).sum::<f64>();
    sq(1.0).min(sq(-1.0))
}

/// Expected squared distance between consecutive raw checkpoints under
/// `theta_t = mu_0 + t v + eps_t`, eps i.i.d. with covariance sigma^2 I_d: `||v||^2 + 2 d sigma^2`.
pub fn expected_sq_step_raw(v: &[f64], sigma2: f64) -> f64 {
    dot(v, v) + 2.0 * v.len() as f64 * sigma2
}

/// The same for consecutive k-window averages: the drift is kept, the noise shrinks by k^2,
/// `||v||^2 + 2 d sigma^2 / k^2` (the averages differ by `(theta_{t+1} - theta_{t+1-k}) / k`).
pub fn expected_sq_step_averaged(v: &[f64], sigma2: f64, k: usize) -> f64 {
    dot(v, v) + 2.0 * v.len() as f64 * sigma2 / (k * k) as f64
}
