//! Noise nulls for the task MTV of a checkpoint trail.
//!
//! Every checkpoint is scored on the same examples, so consecutive scores are paired. The null of
//! "no real change between t and t+1" is that each example's difference `x[t+1,i] - x[t,i]` is
//! symmetric about 0: [`sign_flip_null`] keeps each difference's magnitude and gives it a fair
//! sign (for 0/1 data: each discordant example's direction is a fair coin, exact McNemar per
//! transition). Its trail-level test rejects too often under pure churn (consecutive
//! differences share a checkpoint); [`permutation_null`] permutes each example's scores over the
//! checkpoints instead and holds its level under stationary churn, but counts examples that still
//! drift (learn) as noise; both are reported.
//! [`independent_binomial_bound`] is the old figure that simulates each score
//! independently; it overstates noise and is kept only for trails without per-example data, as
//! a conservative upper bound on noise.

use ndarray::ArrayView2;
use rand::seq::SliceRandom;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use statrs::distribution::{Binomial, DiscreteCDF};

use crate::stats::{mean, quantile_sorted};
use crate::subsets;

/// Two-sided exact McNemar p-value for b (right->wrong) and c (wrong->right) discordant pairs:
/// min(1, 2 * P(X <= min(b, c))), X ~ Binomial(b + c, 1/2); 1.0 when b + c == 0. Use statrs.
pub fn mcnemar_exact(b: u64, c: u64) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    let tail = Binomial::new(0.5, n).expect("p = 1/2 is a valid binomial parameter").cdf(b.min(c));
    (2.0 * tail).min(1.0)
}

/// Benjamini-Hochberg at false-discovery rate q: which hypotheses are rejected (same order as p).
///
/// Step-up: with the p-values sorted, p_(1) <= ... <= p_(m), the k smallest are rejected for the
/// largest k with p_(k) <= k q / m (none if there is no such k). A NaN p-value counts in m and is
/// never rejected.
pub fn benjamini_hochberg(p: &[f64], q: f64) -> Vec<bool> {
    let m = p.len();
    let key = |x: f64| if x.is_nan() { f64::INFINITY } else { x };
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| key(p[a]).total_cmp(&key(p[b])));
    let mut k = 0;
    for (rank, &i) in order.iter().enumerate() {
        if key(p[i]) <= (rank + 1) as f64 * q / m as f64 {
            k = rank + 1;
        }
    }
    let mut rejected = vec![false; m];
    for &i in &order[..k] {
        rejected[i] = true;
    }
    rejected
}

/// Below this k, `C(2k, k) / 4^k` is the product of its ratio recurrence; from it on, the
/// asymptotic series (whose first omitted term is below 1e-18 relative there).
const SERIES_FROM: u64 = 1024;

/// `C(2k, k) / 4^k`, the probability that 2k fair signs sum to 0.
///
/// For k < [`SERIES_FROM`]: the product of `(2j - 1) / (2j)` for j = 1..=k (each step the ratio of
/// consecutive terms; no overflow, relative error about k ulps). From it on:
/// `(pi k)^(-1/2) (1 - 1/(8k) + 1/(128k^2) + 5/(1024k^3) - 21/(32768k^4))`.
fn central_binomial_over_4k(k: u64) -> f64 {
    if k < SERIES_FROM {
        (1..=k).fold(1.0, |acc, j| acc * (2 * j - 1) as f64 / (2 * j) as f64)
    } else {
        let x = 1.0 / k as f64;
        let series = 1.0 + x * (-1.0 / 8.0 + x * (1.0 / 128.0 + x * (5.0 / 1024.0 + x * (-21.0 / 32768.0))));
        series / (std::f64::consts::PI * k as f64).sqrt()
    }
}

/// E|S_d| where S_d is the sum of d independent fair +-1 signs (closed form:
/// d * C(d-1, floor((d-1)/2)) / 2^(d-1), 0 for d = 0), computed stably for d up to 10^6 (log-gamma or a ratio recurrence).
///
/// With m = d - 1 and k = floor(m / 2): `C(m, k) / 2^m` is `C(2k, k) / 4^k` for even m and
/// `C(2k, k) / 4^k * (2k + 1) / (2k + 2)` for odd m (see `central_binomial_over_4k`).
pub fn expected_abs_sign_sum(d: u64) -> f64 {
    if d == 0 {
        return 0.0;
    }
    let m = d - 1;
    let k = m / 2;
    let mut central = central_binomial_over_4k(k);
    if m % 2 == 1 {
        central *= (2 * k + 1) as f64 / (2 * k + 2) as f64;
    }
    d as f64 * central
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PairedNull {
    pub observed_mtv: f64,
    /// mean MTV under the sign-flip null (exact, from expected_abs_sign_sum, for 0/1 data; the mean of the draws otherwise)
    pub null_mean: f64,
    /// 95th percentile of the null draws of MTV (linear interpolation between order statistics)
    pub null_q95: f64,
    /// observed_mtv / null_mean (1 = noise alone)
    pub ratio: f64,
    /// trail-level p = (1 + #{null MTV >= observed}) / (1 + draws)
    pub p_value: f64,
    pub draws: usize,
    pub transitions: usize,
    /// transitions significant after Benjamini-Hochberg at q = 0.05 (per-transition p: exact McNemar for 0/1 data; for other data the sign-flip p of |s_{t+1}-s_t| from the same draws)
    pub significant_transitions: usize,
    pub share_significant: f64,
}

/// False-discovery rate at which transitions are counted significant.
const TRANSITION_FDR: f64 = 0.05;

/// In the general path a null statistic counts as `>=` the observed one when it is at least
/// `observed * (1 - TIE_TOLERANCE)`: sign vectors that tie mathematically may differ by rounding,
/// and a near-tie counted as an exceedance makes the p-value conservative, never liberal.
const TIE_TOLERANCE: f64 = 1e-10;

/// The paired sign-flip permutation null of a trail's task MTV. values: shape (T checkpoints, n examples), rows in step order.
/// Under H0 each d[t,i] keeps its magnitude and gets an independent fair sign. None if T < 2 or n == 0.
/// 0/1 fast path: per transition only D_t = #discordant matters: draw b ~ Binomial(D_t, 1/2) and |2b - D_t| / n.
/// Draws run in parallel with rayon and are seeded per draw index (e.g. ChaCha8Rng::seed_from_u64(seed) with set_stream(draw)),
/// so the result does NOT depend on the number of threads. draws >= 2000 is the caller's default.
///
/// Also None if `draws == 0` or any value is not finite. Data whose values are all exactly 0 or 1
/// take the fast path; any other data the general one (signs drawn for every nonzero difference).
/// Signs are independent across transitions too, although consecutive differences share a
/// checkpoint: under pure example churn at constant accuracy (consecutive score changes then
/// correlated -1/2) the null understates the MTV's spread, and the trail-level test rejects about
/// 8% of trails at nominal 5% (measured in tests/nulls_simulations.rs); the null mean stays exact.
/// [`permutation_null`] holds the level there; the analysis reports both (see its doc for why
/// this one stays the primary test).
pub fn sign_flip_null(values: ndarray::ArrayView2<f64>, draws: usize, seed: u64) -> Option<PairedNull> {
    sign_flip_null_impl(values, draws, seed, true)
}

/// [`sign_flip_null`], with the fast paths (0/1 counts, the normal sum of many small
/// differences) allowed or not (tests force exact sign flips everywhere).
fn sign_flip_null_impl(values: ArrayView2<f64>, draws: usize, seed: u64, allow_fast: bool) -> Option<PairedNull> {
    let (t_len, n) = values.dim();
    if t_len < 2 || n == 0 || draws == 0 || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let scores: Vec<f64> = values.rows().into_iter().map(|r| r.sum() / n as f64).collect();
    let observed_mtv = theory::sequence::mtv(&scores)?;
    let binary = values.iter().all(|&v| v == 0.0 || v == 1.0);
    let (null_mean, mut null_mtvs, trail_exceed, transition_p) = if binary && allow_fast {
        binary_null(values, draws, seed)
    } else {
        general_null(values, draws, seed, allow_fast)
    };
    null_mtvs.sort_by(f64::total_cmp);
    let null_mean = null_mean.unwrap_or_else(|| mean(&null_mtvs));
    let transitions = t_len - 1;
    let significant_transitions = benjamini_hochberg(&transition_p, TRANSITION_FDR).into_iter().filter(|&r| r).count();
    Some(PairedNull {
        observed_mtv,
        null_mean,
        null_q95: quantile_sorted(&null_mtvs, 0.95),
        ratio: observed_mtv / null_mean,
        p_value: (1 + trail_exceed) as f64 / (1 + draws) as f64,
        draws,
        transitions,
        significant_transitions,
        share_significant: significant_transitions as f64 / transitions as f64,
    })
}

/// What the draws give: the exact null mean where known, the null MTVs (any order), how many are
/// >= the observed MTV, and the per-transition p-values.
type NullDraws = (Option<f64>, Vec<f64>, u64, Vec<f64>);

/// The generator of draw `k`: one seed for the trail, one ChaCha stream per draw index.
fn draw_rng(seed: u64, k: usize) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(k as u64);
    rng
}

/// Binomial(d, 1/2), exactly: the number of ones among d fair random bits.
fn fair_binomial(rng: &mut ChaCha8Rng, d: u64) -> u64 {
    let mut ones = 0u64;
    let mut left = d;
    while left >= 64 {
        ones += u64::from(rng.next_u64().count_ones());
        left -= 64;
    }
    if left > 0 {
        ones += u64::from((rng.next_u64() & ((1u64 << left) - 1)).count_ones());
    }
    ones
}

/// The largest `K = sum d^4 / (sum d^2)^2` at which a transition's sign-flip sum is drawn as a
/// normal variable ([`normal_sum_sd`]).
pub const NORMAL_MAX_K: f64 = 0.01;

/// The largest share of a transition's differences that may have one magnitude for its sign-flip
/// sum to be drawn as a normal variable ([`normal_sum_sd`]).
pub const NORMAL_MAX_TIED: f64 = 0.01;

/// The sd `sqrt(sum d^2)` of the sign-flip sum `sum_i s_i d_i` (fair signs s_i) of one
/// transition's nonzero differences `d`, where that sum may be drawn as `sd * z`, z ~ N(0, 1);
/// `None` where the exact signs must be drawn. Two conditions:
/// - `K = sum d^4 / (sum d^2)^2 <= NORMAL_MAX_K`: the sum is symmetric, so its first Edgeworth
///   term vanishes and the next (the standardised fourth cumulant, `-2 K`) moves its CDF by at
///   most `0.55 K / 12`, below 5e-4 per transition (over T transitions the null's MTV runs low by
///   about `K / 12` relative, below 0.1%). `K ~ kurtosis / n`: a few hundred continuous differences.
/// - no magnitude holds more than `NORMAL_MAX_TIED` of the differences: differences on a lattice
///   (0/1 scores, averages of k 0/1 scores, char F1 of identical or disjoint texts) give a sum on
///   a lattice, whose exact tail has atoms that a normal draw never ties (the test counts ties as
///   exceeding), so a normal draw would make p-values too small by about half an atom.
///
/// The magnitudes are scaled by the largest before the fourth powers (no underflow).
fn normal_sum_sd(d: &[f64]) -> Option<f64> {
    let top = d.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if d.is_empty() || top == 0.0 || !top.is_finite() {
        return None;
    }
    let (s2, s4) = d.iter().fold((0.0, 0.0), |(a, b), &v| {
        let x = (v / top) * (v / top);
        (a + x, b + x * x)
    });
    if s4 / (s2 * s2) > NORMAL_MAX_K {
        return None;
    }
    // equal magnitudes are equal bit patterns (finite, non-negative): sorted as integers
    let mut mags: Vec<u64> = d.iter().map(|v| v.abs().to_bits()).collect();
    mags.sort_unstable();
    let most_tied = mags.chunk_by(|a, b| a == b).map(<[u64]>::len).max().unwrap_or(0);
    (most_tied as f64 <= NORMAL_MAX_TIED * d.len() as f64).then(|| top * s2.sqrt())
}

/// Per-thread tally of the draws (integer counts, so the merge order does not matter).
#[derive(Default)]
struct Tally {
    mtvs: Vec<f64>,
    trail_exceed: u64,
    transition_exceed: Vec<u64>,
}

impl Tally {
    fn merge(mut self, other: Tally) -> Tally {
        self.mtvs.extend(other.mtvs);
        self.trail_exceed += other.trail_exceed;
        if self.transition_exceed.is_empty() {
            self.transition_exceed = other.transition_exceed;
        } else {
            for (a, b) in self.transition_exceed.iter_mut().zip(other.transition_exceed) {
                *a += b;
            }
        }
        self
    }
}

/// 0/1 data: per transition b_t (right->wrong), c_t (wrong->right), D_t = b_t + c_t. A draw is
/// `sum_t |2 B_t - D_t|` with B_t ~ Binomial(D_t, 1/2), compared in integers with the observed
/// `sum_t |c_t - b_t|`; the null mean is exact; per-transition p is exact McNemar.
fn binary_null(values: ArrayView2<f64>, draws: usize, seed: u64) -> NullDraws {
    let (t_len, n) = values.dim();
    let transitions = t_len - 1;
    let (mut b, mut c) = (vec![0u64; transitions], vec![0u64; transitions]);
    for t in 0..transitions {
        for (&x0, &x1) in values.row(t).iter().zip(values.row(t + 1).iter()) {
            if x0 == 1.0 && x1 == 0.0 {
                b[t] += 1;
            } else if x0 == 0.0 && x1 == 1.0 {
                c[t] += 1;
            }
        }
    }
    let discordant: Vec<u64> = b.iter().zip(&c).map(|(b, c)| b + c).collect();
    let observed: u64 = b.iter().zip(&c).map(|(&b, &c)| b.abs_diff(c)).sum();
    let scale = 1.0 / (n as f64 * transitions as f64);
    let tally = (0..draws)
        .into_par_iter()
        .fold(Tally::default, |mut tally, k| {
            let mut rng = draw_rng(seed, k);
            let total: u64 = discordant.iter().map(|&d| (2 * fair_binomial(&mut rng, d)).abs_diff(d)).sum();
            tally.mtvs.push(total as f64 * scale);
            tally.trail_exceed += u64::from(total >= observed);
            tally
        })
        .reduce(Tally::default, Tally::merge);
    let exact_mean = discordant.iter().map(|&d| expected_abs_sign_sum(d)).sum::<f64>() * scale;
    let transition_p = b.iter().zip(&c).map(|(&b, &c)| mcnemar_exact(b, c)).collect();
    (Some(exact_mean), tally.mtvs, tally.trail_exceed, transition_p)
}

/// Any real data: per transition the nonzero differences d[t,i]; a draw gives each a fair sign
/// (one random bit each) and takes `mean_t |sum_i sign_i d[t,i]| / n`. Per-transition p is the
/// sign-flip p of `|s_{t+1} - s_t|` from the same draws.
///
/// With `normal` allowed, a transition of many small differences off any lattice draws its signed
/// sum at once (one normal draw instead of n signs; issue 29: these nulls were most of a large
/// report's analysis time): see [`normal_sum_sd`].
fn general_null(values: ArrayView2<f64>, draws: usize, seed: u64, normal: bool) -> NullDraws {
    let (t_len, n) = values.dim();
    let transitions = t_len - 1;
    let diffs: Vec<Vec<f64>> = (0..transitions)
        .map(|t| {
            values.row(t + 1).iter().zip(values.row(t).iter()).map(|(x1, x0)| x1 - x0).filter(|&d| d != 0.0).collect()
        })
        .collect();
    // the observed statistics, summed exactly as a draw with every sign + is
    let observed_abs: Vec<f64> = diffs.iter().map(|d| d.iter().sum::<f64>().abs()).collect();
    // per transition: the sd of its signed sum where the normal draw stands in for the signs
    let normal_sd: Vec<Option<f64>> = diffs.iter().map(|d| if normal { normal_sum_sd(d) } else { None }).collect();
    let observed_total: f64 = observed_abs.iter().sum();
    let scale = 1.0 / (n as f64 * transitions as f64);
    let tally = (0..draws)
        .into_par_iter()
        .fold(
            || Tally { transition_exceed: vec![0; transitions], ..Tally::default() },
            |mut tally, k| {
                let mut rng = draw_rng(seed, k);
                let mut normals = NormalPairs::default();
                let mut total = 0.0;
                for (t, d) in diffs.iter().enumerate() {
                    let mut sum = 0.0;
                    if let Some(sd) = normal_sd[t] {
                        sum = sd * normals.next(&mut rng);
                    } else {
                        for chunk in d.chunks(64) {
                            let bits = rng.next_u64();
                            for (j, &v) in chunk.iter().enumerate() {
                                // v where the bit is 1, else -v: the sign bit flipped without a
                                // branch (a random branch mispredicts half the time; same sums)
                                sum += f64::from_bits(v.to_bits() ^ ((!(bits >> j) & 1) << 63));
                            }
                        }
                    }
                    let abs = sum.abs();
                    tally.transition_exceed[t] += u64::from(abs >= observed_abs[t] * (1.0 - TIE_TOLERANCE));
                    total += abs;
                }
                tally.mtvs.push(total * scale);
                tally.trail_exceed += u64::from(total >= observed_total * (1.0 - TIE_TOLERANCE));
                tally
            },
        )
        .reduce(Tally::default, Tally::merge);
    let transition_p = tally.transition_exceed.iter().map(|&e| (1 + e) as f64 / (1 + draws) as f64).collect();
    (None, tally.mtvs, tally.trail_exceed, transition_p)
}

/// The trail-level null of [`permutation_null`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PermutationNull {
    pub observed_mtv: f64,
    /// mean MTV of the permuted trails: exact for 0/1 data ([`permutation_mean_binary`]), the
    /// mean of the draws otherwise
    pub null_mean: f64,
    /// 95th percentile of the permuted trails' MTV, of the draws made (for 0/1 data that stopped
    /// early, as few as 20: rough; the report uses the ratio and the p-value)
    pub null_q95: f64,
    /// observed_mtv / null_mean (1 = noise alone)
    pub ratio: f64,
    /// (1 + #{permuted MTV >= observed}) / (1 + draws); for 0/1 data, where the draws stopped at
    /// [`STOP_AFTER_EXCEEDANCES`] exceedances after L draws: h / L
    pub p_value: f64,
    /// the draws made (fewer than asked where they stopped early)
    pub draws: usize,
}

/// The checkpoint-permutation null of a trail's task MTV. values: (T checkpoints, n examples),
/// rows in step order.
///
/// H0: no real change over the window, each example's scores are exchangeable over its
/// checkpoints (per-example churn around a fixed probability of being right, the population
/// accuracy constant). A draw permutes each example's values over the checkpoints independently
/// (examples stay independent, as they are) and takes the MTV of the resulting task scores. Unlike
/// [`sign_flip_null`], whose signs are independent across transitions although consecutive
/// differences share a checkpoint (under churn their sums correlate -1/2), this keeps the
/// dependence between transitions, so the test holds its level: measured in
/// tests/nulls_calibration.rs on 1,000 simulated churn trails (4.4% over 41 checkpoints, 5.7% over
/// the final 9, where the sign-flip test rejects 7.9% and 8.0%). Its draws stay exact: the
/// report runs it on 0/1 scores, whose sums lie on a lattice, where a normal stand-in (as
/// [`normal_sum_sd`]'s) would make p-values too small (a draw never ties the observed total).
///
/// Its weakness is drift: an example that is still being learned (0 0 0 1 1) flips once in the
/// data and several times in a permutation, so where examples drift the null's MTV is inflated and
/// the test conservative. On the committed runs' final windows its ratio is 0.1-0.4 below the
/// sign-flip one (e.g. heldout_swap of cosine-s1, last 10 checkpoints: 0.36 vs 0.54), and over
/// whole trails it calls heldout_swap's learning from 0.50 to 0.96 noise (1.10x, p = 0.18; the
/// sign-flip null: 2.03x, p = 0.001). The sign-flip null conditions on each transition's
/// discordance and so is robust to drift; it stays the primary test, this one is reported beside
/// it. Examples whose values never change
/// contribute a constant and are not drawn. Draw `k` uses stream `k` of `seed` (thread-count
/// independent). For 0/1 data the null mean is exact (not the mean of the draws) and the draws
/// stop early on trails far from significance ([`STOP_AFTER_EXCEEDANCES`]). None if T < 2,
/// n == 0, draws == 0 or a value is not finite.
pub fn permutation_null(values: ArrayView2<f64>, draws: usize, seed: u64) -> Option<PermutationNull> {
    permutation_null_impl(values, draws, seed, Some(STOP_AFTER_EXCEEDANCES))
}

/// The permutation null's draws stop once this many have reached the observed MTV (0/1 data):
/// Besag and Clifford's sequential Monte Carlo p-value, `h / L` after `L` draws with `h`
/// exceedances, is exact (P(p <= a) <= a) like the fixed-count one; a trail far from
/// significance then costs ~`h / p` draws instead of all of them (issue 29: these draws were most
/// of a large report's analysis). A p-value below `h / draws` is unaffected: those trails run
/// every draw, the same draws as without the rule.
pub const STOP_AFTER_EXCEEDANCES: u64 = 20;

/// Draws made (in parallel) between two checks of the stopping rule: the first chunk
/// [`FIRST_DRAW_CHUNK`], then as many as made so far, at most [`DRAW_CHUNK`] (a trail far from
/// significance stops after 20-60 draws; a fixed chunk of 128 made up to 100 draws for nothing).
/// The rule is applied in draw order, so the result depends on neither the chunks nor the number
/// of threads.
const DRAW_CHUNK: usize = 128;
const FIRST_DRAW_CHUNK: usize = 16;

/// The exact mean MTV of the permutation null of 0/1 columns with `ones[i]` ones among `t_len`
/// checkpoints, per example of `n`. Every pair of consecutive checkpoints has the same law under
/// the permutations: column i differs between them with probability
/// `r_i = 2 k_i (T - k_i) / (T (T - 1))`, up or down alike, columns independently. So the
/// difference of the sums is a sum of `D` fair signs, `D ~ PoissonBinomial(r)`, and
/// `E|dS| = sum_d P(D = d) E|S_d|` ([`expected_abs_sign_sum`]); the MTV's mean is `E|dS| / n`.
fn permutation_mean_binary(ones: &[usize], t_len: usize, n: usize) -> f64 {
    let t = t_len as f64;
    let mut pmf = vec![1.0];
    for &k in ones {
        let r = 2.0 * k as f64 * (t - k as f64) / (t * (t - 1.0));
        let mut next = vec![0.0; pmf.len() + 1];
        for (d, &p) in pmf.iter().enumerate() {
            next[d] += p * (1.0 - r);
            next[d + 1] += p * r;
        }
        pmf = next;
    }
    pmf.iter().enumerate().map(|(d, &p)| p * expected_abs_sign_sum(d as u64)).sum::<f64>() / n as f64
}

/// [`permutation_null`], with the stopping rule after `stop` exceedances or none (every draw).
fn permutation_null_impl(
    values: ArrayView2<f64>,
    draws: usize,
    seed: u64,
    stop: Option<u64>,
) -> Option<PermutationNull> {
    let (t_len, n) = values.dim();
    if t_len < 2 || n == 0 || draws == 0 || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let scores: Vec<f64> = values.rows().into_iter().map(|r| r.sum() / n as f64).collect();
    let observed_mtv = theory::sequence::mtv(&scores)?;
    // the columns that change; the constant ones add the same amount to every checkpoint
    let moving: Vec<Vec<f64>> =
        values.columns().into_iter().filter(|c| c.iter().any(|&v| v != c[0])).map(|c| c.to_vec()).collect();
    let scale = 1.0 / (n as f64 * (t_len - 1) as f64);
    let observed_total: f64 = {
        let mut sums = vec![0.0; t_len];
        for c in &moving {
            for (s, v) in sums.iter_mut().zip(c) {
                *s += v;
            }
        }
        sums.windows(2).map(|w| (w[1] - w[0]).abs()).sum()
    };
    let ones: Option<Vec<usize>> = moving
        .iter()
        .map(|c| c.iter().all(|&v| v == 0.0 || v == 1.0).then(|| c.iter().filter(|&&v| v == 1.0).count()))
        .collect();
    // 0/1 columns: only the number of ones matters; a permutation puts them at a uniformly
    // random subset of the checkpoints ([`subsets::Sampler`])
    let sampler = ones.as_ref().map(|o| subsets::Sampler::new(o, t_len));
    let draw = |k: usize| -> f64 {
        let mut rng = draw_rng(seed, k);
        if let Some(s) = &sampler {
            return s.sums(&mut rng).windows(2).map(|w| f64::from(w[1].abs_diff(w[0]))).sum();
        }
        let mut sums = vec![0.0; t_len];
        let mut col = vec![0.0; t_len];
        for c in &moving {
            col.copy_from_slice(c);
            col.shuffle(&mut rng);
            for (s, v) in sums.iter_mut().zip(&col) {
                *s += v;
            }
        }
        sums.windows(2).map(|w| (w[1] - w[0]).abs()).sum::<f64>()
    };
    // the stopping rule needs the exact mean (the mean of a few draws would make the ratio noisy)
    let exact_mean = ones.as_ref().map(|o| permutation_mean_binary(o, t_len, n));
    let stop = stop.filter(|_| exact_mean.is_some());
    let exceeds = |x: f64| x >= observed_total * (1.0 - TIE_TOLERANCE);
    let (mut null_totals, mut exceed, mut stopped) = (Vec::with_capacity(draws), 0u64, false);
    while null_totals.len() < draws && !stopped {
        let from = null_totals.len();
        let size = from.clamp(FIRST_DRAW_CHUNK, DRAW_CHUNK);
        let chunk: Vec<f64> = (from..draws.min(from + size)).into_par_iter().map(draw).collect();
        for x in chunk {
            null_totals.push(x);
            exceed += u64::from(exceeds(x));
            if stop.is_some_and(|h| exceed >= h) {
                stopped = true;
                break;
            }
        }
    }
    let made = null_totals.len();
    let p_value = if stopped { exceed as f64 / made as f64 } else { (1 + exceed) as f64 / (1 + draws) as f64 };
    null_totals.sort_by(f64::total_cmp);
    let null_mtvs: Vec<f64> = null_totals.iter().map(|x| x * scale).collect();
    let null_mean = exact_mean.unwrap_or_else(|| mean(&null_mtvs));
    Some(PermutationNull {
        observed_mtv,
        null_mean,
        null_q95: quantile_sorted(&null_mtvs, 0.95),
        ratio: observed_mtv / null_mean,
        p_value,
        draws: made,
    })
}

/// The old independent-binomial figure for a trail without per-example data.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BinomialBound {
    /// mean simulated MTV of trend + independent noise
    pub expected_mtv: f64,
    /// observed MTV / expected_mtv; an upper bound on noise overstates it, so this understates signal
    pub ratio: f64,
    /// (1 + #{simulated MTV >= observed}) / (1 + sims)
    pub p_value: f64,
}

/// The old independent-binomial noise figure, kept ONLY for trails without per-example data (lm-eval results files),
/// labelled as a conservative upper bound on noise: s_t = trend_t + e_t, e_t ~ N(0, se_t^2) independent,
/// trend = least-squares line of scores on steps; returns expected MTV, ratio, simulated p (add-one).
///
/// It ignores that consecutive scores share their examples (which cancels most of the noise in
/// a difference), so it overstates noise: on pure example churn at constant accuracy its ratio
/// is well below 1. None if the lengths differ, there are fewer than 2 scores, `sims == 0`, or a
/// value is not finite or a standard error negative.
pub fn independent_binomial_bound(
    steps: &[f64],
    scores: &[f64],
    stderr: &[f64],
    sims: usize,
    seed: u64,
) -> Option<BinomialBound> {
    let len = scores.len();
    if len < 2 || steps.len() != len || stderr.len() != len || sims == 0 {
        return None;
    }
    if steps.iter().chain(scores).chain(stderr).any(|v| !v.is_finite()) || stderr.iter().any(|&s| s < 0.0) {
        return None;
    }
    let observed = theory::sequence::mtv(scores)?;
    let (intercept, slope) = least_squares_line(steps, scores);
    let trend: Vec<f64> = steps.iter().map(|&x| intercept + slope * x).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut normals = NormalPairs::default();
    let mut simulated = vec![0.0; len];
    let (mut total, mut exceed) = (0.0, 0u64);
    for _ in 0..sims {
        for ((s, &m), &se) in simulated.iter_mut().zip(&trend).zip(stderr) {
            *s = m + se * normals.next(&mut rng);
        }
        let m = theory::sequence::mtv(&simulated)?;
        total += m;
        exceed += u64::from(m >= observed);
    }
    let expected_mtv = total / sims as f64;
    Some(BinomialBound {
        expected_mtv,
        ratio: observed / expected_mtv,
        p_value: (1 + exceed) as f64 / (1 + sims) as f64,
    })
}

/// Ordinary least squares `y = intercept + slope x`: (intercept, slope). With all x equal the
/// slope is 0 and the intercept the mean of y.
fn least_squares_line(x: &[f64], y: &[f64]) -> (f64, f64) {
    let (mx, my) = (mean(x), mean(y));
    let sxx: f64 = x.iter().map(|&a| (a - mx) * (a - mx)).sum();
    let sxy: f64 = x.iter().zip(y).map(|(&a, &b)| (a - mx) * (b - my)).sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    (my - slope * mx, slope)
}

/// Standard normal draws by Box-Muller: two uniforms give two independent N(0, 1) values; the
/// second is kept for the next call.
#[derive(Default)]
struct NormalPairs {
    spare: Option<f64>,
}

impl NormalPairs {
    fn next(&mut self, rng: &mut ChaCha8Rng) -> f64 {
        if let Some(z) = self.spare.take() {
            return z;
        }
        // u1 in (0, 1], so its log is finite
        let u1 = 1.0 - rng.gen::<f64>();
        let u2: f64 = rng.gen();
        let r = (-2.0 * u1.ln()).sqrt();
        let angle = 2.0 * std::f64::consts::PI * u2;
        self.spare = Some(r * angle.sin());
        r * angle.cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One example over three checkpoints with a single 1 (0/1 path) or a single 0.5 (general
    /// path): the permutations put it at each checkpoint with probability 1/3; the trail [0, x, 0]
    /// has the largest MTV, which a third of the permutations reach, [x, 0, 0] the smallest.
    #[test]
    fn the_permutation_null_is_exact_on_a_small_trail() {
        for x in [1.0, 0.5] {
            let mid = ndarray::array![[0.0], [x], [0.0]];
            let p = permutation_null_impl(mid.view(), 30_000, 5, None).unwrap();
            assert!((p.p_value - 1.0 / 3.0).abs() < 0.01, "x = {x}: {}", p.p_value);
            // null MTV: (1 + 2 + 1) / 3 of x per transition pair, over 2 transitions
            assert!((p.null_mean - x * 4.0 / 3.0 / 2.0).abs() < 0.01, "x = {x}: {}", p.null_mean);
            let edge = ndarray::array![[x], [0.0], [0.0]];
            assert_eq!(permutation_null(edge.view(), 1000, 5).unwrap().p_value, 1.0);
        }
        // the 0/1 mean is exact, not the mean of the draws
        let mid = ndarray::array![[0.0], [1.0], [0.0]];
        assert!(close(permutation_null(mid.view(), 10, 5).unwrap().null_mean, 2.0 / 3.0, 1e-12));
        // two of three ones (the 0/1 path places the zero): the same law mirrored
        let two = ndarray::array![[1.0], [0.0], [1.0]];
        assert!((permutation_null_impl(two.view(), 30_000, 6, None).unwrap().p_value - 1.0 / 3.0).abs() < 0.01);
        // nothing moves: no evidence of change
        let flat = ndarray::array![[1.0, 0.0], [1.0, 0.0]];
        assert_eq!(permutation_null(flat.view(), 100, 1).unwrap().p_value, 1.0);
        assert!(permutation_null(ndarray::array![[f64::NAN]].view(), 10, 1).is_none());
    }

    /// Every distinct arrangement of each column's values over the checkpoints, all combinations:
    /// the exact permutation law of the trail's total absolute change (each column's
    /// permutations are equally likely, so its distinct arrangements are too).
    fn enumerated_permutation_mean(v: &Array2<f64>) -> f64 {
        fn arrangements(col: &[f64]) -> Vec<Vec<f64>> {
            if col.len() <= 1 {
                return vec![col.to_vec()];
            }
            let mut out = Vec::new();
            for i in 0..col.len() {
                let mut rest = col.to_vec();
                let first = rest.remove(i);
                for mut tail in arrangements(&rest) {
                    tail.insert(0, first);
                    out.push(tail);
                }
            }
            out
        }
        let (t_len, n) = v.dim();
        let per_col: Vec<Vec<Vec<f64>>> = (0..n).map(|i| arrangements(&v.column(i).to_vec())).collect();
        let (mut total, mut count) = (0.0, 0usize);
        let mut pick = vec![0usize; n];
        loop {
            let sums: Vec<f64> = (0..t_len).map(|t| (0..n).map(|i| per_col[i][pick[i]][t]).sum()).collect();
            total += sums.windows(2).map(|w| (w[1] - w[0]).abs()).sum::<f64>();
            count += 1;
            let mut i = 0;
            while i < n {
                pick[i] += 1;
                if pick[i] < per_col[i].len() {
                    break;
                }
                pick[i] = 0;
                i += 1;
            }
            if i == n {
                break;
            }
        }
        total / count as f64 / (n * (t_len - 1)) as f64
    }

    #[test]
    fn the_stopping_rule_keeps_significant_trails_and_is_thread_independent() {
        // a real change (200 examples right at even checkpoints, wrong at odd ones): far below
        // h / draws, every draw runs and the result is the one without the rule
        let mut jump = random_binary(30, 400, 3);
        for t in 0..30 {
            jump.slice_mut(ndarray::s![t, ..200]).fill(if t % 2 == 0 { 1.0 } else { 0.0 });
        }
        let with = permutation_null(jump.view(), 500, 8).unwrap();
        let without = permutation_null_impl(jump.view(), 500, 8, None).unwrap();
        assert_eq!(with, without);
        assert!(with.p_value < 0.01 && with.draws == 500);
        // pure churn: the draws stop at h exceedances, p = h / L
        let churn = {
            let mut rng = ChaCha8Rng::seed_from_u64(4);
            Array2::from_shape_fn((30, 400), |_| f64::from(u8::from(rng.gen::<f64>() < 0.5)))
        };
        let stopped = permutation_null(churn.view(), 2000, 9).unwrap();
        assert!(stopped.draws < 2000, "{} draws", stopped.draws);
        assert_eq!(stopped.p_value, STOP_AFTER_EXCEEDANCES as f64 / stopped.draws as f64);
        let full = permutation_null_impl(churn.view(), 2000, 9, None).unwrap();
        assert_eq!(stopped.null_mean, full.null_mean);
        assert!(full.p_value > 0.05 && stopped.p_value > 0.05, "{} / {}", full.p_value, stopped.p_value);
        for v in [&jump, &churn] {
            let run = |threads: usize| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap()
                    .install(|| permutation_null(v.view(), 2000, 11).unwrap())
            };
            assert_eq!(run(1), run(3));
        }
    }

    use ndarray::Array2;
    use proptest::prelude::*;
    use rand::Rng;
    use statrs::distribution::Discrete;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * a.abs().max(b.abs()).max(f64::MIN_POSITIVE)
    }

    #[test]
    fn mcnemar_hand_worked() {
        assert_eq!(mcnemar_exact(0, 0), 1.0);
        assert!(close(mcnemar_exact(0, 5), 0.0625, 1e-12));
        assert!(close(mcnemar_exact(5, 0), 0.0625, 1e-12));
        assert_eq!(mcnemar_exact(3, 3), 1.0);
        // n = 5, P(X <= 1) = 6/32
        assert!(close(mcnemar_exact(1, 4), 0.375, 1e-12));
        // n = 10, P(X <= 1) = 11/1024
        assert!(close(mcnemar_exact(9, 1), 22.0 / 1024.0, 1e-12));
        // n = 12, P(X <= 2) = (1 + 12 + 66) / 4096
        assert!(close(mcnemar_exact(2, 10), 2.0 * 79.0 / 4096.0, 1e-12));
        // statrs's regularized beta is good to about 1e-15 here (P(X <= 0) = 1/2 for n = 1)
        assert!(close(mcnemar_exact(0, 1), 1.0, 1e-12));
        for (b, c) in [(0, 7), (4, 9), (13, 2), (100, 140)] {
            assert_eq!(mcnemar_exact(b, c), mcnemar_exact(c, b));
        }
    }

    #[test]
    fn bh_hand_worked() {
        // m = 6, thresholds k q / m at q = 0.05: .00833 .01667 .025 .0333 .04167 .05
        // sorted: 0.001 (ok) 0.008 (ok) 0.039 (> .025) 0.040 (> .0333) 0.041 (ok: <= .04167) 0.6
        // largest k with p_(k) <= k q / m is 5: the five smallest are rejected, 0.6 is not
        let p = [0.039, 0.001, 0.6, 0.041, 0.008, 0.040];
        assert_eq!(benjamini_hochberg(&p, 0.05), vec![true, true, false, true, true, true]);
        // at q = 0.03 the thresholds are .005 .01 .015 .02 .025 .03: only 0.001 and 0.008
        assert_eq!(benjamini_hochberg(&p, 0.03), vec![false, true, false, false, true, false]);
        assert_eq!(benjamini_hochberg(&[], 0.05), Vec::<bool>::new());
        assert_eq!(benjamini_hochberg(&[0.2, 0.3], 0.05), vec![false, false]);
        assert_eq!(benjamini_hochberg(&[f64::NAN, 0.01], 0.05), vec![false, true]);
    }

    #[test]
    fn expected_abs_sign_sum_small() {
        let want = [0.0, 1.0, 1.0, 1.5, 1.5, 15.0 / 8.0];
        for (d, &w) in want.iter().enumerate() {
            assert!(close(expected_abs_sign_sum(d as u64), w, 1e-15), "d = {d}");
        }
    }

    #[test]
    fn expected_abs_sign_sum_enumerated() {
        for d in 0..=16u32 {
            let total: u64 = (0..1u64 << d).map(|v| (2 * u64::from(v.count_ones())).abs_diff(u64::from(d))).sum();
            let exact = total as f64 / (1u64 << d) as f64;
            assert!(close(expected_abs_sign_sum(u64::from(d)), exact, 1e-14), "d = {d}");
        }
    }

    /// E|2B - d| for B ~ Binomial(d, 1/2), summed over statrs's pmf.
    fn pmf_sum(d: u64) -> f64 {
        let bin = Binomial::new(0.5, d).unwrap();
        (0..=d).map(|k| bin.pmf(k) * (2 * k).abs_diff(d) as f64).sum()
    }

    #[test]
    fn expected_abs_sign_sum_large() {
        for d in [1_000u64, 1_001, 100_000, 100_001] {
            let (got, want) = (expected_abs_sign_sum(d), pmf_sum(d));
            assert!(close(got, want, 1e-9), "d = {d}: {got} vs {want}");
        }
        // about sqrt(2 d / pi) and finite up to 10^6
        let d = 1_000_000u64;
        let e = expected_abs_sign_sum(d);
        assert!(close(e, (2.0 * d as f64 / std::f64::consts::PI).sqrt(), 1e-6), "{e}");
    }

    #[test]
    fn series_meets_product_at_switch() {
        // the two branches of central_binomial_over_4k agree where they meet
        for k in [SERIES_FROM, SERIES_FROM + 1, 2 * SERIES_FROM, 5000] {
            let product = (1..=k).fold(1.0, |acc, j| acc * (2 * j - 1) as f64 / (2 * j) as f64);
            assert!(close(central_binomial_over_4k(k), product, 1e-13), "k = {k}");
        }
        let k = SERIES_FROM - 1;
        let series = {
            let x = 1.0 / k as f64;
            (1.0 + x * (-1.0 / 8.0 + x * (1.0 / 128.0 + x * (5.0 / 1024.0 + x * (-21.0 / 32768.0)))))
                / (std::f64::consts::PI * k as f64).sqrt()
        };
        assert!(close(central_binomial_over_4k(k), series, 1e-13));
    }

    /// Continuous scores of n examples over t checkpoints: a per-example level plus churn.
    fn continuous_panel(t_len: usize, n: usize, seed: u64) -> Array2<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let level: Vec<f64> = (0..n).map(|_| rng.gen_range(-3.0..-0.5)).collect();
        Array2::from_shape_fn((t_len, n), |(_, i)| level[i] + rng.gen_range(-0.3..0.3))
    }

    #[test]
    fn normal_draws_stand_in_for_many_small_sign_flips() {
        // 2,000 examples of continuous scores: the differences of two uniforms have kurtosis 2.4,
        // so K = sum d^4 / (sum d^2)^2 ~ 2.4 / n, well below NORMAL_MAX_K, and no magnitude is
        // tied: the fast path draws normals. It must agree with the exact flips within Monte Carlo
        // error (4,000 draws each: the null mean's own error is ~0.4%, the difference's ~0.6%; the
        // mean to 2%, q95 to 3%, p to 0.03)
        let v = continuous_panel(10, 2000, 5);
        let (fast, exact) = (
            sign_flip_null_impl(v.view(), 4000, 9, true).unwrap(),
            sign_flip_null_impl(v.view(), 4000, 9, false).unwrap(),
        );
        assert_ne!(fast, exact, "the normal path must be the one taken");
        assert!(close(fast.null_mean, exact.null_mean, 0.02), "{} vs {}", fast.null_mean, exact.null_mean);
        assert!(close(fast.null_q95, exact.null_q95, 0.03), "{} vs {}", fast.null_q95, exact.null_q95);
        assert!((fast.p_value - exact.p_value).abs() < 0.03, "{} vs {}", fast.p_value, exact.p_value);
    }

    #[test]
    fn normal_sum_sd_conditions() {
        let spread: Vec<f64> = (1..=2000).map(|i| (i as f64 * 0.618).fract() + 0.1).collect();
        let sd = normal_sum_sd(&spread).expect("many distinct, comparable magnitudes");
        assert!(close(sd, spread.iter().map(|v| v * v).sum::<f64>().sqrt(), 1e-12));
        // the same scaled far below f64's fourth-power range: no underflow, the same decision
        let tiny: Vec<f64> = spread.iter().map(|v| v * 1e-100).collect();
        assert!(close(normal_sum_sd(&tiny).unwrap(), sd * 1e-100, 1e-12));
        // one difference, or one that dominates: K ~ 1
        assert_eq!(normal_sum_sd(&[1e-100]), None);
        let mut one_big = spread.clone();
        one_big[0] = 1000.0;
        assert_eq!(normal_sum_sd(&one_big), None);
        // a lattice: differences of averages of four 0/1 scores (K small, magnitudes tied)
        let lattice: Vec<f64> = (0..2000).map(|i| [0.25, -0.5, 0.75, -1.0][i % 4]).collect();
        assert_eq!(normal_sum_sd(&lattice), None);
        assert_eq!(normal_sum_sd(&[]), None);
    }

    #[test]
    fn heavy_tailed_lattice_or_few_differences_keep_the_exact_draws() {
        // one example moves 100 times more than the others: K ~ 1, so every draw flips exactly,
        // and the fast and exact calls are the same computation
        let mut v = continuous_panel(8, 2000, 6);
        for t in 0..8 {
            v[[t, 0]] += if t % 2 == 0 { 30.0 } else { -30.0 };
        }
        assert_eq!(sign_flip_null_impl(v.view(), 1000, 4, true), sign_flip_null_impl(v.view(), 1000, 4, false));
        // 50 examples: K >= 1/50 > NORMAL_MAX_K, exact as well
        let v = continuous_panel(8, 50, 7);
        assert_eq!(sign_flip_null_impl(v.view(), 1000, 4, true), sign_flip_null_impl(v.view(), 1000, 4, false));
        // averages of four 0/1 scores (an averaged or ensembled trail): on a lattice, exact
        let v = random_binary(8, 2000, 8) * 0.25 + random_binary(8, 2000, 9) * 0.5 + 0.125;
        assert_eq!(sign_flip_null_impl(v.view(), 1000, 4, true), sign_flip_null_impl(v.view(), 1000, 4, false));
    }

    #[test]
    fn sign_flip_none_cases() {
        assert!(sign_flip_null(Array2::<f64>::zeros((1, 5)).view(), 100, 0).is_none());
        assert!(sign_flip_null(Array2::<f64>::zeros((5, 0)).view(), 100, 0).is_none());
        assert!(sign_flip_null(Array2::<f64>::zeros((5, 5)).view(), 0, 0).is_none());
        let mut v = Array2::<f64>::zeros((3, 3));
        v[[1, 1]] = f64::NAN;
        assert!(sign_flip_null(v.view(), 100, 0).is_none());
    }

    #[test]
    fn sign_flip_constant_trail() {
        for v in [Array2::<f64>::ones((6, 20)), Array2::from_elem((6, 20), 0.3)] {
            for fast in [true, false] {
                let r = sign_flip_null_impl(v.view(), 500, 7, fast).unwrap();
                assert_eq!(r.observed_mtv, 0.0);
                assert_eq!(r.null_mean, 0.0);
                assert!(r.ratio.is_nan());
                assert_eq!(r.p_value, 1.0);
                assert_eq!(r.significant_transitions, 0);
                assert_eq!(r.transitions, 5);
                assert_eq!(r.draws, 500);
            }
        }
    }

    #[test]
    fn sign_flip_hand_made_binary() {
        // n = 4, T = 3. Transition 0: examples 0, 1 go wrong->right (c = 2, b = 0, D = 2);
        // transition 1: example 0 goes right->wrong (b = 1, D = 1).
        let v = ndarray::array![[0.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 0.0], [0.0, 1.0, 1.0, 0.0]];
        let r = sign_flip_null(v.view(), 4000, 3).unwrap();
        // scores .25 .75 .5: MTV (.5 + .25) / 2
        assert!(close(r.observed_mtv, 0.375, 1e-15));
        // E|S_2| = 1, E|S_1| = 1: (1/4 + 1/4) / 2
        assert!(close(r.null_mean, 0.25, 1e-15));
        assert!(close(r.ratio, 1.5, 1e-15));
        // null sum |2B_0 - 2| + 1 reaches the observed 3 only when B_0 is 0 or 2: P = 1/2
        assert!((r.p_value - 0.5).abs() < 0.03, "{}", r.p_value);
        // the null MTV is (0 + 1) / 8 or (2 + 1) / 8 with probability 1/2 each: q95 = 0.375
        assert_eq!(r.null_q95, 0.375);
        // McNemar p: 0.5 and 1, nothing significant
        assert_eq!(r.significant_transitions, 0);
        assert_eq!(r.share_significant, 0.0);
    }

    #[test]
    fn sign_flip_detects_a_big_jump() {
        // 200 examples, all wrong for 5 checkpoints, then 60 of them right: the jump transition is
        // significant (McNemar p = 2^-59), the others have D = 0 (p = 1)
        let mut v = Array2::<f64>::zeros((8, 200));
        for t in 5..8 {
            for i in 0..60 {
                v[[t, i]] = 1.0;
            }
        }
        let r = sign_flip_null(v.view(), 2000, 11).unwrap();
        assert_eq!(r.significant_transitions, 1);
        assert!(close(r.share_significant, 1.0 / 7.0, 1e-15));
        // only one transition has discordant pairs, and its null |S| is below 60 with probability 1 - 2^-59
        assert!(close(r.p_value, 1.0 / 2001.0, 1e-12));
        let g = sign_flip_null_impl(v.view(), 2000, 11, false).unwrap();
        assert_eq!(g.significant_transitions, 1);
        assert!(close(g.p_value, 1.0 / 2001.0, 1e-12));
    }

    #[test]
    fn sign_flip_hand_made_continuous() {
        // n = 2, T = 2, d = (0.5, -0.25): null |S|/n is 0.375 or 0.125 (each with prob 1/2); observed 0.125
        let v = ndarray::array![[0.1, 0.9], [0.6, 0.65]];
        let r = sign_flip_null(v.view(), 4000, 5).unwrap();
        assert!(close(r.observed_mtv, 0.125, 1e-12));
        assert!((r.null_mean - 0.25).abs() < 0.01, "{}", r.null_mean);
        assert_eq!(r.p_value, 1.0);
        assert!(close(r.null_q95, 0.375, 1e-12));
        assert_eq!(r.significant_transitions, 0);
    }

    /// A random 0/1 panel with a drifting accuracy.
    fn random_binary(t_len: usize, n: usize, seed: u64) -> Array2<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        Array2::from_shape_fn((t_len, n), |(t, _)| f64::from(u8::from(rng.gen::<f64>() < 0.4 + 0.01 * t as f64)))
    }

    #[test]
    fn determinism_and_thread_independence() {
        let bin = random_binary(12, 300, 1);
        let cont = bin.mapv(|x| x * 0.7 + 0.1)
            + Array2::from_shape_fn((12, 300), |(t, i)| ((t * 31 + i * 17) % 13) as f64 * 0.01);
        for (v, fast) in [(&bin, true), (&bin, false), (&cont, true)] {
            let run = |threads: usize| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap()
                    .install(|| sign_flip_null_impl(v.view(), 2000, 42, fast).unwrap())
            };
            let one = run(1);
            assert_eq!(one, run(4));
            assert_eq!(one, run(3));
            assert_eq!(one, sign_flip_null_impl(v.view(), 2000, 42, fast).unwrap());
            let other = sign_flip_null_impl(v.view(), 2000, 43, fast).unwrap();
            assert_eq!(other.observed_mtv, one.observed_mtv);
        }
        let b1 =
            independent_binomial_bound(&[0.0, 1.0, 2.0, 3.0], &[0.5, 0.52, 0.49, 0.55], &[0.01; 4], 500, 9).unwrap();
        assert_eq!(
            b1,
            independent_binomial_bound(&[0.0, 1.0, 2.0, 3.0], &[0.5, 0.52, 0.49, 0.55], &[0.01; 4], 500, 9).unwrap()
        );
    }

    #[test]
    fn general_path_agrees_with_fast_path_on_binary_data() {
        for seed in [1u64, 2, 3] {
            let v = random_binary(21, 500, seed);
            let fast = sign_flip_null_impl(v.view(), 2000, seed, true).unwrap();
            let general = sign_flip_null_impl(v.view(), 2000, seed, false).unwrap();
            assert_eq!(fast.observed_mtv, general.observed_mtv);
            // the mean of 2000 draws of MTV: its standard error is sd / sqrt(2000); allow 4 of them
            let sd = {
                // the exact null variance of MTV: sum_t Var|S_D_t| / (n (T-1))^2
                let (t_len, n) = v.dim();
                let var: f64 = (0..t_len - 1)
                    .map(|t| {
                        let d = v.row(t).iter().zip(v.row(t + 1).iter()).filter(|(a, b)| a != b).count() as f64;
                        d - expected_abs_sign_sum(d as u64).powi(2)
                    })
                    .sum();
                var.sqrt() / (n * (t_len - 1)) as f64
            };
            let se = sd / (2000f64).sqrt();
            assert!(
                (fast.null_mean - general.null_mean).abs() < 4.0 * se,
                "{} vs {} (se {se})",
                fast.null_mean,
                general.null_mean
            );
            assert!((fast.null_q95 - general.null_q95).abs() < 6.0 * se, "{} vs {}", fast.null_q95, general.null_q95);
            assert!((fast.p_value - general.p_value).abs() < 0.05, "{} vs {}", fast.p_value, general.p_value);
            // and the mean of the fast path's own draws is near its exact mean
            assert!(fast.null_q95 > fast.null_mean);
        }
    }

    #[test]
    fn least_squares_and_normals() {
        let (a, b) = least_squares_line(&[0.0, 1.0, 2.0, 3.0], &[1.0, 3.0, 5.0, 7.0]);
        assert!(close(a, 1.0, 1e-12) && close(b, 2.0, 1e-12));
        let (a, b) = least_squares_line(&[2.0, 2.0, 2.0], &[1.0, 2.0, 6.0]);
        assert!(close(a, 3.0, 1e-12) && b == 0.0);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut normals = NormalPairs::default();
        let z: Vec<f64> = (0..200_000).map(|_| normals.next(&mut rng)).collect();
        let (mean, var) = (mean(&z), crate::stats::population_sd(&z).powi(2));
        let within1 = z.iter().filter(|x| x.abs() < 1.0).count() as f64 / z.len() as f64;
        assert!(mean.abs() < 0.01 && (var - 1.0).abs() < 0.015, "{mean} {var}");
        assert!((within1 - 0.682_689).abs() < 0.005, "{within1}");
    }

    #[test]
    fn binomial_bound_independent_noise() {
        // scores that ARE trend + independent noise: the ratio is about 1
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut normals = NormalPairs::default();
        let steps: Vec<f64> = (0..400).map(|t| t as f64 * 100.0).collect();
        let scores: Vec<f64> = steps.iter().map(|&s| 0.3 + s * 1e-6 + 0.02 * normals.next(&mut rng)).collect();
        let b = independent_binomial_bound(&steps, &scores, &[0.02; 400], 2000, 1).unwrap();
        assert!((b.ratio - 1.0).abs() < 0.1, "{b:?}");
        assert!(close(b.expected_mtv, 0.02 * 2.0 / std::f64::consts::PI.sqrt(), 0.02), "{b:?}");
        assert!(b.p_value > 0.0 && b.p_value <= 1.0);
        assert!(independent_binomial_bound(&steps[..3], &scores[..2], &[0.02; 2], 10, 1).is_none());
        assert!(independent_binomial_bound(&[0.0], &[0.5], &[0.02], 10, 1).is_none());
        assert!(independent_binomial_bound(&[0.0, 1.0], &[0.5, 0.6], &[0.02, -0.1], 10, 1).is_none());
        assert!(independent_binomial_bound(&[0.0, 1.0], &[0.5, 0.6], &[0.02, 0.02], 0, 1).is_none());
        // a score known exactly (standard error 0) is allowed: a straight line is all trend
        let exact = independent_binomial_bound(&[0.0, 1.0, 2.0, 3.0], &[0.5, 0.6, 0.7, 0.8], &[0.0; 4], 10, 1).unwrap();
        assert!((exact.ratio - 1.0).abs() < 1e-9, "{exact:?}");
        // a zig-zag far beyond its standard errors is significant
        let zig: Vec<f64> = (0..20).map(|t| 0.5 + if t % 2 == 0 { 0.05 } else { -0.05 }).collect();
        let steps: Vec<f64> = (0..20).map(f64::from).collect();
        let b = independent_binomial_bound(&steps, &zig, &[0.01; 20], 1000, 2).unwrap();
        assert!(b.ratio > 5.0 && close(b.p_value, 1.0 / 1001.0, 1e-12), "{b:?}");
    }

    #[test]
    fn fair_binomial_counts_each_of_its_bits() {
        // whole 64-bit words, a partial last word and the edges between them: every count is in
        // 0..=d, with mean d/2 and variance d/4 over 4,000 draws (means within 5 standard errors)
        for d in [0u64, 1, 5, 63, 64, 65, 127, 128, 130] {
            let draws: Vec<f64> = (0..4000).map(|k| fair_binomial(&mut draw_rng(7, k), d) as f64).collect();
            assert!(draws.iter().all(|&x| x <= d as f64), "d = {d}");
            let m = mean(&draws);
            let var = crate::stats::sample_variance(&draws);
            let se = (d as f64 / 4.0 / draws.len() as f64).sqrt();
            assert!((m - d as f64 / 2.0).abs() <= 5.0 * se, "d = {d}: mean {m}");
            if d == 0 {
                assert_eq!(var, 0.0);
            } else {
                assert!((var / (d as f64 / 4.0) - 1.0).abs() < 0.15, "d = {d}: variance {var}");
            }
        }
        // the same stream gives the same count; another draw index, another stream
        assert_eq!(fair_binomial(&mut draw_rng(7, 3), 130), fair_binomial(&mut draw_rng(7, 3), 130));
        let other: Vec<u64> = (0..20).map(|k| fair_binomial(&mut draw_rng(7, k), 64)).collect();
        assert!(other.iter().any(|&x| x != other[0]), "{other:?}");
    }

    /// A small 0/1 panel as proptest input.
    fn binary_panel() -> impl Strategy<Value = Array2<f64>> {
        (2usize..8, 1usize..40).prop_flat_map(|(t, n)| {
            proptest::collection::vec(proptest::bool::ANY, t * n).prop_map(move |b| {
                Array2::from_shape_vec((t, n), b.into_iter().map(|x| f64::from(u8::from(x))).collect()).unwrap()
            })
        })
    }

    fn real_panel() -> impl Strategy<Value = Array2<f64>> {
        (2usize..6, 1usize..20).prop_flat_map(|(t, n)| {
            proptest::collection::vec(-3.0f64..3.0, t * n).prop_map(move |x| Array2::from_shape_vec((t, n), x).unwrap())
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn prop_binary_null_mean_is_exact(v in binary_panel(), seed in any::<u64>()) {
            let (t_len, n) = v.dim();
            let r = sign_flip_null(v.view(), 50, seed).unwrap();
            let want = (0..t_len - 1)
                .map(|t| {
                    let d = v.row(t).iter().zip(v.row(t + 1).iter()).filter(|(a, b)| a != b).count() as u64;
                    expected_abs_sign_sum(d) / n as f64
                })
                .sum::<f64>() / (t_len - 1) as f64;
            prop_assert!(close(r.null_mean, want, 1e-12), "{} vs {}", r.null_mean, want);
        }

        #[test]
        fn prop_permutation_mean_is_exact(v in (2usize..5, 1usize..4).prop_flat_map(|(t, n)| {
            proptest::collection::vec(proptest::bool::ANY, t * n).prop_map(move |b| {
                Array2::from_shape_vec((t, n), b.into_iter().map(|x| f64::from(u8::from(x))).collect()).unwrap()
            })
        }), seed in any::<u64>()) {
            let want = enumerated_permutation_mean(&v);
            let got = permutation_null(v.view(), 20, seed).unwrap().null_mean;
            prop_assert!((got - want).abs() <= 1e-12, "{} vs {}", got, want);
        }

        #[test]
        fn prop_mcnemar_in_unit_interval_and_symmetric(b in 0u64..2000, c in 0u64..2000) {
            let p = mcnemar_exact(b, c);
            // (2^-(b+c) underflows to 0 for very lopsided counts, so 0 is allowed)
            prop_assert!((0.0..=1.0).contains(&p), "{}", p);
            prop_assert_eq!(p, mcnemar_exact(c, b));
            // more lopsided, smaller p
            if b < c {
                prop_assert!(mcnemar_exact(b, c + 1) <= p * (1.0 + 1e-12));
            }
        }

        #[test]
        fn prop_bh_monotone_in_q(p in proptest::collection::vec(0.0f64..1.0, 0..30), q1 in 0.0f64..0.5, dq in 0.0f64..0.5) {
            let small = benjamini_hochberg(&p, q1);
            let large = benjamini_hochberg(&p, q1 + dq);
            for (s, l) in small.iter().zip(&large) {
                prop_assert!(!s || *l);
            }
            // and each rejected p is no larger than each accepted one
            for (i, &ri) in large.iter().enumerate() {
                for (j, &rj) in large.iter().enumerate() {
                    if ri && !rj {
                        prop_assert!(p[i] <= p[j]);
                    }
                }
            }
        }

        #[test]
        fn prop_p_value_in_unit_interval(b in binary_panel(), x in real_panel(), seed in any::<u64>()) {
            for v in [&b, &x] {
                let r = sign_flip_null(v.view(), 100, seed).unwrap();
                prop_assert!(r.p_value > 0.0 && r.p_value <= 1.0, "{}", r.p_value);
                prop_assert!(r.p_value >= 1.0 / 101.0);
                prop_assert!(r.significant_transitions <= r.transitions);
                prop_assert!(r.null_q95.is_finite() && r.null_mean >= 0.0);
            }
        }
    }

    /// The asymptotic series is exact to a few ulps from its first k on: against C(2k, k) / 4^k
    /// computed exactly (Python's `fractions`, 40 digits), relative error below 5e-16 (measured:
    /// 0 or 1 ulp). Its last term, 21 / (32768 k^4), is 6e-16 of the value at k = 1024, so a wrong
    /// sign shows; the product of 1,024 ratios is 2.8e-15 off there, so the switch is from k = 1024.
    #[test]
    fn the_series_is_exact_to_a_few_ulps() {
        for (k, exact) in [
            (1024, 0.017628772404846519975685035029769795),
            (1025, 0.017620173003673424112282261841950395),
            (1100, 0.017009023039939735082515058654069408),
            (2048, 0.012466185363760259577439144789375713),
        ] {
            let rel = (central_binomial_over_4k(k) / exact - 1.0).abs();
            assert!(rel < 5e-16, "k = {k}: relative error {rel:e}");
        }
    }

    /// A transition with an infinite difference is not drawn as a normal variable (its sd would
    /// be NaN): the exact draws keep it.
    #[test]
    fn an_infinite_difference_keeps_the_exact_draws() {
        let spread: Vec<f64> = (1..=2000).map(|i| (i as f64 * 0.618).fract() + 0.1).collect();
        for inf in [f64::INFINITY, f64::NEG_INFINITY] {
            let mut d = spread.clone();
            d[7] = inf;
            assert_eq!(normal_sum_sd(&d), None, "{inf}");
        }
    }

    /// `fair_binomial` reads exactly ceil(d / 64) words of its generator (none for d = 0), so a
    /// draw's later transitions, and so its seeded numbers, do not depend on how many words an
    /// earlier one might have wasted.
    #[test]
    fn fair_binomial_reads_one_word_per_64_bits() {
        for d in [0u64, 1, 63, 64, 65, 128, 200] {
            let mut rng = ChaCha8Rng::seed_from_u64(9);
            fair_binomial(&mut rng, d);
            let mut fresh = ChaCha8Rng::seed_from_u64(9);
            for _ in 0..d.div_ceil(64) {
                fresh.next_u64();
            }
            assert_eq!(rng.next_u64(), fresh.next_u64(), "d = {d}");
        }
    }

    /// With magnitudes all near the largest, K = sum d^4 / (sum d^2)^2 is about 1 / n: 150
    /// distinct ones (K ~ 0.0067) are drawn as a normal variable, 90 (K ~ 0.011) are not.
    #[test]
    fn comparable_magnitudes_are_normal_from_about_a_hundred() {
        let near = |n: usize| -> Vec<f64> { (0..n).map(|i| 1.0 - i as f64 * 1e-4).collect() };
        let d = near(150);
        let sd = normal_sum_sd(&d).expect("150 comparable magnitudes");
        assert!(close(sd, d.iter().map(|v| v * v).sum::<f64>().sqrt(), 1e-12));
        assert_eq!(normal_sum_sd(&near(90)), None);
    }
}
