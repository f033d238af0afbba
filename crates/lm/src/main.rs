//! `lm`: the command line of the language-model crate.
use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

use lm::config::Config;
use lm::train::{self, TrainOptions};

/// Pretrain a small decoder LM and leave a dense trail of checkpoints.
///
/// Typical use, from the repository root: `lm train --config configs/smoke.toml`
/// (or `just train smoke`). Checkpoints go to runs/<name>/checkpoints/.
#[derive(Parser)]
#[command(version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Train the byte-level BPE tokenizer named in a config (on the corpus' train split).
    Tokenizer {
        /// Run config (TOML), e.g. configs/default.toml.
        #[arg(long)]
        config: PathBuf,
    },
    /// Train (or resume) the run a config describes.
    Train {
        /// Run config (TOML), e.g. configs/default.toml.
        #[arg(long)]
        config: PathBuf,
        /// Run folder [default: runs/<name>].
        #[arg(long)]
        out: Option<PathBuf>,
        /// Stop after this step (the run can be resumed later with the same command).
        #[arg(long)]
        stop_after: Option<u64>,
        /// Move an existing run folder aside (to <run>.old-<n>, nothing is deleted) and start
        /// again from step 0.
        #[arg(long)]
        restart: bool,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
    },
    /// Score every checkpoint of a run on every task, keeping per-example records.
    Eval {
        /// Folder of checkpoints (step_*.json sidecars), e.g. runs/default/checkpoints.
        #[arg(long)]
        checkpoints: PathBuf,
        /// Eval config (TOML).
        #[arg(long, default_value = "configs/eval.toml")]
        config: PathBuf,
        /// Output folder [default: <run>/eval for <run>/checkpoints, <run>/eval-avg-k<K> for
        /// <run>/averaged/k<K>, <checkpoints>/../eval otherwise].
        #[arg(long)]
        out: Option<PathBuf>,
        /// Override the config's examples per task.
        #[arg(long)]
        max_examples: Option<usize>,
        /// Override the config's number of few-shot examples.
        #[arg(long)]
        shots: Option<usize>,
        /// Tokenizer JSON [default: the one the checkpoints' config names, looked up from the
        /// working folder and from the folders above the checkpoints]; its sha256 must match.
        #[arg(long)]
        tokenizer: Option<PathBuf>,
        #[arg(long)]
        quiet: bool,
    },
    /// Write a checkpoint as a Hugging Face folder (LlamaForCausalLM: config.json,
    /// model.safetensors, tokenizer files, generation_config.json, provenance.json) that
    /// transformers and `lm_eval --model hf` load with no custom code.
    Export {
        /// The checkpoint: its sidecar (step_N.json) or weights (step_N.safetensors).
        checkpoint: PathBuf,
        /// The folder to write (new or empty, unless --force).
        out: PathBuf,
        /// Tokenizer JSON [default: the one the checkpoint's config names]; its sha256 must match.
        #[arg(long)]
        tokenizer: Option<PathBuf>,
        /// Replace what a non-empty OUT holds.
        #[arg(long)]
        force: bool,
    },
    /// Write the logits of a checkpoint on a text as JSON ({"tokens": [..], "logits": [[..]]}),
    /// to compare with other implementations (`just interop`).
    Logits {
        /// The checkpoint: its sidecar (step_N.json) or weights (step_N.safetensors).
        #[arg(long)]
        checkpoint: PathBuf,
        /// The text, tokenized with the run's tokenizer (its first `context` tokens are used).
        #[arg(long)]
        text: String,
        #[arg(long)]
        tokenizer: Option<PathBuf>,
        /// The JSON file to write.
        #[arg(long)]
        out: PathBuf,
    },
    /// Continue prompts greedily (batched, with a key/value cache) and print each continuation.
    /// A prompt keeps its last `context - max_new_tokens` tokens. With several checkpoints,
    /// ensemble decoding: at every step the mean of their next-token probability distributions,
    /// greedy on the mean.
    Generate {
        /// The checkpoint: its sidecar (step_N.json) or weights (step_N.safetensors). Repeat for
        /// an ensemble (same architecture and tokenizer; each keeps its own cache).
        #[arg(long, required = true)]
        checkpoint: Vec<PathBuf>,
        /// A prompt (repeat for several, decoded as one batch).
        #[arg(long, required = true)]
        prompt: Vec<String>,
        #[arg(long, default_value_t = 32)]
        max_new_tokens: usize,
        /// A stop string (repeatable): a continuation ends before its first occurrence. `\n`,
        /// `\t` and `\\` are read as newline, tab and backslash, so `--until "\n\n"` works.
        #[arg(long)]
        until: Vec<String>,
        /// Tokenizer JSON [default: the one the checkpoint's config names]; its sha256 must match.
        #[arg(long)]
        tokenizer: Option<PathBuf>,
        /// Re-run the whole sequence at every step instead of using the cache (the reference
        /// path: same tokens, slower).
        #[arg(long)]
        no_cache: bool,
    },
    /// Print the parameter count and FLOPs per token of a config.
    Info {
        #[arg(long)]
        config: PathBuf,
    },
    /// Print the checkpoints a config's evaluation scores (its `[eval]` schedule), or with
    /// `--final-count` only how many of them lie in the final stage (the analysis' window).
    Schedule {
        #[arg(long)]
        config: PathBuf,
        #[arg(long)]
        final_count: bool,
        /// Print only the first step of the final stage (`analysis report --final-from`).
        #[arg(long)]
        final_start: bool,
    },
}

fn main() -> Result<()> {
    lm::heap::keep_freed_memory();
    match Cli::parse().command {
        Command::Tokenizer { config } => {
            let cfg = Config::load(&config)?;
            let tok = train::tokenizer_for(&cfg)?;
            println!("{}: vocab {} sha256 {}", tok.path.display(), tok.vocab_size(), tok.sha256);
        }
        Command::Train { config, out, stop_after, restart, quiet } => {
            let cfg = Config::load(&config)?;
            let run_dir = out.unwrap_or_else(|| PathBuf::from("runs").join(&cfg.name));
            let s = train::train(&cfg, &run_dir, &TrainOptions { stop_after, quiet, restart })?;
            if let Some(step) = s.resumed_from {
                println!("resumed from step {step}");
            }
            println!(
                "{}: {} params, steps {} -> {} in {:.1} s ({:.0} tokens/s), validation loss {:.4} -> {:.4}",
                run_dir.display(),
                s.n_params,
                s.last_step - s.steps_run,
                s.last_step,
                s.wall_s,
                s.tokens_per_s,
                s.first_val_loss,
                s.last_val_loss
            );
        }
        Command::Eval { checkpoints, config, out, max_examples, shots, tokenizer, quiet } => {
            let mut cfg = lm::eval::EvalConfig::load(&config)?;
            cfg.max_examples = max_examples.unwrap_or(cfg.max_examples);
            cfg.shots = shots.unwrap_or(cfg.shots);
            let out = out.unwrap_or_else(|| run::layout::default_eval_dir(&checkpoints));
            let created = !out.exists();
            let s = lm::eval::run(&checkpoints, &cfg, &out, tokenizer.as_deref(), quiet).inspect_err(|_| {
                if created {
                    // a refused checkpoint leaves no empty eval folder behind
                    output::remove_empty_dirs(&out);
                }
            })?;
            println!(
                "{}: {} checkpoints ({} scored, {} up to date), {} examples each, {:.1} s scoring ({:.0} examples/s)",
                s.out.display(),
                s.checkpoints,
                s.scored,
                s.skipped,
                s.examples_per_checkpoint,
                s.scoring_s,
                (s.scored * s.examples_per_checkpoint) as f64 / s.scoring_s.max(1e-9)
            );
        }
        Command::Export { checkpoint, out, tokenizer, force } => {
            let e = lm::export::export(&checkpoint, &out, tokenizer.as_deref(), force)?;
            println!(
                "{}: step {} as a Hugging Face LlamaForCausalLM folder ({} tensors; {})",
                out.display(),
                e.step,
                e.tensors,
                e.files.join(", ")
            );
        }
        Command::Logits { checkpoint, text, tokenizer, out } => {
            let (tokens, logits) = lm::export::logits(&checkpoint, &text, tokenizer.as_deref())?;
            let v = serde_json::json!({"checkpoint": checkpoint, "text": text, "tokens": tokens, "logits": logits});
            output::write_atomic(&out, serde_json::to_string(&v)?.as_bytes())?;
            println!(
                "{}: logits of {} tokens x {} classes",
                out.display(),
                tokens.len(),
                logits.first().map_or(0, Vec::len)
            );
        }
        Command::Generate { checkpoint, prompt, max_new_tokens, until, tokenizer, no_cache } => {
            let device = tch::Device::cuda_if_available();
            let paths: Vec<&std::path::Path> = checkpoint.iter().map(PathBuf::as_path).collect();
            let members = lm::generate::load_ensemble(&paths, tokenizer.as_deref(), device)?;
            let models: Vec<&lm::model::Gpt> = members.iter().map(|l| &l.model).collect();
            let l = &members[0];
            let until: Vec<String> = until.iter().map(|u| unescape(u)).collect();
            let opts = lm::generate::Options { max_new_tokens, until, batch_size: prompt.len(), cache: !no_cache };
            let start = std::time::Instant::now();
            let gens = lm::generate::generate_ensemble(&models, &l.tok, &prompt, &opts, device)?;
            let wall = start.elapsed().as_secs_f64();
            for (i, (p, g)) in prompt.iter().zip(&gens).enumerate() {
                let cut =
                    if g.truncated > 0 { format!(", {} dropped from the left", g.truncated) } else { String::new() };
                let why = match &g.stop {
                    lm::generate::Stop::Until(s) => format!("stopped at {s:?}"),
                    lm::generate::Stop::EndOfText => "end of text".into(),
                    lm::generate::Stop::MaxNewTokens => "max_new_tokens".into(),
                };
                println!("[{}] prompt ({} tokens{cut}): {p:?}", i + 1, g.prompt_tokens);
                println!("[{}] continuation ({} tokens, {why}): {:?}", i + 1, g.tokens.len(), g.text);
            }
            let n: usize = gens.iter().map(|g| g.tokens.len()).sum();
            let steps: Vec<String> = members.iter().map(|l| l.meta.step.to_string()).collect();
            eprintln!(
                "{} {} on {device:?}: {n} tokens in {wall:.2} s ({:.0} tokens/s, {})",
                if members.len() > 1 {
                    format!("ensemble of {} checkpoints, steps", members.len())
                } else {
                    "step".into()
                },
                steps.join(","),
                n as f64 / wall.max(1e-9),
                if no_cache { "no cache" } else { "cached" }
            );
        }
        Command::Info { config } => {
            let cfg = Config::load(&config)?;
            println!(
                "{}: {} parameters, {:.1} MFLOP per training token",
                cfg.name,
                cfg.n_params(),
                cfg.train_flops_per_token() / 1e6
            );
        }
        Command::Schedule { config, final_count, final_start } => {
            let cfg = Config::load(&config)?;
            if final_start {
                println!("{}", cfg.final_stage_start(cfg.eval.as_ref().map_or(0.2, |e| e.final_fraction)));
            } else if final_count {
                println!("{}", cfg.final_stage_len());
            } else {
                let steps = cfg.eval_steps();
                println!(
                    "{}: {} of {} checkpoints scored, {} in the final stage: {}",
                    cfg.name,
                    steps.len(),
                    cfg.checkpoint_steps().len(),
                    cfg.final_stage_len(),
                    steps.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
                );
            }
        }
    }
    Ok(())
}

/// `\n`, `\t` and `\\` in a command-line string as newline, tab and backslash (other
/// backslashes are kept).
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('\\') => out.push('\\'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}
