//! `corpus`: cleans, deduplicates and splits the unpacked registry packages.
use clap::Parser;
use std::path::PathBuf;

/// Build the pretraining corpus from the packages that `just data` fetched and unpacked.
#[derive(Parser)]
#[command(version, about)]
struct Args {
    /// Folder holding the unpacked packages (data/raw/x).
    #[arg(long, default_value = "data/raw/x")]
    raw: PathBuf,
    /// Output folder for train.txt, validation.txt, heldout.txt and manifest.json.
    #[arg(long, default_value = "data/corpus")]
    out: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let m = corpus::build(&args.raw, &args.out)?;
    println!("{:<20} {:>6} {:>9} {:>7} {:>12}", "source", "files", "paras", "dups", "bytes");
    for s in &m.sources {
        println!("{:<20} {:>6} {:>9} {:>7} {:>12}", s.name, s.files, s.paragraphs, s.duplicates_removed, s.bytes);
    }
    for s in &m.splits {
        println!(
            "{:<12} {:>9} paragraphs {:>12} bytes  sha256 {}",
            format!("{:?}", s.split),
            s.paragraphs,
            s.bytes,
            &s.sha256[..16]
        );
    }
    Ok(())
}
