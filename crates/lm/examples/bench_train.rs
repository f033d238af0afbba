//! Training-throughput benchmark: tokens/s and MFU of `lm`'s training step on a config, side by
//! side with the same model and step in PyTorch eager (crates/lm/bench/train_reference.py, run
//! from the same venv on the same token stream), in one run, as a ratio. The machine's fp32
//! matmul peak is measured in the same run. Writes runs/bench/train.json.
//!
//! `just bench-train` (or `cargo run --release -p lm --example bench_train -- --config ...`).

use anyhow::{Context, Result};
use clap::Parser;
use std::path::PathBuf;
use std::time::Instant;

use lm::config::Config;
use lm::model::Gpt;
use lm::optim::AdamW;
use lm::tch::{nn::VarStore, Device, Kind, Tensor};
use lm::train::{tokenizer_for, TokenData};

#[derive(Parser)]
struct Args {
    #[arg(long, default_value = "configs/default.toml")]
    config: PathBuf,
    /// Timed steps (after 3 untimed warm-up steps).
    #[arg(long, default_value_t = 30)]
    steps: u64,
    #[arg(long, default_value = ".venv/bin/python")]
    python: PathBuf,
}

/// Best-of-10 GFLOP/s of a 1024^3 fp32 matmul.
fn matmul_peak_gflops() -> f64 {
    let a = Tensor::randn([1024, 1024], (Kind::Float, Device::Cpu));
    let b = Tensor::randn([1024, 1024], (Kind::Float, Device::Cpu));
    let _ = a.matmul(&b);
    (0..10)
        .map(|_| {
            let t = Instant::now();
            let _ = a.matmul(&b);
            2.0 * 1024f64.powi(3) / t.elapsed().as_secs_f64() / 1e9
        })
        .fold(0.0, f64::max)
}

fn main() -> Result<()> {
    let args = Args::parse();
    let cfg = Config::load(&args.config)?;
    let tok = tokenizer_for(&cfg)?;
    let data = TokenData::load(&cfg, &tok)?;
    let device = Device::Cpu;
    let peak = matmul_peak_gflops();

    tch::manual_seed(cfg.init_seed() as i64);
    let vs = VarStore::new(device);
    let model = Gpt::new(&vs.root(), &cfg.model, cfg.data.vocab_size);
    let t = &cfg.train;
    let mut opt = AdamW::new(&vs, t.beta1, t.beta2, t.eps, t.weight_decay);
    let (mut fwd, mut bwd, mut upd) = (0.0, 0.0, 0.0);
    let mut began = Instant::now();
    for step in 0..args.steps + 3 {
        if step == 3 {
            (fwd, bwd, upd, began) = (0.0, 0.0, 0.0, Instant::now());
        }
        let (x, y) = data.batch(&cfg, step, device);
        let t0 = Instant::now();
        let loss = model.loss(&x, &y, true);
        let t1 = Instant::now();
        loss.backward();
        let t2 = Instant::now();
        opt.clip_grad_norm(t.grad_clip);
        opt.step(cfg.lr_at(step));
        let _ = f64::try_from(&loss)?;
        let t3 = Instant::now();
        fwd += (t1 - t0).as_secs_f64();
        bwd += (t2 - t1).as_secs_f64();
        upd += (t3 - t2).as_secs_f64();
    }
    let wall = began.elapsed().as_secs_f64();
    let tokens = (args.steps * (t.batch_size * cfg.model.context) as u64) as f64;
    let rust_tps = tokens / wall;

    let cache = cfg.data.corpus.join(format!("train.{}.u16", &tok.sha256[..12]));
    let out = std::process::Command::new(&args.python)
        .args(["crates/lm/bench/train_reference.py", "--config"])
        .arg(&args.config)
        .arg("--tokens")
        .arg(&cache)
        .args(["--steps", &args.steps.to_string()])
        .output()
        .with_context(|| format!("cannot run {}", args.python.display()))?;
    anyhow::ensure!(out.status.success(), "reference failed: {}", String::from_utf8_lossy(&out.stderr));
    let py: serde_json::Value = serde_json::from_slice(out.stdout.trim_ascii()).context("reference output is not JSON")?;
    let py_tps = py["tokens_per_s"].as_f64().context("tokens_per_s")?;

    let flops = cfg.train_flops_per_token();
    let mfu = |tps: f64| tps * flops / (peak * 1e9);
    println!("config {} ({} params, {:.1} MFLOP/token), {} timed steps, fp32 matmul peak {peak:.0} GFLOP/s", cfg.name, cfg.n_params(), flops / 1e6, args.steps);
    println!("{:<16} {:>10} {:>7} {:>9} {:>9} {:>9}", "", "tokens/s", "MFU", "fwd %", "bwd %", "optim %");
    println!("{:<16} {:>10.0} {:>6.1}% {:>8.1}% {:>8.1}% {:>8.1}%", "lm (tch)", rust_tps, 100.0 * mfu(rust_tps), 100.0 * fwd / wall, 100.0 * bwd / wall, 100.0 * upd / wall);
    let pw = py["wall_s"].as_f64().unwrap_or(1.0);
    let share = |k: &str| 100.0 * py[k].as_f64().unwrap_or(0.0) / pw;
    println!("{:<16} {:>10.0} {:>6.1}% {:>8.1}% {:>8.1}% {:>8.1}%", "PyTorch eager", py_tps, 100.0 * mfu(py_tps), share("forward_s"), share("backward_s"), share("optimizer_s"));
    println!("ratio lm / PyTorch eager: {:.2}x", rust_tps / py_tps);

    let report = serde_json::json!({
        "config": cfg.name, "config_hash": cfg.hash(), "git_commit": output::provenance::git_commit(),
        "steps": args.steps, "peak_gflops": peak, "flops_per_token": flops,
        "lm": {"tokens_per_s": rust_tps, "mfu": mfu(rust_tps), "forward_s": fwd, "backward_s": bwd, "optimizer_s": upd, "wall_s": wall},
        "pytorch_eager": py, "ratio": rust_tps / py_tps,
    });
    std::fs::create_dir_all("runs/bench")?;
    output::write_atomic(std::path::Path::new("runs/bench/train.json"), serde_json::to_string_pretty(&report)?.as_bytes())?;
    Ok(())
}
