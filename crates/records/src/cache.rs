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
        Ok(Cache { dir: dir.to_path_buf(), _lock: lock, verify, entries, notes, parsed: 0, cached: 0, changed: false })
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
            let id = format!(
                "{}|{}|{}|{sha256}|{}|{}",
                source.display(),
                u.step,
                u.task,
                reader.version(),
                crate::TABLE_VERSION
            );
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
    pub fn commit(mut self) -> Result<(usize, usize, Vec<String>)> {
        let before = self.entries.len();
        self.entries.retain(|(source, _, _), _| source.is_file());
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
