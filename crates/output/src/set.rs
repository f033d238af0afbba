//! Several files of one folder replaced as a whole.
//!
//! The files are written into a staging folder `<dir>/.staging.~<pid>-<n>.tmp/`; `commit` syncs
//! them, writes a `COMMIT` marker, then renames each into `<dir>`. A writer killed before the
//! marker leaves only the staging folder, which the next lock holder removes (the old files are
//! untouched); killed after it, the next holder finishes the renames. Either way readers see the
//! old set or the new one, never a mix, once the folder has been locked again.

use anyhow::{bail, Context, Result};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::atomic::{parent_of, raw_via, raw_with, sync_dir, temp_path, write_atomic};
use crate::lock::FolderLock;

const MARKER: &str = "COMMIT";

/// A set of new files for one folder, staged until [`FileSet::commit`].
pub struct FileSet {
    dir: PathBuf,
    staging: PathBuf,
    names: Vec<String>,
    /// files of an earlier set that this one does not have: removed on commit
    removed: Vec<String>,
    done: bool,
}

/// How the marker lists a file the set removes (a staged name never starts with it).
const REMOVED: &str = "- ";

impl FileSet {
    /// Starts a set for `dir`, which must lie inside the folder `lock` holds.
    pub fn begin(lock: &FolderLock, dir: &Path) -> Result<FileSet> {
        if !dir.starts_with(lock.dir()) {
            bail!("{}: not inside the locked folder {}", dir.display(), lock.dir().display());
        }
        fs::create_dir_all(dir).with_context(|| format!("{}: cannot create folder", dir.display()))?;
        let staging = temp_path(&dir.join("staging"));
        fs::create_dir(&staging).with_context(|| format!("{}: cannot create staging folder", staging.display()))?;
        Ok(FileSet { dir: dir.to_path_buf(), staging, names: Vec::new(), removed: Vec::new(), done: false })
    }

    fn stage(&mut self, name: &str) -> Result<PathBuf> {
        if name.contains('/')
            || name == MARKER
            || name.starts_with(REMOVED)
            || self.names.iter().chain(&self.removed).any(|n| n == name)
        {
            bail!("{}: `{name}` is not a new plain file name of this set", self.dir.display());
        }
        self.names.push(name.to_string());
        Ok(self.staging.join(name))
    }

    /// Errors name the file as it will be called once committed.
    fn named<T>(&self, name: &str, r: Result<T>) -> Result<T> {
        r.with_context(|| format!("{}: cannot write", self.dir.join(name).display()))
    }

    pub fn write(&mut self, name: &str, bytes: &[u8]) -> Result<()> {
        let p = self.stage(name)?;
        let r = raw_with(&p, |w| Ok(w.write_all(bytes)?));
        self.named(name, r)
    }

    pub fn write_with(&mut self, name: &str, fill: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
        let p = self.stage(name)?;
        let r = raw_with(&p, fill);
        self.named(name, r)
    }

    /// For libraries that write to a path themselves.
    pub fn write_via(&mut self, name: &str, write: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
        let p = self.stage(name)?;
        let r = raw_via(&p, write);
        self.named(name, r)
    }

    /// Removes the folder's file `name` (if there is one) when the set commits, in the same
    /// step as the new files go in: an output an earlier set had and this one has not.
    pub fn remove(&mut self, name: &str) -> Result<()> {
        if name.contains('/') || name == MARKER || self.names.iter().chain(&self.removed).any(|n| n == name) {
            bail!("{}: `{name}` is not a plain file name outside this set", self.dir.display());
        }
        self.removed.push(name.to_string());
        Ok(())
    }

    /// The staged copy of a file already written to this set (to hash it before commit).
    pub fn staged(&self, name: &str) -> PathBuf {
        self.staging.join(name)
    }

    /// Moves every staged file into the folder, replacing the old ones.
    pub fn commit(mut self) -> Result<Vec<PathBuf>> {
        let removed = self.removed.iter().map(|n| format!("{REMOVED}{n}"));
        let list: Vec<String> = self.names.iter().cloned().chain(removed).collect();
        write_atomic(&self.staging.join(MARKER), list.join("\n").as_bytes())?;
        sync_dir(&self.staging);
        settle(&self.staging)?;
        self.done = true;
        Ok(self.names.iter().map(|n| self.dir.join(n)).collect())
    }
}

impl Drop for FileSet {
    fn drop(&mut self) {
        if !self.done {
            let _ = fs::remove_dir_all(&self.staging);
        }
    }
}

/// Finishes a staged folder left by a writer: rolled forward if it was committed, else removed.
pub(crate) fn settle(staging: &Path) -> Result<()> {
    let dir = parent_of(staging);
    if let Ok(list) = fs::read_to_string(staging.join(MARKER)) {
        for name in list.lines().filter(|l| !l.is_empty()) {
            if let Some(gone) = name.strip_prefix(REMOVED) {
                match fs::remove_file(dir.join(gone)) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(e).with_context(|| format!("{}: cannot remove", dir.join(gone).display()))
                    }
                    _ => continue,
                }
            }
            let from = staging.join(name);
            if from.exists() {
                fs::rename(&from, dir.join(name))
                    .with_context(|| format!("{}: cannot move into place", dir.join(name).display()))?;
            }
        }
        sync_dir(dir);
    }
    fs::remove_dir_all(staging).with_context(|| format!("{}: cannot remove staging folder", staging.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_replaces_all_files_or_none() {
        let d = tempfile::tempdir().unwrap();
        let lock = FolderLock::acquire(d.path(), "t").unwrap();
        let mut s = FileSet::begin(&lock, d.path()).unwrap();
        s.write("a.csv", b"a1").unwrap();
        s.write("b.csv", b"b1").unwrap();
        assert!(!d.path().join("a.csv").exists());
        s.commit().unwrap();
        assert_eq!(fs::read(d.path().join("b.csv")).unwrap(), b"b1");
        // a failing set leaves the old files and no staging folder
        let mut s = FileSet::begin(&lock, d.path()).unwrap();
        s.write("a.csv", b"a2").unwrap();
        let err = s.write_with("b.csv", |_| anyhow::bail!("disk full")).unwrap_err();
        assert!(err.to_string().starts_with(&format!("{}: cannot write", d.path().join("b.csv").display())), "{err}");
        drop(s);
        assert_eq!(fs::read(d.path().join("a.csv")).unwrap(), b"a1");
        let names: Vec<_> = fs::read_dir(d.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 3, "{names:?}"); // a.csv, b.csv, .lock
    }

    /// A set removes the files of an earlier set it does not have, on commit and not before; a
    /// committed marker's removals are redone by the next lock holder.
    #[test]
    fn a_set_removes_what_it_no_longer_has() {
        let d = tempfile::tempdir().unwrap();
        let lock = FolderLock::acquire(d.path(), "t").unwrap();
        let mut s = FileSet::begin(&lock, d.path()).unwrap();
        s.write("a.csv", b"a1").unwrap();
        s.write("old.csv", b"o1").unwrap();
        s.commit().unwrap();
        let mut s = FileSet::begin(&lock, d.path()).unwrap();
        s.write("a.csv", b"a2").unwrap();
        s.remove("old.csv").unwrap();
        s.remove("never.csv").unwrap();
        assert!(s.remove("a.csv").is_err() && s.write("old.csv", b"x").is_err() && s.write("- x", b"x").is_err());
        assert!(d.path().join("old.csv").exists(), "nothing removed before the commit");
        s.commit().unwrap();
        assert_eq!(fs::read(d.path().join("a.csv")).unwrap(), b"a2");
        assert!(!d.path().join("old.csv").exists());
        // a set dropped uncommitted removes nothing
        fs::write(d.path().join("old.csv"), b"o2").unwrap();
        let mut s = FileSet::begin(&lock, d.path()).unwrap();
        s.remove("old.csv").unwrap();
        drop(s);
        assert!(d.path().join("old.csv").exists());
        drop(lock);
        // a committed marker left by a killed writer: its removal is done by the next holder
        let staging = d.path().join(".staging.~4194305-0.tmp");
        fs::create_dir(&staging).unwrap();
        fs::write(staging.join("a.csv"), b"a3").unwrap();
        fs::write(staging.join(MARKER), "a.csv\n- old.csv").unwrap();
        let _lock = FolderLock::acquire(d.path(), "t").unwrap();
        assert_eq!(fs::read(d.path().join("a.csv")).unwrap(), b"a3");
        assert!(!d.path().join("old.csv").exists() && !staging.exists());
    }

    #[test]
    fn a_committed_set_is_rolled_forward_and_an_uncommitted_one_back() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("a.csv"), b"old").unwrap();
        let committed = d.path().join(".staging.~4194304-0.tmp");
        fs::create_dir(&committed).unwrap();
        fs::write(committed.join("a.csv"), b"new").unwrap();
        fs::write(committed.join(MARKER), b"a.csv").unwrap();
        let open = d.path().join(".staging.~4194304-1.tmp");
        fs::create_dir(&open).unwrap();
        fs::write(open.join("b.csv"), b"half").unwrap();
        let _lock = FolderLock::acquire(d.path(), "t").unwrap();
        assert_eq!(fs::read(d.path().join("a.csv")).unwrap(), b"new");
        assert!(!committed.exists() && !open.exists() && !d.path().join("b.csv").exists());
    }
}
