//! `integrate`: checkpoint averaging and ensembling.
use anyhow::Result;
use clap::{Parser, Subcommand};
use integrate::average::{Accumulate, OutDtype};
use integrate::commands::{self, AverageRequest, EnsembleRequest};
use integrate::ensemble::Rule;
use run::RunDir;
use std::path::PathBuf;

#[derive(Parser)]
#[command(version, about = "Checkpoint averaging (weights) and checkpoint ensembling (predictions)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Average the weights of the last K of the given checkpoints (oldest first), or of the
    /// models of a mergekit YAML config (--config), into the folder OUT. A checkpoint is a
    /// .safetensors file or a folder with model.safetensors or a sharded Hugging Face checkpoint
    /// (model.safetensors.index.json).
    ///
    /// OUT gets model.safetensors, or shards of at most --out-shard-size and
    /// model.safetensors.index.json as transformers' save_pretrained writes them, the newest
    /// (last) input folder's config.json, generation and tokenizer files, and integration.json
    /// (weights, inputs and outputs with their sha256, git commit). OUT must be new, or an
    /// earlier average (kept if its inputs and weights are the same, replaced only with --force),
    /// and may not lie inside an input's folder or contain an input. Everything is checked
    /// before anything is written, and the folder is replaced as a whole. docs/averaging.md
    /// tells which part of mergekit's config schema is read.
    Average {
        #[arg(long, required_unless_present = "config")]
        window: Option<usize>,
        /// Exponential weights (1 - alpha)^age instead of uniform ones.
        #[arg(long, conflicts_with = "weights")]
        ema: Option<f64>,
        /// Explicit weights, oldest first, summing to 1.
        #[arg(long, value_delimiter = ',')]
        weights: Vec<f64>,
        #[arg(long, value_enum, default_value = "f64")]
        accumulate: Accumulate,
        /// The dtype every output tensor is written in [default: each tensor's inputs' dtype,
        /// or the config's out_dtype, else its dtype].
        #[arg(long, value_enum)]
        out_dtype: Option<OutDtype>,
        /// At most this many tensor bytes per output file, as transformers' max_shard_size
        /// (5GB = 5e9 bytes, 500MB, 2GiB, or bytes); one model.safetensors if all fit.
        #[arg(long, value_name = "SIZE", default_value = "5GB", value_parser = shard_size)]
        out_shard_size: u64,
        /// A mergekit YAML config of a linear merge (models with weights, merge_method: linear,
        /// parameters.normalize, dtype, out_dtype) in place of --window/--ema/--weights and the
        /// checkpoint arguments.
        #[arg(long, value_name = "merge.yml", conflicts_with_all = ["window", "ema", "weights", "checkpoints"])]
        config: Option<PathBuf>,
        #[arg(required_unless_present = "config")]
        checkpoints: Vec<PathBuf>,
        #[arg(short, long)]
        out: PathBuf,
        /// Replace OUT if it holds an earlier average of other inputs or weights.
        #[arg(long)]
        force: bool,
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
    /// Ensemble the k checkpoints ending at every step, from stored per-option scores: a run's
    /// eval folder, or lm-evaluation-harness outputs written with --log_samples (folders as
    /// `lm_eval --output_path` writes them, samples files, globs; steps found as `analysis
    /// report` finds them).
    Ensemble {
        /// An eval folder with examples.parquet (e.g. runs/default/eval), or one or more
        /// lm-evaluation-harness output folders, files or glob patterns.
        #[arg(long, required = true, num_args = 1..)]
        eval: Vec<PathBuf>,
        /// lm-evaluation-harness inputs: a regex whose one capture group is the step.
        #[arg(long, value_name = "REGEX")]
        step_from: Option<String>,
        /// lm-evaluation-harness inputs: a CSV of `path,step` rows.
        #[arg(long, value_name = "FILE")]
        step_map: Option<PathBuf>,
        #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16")]
        windows: Vec<usize>,
        #[arg(long, value_enum, default_value = "distribution")]
        rule: Rule,
        /// Output folder [default: <eval>/../ensembled for a run, <eval>/../ensembled-vote with
        /// --rule vote; required for lm-evaluation-harness inputs]; one subfolder k<k> per window.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

/// `--out-shard-size`, read as transformers reads `max_shard_size`.
fn shard_size(text: &str) -> std::result::Result<u64, String> {
    integrate::average::parse_size(text).map_err(|e| e.to_string())
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Average {
            window,
            ema,
            weights,
            accumulate,
            out_dtype,
            out_shard_size,
            config,
            checkpoints,
            out,
            force,
        } => commands::average(AverageRequest {
            window,
            ema,
            weights,
            accumulate,
            out_dtype,
            out_shard_size,
            config,
            checkpoints,
            out,
            force,
        })?,
        Command::Sweep { checkpoints, windows, last, accumulate, out } => {
            let out = out.unwrap_or_else(|| RunDir::of_checkpoints(&checkpoints).averaged());
            let bar = indicatif::ProgressBar::new(0);
            bar.set_style(
                indicatif::ProgressStyle::with_template("averaging [{bar:30}] {pos}/{len} ETA {eta}")
                    .unwrap()
                    .progress_chars("=> "),
            );
            let (w, k) = integrate::sweep(&checkpoints, &windows, last, accumulate, &out, |done, total| {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            })?;
            bar.finish();
            println!("{}: {w} averaged checkpoints written, {k} up to date", out.display());
        }
        Command::Ensemble { eval, windows, rule, out, step_from, step_map } => {
            commands::ensemble(EnsembleRequest { eval, step_from, step_map, windows, rule, out })?
        }
    }
    Ok(())
}
