//! Weighted sums of a trail's per-example values, `values (T x n) . weights (n x C)`: the scores of
//! every checkpoint under many example weightings at once (the bootstrap's draws, the selection's
//! halves).
//!
//! On 0/1 values with integer weights the sums are walked along the checkpoints: row `t` is row
//! `t - 1` plus the weights of the examples that turned 1 and minus those that turned 0. Consecutive
//! checkpoints share most of their answers, so the walk reads a few rows of weights per checkpoint
//! where the product reads all `n`, and its integers are exact, as the product's are (integer sums
//! below 2^53 in f64 are exact in any order): the two give the same bits. Other values take the
//! product.

use ndarray::{Array2, ArrayView2};
use rayon::prelude::*;
use std::sync::OnceLock;

/// Columns of the walk's accumulator handled together: their weights (n x 64 x 4 bytes, 1.3 MB
/// for 5,000 examples) stay in L2 while every checkpoint's changes are added.
const BLOCK: usize = 64;

/// Whole-number weights of the examples, `n x C` (example `i`'s weight in each column), kept per
/// block of [`BLOCK`] columns with the block's `n` rows contiguous (rows a whole matrix row apart
/// would share cache sets in the walk), the last block padded with zeros; the product's f64 copy
/// is made once, where a metric needs it.
pub struct Weights {
    n: usize,
    c: usize,
    blocks: Vec<u32>,
    /// The largest weight (the walk's overflow check), found once at construction.
    top: u32,
    floats: OnceLock<Array2<f64>>,
}

impl Weights {
    /// Column `j` is `column(j)` (`n` weights); blocks are filled in parallel.
    pub fn from_column_fn<C: AsRef<[u32]>>(n: usize, c: usize, column: impl Fn(usize) -> C + Sync) -> Weights {
        let mut blocks = vec![0u32; c.div_ceil(BLOCK) * n * BLOCK];
        if n > 0 {
            blocks.par_chunks_mut(n * BLOCK).enumerate().for_each(|(b, block)| {
                for j in b * BLOCK..c.min((b + 1) * BLOCK) {
                    let col = column(j);
                    let col = col.as_ref();
                    assert_eq!(col.len(), n, "weights: a column of n weights");
                    for (i, &x) in col.iter().enumerate() {
                        block[i * BLOCK + j % BLOCK] = x;
                    }
                }
            });
        }
        let top = blocks.par_iter().copied().max().unwrap_or(0);
        Weights { n, c, blocks, top, floats: OnceLock::new() }
    }

    /// From `C` columns of `n` weights each.
    pub fn from_columns(cols: &[Vec<u32>], n: usize) -> Weights {
        Weights::from_column_fn(n, cols.len(), |j| &cols[j])
    }

    /// Example `i`'s weights in the columns of block `b`.
    fn row(&self, b: usize, i: usize) -> &[u32; BLOCK] {
        let at = (b * self.n + i) * BLOCK;
        self.blocks[at..at + BLOCK].try_into().expect("a block row")
    }

    /// `m . weights`: per column `sum_i w[i, c] * m[i]`, summed over the examples in order.
    pub fn weighted_by(&self, m: &[f64]) -> Vec<f64> {
        assert_eq!(m.len(), self.n, "weighted_by: one value per example");
        let mut out = Vec::with_capacity(self.c);
        for b in 0..self.c.div_ceil(BLOCK) {
            let mut acc = [0.0f64; BLOCK];
            for (i, &mi) in m.iter().enumerate() {
                for (a, &w) in acc.iter_mut().zip(self.row(b, i)) {
                    *a += f64::from(w) * mi;
                }
            }
            out.extend_from_slice(&acc[..self.c.min((b + 1) * BLOCK) - b * BLOCK]);
        }
        out
    }

    fn floats(&self) -> &Array2<f64> {
        self.floats.get_or_init(|| {
            Array2::from_shape_fn((self.n, self.c), |(i, j)| f64::from(self.row(j / BLOCK, i)[j % BLOCK]))
        })
    }
}

/// `values . weights` (T x C); see the module doc.
pub fn weighted_sums(values: ArrayView2<f64>, weights: &Weights) -> Array2<f64> {
    assert_eq!(values.ncols(), weights.n, "weighted_sums: one weight row per example");
    binary_walk(values, weights).unwrap_or_else(|| values.dot(weights.floats()))
}

/// The walk, where `values` are all 0 or 1 and no column's sum can reach 2^32 (`n` times the
/// largest weight); `None` otherwise. Its u32 sums wrap on the way down and back (exact modulo
/// 2^32), and every row's are sums of weights, below 2^32.
fn binary_walk(values: ArrayView2<f64>, weights: &Weights) -> Option<Array2<f64>> {
    let ((t_len, n), c) = (values.dim(), weights.c);
    if !values.iter().all(|&v| v == 0.0 || v == 1.0) {
        return None;
    }
    if (n as u64).checked_mul(u64::from(weights.top)).is_none_or(|m| m >= 1 << 32) {
        return None;
    }
    // per checkpoint the examples that changed from the one before (from all 0 before the first):
    // (example, turned 1)
    let changes: Vec<Vec<(usize, bool)>> = (0..t_len)
        .map(|t| {
            let row = values.row(t);
            if t == 0 {
                (0..n).filter(|&i| row[i] == 1.0).map(|i| (i, true)).collect()
            } else {
                let prev = values.row(t - 1);
                (0..n).filter(|&i| row[i] != prev[i]).map(|i| (i, row[i] == 1.0)).collect()
            }
        })
        .collect();
    let mut out = Array2::<f64>::zeros((t_len, c));
    for (b, from) in (0..c).step_by(BLOCK).enumerate() {
        let to = c.min(from + BLOCK);
        let mut acc = [0u32; BLOCK];
        for (t, ch) in changes.iter().enumerate() {
            for &(i, up) in ch {
                let row = weights.row(b, i);
                if up {
                    acc.iter_mut().zip(row).for_each(|(a, &x)| *a = a.wrapping_add(x));
                } else {
                    acc.iter_mut().zip(row).for_each(|(a, &x)| *a = a.wrapping_sub(x));
                }
            }
            for (o, &a) in out.row_mut(t).slice_mut(ndarray::s![from..to]).iter_mut().zip(acc.iter()) {
                *o = f64::from(a);
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn matrix(rows: usize, cols: usize, cells: &[u8], f: impl Fn(u8) -> f64) -> Array2<f64> {
        Array2::from_shape_fn((rows, cols), |(r, c)| f(cells[(r * cols + c) % cells.len()]))
    }

    proptest! {
        /// The walk gives the product's bits on 0/1 values and whole weights (across blocks too).
        #[test]
        fn walk_equals_the_product(
            t in 1usize..12, n in 1usize..40, c in 1usize..600,
            cells in prop::collection::vec(any::<u8>(), 1..200),
        ) {
            let v = matrix(t, n, &cells, |x| f64::from(x % 2));
            let w = Array2::from_shape_fn((n, c), |(i, j)| u32::from(cells[(i * c + j * 7) % cells.len()] % 5));
            let weights = of(&w);
            let walked = binary_walk(v.view(), &weights).expect("0/1 values, whole weights");
            prop_assert_eq!(walked, v.dot(&w.mapv(f64::from)));
            // and the f64 copy, and the example-weighted sums in example order
            prop_assert_eq!(weights.floats(), &w.mapv(f64::from));
            let m: Vec<f64> = (0..n).map(|i| i as f64 / 3.0).collect();
            let want: Vec<f64> = (0..c).map(|j| (0..n).fold(0.0, |a, i| a + f64::from(w[[i, j]]) * m[i])).collect();
            prop_assert_eq!(weights.weighted_by(&m), want);
        }
    }

    /// The weights of an `n x C` matrix.
    fn of(w: &Array2<u32>) -> Weights {
        Weights::from_column_fn(w.nrows(), w.ncols(), |j| w.column(j).to_vec())
    }

    #[test]
    fn other_values_or_large_weights_take_the_product() {
        let ints = ndarray::array![[1u32, 2], [3, 0]];
        let w = of(&ints);
        let v = ndarray::array![[0.0, 1.0], [0.5, 1.0]];
        assert!(binary_walk(v.view(), &w).is_none());
        assert_eq!(weighted_sums(v.view(), &w), v.dot(&ints.mapv(f64::from)));
        let bits = ndarray::array![[0.0, 1.0], [1.0, 1.0]];
        assert_eq!(weighted_sums(bits.view(), &w), bits.dot(&ints.mapv(f64::from)));
        // sums that could pass 2^32
        let big = of(&ndarray::array![[u32::MAX / 2 + 1], [1]]);
        assert!(binary_walk(bits.view(), &big).is_none());
        assert_eq!(weighted_sums(bits.view(), &big), ndarray::array![[1.0], [2147483649.0]]);
        // columns given as columns
        assert_eq!(Weights::from_columns(&[vec![1, 3], vec![2, 0]], 2).blocks, w.blocks);
    }

    /// Each column is asked for once (a column may be a bootstrap draw's counts, made on demand).
    #[test]
    fn each_column_is_read_once() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let c = 3 * BLOCK + 5;
        let calls: Vec<AtomicUsize> = (0..c).map(|_| AtomicUsize::new(0)).collect();
        let w = Weights::from_column_fn(2, c, |j| {
            calls[j].fetch_add(1, Ordering::Relaxed);
            [j as u32, 1]
        });
        assert!(calls.iter().all(|k| k.load(Ordering::Relaxed) == 1));
        assert_eq!(w.weighted_by(&[1.0, 0.0]), (0..c).map(|j| j as f64).collect::<Vec<_>>());
    }

    /// No examples (a task whose examples were all filtered out): every sum is 0.
    #[test]
    fn no_examples_sum_to_zero() {
        let w = Weights::from_columns(&[vec![], vec![], vec![]], 0);
        let none = Array2::<f64>::zeros((4, 0));
        assert_eq!(weighted_sums(none.view(), &w), Array2::<f64>::zeros((4, 3)));
        assert_eq!(w.weighted_by(&[]), vec![0.0; 3]);
    }
}
