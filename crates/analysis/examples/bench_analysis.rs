//! Analysis benchmark: 1,000 checkpoints x 100,000 examples x 5 tasks of synthetic correctness,
//! every streaming metric, side by side with a numpy reference of the same metrics on the same
//! bits (crates/analysis/bench/analysis_reference.py), in one run, as a ratio; the two answers
//! are checked equal. Each side is timed `reps` times (median, min, max).
//! `just bench-analysis [checkpoints examples tasks reps]`; writes `just bench`'s row to
//! runs/bench/analysis.summary.json.
use analysis::stream::StreamingTask;
use anyhow::Result;
use output::bench::{Reference, Row, Spread};
use std::io::{BufReader, BufWriter, Read, Write};
use std::time::Instant;

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn main() -> Result<()> {
    let a: Vec<usize> = std::env::args().skip(1).map(|s| s.parse().unwrap()).collect();
    let (m, n, tasks, reps) = (
        a.first().copied().unwrap_or(1000),
        a.get(1).copied().unwrap_or(100_000),
        a.get(2).copied().unwrap_or(5),
        a.get(3).copied().unwrap_or(5).max(1),
    );
    let words = n.div_ceil(64);
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("bits.bin");
    // layout: [task][checkpoint][word], little-endian u64; example e learns over training at its
    // own pace: P(correct at t) = clamp(0.15 + 0.7 t / m + (e % 9 - 4) / 20)
    {
        let mut w = BufWriter::new(std::fs::File::create(&path)?);
        for task in 0..tasks {
            for t in 0..m {
                for wi in 0..words {
                    let mut word = 0u64;
                    for b in 0..64 {
                        let e = wi * 64 + b;
                        if e >= n {
                            break;
                        }
                        let p = (0.15 + 0.7 * t as f64 / m as f64 + ((e % 9) as f64 - 4.0) / 20.0).clamp(0.0, 1.0);
                        let u = (mix(((task * m + t) * n + e) as u64) >> 11) as f64 / (1u64 << 53) as f64;
                        word |= u64::from(u < p) << b;
                    }
                    w.write_all(&word.to_le_bytes())?;
                }
            }
        }
    }
    // streaming: read one checkpoint row at a time; tasks split over the cores
    let stream = || -> Result<Vec<_>> {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..tasks)
                .map(|task| {
                    let path = path.clone();
                    s.spawn(move || -> Result<_> {
                        let mut f = BufReader::with_capacity(1 << 20, std::fs::File::open(&path)?);
                        std::io::Seek::seek(f.get_mut(), std::io::SeekFrom::Start((task * m * words * 8) as u64))?;
                        let mut st = StreamingTask::new(n);
                        let mut buf = vec![0u8; words * 8];
                        let mut row = vec![0u64; words];
                        for _ in 0..m {
                            f.read_exact(&mut buf)?;
                            for (r, c) in row.iter_mut().zip(buf.chunks_exact(8)) {
                                *r = u64::from_le_bytes(c.try_into().unwrap());
                            }
                            st.push(&row);
                        }
                        Ok(st.finish())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect::<Result<Vec<_>>>()
        })
    };
    let mut rust_t = vec![];
    let mut summaries = vec![];
    for _ in 0..reps {
        let t0 = Instant::now();
        summaries = stream()?;
        rust_t.push(t0.elapsed().as_secs_f64());
    }
    let rust_s = Spread::of(&rust_t);
    let state_mb = (n * 6 + words * 16) as f64 * tasks as f64 / 1e6;

    let out = std::process::Command::new(".venv/bin/python")
        .arg("crates/analysis/bench/analysis_reference.py")
        .arg(&path)
        .args([m.to_string(), n.to_string(), tasks.to_string(), reps.to_string()])
        .output()?;
    anyhow::ensure!(out.status.success(), "reference failed: {}", String::from_utf8_lossy(&out.stderr));
    let py: serde_json::Value = serde_json::from_slice(out.stdout.trim_ascii())?;
    let py_t: Vec<f64> = py["seconds"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    let py_s = Spread::of(&py_t);
    for (i, s) in summaries.iter().enumerate() {
        let r = &py["tasks"][i];
        for (name, ours) in [
            ("mtv", s.mtv),
            ("mean_flip_rate", s.mean_flip_rate),
            ("flip_rate_p90", s.flip_rate_p90),
            ("learned_then_forgotten", s.learned_then_forgotten),
            ("detrended_sd", s.detrended_sd),
            ("largest_drop", s.largest_drop),
            ("stable_final", s.stable_final),
        ] {
            let theirs = r[name].as_f64().unwrap();
            anyhow::ensure!((ours - theirs).abs() < 1e-9, "task {i} {name}: ours {ours}, numpy {theirs}");
        }
        anyhow::ensure!(
            s.direction_changes as u64 == r["direction_changes"].as_u64().unwrap(),
            "task {i}: direction changes differ"
        );
    }
    println!(
        "{m} checkpoints x {n} examples x {tasks} tasks = {:.1e} correctness values ({:.1} GB as raw f64)",
        (m * n * tasks) as f64,
        (m * n * tasks * 8) as f64 / 1e9
    );
    println!("{:<22} {:>22} {:>22}", "", "seconds (min, max)", "memory held");
    let line = |name: &str, s: Spread, held: String| {
        println!("{name:<22} {:>22} {held:>22}", format!("{:.2} ({:.2}, {:.2})", s.median, s.min, s.max))
    };
    line("analysis (streaming)", rust_s, format!("{state_mb:.1} MB of state"));
    line("numpy reference", py_s, format!("{:.1} GB bool matrix", (m * n) as f64 / 1e9));
    println!("ratio (medians of {reps}): {:.1}x faster than numpy; results identical on all {tasks} tasks (mean flip rate {:.4}, MTV {:.5} on task 0)", py_s.median / rust_s.median, summaries[0].mean_flip_rate, summaries[0].mtv);
    let row = Row {
        bench: "analysis".into(),
        measure: format!("streaming metrics, {m} checkpoints x {n} examples x {tasks} tasks"),
        unit: "s".into(),
        higher_is_better: false,
        ours: rust_s,
        anchor: Some(Reference { name: "numpy (bits in memory)".into(), median: py_s.median }),
        bound: None,
        goal: None,
    };
    output::bench::write_summary(
        std::path::Path::new("runs/bench"),
        "analysis",
        &[row],
        serde_json::json!({"numpy_seconds": py_t, "state_mb": state_mb}),
    )?;
    Ok(())
}
