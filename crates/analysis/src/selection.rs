//! Checkpoint-selection regret and optimism on random stratified half-splits of the eval set,
//! with paired example-resampling bootstrap intervals.
//!
//! Per split of the examples into halves A and B: `chosen = argmax_t score_A(t)` (the first on
//! ties), `regret = max_t score_B(t) - score_B(chosen)` (what selecting on A loses on B, >= 0) and
//! `optimism = score_A(chosen) - score_B(chosen)` (how much the selected score flatters itself).
//! The estimate is the mean over many random splits. Its interval comes from resampling examples:
//! each draw re-runs fresh splits on the resampled set, the copies of one example counted as
//! separate examples (which keeps the split noise of the resampled set that of the original).
//!
//! Splits are balanced within strata (the caller uses gold option x final-checkpoint
//! correctness): each stratum is shuffled and halved; strata of odd size alternate which half
//! gets the extra example (the first of them is picked at random per split), so `|A|` and `|B|`
//! differ by at most 1. Split `s` of the estimate uses stream `s` of `seed + 1`; the draws use
//! [`crate::bootstrap::draw`] with `seed`, and the splits inside draw `b` stream `b` of
//! `seed + 2`, so results do not depend on the thread count.
//!
//! # Interval: centred and de-noised, not the basic interval
//! Two things differ from the MTV case, both measured in `tests/coverage.rs` (constant population
//! accuracy, n = 1,000, T = 21, 100 simulations, 200 splits, 500 draws x 10 splits; true
//! optimism = true regret = 0.0349 by Monte Carlo; the estimates have mean 0.0355-0.0357 and
//! sd 0.0053-0.0055 over eval sets):
//! - the estimate is unbiased by construction (a random half-split of an eval set drawn from the
//!   population is two independent half-sets), but the bootstrap mean is ~20% lower (-0.0072):
//!   the checkpoint scores of a resampled set are spread more than the original's, so selection on
//!   it is easier. The basic interval would "correct" a bias the estimate does not have;
//! - each bootstrap value averages only `splits_per_draw` splits, whose Monte-Carlo noise widens
//!   the bootstrap distribution (sd 0.0093 at 20 splits, 0.014 at 5, 0.0069 without the noise).
//!
//! So [`selection`] removes the split noise ([`denoised`]: deviations shrunk by
//! `sqrt(1 - mc_var / var)`, `mc_var` = mean within-draw variance / `splits_per_draw`) and uses
//! [`crate::bootstrap::centred`] (floor -inf). Coverage of the true value at 95%: regret 99%,
//! optimism 99% (width 0.027; conservative, as the de-noised bootstrap sd, 0.0069, still exceeds
//! the sd over eval sets); basic interval on the raw values: regret 85%, optimism 96% (width
//! 0.037-0.044); basic on the de-noised values: 58%, 59%. [`selection_draws`] returns the raw
//! material for other intervals.

use crate::bootstrap::{centred, draw, rng_for, Interval};
use crate::stats::{mean, sample_variance};
use ndarray::{Array2, ArrayView2};
use ndarray_stats::QuantileExt;
use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use std::collections::BTreeMap;

/// Default number of splits for the estimate.
pub const DEFAULT_SPLITS: usize = 200;
/// Default number of bootstrap draws.
pub const DEFAULT_DRAWS: usize = 1000;
/// Default number of fresh splits per bootstrap draw.
pub const DEFAULT_SPLITS_PER_DRAW: usize = 20;
/// Level of the intervals of [`selection`].
pub const LEVEL: f64 = 0.95;

/// Regret and optimism of selecting a checkpoint on half of the examples.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Selection {
    /// Number of splits behind the estimates.
    pub splits: usize,
    pub regret: Interval,
    pub optimism: Interval,
}

/// The raw material of [`selection`]: the two estimates and, per draw, the two bootstrap means.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectionDraws {
    pub regret: f64,
    pub optimism: f64,
    pub boot_regret: Vec<f64>,
    pub boot_optimism: Vec<f64>,
    /// Monte-Carlo variance that the `splits_per_draw` splits add to each bootstrap value:
    /// mean over draws of the within-draw sample variance of the per-split values, divided by
    /// `splits_per_draw` (NaN when `splits_per_draw < 2`).
    pub mc_var_regret: f64,
    pub mc_var_optimism: f64,
}

/// Selection regret and optimism over random balanced splits of the examples, stratified by `strata` (one id per example; the caller uses gold option x final-checkpoint correctness):
/// within each stratum shuffle and give half to A, half to B (odd strata alternate which half gets the extra one so |A| and |B| differ by at most 1).
/// Per split: chosen = argmax_t score_A(t) (first on ties); regret = max_t score_B(t) - score_B(chosen); optimism = score_A(chosen) - score_B(chosen).
/// Estimate = mean over `splits` splits (>= 200 by default). CI: paired bootstrap over examples (B draws of `draws`; each draw resamples examples and runs `splits_per_draw` fresh splits on the resampled set; the statistic is their mean), `interval(...)` from bootstrap.rs with floor -inf.
///
/// Deviation, measured (see the module doc): the interval is [`crate::bootstrap::centred`] on
/// [`denoised`] bootstrap values, not the [`crate::bootstrap::basic`] interval, whose coverage of
/// the true regret is 85% (raw) or 58% (de-noised). Intervals at [`LEVEL`]. Panics if `strata.len()` is not the number of examples. Fewer than 2
/// examples, no checkpoint, `splits == 0` or NaN values give NaN estimates and bounds.
pub fn selection(
    values: ArrayView2<f64>,
    strata: &[u32],
    splits: usize,
    draws: usize,
    splits_per_draw: usize,
    seed: u64,
) -> Selection {
    let d = selection_draws(values, strata, splits, draws, splits_per_draw, seed);
    Selection {
        splits,
        regret: centred(d.regret, &denoised(&d.boot_regret, d.mc_var_regret), LEVEL, f64::NEG_INFINITY),
        optimism: centred(d.optimism, &denoised(&d.boot_optimism, d.mc_var_optimism), LEVEL, f64::NEG_INFINITY),
    }
}

/// The estimates and bootstrap values behind [`selection`] (for other intervals).
pub fn selection_draws(
    values: ArrayView2<f64>,
    strata: &[u32],
    splits: usize,
    draws: usize,
    splits_per_draw: usize,
    seed: u64,
) -> SelectionDraws {
    let n = values.ncols();
    assert_eq!(strata.len(), n, "selection: one stratum id per example");
    let all: Vec<usize> = (0..n).collect();
    let set = Set::new(&all, strata);
    // the estimate: the whole set's multiplicities, then one half A per split
    let mut cols = vec![set.counts(n)];
    let mut sizes = vec![n];
    for s in 0..splits {
        let (w, n_a) = set.half_a(n, &mut rng_for(seed.wrapping_add(1), s as u64));
        cols.push(w);
        sizes.push(n_a);
    }
    let sums = weighted_sums(values, &cols);
    let (regret, optimism): (Vec<f64>, Vec<f64>) =
        (1..=splits).map(|c| split_scores(&sums, 0, c, sizes[0], sizes[c])).unzip();
    let (regret, optimism) = (mean(&regret), mean(&optimism));
    // Per draw: (mean regret, mean optimism, within-draw variance of regret, of optimism); the
    // draws in chunks, each chunk's multiplicities one matrix product
    const CHUNK: usize = 16;
    let chunks: Vec<Vec<[f64; 4]>> = (0..draws.div_ceil(CHUNK))
        .into_par_iter()
        .map(|c| {
            let range = c * CHUNK..draws.min((c + 1) * CHUNK);
            let (mut cols, mut sizes) = (Vec::new(), Vec::new());
            for b in range.clone() {
                let idx = draw(n, seed, b);
                let set = Set::new(&idx, strata);
                cols.push(set.counts(n));
                sizes.push(idx.len());
                let mut rng = rng_for(seed.wrapping_add(2), b as u64);
                for _ in 0..splits_per_draw {
                    let (w, n_a) = set.half_a(n, &mut rng);
                    cols.push(w);
                    sizes.push(n_a);
                }
            }
            let sums = weighted_sums(values, &cols);
            range
                .enumerate()
                .map(|(i, _)| {
                    let base = i * (1 + splits_per_draw);
                    let (r, o): (Vec<f64>, Vec<f64>) = (1..=splits_per_draw)
                        .map(|j| split_scores(&sums, base, base + j, sizes[base], sizes[base + j]))
                        .unzip();
                    // the variances are read only from two splits per draw on (`mc` is NaN below)
                    [mean(&r), mean(&o), sample_variance(&r), sample_variance(&o)]
                })
                .collect()
        })
        .collect();
    let boot: Vec<[f64; 4]> = chunks.into_iter().flatten().collect();
    let spd = splits_per_draw as f64;
    let mc = |j: usize| {
        if splits_per_draw < 2 || boot.is_empty() {
            f64::NAN
        } else {
            mean(&boot.iter().map(|p| p[j]).collect::<Vec<_>>()) / spd
        }
    };
    SelectionDraws {
        regret,
        optimism,
        boot_regret: boot.iter().map(|p| p[0]).collect(),
        boot_optimism: boot.iter().map(|p| p[1]).collect(),
        mc_var_regret: mc(2),
        mc_var_optimism: mc(3),
    }
}

/// `values` (T x n) times the weight columns (each of length n): T x columns
/// ([`crate::sums::weighted_sums`]: exact integers on 0/1 scores).
fn weighted_sums(values: ArrayView2<f64>, cols: &[Vec<u32>]) -> Array2<f64> {
    crate::sums::weighted_sums(values, &crate::sums::Weights::from_columns(cols, values.ncols()))
}

/// (regret, optimism) of the split whose half A is column `a` of `sums`, in the set of column
/// `whole` (of `size` examples, `n_a` of them in A).
fn split_scores(sums: &Array2<f64>, whole: usize, a: usize, size: usize, n_a: usize) -> (f64, f64) {
    let n_b = size - n_a;
    if n_a == 0 || n_b == 0 || sums.nrows() == 0 {
        return (f64::NAN, f64::NAN);
    }
    let sum_a = sums.column(a);
    let score_b = (&sums.column(whole) - &sum_a) / n_b as f64;
    let score_a = sum_a.mapv(|x| x / n_a as f64);
    regret_optimism(score_a.view(), score_b.view())
}

/// The bootstrap values with the Monte-Carlo noise of their inner split averages removed:
/// deviations from the bootstrap mean shrunk by `sqrt(max(0, 1 - mc_var / var(boot)))`, which
/// gives the variance that infinitely many splits per draw would have (unchanged when `mc_var`
/// is NaN).
pub fn denoised(boot: &[f64], mc_var: f64) -> Vec<f64> {
    if boot.len() < 2 || !mc_var.is_finite() {
        return boot.to_vec();
    }
    let (m, v) = (mean(boot), sample_variance(boot));
    let f = if v > 0.0 { (1.0 - mc_var / v).max(0.0).sqrt() } else { 1.0 };
    boot.iter().map(|b| m + (b - m) * f).collect()
}

/// A (possibly resampled) set of examples grouped by stratum.
struct Set {
    /// Column indices (with repeats) per stratum, strata in ascending id order.
    groups: Vec<Vec<usize>>,
}

impl Set {
    fn new(items: &[usize], strata: &[u32]) -> Self {
        let mut by: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for &i in items {
            by.entry(strata[i]).or_default().push(i);
        }
        Set { groups: by.into_values().collect() }
    }

    /// Multiplicity of each of the `ncols` columns in the set.
    fn counts(&self, ncols: usize) -> Vec<u32> {
        let mut c = vec![0u32; ncols];
        for &i in self.groups.iter().flatten() {
            c[i] += 1;
        }
        c
    }

    /// Multiplicity of each column in half A of one random stratified split.
    fn half_a(&self, ncols: usize, rng: &mut ChaCha8Rng) -> (Vec<u32>, usize) {
        let mut w = vec![0u32; ncols];
        let mut extra_to_a: bool = rng.gen();
        let mut n_a = 0;
        let mut scratch = Vec::new();
        for g in &self.groups {
            scratch.clear();
            scratch.extend_from_slice(g);
            scratch.shuffle(rng);
            let mut k = g.len() / 2;
            if g.len() % 2 == 1 {
                k += usize::from(extra_to_a);
                extra_to_a = !extra_to_a;
            }
            for &c in &scratch[..k] {
                w[c] += 1;
            }
            n_a += k;
        }
        (w, n_a)
    }
}

/// (regret, optimism) for given half scores: chosen = first argmax of `a`.
pub fn regret_optimism(a: ndarray::ArrayView1<f64>, b: ndarray::ArrayView1<f64>) -> (f64, f64) {
    let Some(chosen) = first_argmax(a) else { return (f64::NAN, f64::NAN) };
    let Ok(&best_b) = b.max() else { return (f64::NAN, f64::NAN) };
    (best_b - b[chosen], a[chosen] - b[chosen])
}

/// Index of the first maximum; `None` when empty or some value is NaN.
fn first_argmax(a: ndarray::ArrayView1<f64>) -> Option<usize> {
    if a.is_empty() || a.iter().any(|v| v.is_nan()) {
        return None;
    }
    let mut best = 0;
    for (t, &v) in a.iter().enumerate() {
        if v > a[best] {
            best = t;
        }
    }
    Some(best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{array, Array2};

    #[test]
    fn identical_halves_give_zero() {
        // Examples come in identical pairs, each pair its own stratum: every split puts one copy in
        // A and one in B, so score_A == score_B at every checkpoint.
        let base = array![[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]];
        let values = Array2::from_shape_fn((3, 8), |(t, i)| base[[t, i / 2]]);
        let strata: Vec<u32> = (0..8).map(|i| (i / 2) as u32).collect();
        let s = selection(values.view(), &strata, 50, 0, 1, 3);
        assert_eq!(s.splits, 50);
        assert_eq!(s.regret.estimate, 0.0);
        assert_eq!(s.optimism.estimate, 0.0);
    }

    #[test]
    fn forced_wrong_selection() {
        // Two examples, one stratum: one goes to A, the other to B. Whichever A gets, it picks the
        // checkpoint where B scores 0 and B's best is 1: regret = optimism = 1 on every split.
        let values = array![[1.0, 0.0], [0.0, 1.0]];
        let s = selection(values.view(), &[0, 0], 40, 200, 2, 5);
        assert_eq!(s.regret.estimate, 1.0);
        assert_eq!(s.optimism.estimate, 1.0);
        // In the bootstrap a draw is {0,0} or {1,1} half of the time (then A == B, 0 and 0), so the
        // bootstrap mean is about 0.5 and the basic interval moves up.
        assert!(s.regret.bias_corrected > 1.3 && s.regret.bias_corrected < 1.7, "{:?}", s.regret);
        // The interval is centred on the estimate, not on the bias-corrected value.
        assert!(s.regret.contains(1.0));
    }

    #[test]
    fn denoising_removes_the_split_noise() {
        // boot = +-1 around 5 (variance 4/3 with divisor B-1 = 3); removing MC variance 1/3 leaves 1.
        let boot = [4.0, 6.0, 4.0, 6.0];
        let d = denoised(&boot, 1.0 / 3.0);
        let f = (1.0f64 - 0.25).sqrt();
        for (a, b) in d.iter().zip(&boot) {
            assert!((a - (5.0 + (b - 5.0) * f)).abs() < 1e-12);
        }
        assert_eq!(denoised(&boot, f64::NAN), boot.to_vec());
        assert!(denoised(&boot, 10.0).iter().all(|&v| v == 5.0));
        // two values are enough (variance 2: MC variance 0.5 leaves 1.5); one is left as it is
        let two = denoised(&[4.0, 6.0], 0.5);
        let f = 0.75f64.sqrt();
        assert!((two[0] - (5.0 - f)).abs() < 1e-12 && (two[1] - (5.0 + f)).abs() < 1e-12, "{two:?}");
        assert_eq!(denoised(&[4.0], 0.5), vec![4.0]);
    }

    #[test]
    fn ties_choose_the_first_checkpoint() {
        let a = array![0.5, 0.7, 0.7];
        let b = array![0.6, 0.4, 0.9];
        let (r, o) = regret_optimism(a.view(), b.view());
        assert!((r - 0.5).abs() < 1e-12 && (o - 0.3).abs() < 1e-12);
        assert!(regret_optimism(array![f64::NAN].view(), array![1.0].view()).0.is_nan());
    }

    #[test]
    fn splits_are_balanced_within_strata() {
        // Strata of sizes 3, 5, 1, 4 (three odd ones): per stratum the halves differ by <= 1, in
        // total by <= 1, and both orientations of the extra example occur.
        let strata: Vec<u32> = [0u32; 3].iter().chain(&[7; 5]).chain(&[2; 1]).chain(&[4; 4]).copied().collect();
        let n = strata.len();
        let items: Vec<usize> = (0..n).collect();
        let set = Set::new(&items, &strata);
        let mut seen = std::collections::BTreeSet::new();
        for s in 0..200u64 {
            let (w, n_a) = set.half_a(n, &mut rng_for(9, s));
            assert_eq!(w.iter().sum::<u32>() as usize, n_a);
            assert!(w.iter().all(|&x| x == 0 || x == 1));
            for id in [0u32, 7, 2, 4] {
                let in_s: Vec<usize> = (0..n).filter(|&i| strata[i] == id).collect();
                let a = in_s.iter().filter(|&&i| w[i] == 1).count();
                assert!((2 * a as i64 - in_s.len() as i64).abs() <= 1);
            }
            assert!((2 * n_a as i64 - n as i64).abs() <= 1);
            seen.insert(n_a);
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![6, 7]);
    }

    #[test]
    fn thread_count_independent() {
        let values = Array2::from_shape_fn((6, 40), |(t, i)| f64::from(((t * 13 + i * 7) % 3 == 0) as u8));
        let strata: Vec<u32> = (0..40).map(|i| (i % 3) as u32).collect();
        let run = |k| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(k)
                .build()
                .unwrap()
                .install(|| selection(values.view(), &strata, 30, 40, 3, 11))
        };
        let one = run(1);
        assert_eq!(one, run(4));
        assert!(one.regret.estimate >= 0.0);
        assert!(one.regret.low <= one.regret.high);
    }

    /// The summed path (multiplicity columns, one product per chunk of 16 draws) equals the direct
    /// one: per split, each half's mean value at every checkpoint, then regret and optimism; per
    /// draw, the mean and sample variance over its splits. 37 draws: two full chunks and a part.
    #[test]
    fn the_summed_path_equals_the_direct_one() {
        let (t_len, n) = (5, 23);
        let values =
            Array2::from_shape_fn((t_len, n), |(t, i)| f64::from((t * 31 + i * 17 + (t * i * i) % 11) % 7 < 3));
        let strata: Vec<u32> = (0..n).map(|i| (i % 3) as u32).collect();
        let (splits, draws, spd, seed) = (7, 37, 4, 21u64);
        let got = selection_draws(values.view(), &strata, splits, draws, spd, seed);
        // half A has multiplicities `w`, half B the rest of `items`
        let direct = |items: &[usize], w: &[u32]| -> (f64, f64) {
            let mut b = vec![0u32; n];
            for &i in items {
                b[i] += 1;
            }
            let b: Vec<u32> = b.iter().zip(w).map(|(x, y)| x - y).collect();
            let score = |m: &[u32]| -> ndarray::Array1<f64> {
                let size: u32 = m.iter().sum();
                (0..t_len)
                    .map(|t| (0..n).map(|i| f64::from(m[i]) * values[[t, i]]).sum::<f64>() / f64::from(size))
                    .collect()
            };
            regret_optimism(score(w).view(), score(&b).view())
        };
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        let all: Vec<usize> = (0..n).collect();
        let set = Set::new(&all, &strata);
        let (r, o): (Vec<f64>, Vec<f64>) =
            (0..splits).map(|s| direct(&all, &set.half_a(n, &mut rng_for(seed + 1, s as u64)).0)).unzip();
        assert!(close(got.regret, mean(&r)) && close(got.optimism, mean(&o)), "{got:?}");
        assert!(r.iter().any(|&x| x > 0.0), "a case where selection loses something: {r:?}");
        let (mut var_r, mut var_o) = (0.0, 0.0);
        assert_eq!((got.boot_regret.len(), got.boot_optimism.len()), (draws, draws));
        for b in 0..draws {
            let idx = draw(n, seed, b);
            let set = Set::new(&idx, &strata);
            let mut rng = rng_for(seed + 2, b as u64);
            let (r, o): (Vec<f64>, Vec<f64>) = (0..spd).map(|_| direct(&idx, &set.half_a(n, &mut rng).0)).unzip();
            assert!(close(got.boot_regret[b], mean(&r)) && close(got.boot_optimism[b], mean(&o)), "draw {b}");
            var_r += sample_variance(&r);
            var_o += sample_variance(&o);
        }
        let per = (draws * spd) as f64;
        assert!(close(got.mc_var_regret, var_r / per) && close(got.mc_var_optimism, var_o / per), "{got:?}");
        assert!(got.mc_var_regret > 0.0 && got.mc_var_optimism > 0.0);
        // one split per draw has no within-draw variance; no draws, nothing to average
        let one = selection_draws(values.view(), &strata, splits, 3, 1, seed);
        assert!(one.mc_var_regret.is_nan() && one.mc_var_optimism.is_nan() && one.boot_regret.len() == 3);
        assert_eq!((one.regret, one.optimism), (got.regret, got.optimism), "the estimate does not depend on the draws");
        let two = selection_draws(values.view(), &strata, splits, 3, 2, seed);
        assert!(two.mc_var_regret.is_finite() && two.mc_var_optimism.is_finite(), "{two:?}");
        let none = selection_draws(values.view(), &strata, splits, 0, spd, seed);
        assert!(none.boot_regret.is_empty() && none.mc_var_regret.is_nan());
    }

    /// A half with no examples, or no checkpoint, has no scores to compare.
    #[test]
    fn empty_halves_and_no_checkpoints_give_nan() {
        let sums = array![[3.0, 1.0], [2.0, 2.0]];
        assert!(split_scores(&sums, 0, 1, 4, 0).0.is_nan() && split_scores(&sums, 0, 1, 4, 4).1.is_nan());
        assert!(split_scores(&Array2::zeros((0, 2)), 0, 1, 4, 2).0.is_nan());
        // B is empty, whatever the sums say (here sums that would give B infinite scores)
        let (r, o) = split_scores(&array![[3.0, 1.0], [2.0, 1.0]], 0, 1, 4, 4);
        assert!(r.is_nan() && o.is_nan(), "{r} {o}");
        // half A = column 1 of 2 examples, B = the other 2: A scores (0.5, 1), B (1, 0)
        let (r, o) = split_scores(&sums, 0, 1, 4, 2);
        assert!((r - 1.0).abs() < 1e-12 && (o - 1.0).abs() < 1e-12, "{r} {o}");
        assert!(regret_optimism(array![0.5].view(), ndarray::Array1::<f64>::zeros(0).view()).0.is_nan());
        assert_eq!(first_argmax(ndarray::Array1::<f64>::zeros(0).view()), None);
        assert_eq!(first_argmax(array![0.1, 0.3, 0.2, 0.3].view()), Some(1));
    }
}
