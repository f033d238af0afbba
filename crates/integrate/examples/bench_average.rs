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
//! Real checkpoint size (`--sharded-mb N`: default 512 with k = 4, as `just bench` runs it, and
//! 0, none, otherwise; BENCHMARKS.md's 2 GB row is `bench_average 4 256 5 --sharded-mb 2048`,
//! about 4 minutes on 2 busy cores with 12 GB of temporary files): 4 inputs of N MB of bf16,
//! each a Hugging Face folder of 2 shards with an index, averaged in a child process (on every
//! core) by `average_file` (one file, not synced, as the rows above) and by `average_with` into
//! shards of N/2 MB with an index (folder lock, staging, fsync, rename). The child reports its
//! time and its peak RSS: VmHWM, which counts the pages of the memory-mapped inputs it touched
//! (page cache, shared and clean), and the peak of its anonymous memory (sampled every 5 ms),
//! the memory it holds itself. Each repetition runs the bounds (the memory copy of the
//! (k + 1) x N MB and read k x N + write N, on 2 threads; N MB written to a file and synced)
//! and the two calls in turn, so that all see the same state of a shared host; then `integrate
//! average` itself runs once on the same folders (it also hashes its inputs and outputs for
//! integration.json) and its output is checked against the library's, tensor by tensor. The
//! inputs live in a temporary folder, deleted afterwards.
//!
//! Writes `just bench`'s rows to runs/bench/average-k<k>-<mb>mb.summary.json: per dtype the
//! default (f64 accumulation, 2 threads) against PyTorch and the 2-thread memory copy, and the
//! sharded row's time against the memory copy and its peak anonymous RSS.
use anyhow::{ensure, Result};
use integrate::average::{average, average_file, average_with, uniform, Accumulate, Checkpoint, Layout};
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
                copy_bytes(p, &src, dst, (k + 1) * (mb << 20));
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
                read_then_write(p, &src, &mut dst, k * (mb << 20), mb << 20);
                Ok(())
            },
        )
    };
    let stream1 = stream(one)?;
    let stream2 = stream(two)?;
    Ok([copy1, copy2, stream1, stream2])
}

/// The memory-copy bound: `total` bytes copied from `src` to `dst` (equal lengths, reused in
/// chunks of that size) on `pool`.
fn copy_bytes(pool: &rayon::ThreadPool, src: &[u8], dst: &mut [u8], total: usize) {
    let mut left = total;
    while left > 0 {
        let n = left.min(src.len());
        pool.install(|| {
            dst[..n]
                .par_chunks_mut(1 << 20)
                .zip(src[..n].par_chunks(1 << 20))
                .for_each(|(d, s)| d.copy_from_slice(std::hint::black_box(s)))
        });
        left -= n;
    }
}

/// The streaming bound of an average: `read` bytes read (`src` again and again, folded with xor
/// so that nothing is optimised away), then `write` bytes written into `dst`, on `pool`.
fn read_then_write(pool: &rayon::ThreadPool, src: &[u8], dst: &mut [u8], read: usize, write: usize) {
    let (mut left, mut fold) = (read, 0u64);
    while left > 0 {
        let n = left.min(src.len());
        fold ^= pool.install(|| {
            src[..n]
                .par_chunks(1 << 20)
                .map(|c| c.chunks_exact(8).fold(0u64, |a, x| a ^ u64::from_le_bytes(x.try_into().unwrap())))
                .reduce(|| 0, |a, b| a ^ b)
        });
        left -= n;
    }
    let mut left = write;
    while left > 0 {
        let n = left.min(dst.len());
        pool.install(|| dst[..n].par_chunks_mut(1 << 20).for_each(|d| d.fill(fold as u8)));
        left -= n;
    }
    std::hint::black_box(&dst);
}

fn main() -> Result<()> {
    let mut args: Vec<String> = std::env::args().collect();
    if args.get(1).is_some_and(|a| a == CHILD) {
        return child_average(&args[2..]);
    }
    let sharded_mb: Option<usize> = match args.iter().position(|a| a == "--sharded-mb") {
        Some(i) => {
            let v = args.get(i + 1).map(|s| s.parse()).transpose()?;
            args.drain(i..(i + 2).min(args.len()));
            Some(v.ok_or_else(|| anyhow::anyhow!("--sharded-mb needs a number of MB"))?)
        }
        None => None,
    };
    let k: usize = args.get(1).map_or(Ok(4), |s| s.parse())?;
    let mb: usize = args.get(2).map_or(Ok(256), |s| s.parse())?;
    let reps: usize = args.get(3).map_or(Ok(5), |s| s.parse())?;
    ensure!(k >= 1 && mb >= 1 && reps >= 1, "usage: bench_average [k] [mb] [reps] [--sharded-mb N]");
    // the row at 2 GB an input takes about 4 minutes on 2 busy cores and 12 GB of disk: by hand
    let sharded_mb = sharded_mb.unwrap_or(if k == 4 { 512 } else { 0 });
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
    let mut sharded = serde_json::Value::Null;
    if sharded_mb > 0 {
        let (rows, details) = sharded_row(&format!("average-k{k}-{mb}mb"), sharded_mb, reps, &two)?;
        headline.extend(rows);
        sharded = details;
    }
    output::bench::write_summary(
        Path::new("runs/bench"),
        &format!("average-k{k}-{mb}mb"),
        &headline,
        serde_json::json!({"k": k, "mb": mb, "reps": reps, "sharded_mb": sharded_mb, "sharded": sharded}),
    )?;
    println!("\nx copy, x read: median time over the median time of the copy bound, of the read-k-write-1 bound, on as many threads (PyTorch and average(): 2)");
    Ok(())
}

/// The hidden first argument that makes this binary the averaging child of the sharded row.
const CHILD: &str = "--child-average";

/// A field of /proc/self/status in kB (VmHWM, RssAnon, ...).
fn status_kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// The child, on the default pool (every core): with MODE `durable`, `average_with` of the input
/// folders into the folder OUT in shards of SHARD bytes (lock, staging, fsync, rename); with
/// `core`, `average_file` into the one file OUT (neither staged nor synced, as the rows above).
/// Timed from opening the inputs to the written output; prints `{"seconds", "vm_hwm_kb",
/// "peak_rss_anon_kb"}`.
fn child_average(args: &[String]) -> Result<()> {
    ensure!(args.len() >= 4, "usage: bench_average {CHILD} durable|core SHARD_BYTES OUT INPUT...");
    let durable = args[0] == "durable";
    let shard: u64 = args[1].parse()?;
    let out = PathBuf::from(&args[2]);
    let paths: Vec<PathBuf> = args[3..].iter().map(PathBuf::from).collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(status_kb("RssAnon"));
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            peak.max(status_kb("RssAnon"))
        })
    };
    let t = Instant::now();
    let inputs: Vec<Checkpoint> = paths.iter().map(|p| Checkpoint::open(p)).collect::<Result<_>>()?;
    if durable {
        let layout = Layout { dtype: None, max_shard_size: shard };
        average_with(&inputs, &uniform(inputs.len()), Accumulate::F64, &layout, &out)?;
    } else {
        average_file(&inputs, &uniform(inputs.len()), Accumulate::F64, &out)?;
    }
    let seconds = t.elapsed().as_secs_f64();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak_anon = sampler.join().unwrap();
    println!(
        "{}",
        serde_json::json!({"seconds": seconds, "vm_hwm_kb": status_kb("VmHWM"), "peak_rss_anon_kb": peak_anon})
    );
    Ok(())
}

/// Input `i` as a Hugging Face folder of `mb` MB of bf16: 16 tensors in 2 shards of 8 and an
/// index, written shard by shard (at most half the checkpoint in memory).
fn make_sharded_input(dir: &Path, i: usize, mb: usize) -> Result<PathBuf> {
    let folder = dir.join(format!("step_{i}"));
    std::fs::create_dir_all(&folder)?;
    let per = mb * (1 << 20) / 2 / TENSORS;
    let mut weight_map = serde_json::Map::new();
    for shard in 0..2 {
        let file = format!("model-{:05}-of-00002.safetensors", shard + 1);
        let tensors: Vec<usize> = (shard * TENSORS / 2..(shard + 1) * TENSORS / 2).collect();
        let data: Vec<Vec<u8>> = tensors
            .par_iter()
            .map(|&t| {
                let mut x = (i as u64 * 1_000_003 + t as u64 * 7919) | 1;
                let mut out = Vec::with_capacity(per * 2);
                for _ in 0..per {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let v = ((x >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 0.1;
                    out.extend_from_slice(&half::bf16::from_f64(v).to_le_bytes());
                }
                out
            })
            .collect();
        let views: Vec<(String, TensorView)> = tensors
            .iter()
            .zip(&data)
            .map(|(t, b)| (format!("model.layers.{t}.weight"), TensorView::new(Dtype::BF16, vec![per], b).unwrap()))
            .collect();
        for (name, _) in &views {
            weight_map.insert(name.clone(), serde_json::json!(file));
        }
        safetensors::serialize_to_file(views, None, &folder.join(&file))?;
    }
    let index = serde_json::json!({"metadata": {"total_size": per * 2 * TENSORS}, "weight_map": weight_map});
    std::fs::write(folder.join("model.safetensors.index.json"), serde_json::to_string_pretty(&index)?)?;
    std::fs::write(folder.join("config.json"), "{\"model_type\": \"llama\"}")?;
    Ok(folder)
}

/// Peak RSS of a child in kB, from wait4's rusage, and its exit status.
fn wait_with_rusage(child: &std::process::Child) -> Result<(i32, u64)> {
    let mut status = 0;
    // SAFETY: rusage is plain data, filled by the kernel; the child is ours and not yet reaped
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    ensure!(pid > 0, "wait4 failed: {}", std::io::Error::last_os_error());
    Ok((status, usage.ru_maxrss as u64))
}

/// The sharded row (see the module doc): its headline rows and details.
fn sharded_row(bench: &str, mb: usize, reps: usize, two: &rayon::ThreadPool) -> Result<(Vec<Row>, serde_json::Value)> {
    let k = 4;
    let started = Instant::now();
    let dir = tempfile::tempdir()?;
    let folders: Vec<PathBuf> = (0..k).map(|i| make_sharded_input(dir.path(), i, mb)).collect::<Result<_>>()?;
    let shard_bytes = (mb as u64) << 19; // the output in shards of mb / 2 MB, as the inputs
    let files: Vec<PathBuf> = folders
        .iter()
        .flat_map(|f| (1..=2).map(move |s| f.join(format!("model-{s:05}-of-00002.safetensors"))))
        .collect();
    warm(&files)?;
    let generated = started.elapsed().as_secs_f64();
    let out = dir.path().join("avg");
    let settle = || {
        let _ = std::fs::remove_dir_all(&out);
        let _ = std::process::Command::new("sync").status();
    };
    let bytes = (k + 1) as f64 * (mb << 20) as f64;
    let buf = (mb << 20).min(512 << 20);
    let src = vec![1u8; buf];
    let mut dst = vec![0u8; buf];
    let copy = |dst: &mut [u8]| {
        let t = Instant::now();
        copy_bytes(two, &src, dst, (k + 1) * (mb << 20));
        t.elapsed().as_secs_f64()
    };
    let read_write = |dst: &mut [u8]| {
        let t = Instant::now();
        read_then_write(two, &src, dst, k * (mb << 20), mb << 20);
        t.elapsed().as_secs_f64()
    };
    // the output's bytes written to a file and synced: what the durable call cannot beat
    let disk_file = dir.path().join("disk.bin");
    let disk = |dst: &[u8]| -> Result<f64> {
        let _ = std::fs::remove_file(&disk_file);
        let _ = std::process::Command::new("sync").status();
        let t = Instant::now();
        let mut f = std::fs::File::create(&disk_file)?;
        let mut left = mb << 20;
        while left > 0 {
            let n = left.min(buf);
            std::io::Write::write_all(&mut f, &dst[..n])?;
            left -= n;
        }
        f.sync_all()?;
        let s = t.elapsed().as_secs_f64();
        std::fs::remove_file(&disk_file)?;
        Ok(s)
    };
    let exe = std::env::current_exe()?;
    let core_out = dir.path().join("core.safetensors");
    let ours = |mode: &str, out: &Path| -> Result<serde_json::Value> {
        let o = std::process::Command::new(&exe)
            .arg(CHILD)
            .arg(mode)
            .arg(shard_bytes.to_string())
            .arg(out)
            .args(&folders)
            .output()?;
        ensure!(o.status.success(), "the averaging child failed: {}", String::from_utf8_lossy(&o.stderr));
        Ok(serde_json::from_slice(o.stdout.trim_ascii())?)
    };
    let (mut t_copy, mut t_rw, mut t_disk, mut t_core, mut t_ours) = (vec![], vec![], vec![], vec![], vec![]);
    let (mut hwm, mut anon) = (vec![], vec![]);
    // one untimed round, then `reps` rounds of the bounds and the two calls in turn, each call
    // after a settle (its output removed, dirty pages written back)
    for rep in 0..=reps {
        let c = copy(&mut dst);
        let r = read_write(&mut dst);
        let d = disk(&dst)?;
        let _ = std::fs::remove_file(&core_out);
        settle();
        let core = ours("core", &core_out)?;
        settle();
        let v = ours("durable", &out)?;
        if rep > 0 {
            t_copy.push(c);
            t_rw.push(r);
            t_disk.push(d);
            t_core.push(core["seconds"].as_f64().unwrap());
            t_ours.push(v["seconds"].as_f64().unwrap());
            for m in [&core, &v] {
                hwm.push(m["vm_hwm_kb"].as_f64().unwrap() / 1024.0);
                anon.push(m["peak_rss_anon_kb"].as_f64().unwrap() / 1024.0);
            }
        }
    }
    let _ = std::fs::remove_file(&core_out);
    // the output is what it should be: all 16 tensors, in shards named and indexed as
    // transformers names them
    let avg = Checkpoint::open(&out)?;
    ensure!(avg.weight_map.len() == TENSORS && avg.index.is_some(), "the sharded output is incomplete");
    // the command itself, once: with the sha256 of every input and output for integration.json
    // (the library's output kept, to compare)
    let _ = std::process::Command::new("sync").status();
    let cli_out = dir.path().join("cli");
    let t = Instant::now();
    let child = std::process::Command::new("target/release/integrate")
        .arg(run::Method::Average.name()) // the subcommand is named after the method
        .args(["--window", "4", "--out-shard-size", &shard_bytes.to_string()])
        .args(&folders)
        .arg("-o")
        .arg(&cli_out)
        .stdout(std::process::Stdio::null())
        .spawn()?;
    let (status, cli_rss_kb) = wait_with_rusage(&child)?;
    let cli_s = t.elapsed().as_secs_f64();
    ensure!(status == 0, "integrate average failed (status {status})");
    let same = tensors_equal(&out, &cli_out)?;
    ensure!(same, "the command's output differs from the library's");
    let (copy_s, rw_s, ours_s) = (Spread::of(&t_copy), Spread::of(&t_rw), Spread::of(&t_ours));
    let (disk_s, core_s) = (Spread::of(&t_disk), Spread::of(&t_core));
    let (hwm_s, anon_s) = (Spread::of(&hwm), Spread::of(&anon));
    println!();
    println!(
        "4 inputs of {mb} MB BF16, each a folder of 2 shards with an index (into 2 shards of {} MB with an index); bounds and calls interleaved, median of {reps} (min, max); inputs generated in {generated:.0} s",
        mb / 2
    );
    println!("{:<48} {:>26} {:>7} {:>7}", "", "seconds (min, max)", "GB/s", "x copy");
    let line = |name: &str, s: Spread| {
        println!(
            "{name:<48} {:>26} {:>7.2} {:>7.2}",
            format!("{:.3} ({:.3}, {:.3})", s.median, s.min, s.max),
            bytes / s.median / 1e9,
            s.median / copy_s.median
        )
    };
    line("memory copy (bound), 2 threads", copy_s);
    line("read k + write 1 (tighter bound), 2 threads", rw_s);
    line(&format!("write {mb} MB to a file + fsync (disk)"), disk_s);
    line("average_file(): one file, not synced", core_s);
    line("average_with(): shards, lock, staging, fsync", ours_s);
    line("integrate average (+ sha256 of 5 x data), once", Spread::of(&[cli_s]));
    println!(
        "peak RSS of the calls: anonymous (the process's own memory, sampled every 5 ms) {:.1} MB (min {:.1}); VmHWM {:.0} MB, which counts the touched pages of the memory-mapped inputs ({} MB of page cache); integrate average: ru_maxrss {:.0} MB",
        anon_s.max,
        anon_s.min,
        hwm_s.max,
        k * mb,
        cli_rss_kb as f64 / 1024.0
    );
    let rows = vec![
        Row {
            bench: bench.into(),
            measure: format!("averaging 4 x {mb} MB BF16 sharded folders, f64 accumulate, 2 threads"),
            unit: "s".into(),
            higher_is_better: false,
            ours: core_s,
            anchor: None,
            bound: Some(Reference { name: "memory copy, 2 threads, interleaved".into(), median: copy_s.median }),
            goal: Some(Goal::WithinBound(2.0)),
        },
        Row {
            bench: bench.into(),
            measure: format!(
                "the same into shards, with lock, staging, fsync (a {mb} MB file written and synced: {:.2} s)",
                disk_s.median
            ),
            unit: "s".into(),
            higher_is_better: false,
            ours: ours_s,
            anchor: None,
            bound: Some(Reference { name: "memory copy, 2 threads, interleaved".into(), median: copy_s.median }),
            goal: None,
        },
        Row {
            bench: bench.into(),
            measure: format!("peak anonymous RSS averaging 4 x {mb} MB BF16 sharded (mapped inputs not counted)"),
            unit: "MB".into(),
            higher_is_better: false,
            ours: anon_s,
            anchor: None,
            bound: None,
            goal: None,
        },
    ];
    let details = serde_json::json!({
        "mb": mb, "inputs": k, "out_shard_bytes": shard_bytes, "generate_s": generated,
        "copy_s": copy_s, "read_write_s": rw_s, "disk_write_fsync_s": disk_s, "average_file_s": core_s,
        "average_with_s": ours_s, "vm_hwm_mb": hwm_s, "peak_rss_anon_mb": anon_s,
        "cli_s": cli_s, "cli_max_rss_mb": cli_rss_kb as f64 / 1024.0,
    });
    Ok((rows, details))
}

/// Whether two checkpoints hold the same tensors, byte for byte (each shard mapped once).
fn tensors_equal(a: &Path, b: &Path) -> Result<bool> {
    let (ca, cb) = (Checkpoint::open(a)?, Checkpoint::open(b)?);
    if ca.weight_map.keys().ne(cb.weight_map.keys()) {
        return Ok(false);
    }
    let maps = |root: &Path, c: &Checkpoint| -> Result<std::collections::HashMap<String, memmap2::Mmap>> {
        let mut m = std::collections::HashMap::new();
        for f in c.weight_map.values() {
            if !m.contains_key(f) {
                // SAFETY: our own output files, not written meanwhile
                m.insert(f.clone(), unsafe { memmap2::Mmap::map(&std::fs::File::open(root.join(f))?)? });
            }
        }
        Ok(m)
    };
    let (ma, mb) = (maps(a, &ca)?, maps(b, &cb)?);
    for name in ca.weight_map.keys() {
        let sa = safetensors::SafeTensors::deserialize(&ma[&ca.weight_map[name]])?;
        let sb = safetensors::SafeTensors::deserialize(&mb[&cb.weight_map[name]])?;
        if sa.tensor(name)?.data() != sb.tensor(name)?.data() {
            return Ok(false);
        }
    }
    Ok(true)
}
