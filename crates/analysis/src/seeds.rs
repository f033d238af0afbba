//! Normal-theory inference on a handful of runs that differ only in their seeds (the study
//! grid's seed and size axes, `experiments::study`): the chi-square interval of a normal
//! population's sd from a sample sd ([`sd_interval`]), and the difference of two groups' means
//! with a pooled-variance Student t interval ([`pooled_t_difference`]), the random-effects
//! combination of one quantity's estimates over a recipe's seeds ([`recipe_estimate`]), and the
//! runs that would decide either ([`runs_needed`], [`contrast_runs_needed`]). With three seeds
//! these intervals are wide, which is the point of reporting them. The descriptive statistics they
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

/// A claim's estimate at the level of the training recipe: the mean over runs that differ only
/// in their seeds, with an interval that holds the between-seed variance.
#[derive(Debug, Clone, PartialEq)]
pub struct RecipeEstimate {
    /// mean of the runs' estimates
    pub estimate: f64,
    /// sample sd of the runs' estimates / sqrt(runs)
    pub se: f64,
    pub low: f64,
    pub high: f64,
    /// runs - 1
    pub df: usize,
    pub level: f64,
}

/// The random-effects combination of `runs` estimates of one quantity, one per seed: a run's
/// estimate is the recipe's value plus a between-seed deviation plus its own eval-set noise, so
/// the sample variance of the estimates carries both, and `mean -+ t_{1-(1-level)/2, R-1} sd /
/// sqrt(R)` is a t interval on runs - 1 degrees of freedom (exact for normal deviations of equal
/// within-run variance). This is the summary-statistics approach of the random-effects model,
/// chosen over a hierarchical bootstrap because two or three runs give a bootstrap nothing to
/// resample. A floor at the runs' own noise (a between-seed variance truncated at 0) was tried
/// and dropped: it made the interval cover 199-200 of 200 simulated grids where the between-seed
/// sd equals the eval-set noise. None below two runs, with a level outside (0, 1), or when every
/// run gives the same estimate (copies of one run are not independent seeds; their spread says
/// nothing).
pub fn recipe_estimate(runs: &[f64], level: f64) -> Option<RecipeEstimate> {
    if runs.len() < 2 || !(level > 0.0 && level < 1.0) || runs.iter().any(|v| !v.is_finite()) {
        return None;
    }
    if runs.iter().all(|&v| v == runs[0]) {
        return None;
    }
    let r = runs.len();
    let df = r - 1;
    let values = runs;
    let se = (sum_of_squared_deviations(values) / df as f64 / r as f64).sqrt();
    let half = StudentsT::new(0.0, 1.0, df as f64).ok()?.inverse_cdf(1.0 - (1.0 - level) / 2.0) * se;
    let estimate = mean(values);
    Some(RecipeEstimate { estimate, se, low: estimate - half, high: estimate + half, df, level })
}

/// How many runs (seeds) a recipe-level interval at `level` needs to exclude `threshold`, if the
/// runs' mean and sd stay as observed: the smallest R with `t_{R-1} sd / sqrt(R) < |mean -
/// threshold|` (None if the mean sits on the threshold or more than `max` runs would be needed).
pub fn runs_needed(runs: &[f64], threshold: f64, level: f64, max: usize) -> Option<usize> {
    let e = recipe_estimate(runs, level)?;
    let gap = (e.estimate - threshold).abs();
    let sd = e.se * (runs.len() as f64).sqrt();
    if gap == 0.0 {
        return None;
    }
    (2..=max).find(|&r| {
        let t = StudentsT::new(0.0, 1.0, (r - 1) as f64).unwrap().inverse_cdf(1.0 - (1.0 - level) / 2.0);
        t * sd / (r as f64).sqrt() < gap
    })
}

/// How many runs per arm a contrast of two groups of runs ([`pooled_t_difference`] at `level`)
/// needs to exclude 0, if the difference of the means and the pooled sd stay as observed: the
/// smallest R >= 2 with `t_{2R-2} s_p sqrt(2 / R) < |mean(a) - mean(b)|` (equal arms). None where
/// [`pooled_t_difference`] gives nothing, where the runs have no spread (copies of one run) or
/// the means are equal, or more than `max` runs per arm would be needed.
pub fn contrast_runs_needed(a: &[f64], b: &[f64], level: f64, max: usize) -> Option<usize> {
    let d = pooled_t_difference(a, b, level)?;
    let pooled_sd = d.se / (1.0 / a.len() as f64 + 1.0 / b.len() as f64).sqrt();
    let gap = d.estimate.abs();
    if !(pooled_sd > 0.0) || gap == 0.0 || !gap.is_finite() {
        return None;
    }
    (2..=max).find(|&r| {
        let t = StudentsT::new(0.0, 1.0, (2 * r - 2) as f64).unwrap().inverse_cdf(1.0 - (1.0 - level) / 2.0);
        t * pooled_sd * (2.0 / r as f64).sqrt() < gap
    })
}

/// The two-sided Student t quantile at `level` on `df` degrees of freedom,
/// `t_{1 - (1 - level) / 2, df}`: the half-width of an interval in standard errors (NaN at df 0).
pub fn t_quantile(df: usize, level: f64) -> f64 {
    StudentsT::new(0.0, 1.0, df as f64).map_or(f64::NAN, |t| t.inverse_cdf(1.0 - (1.0 - level) / 2.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values with a given mean and sample sd: `r` points spread symmetrically.
    fn with_mean_sd(m: f64, sd: f64, r: usize) -> Vec<f64> {
        let z: Vec<f64> = (0..r).map(|i| i as f64 - (r as f64 - 1.0) / 2.0).collect();
        let s = crate::stats::sample_sd(&z);
        z.iter().map(|z| m + sd * z / s).collect()
    }

    /// By hand: a = 1.0 (one run), b = 0.0, 0.1, -0.1 (sd 0.1, SS 0.02 over df 2): pooled sd 0.1.
    /// At R per arm the half-width is t_{2R-2} 0.1 sqrt(2 / R): R = 2 gives 4.3027 x 0.1 = 0.43,
    /// below the gap of 1, so 2 runs per arm decide it; a gap of 0.2 needs t_{2R-2} sqrt(2/R) < 2:
    /// R = 4 (2.447 x 0.707 = 1.73), not R = 3 (2.776 x 0.816 = 2.27).
    #[test]
    fn t_quantiles_by_hand() {
        assert!((t_quantile(2, 0.95) - 4.302653).abs() < 1e-5);
        // the claims table's family level 1 - 0.05 / 16: 204 on one df, 17.9 on two
        assert!((t_quantile(1, 1.0 - 0.05 / 16.0) - 203.7).abs() < 0.5, "{}", t_quantile(1, 1.0 - 0.05 / 16.0));
        assert!((t_quantile(2, 1.0 - 0.05 / 16.0) - 17.9).abs() < 0.1);
        assert!(t_quantile(0, 0.95).is_nan());
    }

    #[test]
    fn contrast_runs_needed_by_hand() {
        assert_eq!(contrast_runs_needed(&[1.0], &[0.0, 0.1, -0.1], 0.95, 100), Some(2));
        assert_eq!(contrast_runs_needed(&[0.2], &[0.0, 0.1, -0.1], 0.95, 100), Some(4));
        // no spread (copies), equal means, or too few values: never
        assert_eq!(contrast_runs_needed(&[1.0], &[0.0, 0.0], 0.95, 100), None);
        assert_eq!(contrast_runs_needed(&[0.0], &[0.1, -0.1], 0.95, 100), None);
        assert_eq!(contrast_runs_needed(&[1.0], &[0.0], 0.95, 100), None);
        // beyond the search
        assert_eq!(contrast_runs_needed(&[0.001], &[0.0, 0.1, -0.1], 0.95, 10), None);
    }

    proptest::proptest! {
        /// At the runs it names, a recipe whose runs keep the observed mean and sd excludes the
        /// threshold, and one run fewer does not (when that is at least the runs observed + 1).
        #[test]
        fn runs_needed_is_the_fewest_that_decide(m in -1.0f64..1.0, sd in 0.01f64..1.0, r in 2usize..6) {
            let runs = with_mean_sd(m, sd, r);
            let level = 1.0 - 0.05 / 16.0;
            if let Some(n) = runs_needed(&runs, 0.0, level, 2000) {
                let at = recipe_estimate(&with_mean_sd(m, sd, n), level).unwrap();
                proptest::prop_assert!(at.low > 0.0 || at.high < 0.0, "{n}: {at:?}");
                if n > 2 {
                    let before = recipe_estimate(&with_mean_sd(m, sd, n - 1), level).unwrap();
                    proptest::prop_assert!(before.low <= 0.0 && before.high >= 0.0, "{}: {before:?}", n - 1);
                }
            }
        }

        /// The same for a contrast: at R runs per arm with the observed difference and pooled sd
        /// the interval excludes 0, at R - 1 it does not.
        #[test]
        fn contrast_runs_needed_is_the_fewest_that_decide(
            d in -1.0f64..1.0, sd in 0.01f64..1.0, na in 1usize..4, nb in 2usize..5,
        ) {
            let (a, b) = (with_mean_sd(d, sd, na.max(2)), with_mean_sd(0.0, sd, nb));
            let a = if na == 1 { vec![d] } else { a };
            let level = 0.95;
            if let Some(r) = contrast_runs_needed(&a, &b, level, 5000) {
                let pooled = pooled_t_difference(&a, &b, level).unwrap();
                let sp = pooled.se / (1.0 / a.len() as f64 + 1.0 / b.len() as f64).sqrt();
                let mean_a = crate::stats::mean(&a) - crate::stats::mean(&b);
                let at = pooled_t_difference(&with_mean_sd(mean_a, sp, r), &with_mean_sd(0.0, sp, r), level).unwrap();
                proptest::prop_assert!(at.low > 0.0 || at.high < 0.0, "{r}: {at:?}");
                if r > 2 {
                    let before =
                        pooled_t_difference(&with_mean_sd(mean_a, sp, r - 1), &with_mean_sd(0.0, sp, r - 1), level).unwrap();
                    proptest::prop_assert!(before.low <= 0.0 && before.high >= 0.0, "{}: {before:?}", r - 1);
                }
            }
        }
    }

    /// The contrast of a schedule or size (one or two runs) against the cosine seeds (three): the
    /// pooled t interval covers the true difference of the configurations in 93-97% of 1,000
    /// simulated grids (Monte Carlo sd 0.7 points at 95%) where each run's claim estimate is the
    /// configuration's value plus a between-seed deviation plus eval-set noise (equal variances
    /// in both arms).
    #[test]
    fn contrast_intervals_cover_at_their_level() {
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(302);
        let mut normal = || -> f64 {
            use rand::Rng;
            let (u1, u2): (f64, f64) = (1.0 - rng.gen::<f64>(), rng.gen());
            (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        };
        let (mu_a, mu_b, s) = (0.006, 0.004, 0.001);
        for (na, nb) in [(1usize, 3usize), (2, 3)] {
            for tau in [0.0, 0.001, 0.003] {
                let mut covered = 0;
                for _ in 0..1000 {
                    let a: Vec<f64> = (0..na).map(|_| mu_a + tau * normal() + s * normal()).collect();
                    let b: Vec<f64> = (0..nb).map(|_| mu_b + tau * normal() + s * normal()).collect();
                    let d = pooled_t_difference(&a, &b, 0.95).unwrap();
                    covered += u32::from(d.low <= mu_a - mu_b && mu_a - mu_b <= d.high);
                }
                assert!((930..=970).contains(&covered), "{na} vs {nb}, tau = {tau}: covered {covered} of 1000");
            }
        }
    }

    /// Hand-worked: runs 1, 2, 3: mean 2, sd 1, se 1/sqrt(3), t_{0.975, 2} = 4.3027.
    #[test]
    fn a_recipe_estimate_by_hand() {
        let r = |v: &[f64]| v.to_vec();
        let e = recipe_estimate(&r(&[1.0, 2.0, 3.0]), 0.95).unwrap();
        assert_eq!((e.estimate, e.df), (2.0, 2));
        let half = 4.302653 / 3f64.sqrt();
        assert!((e.low - (2.0 - half)).abs() < 1e-5 && (e.high - (2.0 + half)).abs() < 1e-5, "{e:?}");
        assert_eq!(recipe_estimate(&r(&[1.0]), 0.95), None);
        // copies of one run are not seeds: no interval rather than [x, x]
        assert_eq!(recipe_estimate(&[0.5, 0.5], 0.95), None);
        // the interval [-0.48, 4.48] contains 0; at this mean and sd, 4 runs exclude it
        // (t_{0.975, 3} / 2 = 1.59 < 2, where 3 runs give 4.30 / sqrt(3) = 2.48)
        assert!(e.low < 0.0);
        assert_eq!(runs_needed(&r(&[1.0, 2.0, 3.0]), 0.0, 0.95, 100), Some(4));
        // against a threshold of 1 the gap is 1, not the mean's 2: t_{0.975, 5} / sqrt(6) = 1.05,
        // t_{0.975, 6} / sqrt(7) = 0.92, so 7 runs
        assert_eq!(runs_needed(&r(&[1.0, 2.0, 3.0]), 1.0, 0.95, 100), Some(7));
        assert_eq!(runs_needed(&r(&[-1.0, 1.0]), 0.0, 0.95, 100), None, "a mean on the threshold is never decided");
        let n = runs_needed(&r(&[0.1, 1.0, 1.9]), 0.0, 0.95, 100).unwrap();
        assert!(n > 3 && recipe_estimate(&r(&[0.1, 1.0, 1.9]), 0.95).unwrap().low < 0.0, "{n}");
    }

    /// Coverage on simulated grids with a known between-seed variance: each run's estimate is
    /// mu + tau z + s z' (tau the between-seed sd, s the eval-set noise of one run); the 95%
    /// interval over R runs covers mu in 90-99% of 200 seeded grids, for R = 2, 3, 5 and tau of 0,
    /// 1 and 3 times s, where an interval from one run's eval-set noise alone (mu_1 -+ 1.96 s)
    /// covers far less once tau is comparable to s.
    #[test]
    fn recipe_intervals_cover_at_their_level() {
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(30);
        let mut normal = || -> f64 {
            use rand::Rng;
            let (u1, u2): (f64, f64) = (1.0 - rng.gen::<f64>(), rng.gen());
            (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        };
        let (mu, s) = (0.004, 0.001);
        for runs in [2usize, 3, 5] {
            for tau in [0.0, 0.001, 0.003] {
                let (mut covered, mut one_run) = (0, 0);
                for _ in 0..200 {
                    let est: Vec<f64> = (0..runs).map(|_| mu + tau * normal() + s * normal()).collect();
                    let e = recipe_estimate(&est, 0.95).unwrap();
                    covered += u32::from(e.low <= mu && mu <= e.high);
                    one_run += u32::from((est[0] - mu).abs() <= 1.96 * s);
                }
                assert!((180..=198).contains(&covered), "R = {runs}, tau = {tau}: covered {covered} of 200");
                if tau >= 0.003 {
                    assert!(one_run < 150, "R = {runs}, tau = {tau}: one run's interval covered {one_run}");
                }
            }
        }
    }

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

    /// What a recipe-level estimate refuses: a level outside (0, 1) (0 and 1 themselves: a
    /// zero-width or an infinite interval), a run that is not finite; fewer than two distinct runs
    /// are refused as copies of one run.
    #[test]
    fn recipe_estimate_refuses_what_it_cannot_combine() {
        let runs = [0.1, 0.3, 0.2];
        assert!(recipe_estimate(&runs, 0.95).is_some());
        for level in [0.0, 1.0, -0.5, 1.5, f64::NAN] {
            assert_eq!(recipe_estimate(&runs, level), None, "level {level}");
        }
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(recipe_estimate(&[0.1, bad, 0.2], 0.95), None, "{bad}");
            assert_eq!(recipe_estimate(&[0.1, 0.2, bad], 0.95), None, "{bad}");
        }
        assert_eq!(recipe_estimate(&[], 0.95), None);
        assert_eq!(recipe_estimate(&[0.4], 0.95), None);
    }
}
