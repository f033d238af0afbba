//! Where an output came from: file hashes and the git commit of the code that wrote it
//! and the machine it ran on (shared by every crate that writes outputs).

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;

/// sha256 of bytes in memory, as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// sha256 of a file's bytes, as lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut f = std::fs::File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).with_context(|| format!("{}: cannot read", path.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

/// `git rev-parse HEAD` of the working tree, with `-dirty` if it has uncommitted changes to
/// tracked files other than the versioned outputs (`figures/`, the generated `paper/paper.*`,
/// the table `just bench` writes in BENCHMARKS.md), which are written from the code, not part of it; `unknown` outside a git checkout.
pub fn git_commit() -> String {
    let run = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match run(&["rev-parse", "HEAD"]) {
        Some(c) => match run(&[
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
            ".",
            ":(exclude)figures",
            ":(exclude)paper/paper.md",
            ":(exclude)paper/paper.provenance.json",
            ":(exclude)BENCHMARKS.md",
        ]) {
            Some(s) if !s.is_empty() => format!("{c}-dirty"),
            _ => c,
        },
        None => "unknown".into(),
    }
}

/// The machine an output was computed on: threads torch/rayon may use and the CPU model, which
/// explain timings (and, for floating point, rare last-bit differences between hosts).
pub fn host() -> serde_json::Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    serde_json::json!({"cpu": cpu, "threads": threads, "os": std::env::consts::OS, "arch": std::env::consts::ARCH})
}
