//! The ingest cache of `analysis report` (records::cache) end to end, on lm-eval-shaped folders
//! made by scripts/make_lm_eval_fixture.py: cached and uncached reports are identical, a new
//! checkpoint's files are parsed alone, a changed file is parsed again with a note (with
//! `--verify` even at the same size and mtime), a broken cache file is rebuilt, and the cache is
//! never written inside the inputs nor by two reports at once; `analysis ingest` adds
//! checkpoints as they land without reading the cached panels, and the report after it is a
//! fresh parse's.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn fixture(out: &Path, steps: &str) {
    let o = Command::new("python3")
        .arg(Path::new(ROOT).join("scripts/make_lm_eval_fixture.py"))
        .args(["--out", out.to_str().unwrap(), "--steps", steps, "--docs", "40"])
        .output()
        .expect("python3 runs scripts/make_lm_eval_fixture.py");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn report(input: &Path, out: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_analysis"))
        .arg("report")
        .arg(input)
        .arg("--out")
        .arg(out)
        .args(["--bootstrap", "50"])
        .args(args)
        .output()
        .unwrap()
}

fn ingest(input: &Path, out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_analysis")).arg("ingest").arg(input).arg("--out").arg(out).output().unwrap()
}

fn ok(o: &Output) -> String {
    let e = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{e}");
    e
}

/// The tables a report writes, by name.
fn tables(out: &Path) -> Vec<(String, String)> {
    ["task_metrics.csv", "example_metrics.csv", "decisions.csv"]
        .iter()
        .map(|n| (n.to_string(), std::fs::read_to_string(out.join(n)).unwrap()))
        .collect()
}

fn samples(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = walk(dir).into_iter().filter(|p| p.to_string_lossy().ends_with(".jsonl")).collect();
    v.sort();
    v
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A checkpoint arrives: the folder ending in `name` of a fixture with `steps` (made under
/// `tmp/more`) is copied into `input`; returns where it landed.
fn add_checkpoint(tmp: &Path, input: &Path, steps: &str, name: &str) -> PathBuf {
    let more = tmp.join("more");
    fixture(&more, steps);
    let new: Vec<PathBuf> = std::fs::read_dir(&more)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(name))
        .collect();
    assert_eq!(new.len(), 1);
    let to = input.join(new[0].file_name().unwrap());
    std::fs::create_dir(&to).unwrap();
    for f in walk(&new[0]) {
        std::fs::copy(&f, to.join(f.file_name().unwrap())).unwrap();
    }
    to
}

#[test]
fn cached_and_uncached_reports_are_identical_and_new_checkpoints_are_parsed_alone() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("lm_eval");
    fixture(&input, "100,200,300,400");
    let plain = d.path().join("plain");
    let e = ok(&report(&input, &plain, &["--no-cache"]));
    assert!(!e.contains("ingest:") && !d.path().join("plain.ingest").exists(), "{e}");
    let cached = d.path().join("cached");
    let e = ok(&report(&input, &cached, &[]));
    assert!(e.contains("ingest: 8 file(s) parsed, 0 read from the cache"), "{e}");
    assert!(d.path().join("cached.ingest/manifest.json").is_file(), "the cache lives beside --out");
    assert_eq!(tables(&plain), tables(&cached));
    let e = ok(&report(&input, &cached, &[]));
    assert!(
        e.contains("ingest: 0 file(s) parsed, 0 read from the cache, 8 restored with their tasks' cached panels"),
        "{e}"
    );
    assert_eq!(tables(&plain), tables(&cached), "a warm report restores the same panels");

    // a checkpoint arrives: its two samples files are parsed, one cached file per task read for
    // the checks, the others' rows not read (the cached panels extended)
    let to = add_checkpoint(d.path(), &input, "100,200,300,400,500", "step_000500");
    let e = ok(&report(&input, &cached, &[]));
    assert!(
        e.contains("ingest: 2 file(s) parsed, 2 read from the cache, 6 restored with their tasks' cached panels"),
        "{e}"
    );
    let fresh = d.path().join("fresh");
    ok(&report(&input, &fresh, &["--no-cache"]));
    assert_eq!(
        tables(&fresh),
        tables(&cached),
        "the extended panels give what a fresh parse of the grown folder gives"
    );
    assert_ne!(tables(&plain), tables(&cached), "and the new checkpoint is in it");
    let e = ok(&report(&input, &cached, &[]));
    assert!(e.contains("0 file(s) parsed, 0 read from the cache, 10 restored"), "the extended panels were kept: {e}");
    assert_eq!(tables(&fresh), tables(&cached));

    // a checkpoint is taken away: the panels no longer match their units and are built again
    std::fs::remove_dir_all(&to).unwrap();
    let e = ok(&report(&input, &cached, &[]));
    assert!(e.contains("ingest: 0 file(s) parsed, 8 read from the cache") && !e.contains("restored"), "{e}");
    assert_eq!(tables(&plain), tables(&cached));
}

#[test]
fn changed_files_and_broken_cache_files_are_parsed_again_with_a_note() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("lm_eval");
    fixture(&input, "100,200,300");
    let out = d.path().join("out");
    ok(&report(&input, &out, &[]));
    let files = samples(&input);

    // rewritten with other log-likelihoods (same size): a new mtime
    let f = &files[0];
    let text = std::fs::read_to_string(f).unwrap();
    let changed = text.replacen("\"acc\": 1.0", "\"acc\": 0.0", 1);
    assert_ne!(text, changed, "the fixture has a line with acc 1.0");
    let mtime = std::fs::metadata(f).unwrap().modified().unwrap();
    std::fs::write(f, &changed).unwrap();
    let later = mtime + std::time::Duration::from_secs(5);
    std::fs::File::options().write(true).open(f).unwrap().set_modified(later).unwrap();
    let e = ok(&report(&input, &out, &[]));
    assert!(e.contains("changed since it was cached") && e.contains("1 file(s) parsed"), "{e}");
    let fresh = d.path().join("fresh");
    ok(&report(&input, &fresh, &["--no-cache"]));
    assert_eq!(tables(&fresh), tables(&out));

    // the same size and mtime: trusted unless --verify, which hashes it again
    std::fs::write(f, &text).unwrap();
    std::fs::File::options().write(true).open(f).unwrap().set_modified(later).unwrap();
    let e = ok(&report(&input, &out, &[]));
    assert!(e.contains("0 file(s) parsed"), "size and mtime match: the cache is trusted: {e}");
    let e = ok(&report(&input, &out, &["--verify"]));
    assert!(e.contains("sha256 differs") && e.contains("1 file(s) parsed"), "{e}");
    let fresh2 = d.path().join("fresh2");
    ok(&report(&input, &fresh2, &["--no-cache"]));
    assert_eq!(tables(&fresh2), tables(&out));

    // a cached parquet file cut short: its task's cached panel stands for it (its rows are not
    // read); once that panel is unreadable too, the file is parsed again, not an error
    let units = out.with_file_name("out.ingest").join("units");
    let victim = std::fs::read_dir(&units).unwrap().next().unwrap().unwrap().path();
    let bytes = std::fs::read(&victim).unwrap();
    std::fs::write(&victim, &bytes[..bytes.len() / 2]).unwrap();
    let e = ok(&report(&input, &out, &[]));
    assert!(e.contains("6 restored"), "{e}");
    assert_eq!(tables(&fresh2), tables(&out));
    let trails = out.with_file_name("out.ingest").join("trails");
    let snaps: Vec<PathBuf> = std::fs::read_dir(&trails).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(snaps.len(), 2, "one snapshot per task");
    for s in &snaps {
        let bytes = std::fs::read(s).unwrap();
        std::fs::write(s, &bytes[..bytes.len() / 2]).unwrap();
    }
    let e = ok(&report(&input, &out, &[]));
    assert!(e.contains("unreadable trail snapshot") && e.contains("built again"), "{e}");
    assert!(e.contains("cached rows are unreadable") && e.contains("1 file(s) parsed"), "{e}");
    assert_eq!(tables(&fresh2), tables(&out));
    let e = ok(&report(&input, &out, &[]));
    assert!(e.contains("0 file(s) parsed, 0 read from the cache, 6 restored"), "rebuilt: {e}");
}

#[test]
fn the_cache_is_never_inside_the_inputs_nor_shared_by_two_reports() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("lm_eval");
    fixture(&input, "100,200,300");
    let before = walk(&input);
    let o = report(&input, &d.path().join("out"), &["--cache", input.join("cache").to_str().unwrap()]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("inside the input"), "{e}");
    assert_eq!(walk(&input), before, "nothing written into the inputs");
    assert!(!d.path().join("out").exists(), "nor an output folder");

    let cache = d.path().join("cache");
    std::fs::create_dir(&cache).unwrap();
    let lock = output::FolderLock::acquire(&cache, "a test holding the cache").unwrap();
    let o = report(&input, &d.path().join("out"), &["--cache", cache.to_str().unwrap()]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("a test holding the cache"), "{e}");
    drop(lock);
    ok(&report(&input, &d.path().join("out"), &["--cache", cache.to_str().unwrap()]));
}

#[test]
fn a_new_checkpoint_that_scores_other_examples_is_refused_beside_the_cached_panels() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("lm_eval");
    fixture(&input, "100,200,300");
    let out = d.path().join("out");
    ok(&report(&input, &out, &[]));
    assert!(ok(&report(&input, &out, &[])).contains("6 restored"));
    // the new checkpoint's samples file of one task lacks its last doc
    let to = add_checkpoint(d.path(), &input, "100,200,300,400", "step_000400");
    let cut = samples(&to).remove(0);
    let text = std::fs::read_to_string(&cut).unwrap();
    let kept: Vec<&str> = text.lines().collect();
    std::fs::write(&cut, kept[..kept.len() - 1].join("\n") + "\n").unwrap();
    let before = tables(&out);
    let o = report(&input, &out, &[]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{e}");
    assert!(e.contains(&cut.display().to_string()) && e.contains("scores other examples"), "{e}");
    assert_eq!(tables(&out), before, "the earlier report is left as it was");
    // `analysis ingest` checks the same, without reading the cached panels
    let o = ingest(&input, &out);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("scores other examples"), "{e}");

    // the doc back, but with other text (its doc hash changed): refused by both
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let at = lines[0].find("\"doc_hash\": \"").unwrap() + "\"doc_hash\": \"".len();
    lines[0].replace_range(at..at + 8, "00000000");
    std::fs::write(&cut, lines.join("\n") + "\n").unwrap();
    for o in [ingest(&input, &out), report(&input, &out, &[])] {
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && e.contains("has other text (item hash) at step 400"), "{e}");
    }
    assert_eq!(tables(&out), before);
}

#[test]
fn ingest_as_checkpoints_land_then_report() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("lm_eval");
    fixture(&input, "100,200,300,400");
    let out = d.path().join("out");
    let o = ingest(&input, &out);
    let e = ok(&o);
    assert!(e.contains("ingest: 8 file(s) parsed, 0 read from the cache"), "{e}");
    let said = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(said.starts_with("2 task(s), 4 checkpoint(s) (steps 100-400) in the ingest cache"), "{said}");
    assert!(!out.exists() && d.path().join("out.ingest/manifest.json").is_file(), "the cache alone is written");

    // a checkpoint lands: its files parsed, one cached file per task read for the checks, the
    // cached panels not read
    add_checkpoint(d.path(), &input, "100,200,300,400,500", "step_000500");
    let e = ok(&ingest(&input, &out));
    assert!(
        e.contains("ingest: 2 file(s) parsed, 2 read from the cache, 6 kept in their tasks' cached panels (not read)"),
        "{e}"
    );
    // the report restores the panels with the new checkpoint, as a fresh parse gives them
    let e = ok(&report(&input, &out, &[]));
    assert!(e.contains("ingest: 0 file(s) parsed, 0 read from the cache, 10 restored"), "{e}");
    let fresh = d.path().join("fresh");
    ok(&report(&input, &fresh, &["--no-cache"]));
    assert_eq!(tables(&fresh), tables(&out));
    let e = ok(&ingest(&input, &out));
    assert!(e.contains("ingest: 0 file(s) parsed, 0 read from the cache, 10 kept"), "nothing new: {e}");

    // a run's own tables are columnar already
    let run = Path::new(ROOT).join("results/cosine-s1");
    let o = ingest(&run, &d.path().join("run-out"));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("a run's eval tables are read as they are"), "{e}");
}
