//! Averaging throughput: GB/s of `integrate::average` over k synthetic fp32 checkpoints, against
//! the machine's memory-copy bandwidth over the same bytes (the physical limit: read k inputs,
//! write one) and against a PyTorch reference (load, mean, save; crates/integrate/bench/), in
//! one run, as ratios. `just bench-average`.
use anyhow::Result;
use integrate::average::{average, uniform, Accumulate, Checkpoint};
use safetensors::tensor::{Dtype, TensorView};
use std::time::Instant;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let k: usize = args.get(1).map_or(Ok(4), |s| s.parse())?;
    let mb: usize = args.get(2).map_or(Ok(256), |s| s.parse())?;
    let dir = tempfile::tempdir()?;
    // k checkpoints of `mb` MB each, as 16 tensors of fp32
    let per = mb * (1 << 20) / 4 / 16;
    let mut paths = Vec::new();
    for i in 0..k {
        let data: Vec<Vec<u8>> = (0..16).map(|t| (0..per).flat_map(|j| (((i * 31 + t * 7 + j) % 1000) as f32 * 1e-3).to_le_bytes()).collect()).collect();
        let views: Vec<(String, TensorView)> = data.iter().enumerate().map(|(t, b)| (format!("layer.{t}.weight"), TensorView::new(Dtype::F32, vec![per], b).unwrap())).collect();
        let p = dir.path().join(format!("c{i}.safetensors"));
        safetensors::serialize_to_file(views, None, &p)?;
        paths.push(p);
    }
    let bytes = (k + 1) as f64 * (mb << 20) as f64;

    // memory-copy bound: copy the same number of bytes, buffer to buffer
    let src = vec![1u8; mb << 20];
    let mut dst = vec![0u8; mb << 20];
    let copy_s = (0..3)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..=k {
                dst.copy_from_slice(std::hint::black_box(&src));
            }
            t.elapsed().as_secs_f64()
        })
        .fold(f64::MAX, f64::min);
    drop((src, dst));

    let run = |acc: Accumulate| -> Result<f64> {
        let out = dir.path().join("avg.safetensors");
        let t = Instant::now();
        let inputs: Vec<Checkpoint> = paths.iter().map(|p| Checkpoint::open(p)).collect::<Result<_>>()?;
        average(&inputs, &uniform(k), acc, &out)?;
        Ok(t.elapsed().as_secs_f64())
    };
    run(Accumulate::F32)?; // warm the page cache
    let f32_s = (0..3).map(|_| run(Accumulate::F32)).collect::<Result<Vec<_>>>()?.into_iter().fold(f64::MAX, f64::min);
    let f64_s = (0..3).map(|_| run(Accumulate::F64)).collect::<Result<Vec<_>>>()?.into_iter().fold(f64::MAX, f64::min);

    let py = std::process::Command::new(".venv/bin/python").arg("crates/integrate/bench/average_reference.py").arg(dir.path().join("py.safetensors")).args(&paths).output()?;
    anyhow::ensure!(py.status.success(), "reference failed: {}", String::from_utf8_lossy(&py.stderr));
    let v: serde_json::Value = serde_json::from_slice(py.stdout.trim_ascii())?;
    let py_s = v["seconds"].as_f64().unwrap();

    println!("k = {k} inputs of {mb} MB fp32; bytes moved (k reads + 1 write) = {:.2} GB", bytes / 1e9);
    println!("{:<28} {:>9} {:>9} {:>14}", "", "seconds", "GB/s", "x copy bound");
    for (name, s) in [("memory copy (bound)", copy_s), ("integrate, f32 accumulate", f32_s), ("integrate, f64 accumulate", f64_s), ("PyTorch load/mean/save", py_s)] {
        println!("{name:<28} {s:>9.3} {:>9.2} {:>14.2}", bytes / s / 1e9, s / copy_s);
    }
    println!("integrate (f64) vs PyTorch: {:.2}x faster", py_s / f64_s);
    Ok(())
}
