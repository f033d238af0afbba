//! `analysis`: fluctuation measures of a run's downstream scores.
use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// mimalloc, not the system allocator: a harness folder's rows are parsed and freed on rayon's
/// threads, and glibc keeps what each thread's arena freed (a report of 2 tasks x 200
/// checkpoints x 5,000 examples held 1.1 GB after reading, 0.5 GB with one arena; BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    /// flat folders of results files (`..._step<N>.json`), or glob patterns; or the outputs of
    /// lighteval (details/ parquet beside results/), OLMES (task-NNN-<task>-predictions.jsonl)
    /// or llm-jp-eval (docs/harnesses.md). Harness outputs are parsed once into an ingest cache
    /// beside --out (see --cache) and analysed one task at a time.
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
        /// Also write `report.html`: the decisions and every task's trail, noise band and flip
        /// heatmap in one self-contained page that opens offline.
        #[arg(long)]
        html: bool,
        /// The ingest cache of harness outputs: each samples file's rows, parsed once, as parquet
        /// (keyed by the file's path, size and mtime, the schema and the parser version); a
        /// second report reads only the cache and parses only new or changed files
        /// [default: <out>.ingest beside the output folder].
        #[arg(long, value_name = "DIR")]
        cache: Option<PathBuf>,
        /// Parse every file again and keep no cache.
        #[arg(long, conflicts_with = "cache")]
        no_cache: bool,
        /// Check every cached file's sha256 against its source, not only its size and mtime.
        #[arg(long)]
        verify: bool,
    },
    /// Read harness outputs into the ingest cache of `analysis report --out OUT` (the same
    /// inputs and options), without analysing them: run it as each checkpoint's evaluation lands.
    /// New checkpoints' files are parsed, checked against one cached checkpoint of each task, and
    /// kept as deltas beside the task's cached panels, which are not read; the next report
    /// restores the panels with their deltas.
    Ingest {
        #[arg(required = true, value_name = "INPUT")]
        inputs: Vec<PathBuf>,
        /// The output folder of the reports (the cache is <out>.ingest beside it), or --cache.
        #[arg(long, required_unless_present = "cache")]
        out: Option<PathBuf>,
        /// The ingest cache folder [default: <out>.ingest].
        #[arg(long, value_name = "DIR")]
        cache: Option<PathBuf>,
        /// As for `analysis report`.
        #[arg(long, value_name = "REGEX")]
        step_from: Option<String>,
        /// As for `analysis report`.
        #[arg(long, value_name = "FILE")]
        step_map: Option<PathBuf>,
        /// Only tasks whose name contains one of these (comma-separated).
        #[arg(long, value_delimiter = ',')]
        tasks: Vec<String>,
        /// Check every cached file's sha256 against its source, not only its size and mtime.
        #[arg(long)]
        verify: bool,
    },
    /// Compare single checkpoints with averaged (eval-avg-k*/) and ensembled (ensembled/k*/)
    /// ones of a run, over the steps they share; writes <run>/analysis/stability.{parquet,csv}.
    Compare {
        run: PathBuf,
        #[arg(long, default_value_t = 1000)]
        bootstrap: usize,
    },
    /// Compare two or more training runs (e.g. an ablation and its baseline) scored on the same
    /// benchmark items: per task, each run's final-stage mean on the items every run scored
    /// (matched by text hash, else by example id), the difference with a paired bootstrap
    /// interval over the items, the share of final-stage checkpoint pairs in which one run beats
    /// the other, and a verdict; with more than two runs the ranking and how often one
    /// final-stage checkpoint per run reproduces it. Writes runs.{parquet,csv}, ranking.csv
    /// (more than two runs) and provenance.json into --out.
    CompareRuns {
        /// Each run: a run folder, an eval folder, or lm-evaluation-harness outputs (what
        /// `analysis report` takes as one input).
        #[arg(required = true, num_args = 2.., value_name = "RUN")]
        inputs: Vec<PathBuf>,
        /// Output folder (never one of the inputs' folders).
        #[arg(long)]
        out: PathBuf,
        /// Labels of the runs, in order (comma-separated) [default: the paths as given].
        #[arg(long, value_delimiter = ',')]
        names: Vec<String>,
        /// A regular expression over each results file's path whose one capture group is the
        /// checkpoint step (lm-evaluation-harness inputs; applies to every run).
        #[arg(long, value_name = "REGEX")]
        step_from: Option<String>,
        /// A CSV of `path,step` rows (lm-evaluation-harness inputs; applies to every run).
        #[arg(long, value_name = "FILE")]
        step_map: Option<PathBuf>,
        /// Fraction of each run's last checkpoints that form its final stage.
        #[arg(long, default_value_t = 0.2)]
        final_fraction: f64,
        /// The final stage of every run starts at this step instead.
        #[arg(long, value_name = "STEP")]
        final_from: Option<u64>,
        /// Bootstrap resamples over the shared items (one draw for every run and checkpoint).
        #[arg(long, default_value_t = 1000)]
        bootstrap: usize,
        /// Score on acc_norm instead of acc.
        #[arg(long)]
        acc_norm: bool,
        /// Only tasks whose name contains one of these (comma-separated).
        #[arg(long, value_delimiter = ',')]
        tasks: Vec<String>,
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

fn main() -> anyhow::Result<()> {
    let text = match Cli::parse().command {
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
            html,
            cache,
            no_cache,
            verify,
        } => {
            let opts = analysis::Options {
                final_fraction,
                final_from,
                bootstrap,
                use_acc_norm: acc_norm,
                ..Default::default()
            };
            let cache = analysis::report::CacheChoice { dir: cache, off: no_cache, verify };
            analysis::report::run(&inputs, out, step_from.as_deref(), step_map.as_deref(), &tasks, &opts, html, &cache)?
        }
        Command::Ingest { inputs, out, cache, step_from, step_map, tasks, verify } => {
            // with --cache alone, `out` only names the default cache, which --cache replaces
            let out = out.unwrap_or_else(|| PathBuf::from("analysis"));
            let cache = analysis::report::CacheChoice { dir: cache, off: false, verify };
            analysis::report::ingest(&inputs, &out, step_from.as_deref(), step_map.as_deref(), &tasks, &cache)?
        }
        Command::Compare { run, bootstrap } => {
            analysis::compare::write(&run, &analysis::Options { bootstrap, ..Default::default() })?
        }
        Command::CompareRuns {
            inputs,
            out,
            names,
            step_from,
            step_map,
            final_fraction,
            final_from,
            bootstrap,
            acc_norm,
            tasks,
        } => {
            let opts = analysis::Options {
                final_fraction,
                final_from,
                bootstrap,
                use_acc_norm: acc_norm,
                ..Default::default()
            };
            analysis::runs::run(&inputs, &names, &out, step_from.as_deref(), step_map.as_deref(), &tasks, &opts)?
        }
        Command::Pack { run, out } => {
            let p = analysis::results::pack(&run, &out)?;
            format!(
                "{}: {} files, {:.1} MB ({})\n",
                out.display(),
                p.files,
                p.bytes as f64 / 1e6,
                p.variants.join(", ")
            )
        }
        Command::Verify { expected, actual, tolerance } => {
            analysis::results::verify_folders(&expected, &actual, tolerance)?
        }
        Command::Suite { dir } => analysis::external::render(&analysis::external::pythia_models(&dir)?),
    };
    print!("{text}");
    Ok(())
}
