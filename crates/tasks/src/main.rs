//! `tasks`: builds data/tasks/ (task files + manifest) from the unpacked packages and the corpus.
use clap::Parser;
use std::path::PathBuf;

/// Build the downstream task files from the packages that `just data` fetched.
#[derive(Parser)]
#[command(version, about)]
struct Args {
    #[arg(long, default_value = "data/raw/x")]
    raw: PathBuf,
    #[arg(long, default_value = "data/corpus/heldout.txt")]
    heldout: PathBuf,
    #[arg(long, default_value = "data/tasks")]
    out: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    for t in tasks::build::build_all(&a.raw, &a.heldout, &a.out)? {
        println!("{:<14} {:<16} {:>6} examples  chance {:.3}  sha256 {}", t.name, format!("{:?}", t.kind), t.examples, t.chance, &t.sha256[..12]);
    }
    Ok(())
}
