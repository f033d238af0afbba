//! lm-evaluation-harness outputs into [`TaskRecord`]s and [`ExampleRecord`]s.
//!
//! - Results JSON (`{"results": {task: {"acc": .., "acc_stderr": .., "acc_norm": ..}}}`; newer
//!   versions write `"acc,none"`): one file per checkpoint, its step taken from `step<N>` in the
//!   file name, never from the file order (Pythia's checkpoints are unevenly spaced).
//! - `--log_samples` JSONL: one line per example with `doc_id`, `target`, `arguments` (context,
//!   continuation per option) and `filtered_resps` (per option `[loglik, is_greedy]`, numbers
//!   stored as strings).

use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::path::Path;

use crate::{argmax, ExampleRecord, TaskRecord};

/// The checkpoint step in a file name such as `160m-deduped_step13000.json`.
pub fn step_from_name(path: &Path) -> Result<u64> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let Some(pos) = name.rfind("step") else {
        bail!("{}: cannot tell the checkpoint step; name the file ..._step<N>.json", path.display());
    };
    let digits: String = name[pos + 4..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().with_context(|| format!("{}: no number after `step` in the file name", path.display()))
}

fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// Task rows of one results file: every task that reports `acc`.
pub fn read_results(path: &Path) -> Result<Vec<TaskRecord>> {
    let step = step_from_name(path)?;
    let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?;
    let v: Value = serde_json::from_str(&text).with_context(|| format!("{}: not JSON (truncated?)", path.display()))?;
    let Some(results) = v.get("results").and_then(Value::as_object) else {
        bail!("{}: no `results` object; not an lm-evaluation-harness results file", path.display());
    };
    let mut out = Vec::new();
    for (task, metrics) in results {
        let get = |m: &str| metrics.get(m).or_else(|| metrics.get(format!("{m},none"))).and_then(num);
        let Some(acc) = get("acc") else { continue };
        if !acc.is_finite() {
            bail!("{}: task `{task}` has a non-finite acc", path.display());
        }
        out.push(TaskRecord {
            step,
            task: task.clone(),
            n: None,
            acc,
            acc_stderr: get("acc_stderr").unwrap_or(f64::NAN),
            acc_norm: get("acc_norm"),
            acc_norm_stderr: get("acc_norm_stderr"),
        });
    }
    out.sort_by(|a, b| a.task.cmp(&b.task));
    Ok(out)
}

/// All results files of a folder (one per checkpoint), ordered by step then task.
pub fn read_results_dir(dir: &Path) -> Result<Vec<TaskRecord>> {
    let mut rows = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("{}: cannot list", dir.display()))? {
        let p = entry?.path();
        if p.extension().is_some_and(|e| e == "json") {
            rows.extend(read_results(&p)?);
        }
    }
    if rows.is_empty() {
        bail!("{}: no lm-evaluation-harness results files (*.json) found", dir.display());
    }
    rows.sort_by(|a, b| (a.step, &a.task).cmp(&(b.step, &b.task)));
    Ok(rows)
}

/// The (context, continuation) pairs of a sample's `arguments`, in either layout the harness has
/// used (a list of pairs, or `{"gen_args_0": {"arg_0": .., "arg_1": ..}}`).
fn arguments(v: &Value) -> Vec<(String, String)> {
    let pair = |a: &Value, b: &Value| (a.as_str().unwrap_or("").to_string(), b.as_str().unwrap_or("").to_string());
    match v {
        Value::Array(items) => items.iter().filter_map(|i| i.as_array().filter(|p| p.len() >= 2).map(|p| pair(&p[0], &p[1]))).collect(),
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by_key(|k| k.trim_start_matches(|c: char| !c.is_ascii_digit()).parse::<usize>().unwrap_or(0));
            keys.into_iter().map(|k| pair(&map[k]["arg_0"], &map[k]["arg_1"])).collect()
        }
        _ => Vec::new(),
    }
}

/// Characters of a choice as lm-evaluation-harness's `acc_norm` counts them: the continuation
/// without its leading target delimiter (one space).
pub fn choice_chars(continuation: &str) -> u32 {
    continuation.strip_prefix(' ').unwrap_or(continuation).chars().count() as u32
}

/// Example rows of one `--log_samples` JSONL file of a multiple-choice task.
pub fn read_log_samples(path: &Path, task: &str, step: u64) -> Result<Vec<ExampleRecord>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let at = || format!("{}:{}", path.display(), i + 1);
        let v: Value = serde_json::from_str(line).with_context(|| format!("{}: malformed sample (truncated log?)", at()))?;
        let resps = v.get("filtered_resps").and_then(Value::as_array).with_context(|| format!("{}: no `filtered_resps`", at()))?;
        let mut logliks = Vec::new();
        let mut greedy = Vec::new();
        for r in resps {
            let r = r.as_array().and_then(|a| if a.first().is_some_and(Value::is_array) { a[0].as_array() } else { Some(a) });
            let (ll, g) = match r {
                Some(a) if !a.is_empty() => (num(&a[0]), a.get(1).map(|g| g.as_bool().unwrap_or(g.as_str() == Some("True")))),
                _ => (None, None),
            };
            let ll = ll.with_context(|| format!("{}: a response has no log-likelihood", at()))?;
            if !ll.is_finite() {
                bail!("{}: non-finite log-likelihood {ll}", at());
            }
            logliks.push(ll);
            greedy.push(g.unwrap_or(false));
        }
        if logliks.is_empty() {
            bail!("{}: no responses", at());
        }
        let gold = v.get("target").and_then(num).with_context(|| format!("{}: `target` is not an option index", at()))? as usize;
        if gold >= logliks.len() {
            bail!("{}: target {gold} but {} options", at(), logliks.len());
        }
        let args = v.get("arguments").map(arguments).unwrap_or_default();
        // lm-eval's acc_norm divides by the choice's length without the target delimiter (" ")
        let chars: Vec<u32> = if args.len() == logliks.len() { args.iter().map(|(_, c)| choice_chars(c)).collect() } else { vec![0; logliks.len()] };
        let bytes: Vec<u32> = if args.len() == logliks.len() { args.iter().map(|(_, c)| c.len() as u32).collect() } else { Vec::new() };
        let norm: Vec<f64> = logliks.iter().zip(&chars).map(|(l, &c)| l / c.max(1) as f64).collect();
        let (p, pn) = (argmax(&logliks), argmax(&norm));
        let doc_id = v.get("doc_id").map(|d| d.to_string()).unwrap_or_else(|| i.to_string());
        out.push(ExampleRecord {
            step,
            task: task.into(),
            example_id: format!("{task}/{doc_id}"),
            gold: gold as u32,
            predicted: p as u32,
            predicted_norm: pn as u32,
            correct: p == gold,
            correct_norm: pn == gold,
            logliks,
            lengths_chars: chars,
            lengths_tokens: vec![0; greedy.len()],
            lengths_bytes: bytes,
            gold_is_greedy: greedy[gold],
            output: p.to_string(),
        });
    }
    if out.is_empty() {
        bail!("{}: no samples", path.display());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PYTHIA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/external/pythia-v1-zero-shot");

    #[test]
    fn pythia_files_load_with_step_numbers_from_the_names() {
        let dir = Path::new(PYTHIA).join("pythia-160m-deduped");
        if !dir.is_dir() {
            panic!("{} missing: the vendored Pythia results (data/external) are part of the repository", dir.display());
        }
        let rows = read_results_dir(&dir).unwrap();
        let mut steps: Vec<u64> = rows.iter().map(|r| r.step).collect();
        steps.dedup();
        assert_eq!(steps.len(), 27);
        assert_eq!(&steps[..11], &[0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512]);
        assert_eq!(steps[11..14], [1000, 3000, 13000]);
        assert_eq!(*steps.last().unwrap(), 143000);
        let arc = rows.iter().find(|r| r.step == 0 && r.task == "arc_challenge").unwrap();
        assert!((arc.acc - 0.23293515358361774).abs() < 1e-15, "the first file's first task, by hand");
    }

    #[test]
    fn log_samples_with_string_numbers_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("samples_piqa.jsonl");
        std::fs::write(&p, concat!(
            r#"{"doc_id": 0, "target": 1, "arguments": [["Q:", " ab"], ["Q:", " abcd"]], "filtered_resps": [["-4.0", "False"], ["-6.0", "True"]]}"#, "\n",
            r#"{"doc_id": 1, "target": 0, "arguments": {"gen_args_0": {"arg_0": "Q:", "arg_1": " a"}, "gen_args_1": {"arg_0": "Q:", "arg_1": " b"}}, "filtered_resps": [[-1.5, true], [-2.0, false]]}"#, "\n",
        )).unwrap();
        let rows = read_log_samples(&p, "piqa", 7).unwrap();
        assert_eq!(rows.len(), 2);
        // acc picks -4.0 (option 0, wrong); acc_norm (delimiter not counted): -4/2 vs -6/4 picks
        // option 1 (right)
        assert_eq!((rows[0].predicted, rows[0].correct, rows[0].predicted_norm, rows[0].correct_norm), (0, false, 1, true));
        assert!(rows[0].gold_is_greedy);
        assert_eq!((rows[0].lengths_chars.clone(), rows[0].lengths_bytes.clone()), (vec![2, 4], vec![3, 5]));
        assert_eq!((rows[1].predicted, rows[1].correct, rows[1].example_id.as_str()), (0, true, "piqa/1"));
        std::fs::write(&p, r#"{"doc_id": 0, "target": 1, "filtered_resps": [["-4.0", "Fal"#).unwrap();
        let e = format!("{:#}", read_log_samples(&p, "piqa", 7).unwrap_err());
        assert!(e.contains("samples_piqa.jsonl:1") && e.contains("truncated"), "{e}");
    }

    #[test]
    fn a_file_without_a_step_is_refused_by_name() {
        let e = step_from_name(Path::new("results.json")).unwrap_err().to_string();
        assert!(e.contains("results.json") && e.contains("step"), "{e}");
    }
}
