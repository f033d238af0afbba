//! Intervals for a proportion that stay inside [0, 1]: the final accuracy of a checkpoint is `k`
//! right out of `n` examples. The bootstrap's reflected interval leaves [0, 1] near the bounds
//! (2/64: [-0.016, 0.063]) and collapses to [0, 0] at 0/n; the Wilson score interval (Wilson
//! 1927; Agresti and Coull 1998 recommend it over the Wald interval for any n) cannot leave
//! [0, 1], is never of zero width for n > 0, and contains k/n.

use crate::power::z;

/// The two-sided Wilson score interval at `level` for `k` successes out of `n`:
/// `(p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)`, with `p = k/n` and
/// `z = z(1 - (1 - level)/2)`; clamped to [0, 1] against rounding, and exactly 0 (1) at
/// k = 0 (n). `None` when `n == 0` or `k > n`.
pub fn wilson(k: u64, n: u64, level: f64) -> Option<(f64, f64)> {
    if n == 0 || k > n {
        return None;
    }
    let (nf, p) = (n as f64, k as f64 / n as f64);
    let z = z(1.0 - (1.0 - level) / 2.0);
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * nf)) / (1.0 + z2 / nf);
    let half = z * (p * (1.0 - p) / nf + z2 / (4.0 * nf * nf)).sqrt() / (1.0 + z2 / nf);
    let low = if k == 0 { 0.0 } else { (centre - half).clamp(0.0, 1.0) };
    let high = if k == n { 1.0 } else { (centre + half).clamp(0.0, 1.0) };
    Some((low, high))
}

/// The Wilson interval of a 0/1 mean `score` over `n` examples (k = round(score n)).
pub fn wilson_of_mean(score: f64, n: usize, level: f64) -> Option<(f64, f64)> {
    if !score.is_finite() || !(0.0..=1.0).contains(&score) {
        return None;
    }
    wilson((score * n as f64).round() as u64, n as u64, level)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Textbook values (Newcombe 1998, Table I: 0/10 and 1/29 ... here recomputed by hand).
    #[test]
    fn textbook_values() {
        let (lo, hi) = wilson(0, 10, 0.95).unwrap();
        assert_eq!(lo, 0.0);
        assert!((hi - 0.27753).abs() < 1e-4, "{hi}");
        let (lo, hi) = wilson(5, 10, 0.95).unwrap();
        assert!((lo - 0.23659).abs() < 1e-4 && (hi - 0.76341).abs() < 1e-4, "{lo} {hi}");
        assert_eq!(wilson(0, 0, 0.95), None);
        assert_eq!(wilson(3, 2, 0.95), None);
    }

    /// The cases the bootstrap got wrong (issue 30): 0/n, 1/n, n-1 of n, n of n, and 2/64.
    #[test]
    fn the_bounds_hold_at_the_edges() {
        for n in [64u64, 200, 500, 1000] {
            for k in [0, 1, 2, 3, n - 3, n - 2, n - 1, n] {
                let (lo, hi) = wilson(k, n, 0.95).unwrap();
                let p = k as f64 / n as f64;
                assert!((0.0..=1.0).contains(&lo) && (0.0..=1.0).contains(&hi), "{k}/{n}: [{lo}, {hi}]");
                assert!(lo <= p && p <= hi, "{k}/{n}: [{lo}, {hi}] misses {p}");
                assert!(hi - lo > 1e-3, "{k}/{n}: degenerate [{lo}, {hi}]");
            }
        }
        let (lo, hi) = wilson(2, 64, 0.95).unwrap();
        assert!(lo > 0.0 && (lo - 0.00863).abs() < 1e-4 && (hi - 0.10700).abs() < 1e-4, "[{lo}, {hi}]");
        assert_eq!(wilson(500, 500, 0.95).unwrap().1, 1.0);
    }

    /// A mean score is `k / n` rounded back to `k`; a score outside [0, 1] or not finite has no
    /// interval.
    #[test]
    fn the_interval_of_a_mean() {
        assert_eq!(wilson_of_mean(2.0 / 64.0, 64, 0.95), wilson(2, 64, 0.95));
        assert_eq!(wilson_of_mean(1.0, 64, 0.95), wilson(64, 64, 0.95));
        assert_eq!(wilson_of_mean(0.0, 10, 0.9), wilson(0, 10, 0.9));
        // a mean of 0/1 scores stored in f32 and read back: 0.3 of 10 is 3
        assert_eq!(wilson_of_mean(f64::from(0.3f32), 10, 0.95), wilson(3, 10, 0.95));
        for bad in [-0.25, -1e-9, 1.0 + 1e-9, 1.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(wilson_of_mean(bad, 8, 0.95), None, "{bad}");
        }
        assert_eq!(wilson_of_mean(0.5, 0, 0.95), None);
    }

    proptest! {
        /// Inside [0, 1], around k/n, symmetric under k -> n - k, narrower at a lower level.
        #[test]
        fn an_interval_of_a_proportion(n in 1u64..5000, frac in 0.0..=1.0f64) {
            let k = (frac * n as f64).floor() as u64;
            let (lo, hi) = wilson(k, n, 0.95).unwrap();
            let p = k as f64 / n as f64;
            prop_assert!(0.0 <= lo && lo <= p && p <= hi && hi <= 1.0);
            let (lo2, hi2) = wilson(n - k, n, 0.95).unwrap();
            prop_assert!((lo - (1.0 - hi2)).abs() < 1e-12 && (hi - (1.0 - lo2)).abs() < 1e-12);
            let (l9, h9) = wilson(k, n, 0.9).unwrap();
            prop_assert!(l9 >= lo - 1e-15 && h9 <= hi + 1e-15);
        }
    }

    /// Coverage of the true p by the 95% interval, computed exactly over the binomial: at least
    /// 0.92 at every p of a grid for n = 64 and 500 (Wilson's coverage oscillates around the level;
    /// its minimum over p is about 0.93 at these n, never the Wald interval's collapse near 0).
    #[test]
    fn exact_coverage_is_near_the_level() {
        use statrs::distribution::{Binomial, Discrete};
        for n in [64u64, 500] {
            let mut worst: f64 = 1.0;
            for i in 1..100 {
                let p = i as f64 / 100.0;
                let b = Binomial::new(p, n).unwrap();
                let cover: f64 = (0..=n)
                    .filter(|&k| {
                        let (lo, hi) = wilson(k, n, 0.95).unwrap();
                        lo <= p && p <= hi
                    })
                    .map(|k| b.pmf(k))
                    .sum();
                worst = worst.min(cover);
            }
            assert!(worst >= 0.92, "n = {n}: worst coverage {worst}");
        }
    }
}
