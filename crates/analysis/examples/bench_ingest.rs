//! `bench_ingest`: `analysis report` on an lm-eval-shaped folder (scripts/make_lm_eval_fixture.py
//! with `--tasks`), cold (no ingest cache), warm (every file cached) and incremental (one new
//! checkpoint's files to parse, the rest cached), `analysis ingest` of a new checkpoint (a delta
//! beside the cached panels) and the report after it, against a plain pandas script that reads
//! the same JSON lines and computes only task MTV and flip rates (scripts/bench_ingest_pandas.py).
//! Each repetition runs them side by side (interleaved); each is a child process whose time
//! and peak RSS (wait4's ru_maxrss) are measured, and `analysis report`'s own split of its time
//! (reading vs analysing, printed on stderr) is kept. Writes runs/bench/ingest-<label>.summary.json.
//!
//! usage: bench_ingest <folder> <label> [reps]

use anyhow::{ensure, Context, Result};
use output::bench::{Reference, Row, Spread};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// One child run: wall seconds, peak RSS in MB, its stderr.
struct Run {
    seconds: f64,
    rss_mb: f64,
    stderr: String,
}

fn run(cmd: &mut Command) -> Result<Run> {
    let t = Instant::now();
    let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().context("spawn")?;
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut err, &mut s).map(|_| s)
    });
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    ensure!(pid > 0, "wait4 failed: {}", std::io::Error::last_os_error());
    let seconds = t.elapsed().as_secs_f64();
    let stderr = reader.join().unwrap()?;
    ensure!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "{cmd:?} failed:\n{stderr}");
    Ok(Run { seconds, rss_mb: usage.ru_maxrss as f64 / 1024.0, stderr })
}

/// `read in X s` from a report's stderr.
fn read_seconds(stderr: &str) -> Result<f64> {
    let line = stderr.lines().find(|l| l.starts_with("read in ")).context("no `read in` line")?;
    Ok(line["read in ".len()..].split(' ').next().unwrap().parse()?)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    ensure!(args.len() >= 3, "usage: bench_ingest <folder> <label> [reps]");
    let folder = PathBuf::from(&args[1]);
    let label = &args[2];
    let reps: usize = args.get(3).map_or(Ok(3), |s| s.parse())?;
    let work = PathBuf::from(format!("runs/bench/ingest-{label}-work"));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    let (out, cache) = (work.join("report"), work.join("report.ingest"));
    // the last checkpoint's folder, held back before an incremental run
    let mut ckpts: Vec<PathBuf> = std::fs::read_dir(&folder)
        .with_context(|| format!("{}: cannot list", folder.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    ckpts.retain(|p| p.is_dir());
    ckpts.sort();
    let last = ckpts.last().context("no checkpoint folders")?.clone();
    let held = work.join("held");
    let lines: usize = std::fs::read_dir(&last)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .map(|p| std::fs::read(p).map(|b| b.iter().filter(|&&c| c == b'\n').count()))
        .sum::<std::io::Result<usize>>()?
        * ckpts.len();
    let bytes: u64 = du(&folder)?;
    let report = |extra: &[&str]| {
        let mut c = Command::new("target/release/analysis");
        c.arg("report").arg(&folder).arg("--out").arg(&out).args(extra);
        c
    };
    let leave_and_return = || -> Result<()> {
        std::fs::rename(&last, &held)?;
        let gone = run(&mut report(&[]));
        std::fs::rename(&held, &last)?;
        gone.map(drop)
    };
    let (mut cold, mut warm, mut incr, mut pandas) = (vec![], vec![], vec![], vec![]);
    let (mut ingested, mut after) = (vec![], vec![]);
    for rep in 0..reps {
        let _ = std::fs::remove_dir_all(&cache);
        let c = run(&mut report(&[]))?;
        let w = run(&mut report(&[]))?;
        // the newest checkpoint leaves, the cache forgets it, it arrives again: a report
        leave_and_return()?;
        let i = run(&mut report(&[]))?;
        ensure!(i.stderr.contains("file(s) parsed") && !i.stderr.contains(" 0 file(s) parsed"), "{}", i.stderr);
        // and again: `analysis ingest` (a delta beside the cached panels), then a report
        leave_and_return()?;
        let g = run(Command::new("target/release/analysis").arg("ingest").arg(&folder).arg("--out").arg(&out))?;
        ensure!(g.stderr.contains("kept in their tasks' cached panels (not read)"), "{}", g.stderr);
        let a = run(&mut report(&[]))?;
        ensure!(a.stderr.contains(" 0 file(s) parsed"), "{}", a.stderr);
        let p = run(Command::new(".venv/bin/python").arg("scripts/bench_ingest_pandas.py").arg(&folder))?;
        eprintln!(
            "rep {rep}: cold {:.1} s ({:.1} s reading, {:.0} MB), warm {:.1} s ({:.1} s reading, {:.0} MB), incremental {:.1} s ({:.1} s reading), pandas {:.1} s ({:.0} MB)",
            c.seconds,
            read_seconds(&c.stderr)?,
            c.rss_mb,
            w.seconds,
            read_seconds(&w.stderr)?,
            w.rss_mb,
            i.seconds,
            read_seconds(&i.stderr)?,
            p.seconds,
            p.rss_mb
        );
        eprintln!(
            "rep {rep}: ingest of one new checkpoint {:.2} s ({:.0} MB), the report after it {:.1} s",
            g.seconds, g.rss_mb, a.seconds
        );
        cold.push(c);
        warm.push(w);
        incr.push(i);
        ingested.push(g);
        after.push(a);
        pandas.push(p);
    }
    let spread = |v: &[Run], f: &dyn Fn(&Run) -> f64| Spread::of(&v.iter().map(f).collect::<Vec<_>>());
    let secs = |r: &Run| r.seconds;
    let reading = |r: &Run| read_seconds(&r.stderr).unwrap();
    let rss = |r: &Run| r.rss_mb;
    let pandas_s = spread(&pandas, &secs).median;
    let what = format!("{} lines ({:.1} GB)", lines, bytes as f64 / 1e9);
    let row = |measure: String, unit: &str, ours: Spread, anchor: Option<(&str, f64)>| Row {
        bench: format!("ingest-{label}"),
        measure,
        unit: unit.into(),
        higher_is_better: false,
        ours,
        anchor: anchor.map(|(n, m)| Reference { name: n.into(), median: m }),
        bound: None,
        goal: None,
    };
    let rows = vec![
        row(format!("report cold, {what}"), "s", spread(&cold, &secs), Some(("pandas MTV + flips", pandas_s))),
        row(format!("report warm, {what}"), "s", spread(&warm, &secs), Some(("pandas MTV + flips", pandas_s))),
        row(format!("report, one new checkpoint, {what}"), "s", spread(&incr, &secs), None),
        row(format!("analysis ingest, one new checkpoint, {what}"), "s", spread(&ingested, &secs), None),
        row(format!("report after that ingest, {what}"), "s", spread(&after, &secs), None),
        row(format!("reading cold (parse + cache), {what}"), "s", spread(&cold, &reading), None),
        row(format!("reading warm (cache), {what}"), "s", spread(&warm, &reading), None),
        row(format!("reading, one new checkpoint, {what}"), "s", spread(&incr, &reading), None),
        row(
            format!("peak RSS cold, {what}"),
            "MB",
            spread(&cold, &rss),
            Some(("pandas MTV + flips", spread(&pandas, &rss).median)),
        ),
        row(format!("peak RSS warm, {what}"), "MB", spread(&warm, &rss), None),
    ];
    let details = serde_json::json!({
        "folder": folder, "lines": lines, "bytes": bytes, "checkpoints": ckpts.len(), "reps": reps,
        "threads": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "cold_s": cold.iter().map(secs).collect::<Vec<_>>(), "warm_s": warm.iter().map(secs).collect::<Vec<_>>(),
        "incremental_s": incr.iter().map(secs).collect::<Vec<_>>(),
        "ingest_one_new_s": ingested.iter().map(secs).collect::<Vec<_>>(), "report_after_ingest_s": after.iter().map(secs).collect::<Vec<_>>(),
        "pandas_s": pandas.iter().map(secs).collect::<Vec<_>>(),
        "cold_rss_mb": cold.iter().map(rss).collect::<Vec<_>>(), "warm_rss_mb": warm.iter().map(rss).collect::<Vec<_>>(),
        "pandas_rss_mb": pandas.iter().map(rss).collect::<Vec<_>>(),
    });
    let path = output::bench::write_summary(Path::new("runs/bench"), &format!("ingest-{label}"), &rows, details)?;
    println!("{}", output::bench::markdown(&rows));
    println!("written to {}", path.display());
    std::fs::remove_dir_all(&work)?;
    Ok(())
}

fn du(p: &Path) -> Result<u64> {
    let mut total = 0;
    for e in std::fs::read_dir(p)? {
        let e = e?;
        let m = e.metadata()?;
        total += if m.is_dir() { du(&e.path())? } else { m.len() };
    }
    Ok(total)
}
