//! `analysis compare-runs` against the built binary, on run folders written into temporary
//! folders: identical runs, a run better by 2 points, items that differ between runs, three runs
//! and their ranking, bad inputs; and a snapshot of the text table.

use records::polars::prelude::*;
use records::ExampleRecord;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Rows of task `task` from a correctness matrix `[checkpoint][item]` at steps 10, 20, ...; item
/// `e` has id `<task>/<e>` and the text hash `hash(e)` (empty: none, as tables before version 3).
fn rows(task: &str, correct: &[Vec<bool>], hash: impl Fn(usize) -> String) -> Vec<ExampleRecord> {
    let mut out = Vec::new();
    for (t, c) in correct.iter().enumerate() {
        for (e, &ok) in c.iter().enumerate() {
            out.push(ExampleRecord {
                step: 10 * (t as u64 + 1),
                task: task.into(),
                example_id: format!("{task}/{e}"),
                gold: 0,
                predicted: u32::from(!ok),
                predicted_norm: u32::from(!ok),
                correct: ok,
                correct_norm: ok,
                logliks: if ok { vec![-1.0, -2.5] } else { vec![-2.0, -1.0] },
                lengths_chars: vec![1, 1],
                lengths_tokens: vec![1, 1],
                lengths_bytes: vec![2, 2],
                gold_is_greedy: false,
                output: u32::from(!ok).to_string(),
                item_hash: hash(e),
                targets: Vec::new(),
                score_names: Vec::new(),
                score_values: Vec::new(),
            });
        }
    }
    out
}

fn h(e: usize) -> String {
    format!("{:064x}", e)
}

/// A run folder `<dir>/eval/{tasks,examples}.parquet` holding `rows`.
fn write_run(dir: &Path, rows: &[ExampleRecord]) -> PathBuf {
    let eval = dir.join("eval");
    std::fs::create_dir_all(&eval).unwrap();
    records::write_frame(
        &eval.join("tasks.parquet"),
        &mut records::tasks_frame(&records::summarise(rows).unwrap()).unwrap(),
    )
    .unwrap();
    records::write_frame(&eval.join("examples.parquet"), &mut records::examples_frame(rows).unwrap()).unwrap();
    dir.to_path_buf()
}

/// `k` of `n` items right (the first k) at each checkpoint.
fn trail(ks: &[usize], n: usize) -> Vec<Vec<bool>> {
    ks.iter().map(|&k| (0..n).map(|e| e < k).collect()).collect()
}

/// Runs `analysis compare-runs <inputs> <args>`: (success, stdout, stderr).
fn compare(inputs: &[&Path], args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_analysis"))
        .arg("compare-runs")
        .args(inputs)
        .args(["--bootstrap", "300"])
        .args(args)
        .output()
        .unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn table(path: &Path) -> DataFrame {
    records::read_parquet(path).unwrap()
}

fn f64s(df: &DataFrame, name: &str) -> Vec<f64> {
    df.column(name).unwrap().f64().unwrap().into_no_null_iter().collect()
}

fn u64s(df: &DataFrame, name: &str) -> Vec<u64> {
    df.column(name).unwrap().u64().unwrap().into_no_null_iter().collect()
}

fn strs(df: &DataFrame, name: &str) -> Vec<String> {
    df.column(name).unwrap().str().unwrap().iter().map(|v| v.unwrap().to_owned()).collect()
}

/// A run whose trail fluctuates a little: 2000 items, 10 checkpoints; items 40..1040 always
/// right, 1040..1050 right at some checkpoints, the rest wrong.
fn steady(n: usize) -> Vec<Vec<bool>> {
    (0..10)
        .map(|t| (0..n).map(|e| (40..1040).contains(&e) || ((1040..1050).contains(&e) && (e + t) % 3 == 0)).collect())
        .collect()
}

#[test]
fn identical_runs_make_no_difference() {
    let dir = tempfile::tempdir().unwrap();
    let c = steady(2000);
    let a = write_run(&dir.path().join("a"), &rows("toy", &c, h));
    let b = write_run(&dir.path().join("b"), &rows("toy", &c, h));
    let out = dir.path().join("out");
    let (ok, stdout, stderr) = compare(&[&a, &b], &["--out", out.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    let df = table(&out.join("runs.parquet"));
    assert_eq!(df.height(), 1);
    assert_eq!(
        (f64s(&df, "difference")[0], f64s(&df, "ci_low")[0], f64s(&df, "ci_high")[0], f64s(&df, "consistency")[0]),
        (0.0, 0.0, 0.0, 0.5)
    );
    assert!(strs(&df, "verdict")[0].starts_with("no difference"), "{:?}", strs(&df, "verdict"));
    assert_eq!((strs(&df, "run_a")[0].as_str(), strs(&df, "identity")[0].as_str()), (a.to_str().unwrap(), "text hash"));
    assert_eq!((u64s(&df, "shared")[0], u64s(&df, "final_checkpoints_a")[0]), (2000, 3));
    assert!(stdout.contains("no difference (+0.0 points [+0.0, +0.0])"), "{stdout}");
    assert!(out.join("runs.csv").is_file() && !out.join("ranking.csv").exists());
    // provenance: every source file with its sha256, the options and the seed
    let p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("provenance.json")).unwrap()).unwrap();
    let sources = p["runs"][0]["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 2, "{p}");
    let examples = a.join("eval/examples.parquet");
    let src = sources.iter().find(|s| s["path"] == examples.to_str().unwrap()).unwrap();
    assert_eq!(src["sha256"], output::provenance::sha256_file(&examples).unwrap());
    assert_eq!((p["seed"].as_u64(), p["options"]["bootstrap"].as_u64()), (Some(1234), Some(300)));
}

/// B is A with 2% of the items (40 of 2000, always the same) right where A had them wrong, at
/// every checkpoint: B better by 2.0 points, and B beats A in every pair of final-stage
/// checkpoints (A wins none of them: the decision consistency is 1).
#[test]
fn a_run_better_by_two_points_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let c = steady(2000);
    let better: Vec<Vec<bool>> =
        c.iter().map(|r| r.iter().enumerate().map(|(e, &ok)| ok || e < 40).collect()).collect();
    let a = write_run(&dir.path().join("a"), &rows("toy", &c, h));
    let b = write_run(&dir.path().join("b"), &rows("toy", &better, h));
    let out = dir.path().join("out");
    let (ok, stdout, stderr) = compare(&[&a, &b], &["--out", out.to_str().unwrap(), "--names", "A,B"]);
    assert!(ok, "{stderr}");
    let df = table(&out.join("runs.parquet"));
    let (d, lo, hi) = (f64s(&df, "difference")[0], f64s(&df, "ci_low")[0], f64s(&df, "ci_high")[0]);
    assert!((d + 0.02).abs() < 1e-12 && hi < 0.0 && lo < d && d < hi, "{d} [{lo}, {hi}]");
    assert_eq!((f64s(&df, "a_wins")[0], f64s(&df, "consistency")[0]), (0.0, 1.0));
    let v = &strs(&df, "verdict")[0];
    assert!(v.starts_with("B better by 2.0 points [") && !v.contains("depends"), "{v}");
    assert!(stdout.contains("B better by 2.0 points ["), "{stdout}");
    assert_eq!(strs(&df, "run_a")[0], "A");
}

/// Items that differ: one run lacks 10 items (compared on the shared ones, with a note); a run
/// whose text differs for 5 ids (those are not compared); an old table without hashes (matched
/// by id); fewer than 20 shared items (the task is refused by name).
#[test]
fn runs_with_other_items_are_compared_on_the_shared_ones() {
    let dir = tempfile::tempdir().unwrap();
    let n = 100;
    let c = trail(&[50, 55, 60, 58, 62], n);
    let a = write_run(&dir.path().join("a"), &rows("toy", &c, h));
    let fewer: Vec<ExampleRecord> =
        rows("toy", &c, h).into_iter().filter(|r| r.example_id != "toy/7" && !r.example_id.ends_with('3')).collect();
    let b = write_run(&dir.path().join("b"), &fewer);
    let out = dir.path().join("out");
    let (ok, _, stderr) = compare(&[&a, &b], &["--out", out.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    let df = table(&out.join("runs.parquet"));
    assert_eq!((u64s(&df, "items_a")[0], u64s(&df, "items_b")[0], u64s(&df, "shared")[0]), (100, 89, 89));
    assert!(stderr.contains("task toy: compared on the 89 items every run scored"), "{stderr}");

    // other text under 5 ids
    let other = write_run(&dir.path().join("other"), &rows("toy", &c, |e| if e < 5 { h(1000 + e) } else { h(e) }));
    let (ok, _, stderr) = compare(&[&a, &other], &["--out", out.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    let df = table(&out.join("runs.parquet"));
    assert_eq!((u64s(&df, "shared")[0], strs(&df, "identity")[0].as_str()), (95, "text hash"));
    assert!(stderr.contains("5 example ids with other text in another run"), "{stderr}");

    // a table without hashes: matched by example id
    let old = write_run(&dir.path().join("old"), &rows("toy", &c, |_| String::new()));
    let (ok, _, stderr) = compare(&[&a, &old], &["--out", out.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    let df = table(&out.join("runs.parquet"));
    assert_eq!((u64s(&df, "shared")[0], strs(&df, "identity")[0].as_str()), (100, "example id"));

    // 19 shared items: refused, naming the task
    let few: Vec<ExampleRecord> =
        rows("toy", &c, h).into_iter().filter(|r| r.example_id[4..].parse::<usize>().unwrap() < 19).collect();
    let few = write_run(&dir.path().join("few"), &few);
    let (ok, _, stderr) = compare(&[&a, &few], &["--out", dir.path().join("out2").to_str().unwrap()]);
    assert!(!ok && stderr.contains("task toy: refused: only 19 items shared"), "{stderr}");
    assert!(!dir.path().join("out2/runs.parquet").exists());
}

/// Three runs of 20 items, three checkpoints each (the final window is the whole trail): A scores
/// 12, 13, 16 items, B 11, 13, 15, C 10, 10, 10. Ranking A > B > C (means 41/60, 39/60, 30/60).
/// A beats B in 5 of the 9 checkpoint pairs and ties in 1: consistency 5.5/9. The joint picks
/// that reproduce the ranking are the 5 (A, B) pairs in which A is strictly above, with any of
/// C's 3 checkpoints (all below every B): 15 of 27.
#[test]
fn three_runs_are_ranked_with_the_share_of_picks_that_reproduce_the_ranking() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_run(&dir.path().join("a"), &rows("toy", &trail(&[12, 13, 16], 20), h));
    let b = write_run(&dir.path().join("b"), &rows("toy", &trail(&[11, 13, 15], 20), h));
    let c = write_run(&dir.path().join("c"), &rows("toy", &trail(&[10, 10, 10], 20), h));
    let out = dir.path().join("out");
    // given in another order than the ranking
    let (ok, stdout, stderr) = compare(&[&c, &a, &b], &["--out", out.to_str().unwrap(), "--names", "C,A,B"]);
    assert!(ok, "{stderr}");
    let df = table(&out.join("runs.parquet"));
    let pairs: Vec<(String, String)> = strs(&df, "run_a").into_iter().zip(strs(&df, "run_b")).collect();
    let want: Vec<(String, String)> =
        [("C", "A"), ("C", "B"), ("A", "B")].iter().map(|(x, y)| (x.to_string(), y.to_string())).collect();
    assert_eq!(pairs, want);
    let (wins, cons) = (f64s(&df, "a_wins"), f64s(&df, "consistency"));
    // C loses every pair to A and to B: the verdicts (A, B better) hold on every pair
    assert_eq!((wins[0], wins[1], cons[0], cons[1]), (0.0, 0.0, 1.0, 1.0));
    assert!((cons[2] - 5.5 / 9.0).abs() < 1e-12 && cons[2] == wins[2], "{cons:?}");
    // ranking.csv: one row per run, best first (no field of these holds a comma)
    let text = std::fs::read_to_string(out.join("ranking.csv")).unwrap();
    let mut lines = text.lines().map(|l| l.split(',').collect::<Vec<_>>());
    let header = lines.next().unwrap();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let ranking: Vec<Vec<&str>> = lines.collect();
    assert_eq!(ranking.iter().map(|r| r[col("run")]).collect::<Vec<_>>(), vec!["A", "B", "C"]);
    assert_eq!(ranking.iter().map(|r| r[col("rank")]).collect::<Vec<_>>(), vec!["1", "2", "3"]);
    assert_eq!(ranking[0][col("ranking")], "A > B > C");
    let rc: f64 = ranking[0][col("ranking_consistency")].parse().unwrap();
    assert!((rc - 15.0 / 27.0).abs() < 1e-12, "{rc}");
    assert!(stdout.contains("A (68.3) > B (65.0) > C (50.0); 55.6% of 27 joint picks"), "{stdout}");
    // two runs into the same folder: the three-run ranking is not left beside them
    let (ok, _, stderr) = compare(&[&a, &b], &["--out", out.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(!out.join("ranking.csv").exists());
}

#[test]
fn bad_inputs_and_an_output_into_an_input_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let c = trail(&[10, 12, 14], 30);
    let a = write_run(&dir.path().join("a"), &rows("toy", &c, h));
    let nothing = dir.path().join("nothing");
    std::fs::create_dir_all(&nothing).unwrap();
    std::fs::write(nothing.join("notes.txt"), "not a run").unwrap();
    let (ok, _, stderr) = compare(&[&a, &nothing], &["--out", dir.path().join("out").to_str().unwrap()]);
    assert!(!ok && stderr.contains(nothing.to_str().unwrap()) && stderr.contains("neither a run"), "{stderr}");
    let b = write_run(&dir.path().join("b"), &rows("toy", &c, h));
    for into in [a.clone(), b.join("eval")] {
        let (ok, _, stderr) = compare(&[&a, &b], &["--out", into.to_str().unwrap()]);
        assert!(!ok && stderr.contains("never writes into its inputs"), "{}: {stderr}", into.display());
        assert!(!into.join("runs.parquet").exists() && !into.join(".lock").exists());
    }
    // one input only, and labels that do not fit
    let (ok, _, _) = compare(&[&a], &["--out", dir.path().join("out").to_str().unwrap()]);
    assert!(!ok);
    let (ok, _, stderr) = compare(&[&a, &b], &["--out", dir.path().join("out").to_str().unwrap(), "--names", "x"]);
    assert!(!ok && stderr.contains("--names gives 1 labels for 2 runs"), "{stderr}");
}

/// The text table on a small fixed case (two tasks, one restricted, one only in one run).
#[test]
fn render_snapshot_on_a_small_fixed_case() {
    let dir = tempfile::tempdir().unwrap();
    let mut ra = rows("arc", &trail(&[20, 22, 25, 24, 27], 40), h);
    ra.extend(rows("piqa", &trail(&[30, 31, 29, 33, 32], 50), h));
    ra.extend(rows("only_a", &trail(&[5, 6, 7, 8, 9], 25), h));
    let mut rb = rows("arc", &trail(&[21, 24, 23, 26, 26], 40), h);
    rb.extend(rows("piqa", &trail(&[30, 34, 35, 36, 34], 50), h).into_iter().filter(|r| r.example_id != "piqa/49"));
    let a = write_run(&dir.path().join("a"), &ra);
    let b = write_run(&dir.path().join("b"), &rb);
    let runs = vec![
        ("runs/a".to_string(), analysis::report::load_input(&a).unwrap()),
        ("runs/b".to_string(), analysis::report::load_input(&b).unwrap()),
    ];
    let opts = analysis::Options { bootstrap: 200, ..Default::default() };
    let c = analysis::runs::compare_runs(&runs, &opts).unwrap();
    insta::assert_snapshot!(format!("{}notes:\n{}", analysis::runs::render(&c), c.notes.join("\n")));
}

/// lm-evaluation-harness output folders (`--log_samples`, lm-eval 0.4's `doc_hash`) compare as
/// run folders do: the items are matched by their doc hash, and nothing is written into them.
#[test]
fn lm_eval_outputs_compare_by_doc_hash() {
    let dir = tempfile::tempdir().unwrap();
    // `right(step, doc)`: whether the doc is answered right at that checkpoint
    let write = |root: &Path, right: &dyn Fn(u32, u32) -> bool| {
        for step in [10u32, 20, 30] {
            let m = root.join(format!("runs__x__hf__step_{step:06}"));
            std::fs::create_dir_all(&m).unwrap();
            let lines: Vec<String> = (0..25u32)
                .map(|d| {
                    let (l0, l1) = if right(step, d) { ("-1", "-2") } else { ("-2", "-1") };
                    format!(
                        r#"{{"doc_id": {d}, "target": 0, "arguments": [["Q{d}", " x"], ["Q{d}", " yy"]], "filtered_resps": [["{l0}", "False"], ["{l1}", "False"]], "doc_hash": "{}", "prompt_hash": "00"}}"#,
                        h(d as usize)
                    )
                })
                .collect();
            let acc = (0..25).filter(|&d| right(step, d)).count() as f64 / 25.0;
            let results = serde_json::json!({"results": {"t": {"acc,none": acc, "acc_stderr,none": 0.01, "alias": "t"}}, "config": {"model": "hf", "model_args": {"pretrained": format!("runs/x/hf/step_{step:06}")}}});
            std::fs::write(m.join("results_2024-01-01T00-00-00.5.json"), results.to_string()).unwrap();
            std::fs::write(m.join("samples_t_2024-01-01T00-00-00.5.jsonl"), lines.join("\n") + "\n").unwrap();
        }
    };
    let (a, b) = (dir.path().join("lm-a"), dir.path().join("lm-b"));
    write(&a, &|step, d| d < 10 + step / 10);
    write(&b, &|step, d| d < 15 + step / 10);
    let out = dir.path().join("out");
    let (ok, stdout, stderr) = compare(&[&a, &b], &["--out", out.to_str().unwrap(), "--names", "A,B"]);
    assert!(ok, "{stderr}");
    let df = table(&out.join("runs.parquet"));
    assert_eq!((strs(&df, "identity")[0].as_str(), u64s(&df, "shared")[0]), ("text hash", 25));
    // final stage = all three checkpoints: A 11, 12, 13 of 25, B 16, 17, 18
    assert!((f64s(&df, "difference")[0] + 0.2).abs() < 1e-12, "{stdout}");
    assert_eq!((f64s(&df, "a_wins")[0], f64s(&df, "consistency")[0]), (0.0, 1.0));
    let p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("provenance.json")).unwrap()).unwrap();
    assert_eq!(p["runs"][1]["sources"].as_array().unwrap().len(), 6, "{p}");
    // never into lm-eval outputs, not even a new folder inside them
    let inside = a.join("comparison");
    let (ok, _, stderr) = compare(&[&a, &b], &["--out", inside.to_str().unwrap()]);
    assert!(!ok && stderr.contains("never writes into its inputs") && !inside.exists(), "{stderr}");
}
