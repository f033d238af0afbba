//! Averaging throughput: `integrate::average` over k synthetic checkpoints (f32, then bf16),
//! against two bounds over the same bytes and against a PyTorch reference (load, mean, save;
//! crates/integrate/bench/), in one run, as ratios. `just bench-average [k] [mb]`, or
//! `bench_average K MB REPS`.
//!
//! The bounds, each on 1 and on 2 threads (rayon pools of that size, like ours): the memory copy
//! of the bytes averaging moves ((k + 1) x mb, buffer to buffer: read and write them all, so
//! twice the traffic of averaging), and "read k + write 1" (read k x mb, write mb: the traffic
//! of averaging itself, without any arithmetic or file system). Buffers are at most 512 MB, far
//! beyond the caches, passed over as often as needed.
//!
//! Every figure is the median of `reps` (default 5) timed repetitions after one untimed one,
//! with min and max. The inputs are read once before anything is timed, so that every contender
//! finds them in the page cache, and each contender's untimed repetition reads them again.
//! Before each repetition, outside the timing, the output is removed and `sync` writes back
//! every dirty page (so no repetition waits on an earlier one's writeback); the writeback of a
//! repetition's own output comes after its timing, except in the `average()` row, which fsyncs. Ours is timed from opening the
//! inputs to the written file (`average_file`: not staged, not synced, as PyTorch's save_file);
//! `average()` adds the folder lock, staging, fsync and rename.
//!
//! Writes `just bench`'s rows to runs/bench/average-k<k>-<mb>mb.summary.json: per dtype the
//! default (f64 accumulation, 2 threads) against PyTorch and the 2-thread memory copy.
use anyhow::{ensure, Result};
use integrate::average::{average, average_file, uniform, Accumulate, Checkpoint};
use output::bench::{Goal, Reference, Row, Spread};
use rayon::prelude::*;
use safetensors::tensor::{Dtype, TensorView};
use std::path::{Path, PathBuf};
use std::time::Instant;

const TENSORS: usize = 16;

/// The spread of `reps` timed runs of `f`, after one untimed run.
fn timed(reps: usize, mut before: impl FnMut(), mut f: impl FnMut() -> Result<()>) -> Result<Spread> {
    before();
    f()?;
    let mut s = Vec::with_capacity(reps);
    for _ in 0..reps {
        before();
        let t = Instant::now();
        f()?;
        s.push(t.elapsed().as_secs_f64());
    }
    Ok(Spread::of(&s))
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap()
}

/// k checkpoints of `mb` MB each as 16 tensors of `dtype` (odd-looking weights of a trained
/// model's scale, different in every input).
fn make_inputs(dir: &Path, k: usize, mb: usize, dtype: Dtype) -> Result<Vec<PathBuf>> {
    let size = dtype.bitsize() / 8;
    let per = mb * (1 << 20) / size / TENSORS;
    let mut paths = Vec::new();
    for i in 0..k {
        let data: Vec<Vec<u8>> = (0..TENSORS)
            .into_par_iter()
            .map(|t| {
                let mut x = (i as u64 * 1_000_003 + t as u64 * 7919) | 1;
                let mut out = Vec::with_capacity(per * size);
                for _ in 0..per {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let v = ((x >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 0.1;
                    match dtype {
                        Dtype::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
                        _ => out.extend_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
                    }
                }
                out
            })
            .collect();
        let views: Vec<(String, TensorView)> = data
            .iter()
            .enumerate()
            .map(|(t, b)| (format!("layer.{t}.weight"), TensorView::new(dtype, vec![per], b).unwrap()))
            .collect();
        let p = dir.join(format!("c{i}.safetensors"));
        safetensors::serialize_to_file(views, None, &p)?;
        paths.push(p);
    }
    Ok(paths)
}

/// Reads every input once, so that it is in the page cache.
fn warm(paths: &[PathBuf]) -> Result<()> {
    for p in paths {
        std::io::copy(&mut std::fs::File::open(p)?, &mut std::io::sink())?;
    }
    Ok(())
}

fn same_bytes(a: &Path, b: &Path) -> Result<bool> {
    let (fa, fb) = (std::fs::File::open(a)?, std::fs::File::open(b)?);
    // SAFETY: both files are ours and not written meanwhile
    let (ma, mb) = unsafe { (memmap2::Mmap::map(&fa)?, memmap2::Mmap::map(&fb)?) };
    Ok(ma[..] == mb[..])
}

/// The two bounds on pools of 1 and 2 threads, each (median, min, max): the copy of the
/// (k + 1) x mb bytes averaging moves, buffer to buffer (read and write them all); "read k,
/// write 1", the traffic of averaging itself. Buffers of at most 512 MB, far beyond the caches,
/// passed over as often as needed, in 1 MiB pieces over the pool.
fn bounds(k: usize, mb: usize, reps: usize, one: &rayon::ThreadPool, two: &rayon::ThreadPool) -> Result<[Spread; 4]> {
    let buf = (mb << 20).min(512 << 20);
    let src = vec![1u8; buf];
    let mut dst = vec![0u8; buf];
    let copy = |p: &rayon::ThreadPool, dst: &mut [u8]| {
        timed(
            reps,
            || {},
            || {
                let mut left = (k + 1) * (mb << 20);
                while left > 0 {
                    let n = left.min(buf);
                    p.install(|| {
                        dst[..n]
                            .par_chunks_mut(1 << 20)
                            .zip(src[..n].par_chunks(1 << 20))
                            .for_each(|(d, s)| d.copy_from_slice(std::hint::black_box(s)))
                    });
                    left -= n;
                }
                Ok(())
            },
        )
    };
    let copy1 = copy(one, &mut dst)?;
    let copy2 = copy(two, &mut dst)?;
    // read k x mb bytes (the source buffer again and again, folded with xor so that nothing is
    // optimised away), then write mb bytes
    let mut stream = |p: &rayon::ThreadPool| {
        timed(
            reps,
            || {},
            || {
                let mut left = k * (mb << 20);
                let mut fold = 0u64;
                while left > 0 {
                    let n = left.min(buf);
                    fold ^= p.install(|| {
                        src[..n]
                            .par_chunks(1 << 20)
                            .map(|c| c.chunks_exact(8).fold(0u64, |a, x| a ^ u64::from_le_bytes(x.try_into().unwrap())))
                            .reduce(|| 0, |a, b| a ^ b)
                    });
                    left -= n;
                }
                let mut left = mb << 20;
                while left > 0 {
                    let n = left.min(buf);
                    p.install(|| dst[..n].par_chunks_mut(1 << 20).for_each(|d| d.fill(fold as u8)));
                    left -= n;
                }
                std::hint::black_box(&dst);
                Ok(())
            },
        )
    };
    let stream1 = stream(one)?;
    let stream2 = stream(two)?;
    Ok([copy1, copy2, stream1, stream2])
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let k: usize = args.get(1).map_or(Ok(4), |s| s.parse())?;
    let mb: usize = args.get(2).map_or(Ok(256), |s| s.parse())?;
    let reps: usize = args.get(3).map_or(Ok(5), |s| s.parse())?;
    ensure!(k >= 1 && mb >= 1 && reps >= 1, "usage: bench_average [k] [mb] [reps]");
    let bytes = (k + 1) as f64 * (mb << 20) as f64;
    let (one, two) = (pool(1), pool(2));
    let mut headline = Vec::new();

    println!(
        "k = {k} inputs of {mb} MB; bytes moved (k reads + 1 write) = {:.2} GB; median of {reps} (min, max)",
        bytes / 1e9
    );
    for dtype in [Dtype::F32, Dtype::BF16] {
        let dir = tempfile::tempdir()?;
        let paths = make_inputs(dir.path(), k, mb, dtype)?;
        warm(&paths)?;
        // the bounds measured now, beside the contenders they bound
        let [copy1, copy2, stream1, stream2] = bounds(k, mb, reps, &one, &two)?;
        let out = dir.path().join("avg.safetensors");
        let remove = |p: &Path| {
            let _ = std::fs::remove_file(p);
        };
        // before each repetition: the output removed and every dirty page written back, so that
        // no repetition waits on the writeback of an earlier one
        let settle = |p: &Path| {
            remove(p);
            let _ = std::process::Command::new("sync").status();
        };
        let ours = |p: &rayon::ThreadPool, acc: Accumulate, to: &Path| {
            timed(
                reps,
                || settle(to),
                || {
                    p.install(|| {
                        let inputs: Vec<Checkpoint> =
                            paths.iter().map(|p| Checkpoint::open(p)).collect::<Result<_>>()?;
                        average_file(&inputs, &uniform(k), acc, to)
                    })
                },
            )
        };
        let seq_out = dir.path().join("seq.safetensors");
        let mut rows = Vec::new();
        let mut identical = true;
        for acc in [Accumulate::F64, Accumulate::F32] {
            let name = format!(
                "integrate, {} accumulate{}",
                if acc == Accumulate::F64 { "f64" } else { "f32" },
                if acc == Accumulate::F64 { " (default)" } else { "" }
            );
            let s1 = ours(&one, acc, &seq_out)?;
            let s2 = ours(&two, acc, &out)?;
            identical &= same_bytes(&seq_out, &out)?;
            rows.push((name.clone(), "1".to_string(), s1, copy1.median, stream1.median));
            rows.push((name, "2".to_string(), s2, copy2.median, stream2.median));
        }
        remove(&seq_out);
        // the whole library call: folder lock, staging, fsync, rename
        let durable = timed(
            reps,
            || settle(&out),
            || {
                two.install(|| {
                    let inputs: Vec<Checkpoint> = paths.iter().map(|p| Checkpoint::open(p)).collect::<Result<_>>()?;
                    average(&inputs, &uniform(k), Accumulate::F64, &out).map(|_| ())
                })
            },
        )?;
        rows.push(("average(): + staging, fsync".to_string(), "2".to_string(), durable, copy2.median, stream2.median));
        remove(&out);

        let py_out = dir.path().join("py.safetensors");
        let py = std::process::Command::new(".venv/bin/python")
            .arg("crates/integrate/bench/average_reference.py")
            .arg(reps.to_string())
            .arg(&py_out)
            .args(&paths)
            .output()?;
        ensure!(py.status.success(), "reference failed: {}", String::from_utf8_lossy(&py.stderr));
        let v: serde_json::Value = serde_json::from_slice(py.stdout.trim_ascii())?;
        let ps: Vec<f64> = v["seconds"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        let py_s = Spread::of(&ps);
        rows.push((
            "PyTorch load/mean/save".to_string(),
            format!("{}", v["threads"]),
            py_s,
            copy2.median,
            stream2.median,
        ));

        println!();
        println!("{dtype:?} inputs");
        println!(
            "{:<36} {:>7} {:>26} {:>7} {:>7} {:>7}",
            "", "threads", "seconds (min, max)", "GB/s", "x copy", "x read"
        );
        let line =
            |name: &str, th: &str, Spread { median: m, min: lo, max: hi, .. }: Spread, copy: f64, stream: f64| {
                println!(
                    "{name:<36} {th:>7} {:>26} {:>7.2} {:>7.2} {:>7.2}",
                    format!("{m:.3} ({lo:.3}, {hi:.3})"),
                    bytes / m / 1e9,
                    m / copy,
                    m / stream
                )
            };
        line("memory copy (bound)", "1", copy1, copy1.median, stream1.median);
        line("memory copy (bound)", "2", copy2, copy2.median, stream2.median);
        line("read k + write 1 (tighter bound)", "1", stream1, copy1.median, stream1.median);
        line("read k + write 1 (tighter bound)", "2", stream2, copy2.median, stream2.median);
        for (name, th, s, copy, stream) in &rows {
            line(name, th, *s, *copy, *stream);
        }
        let f64_2 = rows[1].2.median;
        println!("f64 accumulate: time on 1 thread / on 2: {:.2}; PyTorch / ours on 2: {:.1}; 1- and 2-thread outputs identical: {}", rows[0].2.median / f64_2, py_s.median / f64_2, if identical { "yes" } else { "NO" });
        ensure!(identical, "the 1- and 2-thread outputs differ");
        headline.push(Row {
            bench: format!("average-k{k}-{mb}mb"),
            measure: format!("averaging {k} x {mb} MB {dtype:?}, f64 accumulate, 2 threads"),
            unit: "s".into(),
            higher_is_better: false,
            ours: rows[1].2,
            anchor: Some(Reference { name: "PyTorch load/mean/save".into(), median: py_s.median }),
            bound: Some(Reference { name: "memory copy, 2 threads".into(), median: copy2.median }),
            goal: Some(Goal::WithinBound(2.0)),
        });
    }
    output::bench::write_summary(
        Path::new("runs/bench"),
        &format!("average-k{k}-{mb}mb"),
        &headline,
        serde_json::json!({"k": k, "mb": mb, "reps": reps}),
    )?;
    println!("\nx copy, x read: median time over the median time of the copy bound, of the read-k-write-1 bound, on as many threads (PyTorch and average(): 2)");
    Ok(())
}
