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
