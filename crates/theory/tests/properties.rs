//! The variance-reduction statements behind checkpoint averaging and ensembling, each checked
//! against a truth computed independently of the code under test: a brute-force or enumeration
//! computation, a defining identity computed another way, a hand-worked value, or a seeded
//! simulation with a stated false-failure probability. A check that would pass for any
//! implementation (a formula against itself, a quantity against itself) is not a property and is
//! not kept. Properties run on 1,000 generated cases each.
//!
//! Sources. The paper's own theorem statements are not available offline (the study notes,
//! `../shared/paper-notes.md` on the project's machines, not in this repository, "Theory"); its
//! abstract says both remedies reduce fluctuation "shown empirically and theoretically". The
//! statements are the ones the study notes list as true and worth testing, numbered 1-6 there
//! (here T1-T6), standard results, and two bounds we derive (the window-offset bound T3w, the
//! Lipschitz step bound T9). Each test's doc comment gives the statement, its assumptions, its
//! source and its independent truth. The crate's README lists them in one table.
//!
//! What is under test is the `theory` crate's own code (`src/`). The streaming averager over
//! safetensors (`integrate::average`) and the option-score ensembler (`integrate::ensemble`) cannot
//! be called from here: `integrate` depends on `records`, which depends on `theory`.

mod common;

use common::*;
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use theory::mixture::*;
use theory::noise::*;
use theory::sequence::*;
use theory::weights::*;

/// Six standard deviations of a normal statistic: a false failure has probability < 2e-9.
const Z: f64 = 6.0;

/// The moving average of window k at raw positions a..=b (a >= k - 1), from `moving_average`'s
/// documented indexing: raw position t is element t + 1 - k.
fn ma_total_variation_between(x: &[f64], k: usize, a: usize, b: usize) -> f64 {
    total_variation_between(&moving_average(x, k), a + 1 - k, b + 1 - k)
}

/// A sequence, a window 1 <= k <= min(m, 20), and raw positions k - 1 <= a <= b <= m - 1.
fn window_case() -> impl Strategy<Value = (Vec<f64>, usize, usize, usize)> {
    series(1)
        .prop_flat_map(|x| {
            let m = x.len();
            (Just(x), 1..=m.min(20))
        })
        .prop_flat_map(|(x, k)| {
            let m = x.len();
            (Just(x), Just(k), (k - 1)..m)
        })
        .prop_flat_map(|(x, k, a)| {
            let m = x.len();
            (Just(x), Just(k), Just(a), a..m)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// **TV (total variation, the sum form)** [definition]. Independent truths that together
    /// determine TV: TV of one point is 0, of two points p, q is |q - p|, and
    /// TV(x ++ y) = TV(x) + |y_first - x_last| + TV(y) (by induction these fix TV on every
    /// sequence); for a monotone sequence TV = max - min (telescoping); for a 0/1 sequence TV is
    /// the number of changes, counted. `total_variation_between` is additive over adjacent
    /// ranges, 0 on one point, |x_{a+1} - x_a| on two, and over 0..=m-1 equals TV.
    #[test]
    fn tv_total_variation_characterised(x in series(1), y in series(1), bits in prop::collection::vec(0..2u8, 1..40), cut in any::<prop::sample::Index>(), cut2 in any::<prop::sample::Index>()) {
        prop_assert_eq!(total_variation(&[x[0]]), 0.0);
        prop_assert_eq!(total_variation(&[]), 0.0);
        prop_assert_eq!(total_variation(&[x[0], y[0]]), (y[0] - x[0]).abs());
        let joined: Vec<f64> = x.iter().chain(&y).cloned().collect();
        let parts = total_variation(&x) + (y[0] - x[x.len() - 1]).abs() + total_variation(&y);
        prop_assert!(close(total_variation(&joined), parts), "{} vs {parts}", total_variation(&joined));
        let mut sorted = x.clone();
        sorted.sort_by(f64::total_cmp);
        let range = sorted[sorted.len() - 1] - sorted[0];
        prop_assert!(close_to_scale(total_variation(&sorted), range, 60.0 * scale_of(&x)));
        sorted.reverse();
        prop_assert!(close_to_scale(total_variation(&sorted), range, 60.0 * scale_of(&x)));
        let changes = bits.windows(2).filter(|w| w[0] != w[1]).count();
        let as_f: Vec<f64> = bits.iter().map(|&b| b as f64).collect();
        prop_assert_eq!(total_variation(&as_f), changes as f64);
        // total_variation_between
        let m = x.len();
        let (mut a, mut b) = (cut.index(m), cut2.index(m));
        if a > b {
            std::mem::swap(&mut a, &mut b);
        }
        prop_assert!(close(total_variation_between(&x, 0, m - 1), total_variation(&x)));
        prop_assert_eq!(total_variation_between(&x, a, a), 0.0);
        if a + 1 < m {
            prop_assert_eq!(total_variation_between(&x, a, a + 1), (x[a + 1] - x[a]).abs());
        }
        let split = total_variation_between(&x, 0, a) + total_variation_between(&x, a, b) + total_variation_between(&x, b, m - 1);
        prop_assert!(close(split, total_variation(&x)), "{split} vs {}", total_variation(&x));
    }

    /// **T1 (MTV basics)** [notes 1]. For x in R^m, m >= 2: MTV(x) >= 0, with equality iff x is
    /// constant; MTV(x + c) = MTV(x); MTV(reverse x) = MTV(x); MTV(c x) = |c| MTV(x);
    /// |x_m - x_1| / (m-1) <= MTV(x) <= max_t |x_{t+1} - x_t| <= max x - min x; undefined (None)
    /// for m < 2. Independent truths beside the relations: the lower bound is attained (exactly)
    /// by monotone x (telescoping: MTV = (max - min)/(m-1)), the upper bounds by x_t = c(-1)^t
    /// (MTV = 2|c| = max step = range), and for 0/1 x MTV is the counted flip rate.
    #[test]
    fn t1_mtv_basics(x in series(2), c in -50.0..50.0f64, scale in -5.0..5.0f64, bits in prop::collection::vec(0..2u8, 2..40)) {
        prop_assert_eq!(mtv(&[]), None);
        prop_assert_eq!(mtv(&x[..1]), None);
        let m = mtv(&x).unwrap();
        prop_assert!(m >= 0.0);
        let constant = x.windows(2).all(|w| w[0] == w[1]);
        prop_assert_eq!(m == 0.0, constant);
        prop_assert_eq!(mtv(&vec![c; x.len()]), Some(0.0));
        let shifted: Vec<f64> = x.iter().map(|v| v + c).collect();
        prop_assert!((mtv(&shifted).unwrap() - m).abs() <= 1e-9 * (1.0 + m) + 1e-12 * c.abs());
        let reversed: Vec<f64> = x.iter().rev().cloned().collect();
        prop_assert!(close(mtv(&reversed).unwrap(), m));
        let scaled: Vec<f64> = x.iter().map(|v| scale * v).collect();
        prop_assert!(close(mtv(&scaled).unwrap(), scale.abs() * m));
        let n = (x.len() - 1) as f64;
        let max_step = x.windows(2).map(|w| (w[1] - w[0]).abs()).fold(0.0, f64::max);
        let range = x.iter().cloned().fold(f64::MIN, f64::max) - x.iter().cloned().fold(f64::MAX, f64::min);
        prop_assert!((x[x.len() - 1] - x[0]).abs() / n <= m * (1.0 + 1e-12) + 1e-12);
        prop_assert!(m <= max_step * (1.0 + 1e-12) && max_step <= range);
        // equality cases, with exact values worked out by hand
        let mut sorted = x.clone();
        sorted.sort_by(f64::total_cmp);
        prop_assert!(close_to_scale(mtv(&sorted).unwrap(), range / n, 60.0 * scale_of(&x)));
        let alternating: Vec<f64> = (0..x.len()).map(|t| if t % 2 == 0 { c } else { -c }).collect();
        prop_assert!(close(mtv(&alternating).unwrap(), 2.0 * c.abs()));
        let flips = bits.windows(2).filter(|w| w[0] != w[1]).count();
        let as_f: Vec<f64> = bits.iter().map(|&b| b as f64).collect();
        prop_assert!(close(mtv(&as_f).unwrap(), flips as f64 / (bits.len() - 1) as f64));
    }

    /// **T2 (IS range)** [notes 2]. If sim takes values in [0, 1], IS lies in [0, 1], with 0 for
    /// constant outputs and 1 when every consecutive pair has similarity 0; undefined for fewer
    /// than two outputs. Independent truths: under exact match IS is the counted number of
    /// changes over m - 1; for 0/1 correctness it equals MTV (the flip rate).
    #[test]
    fn t2_instability_in_unit_interval(outputs in prop::collection::vec(0..4u8, 2..40), sims in prop::collection::vec(0.0..=1.0f64, 16)) {
        prop_assert_eq!(exact_match(&3u8, &3u8), 1.0);
        prop_assert_eq!(exact_match(&3u8, &2u8), 0.0);
        prop_assert_eq!(instability(&outputs[..1], exact_match), None);
        let soft = |a: &u8, b: &u8| if a == b { 1.0 } else { sims[(*a as usize) * 4 + *b as usize] };
        let is = instability(&outputs, soft).unwrap();
        prop_assert!((0.0..=1.0).contains(&is));
        prop_assert_eq!(instability(&vec![outputs[0]; outputs.len()], soft), Some(0.0));
        let alternating: Vec<u8> = (0..outputs.len()).map(|t| (t % 2) as u8).collect();
        prop_assert_eq!(instability(&alternating, |_: &u8, _: &u8| 0.0), Some(1.0));
        let changes = outputs.windows(2).filter(|w| w[0] != w[1]).count();
        prop_assert!(close(instability(&outputs, exact_match).unwrap(), changes as f64 / (outputs.len() - 1) as f64));
        let correct: Vec<u8> = outputs.iter().map(|&o| u8::from(o == 0)).collect();
        let as_f: Vec<f64> = correct.iter().map(|&c| c as f64).collect();
        prop_assert!(close(instability(&correct, exact_match).unwrap(), mtv(&as_f).unwrap()));
    }

    /// **MA (the moving average is the mean of each full window)** [definition]. Brute force:
    /// for every 1 <= k <= m + 2, `moving_average(x, k)` has max(m - k + 1, 0) values and value i
    /// equals the directly summed mean of x[i..i+k] (the implementation keeps a running sum).
    /// **EMA** likewise against its unrolled closed form
    /// y_t = (1-a)^t x_0 + sum_{j=1}^t a (1-a)^{t-j} x_j (the implementation recurses).
    #[test]
    fn ma_and_ema_match_their_definitions(x in series(1), k in 1usize..64, a in 0.01..=1.0f64) {
        let k = 1 + (k - 1) % (x.len() + 2);
        let y = moving_average(&x, k);
        prop_assert_eq!(y.len(), (x.len() + 1).saturating_sub(k));
        for (i, &v) in y.iter().enumerate() {
            let direct = x[i..i + k].iter().sum::<f64>() / k as f64;
            prop_assert!(close_to_scale(v, direct, scale_of(&x)), "window {i}: {v} vs {direct}");
        }
        let e = ema(&x, a);
        prop_assert_eq!(e.len(), x.len());
        for (t, &v) in e.iter().enumerate() {
            let unrolled = (1.0 - a).powi(t as i32) * x[0] + (1..=t).map(|j| a * (1.0 - a).powi((t - j) as i32) * x[j]).sum::<f64>();
            prop_assert!(close_to_scale(v, unrolled, scale_of(&x)), "t {t}: {v} vs {unrolled}");
        }
    }

    /// **T3 (moving averages never add variation, sum form)** [notes 3]. For every x and window
    /// 1 <= k <= m: TV(MA_k(x)) <= TV(x), where TV is the sum of absolute increments; likewise
    /// for the exponential moving average, TV(EMA_a(x)) <= TV(x) for a in (0, 1].
    /// Proof sketch: MA_{t+1} - MA_t = (1/k) sum_{j<k} (x_{t+1-j} - x_{t-j}), and each increment
    /// of x enters at most k of these sums (T3w with a = k-1, b = m-1); the EMA's increments are
    /// a(1-a)^j-weighted sums of increments of x with weights summing to at most 1.
    /// Independent truth beside the bound: for monotone x it is an equality case worked out by
    /// hand, TV(MA_k x) = |mean(last k of x) - mean(first k of x)| (the MA is monotone too, so its
    /// TV telescopes).
    #[test]
    fn t3_moving_average_never_raises_total_variation(x in series(1), k in 1usize..20, a in 0.01..=1.0f64) {
        let k = k.min(x.len());
        let m = x.len();
        let tv_x = total_variation(&x);
        let tv_ma = total_variation(&moving_average(&x, k));
        prop_assert!(tv_ma <= tv_x * (1.0 + 1e-12) + 1e-9, "TV(MA_{k}) = {tv_ma} > TV(x) = {tv_x}");
        prop_assert!(total_variation(&ema(&x, a)) <= tv_x * (1.0 + 1e-12) + 1e-9);
        let mut sorted = x.clone();
        sorted.sort_by(f64::total_cmp);
        let ends = (sorted[m - k..].iter().sum::<f64>() - sorted[..k].iter().sum::<f64>()) / k as f64;
        prop_assert!(close_to_scale(total_variation(&moving_average(&sorted, k)), ends, 60.0 * scale_of(&x)));
    }

    /// **T3w (the window-offset bound)** [derived]. For x of length m, window k, and raw
    /// positions k-1 <= a <= b <= m-1 (0-based), let y_t = mean(x_{t-k+1..=t}) be the moving
    /// average at raw position t. Then
    ///
    ///     TV(y over a..=b) <= TV(x over a-k+1..=b).
    ///
    /// Proof sketch: for a <= t < b, y_{t+1} - y_t = (x_{t+1} - x_{t+1-k})/k
    /// = (1/k) sum_{j=0}^{k-1} d_{t-j}, with d_s = x_{s+1} - x_s. So
    /// sum_t |y_{t+1} - y_t| <= (1/k) sum_s c_s |d_s|, where s runs over a-k+1..=b-1 and
    /// c_s = #{t in a..b : 0 <= t - s < k} = min(b-1, s+k-1) - max(a, s) + 1 <= k. Hence the bound.
    /// It is an equality exactly when all d_s of the range have one sign (x monotone there) and
    /// d_s = 0 wherever c_s < k, i.e. x is constant on the first window a-k+1..=a and on the last
    /// window b-k+1..=b. The analysis uses it to compare the smoothing baseline (and averaged
    /// trails) with single checkpoints over the same positions: the raw range must start k - 1
    /// positions earlier (`window_offset_is_needed`).
    ///
    /// Checked: the bound on random x; for monotone x the exact value, both as
    /// |mean(x_{b-k+1..=b}) - mean(x_{a-k+1..=a})| and as (1/k) sum_s c_s |d_s|
    /// (`t3w_window_offset_equality_cases` checks the tight case). A moving average off by one
    /// position or one element of window fails these on monotone inputs.
    #[test]
    fn t3w_window_offset_bound((x, k, a, b) in window_case(), descending in any::<bool>()) {
        let lo = a + 1 - k;
        let tv_y = ma_total_variation_between(&x, k, a, b);
        let tv_x = total_variation_between(&x, lo, b);
        prop_assert!(tv_y <= tv_x * (1.0 + 1e-12) + 1e-9, "TV(y, {a}..={b}) = {tv_y} > TV(x, {lo}..={b}) = {tv_x}");
        // monotone x: exact value two ways
        let mut mono = x.clone();
        mono.sort_by(f64::total_cmp);
        if descending {
            mono.reverse();
        }
        let tv_y = ma_total_variation_between(&mono, k, a, b);
        let window_mean = |end: usize| mono[end + 1 - k..=end].iter().sum::<f64>() / k as f64;
        let ends = (window_mean(b) - window_mean(a)).abs();
        let counted = (lo..b)
            .map(|s| {
                let c = (b as isize - 1).min((s + k) as isize - 1) - (a.max(s) as isize) + 1;
                c.max(0) as f64 * (mono[s + 1] - mono[s]).abs()
            })
            .sum::<f64>()
            / k as f64;
        let tol = 60.0 * scale_of(&x);
        prop_assert!(close_to_scale(tv_y, ends, tol), "{tv_y} vs ends {ends}");
        prop_assert!(close_to_scale(tv_y, counted, tol), "{tv_y} vs counted {counted}");
        prop_assert!(tv_y <= total_variation_between(&mono, lo, b) * (1.0 + 1e-12) + 1e-9);
    }

    /// **T3w, the tight case** [derived; see `t3w_window_offset_bound`]. x monotone on
    /// a-k+1..=b, constant on the first window a-k+1..=a and on the last b-k+1..=b, arbitrary
    /// elsewhere (b >= a + k, so the case is not trivial): the bound holds with equality,
    /// TV(y over a..=b) = TV(x over a-k+1..=b) = the sum of the increments placed (hand-worked:
    /// every increment of x lies in a-k+1.. b-1 with count c_s = k). The values outside the range
    /// are random, so a moving average reading one position too early or too late breaks the
    /// equality.
    #[test]
    fn t3w_window_offset_equality_cases(
        (k, a, b, outside, incs) in (1usize..8, 0usize..5, 0usize..20, 0usize..5).prop_flat_map(|(k, a_off, extra, tail)| {
            let a = k - 1 + a_off;
            let b = a + k + extra;
            let m = b + 1 + tail;
            (Just(k), Just(a), Just(b), prop::collection::vec(-100.0..100.0f64, m), prop::collection::vec(0.0..10.0f64, m))
        }),
        base in -50.0..50.0f64,
        descending in any::<bool>(),
    ) {
        let lo = a + 1 - k;
        let sign = if descending { -1.0 } else { 1.0 };
        let mut x = outside.clone();
        x[lo] = base;
        let mut placed = 0.0;
        for t in lo..b {
            let d = if t >= a && t + k <= b { incs[t] } else { 0.0 };
            placed += d;
            x[t + 1] = x[t] + sign * d;
        }
        let tv_x = total_variation_between(&x, lo, b);
        let tv_y = ma_total_variation_between(&x, k, a, b);
        prop_assert!(close_to_scale(tv_x, placed, 1e3));
        prop_assert!(close_to_scale(tv_y, tv_x, 1e3), "TV(y, {a}..={b}) = {tv_y}, TV(x, {lo}..={b}) = {tv_x}, k = {k}");
    }

    /// **var_mean_from_cov (the covariance-sum definition)** [definition]. Against enumeration:
    /// X = A s for a k x r matrix A and r independent fair signs s has covariance A A^T; the exact
    /// variance of mean(X) over all 2^r outcomes equals `var_mean_from_cov(A A^T, k)`.
    #[test]
    fn var_mean_from_cov_matches_enumeration(a in (1usize..7, 1usize..9).prop_flat_map(|(k, r)| prop::collection::vec(prop::collection::vec(-2.0..2.0f64, r), k))) {
        let (k, r) = (a.len(), a[0].len());
        let cov = |i: usize, j: usize| (0..r).map(|l| a[i][l] * a[j][l]).sum::<f64>();
        let exact = exact_variance_over_signs(r, |o| (0..k).map(|i| (0..r).map(|l| a[i][l] * sign(o, l)).sum::<f64>()).sum::<f64>() / k as f64);
        prop_assert!(close_to_scale(var_mean_from_cov(cov, k), exact, 64.0), "{} vs {exact}", var_mean_from_cov(cov, k));
    }

    /// **T4a (i.i.d. noise)** [standard]. Var(mean of k i.i.d. terms of variance sigma^2) =
    /// sigma^2 / k. Independent truths: exact enumeration of k fair signs scaled by sigma (k <= 12),
    /// and for larger k the covariance-sum definition with Cov = sigma^2 I (itself checked by
    /// enumeration above).
    #[test]
    fn t4a_iid_mean_variance_is_sigma2_over_k(sigma2 in 1e-3..1e3f64, k in 1usize..64) {
        let sigma = sigma2.sqrt();
        if k <= 12 {
            let exact = exact_variance_over_signs(k, |o| (0..k).map(|i| sigma * sign(o, i)).sum::<f64>() / k as f64);
            prop_assert!(close(var_mean_iid(sigma2, k), exact), "{} vs {exact}", var_mean_iid(sigma2, k));
        }
        let def = var_mean_from_cov(|i, j| if i == j { sigma2 } else { 0.0 }, k);
        prop_assert!(close(var_mean_iid(sigma2, k), def));
    }

    /// **T4b (AR(1) noise)** [standard]. For stationary AR(1) noise with marginal variance
    /// sigma^2 and lag-1 correlation rho in (-1, 1): Var(mean of k) =
    /// sigma^2/k^2 (k + 2 sum_{h<k} (k-h) rho^h), also in closed form, and strictly above
    /// sigma^2/k when rho > 0 and k >= 2 (averaging correlated checkpoints buys less than 1/k),
    /// below it when rho < 0. Independent truths: (k <= 12) exact enumeration of an AR(1) driven
    /// by fair signs, e_0 = sigma s_0, e_t = rho e_{t-1} + sqrt(1 - rho^2) sigma s_t, which has
    /// exactly the covariance sigma^2 rho^|i-j| (only second moments enter a variance); for all
    /// k, the covariance-sum definition with that covariance. Both formulas are checked.
    #[test]
    fn t4b_ar1_mean_variance(sigma2 in 1e-3..1e3f64, rho in -0.95..0.95f64, k in 1usize..64) {
        let sigma = sigma2.sqrt();
        let (sum_form, closed) = (var_mean_ar1(sigma2, rho, k), var_mean_ar1_closed(sigma2, rho, k));
        if k <= 12 {
            let innovation = (1.0 - rho * rho).sqrt() * sigma;
            let exact = exact_variance_over_signs(k, |o| {
                let mut e = sigma * sign(o, 0);
                let mut total = e;
                for t in 1..k {
                    e = rho * e + innovation * sign(o, t);
                    total += e;
                }
                total / k as f64
            });
            prop_assert!(close_to_scale(sum_form, exact, sigma2), "sum form {sum_form} vs enumeration {exact}");
            prop_assert!(close_to_scale(closed, exact, sigma2 / (1.0 - rho).powi(2)), "closed form {closed} vs enumeration {exact}");
        }
        let def = var_mean_from_cov(|i, j| sigma2 * rho.powi((i as i32 - j as i32).abs()), k);
        prop_assert!(close_to_scale(sum_form, def, sigma2), "sum form {sum_form} vs definition {def}");
        prop_assert!(close_to_scale(closed, def, sigma2 / (1.0 - rho).powi(2)), "closed form {closed} vs definition {def}");
        let iid = sigma2 / k as f64;
        if k >= 2 && rho > 1e-6 {
            prop_assert!(sum_form > iid);
        }
        if k >= 2 && rho < -1e-6 {
            prop_assert!(sum_form < iid);
        }
    }

    /// **T5 (correlated members)** [notes 5]. k members with variance sigma^2 and pairwise
    /// correlation rho in [0, 1]: Var(mean) = sigma^2 (rho + (1-rho)/k); never above sigma^2;
    /// non-increasing in k, strictly decreasing for rho < 1. Independent truths: (k <= 11) exact
    /// enumeration of X_i = sigma (sqrt(rho) s_0 + sqrt(1-rho) s_i) over k + 1 fair signs, which
    /// has exactly that covariance; for all k, the covariance-sum definition.
    #[test]
    fn t5_equicorrelated_mean_variance(sigma2 in 1e-3..1e3f64, rho in 0.0..=1.0f64, k in 1usize..64) {
        let v = var_mean_equicorrelated(sigma2, rho, k);
        if k <= 11 {
            let (common, own) = ((rho * sigma2).sqrt(), ((1.0 - rho) * sigma2).sqrt());
            let exact = exact_variance_over_signs(k + 1, |o| (1..=k).map(|i| common * sign(o, 0) + own * sign(o, i)).sum::<f64>() / k as f64);
            prop_assert!(close_to_scale(v, exact, sigma2), "{v} vs enumeration {exact}");
        }
        let def = var_mean_from_cov(|i, j| if i == j { sigma2 } else { rho * sigma2 }, k);
        prop_assert!(close(v, def), "{v} vs definition {def}");
        prop_assert!(v <= sigma2 * (1.0 + 1e-12));
        let next = var_mean_equicorrelated(sigma2, rho, k + 1);
        prop_assert!(next <= v * (1.0 + 1e-12));
        if rho < 1.0 - 1e-9 {
            prop_assert!(next < v);
        }
    }

    /// **sample_variance** [definition]. Against the pairwise form computed without the mean,
    /// s^2 = sum_{i<j} (x_i - x_j)^2 / (n (n - 1)).
    #[test]
    fn sample_variance_matches_the_pairwise_form(x in series(2)) {
        let n = x.len();
        let mut pairs = 0.0;
        for i in 0..n {
            for j in i + 1..n {
                pairs += (x[i] - x[j]).powi(2);
            }
        }
        let pairwise = pairs / (n * (n - 1)) as f64;
        prop_assert!(close_to_scale(sample_variance(&x), pairwise, 1e4), "{} vs {pairwise}", sample_variance(&x));
    }

    /// **normalise** [definition]. The unique vector proportional to w that sums to 1: checked by
    /// its sum and by cross-multiplied ratios p_i w_j = p_j w_i.
    #[test]
    fn normalise_is_proportional_and_sums_to_one(w in prop::collection::vec(1e-3..10.0f64, 1..10)) {
        let p = normalise(&w);
        prop_assert_eq!(p.len(), w.len());
        prop_assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        for i in 0..w.len() {
            for j in 0..w.len() {
                prop_assert!(close(p[i] * w[j], p[j] * w[i]));
            }
        }
    }

    /// **Ensemble = mean of the members' distributions** [definition]. The mean is the unique
    /// vector e with sum_i (p_i - e) = 0 in every class: checked by those residual sums, plus e is
    /// a distribution and k copies of one member give that member.
    #[test]
    fn ensemble_is_the_mean_of_the_members(ms in members(8), copies in 1usize..6) {
        let e = ensemble(&ms);
        prop_assert_eq!(e.len(), ms[0].len());
        for c in 0..e.len() {
            let residual: f64 = ms.iter().map(|p| p[c] - e[c]).sum();
            prop_assert!(residual.abs() < 1e-12, "class {c}: residual {residual}");
        }
        prop_assert!(e.iter().all(|&p| p >= 0.0));
        prop_assert!((e.iter().sum::<f64>() - 1.0).abs() < 1e-12, "sums to {}", e.iter().sum::<f64>());
        let same = ensemble(&vec![ms[0].clone(); copies]);
        for (a, b) in same.iter().zip(&ms[0]) {
            prop_assert!(close(*a, *b));
        }
    }

    /// An ensemble of one member is that member, exactly. [issue 5's acceptance list]
    #[test]
    fn t6b_ensemble_of_one_is_the_member(ms in members(1)) {
        prop_assert_eq!(ensemble(&ms), ms[0].clone());
    }

    /// **Cross-entropy, entropy, KL and the AM/GM gap** [definitions]. Against product forms
    /// computed without logarithms: exp(-CE(q, p)) = prod_c p_c^{q_c},
    /// exp(-H(p)) = prod_c p_c^{p_c}, exp(-KL(p || q)) = prod_c (q_c / p_c)^{p_c},
    /// exp(ln(AM/GM)(x)) = mean(x) / (prod x)^{1/k}; and CE(one-hot y, p) = -ln p_y.
    #[test]
    fn information_quantities_match_product_forms(ms in members(2), xs in prop::collection::vec(1e-3..10.0f64, 1..10)) {
        let p = &ms[0];
        let q = &ms[ms.len() - 1];
        let n = p.len();
        let prod_q = (0..n).map(|c| p[c].powf(q[c])).product::<f64>();
        prop_assert!(close((-cross_entropy(q, p)).exp(), prod_q));
        let prod_p = (0..n).map(|c| p[c].powf(p[c])).product::<f64>();
        prop_assert!(close((-entropy(p)).exp(), prod_p));
        let ratio = (0..n).map(|c| (q[c] / p[c]).powf(p[c])).product::<f64>();
        prop_assert!(close((-kl(p, q)).exp(), ratio));
        for y in 0..n {
            let onehot: Vec<f64> = (0..n).map(|c| f64::from(u8::from(c == y))).collect();
            prop_assert!(close(cross_entropy(&onehot, p), -p[y].ln()));
        }
        let k = xs.len() as f64;
        let am = xs.iter().sum::<f64>() / k;
        let gm = xs.iter().product::<f64>().powf(1.0 / k);
        prop_assert!(close(log_am_over_gm(&xs).exp(), am / gm));
    }

    /// **T6a (Jensen for ensembles)** [notes 6; standard]. For member distributions p_1..p_k and
    /// any label y: CE(y, mean p_i) <= mean_i CE(y, p_i), and the gap equals
    /// ln(AM_i p_i(y) / GM_i p_i(y)) >= 0 (AM-GM; two code paths, each checked against product
    /// forms above). For any target q the inequality holds in expectation over y ~ q. The entropy
    /// form is the generalised Jensen-Shannon divergence: H(mean p_i) - mean H(p_i) =
    /// mean_i KL(p_i || mean p) >= 0, an identity that holds only if the ensemble is the mean
    /// (mean_i CE(p_i, e) = CE(mean p_i, e), which is H(e) only for e = mean p_i), so it checks
    /// `ensemble` and `jensen_shannon` against `kl` computed another way.
    #[test]
    fn t6a_ensemble_cross_entropy_jensen(ms in members(8), q_raw in prop::collection::vec(1e-6..1.0f64, 8)) {
        let n = ms[0].len();
        let ens = ensemble(&ms);
        let k = ms.len() as f64;
        for y in 0..n {
            let onehot: Vec<f64> = (0..n).map(|c| f64::from(u8::from(c == y))).collect();
            let mean_ce = ms.iter().map(|p| cross_entropy(&onehot, p)).sum::<f64>() / k;
            let ens_ce = cross_entropy(&onehot, &ens);
            prop_assert!(ens_ce <= mean_ce + 1e-12);
            let gap = log_am_over_gm(&ms.iter().map(|p| p[y]).collect::<Vec<_>>());
            prop_assert!((mean_ce - ens_ce - gap).abs() < 1e-9 * (1.0 + mean_ce));
        }
        let q = normalise(&q_raw[..n]);
        prop_assert!(cross_entropy(&q, &ens) <= ms.iter().map(|p| cross_entropy(&q, p)).sum::<f64>() / k + 1e-12);
        let js = jensen_shannon(&ms);
        let mean_kl = ms.iter().map(|p| kl(p, &ens)).sum::<f64>() / k;
        prop_assert!(js >= -1e-12 && (js - mean_kl).abs() < 1e-9, "JS {js} vs mean KL {mean_kl}");
    }

    /// **argmax** [definition; used by `records`]. Brute force on values with many ties: the
    /// index i returned has p_i >= p_j for all j, and p_j < p_i for all j < i (first on ties).
    #[test]
    fn argmax_is_the_first_maximum(p in prop::collection::vec((0..4u8).prop_map(f64::from), 1..10)) {
        let i = argmax(&p);
        prop_assert!(i < p.len());
        prop_assert!(p.iter().all(|&v| v <= p[i]));
        prop_assert!(p[..i].iter().all(|&v| v < p[i]));
    }

    /// **Average = mean of the weight vectors** [definition]. Residual sums
    /// sum_i (w_i - avg) = 0 in every coordinate (the mean is the unique such vector).
    #[test]
    fn average_is_the_mean_of_the_weights(ws in prop::collection::vec(prop::collection::vec(-3.0..3.0f64, 4), 1..10)) {
        let avg = average(&ws);
        prop_assert_eq!(avg.len(), 4);
        for i in 0..4 {
            let residual: f64 = ws.iter().map(|w| w[i] - avg[i]).sum();
            prop_assert!(residual.abs() < 1e-12, "coordinate {i}: residual {residual}");
        }
    }

    /// **The toy losses** [definitions]. Each against a form computed another way:
    /// softmax regression, exp(-loss) = e^{z_y} / sum_c e^{z_c} without the max shift
    /// (|z| <= 24 here, so no overflow) and loss(w = 0) = ln(classes); the quadratic,
    /// 0.5 (w-a)^T (B^T B) (w-a) through the Gram matrix, 0 at w = a; the double well,
    /// ||w||^2 + ||a||^2 - 2 |w.a|, 0 at w = a and w = -a.
    #[test]
    fn losses_match_forms_computed_another_way(
        w in prop::collection::vec(-3.0..3.0f64, 4),
        feats in prop::collection::vec(prop::collection::vec(-2.0..2.0f64, 4), 2..5),
        b in prop::collection::vec(prop::collection::vec(-2.0..2.0f64, 4), 1..5),
        a in prop::collection::vec(-3.0..3.0f64, 4),
        label in any::<prop::sample::Index>(),
    ) {
        let label = label.index(feats.len());
        let z: Vec<f64> = feats.iter().map(|x| x.iter().zip(&w).map(|(p, q)| p * q).sum()).collect();
        let prob = z[label].exp() / z.iter().map(|v| v.exp()).sum::<f64>();
        prop_assert!(close((-softmax_regression_loss(&feats, label, &w)).exp(), prob));
        prop_assert!(close(softmax_regression_loss(&feats, label, &[0.0; 4]), (feats.len() as f64).ln()));
        let d: Vec<f64> = w.iter().zip(&a).map(|(p, q)| p - q).collect();
        let gram = |i: usize, j: usize| b.iter().map(|row| row[i] * row[j]).sum::<f64>();
        let form = 0.5 * (0..4).map(|i| (0..4).map(|j| d[i] * gram(i, j) * d[j]).sum::<f64>()).sum::<f64>();
        prop_assert!(close_to_scale(quadratic_loss(&b, &a, &w), form, 1e3));
        prop_assert_eq!(quadratic_loss(&b, &a, &a), 0.0);
        let (ww, aa, wa) = (w.iter().map(|v| v * v).sum::<f64>(), a.iter().map(|v| v * v).sum::<f64>(), w.iter().zip(&a).map(|(p, q)| p * q).sum::<f64>());
        prop_assert!(close_to_scale(double_well_loss(&a, &w), ww + aa - 2.0 * wa.abs(), 1e2));
        let neg: Vec<f64> = a.iter().map(|v| -v).collect();
        prop_assert_eq!(double_well_loss(&a, &a), 0.0);
        prop_assert_eq!(double_well_loss(&a, &neg), 0.0);
    }

    /// **T7 (averaging under convexity)** [standard: Jensen]. For a loss convex in the weights
    /// (softmax regression, and 0.5||B(w - a)||^2 for any B), the loss at the averaged weights
    /// is at most the mean loss of the k checkpoints. For the quadratic the gap is known exactly
    /// (the variance decomposition): mean_i L(w_i) - L(avg) = 0.5 mean_i ||B(w_i - avg)||^2, which
    /// holds only if avg is the mean, so a wrong average or loss fails it.
    #[test]
    fn t7_convex_loss_at_average_at_most_mean_loss(
        ws in prop::collection::vec(prop::collection::vec(-3.0..3.0f64, 4), 1..10),
        feats in prop::collection::vec(prop::collection::vec(-2.0..2.0f64, 4), 3),
        b in prop::collection::vec(prop::collection::vec(-2.0..2.0f64, 4), 1..5),
        a in prop::collection::vec(-3.0..3.0f64, 4),
        label in 0usize..3,
    ) {
        let avg = average(&ws);
        let k = ws.len() as f64;
        let mean = ws.iter().map(|w| softmax_regression_loss(&feats, label, w)).sum::<f64>() / k;
        prop_assert!(softmax_regression_loss(&feats, label, &avg) <= mean + 1e-9);
        let mean = ws.iter().map(|w| quadratic_loss(&b, &a, w)).sum::<f64>() / k;
        let at_avg = quadratic_loss(&b, &a, &avg);
        prop_assert!(at_avg <= mean * (1.0 + 1e-12) + 1e-9);
        let spread = ws.iter().map(|w| {
            let dev: Vec<f64> = w.iter().zip(&avg).map(|(p, q)| p - q).collect();
            0.5 * b.iter().map(|row| row.iter().zip(&dev).map(|(r, d)| r * d).sum::<f64>().powi(2)).sum::<f64>()
        }).sum::<f64>() / k;
        prop_assert!(close_to_scale(mean - at_avg, spread, 1e3), "gap {} vs spread {spread}", mean - at_avg);
    }

    /// **T7' (the boundary: non-convex losses)** [standard]. For the double well
    /// min(||w - a||^2, ||w + a||^2) and every a != 0, the checkpoints a and -a each have loss 0
    /// while their average 0 has loss ||a||^2 > 0 (hand-worked values, all three checked exactly):
    /// averaging can hurt without convexity.
    #[test]
    fn t7b_nonconvex_counterexample_exists(a in prop::collection::vec(-3.0..3.0f64, 1..6).prop_filter("a != 0", |a| a.iter().any(|v| v.abs() > 1e-3))) {
        let neg: Vec<f64> = a.iter().map(|v| -v).collect();
        let at_avg = double_well_loss(&a, &average(&[a.clone(), neg.clone()]));
        prop_assert_eq!(double_well_loss(&a, &a), 0.0);
        prop_assert_eq!(double_well_loss(&a, &neg), 0.0);
        prop_assert!(close(at_avg, a.iter().map(|v| v * v).sum::<f64>()), "{at_avg}");
        prop_assert!(at_avg > 0.0);
    }

    /// **T8 (noisy checkpoints, exactly)** [notes 4]. theta_t = mu_0 + t v + eps_t with eps
    /// i.i.d., zero mean, covariance sigma^2 I_d. Raw: E||theta_1 - theta_0||^2 =
    /// ||v||^2 + 2 d sigma^2; k-window averages (`average` of theta_0..theta_{k-1} and of
    /// theta_1..theta_k): ||v||^2 + 2 d sigma^2 / k^2, and without noise the step is exactly v
    /// (the drift is kept). Independent truth: exact expectation by enumeration, with eps_t having
    /// independent fair-sign coordinates times sigma (zero mean, covariance sigma^2 I_d; only these
    /// moments enter an expected squared norm): all 2^{d(k+1)} outcomes, d (k + 1) <= 12.
    #[test]
    fn t8_window_average_keeps_drift_and_shrinks_noise(
        (d, k) in (1usize..=3, 1usize..=5).prop_map(|(d, k)| (d, k.min(12 / d - 1))),
        mu0 in prop::collection::vec(-5.0..5.0f64, 3),
        v in prop::collection::vec(-1.0..1.0f64, 3),
        sigma2 in 0.0..4.0f64,
    ) {
        let (mu0, v) = (&mu0[..d], &v[..d]);
        let sigma = sigma2.sqrt();
        let theta = |o: u64, t: usize| -> Vec<f64> { (0..d).map(|i| mu0[i] + t as f64 * v[i] + sigma * sign(o, t * d + i)).collect() };
        let sq = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(p, q)| (p - q).powi(2)).sum::<f64>();
        let bits = d * (k + 1);
        let averaged = exact_mean_over_signs(bits, |o| {
            let ts: Vec<Vec<f64>> = (0..=k).map(|t| theta(o, t)).collect();
            sq(&average(&ts[1..]), &average(&ts[..k]))
        });
        let raw = exact_mean_over_signs(bits, |o| sq(&theta(o, 1), &theta(o, 0)));
        prop_assert!(close_to_scale(expected_sq_step_averaged(v, sigma2, k), averaged, 30.0), "averaged: formula {} vs exact {averaged}", expected_sq_step_averaged(v, sigma2, k));
        prop_assert!(close_to_scale(expected_sq_step_raw(v, sigma2), raw, 30.0), "raw: formula {} vs exact {raw}", expected_sq_step_raw(v, sigma2));
        prop_assert!(expected_sq_step_averaged(v, sigma2, k) <= expected_sq_step_raw(v, sigma2));
        // no noise: consecutive window averages differ by exactly v
        let clean: Vec<Vec<f64>> = (0..=k).map(|t| (0..d).map(|i| mu0[i] + t as f64 * v[i]).collect()).collect();
        let (a0, a1) = (average(&clean[..k]), average(&clean[1..]));
        for i in 0..d {
            prop_assert!((a1[i] - a0[i] - v[i]).abs() < 1e-9 * (1.0 + mu0[i].abs() + (k as f64) * v[i].abs()));
        }
    }

    /// **T9 (averaged model under a Lipschitz score)** [derived from notes 4; the paper's own
    /// bound is not available offline]. Let f be K-Lipschitz in the weights. Consecutive
    /// k-window averages differ by (theta_k - theta_0)/k, so the averaged model's score moves by
    /// |f(avg_1) - f(avg_0)| <= K ||theta_k - theta_0|| / k (the bound is computed from the raw
    /// checkpoints, not from `average`). Equality cases, worked out by hand: for affine
    /// f(w) = K u.w + c (unit u) the step is exactly K |u.(theta_k - theta_0)| / k, which is the
    /// bound when theta_k - theta_0 is parallel to u; and f(average) equals the mean of the
    /// members' scores (averaging and ensembling coincide for affine scores).
    #[test]
    fn t9_averaged_model_lipschitz_step_bound(
        thetas in prop::collection::vec(prop::collection::vec(-3.0..3.0f64, 3), 2..12),
        u_raw in prop::collection::vec(-1.0..1.0f64, 3).prop_filter("u != 0", |u| u.iter().any(|v| v.abs() > 1e-3)),
        lip in 0.1..5.0f64,
        bias in -1.0..1.0f64,
        c in -3.0..3.0f64,
    ) {
        let k = thetas.len() - 1;
        let norm = u_raw.iter().map(|v| v * v).sum::<f64>().sqrt();
        let u: Vec<f64> = u_raw.iter().map(|v| v / norm).collect();
        let dot = |w: &[f64]| w.iter().zip(&u).map(|(a, b)| a * b).sum::<f64>();
        let f = |w: &[f64]| lip * dot(w).sin(); // |f(a) - f(b)| <= lip |u.(a - b)| <= lip ||a - b||
        let diff: Vec<f64> = thetas[k].iter().zip(&thetas[0]).map(|(a, b)| a - b).collect();
        let bound = lip * diff.iter().map(|v| v * v).sum::<f64>().sqrt() / k as f64;
        let (w0, w1) = (&thetas[..k], &thetas[1..]);
        let step = (f(&average(w1)) - f(&average(w0))).abs();
        prop_assert!(step <= bound * (1.0 + 1e-9) + 1e-12, "step {step} > bound {bound}");
        let affine = |w: &[f64]| lip * dot(w) + bias;
        let affine_step = (affine(&average(w1)) - affine(&average(w0))).abs();
        prop_assert!(close_to_scale(affine_step, lip * dot(&diff).abs() / k as f64, 100.0));
        let mean_score = w1.iter().map(|w| affine(w)).sum::<f64>() / k as f64;
        prop_assert!(close_to_scale(affine(&average(w1)), mean_score, 100.0));
        // theta_k - theta_0 = c u: the bound is attained
        let mut parallel = thetas.clone();
        parallel[k] = thetas[0].iter().zip(&u).map(|(t, ui)| t + c * ui).collect();
        let (p0, p1) = (&parallel[..k], &parallel[1..]);
        let attained = (affine(&average(p1)) - affine(&average(p0))).abs();
        prop_assert!(close_to_scale(attained, lip * c.abs() / k as f64, 100.0), "{attained} vs {}", lip * c.abs() / k as f64);
    }
}

/// T3's caveat [notes 3]: the MEAN form can rise because the averaged sequence has fewer
/// transitions. x = [0,0,0,1,1,1], k = 2: MTV(x) = 0.2, MTV(MA_2 x) = 0.25 (hand-worked). Compare
/// sums, or means over the same positions (T3w); the analysis crates do.
#[test]
fn t3_caveat_mean_form_can_rise() {
    let x = [0., 0., 0., 1., 1., 1.];
    assert!((mtv(&x).unwrap() - 0.2).abs() < 1e-15);
    assert!((mtv(&moving_average(&x, 2)).unwrap() - 0.25).abs() < 1e-15);
}

/// T3w's offset is needed [derived, hand-worked]: over the same raw positions the moving average
/// can vary where the raw sequence does not. x = [0, 1, 1, 1], k = 2, positions 1..=3: y = [0.5,
/// 1, 1] has TV 0.5 while x over 1..=3 has TV 0; over 0..=3 (k - 1 earlier) x has TV 1 >= 0.5.
#[test]
fn window_offset_is_needed() {
    let x = [0., 1., 1., 1.];
    assert_eq!(ma_total_variation_between(&x, 2, 1, 3), 0.5);
    assert_eq!(total_variation_between(&x, 1, 3), 0.0);
    assert_eq!(total_variation_between(&x, 0, 3), 1.0);
}

/// T6's boundary [notes 6]: no such guarantee for accuracy. Two members with opposite biases,
/// each right on one of two examples with a thin margin and wrong on the other with a wide one:
/// each has accuracy 1/2, their ensemble 0 (hand-worked: ensembles [0.305, 0.695] twice).
#[test]
fn t6_caveat_ensemble_accuracy_can_fall_below_every_member() {
    // [p(gold), p(other)] per example, gold = class 0
    let a = [vec![0.51, 0.49], vec![0.1, 0.9]];
    let b = [vec![0.1, 0.9], vec![0.51, 0.49]];
    let acc = |m: &[Vec<f64>]| m.iter().filter(|p| argmax(p) == 0).count() as f64 / m.len() as f64;
    let ens: Vec<Vec<f64>> = (0..2).map(|i| ensemble(&[a[i].clone(), b[i].clone()])).collect();
    assert!((ens[0][0] - 0.305).abs() < 1e-15 && (ens[1][1] - 0.695).abs() < 1e-15);
    assert_eq!((acc(&a), acc(&b), acc(&ens)), (0.5, 0.5, 0.0));
}

/// Hand-worked values of the information quantities, including the 0 ln 0 = 0 convention that
/// the product forms above (all components positive) cannot reach: CE([1, 0], [1, 0]) = 0,
/// H(uniform over 4) = ln 4, KL([1/2, 1/2] || [1/4, 3/4]) = ln(4/3) / 2, JS of the two one-hot
/// distributions over 2 classes = ln 2, ln(AM/GM) of [1, 4] = ln(5/4).
#[test]
fn information_quantities_by_hand() {
    assert_eq!(cross_entropy(&[1.0, 0.0], &[1.0, 0.0]), 0.0);
    assert_eq!(entropy(&[0.0, 1.0]), 0.0);
    assert!((entropy(&[0.25; 4]) - 4f64.ln()).abs() < 1e-15);
    assert!((kl(&[0.5, 0.5], &[0.25, 0.75]) - (4.0f64 / 3.0).ln() / 2.0).abs() < 1e-15);
    assert!((jensen_shannon(&[vec![1.0, 0.0], vec![0.0, 1.0]]) - 2f64.ln()).abs() < 1e-15);
    assert!((log_am_over_gm(&[1.0, 4.0]) - 1.25f64.ln()).abs() < 1e-15);
    let e = ensemble(&[vec![0.2, 0.8], vec![0.6, 0.4]]);
    assert!((e[0] - 0.4).abs() < 1e-15 && (e[1] - 0.6).abs() < 1e-15, "{e:?}");
    assert_eq!(normalise(&[1.0, 3.0]), vec![0.25, 0.75]);
    assert_eq!(sample_variance(&[1.0, 2.0, 3.0, 4.0]), 5.0 / 3.0);
    assert_eq!(average(&[vec![1.0, -2.0], vec![3.0, 6.0]]), vec![2.0, 2.0]);
}

/// `std_normal` against the standard normal distribution, by simulation (n = 200,000, fixed
/// seed): the sample mean within 6 standard errors of 0, the sample variance within 6 relative
/// standard errors (sqrt(2/(n-1))) of 1, and the empirical CDF at -2, -1, 0, 0.5, 1, 2 within 6
/// binomial standard errors of the tabulated Phi. Each check's false-failure probability is below
/// 2e-9 (8 checks: below 2e-8 in all).
#[test]
fn std_normal_matches_the_normal_distribution() {
    let n = 200_000;
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let z: Vec<f64> = (0..n).map(|_| std_normal(&mut rng)).collect();
    let mean = z.iter().sum::<f64>() / n as f64;
    assert!(mean.abs() < Z / (n as f64).sqrt(), "mean {mean}");
    let var = sample_variance(&z);
    assert!((var - 1.0).abs() < Z * (2.0 / (n as f64 - 1.0)).sqrt(), "variance {var}");
    for (at, phi) in [
        (-2.0, 0.022750131948179),
        (-1.0, 0.158655253931457),
        (0.0, 0.5),
        (0.5, 0.691462461274013),
        (1.0, 0.841344746068543),
        (2.0, 0.977249868051821),
    ] {
        let frac = z.iter().filter(|&&v| v <= at).count() as f64 / n as f64;
        assert!((frac - phi).abs() < Z * (phi * (1.0 - phi) / n as f64).sqrt(), "P(Z <= {at}) = {frac}, Phi = {phi}");
    }
}

/// T4a and T4b in expectation, by simulation with the generators `ar1` and `std_normal` (the
/// enumeration properties check the formulas; this checks that the generator produces the
/// stated model). The sample variance of n normal draws has relative standard deviation
/// sqrt(2/(n-1)); window means of independent AR(1) runs are such draws. With n = 20,000 and a
/// 6-sigma band the false-failure probability is below 2e-9 per check (8 checks: below 2e-8 in
/// all). Fixed seed: the run is reproducible.
#[test]
fn t4_simulated_window_means_match_the_formulas() {
    let n = 20_000;
    let tol = Z * (2.0 / (n as f64 - 1.0)).sqrt();
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    for &(rho, k) in &[(0.0, 4usize), (0.0, 16), (0.5, 4), (0.5, 16), (0.9, 4), (0.9, 16), (-0.5, 8), (0.7, 1)] {
        let sigma = 1.5;
        let means: Vec<f64> = (0..n).map(|_| ar1(&mut rng, k, rho, sigma).iter().sum::<f64>() / k as f64).collect();
        let expected = var_mean_ar1(sigma * sigma, rho, k);
        let got = sample_variance(&means);
        assert!((got / expected - 1.0).abs() < tol, "rho {rho}, k {k}: simulated {got}, formula {expected}");
    }
}

/// T8 in expectation, by simulation through `average`: n = 20,000 independent runs of k + 1
/// noisy checkpoints theta_t = mu_0 + t v + sigma z_t (Gaussian z from `std_normal`, d = 8); the
/// mean squared step between the two consecutive k-window averages (`average` of
/// theta_0..theta_{k-1} and of theta_1..theta_k) is compared with `expected_sq_step_averaged`, and
/// the raw step theta_1 - theta_0 with `expected_sq_step_raw`. The step is Gaussian with
/// per-coordinate variance s^2 (s^2 = 2 sigma^2 / k^2 averaged, 2 sigma^2 raw), so its squared
/// norm is a noncentral chi-square with variance 2 d s^4 + 4 s^2 ||v||^2; each mean is checked
/// within 6 standard errors (false-failure probability < 2e-9 per check, 10 checks).
#[test]
fn t8_simulated_noisy_checkpoints_match_the_formula() {
    let (d, sigma2, n) = (8usize, 0.25f64, 20_000usize);
    let sigma = sigma2.sqrt();
    let v: Vec<f64> = (0..d).map(|i| 0.05 * i as f64).collect();
    let mu0: Vec<f64> = (0..d).map(|i| 0.3 * i as f64 - 1.0).collect();
    let vv: f64 = v.iter().map(|x| x * x).sum();
    let sq = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(p, q)| (p - q).powi(2)).sum::<f64>();
    let se = |s2: f64| ((2.0 * d as f64 * s2 * s2 + 4.0 * s2 * vv) / n as f64).sqrt();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for k in [1usize, 2, 4, 8, 16] {
        let (mut averaged, mut raw) = (0.0, 0.0);
        for _ in 0..n {
            let thetas: Vec<Vec<f64>> = (0..=k)
                .map(|t| (0..d).map(|i| mu0[i] + t as f64 * v[i] + sigma * std_normal(&mut rng)).collect())
                .collect();
            averaged += sq(&average(&thetas[1..]), &average(&thetas[..k]));
            raw += sq(&thetas[1], &thetas[0]);
        }
        let (averaged, raw) = (averaged / n as f64, raw / n as f64);
        let expected = expected_sq_step_averaged(&v, sigma2, k);
        assert!(
            (averaged - expected).abs() < Z * se(2.0 * sigma2 / (k * k) as f64),
            "k {k}: averaged {averaged} vs {expected}"
        );
        let expected = expected_sq_step_raw(&v, sigma2);
        assert!((raw - expected).abs() < Z * se(2.0 * sigma2), "k {k}: raw {raw} vs {expected}");
    }
}
