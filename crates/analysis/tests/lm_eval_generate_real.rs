//! `analysis report` on a `generate_until` output made by the real lm-eval 0.4.13 (not written
//! by hand): `tests/fixtures/lm_eval_generate_real/lm_eval/`, three smoke checkpoints exported
//! with `lm export` and run through `lm_eval --model hf ... --log_samples` on a local task of 12
//! held-out prompts with two filters, `none` and `first-word` (how it was made: the fixture's
//! README.md; `just interop` makes the same output again with `scripts/interop_generate.py` and
//! checks it against our decoder).
//!
//! The report must read it per example: one trail per filter (`interop_generate`,
//! `interop_generate/first-word`), every doc at every step, each row's target, output
//! (`filtered_resps`) and stored `exact_match` as lm_eval wrote them (read back from the
//! report's ingest cache, the rows it analysed), and each example's instability score computed
//! on those texts. A trail or a step dropped by the reader fails these tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const TASK: &str = "interop_generate";
const FILTERS: [&str; 2] = ["none", "first-word"];
const STEPS: [u64; 3] = [100, 150, 200];
const DOCS: usize = 12;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lm_eval_generate_real/lm_eval")
}

/// The trail the report gives a filter's rows.
fn trail(filter: &str) -> String {
    if filter == "none" {
        TASK.to_string()
    } else {
        format!("{TASK}/{filter}")
    }
}

/// One sample line as lm_eval wrote it.
#[derive(Debug, Clone)]
struct Sample {
    target: String,
    filtered: String,
    generated: String,
    exact_match: f64,
}

/// The fixture's samples by (step, filter, doc_id), read straight from lm_eval's JSONL (the step
/// from the model folder's `step_<N>`).
fn samples(root: &Path) -> BTreeMap<(u64, String, u64), Sample> {
    let mut out = BTreeMap::new();
    for model in std::fs::read_dir(root).unwrap() {
        let model = model.unwrap().path();
        let name = model.file_name().unwrap().to_string_lossy().to_string();
        let step: u64 = name.rsplit("step_").next().unwrap().parse().unwrap_or_else(|_| panic!("{name}: no step"));
        let files: Vec<PathBuf> = std::fs::read_dir(&model)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(&format!("samples_{TASK}_")))
            .collect();
        assert_eq!(files.len(), 1, "{name}: one samples file");
        for line in std::fs::read_to_string(&files[0]).unwrap().lines().filter(|l| !l.trim().is_empty()) {
            let v: Value = serde_json::from_str(line).unwrap();
            let s = Sample {
                target: v["target"].as_str().unwrap().to_string(),
                filtered: v["filtered_resps"][0].as_str().unwrap().to_string(),
                generated: v["resps"][0][0].as_str().unwrap().to_string(),
                exact_match: v["exact_match"].as_f64().unwrap(),
            };
            let key = (step, v["filter"].as_str().unwrap().to_string(), v["doc_id"].as_u64().unwrap());
            assert!(out.insert(key.clone(), s).is_none(), "{key:?} twice");
        }
    }
    out
}

fn report(input: &Path, out: &Path, cache: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_analysis"))
        .arg("report")
        .arg(input)
        .arg("--out")
        .arg(out)
        .arg("--cache")
        .arg(cache)
        .args(["--bootstrap", "50"])
        .output()
        .unwrap()
}

/// A CSV written by the report as rows of column name -> cell (no cell of these tables holds a
/// comma).
fn csv_rows(path: &Path) -> Vec<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines.map(|l| header.iter().map(|h| h.to_string()).zip(l.split(',').map(str::to_string)).collect()).collect()
}

/// The example rows the report analysed: every unit of its ingest cache.
fn cached_rows(cache: &Path) -> Vec<records::ExampleRecord> {
    let mut rows = Vec::new();
    for f in std::fs::read_dir(cache.join("units")).unwrap() {
        let f = f.unwrap().path();
        if f.extension().is_some_and(|e| e == "parquet") {
            rows.extend(records::read_examples(&f).unwrap());
        }
    }
    rows
}

/// Copies a folder tree.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let dst = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_tree(&p, &dst);
        } else {
            std::fs::copy(&p, &dst).unwrap();
        }
    }
}

#[test]
fn the_fixture_is_what_lm_eval_wrote() {
    let s = samples(&fixture());
    assert_eq!(s.len(), STEPS.len() * FILTERS.len() * DOCS, "3 steps x 2 filters x 12 docs");
    for step in STEPS {
        for f in FILTERS {
            for d in 0..DOCS as u64 {
                let x = &s[&(step, f.to_string(), d)];
                // lm_eval's own filters: `none` keeps the text, `first-word` its first word
                let want = match f {
                    "none" => x.generated.clone(),
                    _ => x.generated.split_whitespace().next().unwrap_or("[invalid]").to_string(),
                };
                assert_eq!(x.filtered, want, "step {step} {f} doc {d}");
                assert_eq!(x.exact_match, f64::from(u8::from(x.filtered == x.target)), "step {step} {f} doc {d}");
            }
        }
    }
    // the texts change between checkpoints on some docs (else the instability score is moot)
    let changing = (0..DOCS as u64)
        .filter(|&d| {
            STEPS.iter().map(|&t| &s[&(t, "none".to_string(), d)].generated).collect::<BTreeSet<_>>().len() > 1
        })
        .count();
    assert!(changing > 0, "no doc's text changes over the checkpoints");
}

#[test]
fn a_real_lm_eval_generation_output_is_read_per_example_for_each_filter() {
    let dir = tempfile::tempdir().unwrap();
    let (out, cache) = (dir.path().join("analysis"), dir.path().join("ingest"));
    let o = report(&fixture(), &out, &cache);
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "analysis report failed: {stderr}");
    let s = samples(&fixture());
    let trails: Vec<String> = FILTERS.iter().map(|f| trail(f)).collect();
    assert!(trails.iter().all(|t| stdout.contains(t.as_str())), "{stdout}");

    // the task table: both trails, 12 examples x 3 checkpoints, scored on exact_match
    let tm = csv_rows(&out.join("task_metrics.csv"));
    let analysed: BTreeSet<&str> = tm.iter().map(|r| r["task"].as_str()).collect();
    assert_eq!(analysed, trails.iter().map(String::as_str).collect::<BTreeSet<&str>>(), "the trails of the report");
    for (f, t) in FILTERS.iter().zip(&trails) {
        let acc = tm
            .iter()
            .find(|r| &r["task"] == t && r["window"] == "all" && r["metric"] == "acc")
            .unwrap_or_else(|| panic!("no all-checkpoint acc row of {t}"));
        assert_eq!(acc["examples"], DOCS.to_string(), "{t}");
        assert_eq!(acc["checkpoints"], STEPS.len().to_string(), "{t}");
        assert_eq!((acc["first_step"].as_str(), acc["last_step"].as_str()), ("100", "200"), "{t}");
        let want = (0..DOCS as u64).map(|d| s[&(200, f.to_string(), d)].exact_match).sum::<f64>() / DOCS as f64;
        assert!((acc["final_score"].parse::<f64>().unwrap() - want).abs() < 1e-12, "{t}: {acc:?}");
    }

    // the rows analysed: one per (step, trail, doc), as lm_eval wrote them
    let rows = cached_rows(&cache);
    let keys: BTreeSet<(u64, String, String)> =
        rows.iter().map(|r| (r.step, r.task.clone(), r.example_id.clone())).collect();
    assert_eq!(rows.len(), keys.len(), "a row twice");
    let want: BTreeSet<(u64, String, String)> = STEPS
        .iter()
        .flat_map(|&step| {
            trails.iter().flat_map(move |t| (0..DOCS).map(move |d| (step, t.clone(), format!("{t}/{d}"))))
        })
        .collect();
    assert_eq!(keys, want, "every doc of every trail at every step");
    for r in &rows {
        let f = FILTERS.iter().find(|f| trail(f) == r.task).unwrap();
        let d: u64 = r.example_id.rsplit('/').next().unwrap().parse().unwrap();
        let x = &s[&(r.step, f.to_string(), d)];
        let at = format!("step {} {}", r.step, r.example_id);
        assert_eq!(r.targets, vec![x.target.clone()], "{at}: target");
        assert_eq!(r.output, x.filtered, "{at}: output = filtered_resps");
        assert_eq!(r.score_names, vec!["exact_match".to_string()], "{at}");
        assert_eq!(r.score_values, vec![x.exact_match], "{at}: the stored exact_match");
        assert_eq!(r.correct, x.exact_match >= 1.0, "{at}");
        assert!(r.logliks.is_empty(), "{at}: a generation row has no options");
    }

    // the instability score of each example: 1 - char F1 of consecutive checkpoints' outputs
    let em = csv_rows(&out.join("example_metrics.csv"));
    for (f, t) in FILTERS.iter().zip(&trails) {
        let mut positive = 0;
        for d in 0..DOCS as u64 {
            let id = format!("{t}/{d}");
            let row = em
                .iter()
                .find(|r| &r["task"] == t && r["window"] == "all" && r["example_id"] == id)
                .unwrap_or_else(|| panic!("no example row {id}"));
            let texts: Vec<&str> = STEPS.iter().map(|&st| s[&(st, f.to_string(), d)].filtered.as_str()).collect();
            let want = (0..STEPS.len() - 1).map(|k| 1.0 - textmatch::char_f1(texts[k], texts[k + 1])).sum::<f64>()
                / (STEPS.len() - 1) as f64;
            let got: f64 = row["instability"].parse().unwrap();
            assert!((got - want).abs() < 1e-12, "{id}: IS {got}, from the texts {want} ({texts:?})");
            positive += usize::from(want > 0.0);
        }
        assert!(positive > 0, "{t}: no example's output changes, the IS is not exercised");
    }
}

#[test]
fn the_stored_exact_match_is_what_the_report_scores() {
    // lm_eval's exact_match is 0 on every line of the fixture (16 greedy tokens never reproduce
    // the 20-word continuation): set one to 1 in a copy and the report must score it, not
    // recompute it from the texts
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("lm_eval");
    copy_tree(&fixture(), &copy);
    let model = std::fs::read_dir(&copy)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("step_000200"))
        .unwrap();
    let file = std::fs::read_dir(&model)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("samples_"))
        .unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let mut changed = 0;
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if v["filter"] == "first-word" && v["doc_id"] == 3 {
                assert_eq!(v["exact_match"], 0.0);
                v["exact_match"] = 1.0.into();
                changed += 1;
            }
            v.to_string()
        })
        .collect();
    assert_eq!(changed, 1);
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let (out, cache) = (dir.path().join("analysis"), dir.path().join("ingest"));
    let o = report(&copy, &out, &cache);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tm = csv_rows(&out.join("task_metrics.csv"));
    let score = |t: &str| -> f64 {
        tm.iter().find(|r| r["task"] == t && r["window"] == "all" && r["metric"] == "acc").unwrap()["final_score"]
            .parse()
            .unwrap()
    };
    assert!((score(&trail("first-word")) - 1.0 / DOCS as f64).abs() < 1e-12);
    assert_eq!(score(TASK), 0.0, "the other trail is untouched");
    let rows = cached_rows(&cache);
    let r = rows.iter().find(|r| r.step == 200 && r.example_id == format!("{}/3", trail("first-word"))).unwrap();
    assert!(r.correct && r.score_values == [1.0], "{r:?}");
}
