//! Training-throughput benchmark, in one run: this machine's matmul peak per dtype (fp32, bf16)
//! on the model's own GEMM shapes; `lm`'s training step in fp32 and in bf16 mixed precision; the
//! same model and step in PyTorch eager fp32 and under PyTorch's bf16 autocast
//! (crates/lm/bench/train_reference.py, same venv, same token stream), each also with lm's
//! malloc settings (`lm::heap`, through glibc's environment variables), so that the gain of
//! the heap settings is told apart from the rest. Every figure is the
//! median of `--reps` repetitions of `--steps` timed steps (min, max beside it); MFU is against
//! the peak of the dtype the step computes in. Writes runs/bench/train.json and train.csv.
//!
//! `just bench-train` (or `cargo run --release -p lm --example bench_train -- --config ...`).

use anyhow::{Context, Result};
use clap::Parser;
use std::path::{Path, PathBuf};
use std::time::Instant;

use lm::config::{Config, Precision};
use lm::model::Gpt;
use lm::optim::AdamW;
use lm::tch::{nn::VarStore, Device, Kind};
use output::bench::{Goal, Reference, Row, Spread};

mod common;
use lm::train::{tokenizer_for, TokenData};

#[derive(Parser)]
struct Args {
    #[arg(long, default_value = "configs/default.toml")]
    config: PathBuf,
    /// Timed steps per repetition (after 3 untimed warm-up steps).
    #[arg(long, default_value_t = 10)]
    steps: u64,
    /// Repetitions; each figure is their median.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    #[arg(long, default_value = ".venv/bin/python")]
    python: PathBuf,
    /// Time only lm's step in this precision (fp32 or bf16) and print its tokens/s: no peaks,
    /// no PyTorch, no files (for a profiler: `just profile train`).
    #[arg(long)]
    only: Option<String>,
}

/// The model's training GEMMs as (M, K, N): tokens x d_model into qkv, wo, gate_up, down and
/// the output layer.
fn gemm_shapes(cfg: &Config) -> Vec<(i64, i64, i64)> {
    let (m, d, f, v) = (cfg.train.batch_size * cfg.model.context, cfg.model.d_model, cfg.model.d_ff, cfg.data.vocab_size);
    vec![(m, d, 3 * d), (m, d, d), (m, d, 2 * f), (m, f, d), (m, d, v)]
}

struct Timed {
    /// tokens/s per repetition
    rates: Vec<f64>,
    /// share of the time in forward, backward, optimizer
    split: (f64, f64, f64),
}

/// `reps` repetitions of `steps` training steps of `lm` in `precision`, from the same init.
fn time_lm(cfg: &Config, data: &TokenData, precision: Precision, steps: u64, reps: usize) -> Timed {
    let device = Device::Cpu;
    tch::manual_seed(cfg.init_seed() as i64);
    let vs = VarStore::new(device);
    let mut model = Gpt::new(&vs.root(), &cfg.model, cfg.data.vocab_size);
    model.set_train_compute(precision.kind());
    let t = &cfg.train;
    let mut opt = AdamW::new(&vs, t.beta1, t.beta2, t.eps, t.weight_decay);
    let (mut fwd, mut bwd, mut upd) = (0.0, 0.0, 0.0);
    let mut rates = Vec::new();
    let tokens = (steps * (t.batch_size * cfg.model.context) as u64) as f64;
    let mut step = 0;
    for rep in 0..=reps {
        let began = Instant::now();
        // repetition 0 is the untimed warm-up (3 steps)
        for _ in 0..if rep == 0 { 3 } else { steps } {
            let (x, y) = data.batch(cfg, step, device);
            let t0 = Instant::now();
            let loss = model.loss(&x, &y, true);
            let t1 = Instant::now();
            loss.backward();
            let t2 = Instant::now();
            opt.clip_grad_norm(t.grad_clip);
            opt.step(cfg.lr_at(step));
            let _ = f64::try_from(&loss).unwrap();
            let t3 = Instant::now();
            if rep > 0 {
                fwd += (t1 - t0).as_secs_f64();
                bwd += (t2 - t1).as_secs_f64();
                upd += (t3 - t2).as_secs_f64();
            }
            step += 1;
        }
        if rep > 0 {
            rates.push(tokens / began.elapsed().as_secs_f64());
        }
    }
    let total = fwd + bwd + upd;
    Timed { rates, split: (fwd / total, bwd / total, upd / total) }
}

/// The PyTorch reference, eager fp32 or under bf16 autocast.
fn time_pytorch(args: &Args, cache: &Path, bf16: bool, same_heap: bool) -> Result<(Timed, serde_json::Value)> {
    let mut cmd = std::process::Command::new(&args.python);
    if same_heap {
        // lm::heap's malloc settings, through glibc's environment variables
        cmd.env("MALLOC_MMAP_THRESHOLD_", (1u64 << 30).to_string()).env("MALLOC_TRIM_THRESHOLD_", (1u64 << 30).to_string());
    }
    cmd.args(["crates/lm/bench/train_reference.py", "--config"]).arg(&args.config).arg("--tokens").arg(cache);
    cmd.args(["--steps", &args.steps.to_string(), "--reps", &args.reps.to_string()]);
    if bf16 {
        cmd.arg("--bf16");
    }
    let out = cmd.output().with_context(|| format!("cannot run {}", args.python.display()))?;
    anyhow::ensure!(out.status.success(), "reference failed: {}", String::from_utf8_lossy(&out.stderr));
    let py: serde_json::Value = serde_json::from_slice(out.stdout.trim_ascii()).context("reference output is not JSON")?;
    let rates: Vec<f64> = py["reps_tokens_per_s"].as_array().context("reps_tokens_per_s")?.iter().filter_map(|v| v.as_f64()).collect();
    let w = py["forward_s"].as_f64().unwrap_or(0.0) + py["backward_s"].as_f64().unwrap_or(0.0) + py["optimizer_s"].as_f64().unwrap_or(0.0);
    let share = |k: &str| py[k].as_f64().unwrap_or(0.0) / w.max(1e-12);
    Ok((Timed { rates, split: (share("forward_s"), share("backward_s"), share("optimizer_s")) }, py))
}

fn main() -> Result<()> {
    let args = Args::parse();
    lm::heap::keep_freed_memory();
    let cfg = Config::load(&args.config)?;
    let tok = tokenizer_for(&cfg)?;
    let data = TokenData::load(&cfg, &tok)?;
    let flops = cfg.train_flops_per_token();
    if let Some(only) = &args.only {
        let precision = match only.as_str() {
            "fp32" => Precision::Fp32,
            "bf16" => Precision::Bf16,
            other => anyhow::bail!("--only fp32 or bf16, not {other}"),
        };
        let t = time_lm(&cfg, &data, precision, args.steps, args.reps);
        let s = Spread::of(&t.rates);
        println!("lm {only}: {:.0} tokens/s ({:.0}, {:.0}), {} reps x {} steps", s.median, s.min, s.max, args.reps, args.steps);
        return Ok(());
    }

    // peaks first, in this run
    let shapes = gemm_shapes(&cfg);
    let mut peak = std::collections::BTreeMap::new();
    println!("matmul GFLOP/s on the model's GEMM shapes (M x K x N), median of {}", args.reps);
    for (name, kind) in [("fp32", Kind::Float), ("bf16", Kind::BFloat16)] {
        let (per, best) = common::peak_gflops(kind, &shapes, args.reps);
        let cells: Vec<String> = shapes.iter().zip(&per).map(|((m, k, n), g)| format!("{m}x{k}x{n} {g:.0}")).collect();
        println!("  {name}: {}", cells.join(", "));
        peak.insert(name, best);
    }
    println!("peak (best shape): fp32 {:.0}, bf16 {:.0} GFLOP/s (bf16 / fp32 {:.2}x)", peak["fp32"], peak["bf16"], peak["bf16"] / peak["fp32"]);

    let cache = tok.cache_path(&cfg.data.corpus.join("train.txt"))?;
    let rows: Vec<(&str, &str, Timed)> = vec![
        ("lm (tch) fp32", "fp32", time_lm(&cfg, &data, Precision::Fp32, args.steps, args.reps)),
        ("lm (tch) bf16 mixed", "bf16", time_lm(&cfg, &data, Precision::Bf16, args.steps, args.reps)),
        ("PyTorch eager fp32", "fp32", time_pytorch(&args, &cache, false, false)?.0),
        ("PyTorch bf16 autocast", "bf16", time_pytorch(&args, &cache, true, false)?.0),
        ("PyTorch eager fp32, lm's heap", "fp32", time_pytorch(&args, &cache, false, true)?.0),
        ("PyTorch bf16 autocast, lm's heap", "bf16", time_pytorch(&args, &cache, true, true)?.0),
    ];
    println!("config {} ({} params, {:.1} MFLOP/token), {} reps x {} timed steps", cfg.name, cfg.n_params(), flops / 1e6, args.reps, args.steps);
    println!("{:<24} {:>9} {:>21} {:>7} {:>7} {:>7} {:>8}", "", "tokens/s", "(min, max)", "MFU", "fwd %", "bwd %", "optim %");
    let mut csv = String::from("bench,row,dtype,median,min,max,unit,mfu,reps\n");
    let mut json_rows = Vec::new();
    for (name, dtype, t) in &rows {
        let Spread { median: med, min: lo, max: hi, .. } = Spread::of(&t.rates);
        let mfu = med * flops / (peak[dtype] * 1e9);
        println!("{name:<24} {med:>9.0} {:>21} {:>6.1}% {:>6.1}% {:>6.1}% {:>7.1}%", format!("({lo:.0}, {hi:.0})"), 100.0 * mfu, 100.0 * t.split.0, 100.0 * t.split.1, 100.0 * t.split.2);
        csv.push_str(&format!("train,{name},{dtype},{med},{lo},{hi},tokens/s,{mfu},{}\n", t.rates.len()));
        json_rows.push(serde_json::json!({"row": name, "dtype": dtype, "tokens_per_s": t.rates, "median": med, "mfu": mfu, "split": [t.split.0, t.split.1, t.split.2]}));
    }
    let med = |i: usize| Spread::of(&rows[i].2.rates).median;
    println!("ratios (medians): lm fp32 / PyTorch fp32 {:.2}x; lm bf16 / PyTorch fp32 {:.2}x (goal >= 1.5x); lm bf16 / PyTorch bf16 autocast {:.2}x (goal >= 1.0x); lm bf16 / lm fp32 {:.2}x", med(0) / med(2), med(1) / med(2), med(1) / med(3), med(1) / med(0));
    println!("against PyTorch with lm's heap settings: lm fp32 / PyTorch fp32 {:.2}x; lm bf16 / PyTorch fp32 {:.2}x; lm bf16 / PyTorch bf16 autocast {:.2}x", med(0) / med(4), med(1) / med(4), med(1) / med(5));
    for (what, v) in [("lm fp32 / PyTorch fp32", med(0) / med(2)), ("lm bf16 / PyTorch fp32", med(1) / med(2)), ("lm bf16 / PyTorch bf16 autocast", med(1) / med(3))] {
        csv.push_str(&format!("train,{what},,{v},,,ratio,,\n"));
    }
    for (name, g) in &peak {
        csv.push_str(&format!("train,matmul peak,{name},{g},,,GFLOP/s,,{}\n", args.reps));
    }

    let report = serde_json::json!({
        "config": cfg.name, "config_hash": cfg.hash(), "git_commit": output::provenance::git_commit(),
        "steps": args.steps, "reps": args.reps, "peak_gflops": peak, "flops_per_token": flops,
        "gemm_shapes": shapes, "rows": json_rows, "threads": tch::get_num_threads(),
    });
    // the headline rows of `just bench`: each of ours against its anchor and its dtype's peak
    let row = |ours: usize, anchor: usize, goal: Option<f64>| {
        let (name, dtype, t) = &rows[ours];
        Row {
            bench: "train".into(),
            measure: format!("training step, {name}"),
            unit: "tokens/s".into(),
            higher_is_better: true,
            ours: Spread::of(&t.rates),
            anchor: Some(Reference { name: rows[anchor].0.into(), median: med(anchor) }),
            bound: Some(Reference { name: format!("{dtype} matmul peak"), median: peak[dtype] * 1e9 / flops }),
            goal: goal.map(Goal::Speedup),
        }
    };
    let headline = [row(0, 2, None), row(1, 2, Some(1.5)), row(1, 3, Some(1.0)), row(0, 4, None), row(1, 4, None), row(1, 5, None)];
    std::fs::create_dir_all("runs/bench")?;
    output::bench::write_summary(Path::new("runs/bench"), "train", &headline, report.clone())?;
    output::write_atomic(Path::new("runs/bench/train.json"), serde_json::to_string_pretty(&report)?.as_bytes())?;
    output::write_atomic(Path::new("runs/bench/train.csv"), csv.as_bytes())?;
    Ok(())
}
