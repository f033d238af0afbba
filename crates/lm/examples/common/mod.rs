//! What the lm benchmarks share: this machine's matmul rate on given GEMM shapes, the bound
//! every MFU and "share of peak" figure is against, measured in the same run as the figure.
use lm::tch::{Device, Kind, Tensor};
use output::bench::Spread;
use std::time::Instant;

/// Median GFLOP/s over `reps` timings (each of enough calls to take ~20 ms) of an (M, K, N)
/// matmul in `kind`.
pub fn gemm_gflops(kind: Kind, (m, k, n): (i64, i64, i64), reps: usize) -> f64 {
    let a = Tensor::randn([m, k], (Kind::Float, Device::Cpu)).to_kind(kind);
    let b = Tensor::randn([k, n], (Kind::Float, Device::Cpu)).to_kind(kind);
    let flops = 2.0 * (m * k * n) as f64;
    let t = Instant::now();
    let _ = a.matmul(&b);
    let calls = ((0.02 / t.elapsed().as_secs_f64()).ceil() as usize).clamp(1, 1000);
    let rates: Vec<f64> = (0..reps.max(1))
        .map(|_| {
            let t = Instant::now();
            for _ in 0..calls {
                let _ = a.matmul(&b);
            }
            calls as f64 * flops / t.elapsed().as_secs_f64() / 1e9
        })
        .collect();
    Spread::of(&rates).median
}

/// The GFLOP/s of each shape and the best of them (the peak).
pub fn peak_gflops(kind: Kind, shapes: &[(i64, i64, i64)], reps: usize) -> (Vec<f64>, f64) {
    let per: Vec<f64> = shapes.iter().map(|&s| gemm_gflops(kind, s, reps)).collect();
    let best = per.iter().cloned().fold(0.0, f64::max);
    (per, best)
}
