//! Single files written whole or not at all.

use anyhow::{Context, Result};
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::fault::{self, Budgeted};

const TEMP_MARK: &str = ".~";
const TEMP_END: &str = ".tmp";

/// A temp path beside `path`, unique to this process and call: `.<name>.~<pid>-<n>.tmp`.
pub(crate) fn temp_path(path: &Path) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("out");
    let n = N.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".{name}{TEMP_MARK}{}-{n}{TEMP_END}", std::process::id()))
}

/// The pid that made a temp name of [`temp_path`], if `name` is one.
pub fn is_temp_name(name: &str) -> Option<u32> {
    let rest = name.strip_suffix(TEMP_END)?;
    let (_, owner) = rest.rsplit_once(TEMP_MARK)?;
    let (pid, n) = owner.split_once('-')?;
    n.parse::<u64>().ok()?;
    pid.parse().ok()
}

pub(crate) fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// fsync of a folder, so a rename inside it survives a power cut (best effort where the
/// platform cannot open folders).
pub(crate) fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Moves a finished temp file into place.
fn finish(tmp: &Path, path: &Path) -> Result<()> {
    fs::rename(tmp, path).with_context(|| format!("{}: cannot rename into place", path.display()))?;
    sync_dir(parent_of(path));
    Ok(())
}

/// Writes `contents` to `path` through a temp file and a rename: a crash or a full disk never
/// leaves half a file, and the previous file stays intact on error.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<()> {
    write_atomic_with(path, |w| Ok(w.write_all(contents)?))
}

/// Like [`write_atomic`], with the bytes produced by `fill` into a buffered writer.
pub fn write_atomic_with(path: &Path, fill: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    raw_with(path, fill).with_context(|| format!("{}: cannot write", path.display()))
}

/// For libraries that write to a path themselves (libtorch, safetensors): `write` is given a
/// temp path to fill; the result is checked, synced and renamed to `path`.
pub fn write_atomic_via(path: &Path, write: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    raw_via(path, write).with_context(|| format!("{}: cannot write", path.display()))
}

/// [`write_atomic_with`] with the error as it came (the caller names the file).
pub(crate) fn raw_with(path: &Path, fill: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    through_temp(path, |tmp| {
        let f = OpenOptions::new().write(true).create_new(true).open(tmp)?;
        let mut w = BufWriter::with_capacity(1 << 20, Budgeted(f));
        fill(&mut w)?;
        let f = w.into_inner().map_err(|e| e.into_error())?.0;
        Ok(f.sync_all()?)
    })
}

/// [`write_atomic_via`] with the error as it came (the caller names the file).
pub(crate) fn raw_via(path: &Path, write: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    through_temp(path, |tmp| {
        write(tmp)?;
        let f = File::open(tmp)?;
        fault::charge(f.metadata()?.len())?;
        Ok(f.sync_all()?)
    })
}

/// Runs `fill` on a fresh temp path beside `path`, then renames it into place; on error the
/// temp file is removed.
fn through_temp(path: &Path, fill: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let dir = parent_of(path);
    fs::create_dir_all(dir).with_context(|| format!("{}: cannot create folder", dir.display()))?;
    let tmp = temp_path(path);
    match fill(&tmp) {
        Ok(()) => finish(&tmp, path),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_are_recognised_with_their_pid() {
        let t = temp_path(Path::new("a/b/tasks.csv"));
        let name = t.file_name().unwrap().to_str().unwrap();
        assert_eq!(is_temp_name(name), Some(std::process::id()));
        assert_eq!(t.parent(), Some(Path::new("a/b")));
        assert_eq!(is_temp_name("tasks.csv"), None);
        assert_eq!(is_temp_name("x.tmp"), None);
        assert_ne!(temp_path(Path::new("x")), temp_path(Path::new("x")));
    }

    #[test]
    fn a_failed_write_keeps_the_old_file_and_leaves_no_temp() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f.txt");
        write_atomic(&p, b"old").unwrap();
        let err = write_atomic_with(&p, |w| {
            w.write_all(b"half")?;
            anyhow::bail!("boom")
        })
        .unwrap_err();
        assert!(format!("{err:#}").contains("f.txt: cannot write"), "{err:#}");
        assert_eq!(fs::read(&p).unwrap(), b"old");
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
        write_atomic_via(&p, |t| Ok(fs::write(t, b"new")?)).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"new");
        assert!(write_atomic_via(&p, |_| anyhow::bail!("lib failed")).is_err());
        assert_eq!(fs::read(&p).unwrap(), b"new");
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
    }
}
