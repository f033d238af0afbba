//! The descriptive statistics of the workspace, in one place and named apart (as lm-eval's
//! `api/metrics.py` names `mean`, `sample_stddev`, ...): the mean, the sample standard deviation
//! (divisor n - 1), the population standard deviation (divisor n), and numpy's default quantile
//! (`method="linear"`: linear interpolation between order statistics at position `q (n - 1)`,
//! Hyndman-Fan type 7). Every other module calls these rather than writing its own; the
//! inference built on them lives in [`crate::bootstrap`], [`crate::seeds`], [`crate::trend`].
//!
//! Edge rules: an empty slice has a NaN mean and population sd; the sample sd of fewer than two
//! values is 0 (no spread to measure; callers that need "undefined" there check the length);
//! [`quantile`] is NaN when it has nothing finite to order.

/// Arithmetic mean, `sum / n`; NaN when empty.
pub fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// Sum of squared deviations from the mean, `sum (x_i - mean)^2`; 0 when empty.
pub fn sum_of_squared_deviations(x: &[f64]) -> f64 {
    let m = mean(x);
    x.iter().map(|v| (v - m).powi(2)).sum::<f64>()
}

/// Sample variance, divisor `max(n - 1, 1)`: unbiased from two values on, 0 for one value (and
/// for none).
pub fn sample_variance(x: &[f64]) -> f64 {
    sum_of_squared_deviations(x) / (x.len() as f64 - 1.0).max(1.0)
}

/// Sample standard deviation, divisor `max(n - 1, 1)` (numpy's `ddof=1`, lm-eval's
/// `sample_stddev`): the sd of a sample as an estimate of its population's, and the standard
/// error of an estimate from its bootstrap draws. 0 for one value (and for none): check the
/// length first where fewer than two values must be "undefined".
pub fn sample_sd(x: &[f64]) -> f64 {
    sample_variance(x).sqrt()
}

/// Population standard deviation, divisor n (numpy's default `ddof=0`): the spread of the
/// values themselves, e.g. of a series around its trend. NaN when empty, 0 for one value.
pub fn population_sd(x: &[f64]) -> f64 {
    (sum_of_squared_deviations(x) / x.len() as f64).sqrt()
}

/// The q-quantile of ascending `sorted` by linear interpolation between order statistics
/// (numpy's default): position `h = q (n - 1)`, `sorted[floor h] + (h - floor h) (sorted[floor h + 1]
/// - sorted[floor h])`. NaN when `sorted` is empty or `q` is not in [0, 1]; the values are taken
/// as they are (not checked for order or finiteness: [`quantile`] does that).
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() || !(0.0..=1.0).contains(&q) {
        return f64::NAN;
    }
    let h = (sorted.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// The q-quantile of unsorted values, as [`quantile_sorted`] on a sorted copy. The NaN rule:
/// NaN when `values` is empty, when any value is not finite (NaN or infinite: no order, or no
/// interpolation, to speak of; filter them first to ignore them), or when `q` is not in [0, 1].
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.iter().any(|v| !v.is_finite()) {
        return f64::NAN;
    }
    let mut s = values.to_vec();
    s.sort_by(f64::total_cmp);
    quantile_sorted(&s, q)
}

#[cfg(test)]
mod tests {
    use super::*;

    const X: [f64; 8] = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];

    #[test]
    fn mean_and_sds_by_hand() {
        // mean 5; squared deviations 9, 1, 1, 1, 0, 0, 4, 16: sum 32
        assert_eq!(mean(&X), 5.0);
        assert_eq!(sum_of_squared_deviations(&X), 32.0);
        // population: sqrt(32 / 8) = 2; sample: sqrt(32 / 7) = 2.13808993...
        assert_eq!(population_sd(&X), 2.0);
        assert_eq!(sample_variance(&X), 32.0 / 7.0);
        assert!((sample_sd(&X) - 2.138_089_935_299_395).abs() < 1e-15, "{}", sample_sd(&X));
        // 1, 2, 3: sample sd 1, population sd sqrt(2/3)
        assert_eq!(sample_sd(&[1.0, 2.0, 3.0]), 1.0);
        assert!((population_sd(&[1.0, 2.0, 3.0]) - (2.0f64 / 3.0).sqrt()).abs() < 1e-15);
        // two values: divisor 1 for the sample, 2 for the population
        assert_eq!(sample_sd(&[1.0, 3.0]), 2.0f64.sqrt());
        assert_eq!(population_sd(&[1.0, 3.0]), 1.0);
        // shifting every value moves the mean, not the spread
        let shifted: Vec<f64> = X.iter().map(|v| v - 10.0).collect();
        assert_eq!((mean(&shifted), population_sd(&shifted)), (-5.0, 2.0));
    }

    #[test]
    fn empty_and_single_values() {
        assert!(mean(&[]).is_nan());
        assert!(population_sd(&[]).is_nan());
        assert_eq!(sum_of_squared_deviations(&[]), 0.0);
        // the divisor is max(n - 1, 1): nothing to spread is 0, not NaN
        assert_eq!(sample_sd(&[]), 0.0);
        assert_eq!(sample_variance(&[]), 0.0);
        assert_eq!(mean(&[3.5]), 3.5);
        assert_eq!(sample_sd(&[3.5]), 0.0);
        assert_eq!(sample_variance(&[3.5]), 0.0);
        assert_eq!(population_sd(&[3.5]), 0.0);
        // a value that is not finite spoils the statistic rather than vanishing
        assert!(mean(&[1.0, f64::NAN]).is_nan() && sample_sd(&[1.0, f64::NAN]).is_nan());
        assert!(sample_sd(&[f64::INFINITY]).is_nan() && population_sd(&[1.0, f64::INFINITY]).is_nan());
    }

    #[test]
    fn quantile_like_numpy() {
        // numpy.quantile([1, 2, 3, 4], [0, .25, .5, .9, 1]) = [1, 1.75, 2.5, 3.7, 4]
        let x = [3.0, 1.0, 4.0, 2.0];
        for (q, e) in [(0.0, 1.0), (0.25, 1.75), (0.5, 2.5), (0.9, 3.7), (1.0, 4.0)] {
            assert!((quantile(&x, q) - e).abs() < 1e-12, "q {q}: {}", quantile(&x, q));
        }
        // numpy.quantile([2, 4, 4, 4, 5, 5, 7, 9], [.1, .5, .95]) = [3.4, 4.5, 8.3]
        for (q, e) in [(0.1, 3.4), (0.5, 4.5), (0.95, 8.3)] {
            assert!((quantile(&X, q) - e).abs() < 1e-12, "q {q}: {}", quantile(&X, q));
            assert_eq!(quantile(&X, q), quantile_sorted(&X, q));
        }
        // the ends are the extremes exactly, and one value is every quantile
        assert_eq!((quantile(&X, 0.0), quantile(&X, 1.0)), (2.0, 9.0));
        assert_eq!((quantile(&[7.0], 0.0), quantile(&[7.0], 0.3), quantile(&[7.0], 1.0)), (7.0, 7.0, 7.0));
        // landing on an order statistic gives it exactly (h = 0.5 * 4 = 2)
        assert_eq!(quantile(&[5.0, 1.0, 3.0, 2.0, 4.0], 0.5), 3.0);
    }

    #[test]
    fn quantile_nan_rule() {
        assert!(quantile(&[], 0.5).is_nan() && quantile_sorted(&[], 0.5).is_nan());
        assert!(quantile(&[1.0, f64::NAN], 0.5).is_nan());
        assert!(quantile(&[1.0, f64::NAN, 2.0, 3.0], 0.0).is_nan(), "even where the NaN is not used");
        assert!(quantile(&[1.0, f64::INFINITY], 0.0).is_nan());
        assert!(quantile(&[f64::NEG_INFINITY, 1.0], 1.0).is_nan());
        for q in [-0.1, 1.1, f64::NAN] {
            assert!(quantile(&X, q).is_nan() && quantile_sorted(&X, q).is_nan(), "q {q}");
        }
        // filtered first, the finite values have their quantile
        let v = [f64::NAN, 3.0, 1.0, f64::INFINITY, 2.0];
        let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        assert_eq!(quantile(&finite, 0.5), 2.0);
    }
}
