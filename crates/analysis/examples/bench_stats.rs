//! Statistics benchmark: `analysis::analyse` (paired bootstrap, sign-flip nulls, selection
//! splits, every metric) on a synthetic run of one task, with rayon pools of 1 thread and of
//! every core, side by side in one run; the two answers are checked equal (draws are seeded per
//! draw, so the thread count must not change a number).
//! `cargo run --release --example bench_stats [examples checkpoints repetitions]`; writes
//! `just bench`'s row (every core against one thread) to runs/bench/stats.summary.json.

use analysis::{analyse, Options};
use output::bench::{Reference, Row, Spread};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use records::ExampleRecord;
use std::time::Instant;

fn main() -> anyhow::Result<()> {
    let a: Vec<usize> = std::env::args().skip(1).map(|s| s.parse().unwrap()).collect();
    let (n, m, reps) =
        (a.first().copied().unwrap_or(1000), a.get(1).copied().unwrap_or(41), a.get(2).copied().unwrap_or(5));
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut rows = Vec::with_capacity(n * m);
    for e in 0..n {
        let base: f64 = rng.gen_range(-2.0..2.0);
        for t in 0..m {
            let ll: Vec<f64> =
                (0..4).map(|o| -10.0 - rng.gen::<f64>() + if o == 0 { base + t as f64 * 0.01 } else { 0.0 }).collect();
            let p = records::argmax(&ll) as u32;
            rows.push(ExampleRecord {
                step: 10 * t as u64,
                task: "bench".into(),
                example_id: format!("bench/{e}"),
                gold: 0,
                predicted: p,
                predicted_norm: p,
                correct: p == 0,
                correct_norm: p == 0,
                logliks: ll,
                lengths_chars: vec![10; 4],
                lengths_tokens: vec![3; 4],
                lengths_bytes: vec![11; 4],
                gold_is_greedy: false,
                output: p.to_string(),
                item_hash: String::new(),
                targets: Vec::new(),
                score_names: Vec::new(),
                score_values: Vec::new(),
            });
        }
    }
    let tasks = records::summarise(&rows)?;
    let opts = Options::default();
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let mut results = vec![];
    for threads in [1, cores] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build()?;
        let mut times = vec![];
        let mut out = None;
        for _ in 0..reps {
            let t = Instant::now();
            out = Some(pool.install(|| analyse(&tasks, &rows, &opts))?);
            times.push(t.elapsed().as_secs_f64());
        }
        results.push((threads, Spread::of(&times), out.unwrap()));
    }
    assert_eq!(results[0].2 .0, results[1].2 .0, "the thread count changed a result");
    println!("analyse: {n} examples x {m} checkpoints, 6 metrics, {} bootstrap draws, {} null draws, {} splits; median of {reps} (min, max)", opts.bootstrap, opts.noise_sims, opts.splits);
    for (threads, t, _) in &results {
        println!("  {threads} thread(s): {:.3} s ({:.3}, {:.3})", t.median, t.min, t.max);
    }
    println!("  speed-up with {cores} threads: {:.2}x", results[0].1.median / results[1].1.median);
    let row = Row {
        bench: "stats".into(),
        measure: format!("analyse(): {n} examples x {m} checkpoints, bootstrap + nulls + splits, {cores} threads"),
        unit: "s".into(),
        higher_is_better: false,
        ours: results[1].1,
        anchor: Some(Reference { name: "the same on 1 thread".into(), median: results[0].1.median }),
        bound: None,
        goal: None,
    };
    output::bench::write_summary(
        std::path::Path::new("runs/bench"),
        "stats",
        &[row],
        serde_json::json!({"bootstrap": opts.bootstrap, "null_draws": opts.noise_sims, "splits": opts.splits}),
    )?;
    Ok(())
}
