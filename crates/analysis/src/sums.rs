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
use std::sync::OnceLock;

/// Columns of the walk's accumulator handled together: their weights (n x 256 x 4 bytes) are
/// read once per checkpoint's changes, and the accumulator stays in L1.
const BLOCK: usize = 256;

/// Whole-number weights of the examples, `n x C` (row `i`: example `i`'s weight in each column),
/// with their f64 copy made once where the product needs it.
pub struct Weights {
    ints: Array2<u32>,
    floats: OnceLock<Array2<f64>>,
}

impl Weights {
    /// The weights `n x C` (example rows).
    pub fn new(ints: Array2<u32>) -> Weights {
        Weights { ints, floats: OnceLock::new() }
    }

    /// From `C` columns of `n` weights each.
    pub fn from_columns(cols: &[Vec<u32>], n: usize) -> Weights {
        Weights::new(Array2::from_shape_fn((n, cols.len()), |(i, c)| cols[c][i]))
    }

    pub fn view(&self) -> ArrayView2<'_, u32> {
        self.ints.view()
    }

    fn floats(&self) -> &Array2<f64> {
        self.floats.get_or_init(|| self.ints.mapv(f64::from))
    }
}

/// `values . weights` (T x C); see the module doc.
pub fn weighted_sums(values: ArrayView2<f64>, weights: &Weights) -> Array2<f64> {
    assert_eq!(values.ncols(), weights.ints.nrows(), "weighted_sums: one weight row per example");
    binary_walk(values, weights.ints.view()).unwrap_or_else(|| values.dot(weights.floats()))
}

/// The walk, where `values` are all 0 or 1 and no column's sum can reach 2^32 (`n` times the
/// largest weight); `None` otherwise. Its u32 sums wrap on the way down and back (exact modulo
/// 2^32), and every row's are sums of weights, below 2^32.
fn binary_walk(values: ArrayView2<f64>, w: ArrayView2<u32>) -> Option<Array2<f64>> {
    let ((t_len, n), c) = (values.dim(), w.ncols());
    if !values.iter().all(|&v| v == 0.0 || v == 1.0) {
        return None;
    }
    let top = w.iter().copied().max().unwrap_or(0);
    if (n as u64).checked_mul(u64::from(top)).is_none_or(|m| m >= 1 << 32) {
        return None;
    }
    let w = w.as_standard_layout();
    let w = w.as_slice().expect("standard layout");
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
    let mut acc = vec![0u32; BLOCK];
    for from in (0..c).step_by(BLOCK) {
        let to = c.min(from + BLOCK);
        let acc = &mut acc[..to - from];
        acc.fill(0);
        for (t, ch) in changes.iter().enumerate() {
            for &(i, up) in ch {
                let row = &w[i * c + from..i * c + to];
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
            let walked = binary_walk(v.view(), w.view()).expect("0/1 values, whole weights");
            prop_assert_eq!(walked, v.dot(&w.mapv(f64::from)));
        }
    }

    #[test]
    fn other_values_or_large_weights_take_the_product() {
        let w = Weights::new(ndarray::array![[1, 2], [3, 0]]);
        let v = ndarray::array![[0.0, 1.0], [0.5, 1.0]];
        assert!(binary_walk(v.view(), w.view()).is_none());
        assert_eq!(weighted_sums(v.view(), &w), v.dot(w.floats()));
        let bits = ndarray::array![[0.0, 1.0], [1.0, 1.0]];
        assert_eq!(weighted_sums(bits.view(), &w), bits.dot(w.floats()));
        // sums that could pass 2^32
        let big = Weights::new(ndarray::array![[u32::MAX / 2 + 1], [1]]);
        assert!(binary_walk(bits.view(), big.view()).is_none());
        assert_eq!(weighted_sums(bits.view(), &big), ndarray::array![[1.0], [2147483649.0]]);
        // columns given as columns
        let cols = Weights::from_columns(&[vec![1, 3], vec![2, 0]], 2);
        assert_eq!(cols.view(), w.view());
    }
}
