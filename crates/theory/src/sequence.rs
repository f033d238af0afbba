//! Score sequences over checkpoints and the paper's two fluctuation metrics.
//!
//! For a sequence L_1..L_m (scores of one example or of a task, in checkpoint order):
//! `MTV = 1/(m-1) * sum_t |L_{t+1} - L_t|` (mean total variation), and for outputs x_1..x_m with a
//! similarity in [0, 1], `IS = 1/(m-1) * sum_t (1 - sim(x_t, x_{t+1}))` (instability score).

/// Sum of absolute increments, `sum_t |x_{t+1} - x_t|` (0 for fewer than two points).
pub fn total_variation(x: &[f64]) -> f64 {
    x.windows(2).map(|w| (w[1] - w[0]).abs()).sum()
}

/// Total variation of `x` over the positions `a..=b` (0-based, both ends included):
/// `sum_{t=a}^{b-1} |x_{t+1} - x_t|`; 0 when `a == b`. Use it to compare two sequences over the
/// same checkpoint positions, e.g. an averaged trail against the single checkpoints, or the
/// smoothing baseline `moving_average(x, k)` against `x`: the moving average's value at raw
/// position t is `moving_average(x, k)[t + 1 - k]` (defined for t >= k - 1), and over raw positions
/// `a..=b` its total variation is at most `total_variation_between(x, a + 1 - k, b)` (the
/// window-offset bound, `tests/properties.rs`). Panics unless `a <= b < x.len()`.
pub fn total_variation_between(x: &[f64], a: usize, b: usize) -> f64 {
    assert!(a <= b && b < x.len(), "positions {a}..={b} are not inside a sequence of {} points", x.len());
    total_variation(&x[a..=b])
}

/// Mean total variation: total variation divided by the number of transitions (m - 1).
/// `None` for fewer than two points, where it is undefined.
pub fn mtv(x: &[f64]) -> Option<f64> {
    (x.len() >= 2).then(|| total_variation(x) / (x.len() - 1) as f64)
}

/// Instability score of consecutive outputs under a similarity `sim` with values in [0, 1].
pub fn instability<T>(outputs: &[T], sim: impl Fn(&T, &T) -> f64) -> Option<f64> {
    (outputs.len() >= 2)
        .then(|| outputs.windows(2).map(|w| 1.0 - sim(&w[0], &w[1])).sum::<f64>() / (outputs.len() - 1) as f64)
}

/// Exact-match similarity: 1 if equal, else 0 (for chosen options and labels).
pub fn exact_match<T: PartialEq>(a: &T, b: &T) -> f64 {
    f64::from(u8::from(a == b))
}

/// Trailing moving average of window k: `y_t = mean(x_{t-k+1..=t})` for t = k-1..m-1
/// (m - k + 1 values; only full windows, as when averaging the last k checkpoints). The returned
/// vector starts at raw position k - 1: element i is the value at raw position i + k - 1.
/// Empty when m < k; panics when k = 0.
pub fn moving_average(x: &[f64], k: usize) -> Vec<f64> {
    assert!(k >= 1, "window must be at least 1");
    if x.len() < k {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(x.len() - k + 1);
    let mut sum: f64 = x[..k].iter().sum();
    out.push(sum / k as f64);
    for t in k..x.len() {
        sum += x[t] - x[t - k];
        out.push(sum / k as f64);
    }
    out
}

/// Exponential moving average `y_0 = x_0`, `y_t = (1 - a) y_{t-1} + a x_t`, with a in (0, 1].
pub fn ema(x: &[f64], a: f64) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for (t, &v) in x.iter().enumerate() {
        out.push(if t == 0 { v } else { (1.0 - a) * out[t - 1] + a * v });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check values of the study notes (`../shared/paper-notes.md` on the project's
    /// machines, not in this repository).
    #[test]
    fn paper_check_values() {
        assert_eq!(mtv(&[0., 1., 0., 1.]), Some(1.0));
        assert!((mtv(&[0., 0., 1., 1.]).unwrap() - 1.0 / 3.0).abs() < 1e-15);
        assert!((mtv(&[0.2, 0.5, 0.4]).unwrap() - 0.2).abs() < 1e-15);
        assert!((instability(&["A", "A", "B", "C"], exact_match).unwrap() - 2.0 / 3.0).abs() < 1e-15);
        let (a, b) = (mtv(&[0., 1., 0.]).unwrap(), mtv(&[1., 1., 1.]).unwrap());
        assert_eq!((a + b) / 2.0, 0.5);
        let (ia, ib) = (instability(&[0, 1, 1], exact_match).unwrap(), instability(&[2, 2, 2], exact_match).unwrap());
        assert_eq!((ia + ib) / 2.0, 0.25);
    }

    #[test]
    fn total_variation_between_by_hand() {
        let x = [0., 2., 1., 1., 4.];
        assert_eq!(total_variation_between(&x, 0, 4), 6.0);
        assert_eq!(total_variation_between(&x, 1, 3), 1.0);
        assert_eq!(total_variation_between(&x, 2, 2), 0.0);
        assert_eq!(total_variation_between(&x, 3, 4), 3.0);
    }

    #[test]
    #[should_panic(expected = "are not inside")]
    fn total_variation_between_rejects_reversed_positions() {
        total_variation_between(&[0., 1., 2., 3., 4.], 3, 1);
    }

    #[test]
    #[should_panic(expected = "are not inside")]
    fn total_variation_between_rejects_positions_past_the_end() {
        total_variation_between(&[0., 1., 2.], 1, 3);
    }

    #[test]
    #[should_panic(expected = "window must be at least 1")]
    fn moving_average_rejects_window_zero() {
        moving_average(&[1., 2.], 0);
    }

    #[test]
    fn moving_average_by_hand() {
        assert_eq!(moving_average(&[1., 2., 3., 4.], 2), vec![1.5, 2.5, 3.5]);
        assert_eq!(moving_average(&[1., 2.], 3), Vec::<f64>::new());
        assert_eq!(moving_average(&[1., 2., 6.], 3), vec![3.0]);
        assert_eq!(moving_average(&[1., 2., 6.], 1), vec![1., 2., 6.]);
        assert_eq!(ema(&[0., 1., 1.], 0.5), vec![0., 0.5, 0.75]);
    }
}
