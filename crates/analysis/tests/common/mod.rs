//! Simulated trails shared by the test suites (`mod common;`).

use ndarray::Array2;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Beta(a, b) by Johnk's method (exact for any a, b > 0; quick for a, b < 1).
fn beta(rng: &mut ChaCha8Rng, a: f64, b: f64) -> f64 {
    loop {
        let (u, v): (f64, f64) = (rng.gen(), rng.gen());
        let (x, y) = (u.powf(1.0 / a), v.powf(1.0 / b));
        if x + y <= 1.0 && x + y > 0.0 {
            return x / (x + y);
        }
    }
}

/// Issue 30's trail (`t_len` checkpoints x `n` examples): probabilities p_i ~ Beta(0.4, 0.4), at
/// checkpoint t shifted by +delta (t odd) or -delta (t even), clamped to [0, 1]; correctness
/// drawn independently at every checkpoint. delta = 0 is pure churn.
pub fn beta_trail(seed: u64, delta: f64, t_len: usize, n: usize) -> Array2<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let p: Vec<f64> = (0..n).map(|_| beta(&mut rng, 0.4, 0.4)).collect();
    Array2::from_shape_fn((t_len, n), |(t, i)| {
        let q = (p[i] + if t % 2 == 1 { delta } else { -delta }).clamp(0.0, 1.0);
        f64::from(u8::from(rng.gen::<f64>() < q))
    })
}
