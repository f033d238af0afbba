//! How every command of this workspace writes its outputs, so that data is never lost:
//!
//! - [`write_atomic`] / [`write_atomic_with`] / [`write_atomic_via`]: one file through a temp
//!   name unique to the process (`.<name>.~<pid>-<n>.tmp`), fsync, rename, fsync of the folder;
//!   on error the temp file is removed and the message names the file that was being written;
//! - [`FileSet`]: several files of one folder replaced as a whole (staged in a temp folder, a
//!   commit marker, then moved in; a crash after the marker is rolled forward, before it back);
//! - [`FolderLock`]: one writer per run, eval or output folder (an advisory `flock` on
//!   `<folder>/.lock` naming the holder's pid; a lock of a dead process is taken over, and its
//!   temp files are cleaned up);
//! - [`provenance`]: hashes, git commit and host facts every output records;
//! - [`bench`]: the one shape of every benchmark's headline rows (`just bench`'s table).
//!
//! Write failures can be injected for tests: with `FLUCT_FAIL_AFTER_BYTES=N` in the environment,
//! every write of the process fails (as a full disk does) once N bytes in total have been written.

mod atomic;
pub mod bench;
mod fault;
mod lock;
pub mod provenance;
mod set;

pub use atomic::{is_temp_name, write_atomic, write_atomic_via, write_atomic_with};
pub use lock::FolderLock;
pub use provenance::{git_commit, sha256_file, sha256_hex};
pub use set::FileSet;

/// Removes `dir` and every folder under it that holds no file, deepest first; a folder with any
/// file in it (or under it) is kept. For a command that created its output folder and was then
/// refused an input: it leaves no empty folder behind, and never removes what was written.
pub fn remove_empty_dirs(dir: &std::path::Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_empty_dirs(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir); // fails, and keeps it, unless it is empty
}

#[cfg(test)]
mod remove_empty_dirs_tests {
    #[test]
    fn only_empty_folders_go() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("out");
        std::fs::create_dir_all(out.join("k4/deeper")).unwrap();
        std::fs::create_dir_all(out.join("k16")).unwrap();
        std::fs::write(out.join("k16/step.json"), b"{}").unwrap();
        super::remove_empty_dirs(&out);
        assert!(!out.join("k4").exists() && out.join("k16/step.json").is_file());
        std::fs::remove_file(out.join("k16/step.json")).unwrap();
        super::remove_empty_dirs(&out);
        assert!(!out.exists());
    }
}
