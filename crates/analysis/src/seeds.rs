//! Normal-theory inference on a handful of runs that differ only in their seeds (the study
//! grid's seed and size axes, `experiments::study`): the chi-square interval of a normal
//! population's sd from a sample sd ([`sd_interval`]), and the difference of two groups' means
//! with a pooled-variance Student t interval ([`pooled_t_difference`]). With three seeds these
//! intervals are wide, which is the point of reporting them. The descriptive statistics they
//! start from are [`crate::stats`]'.

use crate::stats::{mean, sum_of_squared_deviations};
use statrs::distribution::{ChiSquared, ContinuousCDF, Normal, StudentsT};

/// The 95% interval of a normal population's sd from the sample sd `sd` (divisor n - 1) of `n`
/// values: `(sqrt(df / chi2_{0.975, df}) sd, sqrt(df / chi2_{0.025, df}) sd)` with df = n - 1.
/// At df = 1 the chi-square quantiles are a squared normal's (statrs' lower tail is NaN there).
/// (NaN, NaN) below two values.
pub fn sd_interval(sd: f64, n: usize) -> (f64, f64) {
    if n < 2 {
        return (f64::NAN, f64::NAN);
    }
    let df = (n - 1) as f64;
    let quantile = |p: f64| {
        if n == 2 {
            Normal::standard().inverse_cdf((1.0 + p) / 2.0).powi(2)
        } else {
            ChiSquared::new(df).expect("n >= 3").inverse_cdf(p)
        }
    };
    ((df / quantile(0.975)).sqrt() * sd, (df / quantile(0.025)).sqrt() * sd)
}

/// A difference of two means with its interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// mean(a) - mean(b)
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
    /// standard error of the difference
    pub se: f64,
    /// degrees of freedom of the t quantile, n_a + n_b - 2
    pub df: usize,
    pub level: f64,
}

/// `mean(a) - mean(b)` with its two-sided Student t interval at `level` from the pooled
/// variance (equal variances assumed): `s_p^2 = (SS_a + SS_b) / df`, df = n_a + n_b - 2,
/// `se = s_p sqrt(1 / n_a + 1 / n_b)`, bounds `estimate -+ t_{1 - (1 - level) / 2, df} se`.
/// One group may have a single value (its spread comes from the other). None where a group is
/// empty, df is 0 (two values in all), or `level` is not in (0, 1).
pub fn pooled_t_difference(a: &[f64], b: &[f64], level: f64) -> Option<Difference> {
    if a.is_empty() || b.is_empty() || !(level > 0.0 && level < 1.0) {
        return None;
    }
    let df = (a.len() + b.len()).checked_sub(2).filter(|&df| df > 0)?;
    let pooled_sd = ((sum_of_squared_deviations(a) + sum_of_squared_deviations(b)) / df as f64).sqrt();
    let se = pooled_sd * (1.0 / a.len() as f64 + 1.0 / b.len() as f64).sqrt();
    let half = StudentsT::new(0.0, 1.0, df as f64).ok()?.inverse_cdf(1.0 - (1.0 - level) / 2.0) * se;
    let estimate = mean(a) - mean(b);
    Some(Difference { estimate, low: estimate - half, high: estimate + half, se, df, level })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sd_interval_contains_the_estimate_and_is_wide_with_three_seeds() {
        // chi-square with 2 df: quantiles 0.0506 and 7.378
        let (lo, hi) = sd_interval(1.0, 3);
        assert!((lo - (2.0f64 / 7.3778).sqrt()).abs() < 1e-3, "{lo}");
        assert!((hi - (2.0f64 / 0.050636).sqrt()).abs() < 1e-2, "{hi}");
        // two values (1 df): quantiles 0.000982 and 5.024
        let (lo, hi) = sd_interval(1.0, 2);
        assert!(
            (lo - (1.0f64 / 5.0239).sqrt()).abs() < 1e-3 && (hi - (1.0f64 / 0.000982).sqrt()).abs() < 0.1,
            "{lo} {hi}"
        );
        // with many values the interval narrows around the estimate
        let (lo, hi) = sd_interval(1.0, 1001);
        assert!(lo > 0.95 && hi < 1.05, "{lo} {hi}");
        // the interval scales with the sd
        let (lo2, hi2) = sd_interval(2.0, 3);
        let (lo1, hi1) = sd_interval(1.0, 3);
        assert!((lo2 - 2.0 * lo1).abs() < 1e-12 && (hi2 - 2.0 * hi1).abs() < 1e-12);
        // one value (or none) has no sd to bound
        for n in [0, 1] {
            let (lo, hi) = sd_interval(1.0, n);
            assert!(lo.is_nan() && hi.is_nan(), "{n}");
        }
    }

    #[test]
    fn pooled_t_difference_by_hand() {
        // a = 0.66 (one run), b = 0.60, 0.62, 0.64: d = 0.04; SS_a = 0, SS_b = 0.0008, df = 2,
        // pooled sd sqrt(0.0008 / 2) = 0.02, se = 0.02 sqrt(1 + 1/3), t(2, 0.975) = 4.302653
        let d = pooled_t_difference(&[0.66], &[0.60, 0.62, 0.64], 0.95).unwrap();
        let se = 0.02 * (1.0f64 + 1.0 / 3.0).sqrt();
        let half = 4.302653 * se;
        assert!((d.estimate - 0.04).abs() < 1e-12, "{d:?}");
        assert!((d.se - se).abs() < 1e-12, "{d:?}");
        assert!((d.low - (0.04 - half)).abs() < 1e-5 && (d.high - (0.04 + half)).abs() < 1e-5, "{d:?}");
        assert_eq!((d.df, d.level), (2, 0.95));
        // the interval is symmetric about the estimate, and swapping the groups negates it
        assert!(((d.high - d.estimate) - (d.estimate - d.low)).abs() < 1e-12);
        let r = pooled_t_difference(&[0.60, 0.62, 0.64], &[0.66], 0.95).unwrap();
        assert!((r.estimate + d.estimate).abs() < 1e-12 && (r.low + d.high).abs() < 1e-12, "{r:?}");
        // 95% is the 0.975 quantile exactly, as the study's table has always used
        assert_eq!(1.0 - (1.0 - 0.95) / 2.0, 0.975);
        // a wider level gives a wider interval: t(2, 0.995) = 9.924843
        let w = pooled_t_difference(&[0.66], &[0.60, 0.62, 0.64], 0.99).unwrap();
        assert!((w.high - w.estimate - 9.924843 * se).abs() < 1e-5, "{w:?}");
        // both groups spread: a = 1, 3 (SS 2), b = 0, 2, 4 (SS 8): df 3, pooled sd sqrt(10 / 3),
        // se = sqrt(10 / 3) sqrt(1/2 + 1/3), t(3, 0.975) = 3.182446
        let d = pooled_t_difference(&[1.0, 3.0], &[0.0, 2.0, 4.0], 0.95).unwrap();
        let se = (10.0f64 / 3.0).sqrt() * (0.5f64 + 1.0 / 3.0).sqrt();
        assert!(d.estimate.abs() < 1e-12 && (d.se - se).abs() < 1e-12 && d.df == 3, "{d:?}");
        assert!((d.high - 3.182446 * se).abs() < 1e-5, "{d:?}");
    }

    #[test]
    fn pooled_t_difference_needs_a_degree_of_freedom() {
        assert_eq!(pooled_t_difference(&[1.0], &[2.0], 0.95), None);
        assert_eq!(pooled_t_difference(&[], &[1.0, 2.0, 3.0], 0.95), None);
        assert_eq!(pooled_t_difference(&[1.0, 2.0, 3.0], &[], 0.95), None);
        for level in [0.0, 1.0, f64::NAN] {
            assert_eq!(pooled_t_difference(&[1.0, 2.0], &[3.0], level), None, "{level}");
        }
        assert!(pooled_t_difference(&[1.0, 2.0], &[3.0], 0.95).is_some());
    }
}
