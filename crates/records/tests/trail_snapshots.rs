//! The ingest cache's trail snapshots (`records::cache`, [`TrailSink`]), with a sink that keeps a
//! summary of each trail's rows, on the OLMES fixture (a multiple-choice and a generation task,
//! three checkpoints): a second load restores every trail without handing over a row and gives
//! the same task rows; a new checkpoint is handed over alone, beside the restored trail; a sink of
//! another format (another build) builds every trail again, with a note; with `deltas` (`analysis
//! ingest`) a new checkpoint is saved as a delta without the cached trail being read, and the
//! next load restores the trail with its delta and writes them back as one.

use records::harness::StepRule;
use records::olmes::Olmes;
use records::source::{load, Ingest, Loaded, Reader, TrailSink};
use records::ExampleRecord;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Per trail the (step, example) pairs it was given; what it built is that list as text.
#[derive(Default)]
struct Summary {
    format: String,
    trails: BTreeMap<String, Vec<(u64, String)>>,
    rows_calls: usize,
    restores: usize,
    extended: Vec<(String, Vec<u64>)>,
    /// deltas merged into restored trails
    deltas_merged: usize,
}

impl TrailSink for Summary {
    fn rows(&mut self, trail: &str, rows: Vec<ExampleRecord>) -> anyhow::Result<()> {
        self.rows_calls += 1;
        self.trails.insert(trail.into(), rows.iter().map(|r| (r.step, r.example_id.clone())).collect());
        Ok(())
    }
    fn format(&self) -> Option<String> {
        Some(self.format.clone())
    }
    fn save(&self, trail: &str) -> anyhow::Result<Vec<u8>> {
        Ok(serde_json::to_vec(&self.trails[trail])?)
    }
    fn restore(&mut self, trail: &str, bytes: &[u8]) -> anyhow::Result<()> {
        self.restores += 1;
        self.trails.insert(trail.into(), serde_json::from_slice(bytes)?);
        Ok(())
    }
    fn extend(&mut self, trail: &str, rows: Vec<ExampleRecord>) -> anyhow::Result<()> {
        let mut steps: Vec<u64> = rows.iter().map(|r| r.step).collect();
        steps.dedup();
        self.extended.push((trail.into(), steps));
        let t = self.trails.get_mut(trail).unwrap();
        t.extend(rows.iter().map(|r| (r.step, r.example_id.clone())));
        t.sort();
        Ok(())
    }
    fn extend_saved(&mut self, trail: &str, bytes: &[u8]) -> anyhow::Result<()> {
        self.deltas_merged += 1;
        let more: Vec<(u64, String)> = serde_json::from_slice(bytes)?;
        let t = self.trails.get_mut(trail).unwrap();
        assert!(more.iter().all(|m| !t.contains(m)), "a delta adds only checkpoints the trail lacks");
        t.extend(more);
        t.sort();
        Ok(())
    }
}

/// `input` read by `reader` (through the ingest cache `cache`, if any) into a new sink of `format`.
fn load_with(
    reader: &dyn Reader,
    input: &Path,
    cache: Option<&Path>,
    format: &str,
) -> anyhow::Result<(Loaded, Summary)> {
    load_ingest(reader, input, &Ingest { cache: cache.map(Path::to_path_buf), ..Ingest::default() }, format)
}

fn load_ingest(reader: &dyn Reader, input: &Path, ingest: &Ingest, format: &str) -> anyhow::Result<(Loaded, Summary)> {
    let mut sink = Summary { format: format.into(), ..Summary::default() };
    let loaded = load(reader, &[input.to_path_buf()], &StepRule::default(), ingest, &mut sink)?;
    Ok((loaded, sink))
}

fn run(input: &Path, cache: &Path, format: &str) -> (Loaded, Summary) {
    load_with(&Olmes, input, Some(cache), format).unwrap()
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            copy(&p, &to.join(p.file_name().unwrap()));
        } else {
            std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
        }
    }
}

#[test]
fn trails_are_restored_extended_and_rebuilt_for_another_format() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/olmes");
    let d = tempfile::tempdir().unwrap();
    let input: PathBuf = d.path().join("olmes");
    copy(&fixture, &input);
    let held = d.path().join("held");
    std::fs::rename(input.join("OLMo-2-1B-stage1-step3000"), &held).unwrap();
    let cache = d.path().join("cache");

    let (first, built) = run(&input, &cache, "v1");
    assert_eq!((built.restores, first.restored, first.parsed), (0, 0, 4));
    assert!(built.rows_calls >= 2, "a trail per task at least");
    let (again, restored) = run(&input, &cache, "v1");
    assert_eq!((restored.rows_calls, restored.restores), (0, built.rows_calls), "restored, no row handed over");
    assert_eq!((again.parsed, again.cached, again.restored), (0, 0, 4));
    assert_eq!(restored.trails, built.trails);
    assert_eq!(again.tasks, first.tasks, "the same task rows, derived ones included");

    // a checkpoint arrives: its rows alone are handed over, beside each restored trail
    std::fs::rename(&held, input.join("OLMo-2-1B-stage1-step3000")).unwrap();
    let (grown, extended) = run(&input, &cache, "v1");
    assert_eq!(
        (grown.parsed, grown.cached, grown.restored),
        (2, 2, 2),
        "new files parsed, one cached file per task read"
    );
    assert!(extended.extended.iter().all(|(_, steps)| steps == &vec![3000]), "{:?}", extended.extended);
    let fresh_cache = d.path().join("fresh");
    let (fresh, whole) = run(&input, &fresh_cache, "v1");
    assert_eq!(extended.trails, whole.trails, "the extended trails are the trails built whole");
    assert_eq!(grown.tasks, fresh.tasks);

    // another format: built again from the cached files, with a note
    let (other, rebuilt) = run(&input, &cache, "v2");
    assert_eq!((rebuilt.restores, rebuilt.rows_calls), (0, built.rows_calls));
    assert_eq!((other.parsed, other.cached, other.restored), (0, 6, 0));
    assert!(other.notices.iter().any(|n| n.contains("made by another build")), "{:?}", other.notices);
    assert_eq!(rebuilt.trails, whole.trails);
}

/// A reader of hand-written units: `<dir>/step_<N>.txt`, one task `t`, lines
/// `trail,example,options` (a row per line, its trail `t/<trail>`).
struct Lines;

impl records::source::Reader for Lines {
    fn name(&self) -> &'static str {
        "lines"
    }
    fn version(&self) -> u32 {
        1
    }
    fn detect(&self, _: &Path) -> bool {
        true
    }
    fn discover(&self, inputs: &[PathBuf], _: &StepRule) -> anyhow::Result<records::source::Discovered> {
        let mut d = records::source::Discovered::default();
        for e in std::fs::read_dir(&inputs[0])? {
            let path = e?.path();
            let step = path.file_stem().unwrap().to_str().unwrap().trim_start_matches("step_").parse()?;
            d.sources.push(path.clone());
            d.units.push(records::source::Unit { path, step, task: "t".into() });
        }
        d.sources.sort();
        Ok(d)
    }
    fn parse(&self, unit: &records::source::Unit, bytes: &[u8]) -> anyhow::Result<records::source::Parsed> {
        let examples = std::str::from_utf8(bytes)?
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                let options: usize = f[2].parse().unwrap();
                ExampleRecord {
                    step: unit.step,
                    task: format!("t/{}", f[0]),
                    example_id: f[1].into(),
                    logliks: vec![-1.0; options],
                    correct: true,
                    ..ExampleRecord::default()
                }
            })
            .collect();
        let notices = vec![format!("{}: a note", unit.path.display())];
        Ok(records::source::Parsed { examples, notices, ..Default::default() })
    }
}

/// A folder `<dir>/lines` of [`Lines`] files (name, contents).
fn lines_folder(dir: &Path, files: &[(&str, &str)]) -> PathBuf {
    let input = dir.join("lines");
    std::fs::create_dir(&input).unwrap();
    for (name, text) in files {
        std::fs::write(input.join(name), text).unwrap();
    }
    input
}

/// A trail missing from the first cached file (`b` starts at step 200): a new checkpoint that
/// changes one of its docs' options is refused as a full read refuses it, checked against a
/// cached file that holds the trail.
#[test]
fn each_trail_is_checked_against_a_cached_file_that_holds_it() {
    let d = tempfile::tempdir().unwrap();
    let input =
        lines_folder(d.path(), &[("step_100.txt", "a,1,4\na,2,4\n"), ("step_200.txt", "a,1,4\na,2,4\nb,1,2\n")]);
    let cache = d.path().join("cache");
    let go = |format: &str| load_with(&Lines, &input, Some(&cache), format);
    let (first, _) = go("v1").unwrap();
    assert_eq!(first.parsed, 2);
    std::fs::write(input.join("step_300.txt"), "a,1,4\na,2,4\nb,1,3\n").unwrap();
    let e = format!("{:#}", go("v1").err().expect("b's doc 1 has 3 options at step 300, 2 at step 200"));
    assert!(e.contains("step_300.txt") && e.contains("doc 1 of task t/b has 3 options"), "{e}");
    // the same file read whole (no snapshot of this format) is refused alike
    let whole = format!("{:#}", go("v2").err().unwrap());
    assert_eq!(e, whole);
    // and a consistent one is taken
    std::fs::write(input.join("step_300.txt"), "a,1,4\na,2,4\nb,1,2\n").unwrap();
    let (grown, sink) = go("v1").unwrap();
    assert_eq!((grown.parsed, grown.cached, grown.restored), (1, 2, 0), "step 300 parsed; 100 read for a, 200 for b");
    assert_eq!(sink.trails["t/b"], vec![(200, "1".into()), (300, "1".into())]);
}

/// The notices of a task come out as a full read gives them, in file order, when a new file
/// sorts before the cached ones (the repeated notice names the first file).
#[test]
fn notices_are_said_in_file_order_beside_cached_panels() {
    let d = tempfile::tempdir().unwrap();
    let input = lines_folder(d.path(), &[("step_100.txt", "a,1,4\na,2,4\n"), ("step_200.txt", "a,1,4\na,2,4\n")]);
    let go = |cache: Option<&Path>| {
        let (l, _) = load_with(&Lines, &input, cache, "v1").unwrap();
        l.notices.into_iter().filter(|n| n.contains("a note")).collect::<Vec<_>>()
    };
    let cache = d.path().join("cache");
    go(Some(&cache));
    std::fs::write(input.join("step_050.txt"), "a,1,4\na,2,4\n").unwrap();
    let grown = go(Some(&cache));
    assert!(grown[0].contains("step_050.txt") && grown[0].contains("2 more files"), "{grown:?}");
    assert_eq!(grown, go(None), "as a full read says them");
}

/// The snapshot files under the cache's trails/ folder: (bases, deltas).
fn snapshot_files(cache: &Path) -> (usize, usize) {
    let names: Vec<String> = std::fs::read_dir(cache.join("trails"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let deltas = names.iter().filter(|n| n.matches('.').count() == 2).count();
    (names.len() - deltas, deltas)
}

/// `analysis ingest`'s way: new checkpoints become deltas beside the cached trails, which are not
/// read; a report restores trail and deltas (the trail built whole) and writes them back as one;
/// a delta that does not extend its base (left over, or broken) is not used, its units read again.
#[test]
fn new_checkpoints_are_kept_as_deltas_and_a_full_load_folds_them_in() {
    let d = tempfile::tempdir().unwrap();
    let input =
        lines_folder(d.path(), &[("step_100.txt", "a,1,4\na,2,4\n"), ("step_200.txt", "a,1,4\na,2,4\nb,1,2\n")]);
    let cache = d.path().join("cache");
    let deltas = Ingest { cache: Some(cache.clone()), deltas: true, ..Ingest::default() };
    let ingest = |input: &Path| load_ingest(&Lines, input, &deltas, "v1").unwrap();
    let report = |input: &Path| load_with(&Lines, input, Some(&cache), "v1").unwrap();
    // no snapshot yet: built whole, as a base
    let (first, built) = ingest(&input);
    assert_eq!((first.parsed, built.rows_calls, snapshot_files(&cache)), (2, 2, (1, 0)));
    // two checkpoints arrive, one ingest each: the new rows alone are handed over, as trails of
    // their own, and saved as deltas; the stored trails are not read
    std::fs::write(input.join("step_300.txt"), "a,1,4\na,2,4\nb,1,2\n").unwrap();
    let (l, s) = ingest(&input);
    assert_eq!((l.parsed, l.cached, l.restored, s.restores), (1, 2, 0, 0), "step 300 parsed, 100 and 200 probed");
    assert_eq!(s.trails["t/a"], vec![(300, "1".to_string()), (300, "2".to_string())]);
    assert_eq!(snapshot_files(&cache), (1, 1));
    let again = ingest(&input);
    assert_eq!((again.0.parsed, again.0.cached, again.1.rows_calls, snapshot_files(&cache)), (0, 0, 0, (1, 1)));
    std::fs::write(input.join("step_050.txt"), "a,1,4\na,2,4\n").unwrap();
    let (l, _) = ingest(&input);
    assert_eq!((l.parsed, snapshot_files(&cache)), (1, (1, 2)), "a checkpoint before the others too");
    // a report's load: the base restored, both deltas merged, the trail as a full read builds it;
    // then written back as one base
    let whole = load_with(&Lines, &input, None, "v1").unwrap();
    let first_delta = |cache: &Path| {
        std::fs::read_dir(cache.join("trails"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with(".1.snap"))
            .unwrap()
    };
    let stale = std::fs::read(first_delta(&cache)).unwrap();
    let (r, s) = report(&input);
    assert_eq!((r.parsed, r.cached, r.restored, s.restores, s.deltas_merged, s.rows_calls), (0, 0, 4, 2, 3, 0));
    assert_eq!(s.trails, whole.1.trails);
    assert_eq!(r.tasks, whole.0.tasks);
    assert_eq!(snapshot_files(&cache), (1, 0), "folded into the base");
    let (r, s) = report(&input);
    assert_eq!((r.restored, s.deltas_merged), (4, 0));
    assert_eq!(s.trails, whole.1.trails);
    // a delta left over from before the base was written again (a crash between the two): it
    // names another chain than the base's units, and its step is in the base now: not used, and
    // removed
    let key = std::fs::read_dir(cache.join("trails")).unwrap().next().unwrap().unwrap().path();
    let leftover = key.with_extension("1.snap");
    std::fs::write(&leftover, &stale).unwrap();
    assert_eq!(snapshot_files(&cache), (1, 1));
    let (r, s) = report(&input);
    assert_eq!((r.parsed, r.cached, r.restored, s.deltas_merged), (0, 0, 4, 0));
    assert_eq!(s.trails, whole.1.trails);
    assert_eq!(snapshot_files(&cache), (1, 0), "the leftover is removed");

    // a broken delta: not used, its unit read from the cache again (and the trail still whole)
    std::fs::write(input.join("step_400.txt"), "a,1,4\na,2,4\nb,1,2\n").unwrap();
    ingest(&input);
    std::fs::write(first_delta(&cache), b"not a snapshot").unwrap();
    let whole = load_with(&Lines, &input, None, "v1").unwrap();
    let (r, s) = report(&input);
    assert_eq!(
        (r.parsed, r.cached, r.restored, s.deltas_merged),
        (0, 3, 2, 0),
        "step 400 from the cache, 050 and 200 probed"
    );
    assert_eq!(s.trails, whole.1.trails);
    assert_eq!(snapshot_files(&cache), (1, 0));
}

/// A cache written by the previous layout (snapshot version 1: no `extends`, no `piece` in the
/// header) still loads: its snapshot is read, found of another layout (a note), and the trail is
/// built again from the cached units, as a full read builds it.
#[test]
fn a_snapshot_of_the_previous_layout_is_rebuilt_from_the_cached_units() {
    let d = tempfile::tempdir().unwrap();
    let input = lines_folder(d.path(), &[("step_100.txt", "a,1,4\na,2,4\n"), ("step_200.txt", "a,1,4\na,2,4\n")]);
    let cache = d.path().join("cache");
    load_with(&Lines, &input, Some(&cache), "v1").unwrap();
    // the base snapshot rewritten as version 1 wrote it
    let base = std::fs::read_dir(cache.join("trails")).unwrap().next().unwrap().unwrap().path();
    let bytes = zstd::decode_all(std::fs::File::open(&base).unwrap()).unwrap();
    let mut cursor = records::frames::Cursor::new(&bytes);
    let mut header: serde_json::Value = serde_json::from_slice(cursor.frame().unwrap()).unwrap();
    let trails = header["trails"].as_array().unwrap().len();
    let obj = header.as_object_mut().unwrap();
    assert!(obj.remove("extends").is_some() && obj.remove("piece").is_some());
    obj.insert("version".into(), 1.into());
    let mut old = Vec::new();
    records::frames::put(&mut old, &serde_json::to_vec(&header).unwrap());
    for _ in 0..trails {
        records::frames::put(&mut old, cursor.frame().unwrap());
    }
    cursor.finish().unwrap();
    std::fs::write(&base, zstd::bulk::compress(&old, 1).unwrap()).unwrap();

    let whole = load_with(&Lines, &input, None, "v1").unwrap();
    let (l, s) = load_with(&Lines, &input, Some(&cache), "v1").unwrap();
    assert_eq!((l.parsed, l.cached, l.restored, s.restores), (0, 2, 0, 0));
    assert!(l.notices.iter().any(|n| n.contains("older layout")), "{:?}", l.notices);
    assert!(!l.notices.iter().any(|n| n.contains("unreadable")), "{:?}", l.notices);
    assert_eq!(s.trails, whole.1.trails);
    let (again, s) = load_with(&Lines, &input, Some(&cache), "v1").unwrap();
    assert_eq!((again.restored, s.restores), (2, 1), "written back in this layout");
}
