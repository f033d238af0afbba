//! `analysis report`: reads a run's evaluation tables (or lm-evaluation-harness output folders:
//! results and per-example samples), writes the metric tables as parquet and CSV with their provenance, and renders
//! a readable summary.

use anyhow::{Context, Result};
use records::source::{Ingest, Reader};
use records::{ExampleRecord, TaskRecord};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::decide::{self, Decisions};
use crate::panel::Panel;
use crate::{analyse_panels, compare, html, ExampleMetrics, Options, TaskMetrics};
use std::collections::{BTreeMap, BTreeSet};

/// What a report was computed from.
pub struct Input {
    pub tasks: Vec<TaskRecord>,
    /// the per-example scores of every task with example rows, one panel per task (trail): the
    /// rows themselves are not kept (a harness folder's are read one task at a time)
    pub panels: BTreeMap<String, Panel>,
    pub sources: Vec<PathBuf>,
    /// lm-evaluation-harness outputs (not a run's tables)
    pub harness: bool,
    /// what the reader set aside and why (older reruns, tasks without per-example data)
    pub notices: Vec<String>,
    /// the run folder, when the input is one (its averaged and ensembled evaluations are compared
    /// in the decisions)
    pub run: Option<PathBuf>,
}

impl Input {
    /// Keeps the tasks whose name contains one of `tasks` (all if empty).
    pub fn retain_tasks(&mut self, tasks: &[String]) {
        if tasks.is_empty() {
            return;
        }
        let keep = |t: &str| tasks.iter().any(|k| t.contains(k.as_str()));
        self.tasks.retain(|r| keep(&r.task));
        self.panels.retain(|t, _| keep(t));
    }
}

/// A run's tables: `<dir>/eval/tasks.parquet` (and `examples.parquet`), or an eval folder itself.
fn run_tables(dir: &Path) -> Result<Option<Input>> {
    let Some((eval, is_run)) = eval_folder(dir) else { return Ok(None) };
    let t = eval.join("tasks.parquet");
    let e = eval.join("examples.parquet");
    let panels = if e.is_file() { Panel::all(&records::read_examples(&e)?)? } else { BTreeMap::new() };
    let mut sources = vec![t.clone()];
    if e.is_file() {
        sources.push(e);
    }
    Ok(Some(Input {
        tasks: records::read_tasks(&t)?,
        panels,
        sources,
        harness: false,
        notices: Vec::new(),
        run: is_run.then(|| dir.to_path_buf()),
    }))
}

/// A run folder (`<run>/eval/tasks.parquet`, `<run>/eval/examples.parquet`), an eval folder
/// itself, or a folder of lm-evaluation-harness results (steps from model_args or the names).
pub fn load_input(dir: &Path) -> Result<Input> {
    load_inputs(&[dir.to_path_buf()], &records::harness::StepRule::default(), &Ingest::default())
}

/// The harness readers, in the order their outputs are recognised: the layouts with their own
/// file names first, lm-evaluation-harness (whose reader also takes flat folders of `*.json`
/// results) last.
fn readers() -> Vec<Box<dyn Reader>> {
    vec![
        Box::new(records::lighteval::Lighteval),
        Box::new(records::olmes::Olmes),
        Box::new(records::llmjp::LlmJpEval),
        Box::new(records::harness::LmEval),
    ]
}

/// One run or eval folder, or a harness's outputs (lm-evaluation-harness: results and samples
/// files, folders as `lm_eval --output_path` writes them, globs), read task by task through the
/// ingest cache of `ingest` ([`records::source::load`]). Only the tasks `ingest.tasks` keeps.
pub fn load_inputs(inputs: &[PathBuf], rule: &records::harness::StepRule, ingest: &Ingest) -> Result<Input> {
    if let [dir] = inputs {
        if let Some(mut input) = run_tables(dir)? {
            input.retain_tasks(&ingest.tasks);
            return Ok(input);
        }
    }
    let what = inputs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
    let readers = readers();
    let Some(reader) = readers.iter().find(|r| inputs.iter().all(|p| r.detect(p))) else {
        // no reader claims the inputs: the lm-eval reader's error says what is missing
        let e = records::source::load_all(&records::harness::LmEval, inputs, rule, ingest).err();
        let names: Vec<&str> = readers.iter().map(|r| r.name()).collect();
        let why = e.map_or(String::new(), |e| format!(": {e:#}"));
        anyhow::bail!("{what}: neither a run with eval/tasks.parquet nor the outputs of {}{why}", names.join(", "));
    };
    let mut panels = Panels::default();
    let l = records::source::load(reader.as_ref(), inputs, rule, ingest, &mut panels)
        .with_context(|| format!("{what}: reading the {} outputs", reader.name()))?;
    let panels = panels.0;
    if l.tasks.is_empty() {
        anyhow::bail!("{what}: no task with an `acc` in any results or samples file");
    }
    let mut notices = l.notices;
    if l.parsed + l.cached + l.restored > 0 && ingest.cache.is_some() {
        let restored = if l.restored > 0 && ingest.deltas {
            format!(", {} kept in their tasks' cached panels (not read)", l.restored)
        } else if l.restored > 0 {
            format!(", {} restored with their tasks' cached panels", l.restored)
        } else {
            String::new()
        };
        notices.push(format!("ingest: {} file(s) parsed, {} read from the cache{restored}", l.parsed, l.cached));
    }
    Ok(Input { tasks: l.tasks, panels, sources: l.sources, harness: true, notices, run: None })
}

/// The panels of a harness's trails: built from their rows, or restored from the ingest cache's
/// snapshots and extended by new checkpoints' rows ([`records::source::TrailSink`]).
#[derive(Default)]
struct Panels(BTreeMap<String, Panel>);

impl records::source::TrailSink for Panels {
    fn rows(&mut self, trail: &str, rows: Vec<ExampleRecord>) -> Result<()> {
        let refs: Vec<&ExampleRecord> = rows.iter().collect();
        self.0.insert(trail.to_string(), Panel::build(trail, &refs)?);
        Ok(())
    }

    /// The panel's byte layout and this build: a snapshot made by another build (whose
    /// `Panel::build` may read rows otherwise) is built again.
    fn format(&self) -> Option<String> {
        Some(format!("analysis panel 1, build {}", build_id()))
    }

    fn save(&self, trail: &str) -> Result<Vec<u8>> {
        Ok(self.0.get(trail).with_context(|| format!("trail {trail} was not built"))?.to_bytes())
    }

    fn restore(&mut self, trail: &str, bytes: &[u8]) -> Result<()> {
        let p = Panel::from_bytes(bytes).with_context(|| format!("trail {trail}: its cached panel"))?;
        anyhow::ensure!(p.task == trail, "trail {trail}: the cached panel is of {}", p.task);
        self.0.insert(trail.to_string(), p);
        Ok(())
    }

    fn extend(&mut self, trail: &str, rows: Vec<ExampleRecord>) -> Result<()> {
        let refs: Vec<&ExampleRecord> = rows.iter().collect();
        self.merge(trail, Panel::build(trail, &refs)?)
    }

    fn extend_saved(&mut self, trail: &str, bytes: &[u8]) -> Result<()> {
        let p = Panel::from_bytes(bytes).with_context(|| format!("trail {trail}: a delta of its cached panel"))?;
        anyhow::ensure!(p.task == trail, "trail {trail}: a delta of its cached panel is of {}", p.task);
        self.merge(trail, p)
    }
}

impl Panels {
    fn merge(&mut self, trail: &str, newer: Panel) -> Result<()> {
        let old = self.0.remove(trail).with_context(|| format!("trail {trail} was not restored"))?;
        self.0.insert(trail.to_string(), old.merge(newer)?);
        Ok(())
    }
}

/// The sha256 of this executable (its first 16 hex digits), or the crate version where it cannot
/// be read.
fn build_id() -> String {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        std::env::current_exe()
            .ok()
            .and_then(|p| output::provenance::sha256_file(&p).ok())
            .map_or_else(|| env!("CARGO_PKG_VERSION").to_string(), |h| h[..16].to_string())
    })
    .clone()
}

/// Where `analysis report` keeps its ingest cache.
#[derive(Debug, Clone, Default)]
pub struct CacheChoice {
    /// the cache folder; default `<out>.ingest` beside the output folder
    pub dir: Option<PathBuf>,
    /// parse every file again, keep no cache
    pub off: bool,
    /// check every cached file's sha256, not only its size and mtime
    pub verify: bool,
}

impl CacheChoice {
    /// The cache folder for an output folder `out`; none for a run's own tables (already
    /// columnar) or when switched off.
    pub fn folder(&self, out: &Path, is_run: bool) -> Option<PathBuf> {
        if self.off || is_run {
            return None;
        }
        Some(self.dir.clone().unwrap_or_else(|| {
            let mut name = out.file_name().map_or_else(|| "analysis".into(), |n| n.to_os_string());
            name.push(".ingest");
            out.with_file_name(name)
        }))
    }
}

/// The folder holding a run's task table: `<dir>/eval` of a run (true), or `dir` itself, an
/// eval folder (false); None for anything else (harness outputs).
fn eval_folder(dir: &Path) -> Option<(PathBuf, bool)> {
    let single = run::RunDir::new(dir).eval_of(run::Variant::SINGLE).expect("single has an eval folder");
    [(single, true), (dir.to_path_buf(), false)].into_iter().find(|(eval, _)| eval.join("tasks.parquet").is_file())
}

/// The cache is never written inside the harness folders it reads.
fn refuse_cache_inside_inputs(cache: &Path, inputs: &[PathBuf]) -> Result<()> {
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let c = abs(cache);
    for i in inputs {
        let i = abs(i);
        if i.is_dir() && c.starts_with(&i) {
            anyhow::bail!(
                "{}: the ingest cache would be written inside the input {}; give --out (or --cache) outside it",
                cache.display(),
                i.display()
            );
        }
    }
    Ok(())
}

fn f(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.3}"))
}

fn ci(lo: Option<f64>, hi: Option<f64>) -> String {
    match (lo, hi) {
        (Some(a), Some(b)) => format!("[{a:.3}, {b:.3}]"),
        _ => "-".into(),
    }
}

/// `analysis report`: reads the inputs (a run folder, an eval folder or harness outputs, steps
/// by `step_from` / `step_map`), keeps the tasks whose name contains one of `tasks` (all if
/// empty), writes the analysis into `out` (default `<run>/analysis`; required for harness
/// outputs, which are never written into) and returns the text report. Notices of the readers go
/// to stderr.
#[allow(clippy::too_many_arguments)]
pub fn run(
    inputs: &[PathBuf],
    out: Option<PathBuf>,
    step_from: Option<&str>,
    step_map: Option<&Path>,
    tasks: &[String],
    opts: &Options,
    html: bool,
    cache: &CacheChoice,
) -> Result<String> {
    opts.check()?;
    let rule = records::harness::StepRule::new(step_from, step_map)?;
    let is_run = matches!(inputs, [dir] if eval_folder(dir).is_some());
    let out = match out {
        Some(o) => o,
        None if is_run => run::RunDir::new(&inputs[0]).analysis(),
        None => {
            anyhow::bail!("--out is required for harness outputs (the analysis is not written into them)")
        }
    };
    let ingest =
        Ingest { cache: cache.folder(&out, is_run), verify: cache.verify, tasks: tasks.to_vec(), deltas: false };
    if let Some(c) = &ingest.cache {
        refuse_cache_inside_inputs(c, inputs)?;
    }
    let t0 = std::time::Instant::now();
    let input = load_inputs(inputs, &rule, &ingest)?;
    for n in &input.notices {
        eprintln!("note: {n}");
    }
    let t1 = std::time::Instant::now();
    eprintln!("read in {:.1} s; analysing {} task(s) with example rows", (t1 - t0).as_secs_f64(), input.panels.len());
    let r = write(&input, &out, opts, html)?;
    eprintln!("analysed in {:.1} s", t1.elapsed().as_secs_f64());
    let primary = opts.primary().name();
    Ok(format!(
        "{}\n{}\n{}\n\n{}\ntables written to {}{}\n",
        render(&r.metrics, "all", primary),
        render(&r.metrics, "final", primary),
        LEGEND,
        r.decisions.render(),
        out.display(),
        if html { format!(", the page to {}", out.join("report.html").display()) } else { String::new() }
    ))
}

/// `analysis ingest`: reads harness outputs into the ingest cache that `analysis report` with the
/// same `out` (or `cache`) reads, without analysing them. A task whose panels are cached gets
/// its new checkpoints' files parsed, checked against one cached checkpoint, and saved as a delta
/// beside the cached panel (which is not read); the next report restores the panel with its
/// deltas and writes them back as one. Meant to run as each checkpoint's evaluation lands.
pub fn ingest(
    inputs: &[PathBuf],
    out: &Path,
    step_from: Option<&str>,
    step_map: Option<&Path>,
    tasks: &[String],
    cache: &CacheChoice,
) -> Result<String> {
    let rule = records::harness::StepRule::new(step_from, step_map)?;
    if let [dir] = inputs {
        if eval_folder(dir).is_some() {
            anyhow::bail!("{}: a run's eval tables are read as they are; there is nothing to ingest", dir.display());
        }
    }
    let Some(folder) = cache.folder(out, false) else {
        anyhow::bail!("--no-cache: analysis ingest has nothing to do without the cache");
    };
    refuse_cache_inside_inputs(&folder, inputs)?;
    let t0 = std::time::Instant::now();
    let ingest = Ingest { cache: Some(folder.clone()), verify: cache.verify, tasks: tasks.to_vec(), deltas: true };
    let input = load_inputs(inputs, &rule, &ingest)?;
    for n in &input.notices {
        eprintln!("note: {n}");
    }
    let steps: BTreeSet<u64> = input.tasks.iter().map(|t| t.step).collect();
    let names: BTreeSet<&str> = input.tasks.iter().map(|t| t.task.as_str()).collect();
    Ok(format!(
        "{} task(s), {} checkpoint(s) (steps {}-{}) in the ingest cache {}, in {:.1} s\n",
        names.len(),
        steps.len(),
        steps.first().copied().unwrap_or(0),
        steps.last().copied().unwrap_or(0),
        folder.display(),
        t0.elapsed().as_secs_f64()
    ))
}

/// The summary printed to stdout (and snapshot-tested): the primary metric's rows of a window,
/// then the other metrics' fluctuation beside it.
pub fn render(metrics: &[TaskMetrics], window: &str, primary: &str) -> String {
    let mut s = String::new();
    writeln!(s, "window: {window}, metric: {primary}").unwrap();
    writeln!(
        s,
        "{:<22} {:>5} {:>4} {:>6} {:>15} {:>6} {:>6} {:>17} {:>6} {:>6} {:>5} {:>6} {:>6} {:>6} {:>6}",
        "task",
        "ckpts",
        "n",
        "final",
        "final 95% CI",
        "chance",
        "MTV",
        "MTV 95% CI",
        "null",
        "p",
        "sig",
        "flip",
        "IS",
        "optim",
        "noise"
    )
    .unwrap();
    for m in metrics.iter().filter(|m| m.window == window && m.metric == primary) {
        let mci = match (m.mtv_ci_low, m.mtv_ci_high, m.mtv_interval.as_deref()) {
            (_, Some(b), Some("upper bound")) => format!("<= {b:.3}"),
            (a, b, _) => ci(a, b),
        };
        let null = m
            .null_ratio
            .or(m.binomial_bound_ratio)
            .filter(|r| r.is_finite())
            .map_or("-".into(), |r| format!("{r:.2}x{}", if m.null_ratio.is_none() { "*" } else { "" }));
        writeln!(
            s,
            "{:<22} {:>5} {:>4} {:>6.3} {:>15} {:>6} {:>6.3} {:>17} {:>6} {:>6} {:>5} {:>6} {:>6} {:>6} {:>6}",
            m.task,
            m.checkpoints,
            m.examples.map_or("-".into(), |n| n.to_string()),
            m.final_score,
            ci(m.final_ci_low, m.final_ci_high),
            f(m.chance),
            m.mtv,
            mci,
            null,
            f(m.null_p_value.or(m.binomial_bound_p_value)),
            m.transitions_significant.map_or("-".into(), |v| format!("{:.0}%", 100.0 * v)),
            f(m.mean_flip_rate),
            f(m.mean_instability),
            m.selection_optimism.map_or("-".into(), |v| format!("{v:+.3}")),
            m.relative_std.map_or("-".into(), |v| format!("{v:.3}")),
        )
        .unwrap();
    }
    let others: Vec<&TaskMetrics> = metrics.iter().filter(|m| m.window == window && m.metric != primary).collect();
    if !others.is_empty() {
        writeln!(s, "other metrics ({window}):").unwrap();
        writeln!(
            s,
            "{:<22} {:<13} {:>8} {:>8} {:>17} {:>6} {:>6} {:>8} {:>7}",
            "task", "metric", "final", "MTV", "MTV 95% CI", "null", "p", "noise", "ex MTV"
        )
        .unwrap();
        for m in others {
            let mci = match (m.mtv_ci_low, m.mtv_ci_high, m.mtv_interval.as_deref()) {
                (_, Some(b), Some("upper bound")) => format!("<= {b:.4}"),
                (Some(a), Some(b), _) => format!("[{a:.4}, {b:.4}]"),
                _ => "-".into(),
            };
            writeln!(
                s,
                "{:<22} {:<13} {:>8.4} {:>8.4} {:>17} {:>6} {:>6} {:>8} {:>7}",
                m.task,
                m.metric,
                m.final_score,
                m.mtv,
                mci,
                m.null_ratio.filter(|r| r.is_finite()).map_or("-".into(), |r| format!("{r:.2}x")),
                f(m.null_p_value),
                m.relative_std.map_or("-".into(), |v| format!("{v:.4}")),
                m.mean_flip_rate.map_or("-".into(), |v| format!("{v:.4}"))
            )
            .unwrap();
        }
    }
    s
}

pub const LEGEND: &str = "n: examples; final 95% CI: Wilson score interval (0/1 metrics; bootstrap over examples for the others); chance: uniform guessing; MTV: mean |score change| between consecutive checkpoints, its 95% CI bias-corrected (two-sided where the paired null is rejected, else a one-sided upper bound); null: MTV / MTV of the paired sign-flip null (each discordant example's direction a fair coin; * = independent-binomial figure, a conservative upper bound on noise, where no per-example data exists); p: the null's p-value; sig: transitions significant (exact McNemar, Benjamini-Hochberg 5%); flip: mean example flip rate (example-level MTV); IS: mean instability score of outputs; optim: selection optimism (score on the half a checkpoint was picked on minus on the other half, 200 stratified splits); noise: sd / |mean| of the window's scores (the noise of Heineman et al.'s SNR; its signal needs several model sizes: `analysis suite` gives SNR and the size trend of a suite such as data/external/pythia-v1-zero-shot).";

/// What [`write`] computed.
pub struct Report {
    pub metrics: Vec<TaskMetrics>,
    pub examples: Vec<ExampleMetrics>,
    pub decisions: Decisions,
}

/// Analyses `input` and writes task_metrics / example_metrics / decisions (.parquet, .csv),
/// `report.html` when `html` (else an earlier one is removed: the outputs of one report are one
/// set) and provenance.json into `out`, as one set (the folder is locked meanwhile).
pub fn write(input: &Input, out: &Path, opts: &Options, html: bool) -> Result<Report> {
    if input.tasks.is_empty() {
        anyhow::bail!(
            "{}: no task scores to analyse (after the --tasks filter)",
            input.sources.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        );
    }
    // the panels once, for the measures and for the decisions
    let panels = &input.panels;
    let (tm, em) = analyse_panels(&input.tasks, panels, opts)?;
    let mut notices = input.notices.clone();
    let comparison = match &input.run {
        Some(dir) if run::RunDir::new(dir).variants()?.len() > 1 => match compare::compare_full(dir, opts) {
            Ok(c) => Some(c),
            Err(e) => {
                notices.push(format!("the averaged and ensembled evaluations are left out of the decisions: {e:#}"));
                None
            }
        },
        _ => None,
    };
    let remedies = comparison.as_ref().map(|c| decide::Remedies {
        panels: &c.panels,
        shared_steps: c.shared_steps.clone(),
        rows: &c.rows,
        diffs: &c.diffs,
        null_p: &c.null_p,
    });
    let task_names: Vec<String> =
        input.tasks.iter().map(|t| t.task.clone()).collect::<BTreeSet<_>>().into_iter().collect();
    let decisions = decide::decide(panels, &task_names, &tm, remedies.as_ref(), opts);
    let lock = output::FolderLock::acquire(out, "analysis report")?;
    let mut set = output::FileSet::begin(&lock, out)?;
    let mut df = records::frame_of(&tm)?;
    records::stage_frame(&mut set, "task_metrics.parquet", &mut df)?;
    records::stage_frame(&mut set, "task_metrics.csv", &mut df)?;
    let example_tables = ["example_metrics.parquet", "example_metrics.csv"];
    if em.is_empty() {
        // the example tables of an earlier report into this folder would be stale beside these
        for name in example_tables {
            set.remove(name)?;
        }
    } else {
        let mut df = records::frame_of(&em)?;
        for name in example_tables {
            records::stage_frame(&mut set, name, &mut df)?;
        }
    }
    let mut dd = records::frame_of(&decisions.rows())?;
    records::stage_frame(&mut set, "decisions.parquet", &mut dd)?;
    records::stage_frame(&mut set, "decisions.csv", &mut dd)?;
    let git_commit = output::provenance::git_commit();
    if html {
        let page = page(input, panels, &tm, &decisions, comparison.as_ref(), &notices, &git_commit, opts);
        set.write("report.html", html::render(&page).as_bytes())?;
    } else {
        set.remove("report.html")?;
    }
    let provenance = serde_json::json!({
        "inputs": input.sources, "notices": notices, "options": {"final_fraction": opts.final_fraction, "final_from": opts.final_from, "bootstrap": opts.bootstrap, "noise_sims": opts.noise_sims, "splits": opts.splits, "seed": opts.seed, "acc_norm": opts.use_acc_norm},
        "compared": comparison.as_ref().map(|c| &c.inputs),
        "threads": rayon::current_num_threads(), "host": output::provenance::host(),
        "git_commit": git_commit,
    });
    set.write("provenance.json", serde_json::to_string_pretty(&provenance)?.as_bytes())?;
    set.commit()?;
    Ok(Report { metrics: tm, examples: em, decisions })
}

/// The HTML page of a report: per task its trail (single checkpoints with the paired-noise band,
/// and every averaged, ensembled and smoothed trail compared), its flip heatmap and its decisions.
#[allow(clippy::too_many_arguments)]
fn page<'a>(
    input: &Input,
    panels: &BTreeMap<String, Panel>,
    tm: &[TaskMetrics],
    decisions: &'a Decisions,
    comparison: Option<&compare::Comparison>,
    notices: &[String],
    git_commit: &str,
    opts: &Options,
) -> html::Page<'a> {
    let metric = opts.primary();
    let mut tasks = Vec::new();
    let mut by_task: BTreeMap<&str, Vec<&TaskRecord>> = BTreeMap::new();
    for r in &input.tasks {
        by_task.entry(&r.task).or_default().push(r);
    }
    for (task, mut rows) in by_task {
        rows.sort_by_key(|r| r.step);
        let row = |w: &str| tm.iter().find(|m| m.task == task && m.window == w && m.metric == metric.name());
        let Some(fin) = row("final") else { continue };
        let mut view = html::TaskView {
            task: task.to_string(),
            metric: metric.name().into(),
            chance: fin.chance,
            steps: rows.iter().map(|r| r.step).collect(),
            scores: rows
                .iter()
                .map(|r| if opts.use_acc_norm { r.acc_norm.unwrap_or(f64::NAN) } else { r.acc })
                .collect(),
            band: vec![None; rows.len()],
            final_from: fin.first_step,
            others: vec![],
            heatmap: None,
            facts: facts(fin),
        };
        if let Some(p) = panels.get(task) {
            if let Some(v) = p.values(metric) {
                view.steps = p.steps.clone();
                view.scores = p.scores(metric).unwrap_or_default();
                view.band = decide::noise_band(v);
                view.heatmap = html::heatmap(&p.steps, &p.ids, v, 150);
            }
        }
        if let Some(c) = comparison {
            let mut ks = BTreeSet::new();
            for (variant, ps) in &c.panels {
                if variant.method == run::Method::Single {
                    continue;
                }
                if let Some(s) = ps.get(task).and_then(|p| Some((p.steps.clone(), p.scores(metric)?))) {
                    ks.insert(variant.k);
                    view.others.push(html::Trail { label: variant.to_string(), steps: s.0, scores: s.1 });
                }
            }
            // the smoothing baseline over the compared steps, as `analysis compare` has it
            let from = view.steps.partition_point(|&s| s < c.shared_steps.first().copied().unwrap_or(0));
            for k in ks.into_iter().filter(|&k| k > 1 && k <= view.scores.len()) {
                let ma = theory::sequence::moving_average(&view.scores, k);
                let skip = from.saturating_sub(k - 1);
                view.others.push(html::Trail {
                    label: run::Variant::new(run::Method::Smoothing, k).to_string(),
                    steps: view.steps[k - 1 + skip..].to_vec(),
                    scores: ma[skip..].to_vec(),
                });
            }
        }
        tasks.push(view);
    }
    let mut provenance: Vec<(String, String)> =
        input.sources.iter().map(|p| ("input".to_string(), p.display().to_string())).collect();
    if let Some(c) = comparison {
        provenance.extend(c.inputs.iter().map(|p| ("compared".to_string(), p.display().to_string())));
    }
    provenance.push(("git commit".into(), git_commit.to_string()));
    provenance.push((
        "options".into(),
        format!(
            "final window: {}; bootstrap {}; null draws {}; seed {}; metric {}",
            opts.final_from
                .map_or(format!("last {:.0}% of the checkpoints", 100.0 * opts.final_fraction), |s| format!(
                    "from step {s}"
                )),
            opts.bootstrap,
            opts.noise_sims,
            opts.seed,
            metric.name()
        ),
    ));
    // the run folder, or the deepest folder holding every input file (an lm_eval output folder)
    let common =
        input.sources.iter().skip(1).fold(
            input.sources.first().and_then(|p| p.parent()).map(Path::to_path_buf).unwrap_or_default(),
            |acc, p| acc.ancestors().find(|a| p.starts_with(a)).map(Path::to_path_buf).unwrap_or_default(),
        );
    let title = format!("Fluctuation report: {}", input.run.as_deref().unwrap_or(&common).display());
    html::Page { title, provenance, decisions, tasks, notes: notices.to_vec() }
}

/// The facts line of a task's section, from its final-window row.
fn facts(m: &TaskMetrics) -> String {
    let mut s = format!(
        "{} checkpoints in the final stage (steps {}-{}); final score {:.3}",
        m.checkpoints, m.first_step, m.last_step, m.final_score
    );
    if let (Some(lo), Some(hi)) = (m.final_ci_low, m.final_ci_high) {
        s += &format!(" [{lo:.3}, {hi:.3}]");
    }
    if let Some(n) = m.examples {
        s += &format!(" on {n} examples");
    }
    s += &format!("; final-stage MTV {:.4}", m.mtv);
    if let (Some(r), Some(p)) = (m.null_ratio, m.null_p_value) {
        s += &format!(" ({r:.2}x its paired null, p {})", decide::format_p(p));
    }
    if let Some(f) = m.mean_flip_rate {
        s += &format!("; example flip rate {f:.3}");
    }
    if let Some(i) = m.mean_instability {
        s += &format!("; instability score {i:.3}");
    }
    s
}
