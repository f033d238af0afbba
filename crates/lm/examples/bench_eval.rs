//! Evaluation-throughput benchmark: examples scored per second on one checkpoint of a run, by
//! `lm` and by the same scoring in PyTorch eager (crates/lm/bench/eval_reference.py) on the same
//! checkpoint and the same tokenized requests, in one run, as a ratio; the two implementations'
//! log-likelihoods are compared too. `just bench-eval`.
use anyhow::{Context, Result};
use clap::Parser;
use lm::checkpoint;
use lm::eval::{evaluate, prepare, EvalConfig};
use lm::model::Gpt;
use lm::tch::{nn::VarStore, Device};
use lm::tokenize::Tok;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Parser)]
struct Args {
    /// A checkpoint sidecar, e.g. runs/default/checkpoints/step_001000.json.
    #[arg(long)]
    checkpoint: PathBuf,
    #[arg(long, default_value = "configs/eval.toml")]
    eval_config: PathBuf,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let meta = checkpoint::read_sidecar(&args.checkpoint)?;
    let cfg = EvalConfig::load(&args.eval_config)?;
    let tok = Tok::load(&meta.config.data.tokenizer)?;
    let prepared = prepare(&tasks::load_all(&cfg.tasks)?, &tok, &cfg)?;
    let mut vs = VarStore::new(Device::Cpu);
    let model = Gpt::new(&vs.root(), &meta.config.model, meta.config.data.vocab_size);
    checkpoint::load(&args.checkpoint, &mut vs, &tok.sha256)?;
    let n_examples: usize = prepared.iter().map(|p| p.ids.len()).sum();
    let reqs: Vec<&lm::score::Request> = prepared.iter().flat_map(|p| p.requests.iter().flatten()).collect();
    let tokens: usize = reqs.iter().map(|r| (r.context.len() + r.continuation.len()).min(meta.config.model.context as usize + 1)).sum();
    evaluate(&model, &tok, &prepared, meta.step, cfg.batch_tokens, Device::Cpu)?; // warm-up
    let t = Instant::now();
    let rows = evaluate(&model, &tok, &prepared, meta.step, cfg.batch_tokens, Device::Cpu)?;
    let rust_s = t.elapsed().as_secs_f64();

    let dir = tempfile::tempdir()?;
    let rpath = dir.path().join("requests.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&rpath)?);
    for r in &reqs {
        writeln!(f, "{}", serde_json::json!([r.context, r.continuation]))?;
    }
    drop(f);
    let cfg_path = dir.path().join("config.toml");
    std::fs::write(&cfg_path, toml::to_string(&meta.config)?)?;
    let weights = args.checkpoint.parent().unwrap().join(&meta.weights_file);
    let out = std::process::Command::new(".venv/bin/python")
        .arg("crates/lm/bench/eval_reference.py")
        .arg("--config").arg(&cfg_path).arg("--weights").arg(&weights).arg("--requests").arg(&rpath)
        .args(["--batch-tokens", &cfg.batch_tokens.to_string()])
        .output()
        .context("cannot run the PyTorch reference")?;
    anyhow::ensure!(out.status.success(), "reference failed: {}", String::from_utf8_lossy(&out.stderr));
    let py: serde_json::Value = serde_json::from_slice(out.stdout.trim_ascii())?;
    let py_s = py["seconds"].as_f64().unwrap();
    let ours: Vec<f64> = rows.iter().flat_map(|r| r.logliks.clone()).collect();
    let theirs: Vec<f64> = py["logliks"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    let max_diff = ours.iter().zip(&theirs).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);

    println!("checkpoint {} (step {}), {} tasks, {n_examples} examples, {} requests, {tokens} tokens", args.checkpoint.display(), meta.step, prepared.len(), reqs.len());
    println!("{:<16} {:>9} {:>12} {:>11}", "", "seconds", "examples/s", "tokens/s");
    println!("{:<16} {:>9.2} {:>12.1} {:>11.0}", "lm (tch)", rust_s, n_examples as f64 / rust_s, tokens as f64 / rust_s);
    println!("{:<16} {:>9.2} {:>12.1} {:>11.0}", "PyTorch eager", py_s, n_examples as f64 / py_s, tokens as f64 / py_s);
    println!("ratio lm / PyTorch: {:.2}x; max |log-likelihood difference| {max_diff:.2e} over {} requests", py_s / rust_s, ours.len());
    Ok(())
}
