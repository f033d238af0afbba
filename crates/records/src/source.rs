//! The contract between the harness readers and the ingest.
//!
//! A harness reader ([`Reader`]) does two things: it names the per-example files of its harness
//! under the user's inputs, each with its checkpoint step and task ([`Discovered`], [`Unit`];
//! small metadata such as results JSON files is read here), and it parses one such file into
//! rows ([`Reader::parse`], a pure function of the file's bytes and its unit). Everything else
//! is the same for every harness and lives in [`load`]: parsing in parallel, task by task (so
//! that only one task's rows are held at a time), through the ingest cache
//! ([`crate::cache`]) when one is given; refusing a task whose checkpoints score different
//! example sets; deriving task rows where a harness stored samples but no aggregate.

use anyhow::{bail, Result};
use rayon::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::harness::StepRule;
use crate::{ExampleRecord, TaskRecord};

/// One per-example file of a harness: its path, the checkpoint step and the task it holds (the
/// task as the harness names it; a generation task's filters become trails `<task>/<filter>`
/// when parsed).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Unit {
    pub path: PathBuf,
    pub step: u64,
    pub task: String,
}

/// What a reader found under the inputs.
#[derive(Debug, Default)]
pub struct Discovered {
    /// the per-example files, at most one per (step, task)
    pub units: Vec<Unit>,
    /// task rows of the harness's aggregate files (results JSON and the like), any order
    pub tasks: Vec<TaskRecord>,
    /// every file read or to be read, in path order (for the provenance)
    pub sources: Vec<PathBuf>,
    /// what was set aside and why, one line each (for stderr and the provenance)
    pub notices: Vec<String>,
}

/// The rows of one unit.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Parsed {
    /// example rows, every one at the unit's step; `task` is the trail (the unit's task, or
    /// `<task>/<filter>` for a generation task's filters)
    pub examples: Vec<ExampleRecord>,
    /// task rows the file itself holds (harnesses whose per-example file carries the aggregate)
    pub tasks: Vec<TaskRecord>,
    pub notices: Vec<String>,
}

/// A harness's outputs into records.
pub trait Reader: Sync {
    /// The harness, as users call it ("lm-evaluation-harness", "lighteval", ...).
    fn name(&self) -> &'static str;
    /// The version of [`Reader::parse`]: raised whenever it turns the same bytes into other rows,
    /// so that cached rows of an older parser are parsed again.
    fn version(&self) -> u32;
    /// Whether `input` (a file, a folder, a glob pattern) holds this harness's outputs.
    fn detect(&self, input: &Path) -> bool;
    /// The per-example files under `inputs` with their steps (by `rule` where the harness's
    /// files do not say), and the task rows of its aggregate files.
    fn discover(&self, inputs: &[PathBuf], rule: &StepRule) -> Result<Discovered>;
    /// The rows of one unit, from its bytes. Errors name the file (and line).
    fn parse(&self, unit: &Unit, bytes: &[u8]) -> Result<Parsed>;
}

/// How [`load`] reads the units.
#[derive(Debug, Default, Clone)]
pub struct Ingest {
    /// the ingest cache folder; None parses every unit
    pub cache: Option<PathBuf>,
    /// check each cached unit's sha256 against its file instead of trusting size and mtime
    pub verify: bool,
    /// keep only the tasks (trails) whose name contains one of these; all when empty
    pub tasks: Vec<String>,
    /// add new checkpoints to the cache's trail snapshots as deltas, without restoring them
    /// (`analysis ingest`): the sink is handed the new checkpoints' rows alone, as a trail of
    /// its own, and what it builds of them is saved as the delta
    pub deltas: bool,
}

impl Ingest {
    fn keeps(&self, task: &str) -> bool {
        self.tasks.is_empty() || self.tasks.iter().any(|k| task.contains(k.as_str()))
    }
}

/// What [`load`] read, less the example rows (built by its [`TrailSink`] one trail at a time).
#[derive(Debug, Default)]
pub struct Loaded {
    pub tasks: Vec<TaskRecord>,
    pub sources: Vec<PathBuf>,
    pub notices: Vec<String>,
    /// units parsed, and units read from the cache
    pub parsed: usize,
    pub cached: usize,
    /// units whose rows were not read at all: restored with their task's trail snapshot
    pub restored: usize,
}

/// What the caller builds from each trail's rows (the analysis: its panel). Where the sink can
/// write what it built as bytes ([`TrailSink::save`]), the ingest cache keeps them per task
/// ([`crate::cache::Snapshot`]): a later load restores the trails of unchanged tasks from them,
/// and extends them by the rows of new checkpoints alone.
pub trait TrailSink {
    /// A trail's rows: every checkpoint, ordered by step and example.
    fn rows(&mut self, trail: &str, rows: Vec<ExampleRecord>) -> Result<()>;
    /// The name and version of what [`TrailSink::save`] writes; None if the sink saves nothing
    /// (then every load reads every row).
    fn format(&self) -> Option<String> {
        None
    }
    /// The built trail as bytes.
    fn save(&self, _trail: &str) -> Result<Vec<u8>> {
        bail!("this sink saves nothing")
    }
    /// Restores a trail from [`TrailSink::save`]'s bytes.
    fn restore(&mut self, _trail: &str, _bytes: &[u8]) -> Result<()> {
        bail!("this sink restores nothing")
    }
    /// Adds new checkpoints' rows (ordered by step and example) to a restored trail; they score
    /// the same examples and questions as its checkpoints (checked).
    fn extend(&mut self, _trail: &str, _rows: Vec<ExampleRecord>) -> Result<()> {
        bail!("this sink extends nothing")
    }
    /// Adds what [`TrailSink::save`] wrote of later checkpoints alone (a snapshot's delta) to a
    /// restored trail.
    fn extend_saved(&mut self, _trail: &str, _bytes: &[u8]) -> Result<()> {
        bail!("this sink extends nothing")
    }
}

/// A closure as a sink that keeps nothing in the cache.
impl<F: FnMut(&str, Vec<ExampleRecord>) -> Result<()>> TrailSink for F {
    fn rows(&mut self, trail: &str, rows: Vec<ExampleRecord>) -> Result<()> {
        self(trail, rows)
    }
}

/// How a task's units are read: whole, or its snapshot restored (and extended by the units it
/// does not cover, one of its own units read beside them for the checks).
enum Plan {
    Whole,
    Snapshot {
        snap: crate::cache::Snapshot,
        new: Vec<Unit>,
        probes: Vec<Unit>,
        old: Vec<(Unit, crate::cache::Current)>,
    },
}

/// Reads a harness's outputs: discovers the units, parses them task by task in parallel
/// (through the cache of `ingest`), and hands each trail's example rows (every checkpoint,
/// ordered by step and example) to `sink`, which may keep what it needs and drop the rows; where
/// the sink saves what it built and the cache has it for the same units, the rows are not read.
/// Task rows: the aggregate files', and for a (step, trail) with samples but no aggregate row,
/// the mean of the samples. A trail whose aggregate rows cover steps without samples is analysed
/// at the task level only (a notice); one whose checkpoints score different examples, or whose
/// doc changes its options or target between checkpoints, is refused.
pub fn load(
    reader: &dyn Reader,
    inputs: &[PathBuf],
    rule: &StepRule,
    ingest: &Ingest,
    sink: &mut dyn TrailSink,
) -> Result<Loaded> {
    let d = reader.discover(inputs, rule)?;
    let mut loaded = Loaded { sources: d.sources, notices: d.notices, ..Default::default() };
    let mut by_task: BTreeMap<String, Vec<Unit>> = BTreeMap::new();
    for u in d.units {
        by_task.entry(u.task.clone()).or_default().push(u);
    }
    let mut cache = match &ingest.cache {
        Some(dir) => Some(crate::cache::Cache::open(dir, reader, ingest.verify)?),
        None => None,
    };
    // the sink's format only where a cache keeps what it builds (the analysis hashes its executable)
    let format = if cache.is_some() { sink.format() } else { None };
    // declared after the cache: dropped (joined) before it
    let mut writer = cache.as_ref().filter(|_| format.is_some()).map(|c| c.snapshot_writer(reader));
    let mut aggregate: Vec<TaskRecord> = d.tasks;
    let mut trails_seen = BTreeSet::new();
    for (task, mut units) in by_task {
        // a generation task's trails (`task/filter`) contain the task's name: filter on either
        if !ingest.keeps(&task) && !ingest.tasks.iter().any(|k| k.starts_with(&format!("{task}/"))) {
            continue;
        }
        units.sort();
        let plan = match (&mut cache, &format) {
            (Some(c), Some(f)) => plan(c, reader, &task, f, &units, ingest.deltas)?,
            _ => Plan::Whole,
        };
        let mut said = Said::default();
        let mut restored_here = 0;
        // every unit's notices, said in unit order whichever way they came
        let mut notices: Vec<(Unit, Vec<String>)> = Vec::new();
        let (to_read, snap, probes) = match plan {
            Plan::Whole => (units.clone(), None, Vec::new()),
            Plan::Snapshot { snap, new, probes, old } => {
                for (u, cur) in &old {
                    notices.push((u.clone(), cur.notices.clone()));
                    aggregate.extend(cur.tasks.iter().cloned());
                }
                restored_here = old.len() - probes.len();
                let mut read = new;
                read.extend(probes.iter().cloned());
                (read, Some(snap), probes)
            }
        };
        let read_set: BTreeSet<Unit> = to_read.iter().cloned().collect();
        let parsed: Vec<(Unit, Parsed)> = match &mut cache {
            Some(c) => c.parse_all(reader, to_read)?,
            None => to_read
                .into_par_iter()
                .map(|u| {
                    let bytes = std::fs::read(&u.path)
                        .map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", u.path.display()))?;
                    let p = reader.parse(&u, &bytes)?;
                    Ok((u, p))
                })
                .collect::<Result<_>>()?,
        };
        let mut trails: Trails = BTreeMap::new();
        let mut known: BTreeSet<Unit> = probes.iter().cloned().collect();
        split(parsed, &known, &mut notices, &mut aggregate, &mut trails)?;
        // a trail the snapshot does not have (new in the new checkpoints): the task is read whole
        let mut snap = snap;
        if let Some(s) = &snap {
            if trails.keys().any(|t| !s.trails.iter().any(|st| &st.trail == t)) {
                let rest: Vec<Unit> = units.iter().filter(|u| !read_set.contains(u)).cloned().collect();
                known.extend(rest.iter().cloned());
                let parsed = cache.as_mut().expect("a snapshot comes from the cache").parse_all(reader, rest)?;
                split(parsed, &known, &mut notices, &mut aggregate, &mut trails)?;
                restored_here = 0;
                snap = None;
            }
        }
        let probes: BTreeSet<u64> =
            if snap.is_some() { probes.iter().map(|u| u.step).collect() } else { BTreeSet::new() };
        loaded.restored += restored_here;
        notices.sort_by(|a, b| a.0.cmp(&b.0));
        for (u, ns) in notices {
            for n in ns {
                said.add(&u, n);
            }
        }
        loaded.notices.extend(said.lines(&task));
        // the trails built whole (for a new snapshot), or restored from the snapshot
        let mut built: Vec<crate::cache::SnapshotTrail> = Vec::new();
        let mut complete = true;
        let restoring = snap.as_ref().map(|s| &s.trails);
        let names: Vec<String> = match restoring {
            Some(ts) => ts.iter().map(|t| t.trail.clone()).collect(),
            None => trails.keys().cloned().collect(),
        };
        for trail in names {
            let mut per_step = trails.remove(&trail).unwrap_or_default();
            if !ingest.keeps(&trail) {
                complete = false;
                continue;
            }
            if !trails_seen.insert(trail.clone()) {
                bail!("trail {trail} comes from two tasks' files");
            }
            let stored = restoring.and_then(|ts| ts.iter().find(|t| t.trail == trail));
            let with_rows: BTreeSet<u64> = aggregate.iter().filter(|r| r.task == trail).map(|r| r.step).collect();
            let mut sampled: BTreeSet<u64> = per_step.keys().copied().collect();
            sampled.extend(stored.iter().flat_map(|t| t.steps.iter().copied()));
            if !with_rows.is_empty() && !with_rows.is_subset(&sampled) {
                let missing: Vec<String> = with_rows.difference(&sampled).map(u64::to_string).collect();
                loaded.notices.push(format!(
                    "task {trail}: no samples at step(s) {}; analysed at the task level only",
                    missing.join(", ")
                ));
                complete = false;
                continue;
            }
            // with a snapshot: its probe checkpoint stands for its others (which agreed with it
            // when it was built), so the new checkpoints are checked against it
            same_examples(&trail, &per_step)?;
            same_questions(&trail, &per_step)?;
            // the probes' rows served the checks; their checkpoints are in the snapshot already
            for s in &probes {
                per_step.remove(s);
            }
            let mut rows: Vec<ExampleRecord> = per_step.into_values().flat_map(|(_, rows)| rows).collect();
            rows.sort_by(|a, b| (a.step, &a.example_id).cmp(&(b.step, &b.example_id)));
            let derived_here = crate::summarise(&rows)?;
            let mut steps_here: Vec<u64> = rows.iter().map(|r| r.step).collect();
            steps_here.dedup();
            let mut derived = derived_here.clone();
            match stored {
                // as a delta: the new checkpoints alone, the stored panel not read
                Some(t) if ingest.deltas => {
                    if let Some(s) = steps_here.iter().find(|s| t.steps.binary_search(s).is_ok()) {
                        bail!("task {trail}: step {s} is both in the cached panel and in a new file");
                    }
                    derived.extend(t.derived.iter().cloned());
                    if !rows.is_empty() {
                        sink.rows(&trail, rows)?;
                    }
                }
                Some(t) => {
                    derived.extend(t.derived.iter().cloned());
                    sink.restore(&trail, &t.bytes)?;
                    for bytes in &t.more {
                        sink.extend_saved(&trail, bytes)?;
                    }
                    if !rows.is_empty() {
                        sink.extend(&trail, rows)?;
                    }
                }
                None => sink.rows(&trail, rows)?,
            }
            derived.sort_by_key(|t| t.step);
            for t in &derived {
                if !with_rows.contains(&t.step) {
                    aggregate.push(t.clone());
                }
            }
            let (steps, derived) = match (stored, ingest.deltas) {
                (Some(_), true) => (steps_here, derived_here),
                _ => (sampled.into_iter().collect(), derived),
            };
            built.push(crate::cache::SnapshotTrail { trail: trail.clone(), steps, derived, ..Default::default() });
        }
        // what is written: where something was read, a delta of it (`deltas`, beside a snapshot)
        // or a new base of every checkpoint; where a chain of pieces was restored, one base of it
        let read_new = snap.as_ref().is_none_or(|s| units.len() > s.units.len());
        let as_delta = ingest.deltas && snap.is_some();
        let chained = snap.as_ref().is_some_and(|s| s.piece > 1);
        let write = read_new || (chained && !as_delta);
        if let (Some(c), Some(w), Some(f), true, true) = (&cache, &mut writer, &format, complete, write) {
            let fingerprints: Option<Vec<String>> = units.iter().map(|u| c.fingerprint(u)).collect();
            if let Some(mut fps) = fingerprints {
                let (extends, piece) = match (&snap, as_delta) {
                    (Some(s), true) => {
                        let covered: BTreeSet<&String> = s.units.iter().collect();
                        fps.retain(|fp| !covered.contains(fp));
                        (Some(crate::cache::units_digest(&s.units)), s.piece)
                    }
                    _ => (None, 0),
                };
                fps.sort();
                for t in built.iter_mut().filter(|t| !(as_delta && t.steps.is_empty())) {
                    t.bytes = sink.save(&t.trail)?;
                }
                let snap = crate::cache::Snapshot {
                    version: crate::cache::SNAPSHOT_VERSION,
                    format: f.clone(),
                    task: task.clone(),
                    units: fps,
                    trails: built,
                    extends,
                    piece,
                };
                w.write(snap)?;
            }
        }
    }
    if let Some(mut w) = writer {
        w.finish()?;
    }
    if let Some(c) = cache {
        let notes;
        (loaded.parsed, loaded.cached, notes) = c.commit(reader)?;
        loaded.notices.extend(notes);
    }
    aggregate.retain(|t| ingest.keeps(&t.task));
    aggregate.sort_by(|a, b| (a.step, &a.task).cmp(&(b.step, &b.task)));
    if let Some(w) = aggregate.windows(2).find(|w| (w[0].step, &w[0].task) == (w[1].step, &w[1].task)) {
        bail!("task {} has two aggregate scores at step {}", w[0].task, w[0].step);
    }
    loaded.tasks = aggregate;
    Ok(loaded)
}

/// Rows by trail, then by step (with the file they came from).
type Trails = BTreeMap<String, BTreeMap<u64, (PathBuf, Vec<ExampleRecord>)>>;

/// Sorts parsed units' rows into their trails; their notices and task rows are taken, but for the
/// units in `known` (whose parse results came with a snapshot).
fn split(
    parsed: Vec<(Unit, Parsed)>,
    known: &BTreeSet<Unit>,
    notices: &mut Vec<(Unit, Vec<String>)>,
    aggregate: &mut Vec<TaskRecord>,
    trails: &mut Trails,
) -> Result<()> {
    for (u, p) in parsed {
        if !known.contains(&u) {
            notices.push((u.clone(), p.notices));
            aggregate.extend(p.tasks);
        }
        let mut per: BTreeMap<String, Vec<ExampleRecord>> = BTreeMap::new();
        for r in p.examples {
            if r.step != u.step {
                bail!("{}: a row of step {} in the file of step {}", u.path.display(), r.step, u.step);
            }
            per.entry(r.task.clone()).or_default().push(r);
        }
        for (trail, rows) in per {
            let at = trails.entry(trail.clone()).or_default();
            if let Some((other, _)) = at.get(&u.step) {
                bail!("{}: trail {trail} at step {} is also in {}", u.path.display(), u.step, other.display());
            }
            at.insert(u.step, (u.path.clone(), rows));
        }
    }
    Ok(())
}

/// Whether `task`'s snapshot can stand for some of its units: every unit it was built from is
/// still there and current, and it is not empty. Then the units it does not cover are read, and
/// for each trail one cached unit holding it (a probe) for the checks of the new ones.
fn plan(
    c: &mut crate::cache::Cache,
    reader: &dyn Reader,
    task: &str,
    format: &str,
    units: &[Unit],
    deltas: bool,
) -> Result<Plan> {
    let Some(snap) = c.snapshot(reader, task, format, deltas) else { return Ok(Plan::Whole) };
    let current = c.current_all(reader, units)?;
    let covered: BTreeSet<&str> = snap.units.iter().map(String::as_str).collect();
    let mut old = Vec::new();
    let mut new = Vec::new();
    for (u, cur) in units.iter().zip(current) {
        match cur {
            Some(cur) if covered.contains(cur.fingerprint.as_str()) => old.push((u.clone(), cur)),
            _ => new.push(u.clone()),
        }
    }
    if old.len() != snap.units.len() || old.is_empty() {
        return Ok(Plan::Whole);
    }
    // per trail, the first cached unit holding it (a unit holds the trails at its step)
    let mut probes: BTreeSet<Unit> = BTreeSet::new();
    if !new.is_empty() {
        for t in &snap.trails {
            if let Some((u, _)) = old.iter().find(|(u, _)| t.steps.binary_search(&u.step).is_ok()) {
                probes.insert(u.clone());
            }
        }
    }
    Ok(Plan::Snapshot { snap, new, probes: probes.into_iter().collect(), old })
}

/// The notices of one task's files, said once: a notice that repeats for every checkpoint's
/// file but for the file's path (and step) is one line naming the first file and how many more.
#[derive(Default)]
struct Said {
    /// by the notice with its file and step taken out: the first notice and how many files
    by_form: BTreeMap<String, (String, usize)>,
    order: Vec<String>,
}

impl Said {
    fn add(&mut self, u: &Unit, notice: String) {
        let form =
            notice.replace(&u.path.display().to_string(), "<file>").replace(&format!("step {}", u.step), "step <step>");
        match self.by_form.get_mut(&form) {
            Some((_, n)) => *n += 1,
            None => {
                self.order.push(form.clone());
                self.by_form.insert(form, (notice, 1));
            }
        }
    }

    fn lines(self, task: &str) -> Vec<String> {
        let mut by_form = self.by_form;
        self.order
            .into_iter()
            .map(|f| {
                let (first, n) = by_form.remove(&f).unwrap();
                if n == 1 {
                    first
                } else {
                    format!("{first} (and the same in {} more files of task {task})", n - 1)
                }
            })
            .collect()
    }
}

/// Decides a generation trail's correctness, the same for every harness: the first of
/// `preferred` that every row stores, else the first stored metric (in the first row's order)
/// that is 0/1 on every row; each row is correct where it is >= 1 (`correct`, `correct_norm`
/// and `gold_is_greedy` alike). Returns the metric used, or None (the rows are left as they
/// were; [`undecided`] says so).
pub fn decide_generation(rows: &mut [ExampleRecord], preferred: &[&str]) -> Option<String> {
    let stored = |n: &str| rows.iter().all(|r| r.score(n).is_some());
    let binary = |n: &str| rows.iter().all(|r| r.score(n).is_some_and(|x| x == 0.0 || x == 1.0));
    let decider = match preferred.iter().find(|n| stored(n)) {
        Some(n) => n.to_string(),
        None => rows.first()?.score_names.iter().find(|n| binary(n))?.clone(),
    };
    for r in rows.iter_mut() {
        let ok = r.score(&decider).is_some_and(|x| x >= 1.0);
        (r.correct, r.correct_norm, r.gold_is_greedy) = (ok, ok, ok);
    }
    Some(decider)
}

/// The notice of a generation trail [`decide_generation`] could not decide.
pub fn undecided(path: &Path, trail: &str) -> String {
    format!(
        "{}: generation task {trail} stores no exact_match or other 0/1 metric on every example; no per-example analysis (its aggregate scores are analysed at the task level where they have an acc, else it is left out)",
        path.display()
    )
}

/// [`load`] holding every example row (small inputs, tests).
pub fn load_all(
    reader: &dyn Reader,
    inputs: &[PathBuf],
    rule: &StepRule,
    ingest: &Ingest,
) -> Result<(Loaded, Vec<ExampleRecord>)> {
    let mut all = Vec::new();
    let loaded = load(reader, inputs, rule, ingest, &mut |_: &str, rows: Vec<ExampleRecord>| {
        all.extend(rows);
        Ok(())
    })?;
    all.sort_by(|a, b| (a.step, &a.task, &a.example_id).cmp(&(b.step, &b.task, &b.example_id)));
    Ok((loaded, all))
}

/// Refuses a trail whose checkpoints score different examples (a run cut short, a filtered
/// rerun, mixed-up folders): the error names the file and step that differ from the first, and
/// a few of the missing and extra example ids.
pub fn same_examples(task: &str, per_step: &BTreeMap<u64, (PathBuf, Vec<ExampleRecord>)>) -> Result<()> {
    let mut it = per_step.iter();
    let Some((first_step, (first_path, first_rows))) = it.next() else { return Ok(()) };
    let first: BTreeSet<&str> = first_rows.iter().map(|r| r.example_id.as_str()).collect();
    if first.len() != first_rows.len() {
        let mut seen = BTreeSet::new();
        let dup = first_rows.iter().find(|r| !seen.insert(r.example_id.as_str())).unwrap();
        bail!("{}: example {} of task {task} appears twice", first_path.display(), dup.example_id);
    }
    for (step, (path, rows)) in it {
        let ids: BTreeSet<&str> = rows.iter().map(|r| r.example_id.as_str()).collect();
        if ids.len() != rows.len() {
            let mut seen = BTreeSet::new();
            let dup = rows.iter().find(|r| !seen.insert(r.example_id.as_str())).unwrap();
            bail!("{}: example {} of task {task} appears twice", path.display(), dup.example_id);
        }
        if ids != first {
            let few = |s: Vec<&&str>| {
                let n = s.len();
                let shown: Vec<&str> = s.into_iter().take(3).copied().collect();
                format!("{n} ({}{})", shown.join(", "), if n > 3 { ", ..." } else { "" })
            };
            let missing: Vec<&&str> = first.difference(&ids).collect();
            let extra: Vec<&&str> = ids.difference(&first).collect();
            bail!(
                "{}: task {task} at step {step} scores other examples than at step {first_step} ({}): missing {}, extra {}; the checkpoints would be compared on different example sets",
                path.display(),
                first_path.display(),
                few(missing),
                few(extra)
            );
        }
    }
    Ok(())
}

/// Refuses a trail whose doc has another number of options, another target or other text (its
/// item hash, where the harness stores one) at one checkpoint than at an earlier one: its
/// checkpoints would be compared on different questions (a changed task version, a mixed-up
/// folder). The error names both files, the doc and both steps.
pub fn same_questions(task: &str, per_step: &BTreeMap<u64, (PathBuf, Vec<ExampleRecord>)>) -> Result<()> {
    let mut first: BTreeMap<&str, (usize, u32, u64, &Path, &Vec<String>)> = BTreeMap::new();
    // the first text hash each doc was given (where the harness stores one)
    let mut texts: BTreeMap<&str, (&str, u64, &Path)> = BTreeMap::new();
    let prefix = format!("{task}/");
    let doc = |r: &ExampleRecord| r.example_id.strip_prefix(&prefix).unwrap_or(&r.example_id).to_string();
    for (&step, (path, rows)) in per_step {
        for r in rows {
            let seen = first.entry(&r.example_id).or_insert((r.logliks.len(), r.gold, step, path, &r.targets));
            if r.is_generation() && seen.4 != &r.targets {
                bail!(
                    "{}: doc {} of task {task} has target {:?} at step {step}, but target {:?} at step {} ({}): the checkpoints would be compared on different questions",
                    path.display(),
                    doc(r),
                    r.targets,
                    seen.4,
                    seen.2,
                    seen.3.display()
                );
            }
            if (seen.0, seen.1) != (r.logliks.len(), r.gold) {
                bail!(
                    "{}: doc {} of task {task} has {} options and target {} at step {step}, but {} options and target {} at step {} ({}): the checkpoints would be compared on different questions",
                    path.display(),
                    doc(r),
                    r.logliks.len(),
                    r.gold,
                    seen.0,
                    seen.1,
                    seen.2,
                    seen.3.display()
                );
            }
            // other text with the same options and target (said after them: more specific)
            if !r.item_hash.is_empty() {
                let seen = texts.entry(&r.example_id).or_insert((&r.item_hash, step, path));
                if seen.0 != r.item_hash {
                    bail!(
                        "{}: doc {} of task {task} has other text (item hash) at step {step} than at step {} ({}): the checkpoints would be compared on different questions",
                        path.display(),
                        doc(r),
                        seen.1,
                        seen.2.display()
                    );
                }
            }
        }
    }
    Ok(())
}
