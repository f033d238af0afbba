//! Size trend of fluctuation: ordinary least squares of ln(final-stage task MTV) on
//! ln(parameters), with a Student-t interval of the slope, per task and pooled over tasks with
//! one intercept per task (task fixed effects), so a task that is noisier at every size does not
//! bend the shared slope. A slope of b means MTV scales as parameters^b: b = 0, no trend; the
//! MTV at the largest size is (x_max / x_min)^b times that at the smallest.

use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::stats::mean;

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Slope {
    pub slope: f64,
    pub intercept: f64,
    pub se: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub level: f64,
    pub df: usize,
    pub points: usize,
    /// points left out (MTV <= 0 or not finite: no logarithm)
    pub skipped: usize,
}

fn logs(x: &[f64], y: &[f64]) -> (Vec<(f64, f64)>, usize) {
    let pts: Vec<(f64, f64)> = x
        .iter()
        .zip(y)
        .filter(|(a, b)| a.is_finite() && b.is_finite() && **a > 0.0 && **b > 0.0)
        .map(|(a, b)| (a.ln(), b.ln()))
        .collect();
    let skipped = x.len().min(y.len()) - pts.len();
    (pts, skipped)
}

/// The slope through the origin of demeaned groups, with `df` residual degrees of freedom.
fn fit(groups: &[Vec<(f64, f64)>], df: usize, level: f64, skipped: usize) -> Option<Slope> {
    let (mut sxx, mut sxy, mut n) = (0.0, 0.0, 0);
    let mut means = vec![];
    for g in groups {
        let (x, y): (Vec<f64>, Vec<f64>) = g.iter().copied().unzip();
        let (mx, my) = (mean(&x), mean(&y));
        means.push((mx, my));
        for (a, b) in g {
            sxx += (a - mx).powi(2);
            sxy += (a - mx) * (b - my);
        }
        n += g.len();
    }
    if sxx <= 0.0 || df == 0 {
        return None;
    }
    let slope = sxy / sxx;
    let mut rss = 0.0;
    for (g, (mx, my)) in groups.iter().zip(&means) {
        for (a, b) in g {
            rss += (b - my - slope * (a - mx)).powi(2);
        }
    }
    let se = (rss / df as f64 / sxx).sqrt();
    let t = StudentsT::new(0.0, 1.0, df as f64).ok()?.inverse_cdf(1.0 - (1.0 - level) / 2.0);
    let intercept = mean(&means.iter().map(|(mx, my)| my - slope * mx).collect::<Vec<_>>());
    Some(Slope { slope, intercept, se, ci_low: slope - t * se, ci_high: slope + t * se, level, df, points: n, skipped })
}

/// OLS of ln(y) on ln(x); `None` with fewer than 3 usable points or no spread in x.
pub fn loglog(x: &[f64], y: &[f64], level: f64) -> Option<Slope> {
    let (pts, skipped) = logs(x, y);
    if pts.len() < 3 {
        return None;
    }
    let df = pts.len() - 2;
    fit(&[pts], df, level, skipped)
}

/// One slope shared by every group, a separate intercept per group (demeaned within groups, OLS
/// through the origin); df = points - groups - 1. Groups with fewer than 2 usable points drop
/// out (their points count as skipped).
pub fn pooled_loglog(groups: &[(&[f64], &[f64])], level: f64) -> Option<Slope> {
    let mut kept = vec![];
    let mut skipped = 0;
    for (x, y) in groups {
        let (pts, s) = logs(x, y);
        if pts.len() >= 2 {
            skipped += s;
            kept.push(pts);
        } else {
            skipped += s + pts.len();
        }
    }
    let n: usize = kept.iter().map(Vec::len).sum();
    let df = n.checked_sub(kept.len() + 1)?;
    fit(&kept, df, level, skipped)
}

/// The ratio of fitted MTV between sizes x2 and x1, (x2/x1)^slope, and at the interval's ends.
pub fn implied_ratio(s: &Slope, x1: f64, x2: f64) -> (f64, f64, f64) {
    let r = x2 / x1;
    (r.powf(s.slope), r.powf(s.ci_low), r.powf(s.ci_high))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use theory::noise::std_normal;

    #[test]
    fn noiseless_power_laws_are_recovered() {
        let x: [f64; 8] = [7e7, 1.6e8, 4.1e8, 1e9, 1.4e9, 2.8e9, 6.9e9, 1.2e10];
        let y: Vec<f64> = x.iter().map(|v| 3.0 * v.powf(-0.25)).collect();
        let s = loglog(&x, &y, 0.95).unwrap();
        assert!((s.slope + 0.25).abs() < 1e-12 && (s.intercept - 3f64.ln()).abs() < 1e-9 && s.se < 1e-12);
        let (r, _, _) = implied_ratio(&s, 7e7, 1.2e10);
        assert!((r - (1.2e10f64 / 7e7).powf(-0.25)).abs() < 1e-12);
    }

    #[test]
    fn hand_worked_regression() {
        // ln x = 0, 1, 2, 3; ln y = 0, 2, 1, 3: sxx = 5, sxy = 4, slope 0.8, intercept 0.3,
        // residuals -0.3, 0.9, -0.9, 0.3: rss 1.8, se = sqrt(1.8/2/5); t_{0.975, 2} = 4.302653
        let e = std::f64::consts::E;
        let x = [1.0, e, e * e, e * e * e];
        let y = [1.0, e * e, e, e * e * e];
        let s = loglog(&x, &y, 0.95).unwrap();
        assert!((s.slope - 0.8).abs() < 1e-12 && (s.intercept - 0.3).abs() < 1e-12, "{s:?}");
        assert!((s.se - (1.8f64 / 10.0).sqrt()).abs() < 1e-12);
        assert!((s.ci_high - (0.8 + 4.302653 * s.se)).abs() < 1e-5, "{s:?}");
        assert_eq!((s.df, s.points, s.skipped), (2, 4, 0));
        assert_eq!(loglog(&x, &[1.0, 0.0, e, -1.0], 0.95), None, "two usable points");
        assert_eq!(loglog(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0], 0.95), None, "no spread in x");
    }

    /// 200 datasets with normal noise in log space: the 95% interval covers the true slope in
    /// 90-99% of them (sd of the coverage estimate 1.5%).
    #[test]
    fn the_interval_covers_the_true_slope_at_the_nominal_rate() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let x: Vec<f64> = (0..8).map(|i| 1e8 * 2f64.powi(i)).collect();
        let mut covered = 0;
        for _ in 0..200 {
            let y: Vec<f64> = x.iter().map(|v| (1.0 - 0.3 * v.ln() + 0.2 * std_normal(&mut rng)).exp()).collect();
            let s = loglog(&x, &y, 0.95).unwrap();
            covered += usize::from(s.ci_low <= -0.3 && -0.3 <= s.ci_high);
        }
        assert!((180..=198).contains(&covered), "{covered}/200");
    }

    /// Tasks with different levels and sizes measured unevenly: the pooled slope recovers the
    /// shared one, while regressing all points at once is pulled off by the levels.
    #[test]
    fn fixed_effects_keep_the_shared_slope() {
        let xa: [f64; 3] = [1e8, 2e8, 4e8];
        let xb: [f64; 3] = [4e9, 8e9, 1.6e10];
        let ya: Vec<f64> = xa.iter().map(|v| 0.001 * v.powf(-0.1)).collect();
        let yb: Vec<f64> = xb.iter().map(|v| 10.0 * v.powf(-0.1)).collect();
        let p = pooled_loglog(&[(&xa, &ya), (&xb, &yb)], 0.95).unwrap();
        assert!((p.slope + 0.1).abs() < 1e-9, "{p:?}");
        // the intercept is the mean of the groups' own: (ln 0.001 + ln 10) / 2
        assert!((p.intercept - (0.001f64.ln() + 10f64.ln()) / 2.0).abs() < 1e-9, "{p:?}");
        let all_x: Vec<f64> = xa.iter().chain(&xb).copied().collect();
        let all_y: Vec<f64> = ya.iter().chain(&yb).copied().collect();
        let naive = loglog(&all_x, &all_y, 0.95).unwrap();
        assert!(naive.slope > 0.5, "the levels dominate a naive fit: {naive:?}");
        let q = pooled_loglog(&[(&xa, &[1.0, 0.0, 2.0]), (&xb, &yb)], 0.95).unwrap();
        assert_eq!((q.points, q.skipped), (5, 1));
    }

    /// Two tasks at ln x = 0, 1, 2 with ln y = (0, 2, 1) and (5, 5, 7): within-task sxx = 2 + 2,
    /// sxy = 1 + 2, slope 0.75; residuals (-0.25, 1, -0.75) and (1/12, -2/3, 7/12), rss = 2.41667
    /// on df = 6 - 2 - 1 = 3; the intercept is the mean of the tasks' own (0.25 and 4.91667).
    #[test]
    fn pooled_regression_by_hand() {
        let e = std::f64::consts::E;
        let x = [1.0, e, e * e];
        let (ya, yb) = ([1.0, e * e, e], [e.powi(5), e.powi(5), e.powi(7)]);
        let s = pooled_loglog(&[(&x, &ya), (&x, &yb)], 0.9).unwrap();
        let rss: f64 = 1.625 + 114.0 / 144.0;
        let se = (rss / 3.0 / 4.0).sqrt();
        assert!((s.slope - 0.75).abs() < 1e-12 && (s.se - se).abs() < 1e-12, "{s:?}");
        assert!((s.intercept - (0.25 + 59.0 / 12.0) / 2.0).abs() < 1e-12, "{s:?}");
        // t_{0.95, 3} = 2.353363
        assert!((s.ci_low - (0.75 - 2.353363 * se)).abs() < 1e-5 && (s.ci_high - (0.75 + 2.353363 * se)).abs() < 1e-5);
        assert_eq!((s.df, s.points, s.skipped, s.level), (3, 6, 0, 0.9));
        let (r, lo, hi) = implied_ratio(&s, 1.0, e);
        assert!(
            (r - 0.75f64.exp()).abs() < 1e-12
                && (lo - s.ci_low.exp()).abs() < 1e-12
                && (hi - s.ci_high.exp()).abs() < 1e-12
        );
        // a task with one usable point drops out, both its points counted as skipped
        let drop: (&[f64], &[f64]) = (&[1.0, e], &[0.0, 1.0]);
        let t = pooled_loglog(&[(&x, &ya), drop, (&x, &yb)], 0.9).unwrap();
        assert_eq!((t.slope, t.points, t.skipped, t.df), (s.slope, 6, 2, 3));
        // no residual degree of freedom, or no spread in x within any task: no slope
        assert_eq!(pooled_loglog(&[(&x[..2], &ya[..2])], 0.95), None);
        assert_eq!(pooled_loglog(&[(&[e, e], &ya[..2]), (&[1.0, 1.0, 1.0], &yb)], 0.95), None);
    }

    /// Points without a logarithm (not finite, zero or negative, on either side) are skipped and
    /// counted; so are the unpaired ones of unequal lengths.
    #[test]
    fn points_without_a_logarithm_are_counted() {
        let e = std::f64::consts::E;
        let x = [f64::NAN, -1.0, f64::INFINITY, 1.0, e, e * e, 0.0, 1.0, e * e * e];
        let y = [1.0, 1.0, 1.0, 1.0, e * e, e, 1.0, f64::NAN, e * e * e, 5.0];
        let s = loglog(&x, &y, 0.95).unwrap();
        assert!((s.slope - 0.8).abs() < 1e-12, "the hand-worked four points remain: {s:?}");
        assert_eq!((s.points, s.skipped), (4, 5));
        assert_eq!(loglog(&[1.0, e, -e, e * e], &[1.0, e, e, e * e], 0.95).map(|s| s.skipped), Some(1));
    }
}
