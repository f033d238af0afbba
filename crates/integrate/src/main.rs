//! `integrate`: checkpoint averaging and ensembling.
use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use integrate::average::{self, Accumulate, Checkpoint};
use integrate::ensemble::{self, Rule};
use std::path::PathBuf;

#[derive(Parser)]
#[command(version, about = "Checkpoint averaging (weights) and checkpoint ensembling (predictions)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Average the weights of the last K of the given checkpoints (oldest first) into OUT.
    /// A checkpoint is a .safetensors file or a folder with model.safetensors or a sharded
    /// Hugging Face checkpoint (model.safetensors.index.json).
    Average {
        #[arg(long)]
        window: usize,
        /// Exponential weights (1 - alpha)^age instead of uniform ones.
        #[arg(long, conflicts_with = "weights")]
        ema: Option<f64>,
        /// Explicit weights, oldest first, summing to 1.
        #[arg(long, value_delimiter = ',')]
        weights: Vec<f64>,
        #[arg(long, value_enum, default_value = "f64")]
        accumulate: Accumulate,
        #[arg(required = true)]
        checkpoints: Vec<PathBuf>,
        #[arg(short, long)]
        out: PathBuf,
    },
    /// For each window size k, average the k checkpoints ending at every step of a run.
    Sweep {
        /// A run's checkpoint folder, e.g. runs/default/checkpoints.
        #[arg(long)]
        checkpoints: PathBuf,
        #[arg(long, value_delimiter = ',', default_value = "4,16")]
        windows: Vec<usize>,
        /// Only the windows ending at the last N checkpoints (e.g. the final 20% of a run).
        #[arg(long)]
        last: Option<usize>,
        #[arg(long, value_enum, default_value = "f64")]
        accumulate: Accumulate,
        /// Output folder [default: <checkpoints>/../averaged]; one subfolder k<k> per window.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Ensemble the k checkpoints ending at every step, from a run's stored per-option scores.
    Ensemble {
        /// An eval folder with examples.parquet, e.g. runs/default/eval.
        #[arg(long)]
        eval: PathBuf,
        #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16")]
        windows: Vec<usize>,
        #[arg(long, value_enum, default_value = "distribution")]
        rule: Rule,
        /// Output folder [default: <eval>/../ensembled]; one subfolder k<k> per window.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Average { window, ema, weights, accumulate, checkpoints, out } => {
            if window == 0 || window > checkpoints.len() {
                bail!("--window {window} needs between 1 and {} checkpoints", checkpoints.len());
            }
            let chosen = &checkpoints[checkpoints.len() - window..];
            let w = match (ema, weights.is_empty()) {
                (Some(a), _) => average::exponential(window, a),
                (None, false) => weights,
                (None, true) => average::uniform(window),
            };
            let opened: Vec<Checkpoint> = chosen.iter().map(|p| Checkpoint::open(p)).collect::<Result<_>>()?;
            let t = std::time::Instant::now();
            let files = average::average(&opened, &w, accumulate, &out)?;
            let secs = t.elapsed().as_secs_f64();
            let inputs: Vec<serde_json::Value> = chosen
                .iter()
                .map(|p| {
                    let f = if p.is_dir() { p.join("model.safetensors.index.json") } else { p.clone() };
                    Ok(serde_json::json!({"path": p, "sha256": integrate::sha256_file(&f)?}))
                })
                .collect::<Result<_>>()?;
            let outputs: Vec<serde_json::Value> = files.iter().map(|f| Ok(serde_json::json!({"path": f, "sha256": integrate::sha256_file(f)?}))).collect::<Result<_>>()?;
            let sidecar = serde_json::json!({"method": if ema.is_some() { "exponential average" } else { "weighted average" }, "weights": w, "accumulate": accumulate, "inputs": inputs, "outputs": outputs, "git_commit": integrate::git_commit()});
            let spath = if out.is_dir() { out.join("integration.json") } else { out.with_extension("json") };
            corpus::write_atomic(&spath, serde_json::to_string_pretty(&sidecar)?.as_bytes())?;
            println!("{}: average of {window} checkpoints in {secs:.2} s; sidecar {}", out.display(), spath.display());
        }
        Command::Sweep { checkpoints, windows, last, accumulate, out } => {
            let out = out.unwrap_or_else(|| checkpoints.parent().unwrap_or(&checkpoints).join("averaged"));
            let bar = indicatif::ProgressBar::new(0);
            bar.set_style(indicatif::ProgressStyle::with_template("averaging [{bar:30}] {pos}/{len} ETA {eta}").unwrap().progress_chars("=> "));
            let (w, k) = integrate::sweep(&checkpoints, &windows, last, accumulate, &out, |done, total| {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            })?;
            bar.finish();
            println!("{}: {w} averaged checkpoints written, {k} up to date", out.display());
        }
        Command::Ensemble { eval, windows, rule, out } => {
            let out = out.unwrap_or_else(|| eval.parent().unwrap_or(&eval).join("ensembled"));
            let src = eval.join("examples.parquet");
            let rows = records::read_examples(&src).with_context(|| format!("{}: run `lm eval` first", src.display()))?;
            for k in windows {
                let e = ensemble::ensemble_rows(&rows, k, rule)?;
                let dir = out.join(format!("k{k}"));
                records::write_frame(&dir.join("examples.parquet"), &mut records::examples_frame(&e)?)?;
                let mut tf = records::tasks_frame(&records::summarise(&e)?)?;
                records::write_frame(&dir.join("tasks.parquet"), &mut tf)?;
                records::write_frame(&dir.join("tasks.csv"), &mut tf)?;
                let prov = serde_json::json!({"method": "ensemble", "rule": rule, "k": k, "input": src, "input_sha256": integrate::sha256_file(&src)?, "git_commit": integrate::git_commit()});
                corpus::write_atomic(&dir.join("provenance.json"), serde_json::to_string_pretty(&prov)?.as_bytes())?;
                println!("{}: {} rows", dir.display(), e.len());
            }
        }
    }
    Ok(())
}
