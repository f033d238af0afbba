//! `analysis`: fluctuation measures of a run's downstream scores.
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(version, about = "Quantify task-level and example-level fluctuation of downstream scores over checkpoints")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Analyse a run folder (runs/<name>, with eval/tasks.parquet), or lm-evaluation-harness
    /// outputs: one or more folders as `lm_eval --output_path OUT [--log_samples]` writes them
    /// (OUT/<model>/results_<ts>.json, samples_<task>_<ts>.jsonl), results or samples files,
    /// flat folders of results files (`..._step<N>.json`), or glob patterns.
    ///
    /// The step of each run comes from, in order: --step-from over its path, config.model_args
    /// (revision=step<N>, or step<N> / step_<N> in the pretrained= path), --step-map, and
    /// step<N> in the file name. A (step, task) run again in one folder keeps the newest
    /// timestamp (said on stderr and in provenance.json); in two folders it is refused.
    Report {
        #[arg(required = true, value_name = "INPUT")]
        inputs: Vec<PathBuf>,
        /// Output folder [default: <run>/analysis for a run; required for lm-evaluation-harness
        /// outputs, which are never written into].
        #[arg(long)]
        out: Option<PathBuf>,
        /// A regular expression over each results file's path whose one capture group is the
        /// checkpoint step, e.g. 'ckpt-(\d+)/'.
        #[arg(long, value_name = "REGEX")]
        step_from: Option<String>,
        /// A CSV of `path,step` rows: a results file, a folder above it, or a pretrained= value.
        #[arg(long, value_name = "FILE")]
        step_map: Option<PathBuf>,
        /// Fraction of the last checkpoints that form the `final` window.
        #[arg(long, default_value_t = 0.2)]
        final_fraction: f64,
        /// The `final` window starts at this step instead (for a run whose scored checkpoints
        /// are not evenly spaced: `lm schedule --config <run config> --final-start`).
        #[arg(long, value_name = "STEP")]
        final_from: Option<u64>,
        /// Bootstrap resamples over examples.
        #[arg(long, default_value_t = 1000)]
        bootstrap: usize,
        /// Score on acc_norm instead of acc.
        #[arg(long)]
        acc_norm: bool,
        /// Only tasks whose name contains one of these (comma-separated).
        #[arg(long, value_delimiter = ',')]
        tasks: Vec<String>,
    },
    /// Compare single checkpoints with averaged (eval-avg-k*/) and ensembled (ensembled/k*/)
    /// ones of a run, over the steps they share; writes <run>/analysis/stability.{parquet,csv}.
    Compare {
        run: PathBuf,
        #[arg(long, default_value_t = 1000)]
        bootstrap: usize,
    },
    /// Copy a run's small outputs (config, training log, every eval variant with f32
    /// log-likelihoods, analysis tables; never checkpoints) into a results folder that is
    /// committed, e.g. `analysis pack runs/study/cosine-s1 --out results/cosine-s1`.
    Pack {
        run: PathBuf,
        #[arg(long)]
        out: PathBuf,
    },
    /// Check a partial rerun of a committed run (`just verify`): every example row of the
    /// rerun's eval folder against the committed one; fails if any decision changed or a
    /// log-likelihood moved by more than --tolerance (f32 storage alone moves them by ~1e-6).
    Verify {
        /// The committed eval folder, e.g. results/cosine-s1/eval.
        expected: PathBuf,
        /// The rerun's eval folder, e.g. runs/verify/cosine-s1/eval.
        actual: PathBuf,
        #[arg(long, default_value_t = 1e-3)]
        tolerance: f64,
    },
    /// A suite of model sizes (folders `pythia-<size>-deduped/` of lm-evaluation-harness
    /// results, as data/external/pythia-v1-zero-shot): per task, the signal-to-noise ratio across
    /// the sizes and the size trend of the final-stage MTV (slope of ln MTV on ln parameters).
    Suite { dir: PathBuf },
}

fn check_options(final_fraction: f64, bootstrap: usize) -> anyhow::Result<()> {
    if !(final_fraction > 0.0 && final_fraction <= 1.0) {
        anyhow::bail!("--final-fraction {final_fraction}: must lie in (0, 1]");
    }
    if bootstrap == 0 {
        anyhow::bail!("--bootstrap must be at least 1");
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let (inputs, out, step_from, step_map, final_fraction, final_from, bootstrap, acc_norm, tasks) = match Cli::parse()
        .command
    {
        Command::Report {
            inputs,
            out,
            step_from,
            step_map,
            final_fraction,
            final_from,
            bootstrap,
            acc_norm,
            tasks,
        } => (inputs, out, step_from, step_map, final_fraction, final_from, bootstrap, acc_norm, tasks),
        Command::Pack { run, out } => {
            let p = analysis::results::pack(&run, &out)?;
            println!(
                "{}: {} files, {:.1} MB ({})",
                out.display(),
                p.files,
                p.bytes as f64 / 1e6,
                p.variants.join(", ")
            );
            return Ok(());
        }
        Command::Verify { expected, actual, tolerance } => {
            let read = |d: &PathBuf| records::read_examples(&d.join("examples.parquet"));
            let a = analysis::results::verify(&read(&expected)?, &read(&actual)?)?;
            println!(
                "{} rows at steps {:?}: {} decisions changed, max |log-likelihood difference| {:.2e} (tolerance {tolerance:.0e})",
                a.rows, a.steps, a.decisions_changed, a.max_abs_loglik_diff
            );
            if a.decisions_changed > 0 || a.max_abs_loglik_diff > tolerance {
                anyhow::bail!("{}: the rerun differs from {}", actual.display(), expected.display());
            }
            return Ok(());
        }
        Command::Suite { dir } => {
            let models = analysis::external::pythia_models(&dir)?;
            print!("{}", analysis::external::render(&models));
            return Ok(());
        }
        Command::Compare { run, bootstrap } => {
            check_options(0.2, bootstrap)?;
            let opts = analysis::Options { bootstrap, ..Default::default() };
            let (rows, diffs, inputs) = analysis::compare::compare(&run, &opts)?;
            if rows.is_empty() {
                anyhow::bail!(
                    "{}: nothing to compare (no eval-avg-k*/ or ensembled/k*/ sharing steps with eval/)",
                    run.display()
                );
            }
            let out = run.join("analysis");
            let lock = output::FolderLock::acquire(&out, "analysis compare")?;
            let mut set = output::FileSet::begin(&lock, &out)?;
            let mut df = records::frame_of(&rows)?;
            records::stage_frame(&mut set, "stability.parquet", &mut df)?;
            records::stage_frame(&mut set, "stability.csv", &mut df)?;
            let mut dd = records::frame_of(&diffs)?;
            records::stage_frame(&mut set, "differences.parquet", &mut dd)?;
            records::stage_frame(&mut set, "differences.csv", &mut dd)?;
            let prov = serde_json::json!({"inputs": inputs, "bootstrap": bootstrap, "seed": opts.seed, "family_level": analysis::claims::FAMILY_LEVEL, "git_commit": output::provenance::git_commit(), "threads": rayon::current_num_threads()});
            set.write("stability.provenance.json", serde_json::to_string_pretty(&prov)?.as_bytes())?;
            set.commit()?;
            print!("{}", analysis::compare::render(&rows, "acc"));
            println!();
            print!("{}", analysis::compare::render_differences(&diffs));
            println!("cost: forward passes per prediction relative to one checkpoint (averaging also reads k checkpoints once to build each model)");
            return Ok(());
        }
    };
    check_options(final_fraction, bootstrap)?;
    let rule = records::harness::StepRule::new(step_from.as_deref(), step_map.as_deref())?;
    let mut input = analysis::report::load_inputs(&inputs, &rule)?;
    for n in &input.notices {
        eprintln!("note: {n}");
    }
    let out = match out {
        Some(o) => o,
        None if !input.harness => inputs[0].join("analysis"),
        None => {
            anyhow::bail!("--out is required for lm-evaluation-harness outputs (the analysis is not written into them)")
        }
    };
    if !tasks.is_empty() {
        let keep = |t: &str| tasks.iter().any(|k| t.contains(k.as_str()));
        input.tasks.retain(|r| keep(&r.task));
        input.examples.retain(|r| keep(&r.task));
    }
    let opts =
        analysis::Options { final_fraction, final_from, bootstrap, use_acc_norm: acc_norm, ..Default::default() };
    let (tm, _) = analysis::report::write(&input, &out, &opts)?;
    let primary = opts.primary().name();
    print!("{}", analysis::report::render(&tm, "all", primary));
    println!();
    print!("{}", analysis::report::render(&tm, "final", primary));
    println!("\n{}\ntables written to {}", analysis::report::LEGEND, out.display());
    Ok(())
}
