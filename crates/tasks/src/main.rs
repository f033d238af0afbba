//! `tasks`: builds data/tasks/ (task files + manifest) from the unpacked packages and the corpus.
use clap::Parser;
use std::path::PathBuf;

/// Build the downstream task files from the packages that `just data` fetched.
#[derive(Parser)]
#[command(version, about)]
struct Args {
    /// Folder holding the unpacked packages (data/raw/x).
    #[arg(long, default_value = "data/raw/x")]
    raw: PathBuf,
    /// The corpus' held-out split, source of the three probes.
    #[arg(long, default_value = "data/corpus/heldout.txt")]
    heldout: PathBuf,
    /// The corpus' training split: probe examples sharing a 13-gram with it are dropped.
    #[arg(long, default_value = "data/corpus/train.txt")]
    train: PathBuf,
    /// Output folder for the task files and manifest.json.
    #[arg(long, default_value = "data/tasks")]
    out: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    for e in tasks::build::build_all(&a.raw, &a.heldout, &a.train, &a.out)? {
        let t = &e.info;
        print!(
            "{:<20} {:<16} {:>6} examples  chance {:.3}  sha256 {}",
            t.name,
            format!("{:?}", t.kind),
            t.examples,
            t.chance,
            &t.sha256[..12]
        );
        if let Some(o) = &e.train_overlap {
            print!(
                "  ({} of {} dropped for a {}-gram shared with train, {:.1}%)",
                o.removed,
                o.candidates,
                o.ngram,
                100.0 * o.share
            );
        }
        if let Some(s) = &e.sample {
            print!(
                "  (drawn from {} items; {} malformed skipped: {})",
                s.population,
                s.skipped.len(),
                s.skipped.join(", ")
            );
        }
        println!();
    }
    Ok(())
}
