//! `analysis report` on a `generate_until` task laid out as `lm_eval --output_path OUT
//! --log_samples` (lm-eval 0.4.13) writes it: three checkpoints, one model folder each (the step
//! in `config.model_args`' `pretrained=.../step_000100`), a gsm8k-like task with two filters
//! (`strict-match`, `flexible-extract`). The report reads it per example, one trail per filter,
//! with `acc` (exact match) and `char_f1` and the instability score of the generated texts (char
//! F1 between consecutive checkpoints); a bad samples line fails with file:line and leaves
//! `--out` absent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const STEPS: [u32; 3] = [100, 200, 300];
const DOCS: u32 = 12;
const STAMP: &str = "2025-01-01T12-00-00.000001";

/// The generated answer of doc `d` at checkpoint `t`: some docs settle on the right number,
/// some keep changing their text.
fn generation(d: u32, t: usize) -> String {
    let answer = 10 + d;
    match (d % 4, t) {
        (0, _) => format!("She has {answer} apples left.\n#### {answer}"),
        (1, 0) => format!("She has {} apples.\n#### {}", answer + 1, answer + 1),
        (1, _) => format!("She has {answer} apples.\n#### {answer}"),
        (2, t) => format!("The apples number {} in all {}", answer + t as u32, "so on ".repeat(t)),
        _ => format!("Step {t}: add the apples, total {}", answer * (t as u32 + 1)),
    }
}

/// What a filter keeps of a generation (as gsm8k's regexes would): strict-match the number after
/// `#### `, flexible-extract the last number.
fn filtered(text: &str, filter: &str) -> String {
    match filter {
        "strict-match" => text.split("#### ").nth(1).map_or("[invalid]".to_string(), |s| s.trim().to_string()),
        _ => text
            .split(|c: char| !c.is_ascii_digit())
            .filter(|s| !s.is_empty())
            .last()
            .map_or("[invalid]".to_string(), str::to_string),
    }
}

fn sample_lines(t: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for filter in ["strict-match", "flexible-extract"] {
        for d in 0..DOCS {
            let question = format!("Janet has {} apples. How many are left?", 10 + d);
            let target = format!("She keeps them all.\n#### {}", 10 + d);
            let text = generation(d, t);
            let out = filtered(&text, filter);
            // lm-eval's exact_match for gsm8k ignores everything up to `#### ` in the target
            let em = f64::from(u8::from(out == (10 + d).to_string()));
            let line = serde_json::json!({
                "doc_id": d,
                "doc": {"question": question, "answer": target},
                // every third doc gives its gold as a list of texts
                "target": if d % 3 == 2 { serde_json::json!([target, format!("{}", 10 + d)]) } else { target.clone().into() },
                "arguments": {"gen_args_0": {"arg_0": format!("Question: {question}\nAnswer:"), "arg_1": {"until": ["Question:", "</s>", "<|im_end|>"], "do_sample": false, "temperature": 0.0}}},
                "resps": [[text]],
                "filtered_resps": [out],
                "filter": filter,
                "metrics": ["exact_match"],
                "doc_hash": format!("{:064x}", d + 1),
                "prompt_hash": format!("{:064x}", d + 100),
                "target_hash": format!("{:064x}", d + 200),
                "exact_match": em,
            });
            lines.push(line.to_string());
        }
    }
    lines
}

/// OUT/runs__fixture__hf__step_<N>/{results,samples_gsm8k}_<ts>.{json,jsonl}
fn fixture(out: &Path) -> Vec<PathBuf> {
    let mut samples = Vec::new();
    for (t, step) in STEPS.iter().enumerate() {
        let m = out.join(format!("runs__fixture__hf__step_{step:06}"));
        std::fs::create_dir_all(&m).unwrap();
        let results = serde_json::json!({
            "results": {"gsm8k": {"alias": "gsm8k", "exact_match,strict-match": 0.5, "exact_match_stderr,strict-match": 0.1,
                "exact_match,flexible-extract": 0.5, "exact_match_stderr,flexible-extract": 0.1}},
            "configs": {"gsm8k": {"task": "gsm8k", "output_type": "generate_until"}},
            "versions": {"gsm8k": 3.0},
            "n-shot": {"gsm8k": 0},
            "config": {"model": "hf", "model_args": {"pretrained": format!("runs/fixture/hf/step_{step:06}"), "dtype": "float32"}},
        });
        std::fs::write(m.join(format!("results_{STAMP}.json")), serde_json::to_string_pretty(&results).unwrap())
            .unwrap();
        let p = m.join(format!("samples_gsm8k_{STAMP}.jsonl"));
        std::fs::write(&p, sample_lines(t).join("\n") + "\n").unwrap();
        samples.push(p);
    }
    samples
}

fn report(input: &Path, out: &Path) -> std::process::Output {
    report_with(input, out, &[])
}

fn report_with(input: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_analysis"))
        .arg("report")
        .arg(input)
        .args(["--out".as_ref(), out.as_os_str(), "--bootstrap".as_ref(), "50".as_ref()])
        .args(extra)
        .output()
        .unwrap()
}

/// A CSV written by the report as rows of column name -> cell (no cell holds a comma).
fn csv_rows(path: &Path) -> Vec<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines.map(|l| header.iter().map(|h| h.to_string()).zip(l.split(',').map(str::to_string)).collect()).collect()
}

#[test]
fn a_generation_task_is_analysed_per_example_for_each_filter() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("OUT");
    fixture(&out);
    let analysed = dir.path().join("analysis");
    let o = report(&out, &analysed);
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "analysis report failed: {stderr}");
    assert!(!stderr.contains("not a multiple-choice"), "{stderr}");
    assert!(stdout.contains("gsm8k/strict-match") && stdout.contains("gsm8k/flexible-extract"), "{stdout}");

    let tm = csv_rows(&analysed.join("task_metrics.csv"));
    let row = |task: &str, window: &str, metric: &str| {
        tm.iter()
            .find(|r| r["task"] == task && r["window"] == window && r["metric"] == metric)
            .unwrap_or_else(|| panic!("no row {task} {window} {metric}"))
    };
    for trail in ["gsm8k/strict-match", "gsm8k/flexible-extract"] {
        let metrics: Vec<&str> =
            tm.iter().filter(|r| r["task"] == trail && r["window"] == "all").map(|r| r["metric"].as_str()).collect();
        assert_eq!(metrics, ["acc", "char_f1"], "{trail}: the metrics of a generation task");
        let acc = row(trail, "all", "acc");
        assert_eq!((acc["examples"].as_str(), acc["checkpoints"].as_str()), ("12", "3"));
        assert_eq!(acc["chance"], "0.0", "no options: chance 0");
        // the IS of the texts is there, and the char F1 trail has its example-level MTV
        let is: f64 = acc["mean_instability"].parse().unwrap();
        assert!(is > 0.0 && is < 1.0, "{trail}: IS {is}");
        let f1 = row(trail, "all", "char_f1");
        let (ex_mtv, null): (f64, f64) = (f1["mean_flip_rate"].parse().unwrap(), f1["null_p_value"].parse().unwrap());
        assert!(ex_mtv > 0.0 && (0.0..=1.0).contains(&null), "{trail}: {f1:?}");
    }

    // acc by hand: strict-match at step 300: docs 0, 1 mod 4 right (6 of 12)
    let fin = row("gsm8k/strict-match", "all", "acc");
    assert!((fin["final_score"].parse::<f64>().unwrap() - 0.5).abs() < 1e-12, "{fin:?}");

    // the IS of one example by hand: 1 - char F1 of consecutive filtered texts, averaged
    let em = csv_rows(&analysed.join("example_metrics.csv"));
    let d = 2;
    let texts: Vec<String> = (0..3).map(|t| filtered(&generation(d, t), "flexible-extract")).collect();
    let want = (0..2).map(|t| 1.0 - textmatch::char_f1(&texts[t], &texts[t + 1])).sum::<f64>() / 2.0;
    let got = em
        .iter()
        .find(|r| {
            r["task"] == "gsm8k/flexible-extract"
                && r["window"] == "all"
                && r["example_id"] == "gsm8k/flexible-extract/2"
        })
        .expect("example row of doc 2");
    assert!((got["instability"].parse::<f64>().unwrap() - want).abs() < 1e-12, "{got:?} vs {want}");
    assert!(want > 0.0);
    // a doc whose text never changes has IS 0
    let still = em
        .iter()
        .find(|r| {
            r["task"] == "gsm8k/strict-match" && r["window"] == "all" && r["example_id"] == "gsm8k/strict-match/0"
        })
        .unwrap();
    assert_eq!(still["instability"], "0.0");

    // the HTML page and --acc-norm (which a generation task lacks: its example level stays on
    // exact match) run through too
    let page = dir.path().join("page");
    let o = report_with(&out, &page, &["--html", "--acc-norm"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(page.join("report.html").is_file());
    let tm = csv_rows(&page.join("task_metrics.csv"));
    let acc =
        tm.iter().find(|r| r["task"] == "gsm8k/strict-match" && r["window"] == "all" && r["metric"] == "acc").unwrap();
    assert!(acc["mean_instability"].parse::<f64>().unwrap() > 0.0);
}

#[test]
fn a_bad_generation_line_fails_with_file_and_line_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("OUT");
    let samples = fixture(&out);
    let analysed = dir.path().join("analysis");
    let bad = &samples[1];
    let mut lines: Vec<String> = std::fs::read_to_string(bad).unwrap().lines().map(str::to_string).collect();
    for (i, (broken, want)) in
        [(r#""filtered_resps":[{"text":"12"}]"#, "not a string"), (r#""filtered_resps":[]"#, "empty list")]
            .into_iter()
            .enumerate()
    {
        let original = lines[1].clone();
        lines[1] = original.replace(r#""filtered_resps":["11"]"#, broken);
        assert_ne!(lines[1], original, "the fixture's doc 1 answers 11 under strict-match at step 200");
        std::fs::write(bad, lines.join("\n") + "\n").unwrap();
        let o = report(&out, &analysed);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "case {i}: a bad line was accepted");
        let at = format!("samples_gsm8k_{STAMP}.jsonl:2");
        assert!(stderr.contains(&at) && stderr.contains("step_000200") && stderr.contains(want), "case {i}: {stderr}");
        assert!(!analysed.exists(), "case {i}: --out was written");
        lines[1] = original;
    }
    // a target that is not text
    lines[5] = lines[5].replacen(r#""target":"#, r#""target":{"a":1},"x":"#, 1);
    std::fs::write(bad, lines.join("\n") + "\n").unwrap();
    let o = report(&out, &analysed);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && stderr.contains(&format!("{STAMP}.jsonl:6")) && stderr.contains("`target`"),
        "{stderr}"
    );
    assert!(!analysed.exists());
}
