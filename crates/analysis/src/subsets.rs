//! The checkpoint sums of a permutation null's draw on 0/1 data: each example's `k` ones put at a
//! uniformly random `k`-subset of the `T` checkpoints, the examples independently, and the number
//! of ones per checkpoint counted.
//!
//! A subset is drawn as a bit mask in one of two ways, whichever is cheaper for its `k`:
//! - **swaps**: the first `min(k, T - k)` steps of a Fisher-Yates shuffle (one random position
//!   each); cheap where an example rarely changes;
//! - **a random mask, cut or filled**: each position in with probability `j / 2^b` (`b` random
//!   words per mask word, compared bitwise), then uniformly chosen positions removed or added until
//!   `k` are in. The law of the result is invariant under every permutation of the positions (the
//!   first mask's is, and each removal or addition is uniform), and a law on `k`-subsets with that
//!   invariance is the uniform one. Cheap where `k` is near `T j / 2^b`: an example that flips
//!   often (`k ~ T / 2`) costs 4 words and a handful of adjustments for `T = 201`, not 100 swaps.
//!
//! The counts are kept bit-sliced (one word per bit of the count per 64 checkpoints, a carry
//! chain per added mask). The choice depends on `k` and `T` alone, so a draw stays a function of
//! its generator.

use rand::{Rng, RngCore};
use rand_chacha::ChaCha8Rng;

/// How one example's subset is drawn: swaps, or a mask of `bits` random words per word whose
/// positions are in with probability `j / 2^bits`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Way {
    Swaps,
    Mask { bits: u32, j: u64 },
}

/// Relative cost of one random word of a mask (a ChaCha word, no rejection) against one swap or
/// one adjustment (a bounded draw and a bit search): measured, roughly.
const WORD_COST: f64 = 0.4;

/// The cheaper way for `k` ones among `t_len` checkpoints, by expected cost in units of one swap.
fn way(k: usize, t_len: usize) -> Way {
    let m = k.min(t_len - k) as f64;
    let words = t_len.div_ceil(64) as f64;
    let t = t_len as f64;
    let mut best = (m, Way::Swaps);
    for bits in 1..=4u32 {
        let levels = 1u64 << bits;
        let j = ((k as f64 * levels as f64 / t).round() as u64).clamp(1, levels - 1);
        let p = j as f64 / levels as f64;
        // E|C - k| for C ~ Binomial(T, p), bounded by the offset plus the mean absolute deviation
        let adjust = (t * p - k as f64).abs() + (2.0 / std::f64::consts::PI * t * p * (1.0 - p)).sqrt();
        let cost = bits as f64 * words * WORD_COST + adjust;
        if cost < best.0 {
            best = (cost, Way::Mask { bits, j });
        }
    }
    best.1
}

/// The checkpoint sums of one draw: per example (with `ones[i]` ones, `0 < ones[i] < t_len`) a
/// uniform random subset, counted per checkpoint.
pub struct Sampler {
    t_len: usize,
    words: usize,
    ways: Vec<(usize, Way)>,
    /// bits of a count (every example may land on one checkpoint)
    planes: usize,
}

impl Sampler {
    pub fn new(ones: &[usize], t_len: usize) -> Sampler {
        assert!(ones.iter().all(|&k| k > 0 && k < t_len), "subsets: every example's ones in 1..T");
        Sampler {
            t_len,
            words: t_len.div_ceil(64),
            ways: ones.iter().map(|&k| (k, way(k, t_len))).collect(),
            planes: (usize::BITS - ones.len().leading_zeros()) as usize,
        }
    }

    /// The number of ones per checkpoint of one draw.
    pub fn sums(&self, rng: &mut ChaCha8Rng) -> Vec<u32> {
        let (t_len, words, planes) = (self.t_len, self.words, self.planes);
        let mut counts = vec![0u64; words * planes.max(1)];
        let mut mask = vec![0u64; words];
        let mut idx: Vec<usize> = (0..t_len).collect();
        let tail = if t_len % 64 == 0 { u64::MAX } else { (1u64 << (t_len % 64)) - 1 };
        for &(k, way) in &self.ways {
            match way {
                Way::Swaps => {
                    mask.fill(0);
                    let m = k.min(t_len - k);
                    for j in 0..m {
                        let r = rng.gen_range(j..t_len);
                        idx.swap(j, r);
                        mask[idx[j] / 64] |= 1 << (idx[j] % 64);
                    }
                    if m < k {
                        // the m positions were the zeros
                        for w in mask.iter_mut() {
                            *w = !*w;
                        }
                        mask[words - 1] &= tail;
                    }
                }
                Way::Mask { bits, j } => {
                    for w in mask.iter_mut() {
                        *w = below(rng, bits, j);
                    }
                    mask[words - 1] &= tail;
                    let mut c: usize = mask.iter().map(|w| w.count_ones() as usize).sum();
                    while c > k {
                        let r = rng.gen_range(0..c as u32);
                        flip_nth(&mut mask, r, true, tail);
                        c -= 1;
                    }
                    while c < k {
                        let r = rng.gen_range(0..(t_len - c) as u32);
                        flip_nth(&mut mask, r, false, tail);
                        c += 1;
                    }
                }
            }
            for (w, &m) in mask.iter().enumerate() {
                let plane = &mut counts[w * planes..(w + 1) * planes];
                let mut carry = m;
                for p in plane.iter_mut() {
                    if carry == 0 {
                        break;
                    }
                    let had = *p;
                    *p = had ^ carry;
                    carry &= had;
                }
            }
        }
        (0..t_len)
            .map(|t| {
                let plane = &counts[(t / 64) * planes..(t / 64 + 1) * planes];
                plane.iter().enumerate().map(|(b, &p)| (((p >> (t % 64)) & 1) as u32) << b).sum()
            })
            .collect()
    }
}

/// A random word whose every bit is 1 with probability `j / 2^bits` (bitwise `x < j` on `bits`
/// random words, most significant first).
fn below(rng: &mut ChaCha8Rng, bits: u32, j: u64) -> u64 {
    let (mut less, mut equal) = (0u64, u64::MAX);
    for b in (0..bits).rev() {
        let x = rng.next_u64();
        if (j >> b) & 1 == 1 {
            less |= equal & !x;
            equal &= x;
        } else {
            equal &= !x;
        }
    }
    less
}

/// Flips the `r`-th (from 0, low bits first) set bit of `mask` (`ones`), or the `r`-th clear bit
/// among the valid positions (the last word's are `tail`).
fn flip_nth(mask: &mut [u64], mut r: u32, ones: bool, tail: u64) {
    let last = mask.len() - 1;
    for (i, w) in mask.iter_mut().enumerate() {
        let valid = if i == last { tail } else { u64::MAX };
        let pick = if ones { *w } else { !*w & valid };
        let c = pick.count_ones();
        if r < c {
            *w ^= 1 << select(pick, r);
            return;
        }
        r -= c;
    }
    unreachable!("flip_nth: fewer candidate bits than asked");
}

/// The position of the `r`-th set bit of `w` (from 0, low bits first; `r < popcount(w)`).
fn select(mut w: u64, mut r: u32) -> u32 {
    let mut pos = 0;
    for half in [32u32, 16, 8, 4, 2, 1] {
        let low = w & ((1u64 << half) - 1);
        let c = low.count_ones();
        if r >= c {
            r -= c;
            w >>= half;
            pos += half;
        } else {
            w = low;
        }
    }
    pos
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn select_finds_each_set_bit() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for _ in 0..200 {
            let w = rng.next_u64() & rng.next_u64();
            let positions: Vec<u32> = (0..64).filter(|b| (w >> b) & 1 == 1).collect();
            for (r, &p) in positions.iter().enumerate() {
                assert_eq!(select(w, r as u32), p, "{w:#x} r = {r}");
            }
        }
    }

    #[test]
    fn each_way_is_chosen_somewhere() {
        assert_eq!(way(1, 201), Way::Swaps);
        assert_eq!(way(200, 201), Way::Swaps);
        assert!(matches!(way(100, 201), Way::Mask { bits: 1, j: 1 }), "{:?}", way(100, 201));
        assert!(matches!(way(50, 201), Way::Mask { .. }), "{:?}", way(50, 201));
    }

    /// The cost model's choices at T = 201 (4 mask words), by hand: a mask of `b` bits costs
    /// 1.6 b plus |201 p - k| + sqrt(2/pi 201 p (1 - p)) adjustments, swaps cost min(k, T - k).
    /// k = 10: the best mask (b = 4, p = 1/16) 6.4 + 2.56 + 2.74 = 11.7 > 10 swaps; k = 20: b = 3,
    /// p = 1/8: 4.8 + 5.13 + 3.74 = 13.7 < 20 (b = 4, p = 2/16, pays 1.6 more); k = 150: b = 2,
    /// p = 3/4: 3.2 + 0.75 + 4.90 = 8.85 < 51; k = 190: b = 4, p = 15/16: 6.4 + 1.56 + 2.74 = 10.7
    /// < 11 (b = 3, p = 7/8: 22.7). The draws' law is uniform whichever is chosen
    /// (`subsets_are_uniform`); this pins the cost.
    #[test]
    fn the_cheaper_way_by_hand() {
        assert_eq!(way(10, 201), Way::Swaps);
        assert_eq!(way(20, 201), Way::Mask { bits: 3, j: 1 });
        assert_eq!(way(150, 201), Way::Mask { bits: 2, j: 3 });
        assert_eq!(way(190, 201), Way::Mask { bits: 4, j: 15 });
    }

    /// Every k-subset equally likely, for every k and both ways (forced), on T = 7 over 70 mask
    /// words (positions across a word boundary): 35,000 draws per (k, way), a chi-square bound.
    #[test]
    fn subsets_are_uniform() {
        for t_len in [7usize, 70] {
            for k in 1..t_len {
                let forced = [Way::Swaps, Way::Mask { bits: 1, j: 1 }, Way::Mask { bits: 3, j: 2 }];
                for way in forced {
                    let s = Sampler { t_len, words: t_len.div_ceil(64), ways: vec![(k, way)], planes: 1 };
                    let mut rng = ChaCha8Rng::seed_from_u64(k as u64);
                    if t_len == 7 {
                        // the full law: each of C(7, k) subsets
                        let mut seen = std::collections::HashMap::new();
                        let draws = 35_000;
                        for _ in 0..draws {
                            let sums = s.sums(&mut rng);
                            assert_eq!(sums.iter().sum::<u32>() as usize, k);
                            *seen.entry(sums).or_insert(0usize) += 1;
                        }
                        let cells = seen.len() as f64;
                        let binom = (0..k).fold(1.0, |a, i| a * (t_len - i) as f64 / (i + 1) as f64);
                        assert_eq!(cells, binom, "k = {k}, {way:?}: every subset drawn");
                        let e = draws as f64 / cells;
                        let chi2: f64 = seen.values().map(|&o| (o as f64 - e).powi(2) / e).sum();
                        // df <= 34: the 99.99% point of chi-square(34) is ~72
                        assert!(chi2 < 72.0, "k = {k}, {way:?}: chi2 {chi2:.1} on {cells} cells");
                    } else {
                        // each position in with probability k / T
                        let draws = 4_000;
                        let mut hits = vec![0u32; t_len];
                        for _ in 0..draws {
                            for (h, s) in hits.iter_mut().zip(s.sums(&mut rng)) {
                                *h += s;
                            }
                        }
                        let p = k as f64 / t_len as f64;
                        let sd = (draws as f64 * p * (1.0 - p)).sqrt();
                        for (pos, &h) in hits.iter().enumerate() {
                            let z = (h as f64 - draws as f64 * p) / sd;
                            assert!(z.abs() < 5.0, "T = 70, k = {k}, {way:?}: position {pos} z = {z:.1}");
                        }
                    }
                }
            }
        }
    }

    /// `below`'s bits are 1 at rate `j / 2^bits`, at every position alike (within 6 standard errors
    /// over 4,000 words: a false failure below 1e-8 per check).
    #[test]
    fn mask_bits_at_their_rate() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let words = 4000;
        for bits in 1..=4u32 {
            for j in 1..(1u64 << bits) {
                let p = j as f64 / (1u64 << bits) as f64;
                let mut per_position = [0u32; 64];
                for _ in 0..words {
                    let w = below(&mut rng, bits, j);
                    for (i, c) in per_position.iter_mut().enumerate() {
                        *c += ((w >> i) & 1) as u32;
                    }
                }
                let all = per_position.iter().map(|&c| f64::from(c)).sum::<f64>() / (64 * words) as f64;
                let se = (p * (1.0 - p) / (64 * words) as f64).sqrt();
                assert!((all - p).abs() < 6.0 * se, "bits {bits}, j {j}: rate {all}, want {p}");
                let se1 = (p * (1.0 - p) / words as f64).sqrt();
                for (i, &c) in per_position.iter().enumerate() {
                    let r = f64::from(c) / words as f64;
                    assert!((r - p).abs() < 6.0 * se1, "bits {bits}, j {j}, bit {i}: rate {r}, want {p}");
                }
            }
        }
    }

    /// The bit-sliced counts equal the plain count of many examples' masks.
    #[test]
    fn counts_add_up() {
        // T = 64 and 128 fill their last word: no tail to cut
        for t_len in [150, 64, 128, 65] {
            let ones: Vec<usize> = (0..300).map(|i| 1 + (i * 37) % (t_len - 1)).collect();
            let s = Sampler::new(&ones, t_len);
            let sums = s.sums(&mut ChaCha8Rng::seed_from_u64(3));
            assert_eq!(sums.len(), t_len);
            assert_eq!(sums.iter().map(|&x| x as usize).sum::<usize>(), ones.iter().sum::<usize>(), "T = {t_len}");
            assert!(sums.iter().all(|&x| x as usize <= ones.len()));
        }
    }
}
