//! Categorical distributions and ensembles (the mean of the members' distributions).

/// Normalises positive weights into a distribution.
pub fn normalise(w: &[f64]) -> Vec<f64> {
    let s: f64 = w.iter().sum();
    w.iter().map(|v| v / s).collect()
}

/// The ensemble: the mean of the members' distributions, component by component.
pub fn ensemble(members: &[Vec<f64>]) -> Vec<f64> {
    let k = members.len() as f64;
    (0..members[0].len()).map(|c| members.iter().map(|p| p[c]).sum::<f64>() / k).collect()
}

/// Cross-entropy of a target distribution q under p: `-sum_c q_c ln p_c` (0 ln 0 = 0).
pub fn cross_entropy(q: &[f64], p: &[f64]) -> f64 {
    q.iter().zip(p).filter(|(qc, _)| **qc > 0.0).map(|(qc, pc)| -qc * pc.ln()).sum()
}

/// Shannon entropy in nats.
pub fn entropy(p: &[f64]) -> f64 {
    cross_entropy(p, p)
}

/// KL(p || q) in nats.
pub fn kl(p: &[f64], q: &[f64]) -> f64 {
    cross_entropy(p, q) - entropy(p)
}

/// Generalised Jensen-Shannon divergence of k members with uniform weights:
/// `H(mean p_i) - mean H(p_i)`.
pub fn jensen_shannon(members: &[Vec<f64>]) -> f64 {
    let k = members.len() as f64;
    entropy(&ensemble(members)) - members.iter().map(|p| entropy(p)).sum::<f64>() / k
}

/// `ln(arithmetic mean / geometric mean)` of positive numbers: the Jensen gap of `-ln`.
pub fn log_am_over_gm(x: &[f64]) -> f64 {
    let k = x.len() as f64;
    (x.iter().sum::<f64>() / k).ln() - x.iter().map(|v| v.ln()).sum::<f64>() / k
}

/// Index of the largest component (first on ties), the prediction of a scored-choice task.
pub fn argmax(p: &[f64]) -> usize {
    p.iter().enumerate().fold(0, |best, (i, &v)| if v > p[best] { i } else { best })
}
