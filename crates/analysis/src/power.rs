//! How many examples would decide an inconclusive claim: the sample size at which a two-sided
//! level-alpha z test of the observed effect has a given power, with the standard error scaled
//! as 1/sqrt(n) from the one measured.

use statrs::distribution::{ContinuousCDF, Normal};

/// The p-quantile of the standard normal.
pub fn z(p: f64) -> f64 {
    Normal::new(0.0, 1.0).unwrap().inverse_cdf(p)
}

fn phi(x: f64) -> f64 {
    Normal::new(0.0, 1.0).unwrap().cdf(x)
}

/// Examples needed for a two-sided level-`alpha` test of `effect` to have power `power`, given
/// its standard error `se` measured at `n` examples: `n ((z(1-alpha/2) + z(power)) se / |effect|)^2`,
/// rounded up; `None` if the effect is 0 or the inputs are not finite.
pub fn n_for_power(effect: f64, se: f64, n: usize, alpha: f64, power: f64) -> Option<u64> {
    if effect == 0.0 || !effect.is_finite() || !se.is_finite() || se < 0.0 || n == 0 {
        return None;
    }
    let k = (z(1.0 - alpha / 2.0) + z(power)) * se / effect.abs();
    Some((n as f64 * k * k).ceil().max(1.0) as u64)
}

/// Power of that test at `n_new` examples (both tails).
pub fn power_at(effect: f64, se: f64, n: usize, n_new: usize, alpha: f64) -> f64 {
    let se_new = se * (n as f64 / n_new as f64).sqrt();
    let (za, d) = (z(1.0 - alpha / 2.0), effect.abs() / se_new);
    phi(d - za) + phi(-d - za)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn textbook_values() {
        assert!((z(0.975) - 1.959964).abs() < 1e-5);
        // an effect of (1.96 + 0.84) se at n already has 80% power: about n examples are needed
        let n = n_for_power(2.8016 * 0.01, 0.01, 400, 0.05, 0.8).unwrap();
        assert!((399..=401).contains(&n), "{n}");
        // half the effect needs four times the examples
        let n2 = n_for_power(1.4008 * 0.01, 0.01, 400, 0.05, 0.8).unwrap();
        assert!((1599..=1601).contains(&n2), "{n2}");
        assert_eq!(n_for_power(0.0, 0.01, 400, 0.05, 0.8), None);
        assert!((power_at(1.959964, 1.0, 1, 1, 0.05) - 0.5).abs() < 1e-3);
        // a huge effect is found by one example; its power is 1 and cannot grow (a case found
        // by proptest in CI, kept in proptest-regressions/power.txt)
        assert_eq!(n_for_power(0.7333996744712747, 0.001, 10, 0.05, 0.5), Some(1));
        assert_eq!(power_at(0.7333996744712747, 0.001, 10, 2, 0.05), 1.0);
    }

    /// Each input the size cannot be worked from gives None, alone (the survivors of mutation
    /// testing: each `||` of the guard replaced by `&&`, `se < 0` by `se == 0` or `se <= 0`); an
    /// exact measurement (se 0) needs one example.
    #[test]
    fn inputs_it_cannot_work_from() {
        let ok = |effect: f64, se: f64, n: usize| n_for_power(effect, se, n, 0.05, 0.8);
        assert_eq!(ok(f64::NAN, 0.01, 400), None);
        assert_eq!(ok(f64::INFINITY, 0.01, 400), None);
        assert_eq!(ok(0.02, f64::NAN, 400), None);
        assert_eq!(ok(0.02, f64::INFINITY, 400), None);
        assert_eq!(ok(0.02, -0.01, 400), None);
        assert_eq!(ok(0.02, 0.01, 0), None);
        assert_eq!(ok(0.02, 0.0, 400), Some(1));
        assert!(ok(-0.02, 0.01, 400).is_some(), "the sign of the effect does not matter");
    }

    proptest! {
        #[test]
        fn the_size_found_has_the_power_asked(effect in 1e-3..1.0f64, se in 1e-3..1.0f64, n in 10usize..10_000, power in 0.5..0.99f64) {
            let m = n_for_power(effect, se, n, 0.05, power).unwrap() as usize;
            let p = power_at(effect, se, n, m, 0.05);
            prop_assert!(p >= power - 1e-9, "{p} < {power}");
            if m > 1 {
                prop_assert!(power_at(effect, se, n, m - 1, 0.05) < power + 1e-3);
            }
            // more examples never lose power; they gain it unless it is already 1 in f64
            let p2 = power_at(effect, se, n, 2 * m, 0.05);
            prop_assert!(p2 >= p && (p2 > p || p == 1.0), "{p2} vs {p}");
        }
    }
}
