//! Signal-to-noise ratio of a benchmark (Heineman et al. 2025, "Signal and Noise: A Framework
//! for Reducing Uncertainty in Language Model Evaluation", arXiv 2508.13144).
//!
//! Signal: the relative dispersion of the final scores of a set of models,
//! `max_{j,k} |m_j - m_k| / |mean(m)|`. Noise: the relative standard deviation of one model's
//! scores over its final checkpoints, `sd / |mean|` (sample sd, n - 1), averaged over the
//! models. SNR = signal / noise. Metrics that can be negative (log-probabilities, margins) are
//! divided by |mean|, so the ratios stay positive; a mean of 0 leaves them undefined.

use crate::stats::{mean, sample_sd};

/// Relative dispersion of final scores; `None` for fewer than 2 scores or a mean of 0.
pub fn relative_dispersion(final_scores: &[f64]) -> Option<f64> {
    if final_scores.len() < 2 {
        return None;
    }
    let m = mean(final_scores);
    let (lo, hi) = final_scores.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
    (m != 0.0).then(|| (hi - lo) / m.abs())
}

/// Relative standard deviation of scores; `None` for fewer than 2 scores or a mean of 0.
pub fn relative_std(scores: &[f64]) -> Option<f64> {
    if scores.len() < 2 {
        return None;
    }
    let m = mean(scores);
    (m != 0.0).then(|| sample_sd(scores) / m.abs())
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Snr {
    pub signal: f64,
    pub noise: f64,
    pub snr: f64,
}

/// SNR of models given by their final windows of scores (the last score of each is its final
/// score): signal over the models' final scores, noise the mean relative sd of the windows.
pub fn snr(final_windows: &[&[f64]]) -> Option<Snr> {
    let finals: Vec<f64> = final_windows.iter().map(|w| w.last().copied()).collect::<Option<_>>()?;
    let noises: Vec<f64> = final_windows.iter().map(|w| relative_std(w)).collect::<Option<_>>()?;
    from_parts(&finals, &noises)
}

/// SNR from the models' final scores and each model's noise (its relative sd, already
/// computed): signal [`relative_dispersion`] of the finals, noise the mean of the noises.
/// `None` where the signal is (fewer than 2 finals, a mean of 0) or there is no noise value; a
/// noise of 0 gives an infinite (or NaN) ratio, which callers may refuse.
pub fn from_parts(final_scores: &[f64], noises: &[f64]) -> Option<Snr> {
    let signal = relative_dispersion(final_scores)?;
    if noises.is_empty() {
        return None;
    }
    let noise = mean(noises);
    Some(Snr { signal, noise, snr: signal / noise })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn hand_worked_values() {
        // finals 0.4, 0.6: dispersion 0.2 / 0.5
        assert!((relative_dispersion(&[0.4, 0.6]).unwrap() - 0.4).abs() < 1e-12);
        // 1, 2, 3: sd 1, mean 2
        assert!((relative_std(&[1.0, 2.0, 3.0]).unwrap() - 0.5).abs() < 1e-12);
        let s = snr(&[&[0.38, 0.40, 0.42], &[0.58, 0.62, 0.60]]).unwrap();
        // finals 0.42, 0.60 -> 0.18 / 0.51; noise mean of 0.02/0.40 and 0.02/0.60
        assert!((s.signal - 0.18 / 0.51).abs() < 1e-12);
        assert!((s.noise - (0.05 + 0.02 / 0.6) / 2.0).abs() < 1e-12);
        assert!((s.snr - s.signal / s.noise).abs() < 1e-12);
        assert_eq!(relative_std(&[1.0]), None);
        // two scores are enough: sd sqrt(2) (divisor n - 1) over the mean 2
        assert!((relative_std(&[1.0, 3.0]).unwrap() - 2f64.sqrt() / 2.0).abs() < 1e-12);
        assert_eq!(relative_dispersion(&[-1.0, 1.0]), None);
        // from parts: the same numbers as from the windows
        let p = from_parts(&[0.42, 0.60], &[0.05, 0.02 / 0.6]).unwrap();
        assert!((p.signal - s.signal).abs() < 1e-12 && (p.noise - s.noise).abs() < 1e-12, "{p:?}");
        assert_eq!(from_parts(&[0.42, 0.60], &[]), None);
        assert_eq!(from_parts(&[0.42], &[0.1]), None);
        assert_eq!(from_parts(&[0.4, 0.6], &[0.0]).map(|s| s.snr), Some(f64::INFINITY));
        // negative metrics use |mean|
        assert!((relative_std(&[-1.0, -2.0, -3.0]).unwrap() - 0.5).abs() < 1e-12);
    }

    /// Adding noise to the final windows lowers the SNR: on 200 seeded pairs of models, the
    /// noisier copy has the lower SNR in most of them.
    #[test]
    fn more_checkpoint_noise_lowers_the_snr() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let mut lower = 0;
        for _ in 0..200 {
            let base: Vec<Vec<f64>> =
                (0..4).map(|m| (0..10).map(|_| 0.3 + 0.1 * m as f64 + rng.gen_range(-0.01..0.01)).collect()).collect();
            let noisy: Vec<Vec<f64>> =
                base.iter().map(|w| w.iter().map(|v| v + rng.gen_range(-0.05..0.05)).collect()).collect();
            let a = snr(&base.iter().map(Vec::as_slice).collect::<Vec<_>>()).unwrap().snr;
            let b = snr(&noisy.iter().map(Vec::as_slice).collect::<Vec<_>>()).unwrap().snr;
            lower += usize::from(b < a);
        }
        assert!(lower >= 190, "{lower}/200");
    }

    proptest! {
        #[test]
        fn scaling_every_score_leaves_the_snr_unchanged(w in prop::collection::vec(prop::collection::vec(0.1..1.0f64, 3..8), 2..6), c in 0.01..100.0f64) {
            let a = snr(&w.iter().map(Vec::as_slice).collect::<Vec<_>>());
            let scaled: Vec<Vec<f64>> = w.iter().map(|x| x.iter().map(|v| v * c).collect()).collect();
            let b = snr(&scaled.iter().map(Vec::as_slice).collect::<Vec<_>>());
            match (a, b) {
                (Some(a), Some(b)) => prop_assert!((a.snr - b.snr).abs() <= 1e-9 * a.snr.abs().max(1.0)),
                (a, b) => prop_assert_eq!(a.is_none(), b.is_none()),
            }
        }
    }
}
