//! What the figure and table binaries share: reading a run's tables, and writing an output.
//!
//! Every binary in `src/bin/` makes one figure or table of `paper/` from the tables a run folder
//! holds (`runs/<name>/eval`, `analysis`, `eval-avg-k*`, `ensembled/k*`, `train_log.csv`).
//! [`Run`] reads them and remembers each file it read; [`Output`] writes the figure (SVG and PNG)
//! or table (Markdown and CSV) with a provenance sidecar naming the command, the git commit, the
//! run's config and the sha256 of every input. A file whose bytes would not change is left
//! alone, so timestamps and hashes move only when the inputs do.

pub mod plot;
pub mod png;
pub mod recipe;
pub mod study;

use analysis::compare::{DifferenceRow, StabilityRow};
use analysis::{ExampleMetrics, TaskMetrics};
use anyhow::{bail, Context, Result};
use records::{ExampleRecord, TaskRecord};
use run::provenance::{EvalProvenance, Input};
use run::{Method, RunDir, Variant};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::cell::RefCell;
use std::path::{Path, PathBuf};

/// The common command line of the binaries: which run to read, where to write.
#[derive(clap::Parser, Debug)]
pub struct Args {
    /// Run folder written by `just reproduce` (e.g. runs/smoke)
    #[arg(long, default_value = "runs/default")]
    pub run: PathBuf,
    /// Folder the figure or table is written to
    #[arg(long, default_value = "figures")]
    pub out: PathBuf,
    /// Folder of `pythia-<size>-deduped/` lm-evaluation-harness results (fig7, table3, table8)
    #[arg(long, default_value = "data/external/pythia-v1-zero-shot")]
    pub pythia: PathBuf,
    /// Folder of committed study runs, `results/<run>/` (`just study`; table3, table6-8, fig8)
    #[arg(long, default_value = "results")]
    pub results: PathBuf,
}

/// One row of `train_log.csv`.
#[derive(Debug, Clone, Deserialize)]
pub struct TrainLogRow {
    pub step: u64,
    pub tokens: u64,
    pub lr: f64,
    pub train_loss: Option<f64>,
    pub grad_norm: Option<f64>,
    pub val_loss: Option<f64>,
}

/// A run folder, and the list of files read from it so far.
pub struct Run {
    pub dir: PathBuf,
    read: RefCell<Vec<PathBuf>>,
}

impl Run {
    pub fn new(dir: &Path) -> Result<Run> {
        if !dir.is_dir() {
            bail!("{}: no such run folder; `just reproduce` writes one", dir.display());
        }
        let run = Run { dir: dir.to_path_buf(), read: RefCell::new(vec![]) };
        if dir.join("config.toml").is_file() {
            run.note(dir.join("config.toml"));
        }
        Ok(run)
    }

    fn note(&self, p: PathBuf) {
        self.read.borrow_mut().push(p);
    }

    /// The path of a table, which must exist.
    pub fn file(&self, rel: &str) -> Result<PathBuf> {
        let p = self.dir.join(rel);
        if !p.is_file() {
            bail!("{}: missing; the pipeline step that writes it has not run (see `just reproduce`)", p.display());
        }
        self.note(p.clone());
        Ok(p)
    }

    /// Per-(step, task) scores of one variant: `eval`, `eval-avg-k16`, `ensembled/k4`, ...
    /// The task scores of a variant (`eval/tasks.parquet` for single checkpoints).
    pub fn tasks(&self, variant: Variant) -> Result<Vec<TaskRecord>> {
        records::read_tasks(&self.file(&format!("{}/tasks.parquet", self.eval_folder(variant)))?)
    }

    /// The example rows of a variant (`eval/examples.parquet` for single checkpoints).
    pub fn examples(&self, variant: Variant) -> Result<Vec<ExampleRecord>> {
        records::read_examples(&self.file(&format!("{}/examples.parquet", self.eval_folder(variant)))?)
    }

    /// A table of the run's analysis folder (`analysis report`, `analysis compare`).
    fn analysis_file(&self, name: &str) -> Result<PathBuf> {
        self.file(&RunDir::new("").analysis().join(name).display().to_string())
    }

    /// A variant's eval folder relative to the run folder (the smoothing baseline reads the
    /// single checkpoints').
    fn eval_folder(&self, variant: Variant) -> String {
        let v = if variant.method == Method::Smoothing { Variant::SINGLE } else { variant };
        RunDir::new("").eval_of(v).expect("every method but smoothing has an eval folder").display().to_string()
    }

    /// The task metrics of accuracy (the figures' metric).
    pub fn task_metrics(&self) -> Result<Vec<TaskMetrics>> {
        Ok(self.task_metrics_all()?.into_iter().filter(|m| m.metric == "acc").collect())
    }

    /// The task metrics of every metric (acc, acc_norm, gold log-prob, ...).
    pub fn task_metrics_all(&self) -> Result<Vec<TaskMetrics>> {
        read_csv(&self.analysis_file("task_metrics.csv")?)
    }

    /// The paired differences between methods (`analysis compare`).
    pub fn differences(&self) -> Result<Vec<DifferenceRow>> {
        read_csv(&self.analysis_file("differences.csv")?)
    }

    pub fn example_metrics(&self) -> Result<Vec<ExampleMetrics>> {
        read_csv(&self.analysis_file("example_metrics.csv")?)
    }

    /// The stability table of accuracy (every method: single, smoothing, average, ensemble).
    pub fn stability(&self) -> Result<Vec<StabilityRow>> {
        Ok(read_csv::<StabilityRow>(&self.analysis_file("stability.csv")?)?
            .into_iter()
            .filter(|r| r.metric == "acc")
            .collect())
    }

    pub fn train_log(&self) -> Result<Vec<TrainLogRow>> {
        read_csv(&self.file("train_log.csv")?)
    }

    /// Every file read so far, in the order read, without repeats.
    pub fn inputs(&self) -> Vec<PathBuf> {
        let mut seen = vec![];
        for p in self.read.borrow().iter() {
            if !seen.contains(p) {
                seen.push(p.clone());
            }
        }
        seen
    }

    /// Record a file read outside the run folder (the Pythia results, a template).
    pub fn also_read(&self, p: &Path) {
        self.note(p.to_path_buf());
    }
}

/// Reads a CSV file into rows; an empty file or a bad row names the file and the line.
pub fn read_csv<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    let mut r = csv::Reader::from_path(path).with_context(|| format!("{}: cannot open", path.display()))?;
    let rows = r
        .deserialize()
        .collect::<std::result::Result<Vec<T>, _>>()
        .with_context(|| format!("{}: malformed row", path.display()))?;
    if rows.is_empty() {
        bail!("{}: no rows", path.display());
    }
    Ok(rows)
}

/// The task names of a table, sorted.
pub fn task_names<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut t: Vec<String> = names.map(str::to_string).collect();
    t.sort();
    t.dedup();
    t
}

/// `(steps, scores, stderrs)` of one task, in step order.
pub fn curve(rows: &[TaskRecord], task: &str) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut r: Vec<&TaskRecord> = rows.iter().filter(|r| r.task == task).collect();
    r.sort_by_key(|r| r.step);
    (
        r.iter().map(|r| r.step as f64).collect(),
        r.iter().map(|r| r.acc).collect(),
        r.iter().map(|r| r.acc_stderr).collect(),
    )
}

pub use analysis::external::{size_trend as pythia_size_trend, PythiaModel, SizeTrend, PYTHIA_TASKS};

/// The study's claims decided on one run's tables ([`analysis::claims`]): the windows are the
/// largest k both averaging and ensembling have and the smallest of each method; the size trend
/// is the Pythia suite's (`models`).
pub fn run_claims(run: &Run, models: &[PythiaModel]) -> Result<Vec<analysis::claims::Claim>> {
    use analysis::claims;
    use run::Method;
    let tm = run.task_metrics_all()?;
    let diffs = run.differences()?;
    let st = run.stability()?;
    let k = [16usize, 8, 4, 2]
        .into_iter()
        .find(|k| {
            st.iter().any(|r| r.method == Method::Average && r.k == *k)
                && st.iter().any(|r| r.method == Method::EnsembleMean && r.k == *k)
        })
        .with_context(|| format!("{}: averaging and ensembling share no window k", run.dir.display()))?;
    let small = |method: Method| st.iter().filter(|r| r.method == method && r.k > 1).map(|r| r.k).min().unwrap_or(k);
    let windows =
        claims::Windows { k, ensemble_small: small(Method::EnsembleMean), average_small: small(Method::Average) };
    let trend = pythia_size_trend(models);
    Ok(claims::claims(&tm, &diffs, windows, trend.pooled.as_ref(), (trend.smallest, trend.largest)))
}

/// Every `pythia-<size>-deduped/` folder under `dir` ([`analysis::external::pythia_models`]),
/// each results file recorded as an input of `run`.
pub fn pythia_models(dir: &Path, run: &Run) -> Result<Vec<PythiaModel>> {
    let models = analysis::external::pythia_models(dir)?;
    models.iter().flat_map(|m| &m.files).for_each(|f| run.also_read(f));
    Ok(models)
}

/// Where an output goes, and its provenance.
pub struct Output {
    pub dir: PathBuf,
    pub name: String,
}

impl Output {
    pub fn new(dir: &Path, name: &str) -> Result<Output> {
        std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
        Ok(Output { dir: dir.to_path_buf(), name: name.to_string() })
    }

    pub fn path(&self, ext: &str) -> PathBuf {
        self.dir.join(format!("{}.{ext}", self.name))
    }

    /// Writes the figure as `<name>.svg` and `<name>.png`, and the sidecar.
    pub fn figure(&self, fig: &impl plot::Figure, run: &Run) -> Result<()> {
        let (svg, png) = plot::render(fig)?;
        self.files(&[("svg", svg.into_bytes()), ("png", png)], run)
    }

    /// Writes the table as `<name>.md` (what the paper embeds) and `<name>.csv`, and the sidecar.
    pub fn table(&self, markdown: &str, csv: &str, run: &Run) -> Result<()> {
        self.files(&[("md", markdown.as_bytes().to_vec()), ("csv", csv.as_bytes().to_vec())], run)
    }

    /// Writes `<name>.<ext>` for each (ext, bytes), then the sidecar `<name>.provenance.json`.
    /// The files whose bytes change are written as one set, in the locked output folder.
    pub fn files(&self, files: &[(&str, Vec<u8>)], run: &Run) -> Result<()> {
        let lock = output::FolderLock::acquire(&self.dir, &self.name)?;
        let mut set = output::FileSet::begin(&lock, &self.dir)?;
        let mut outputs = vec![];
        for (ext, bytes) in files {
            if bytes.is_empty() {
                bail!("{}: nothing to write", self.path(ext).display());
            }
            let p = self.path(ext);
            let changed = !std::fs::read(&p).is_ok_and(|old| &old == bytes);
            if changed {
                set.write(&format!("{}.{ext}", self.name), bytes)?;
            }
            eprintln!("{} {}", if changed { "wrote    " } else { "unchanged" }, p.display());
            outputs.push(serde_json::json!({"path": p, "sha256": output::provenance::sha256_hex(bytes)}));
        }
        let inputs = run.inputs().iter().map(|p| Input::of(p)).collect::<Result<Vec<_>>>()?;
        // the run's training config and evaluation config, where the run folder has them
        let config = std::fs::read_to_string(run.dir.join("config.toml")).ok();
        let single = RunDir::new(&run.dir).eval_of(Variant::SINGLE).expect("single has an eval folder");
        let eval_config = EvalProvenance::read(&single).ok().map(|p| p.eval_config);
        let prov = serde_json::json!({
            "output": self.name,
            "command": std::env::args().collect::<Vec<_>>().join(" "),
            "commit": output::provenance::git_commit(),
            "run": run.dir,
            "config": config,
            "eval_config": eval_config,
            "inputs": inputs,
            "outputs": outputs,
        });
        let prov = serde_json::to_string_pretty(&prov)?;
        if !std::fs::read(self.path("provenance.json")).is_ok_and(|old| old == prov.as_bytes()) {
            set.write(&format!("{}.provenance.json", self.name), prov.as_bytes())?;
        }
        set.commit()?;
        Ok(())
    }
}

/// A Markdown table from a header and rows of cells; columns of numbers are right-aligned.
pub fn markdown_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let numeric = |c: usize| {
        rows.iter().all(|r| {
            r.get(c).is_some_and(|x| x.trim_matches('*').split('/').all(|p| p == "-" || p.parse::<f64>().is_ok()))
        })
    };
    let align: String = (0..header.len()).map(|c| if c > 0 && numeric(c) { "---:|" } else { "---|" }).collect();
    let mut s = format!("| {} |\n|{align}\n", header.join(" | "));
    for r in rows {
        s += &format!("| {} |\n", r.join(" | "));
    }
    s
}

/// A CSV text from a header and rows of cells.
pub fn csv_text(header: &[&str], rows: &[Vec<String>]) -> Result<String> {
    let mut w = csv::Writer::from_writer(vec![]);
    w.write_record(header)?;
    for r in rows {
        w.write_record(r)?;
    }
    Ok(String::from_utf8(w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))?)?)
}

/// Mean of a slice (NaN when empty): `analysis::stats::mean`, re-exported for the binaries.
pub use analysis::stats::mean;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_table_names_the_file_and_the_step() {
        let dir = tempfile::tempdir().unwrap();
        let run = Run::new(dir.path()).unwrap();
        let e = run.stability().unwrap_err().to_string();
        assert!(e.contains("analysis/stability.csv") && e.contains("just reproduce"), "{e}");
    }

    #[test]
    fn an_empty_csv_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("train_log.csv");
        std::fs::write(&p, "step,tokens,lr,train_loss,grad_norm,val_loss\n").unwrap();
        let e = read_csv::<TrainLogRow>(&p).unwrap_err().to_string();
        assert!(e.contains("train_log.csv") && e.contains("no rows"), "{e}");
    }

    #[test]
    fn markdown_tables_right_align_numbers() {
        let t = markdown_table(
            &["task", "score", "lower", "note"],
            &[vec!["copa".into(), "**0.5**".into(), "3/8".into(), "k=4".into()]],
        );
        assert_eq!(t, "| task | score | lower | note |\n|---|---:|---:|---|\n| copa | **0.5** | 3/8 | k=4 |\n");
    }
}
