//! `analysis report --html` on a run folder whose answers are known: a task with a real drop at
//! its newest checkpoint, a task of pure churn, and an averaged evaluation beside them; the
//! decisions table, the text and the page agree with the construction.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use records::{ExampleRecord, TaskRecord};
use std::path::Path;
use std::process::Command;

/// Rows of one task from a correctness matrix [checkpoint][example].
fn rows(task: &str, correct: &[Vec<bool>], steps: &[u64]) -> Vec<ExampleRecord> {
    let mut ex = Vec::new();
    for (t, row) in correct.iter().enumerate() {
        for (e, &ok) in row.iter().enumerate() {
            ex.push(ExampleRecord {
                step: steps[t],
                task: task.into(),
                example_id: format!("{task}/{e:04}"),
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
                item_hash: String::new(),
                targets: Vec::new(),
                score_names: Vec::new(),
                score_values: Vec::new(),
            });
        }
    }
    ex
}

fn write_variant(dir: &Path, e: &[ExampleRecord]) {
    std::fs::create_dir_all(dir).unwrap();
    let t: Vec<TaskRecord> = records::summarise(e).unwrap();
    records::write_frame(&dir.join("tasks.parquet"), &mut records::tasks_frame(&t).unwrap()).unwrap();
    records::write_frame(&dir.join("examples.parquet"), &mut records::examples_frame(e).unwrap()).unwrap();
}

/// A run of 12 checkpoints x 1,000 examples: `churn` redraws 20% undecided examples at every
/// checkpoint (population accuracy constant); `drop` is the same with 60 examples turned wrong
/// at the last checkpoint (a real drop of 6 points). `eval-avg-k4/` holds a smoother trail: each
/// undecided example keeps its draw for 4 checkpoints.
fn make_run(dir: &Path) {
    let n = 1000;
    let steps: Vec<u64> = (1..=12).map(|t| 100 * t).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let settled: Vec<Option<bool>> =
        (0..n).map(|_| if rng.gen_bool(0.2) { None } else { Some(rng.gen_bool(0.5)) }).collect();
    let mut single = vec![];
    let mut avg = vec![];
    for task in ["churn", "drop"] {
        let mut m: Vec<Vec<bool>> = (0..steps.len())
            .map(|_| settled.iter().map(|s| s.unwrap_or_else(|| rng.gen_bool(0.5))).collect())
            .collect();
        if task == "churn" {
            // the newest transition: 30 examples each way, no net change
            let last = m.len() - 1;
            m[last] = m[last - 1].clone();
            let right: Vec<usize> = (0..n).filter(|&e| m[last][e]).take(30).collect();
            let wrong: Vec<usize> = (0..n).filter(|&e| !m[last][e]).take(30).collect();
            for e in right.into_iter().chain(wrong) {
                m[last][e] = !m[last][e];
            }
        }
        if task == "drop" {
            let last = m.len() - 1;
            let right: Vec<usize> = (0..n).filter(|&e| m[last][e] && settled[e].is_some()).take(60).collect();
            for e in right {
                m[last][e] = false;
            }
        }
        single.extend(rows(task, &m, &steps));
        let held: Vec<Vec<bool>> = (0..steps.len())
            .map(|t| (0..n).map(|e| if settled[e].is_some() { m[t][e] } else { m[t - t % 4][e] }).collect())
            .collect();
        avg.extend(rows(task, &held[3..], &steps[3..]));
    }
    write_variant(&dir.join("eval"), &single);
    write_variant(&dir.join("eval-avg-k4"), &avg);
}

fn report(run: &Path, out: &Path) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_analysis"))
        .args(["report".as_ref(), run.as_os_str(), "--out".as_ref(), out.as_os_str(), "--html".as_ref()])
        .args(["--bootstrap", "200"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn a_report_decides_what_the_construction_says_and_draws_every_plot() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    make_run(&run);
    let out = dir.path().join("analysis");
    let text = report(&run, &out);
    let decisions = std::fs::read_to_string(out.join("decisions.csv")).unwrap();
    let find = |task: &str, decision: &str| -> String {
        decisions
            .lines()
            .find(|l| l.starts_with(&format!("{task},{decision},")))
            .unwrap_or_else(|| panic!("no {task} {decision} row in\n{decisions}"))
            .to_string()
    };
    assert!(find("drop", "latest_change").contains("real_drop"), "{decisions}");
    assert!(find("churn", "latest_change").contains("within_noise"), "{decisions}");
    assert!(find("drop", "keep").contains(",step "), "{decisions}");
    // the averaged trail was compared: a window row per task
    assert!(find("churn", "window").contains("average"), "{decisions}");
    assert!(text.contains("real drop of 6.7 points") || text.contains("real drop of 6."), "{text}");
    // the page: 2 tasks, 2 plots each (trail, heatmap), the averaged trail and its smoothing baseline
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("data-plots=\"4\" data-tasks=\"2\""), "{}", &html[..600]);
    assert_eq!(html.matches("<svg class=\"plot\"").count(), 4);
    assert_eq!(html.matches("<section class=\"task\"").count(), 2);
    assert!(html.contains(">average k=4</text>") && html.contains(">smoothing k=4</text>"));
    assert!(!html.contains("src=") && !html.contains("<link") && !html.contains("<script"));
    // the same report without --html removes the earlier page: one report is one set
    let o = Command::new(env!("CARGO_BIN_EXE_analysis"))
        .args(["report".as_ref(), run.as_os_str(), "--out".as_ref(), out.as_os_str()])
        .args(["--bootstrap", "50"])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(!out.join("report.html").exists() && out.join("decisions.csv").is_file());
}
