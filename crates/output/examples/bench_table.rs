//! The last step of `just bench`: gathers the summaries the benchmarks wrote
//! (runs/bench/<bench>.summary.json, in the order given), prints one table, writes
//! runs/bench/summary.csv and replaces the table in BENCHMARKS.md (between its `just bench`
//! markers). Fails if a summary is missing or was written by another commit than the others.
//!
//! `bench_table --date 2026-12-05 train eval average-k4 average-k16 analysis stats`
use anyhow::{bail, Context, Result};
use output::bench::{csv, markdown, read_summary, replace_block, summary_path};
use std::path::{Path, PathBuf};

const BEGIN: &str = "<!-- just bench: begin (written by `just bench`; edits here are overwritten) -->";
const END: &str = "<!-- just bench: end -->";

fn main() -> Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut take = |flag: &str| -> Option<String> {
        let i = args.iter().position(|a| a == flag)?;
        let v = args.get(i + 1).cloned();
        args.drain(i..(i + 2).min(args.len()));
        v
    };
    let date = take("--date").unwrap_or_else(|| "undated".into());
    let dir = PathBuf::from(take("--dir").unwrap_or_else(|| "runs/bench".into()));
    let doc = PathBuf::from(take("--benchmarks").unwrap_or_else(|| "BENCHMARKS.md".into()));
    if args.is_empty() {
        bail!("usage: bench_table [--date D] [--dir runs/bench] [--benchmarks BENCHMARKS.md] BENCH...");
    }
    let (mut rows, mut commits) = (Vec::new(), Vec::new());
    for bench in &args {
        let path = summary_path(&dir, bench);
        let (r, commit) =
            read_summary(&path).with_context(|| format!("the summary of bench `{bench}` (run it first)"))?;
        rows.extend(r);
        commits.push((bench.clone(), commit));
    }
    if commits.iter().any(|(_, c)| *c != commits[0].1) {
        bail!("the summaries come from different commits, not one run: {commits:?}");
    }
    let host = output::provenance::host();
    let table = markdown(&rows);
    let block = format!(
        "Measured {date} at commit {} on {} ({} threads), every bench in one `just bench` run. \
         Each figure is a median of repetitions (min, max; xN = N repetitions); anchors and bounds \
         are measured in the same run. \"ours vs anchor\": how many times as fast as the anchor; \
         \"ours / bound\": for a rate the share of the bound reached (MFU against a matmul peak), \
         for a time how many times the bound's time (memory copy of the same bytes).\n\n{table}",
        commits[0].1,
        host["cpu"].as_str().unwrap_or("unknown"),
        host["threads"]
    );
    println!("{block}");
    output::write_atomic(&dir.join("summary.csv"), csv(&rows).as_bytes())?;
    let text = std::fs::read_to_string(&doc).with_context(|| format!("{}: cannot read", doc.display()))?;
    let new = replace_block(&text, BEGIN, END, &block).with_context(|| format!("{}", doc.display()))?;
    output::write_atomic(Path::new(&doc), new.as_bytes())?;
    eprintln!("wrote {} and the table in {}", dir.join("summary.csv").display(), doc.display());
    Ok(())
}
