//! Calibration of the trail-level noise tests on simulated trails whose truth is known (issue 30,
//! item 3): 1,000 examples, 41 checkpoints, each example's probability of being right drawn from
//! Beta(0.4, 0.4) and its correctness redrawn at every checkpoint (pure churn: the population
//! accuracy is constant, no real change); real change: every probability shifted by +delta and
//! -delta at alternate checkpoints. The checkpoint-permutation null must reject a share of null
//! trails whose 95% interval contains 0.05, over all transitions and over the final window, and
//! keep the power of the sign-flip null. `NULLS_CALIBRATION_TRAILS` sets the number of trails
//! (default 1,000; `--nocapture` prints the rates).

mod common;

use analysis::nulls::{permutation_null, sign_flip_null};
use analysis::proportion::wilson;

const N: usize = 1_000;
const T: usize = 41;
const DRAWS: usize = 400;

fn trails() -> u64 {
    std::env::var("NULLS_CALIBRATION_TRAILS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000)
}

/// Rejection rates at 0.05 of (sign-flip, permutation) over `sims` trails, for all transitions
/// and for the final window (the last 20% of the checkpoints, as `analysis report`).
fn rates(delta: f64, sims: u64, seed_base: u64) -> [[u64; 2]; 2] {
    let opts = analysis::Options::default();
    let steps: Vec<u64> = (0..T as u64).collect();
    let fin = analysis::windows(&steps, &opts)[1].1.clone();
    let mut rejected = [[0u64; 2]; 2];
    for sim in 0..sims {
        let v = common::beta_trail(seed_base + sim, delta, T, N);
        for (w, rows) in [(0, 0..T), (1, fin.clone())] {
            let view = v.slice(ndarray::s![rows, ..]);
            let s = sign_flip_null(view, DRAWS, 7_000_000 + sim).unwrap();
            let p = permutation_null(view, DRAWS, 9_000_000 + sim).unwrap();
            rejected[w][0] += u64::from(s.p_value < 0.05);
            rejected[w][1] += u64::from(p.p_value < 0.05);
        }
    }
    rejected
}

fn show(what: &str, r: [[u64; 2]; 2], sims: u64) {
    for (w, name) in [(0, "all transitions"), (1, "final window")] {
        let (s, p) = (r[w][0] as f64 / sims as f64, r[w][1] as f64 / sims as f64);
        println!("{what}, {name}, {sims} trails: sign-flip rejects {s:.3}, permutation rejects {p:.3}");
    }
}

#[test]
fn the_permutation_null_holds_its_level_on_churn() {
    let sims = trails();
    let r = rates(0.0, sims, 100_000);
    show("pure churn", r, sims);
    for (w, name) in [(0, "all transitions"), (1, "final window")] {
        let (lo, hi) = wilson(r[w][1], sims, 0.95).unwrap();
        assert!(
            lo <= 0.05 && 0.05 <= hi,
            "{name}: permutation rejects {}/{sims}, 95% interval [{lo:.4}, {hi:.4}]",
            r[w][1]
        );
    }
}

#[test]
fn the_permutation_null_keeps_power() {
    let sims = (trails() / 5).max(50);
    for (delta, want) in [(0.02, 0.95), (0.01, 0.4)] {
        let r = rates(delta, sims, 200_000);
        show(&format!("alternating +-{delta}"), r, sims);
        let power = r[1][1] as f64 / sims as f64;
        assert!(power >= want, "final window, +-{delta}: power {power:.3} < {want}");
    }
}
