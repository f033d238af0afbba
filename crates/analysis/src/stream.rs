//! Streaming example-level measures for runs too large to hold as a matrix: correctness arrives
//! one checkpoint at a time as bits (64 examples a word), and the state is a few bytes per
//! example (flip counts, the last change, whether it was ever forgotten), never the
//! examples x checkpoints matrix.

use crate::metrics::{detrend, direction_changes, largest_drop};
use crate::stats::population_sd as sd;
use theory::sequence::mtv;

pub struct StreamingTask {
    n: usize,
    prev: Vec<u64>,
    forgotten: Vec<u64>,
    to_wrong: Vec<u16>,
    to_right: Vec<u16>,
    last_change: Vec<u16>,
    scores: Vec<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StreamSummary {
    pub checkpoints: usize,
    pub examples: usize,
    pub mtv: f64,
    pub detrended_sd: f64,
    pub direction_changes: usize,
    pub largest_drop: f64,
    pub final_score: f64,
    pub mean_flip_rate: f64,
    pub flip_rate_p50: f64,
    pub flip_rate_p90: f64,
    pub flips_to_wrong: u64,
    pub flips_to_right: u64,
    pub learned_then_forgotten: f64,
    /// no change over the last 20% of checkpoints
    pub stable_final: f64,
    pub consecutive_agreement: f64,
}

impl StreamingTask {
    pub fn new(examples: usize) -> Self {
        let w = examples.div_ceil(64);
        StreamingTask {
            n: examples,
            prev: vec![0; w],
            forgotten: vec![0; w],
            to_wrong: vec![0; examples],
            to_right: vec![0; examples],
            last_change: vec![0; examples],
            scores: Vec::new(),
        }
    }

    /// One checkpoint's correctness, bit e of word e / 64 for example e (unused high bits zero).
    pub fn push(&mut self, words: &[u64]) {
        assert_eq!(words.len(), self.prev.len(), "one word per 64 examples");
        let t = self.scores.len();
        let ones: u64 = words.iter().map(|w| w.count_ones() as u64).sum();
        self.scores.push(ones as f64 / self.n as f64);
        if t == 0 {
            self.prev.copy_from_slice(words);
            return;
        }
        for (i, (&cur, prev)) in words.iter().zip(self.prev.iter_mut()).enumerate() {
            let down = *prev & !cur;
            let up = !*prev & cur;
            self.forgotten[i] |= down;
            for (mask, counts) in [(down, &mut self.to_wrong), (up, &mut self.to_right)] {
                let mut m = mask;
                while m != 0 {
                    let e = i * 64 + m.trailing_zeros() as usize;
                    counts[e] += 1;
                    self.last_change[e] = t as u16;
                    m &= m - 1;
                }
            }
            *prev = cur;
        }
    }

    pub fn finish(&self) -> StreamSummary {
        let m = self.scores.len();
        let steps: Vec<f64> = (0..m).map(|t| t as f64).collect();
        let (drop, _) = largest_drop(&self.scores);
        // flip-count histogram gives exact quantiles without sorting 1e5 floats
        let mut hist = vec![0usize; m.max(1)];
        let (mut w, mut r) = (0u64, 0u64);
        for e in 0..self.n {
            let f = (self.to_wrong[e] + self.to_right[e]) as usize;
            hist[f] += 1;
            w += self.to_wrong[e] as u64;
            r += self.to_right[e] as u64;
        }
        let transitions = (m.max(2) - 1) as f64;
        let quantile = |q: f64| {
            // numpy-style linear interpolation between order statistics
            let pos = q * (self.n - 1) as f64;
            let at = |rank: usize| {
                let mut seen = 0;
                hist.iter()
                    .position(|&c| {
                        seen += c;
                        seen > rank
                    })
                    .unwrap() as f64
            };
            let (lo, hi) = (at(pos.floor() as usize), at(pos.ceil() as usize));
            (lo + (hi - lo) * (pos - pos.floor())) / transitions
        };
        let final_start = m - ((m as f64 * 0.2).ceil() as usize).max(1).min(m);
        let stable = (0..self.n).filter(|&e| (self.last_change[e] as usize) <= final_start).count();
        let forgotten: u64 = self.forgotten.iter().map(|w| w.count_ones() as u64).sum();
        let mean_flip = (w + r) as f64 / self.n as f64 / transitions;
        StreamSummary {
            checkpoints: m,
            examples: self.n,
            mtv: mtv(&self.scores).unwrap_or(0.0),
            detrended_sd: sd(&detrend(&steps, &self.scores)),
            direction_changes: direction_changes(&self.scores),
            largest_drop: drop,
            final_score: *self.scores.last().unwrap_or(&0.0),
            mean_flip_rate: mean_flip,
            flip_rate_p50: quantile(0.5),
            flip_rate_p90: quantile(0.9),
            flips_to_wrong: w,
            flips_to_right: r,
            learned_then_forgotten: forgotten as f64 / self.n as f64,
            stable_final: stable as f64 / self.n as f64,
            consecutive_agreement: 1.0 - mean_flip,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::example_stats;
    use crate::stats::quantile;

    /// The streaming summary equals the matrix computation on random data.
    #[test]
    fn streaming_matches_the_matrix_measures() {
        let (n, m) = (150usize, 30usize);
        let bit = |e: usize, t: usize| (e * 2654435761 + t * 40503 + (e * t) % 7) % 5 < 2 + (t * 2) / m;
        let mut s = StreamingTask::new(n);
        for t in 0..m {
            let mut words = vec![0u64; n.div_ceil(64)];
            for e in 0..n {
                if bit(e, t) {
                    words[e / 64] |= 1 << (e % 64);
                }
            }
            s.push(&words);
        }
        let got = s.finish();
        let rows: Vec<Vec<bool>> = (0..n).map(|e| (0..m).map(|t| bit(e, t)).collect()).collect();
        let stats: Vec<_> = rows.iter().map(|r| example_stats(r, &vec![""; m])).collect();
        let rates: Vec<f64> = stats.iter().map(|x| x.flip_rate).collect();
        let scores: Vec<f64> = (0..m).map(|t| rows.iter().filter(|r| r[t]).count() as f64 / n as f64).collect();
        assert!((got.mtv - mtv(&scores).unwrap()).abs() < 1e-12);
        assert!((got.mean_flip_rate - rates.iter().sum::<f64>() / n as f64).abs() < 1e-12);
        assert!((got.flip_rate_p50 - quantile(&rates, 0.5)).abs() < 1e-12);
        assert!((got.flip_rate_p90 - quantile(&rates, 0.9)).abs() < 1e-12);
        let lf = stats.iter().filter(|x| x.learned_then_forgotten).count() as f64 / n as f64;
        assert!((got.learned_then_forgotten - lf).abs() < 1e-12);
    }

    /// Five examples over eight checkpoints, every field by hand. Their flip counts (0, 1, 4, 2,
    /// 7) have no ties at the ranks the quantiles interpolate between, and the last changes (none,
    /// 1, 4, 7, 7) fall on both sides of the final stage's start (checkpoint 6).
    #[test]
    fn every_field_by_hand() {
        let rows = ["FFFFFFFF", "FTTTTTTT", "TFTFTTTT", "FFFFFFTF", "TFTFTFTF"];
        let mut s = StreamingTask::new(rows.len());
        for t in 0..8 {
            let word = rows.iter().enumerate().filter(|(_, r)| r.as_bytes()[t] == b'T').map(|(e, _)| 1u64 << e).sum();
            s.push(&[word]);
        }
        let got = s.finish();
        let scores = [0.4, 0.2, 0.6, 0.2, 0.6, 0.4, 0.8, 0.4];
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert_eq!((got.checkpoints, got.examples, got.flips_to_wrong, got.flips_to_right), (8, 5, 7, 7));
        assert!(close(got.mtv, mtv(&scores).unwrap()) && close(got.mtv, 2.4 / 7.0), "{got:?}");
        assert!(close(got.final_score, 0.4) && close(got.largest_drop, 0.4), "{got:?}");
        assert_eq!(got.direction_changes, direction_changes(&scores));
        let steps: Vec<f64> = (0..8).map(f64::from).collect();
        assert!(close(got.detrended_sd, sd(&detrend(&steps, &scores))), "{got:?}");
        // 14 flips over 5 examples x 7 transitions
        assert!(close(got.mean_flip_rate, 0.4) && close(got.consecutive_agreement, 0.6), "{got:?}");
        // sorted counts 0, 1, 2, 4, 7: the median is the third, p90 sits 0.6 of the way from 4 to 7
        assert!(close(got.flip_rate_p50, 2.0 / 7.0) && close(got.flip_rate_p90, 5.8 / 7.0), "{got:?}");
        // forgotten: examples 2, 3, 4; unchanged from checkpoint 6 on: examples 0, 1, 2
        assert!(close(got.learned_then_forgotten, 0.6) && close(got.stable_final, 0.6), "{got:?}");
        // ten checkpoints: the final stage starts at checkpoint 8, so a last change at 7 is before it
        let mut s = StreamingTask::new(1);
        for t in 0..10 {
            s.push(&[u64::from(t < 7)]);
        }
        assert_eq!(s.finish().stable_final, 1.0);
    }
}
