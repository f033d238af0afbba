//! Injected write failures (`FLUCT_FAIL_AFTER_BYTES=N`): a byte budget for the whole process,
//! after which every write fails as on a full disk. Unset, the budget is unlimited.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

pub const ENV: &str = "FLUCT_FAIL_AFTER_BYTES";

fn budget() -> Option<&'static AtomicU64> {
    static B: OnceLock<Option<AtomicU64>> = OnceLock::new();
    B.get_or_init(|| std::env::var(ENV).ok().and_then(|v| v.trim().parse().ok()).map(AtomicU64::new)).as_ref()
}

fn full() -> io::Error {
    io::Error::new(io::ErrorKind::StorageFull, format!("no space left on device (injected by {ENV})"))
}

/// Takes up to `n` bytes from the budget; returns how many may be written.
fn take(n: u64) -> u64 {
    let Some(b) = budget() else { return n };
    let mut left = b.load(Ordering::SeqCst);
    loop {
        let t = left.min(n);
        match b.compare_exchange(left, left - t, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => return t,
            Err(now) => left = now,
        }
    }
}

/// Charges a file written by other code (a library that takes a path) against the budget.
pub fn charge(len: u64) -> io::Result<()> {
    if take(len) < len {
        Err(full())
    } else {
        Ok(())
    }
}

/// A writer that honours the budget.
pub struct Budgeted<W>(pub W);

impl<W: Write> Write for Budgeted<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let n = take(buf.len() as u64) as usize;
        if n == 0 {
            return Err(full());
        }
        self.0.write(&buf[..n])
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}
