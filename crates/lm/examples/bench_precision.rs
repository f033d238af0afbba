//! The accuracy check of bf16 mixed-precision training: the same config (default: the default
//! model) trained `--steps` steps (300) from the same init and batches in fp32 and in bf16, and
//! the final validation loss on the whole validation split compared; bf16 passes if it is within
//! `--tolerance` (1%) of fp32. Runs go to runs/bench/precision-<config>-{fp32,bf16}/ (an
//! existing one with the same config resumes or is reused; another config there is refused, as
//! `lm train` does). Writes runs/bench/precision-<config>.json; exits non-zero if the check fails.
//!
//! `just bench-precision` (or `cargo run --release -p lm --example bench_precision`).

use anyhow::{bail, Context, Result};
use clap::Parser;
use std::path::{Path, PathBuf};

use lm::config::{Config, EvalSchedule, Precision};
use lm::train::{train, TrainOptions};

#[derive(Parser)]
struct Args {
    #[arg(long, default_value = "configs/default.toml")]
    config: PathBuf,
    #[arg(long, default_value_t = 300)]
    steps: u64,
    /// Largest relative difference of the final validation loss that passes.
    #[arg(long, default_value_t = 0.01)]
    tolerance: f64,
}

/// The config at `steps` steps (warm-up 10% of them), checkpoints at 0 and the last step only,
/// where the whole validation split is scored.
fn short(cfg: &Config, steps: u64, precision: Precision) -> Config {
    let mut c = cfg.clone();
    if c.schema_version < 2 {
        let seed = c.init_seed();
        (c.schema_version, c.seed, c.init_seed, c.data_seed) = (2, None, Some(seed), Some(seed));
    }
    c.name = format!("precision-{}-{}", cfg.name, if precision == Precision::Fp32 { "fp32" } else { "bf16" });
    c.train.steps = steps;
    c.train.warmup_steps = (steps / 10).max(1);
    c.train.checkpoint_every = steps;
    c.train.precision = precision;
    c.eval = Some(EvalSchedule { final_fraction: 1.0 / steps as f64, lead: 0, early: 0 });
    c
}

/// The whole-split validation loss of a run's checkpoint at `step`, from its sidecar.
fn final_full_val(run: &Path, step: u64) -> Result<f64> {
    let sidecar = run::RunDir::new(run).checkpoints().join(format!("{}.json", lm::checkpoint::stem(step)));
    let meta = lm::checkpoint::read_sidecar(&sidecar)?;
    meta.val_loss_full.with_context(|| format!("{}: no whole-split validation loss", sidecar.display()))
}

fn main() -> Result<()> {
    let args = Args::parse();
    lm::heap::keep_freed_memory();
    let base = Config::load(&args.config)?;
    let mut results = Vec::new();
    for precision in [Precision::Fp32, Precision::Bf16] {
        let cfg = short(&base, args.steps, precision);
        cfg.validate()?;
        let run = PathBuf::from("runs/bench").join(&cfg.name);
        let s = train(&cfg, &run, &TrainOptions::default())?;
        let val = final_full_val(&run, args.steps)?;
        // tokens/s only means something if this call ran every step
        let tps = (s.steps_run == args.steps).then_some(s.tokens_per_s);
        results.push((cfg.name.clone(), val, tps));
    }
    let (fp32, bf16) = (results[0].1, results[1].1);
    let rel = (bf16 - fp32) / fp32;
    let pass = rel.abs() <= args.tolerance;
    println!("config {} at {} steps, final validation loss on the whole split:", base.name, args.steps);
    for (name, val, tps) in &results {
        println!(
            "  {name:<16} {val:.4}   {}",
            tps.map_or("(reused: no timing)".to_string(), |t| format!("{t:.0} tokens/s incl. validation"))
        );
    }
    println!(
        "bf16 - fp32: {:+.4} ({:+.2}%); tolerance {:.1}%: {}",
        bf16 - fp32,
        100.0 * rel,
        100.0 * args.tolerance,
        if pass { "pass" } else { "FAIL" }
    );
    let report = serde_json::json!({
        "config": base.name, "config_hash": base.hash(), "steps": args.steps, "git_commit": output::provenance::git_commit(),
        "final_val_loss_full": {"fp32": fp32, "bf16": bf16}, "relative_difference": rel, "tolerance": args.tolerance, "pass": pass,
        "tokens_per_s": {"fp32": results[0].2, "bf16": results[1].2},
    });
    output::write_atomic(
        &Path::new("runs/bench").join(format!("precision-{}.json", base.name)),
        serde_json::to_string_pretty(&report)?.as_bytes(),
    )?;
    if !pass {
        bail!(
            "bf16 training's final validation loss is {:.2}% from fp32's (tolerance {:.1}%)",
            100.0 * rel,
            100.0 * args.tolerance
        );
    }
    Ok(())
}
