//! The ingest cache: each per-example file of a harness parsed once, its rows kept as parquet.
//!
//! A cache folder holds `manifest.json` and one `units/<key>.parquet` per parsed file (the
//! example table of [`crate::examples_frame`], zstd). A manifest entry names its source (the
//! canonical path, the step and task of its unit), the source's size, mtime and sha256, the
//! reader and its parser version, the table schema version, the parquet file, and the task rows
//! and notices the parse gave. A unit is read from the cache when an entry of the same source,
//! step and task has the file's size and mtime (with `verify`: its sha256, hashed again) and
//! the current parser and schema versions; otherwise it is parsed again, with a notice when an
//! entry existed (the source changed, or the parser did). New parquet files get fresh names and
//! the manifest is replaced last (temp file and rename), so the cache is updated as a set: a
//! crash leaves the old manifest and its files intact (unreferenced files are removed at the
//! next commit). The folder is locked while open ([`output::FolderLock`]): two reports on one
//! cache are refused.
//!
//! Beside the units, `trails/<key>.snap` keeps what the caller built from each task's rows (the
//! analysis's panels, [`crate::source::TrailSink`]) with the fingerprints of the units it was
//! built from (source, step, task, sha256, parser and schema versions): a task whose units are
//! all unchanged is restored from it without reading a row, and one that gained checkpoints is
//! restored and extended by the new units' rows alone. A snapshot (one file per reader and task)
//! is used only where its fingerprints match the units (checked on read), so it is written
//! (atomically) as soon as it is built, before the manifest; one that does not match is built
//! again.
//!
//! A snapshot may be a chain: the base `<key>.snap` and deltas `<key>.<n>.snap` (n = 1, 2, ...),
//! each holding only the checkpoints its units added, built from their rows alone, and naming
//! the units of the chain it extends (a digest of their fingerprints): `analysis ingest` adds a
//! new checkpoint this way without reading the base. The chain is read in order up to the first
//! delta that does not extend what came before (left over from an interrupted write, ignored and
//! later removed); a load that restores a chain of several pieces writes it back as one base.

use anyhow::{bail, Context, Result};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::source::{Parsed, Reader, Unit};
use crate::TaskRecord;

const MANIFEST: &str = "manifest.json";
const UNITS: &str = "units";
const TRAILS: &str = "trails";
/// The layout of a trail snapshot (its header; the built trails are the sink's bytes).
/// 2: chains of a base and deltas (`extends`).
pub(crate) const SNAPSHOT_VERSION: u32 = 2;
/// The layout of the manifest itself.
const MANIFEST_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Entry {
    source: PathBuf,
    step: u64,
    task: String,
    size: u64,
    mtime_ns: u128,
    sha256: String,
    reader: String,
    parser_version: u32,
    schema_version: u32,
    /// the parquet file under `units/`; empty when the file gave no example rows
    file: String,
    rows: usize,
    tasks: Vec<TaskRecord>,
    notices: Vec<String>,
}

/// The file name stem of the snapshots of `reader`'s `task`.
fn snapshot_key(reader: &str, task: &str) -> String {
    output::provenance::sha256_hex(format!("{reader}|{task}").as_bytes())[..32].to_string()
}

/// Where piece `piece` of the snapshot of `reader`'s `task` lives under `trails`: the base
/// (piece 0) `<key>.snap`, the deltas `<key>.<piece>.snap`.
fn snapshot_file(trails: &Path, reader: &str, task: &str, piece: usize) -> PathBuf {
    let key = snapshot_key(reader, task);
    match piece {
        0 => trails.join(format!("{key}.snap")),
        n => trails.join(format!("{key}.{n}.snap")),
    }
}

/// Removes the deltas of `reader`'s `task` from the `from`-th on.
fn remove_deltas(trails: &Path, reader: &str, task: &str, from: usize) -> Result<()> {
    let prefix = format!("{}.", snapshot_key(reader, task));
    for f in std::fs::read_dir(trails).with_context(|| format!("{}: cannot list", trails.display()))? {
        let p = f?.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let n = name.strip_prefix(&prefix).and_then(|r| r.strip_suffix(".snap")).and_then(|n| n.parse::<usize>().ok());
        if n.is_some_and(|n| n >= from) {
            std::fs::remove_file(&p).with_context(|| format!("{}: cannot remove", p.display()))?;
        }
    }
    Ok(())
}

/// What a delta names as the chain it extends: a digest of the chain's unit fingerprints.
pub(crate) fn units_digest(units: &[String]) -> String {
    let mut sorted: Vec<&str> = units.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    output::provenance::sha256_hex(sorted.join("\n").as_bytes())
}

/// Writes snapshots (compressed, temp file and rename) on a thread of its own, so that the next
/// task is read meanwhile; one snapshot waits at most. [`SnapshotWriter::finish`] joins it and
/// returns its first error; dropping it joins it too (before the cache and its lock go).
pub(crate) struct SnapshotWriter {
    tx: Option<std::sync::mpsc::SyncSender<Snapshot>>,
    handle: Option<std::thread::JoinHandle<Result<()>>>,
}

impl SnapshotWriter {
    fn spawn(trails: PathBuf, reader: String) -> SnapshotWriter {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Snapshot>(1);
        let handle = std::thread::spawn(move || -> Result<()> {
            std::fs::create_dir_all(&trails).with_context(|| format!("{}: cannot create", trails.display()))?;
            for snap in rx {
                let header = serde_json::to_vec(&snap)?;
                let mut raw =
                    Vec::with_capacity(header.len() + snap.trails.iter().map(|t| t.bytes.len() + 8).sum::<usize>() + 8);
                crate::frames::put(&mut raw, &header);
                for t in &snap.trails {
                    crate::frames::put(&mut raw, &t.bytes);
                }
                drop(snap.trails);
                let packed = zstd::bulk::compress(&raw, 1)?;
                output::write_atomic(&snapshot_file(&trails, &reader, &snap.task, snap.piece), &packed)?;
                if snap.piece == 0 {
                    // the deltas the new base includes, and any left over beyond them
                    remove_deltas(&trails, &reader, &snap.task, 1)?;
                }
            }
            Ok(())
        });
        SnapshotWriter { tx: Some(tx), handle: Some(handle) }
    }

    /// Hands a snapshot to the writer (waits while it is busy with an earlier one).
    pub(crate) fn write(&mut self, snap: Snapshot) -> Result<()> {
        let sent = self.tx.as_ref().is_some_and(|tx| tx.send(snap).is_ok());
        if !sent {
            self.finish()?;
            bail!("the snapshot writer has stopped");
        }
        Ok(())
    }

    /// Waits for every snapshot handed over to be written.
    pub(crate) fn finish(&mut self) -> Result<()> {
        self.tx = None;
        match self.handle.take().map(|h| h.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => bail!("the snapshot writer panicked"),
            None => Ok(()),
        }
    }
}

impl Drop for SnapshotWriter {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// What identifies a unit's rows: its source, step and task, the source's content and the
/// parser and schema that read it (the key of its snapshot's units and of its parquet file's name).
fn fingerprint(source: &Path, step: u64, task: &str, sha256: &str, parser: u32, schema: u32) -> String {
    format!("{}|{step}|{task}|{sha256}|{parser}|{schema}", source.display())
}

impl Entry {
    fn fingerprint(&self) -> String {
        fingerprint(&self.source, self.step, &self.task, &self.sha256, self.parser_version, self.schema_version)
    }
}

/// A unit whose cached entry is current: its fingerprint and what its parse gave besides rows.
#[derive(Debug, Clone)]
pub struct Current {
    pub fingerprint: String,
    pub tasks: Vec<TaskRecord>,
    pub notices: Vec<String>,
}

/// One built trail of a snapshot.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SnapshotTrail {
    pub trail: String,
    pub steps: Vec<u64>,
    /// the task rows derived from its samples (where the harness stored no aggregate)
    pub derived: Vec<TaskRecord>,
    /// the sink's bytes
    #[serde(skip)]
    pub bytes: Vec<u8>,
    /// the sink's bytes of the deltas that add checkpoints to it, in order (read from a chain)
    #[serde(skip)]
    pub more: Vec<Vec<u8>>,
}

/// What a task's rows were built into, and from which units.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Snapshot {
    pub version: u32,
    /// the sink's own format ([`crate::source::TrailSink::format`])
    pub format: String,
    pub task: String,
    /// the fingerprints of the units, sorted (of a delta: the units it adds; read from a chain:
    /// every piece's)
    pub units: Vec<String>,
    pub trails: Vec<SnapshotTrail>,
    /// of a delta: the [`units_digest`] of the chain it extends; None for a base
    pub extends: Option<String>,
    /// where it is written: 0 the base, n the n-th delta; read from a chain: how many pieces
    #[serde(default)]
    pub piece: usize,
}

impl Snapshot {
    /// Adds a delta read after it (its units, and each trail's new checkpoints); false, and
    /// nothing added, if the delta has a trail it lacks or a checkpoint it already has.
    fn extend(&mut self, delta: Snapshot) -> bool {
        let fits = delta.trails.iter().all(|d| {
            d.steps.is_empty()
                || self
                    .trails
                    .iter()
                    .any(|t| t.trail == d.trail && d.steps.iter().all(|s| t.steps.binary_search(s).is_err()))
        });
        if !fits {
            return false;
        }
        for d in delta.trails.into_iter().filter(|d| !d.steps.is_empty()) {
            let t = self.trails.iter_mut().find(|t| t.trail == d.trail).expect("checked above");
            t.steps.extend(d.steps);
            t.steps.sort_unstable();
            t.derived.extend(d.derived);
            t.more.push(d.bytes);
        }
        self.units.extend(delta.units);
        self.units.sort();
        self.piece += 1;
        true
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Manifest {
    version: u32,
    entries: Vec<Entry>,
}

/// An open cache folder (locked), collecting the entries of this run until [`Cache::commit`].
pub struct Cache {
    dir: PathBuf,
    _lock: output::FolderLock,
    verify: bool,
    /// by (source, step, task)
    entries: BTreeMap<(PathBuf, u64, String), Entry>,
    notes: Vec<String>,
    parsed: usize,
    cached: usize,
    changed: bool,
    /// snapshots found in another format (another build of the caller, an older layout)
    other_format: usize,
}

fn mtime_ns(meta: &std::fs::Metadata) -> u128 {
    meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos())
}

impl Cache {
    /// Opens (or creates) the cache folder `dir` for `reader`'s units, locking it.
    pub fn open(dir: &Path, reader: &dyn Reader, verify: bool) -> Result<Cache> {
        std::fs::create_dir_all(dir.join(UNITS))
            .with_context(|| format!("{}: cannot create the ingest cache", dir.display()))?;
        let lock = output::FolderLock::acquire(dir, "the ingest cache of analysis report")?;
        let mut notes = Vec::new();
        let path = dir.join(MANIFEST);
        let manifest: Manifest = if path.is_file() {
            let text = std::fs::read_to_string(&path).with_context(|| format!("{}: cannot read", path.display()))?;
            match serde_json::from_str::<Manifest>(&text) {
                Ok(m) if m.version == MANIFEST_VERSION => m,
                Ok(m) => {
                    notes.push(format!(
                        "{}: manifest version {} (this build writes {MANIFEST_VERSION}); every file is parsed again",
                        path.display(),
                        m.version
                    ));
                    Manifest::default()
                }
                Err(e) => {
                    notes.push(format!("{}: unreadable manifest ({e}); every file is parsed again", path.display()));
                    Manifest::default()
                }
            }
        } else {
            Manifest::default()
        };
        let entries = manifest
            .entries
            .into_iter()
            .filter(|e| e.reader == reader.name())
            .map(|e| ((e.source.clone(), e.step, e.task.clone()), e))
            .collect();
        Ok(Cache {
            dir: dir.to_path_buf(),
            _lock: lock,
            verify,
            entries,
            notes,
            parsed: 0,
            cached: 0,
            changed: false,
            other_format: 0,
        })
    }

    /// The rows of every unit: from the cache where its entry is current, else parsed (in
    /// parallel) and added to the cache.
    pub fn parse_all(&mut self, reader: &dyn Reader, units: Vec<Unit>) -> Result<Vec<(Unit, Parsed)>> {
        let notes = Mutex::new(Vec::new());
        let this: &Cache = self;
        let results: Vec<(Unit, Parsed, Option<Entry>)> = units
            .into_par_iter()
            .map(|u| {
                let source =
                    std::fs::canonicalize(&u.path).with_context(|| format!("{}: cannot resolve", u.path.display()))?;
                let meta = std::fs::metadata(&source).with_context(|| format!("{}: cannot stat", u.path.display()))?;
                let key = (source.clone(), u.step, u.task.clone());
                if let Some(e) = this.entries.get(&key) {
                    match this.current(e, reader, &meta, &u)? {
                        Ok(()) => match this.read_entry(e) {
                            Ok(p) => return Ok((u, p, None)),
                            Err(err) => notes.lock().unwrap().push(format!(
                                "{}: its cached rows are unreadable ({err:#}); parsed again",
                                u.path.display()
                            )),
                        },
                        Err(why) => notes.lock().unwrap().push(format!("{}: {why}; parsed again", u.path.display())),
                    }
                }
                let bytes = std::fs::read(&u.path).with_context(|| format!("{}: cannot read", u.path.display()))?;
                let sha256 = output::provenance::sha256_hex(&bytes);
                let p = reader.parse(&u, &bytes)?;
                let entry = this.store(&u, source, &meta, sha256, reader, &p)?;
                Ok((u, p, Some(entry)))
            })
            .collect::<Result<_>>()?;
        self.notes.extend(notes.into_inner().unwrap());
        let mut out = Vec::with_capacity(results.len());
        for (u, p, entry) in results {
            match entry {
                Some(e) => {
                    self.parsed += 1;
                    self.changed = true;
                    self.entries.insert((e.source.clone(), e.step, e.task.clone()), e);
                }
                None => self.cached += 1,
            }
            out.push((u, p));
        }
        Ok(out)
    }

    /// For each unit, its entry's fingerprint and parse results where the entry is current (no
    /// row read); None where the unit must be parsed (new, changed, or cached by another parser).
    pub fn current_all(&self, reader: &dyn Reader, units: &[Unit]) -> Result<Vec<Option<Current>>> {
        units
            .par_iter()
            .map(|u| {
                let Ok(source) = std::fs::canonicalize(&u.path) else { return Ok(None) };
                let Ok(meta) = std::fs::metadata(&source) else { return Ok(None) };
                let Some(e) = self.entries.get(&(source, u.step, u.task.clone())) else { return Ok(None) };
                Ok(self.current(e, reader, &meta, u)?.ok().map(|()| Current {
                    fingerprint: e.fingerprint(),
                    tasks: e.tasks.clone(),
                    notices: e.notices.clone(),
                }))
            })
            .collect()
    }

    /// The fingerprint of a unit [`Cache::parse_all`] has read or parsed.
    pub fn fingerprint(&self, u: &Unit) -> Option<String> {
        let source = std::fs::canonicalize(&u.path).ok()?;
        self.entries.get(&(source, u.step, u.task.clone())).map(Entry::fingerprint)
    }

    /// The snapshot of `task`'s trails in the sink's `format`, if one is there and readable (an
    /// unreadable one is a note, and built again): its base with the deltas that extend it, in
    /// order (`piece` says how many pieces were read; each trail's `more` holds the deltas' bytes).
    /// With `headers_only` the trails' bytes are left empty and not read (each file's first frame
    /// is decompressed alone): what a delta needs of the chain it extends.
    pub fn snapshot(&mut self, reader: &dyn Reader, task: &str, format: &str, headers_only: bool) -> Option<Snapshot> {
        let trails = self.dir.join(TRAILS);
        let path = snapshot_file(&trails, reader.name(), task, 0);
        if !path.is_file() {
            return None;
        }
        let read = |path: &Path| -> Result<Snapshot> {
            if headers_only {
                let mut stream = zstd::stream::read::Decoder::new(std::fs::File::open(path)?)?;
                // a header names units and steps: far below 1 GB
                return Ok(serde_json::from_slice(&crate::frames::read_frame(&mut stream, 1 << 30)?)?);
            }
            let bytes = zstd::decode_all(std::fs::File::open(path)?)?;
            let mut cursor = crate::frames::Cursor::new(&bytes);
            let mut snap: Snapshot = serde_json::from_slice(cursor.frame()?)?;
            for t in &mut snap.trails {
                t.bytes = cursor.frame()?.to_vec();
            }
            cursor.finish()?;
            Ok(snap)
        };
        let usable = |s: &Snapshot| s.version == SNAPSHOT_VERSION && s.format == format && s.task == task;
        let mut base = match read(&path) {
            Ok(s) if usable(&s) && s.extends.is_none() => s,
            Ok(_) => {
                self.other_format += 1;
                return None;
            }
            Err(e) => {
                self.notes.push(format!("{}: unreadable trail snapshot ({e:#}); built again", path.display()));
                return None;
            }
        };
        base.piece = 1;
        loop {
            let path = snapshot_file(&trails, reader.name(), task, base.piece);
            if !path.is_file() {
                break;
            }
            let delta = match read(&path) {
                Ok(d) if usable(&d) && d.extends.as_deref() == Some(units_digest(&base.units).as_str()) => Some(d),
                // left over from an interrupted write, or unreadable: its units are read again.
                // (The digest is the simple rule, "a delta extends the chain it was built on"; a
                // delta's rows are its own units', content-addressed, so what it can guard
                // beyond `extend`'s refusal of a step twice is only that rule itself.)
                _ => None,
            };
            if !delta.is_some_and(|d| base.extend(d)) {
                // it and any after it can never extend this chain (the lock is held)
                if let Err(e) = remove_deltas(&trails, reader.name(), task, base.piece) {
                    self.notes.push(format!("{e:#}"));
                }
                break;
            }
        }
        Some(base)
    }

    /// A writer of this cache's snapshots, on a thread of its own.
    pub(crate) fn snapshot_writer(&self, reader: &dyn Reader) -> SnapshotWriter {
        SnapshotWriter::spawn(self.dir.join(TRAILS), reader.name().to_string())
    }

    /// Whether an entry still stands for its source: Ok(Ok) if so, Ok(Err(why)) if not.
    fn current(
        &self,
        e: &Entry,
        reader: &dyn Reader,
        meta: &std::fs::Metadata,
        u: &Unit,
    ) -> Result<std::result::Result<(), String>> {
        if e.parser_version != reader.version() || e.schema_version != crate::TABLE_VERSION {
            return Ok(Err(format!(
                "cached by parser version {} and schema {}, this build has {} and {}",
                e.parser_version,
                e.schema_version,
                reader.version(),
                crate::TABLE_VERSION
            )));
        }
        if e.size != meta.len() || e.mtime_ns != mtime_ns(meta) {
            return Ok(Err("changed since it was cached (size or mtime)".into()));
        }
        if !e.file.is_empty() && !self.dir.join(UNITS).join(&e.file).is_file() {
            return Ok(Err(format!("its cached rows ({}) are missing", e.file)));
        }
        if self.verify {
            let sha = output::provenance::sha256_file(&u.path)?;
            if sha != e.sha256 {
                return Ok(Err("its sha256 differs from the cached one (same size and mtime)".into()));
            }
        }
        Ok(Ok(()))
    }

    fn read_entry(&self, e: &Entry) -> Result<Parsed> {
        let examples = if e.file.is_empty() {
            Vec::new()
        } else {
            let path = self.dir.join(UNITS).join(&e.file);
            let rows = crate::read_examples(&path)?;
            if rows.len() != e.rows {
                bail!("{}: {} rows, the manifest says {}", path.display(), rows.len(), e.rows);
            }
            rows
        };
        Ok(Parsed { examples, tasks: e.tasks.clone(), notices: e.notices.clone() })
    }

    /// Writes a parsed unit's rows under a fresh name and returns its entry.
    fn store(
        &self,
        u: &Unit,
        source: PathBuf,
        meta: &std::fs::Metadata,
        sha256: String,
        reader: &dyn Reader,
        p: &Parsed,
    ) -> Result<Entry> {
        let file = if p.examples.is_empty() {
            String::new()
        } else {
            let id = fingerprint(&source, u.step, &u.task, &sha256, reader.version(), crate::TABLE_VERSION);
            let name = format!("{}.parquet", &output::provenance::sha256_hex(id.as_bytes())[..32]);
            let mut df = crate::examples_frame(&p.examples)?;
            crate::write_frame(&self.dir.join(UNITS).join(&name), &mut df)?;
            name
        };
        Ok(Entry {
            source,
            step: u.step,
            task: u.task.clone(),
            size: meta.len(),
            mtime_ns: mtime_ns(meta),
            sha256,
            reader: reader.name().to_string(),
            parser_version: reader.version(),
            schema_version: crate::TABLE_VERSION,
            file,
            rows: p.examples.len(),
            tasks: p.tasks.clone(),
            notices: p.notices.clone(),
        })
    }

    /// Replaces the manifest (the commit point), drops entries whose source is gone, removes
    /// the files no entry names, and returns (units parsed, units read from the cache) and the
    /// cache's notes.
    pub fn commit(mut self, reader: &dyn Reader) -> Result<(usize, usize, Vec<String>)> {
        if self.other_format > 0 {
            self.notes.push(format!(
                "{} task(s): the cached panels were made by another build (or an older layout); built again from the cached files",
                self.other_format
            ));
        }
        let before = self.entries.len();
        self.entries.retain(|(source, _, _), _| source.is_file());
        // the snapshots of tasks no entry has any more
        let tasks: std::collections::BTreeSet<&str> = self.entries.values().map(|e| e.task.as_str()).collect();
        let kept: std::collections::BTreeSet<String> = tasks.iter().map(|t| snapshot_key(reader.name(), t)).collect();
        if let Ok(dir) = std::fs::read_dir(self.dir.join(TRAILS)) {
            for f in dir {
                let p = f?.path();
                let key = p.file_name().and_then(|n| n.to_str()).and_then(|n| n.split('.').next()).unwrap_or("");
                if p.extension().is_some_and(|x| x == "snap") && !kept.contains(key) {
                    std::fs::remove_file(&p).with_context(|| format!("{}: cannot remove", p.display()))?;
                }
            }
        }
        if self.changed || self.entries.len() != before || !self.dir.join(MANIFEST).is_file() {
            let m = Manifest { version: MANIFEST_VERSION, entries: self.entries.values().cloned().collect() };
            output::write_atomic(&self.dir.join(MANIFEST), serde_json::to_string(&m)?.as_bytes())?;
        }
        let named: std::collections::BTreeSet<&str> = self.entries.values().map(|e| e.file.as_str()).collect();
        let units = self.dir.join(UNITS);
        for f in std::fs::read_dir(&units).with_context(|| format!("{}: cannot list", units.display()))? {
            let p = f?.path();
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.ends_with(".parquet") && !named.contains(name) {
                std::fs::remove_file(&p).with_context(|| format!("{}: cannot remove", p.display()))?;
            }
        }
        Ok((self.parsed, self.cached, std::mem::take(&mut self.notes)))
    }
}
