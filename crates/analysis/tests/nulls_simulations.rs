//! Acceptance simulations for the paired sign-flip null: per-example churn at constant accuracy
//! (the test must hold its size and say 1x noise), alternating real changes of +-0.02 (it must
//! find them), and the old independent-binomial figure on the churn trails (well below 1x, which
//! is why it is only an upper bound on noise). Run with `--nocapture` to read the measured rates.

use analysis::nulls::{independent_binomial_bound, sign_flip_null};
use ndarray::Array2;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Instant;

const N: usize = 1_000;
const T: usize = 41;
const SIMS: u64 = 200;
const DRAWS: usize = 2_000;
/// Example logits a_i ~ N(LOGIT_MEAN, LOGIT_SD^2).
const LOGIT_MEAN: f64 = 0.4;
const LOGIT_SD: f64 = 1.5;

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// One N(0, 1) draw by Box-Muller (the cosine half; simplicity over speed).
fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1 = 1.0 - rng.gen::<f64>();
    let u2: f64 = rng.gen();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Expected accuracy of the eval set at shift delta: mean_i sigmoid(a_i + delta).
fn accuracy(a: &[f64], delta: f64) -> f64 {
    a.iter().map(|&x| sigmoid(x + delta)).sum::<f64>() / a.len() as f64
}

/// The delta with accuracy(a, delta) = target, by bisection (accuracy is increasing in delta).
fn solve_delta(a: &[f64], target: f64) -> f64 {
    let (mut lo, mut hi) = (-10.0, 10.0);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if accuracy(a, mid) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// One churn trail: fixed logits a_i, correctness at checkpoint t redrawn independently from
/// Bernoulli(sigmoid(a_i + delta_t)). `alternating` = 0 gives delta_t = 0; otherwise the
/// population accuracy alternates between base - alternating/2 and base + alternating/2.
fn churn_trail(seed: u64, alternating: f64) -> Array2<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let a: Vec<f64> = (0..N).map(|_| LOGIT_MEAN + LOGIT_SD * normal(&mut rng)).collect();
    let deltas: Vec<f64> = if alternating == 0.0 {
        vec![0.0; T]
    } else {
        let base = accuracy(&a, 0.0);
        let (low, high) = (solve_delta(&a, base - alternating / 2.0), solve_delta(&a, base + alternating / 2.0));
        assert!((accuracy(&a, high) - accuracy(&a, low) - alternating).abs() < 1e-9);
        (0..T).map(|t| if t % 2 == 0 { low } else { high }).collect()
    };
    Array2::from_shape_fn((T, N), |(t, i)| f64::from(u8::from(rng.gen::<f64>() < sigmoid(a[i] + deltas[t]))))
}

struct Summary {
    rejection_rate: f64,
    mean_ratio: f64,
    mean_bound_ratio: f64,
    bound_rejection_rate: f64,
}

/// The sign-flip null (and the old bound) on SIMS seeded trails.
fn run(alternating: f64, seed_base: u64) -> Summary {
    let (mut rejected, mut ratio, mut bound_ratio, mut bound_rejected) = (0u64, 0.0, 0.0, 0u64);
    let steps: Vec<f64> = (0..T).map(|t| (t * 1000) as f64).collect();
    for sim in 0..SIMS {
        let v = churn_trail(seed_base + sim, alternating);
        let r = sign_flip_null(v.view(), DRAWS, 1_000_000 + sim).expect("a trail with T >= 2 and n > 0");
        assert!(r.ratio.is_finite() && r.p_value > 0.0 && r.p_value <= 1.0);
        rejected += u64::from(r.p_value < 0.05);
        ratio += r.ratio;
        // what an lm-eval results file would hold: the score and its standard error sqrt(s(1-s)/(n-1))
        let scores: Vec<f64> = v.rows().into_iter().map(|row| row.sum() / N as f64).collect();
        let stderr: Vec<f64> = scores.iter().map(|&s| (s * (1.0 - s) / (N - 1) as f64).sqrt()).collect();
        let b = independent_binomial_bound(&steps, &scores, &stderr, DRAWS, 2_000_000 + sim).unwrap();
        bound_ratio += b.ratio;
        bound_rejected += u64::from(b.p_value < 0.05);
    }
    let sims = SIMS as f64;
    Summary {
        rejection_rate: rejected as f64 / sims,
        mean_ratio: ratio / sims,
        mean_bound_ratio: bound_ratio / sims,
        bound_rejection_rate: bound_rejected as f64 / sims,
    }
}

#[test]
fn constant_accuracy_churn_holds_size_and_says_one_x() {
    let start = Instant::now();
    let s = run(0.0, 10_000);
    println!(
        "constant accuracy (pure churn), n = {N}, T = {T}, {SIMS} sims x {DRAWS} draws: sign-flip rejection rate {:.3}, mean ratio {:.3}; \
         old independent-binomial bound: mean ratio {:.3}, rejection rate {:.3} ({:.1} s)",
        s.rejection_rate,
        s.mean_ratio,
        s.mean_bound_ratio,
        s.bound_rejection_rate,
        start.elapsed().as_secs_f64()
    );
    assert!(s.rejection_rate <= 0.10, "size {:.3} > 0.10", s.rejection_rate);
    assert!((0.9..=1.1).contains(&s.mean_ratio), "mean ratio {:.3} not within [0.9, 1.1]", s.mean_ratio);
    // the old figure overstates noise on the very same trails: why it is only an upper bound
    assert!(s.mean_bound_ratio < 0.9, "independent-binomial mean ratio {:.3} not below 0.9", s.mean_bound_ratio);
}

#[test]
fn alternating_real_changes_are_found() {
    let start = Instant::now();
    let s = run(0.02, 20_000);
    println!(
        "alternating +-0.02 accuracy, n = {N}, T = {T}, {SIMS} sims x {DRAWS} draws: sign-flip rejection rate {:.3}, mean ratio {:.3}; \
         old independent-binomial bound: mean ratio {:.3}, rejection rate {:.3} ({:.1} s)",
        s.rejection_rate,
        s.mean_ratio,
        s.mean_bound_ratio,
        s.bound_rejection_rate,
        start.elapsed().as_secs_f64()
    );
    assert!(s.rejection_rate >= 0.80, "power {:.3} < 0.80", s.rejection_rate);
}

/// The size under pure churn measured precisely (4,000 trails, about 30 s): `cargo test --release
/// --test nulls_simulations -- --ignored --nocapture`. Signs are drawn independently across
/// transitions, while under churn consecutive differences share a checkpoint (their sums are
/// correlated -1/2), so the MTV varies more than the null says and the size is above 5%.
#[test]
#[ignore]
fn constant_accuracy_churn_size_precisely() {
    let sims = 4_000u64;
    let mut rejected = [0u64; 3];
    let levels = [0.01, 0.05, 0.10];
    for sim in 0..sims {
        let v = churn_trail(500_000 + sim, 0.0);
        let r = sign_flip_null(v.view(), DRAWS, 3_000_000 + sim).unwrap();
        for (k, &level) in levels.iter().enumerate() {
            rejected[k] += u64::from(r.p_value < level);
        }
    }
    for (k, &level) in levels.iter().enumerate() {
        let rate = rejected[k] as f64 / sims as f64;
        println!(
            "pure churn, {sims} trails: rejection rate at {level}: {rate:.4} (+- {:.4})",
            (rate * (1.0 - rate) / sims as f64).sqrt()
        );
    }
    assert!(rejected[1] as f64 / (sims as f64) <= 0.10);
}
