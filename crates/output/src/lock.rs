//! One writer per folder: an advisory lock on `<folder>/.lock`.
//!
//! The lock is an OS `flock`, so it is released when its holder dies however it dies (kill -9
//! included); the file names the holder (pid, command, start time) so that a refused writer can
//! say who holds it. Taking a lock cleans the folder of what dead writers left: their temp files,
//! and their staged sets (rolled forward if committed, else removed).

use anyhow::{bail, Context, Result};
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::atomic::is_temp_name;

pub const LOCK_FILE: &str = ".lock";

/// A held lock; dropping it releases the folder.
#[derive(Debug)]
pub struct FolderLock {
    dir: PathBuf,
    path: PathBuf,
    file: File,
}

fn alive(pid: u32) -> bool {
    // Linux: a live process has /proc/<pid>; elsewhere assume alive (never delete what may be live)
    !Path::new("/proc/self").exists() || Path::new("/proc").join(pid.to_string()).exists()
}

impl FolderLock {
    /// Locks `dir` (created if missing) for `command`, or refuses with the holder's name.
    pub fn acquire(dir: &Path, command: &str) -> Result<FolderLock> {
        fs::create_dir_all(dir).with_context(|| format!("{}: cannot create folder", dir.display()))?;
        let path = dir.join(LOCK_FILE);
        loop {
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .with_context(|| format!("{}: cannot open lock file", path.display()))?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    let mut holder = String::new();
                    let _ = file.read_to_string(&mut holder);
                    let holder = holder.trim();
                    bail!(
                        "{}: another writer holds this folder ({}); wait for it to finish or stop it, then run again",
                        dir.display(),
                        if holder.is_empty() { "holder unknown" } else { holder }
                    );
                }
                Err(TryLockError::Error(e)) => {
                    return Err(e).with_context(|| format!("{}: cannot lock", path.display()))
                }
            }
            // the holder we waited on may have removed the file after we opened it: retry then
            let same =
                fs::metadata(&path).ok().is_some_and(|m| m.ino() == file.metadata().map(|f| f.ino()).unwrap_or(0));
            if !same {
                continue;
            }
            let mut old = String::new();
            let _ = file.read_to_string(&mut old);
            if let Some(pid) = old.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok()) {
                if pid != std::process::id() {
                    eprintln!("note: {}: taking over the lock of pid {pid}, which is gone", dir.display());
                }
            }
            let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
            file.set_len(0)
                .and_then(|_| file.rewind())
                .and_then(|_| writeln!(file, "pid {} `{command}` since unix time {since}", std::process::id()))
                .with_context(|| format!("{}: cannot write lock file", path.display()))?;
            let lock = FolderLock { dir: dir.to_path_buf(), path, file };
            lock.recover()?;
            return Ok(lock);
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Removes the temp files of dead writers under the folder (three levels deep) and settles
    /// their staged sets; returns how many entries it cleaned.
    fn recover(&self) -> Result<usize> {
        fn walk(dir: &Path, depth: usize, n: &mut usize) -> Result<()> {
            let Ok(entries) = fs::read_dir(dir) else { return Ok(()) };
            for e in entries.flatten() {
                let p = e.path();
                let name = e.file_name().to_string_lossy().into_owned();
                let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
                match is_temp_name(&name) {
                    Some(pid) if !alive(pid) => {
                        if is_dir {
                            crate::set::settle(&p)?;
                        } else {
                            fs::remove_file(&p)
                                .with_context(|| format!("{}: cannot remove a dead writer's temp file", p.display()))?;
                        }
                        *n += 1;
                    }
                    Some(_) => {}
                    None if is_dir && depth > 0 => walk(&p, depth - 1, n)?,
                    None => {}
                }
            }
            Ok(())
        }
        let mut n = 0;
        walk(&self.dir, 2, &mut n)?;
        if n > 0 {
            eprintln!("note: {}: cleaned up {n} temp file(s) of an interrupted writer", self.dir.display());
        }
        Ok(n)
    }
}

impl Drop for FolderLock {
    fn drop(&mut self) {
        // remove while still holding the lock; a waiter that opened the old file retries
        let _ = fs::remove_file(&self.path);
        let _ = self.file.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_writer_is_refused_and_named_until_the_first_is_done() {
        let d = tempfile::tempdir().unwrap();
        let a = FolderLock::acquire(d.path(), "first").unwrap();
        let err = FolderLock::acquire(d.path(), "second").unwrap_err().to_string();
        assert!(
            err.contains("another writer")
                && err.contains(&format!("pid {}", std::process::id()))
                && err.contains("first"),
            "{err}"
        );
        drop(a);
        assert!(!d.path().join(LOCK_FILE).exists());
        let _b = FolderLock::acquire(d.path(), "second").unwrap();
    }

    #[test]
    fn a_dead_writers_lock_and_temp_files_are_taken_over() {
        let d = tempfile::tempdir().unwrap();
        // pid 4194304 is above Linux's pid_max: never alive
        fs::write(d.path().join(LOCK_FILE), "pid 4194304 `lm train` since unix time 0\n").unwrap();
        fs::create_dir_all(d.path().join("sub")).unwrap();
        fs::write(d.path().join("sub/.x.parquet.~4194304-3.tmp"), b"half").unwrap();
        fs::write(d.path().join("keep.txt"), b"keep").unwrap();
        let live = format!(".y.~{}-0.tmp", std::process::id());
        fs::write(d.path().join(&live), b"mine").unwrap();
        let lock = FolderLock::acquire(d.path(), "resume").unwrap();
        assert!(!d.path().join("sub/.x.parquet.~4194304-3.tmp").exists());
        assert!(d.path().join("keep.txt").exists() && d.path().join(&live).exists());
        assert!(fs::read_to_string(d.path().join(LOCK_FILE)).unwrap().contains("resume"));
        drop(lock);
    }
}
