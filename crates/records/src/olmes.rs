//! AI2 OLMES (`oe_eval`) outputs into [`ExampleRecord`]s and [`TaskRecord`]s ([`Olmes`]).
//!
//! An OLMES run (`oe_eval/run_eval.py`, one `--output-dir` per checkpoint) writes per task
//! `task-NNN-<task>-predictions.jsonl` (one line per doc) beside `task-NNN-<task>-metrics.json`
//! (the task's aggregate metrics and the run's `model_config`), and at the end `metrics.json`
//! (`{"all_primary_scores", "metrics": [{"task", <metric>: .., "num_instances", ..}],
//! "model_config"}`). `NNN` is the task's index in the run; newer versions replace `:` and `/` in
//! the task name by `_` in the file name (`task_file_name`).
//!
//! A predictions line is `oe_eval/metrics/metric.py` `Metric.compute_for_docs`'s
//! `{"doc_id", "native_id", "metrics", "model_output", "label"}` plus `task_hash`, `model_hash`:
//! - multiple choice (`MCAccuracy`): `model_output` holds one object per option with
//!   `sum_logits`, `num_tokens`, `num_tokens_all`, `is_greedy`, `logits_per_token`,
//!   `logits_per_char`, `bits_per_byte`, `num_chars` (the continuation's characters, its
//!   leading space included); `metrics` holds `predicted_index_raw`, `predicted_index_per_char`,
//!   `correct_choice`, `acc_raw`, `acc_per_token`, `acc_per_char`, `acc_per_byte`, ...; `label`
//!   the gold index. A row: `logliks` = `sum_logits`, `lengths_chars` = `num_chars`,
//!   `lengths_tokens` = `num_tokens`, `predicted` the argmax of `sum_logits`, `predicted_norm`
//!   the argmax of `logits_per_char` (OLMES's `acc_per_char`), `correct` = `acc_raw`,
//!   `correct_norm` = `acc_per_char`, `gold` = `correct_choice` (what OLMES scored against),
//!   `gold_is_greedy` = the gold option's `is_greedy`. `lengths_bytes` stays empty (OLMES stores
//!   bits per byte, not the bytes).
//! - generation (`ExactMatch`, `GeneralMatch`, ...): `model_output` holds one object per sample
//!   with `continuation` (the generated text) and, after the metric's extraction,
//!   `model_answer`; `label` is the gold text (or a list of them); `metrics` the per-doc scores
//!   (`exact_match`, `exact_match_simple`, `f1`, ...). A row: `output` = `model_answer` (else
//!   `continuation`) of the first sample, `targets` = the label(s), `score_names` /
//!   `score_values` = every number (or boolean) of `metrics`, `correct` = `exact_match >= 1`,
//!   else the first metric that is 0/1 on every line (none: the task is left to the task level,
//!   with a notice).
//!
//! Task rows: `acc` = `acc_raw` (multiple choice) or `exact_match` (generation) of the task's
//! metrics file (else of its entry in `metrics.json`), `acc_norm` = `acc_per_char`, `n` =
//! `num_instances`; OLMES stores no standard error, so it is `sqrt(p (1 - p) / (n - 1))` of that
//! mean ([`crate::stderr_of_mean01`]).
//!
//! The step of a folder: `--step-from` over the predictions file's path, else `step<N>` in the
//! `revision` or the last `step<N>` in the `model_path` / `model` of its `model_config` (as
//! lm-eval's `model_args`), else its `--step-map` row (by path, or by that model name), else
//! `step<N>` in the file name ([`StepRule::step_of_results`]).
//!
//! These files were read in the public copies of `oe_eval/run_eval.py` and
//! `oe_eval/metrics/metric.py` of davidheineman/olmes (commit 6e901a30), allenai/olmes itself
//! not being in reach; `tests/fixtures/olmes/README.md` says what the fixture follows.

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::harness::{expand, read_json, text_field, StepRule};
use crate::source::{Discovered, Parsed, Reader, Unit};
use crate::{argmax, ExampleRecord, TaskRecord};

/// The OLMES reader.
pub struct Olmes;

/// `task-NNN-<task>-predictions.jsonl` -> (NNN, the task as the file names it).
pub fn predictions_name(path: &Path) -> Option<(u32, String)> {
    let name = path.file_name()?.to_str()?;
    let rest = name.strip_prefix("task-")?.strip_suffix("-predictions.jsonl")?;
    let (idx, task) = rest.split_once('-')?;
    if idx.is_empty() || !idx.bytes().all(|b| b.is_ascii_digit()) || task.is_empty() {
        return None;
    }
    Some((idx.parse().ok()?, task.to_string()))
}

/// Every file below `dir` (any depth, hidden entries and symlinked folders skipped) for which
/// `keep` holds, sorted.
pub(crate) fn walk(dir: &Path, keep: &dyn Fn(&Path) -> bool) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).with_context(|| format!("{}: cannot list", d.display()))? {
            let entry = entry.with_context(|| format!("{}: cannot list", d.display()))?;
            let p = entry.path();
            let name = entry.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            let ft = entry.file_type().with_context(|| format!("{}: cannot stat", p.display()))?;
            if ft.is_dir() {
                stack.push(p);
            } else if (ft.is_file() || (ft.is_symlink() && p.is_file())) && keep(&p) {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Files named by the inputs (files, folders searched at any depth, globs) for which `keep`
/// holds; a file given by name that `keep` refuses is an error worded by `what`.
pub(crate) fn collect(inputs: &[PathBuf], keep: &dyn Fn(&Path) -> bool, what: &str) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for input in inputs {
        for p in expand(input)? {
            if p.is_dir() {
                out.extend(walk(&p, keep)?);
            } else if p.is_file() {
                if !keep(&p) {
                    bail!("{}: not {what}", p.display());
                }
                out.push(p);
            } else {
                bail!("{}: no such file or folder", p.display());
            }
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// A number, possibly written as a string; a boolean as 0/1.
pub(crate) fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    }
}

/// An id as text: a string as is, anything else as its JSON.
pub(crate) fn id_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The sha256 hex of a JSON value's text (the identity of an example's text).
pub(crate) fn sha256_hex(v: &Value) -> String {
    output::provenance::sha256_hex(v.to_string().as_bytes())
}

/// The step of a harness's file whose run recorded the model as `pretrained` (path or name) and
/// `revision`: [`StepRule::step_of_results`] over lm-eval-style `config.model_args` made of them
/// (regex over the path, then `step<N>` in the revision or the model path, then the step map by
/// path or model, then the file name); with the disagreement notice of [`StepRule::disagreement`].
pub(crate) fn step_of_model(
    rule: &StepRule,
    path: &Path,
    pretrained: Option<&str>,
    revision: Option<&str>,
    notices: &mut Vec<String>,
) -> Result<u64> {
    let mut args = serde_json::Map::new();
    if let Some(p) = pretrained.filter(|p| !p.is_empty()) {
        args.insert("pretrained".into(), Value::String(p.to_string()));
    }
    if let Some(r) = revision.filter(|r| !r.is_empty()) {
        args.insert("revision".into(), Value::String(r.to_string()));
    }
    let v = json!({ "config": { "model_args": Value::Object(args) } });
    let step = rule.step_of_results(path, &v)?;
    notices.extend(rule.disagreement(path, &v, step)?);
    Ok(step)
}

/// Refuses two files for one (step, task).
pub(crate) fn one_per_step_task(units: &[Unit]) -> Result<()> {
    let mut seen: BTreeMap<(u64, &str), &Path> = BTreeMap::new();
    for u in units {
        if let Some(other) = seen.insert((u.step, &u.task), &u.path) {
            bail!(
                "step {} of task {} is in more than one file: {} and {}; give each run its own step (--step-from, --step-map) or leave one out",
                u.step,
                u.task,
                other.display(),
                u.path.display()
            );
        }
    }
    Ok(())
}

fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// The task row of an OLMES metrics object (`metrics` of a task's metrics file, or an entry of
/// `metrics.json`'s list): `acc_raw`, else `exact_match`; None when it has neither.
fn task_row(task: &str, step: u64, metrics: &Value, n: Option<u64>, path: &Path) -> Result<Option<TaskRecord>> {
    let get = |k: &str| metrics.get(k).and_then(num);
    let Some(acc) = get("acc_raw").or_else(|| get("exact_match")) else { return Ok(None) };
    if !acc.is_finite() {
        bail!("{}: task {task} has a non-finite score {acc}", path.display());
    }
    let se = |p: f64| n.map_or(f64::NAN, |n| crate::stderr_of_mean01(p, n as usize));
    let acc_norm = get("acc_per_char");
    Ok(Some(TaskRecord {
        step,
        task: task.to_string(),
        n,
        acc,
        acc_stderr: se(acc),
        acc_norm,
        acc_norm_stderr: acc_norm.map(se),
    }))
}

impl Reader for Olmes {
    fn name(&self) -> &'static str {
        "olmes"
    }

    fn version(&self) -> u32 {
        1
    }

    fn detect(&self, input: &Path) -> bool {
        let Ok(paths) = expand(input) else { return false };
        paths.iter().any(|p| {
            if p.is_file() {
                predictions_name(p).is_some()
            } else if p.is_dir() {
                walk(p, &|f| predictions_name(f).is_some()).is_ok_and(|v| !v.is_empty())
            } else {
                false
            }
        })
    }

    fn discover(&self, inputs: &[PathBuf], rule: &StepRule) -> Result<Discovered> {
        let files = collect(
            inputs,
            &|p| predictions_name(p).is_some(),
            "an OLMES predictions file (task-NNN-<task>-predictions.jsonl)",
        )?;
        if files.is_empty() {
            bail!(
                "{}: no OLMES predictions files (task-NNN-<task>-predictions.jsonl) found",
                inputs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            );
        }
        let mut d = Discovered::default();
        let mut sources = BTreeSet::new();
        // the run's metrics.json of each folder, read once
        let mut summaries: BTreeMap<PathBuf, Option<Value>> = BTreeMap::new();
        for f in files {
            let (idx, file_task) = predictions_name(&f).unwrap();
            let dir = f.parent().map_or_else(PathBuf::new, Path::to_path_buf);
            let metrics_path = dir.join(format!("task-{idx:03}-{file_task}-metrics.json"));
            let metrics = if metrics_path.is_file() {
                sources.insert(metrics_path.clone());
                Some(read_json(&metrics_path)?)
            } else {
                None
            };
            let summary = match summaries.get(&dir) {
                Some(s) => s.clone(),
                None => {
                    let p = dir.join("metrics.json");
                    let s = if p.is_file() {
                        sources.insert(p.clone());
                        Some(read_json(&p)?)
                    } else {
                        None
                    };
                    summaries.insert(dir.clone(), s.clone());
                    s
                }
            };
            let task = metrics.as_ref().and_then(|m| str_at(m, "task_name")).unwrap_or(&file_task).to_string();
            let model_config = metrics
                .as_ref()
                .and_then(|m| m.get("model_config"))
                .or_else(|| summary.as_ref().and_then(|s| s.get("model_config")));
            let pretrained =
                model_config.and_then(|c| str_at(c, "model_path").or_else(|| str_at(c, "model"))).map(str::to_owned);
            let revision = model_config.and_then(|c| str_at(c, "revision")).map(str::to_owned);
            let step = step_of_model(rule, &f, pretrained.as_deref(), revision.as_deref(), &mut d.notices)?;
            // the task's aggregate: its metrics file, else its entry in metrics.json
            let row = match &metrics {
                Some(m) => {
                    let n = m.get("num_instances").and_then(Value::as_u64);
                    match m.get("metrics") {
                        Some(ms) => task_row(&task, step, ms, n, &metrics_path)?,
                        None => None,
                    }
                }
                None => match summary.as_ref().and_then(|s| s.get("metrics")).and_then(Value::as_array) {
                    Some(list) => match list.iter().find(|e| str_at(e, "task") == Some(&task)) {
                        Some(e) => task_row(
                            &task,
                            step,
                            e,
                            e.get("num_instances").and_then(Value::as_u64),
                            &dir.join("metrics.json"),
                        )?,
                        None => None,
                    },
                    None => None,
                },
            };
            d.tasks.extend(row);
            sources.insert(f.clone());
            d.units.push(Unit { path: f, step, task });
        }
        d.units.sort();
        one_per_step_task(&d.units)?;
        d.sources = sources.into_iter().collect();
        Ok(d)
    }

    fn parse(&self, unit: &Unit, bytes: &[u8]) -> Result<Parsed> {
        parse_predictions(unit, bytes)
    }
}

/// What kind of task a predictions file holds, by its first line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Choice,
    Generation,
}

fn kind_of_line(v: &Value) -> Option<Kind> {
    let outs = v.get("model_output")?.as_array()?;
    let first = outs.first()?;
    if first.get("sum_logits").is_some() && outs.len() >= 2 && v.get("metrics").and_then(|m| m.get("acc_raw")).is_some()
    {
        return Some(Kind::Choice);
    }
    if first.get("continuation").is_some() {
        return Some(Kind::Generation);
    }
    None
}

/// The example rows of one OLMES predictions file (see the module's notes).
pub fn parse_predictions(unit: &Unit, bytes: &[u8]) -> Result<Parsed> {
    let path = &unit.path;
    let text = std::str::from_utf8(bytes).map_err(|e| anyhow::anyhow!("{}: not UTF-8 text: {e}", path.display()))?;
    let task = unit.task.as_str();
    let mut out = Parsed::default();
    let mut kind = None;
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let at = || format!("{}:{}", path.display(), i + 1);
        let v: Value =
            serde_json::from_str(line).with_context(|| format!("{}: malformed prediction (truncated file?)", at()))?;
        let this = kind_of_line(&v);
        let k = match (kind, this) {
            (None, None) => {
                out.notices.push(format!(
                    "{}: neither multiple choice (per-option sum_logits and acc_raw) nor generation (a continuation); task {task} is analysed at the task level",
                    path.display()
                ));
                return Ok(out);
            }
            (None, Some(k)) => {
                kind = Some(k);
                k
            }
            (Some(k), Some(t)) if k == t => k,
            (Some(k), _) => bail!(
                "{}: this line is not {} like the file's first line",
                at(),
                if k == Kind::Choice { "a multiple-choice prediction" } else { "a generation" }
            ),
        };
        let doc_id = id_text(v.get("doc_id").with_context(|| format!("{}: no `doc_id`", at()))?);
        if let Some(first) = seen.insert(doc_id.clone(), i + 1) {
            bail!("{}: doc_id {doc_id} appears twice in the file (also on line {first}): refused", at());
        }
        let metrics =
            v.get("metrics").filter(|m| m.is_object()).with_context(|| format!("{}: no `metrics` object", at()))?;
        let outs = v["model_output"].as_array().unwrap();
        let native = v.get("native_id").map(id_text).unwrap_or_default();
        let mut r = ExampleRecord {
            step: unit.step,
            task: task.to_string(),
            example_id: format!("{task}/{doc_id}"),
            ..Default::default()
        };
        match k {
            Kind::Choice => {
                let mut per_char = Vec::new();
                for (j, o) in outs.iter().enumerate() {
                    let ll = o
                        .get("sum_logits")
                        .and_then(num)
                        .with_context(|| format!("{}: option {j} has no `sum_logits`", at()))?;
                    if !ll.is_finite() {
                        bail!("{}: option {j} has a non-finite sum_logits {ll}", at());
                    }
                    let chars = o.get("num_chars").and_then(Value::as_u64).unwrap_or(0) as u32;
                    r.logliks.push(ll);
                    r.lengths_chars.push(chars);
                    r.lengths_tokens.push(o.get("num_tokens").and_then(Value::as_u64).unwrap_or(0) as u32);
                    per_char.push(o.get("logits_per_char").and_then(num).unwrap_or(ll / f64::from(chars.max(1))));
                }
                let gold = metrics
                    .get("correct_choice")
                    .and_then(Value::as_u64)
                    .or_else(|| v.get("label").and_then(Value::as_u64))
                    .with_context(|| {
                        format!("{}: neither `metrics.correct_choice` nor `label` is an option index", at())
                    })? as usize;
                if gold >= outs.len() {
                    bail!("{}: gold option {gold} but {} options", at(), outs.len());
                }
                let (p, pn) = (argmax(&r.logliks), argmax(&per_char));
                let flag = |key: &str| metrics.get(key).and_then(num).map(|x| x > 0.5);
                r.gold = gold as u32;
                r.predicted = p as u32;
                r.predicted_norm = pn as u32;
                r.correct = flag("acc_raw").unwrap_or(p == gold);
                r.correct_norm = flag("acc_per_char").unwrap_or(pn == gold);
                r.gold_is_greedy = outs[gold].get("is_greedy").and_then(Value::as_bool).unwrap_or(false);
                r.output = p.to_string();
                if !native.is_empty() {
                    // the doc's identity as OLMES gives it (no text is stored in predictions)
                    r.item_hash = sha256_hex(&json!([task, native, r.logliks.len(), gold]));
                }
            }
            Kind::Generation => {
                let first = &outs[0];
                r.output = match first.get("model_answer") {
                    Some(a @ (Value::String(_) | Value::Number(_))) => text_field(a, "model_answer", &at)?,
                    _ => text_field(first.get("continuation").unwrap_or(&Value::Null), "continuation", &at)?,
                };
                r.targets = match v.get("label") {
                    None | Some(Value::Null) => bail!("{}: no `label` (the gold text)", at()),
                    Some(Value::Array(ts)) if ts.is_empty() => bail!("{}: `label` is an empty list", at()),
                    Some(Value::Array(ts)) => ts.iter().map(|t| text_field(t, "label", &at)).collect::<Result<_>>()?,
                    Some(t) => vec![text_field(t, "label", &at)?],
                };
                for (name, x) in metrics.as_object().unwrap() {
                    let Some(x) = (match x {
                        Value::Number(_) | Value::Bool(_) => num(x),
                        _ => None,
                    }) else {
                        continue;
                    };
                    if !x.is_finite() {
                        bail!("{}: metric `{name}` is {x}, not a finite number", at());
                    }
                    r.score_names.push(name.clone());
                    r.score_values.push(x);
                }
                if !native.is_empty() {
                    r.item_hash = sha256_hex(&json!([task, native, r.targets]));
                }
            }
        }
        out.examples.push(r);
    }
    if out.examples.is_empty() {
        bail!("{}: no predictions", path.display());
    }
    if kind == Some(Kind::Generation) {
        decide(&mut out, path, task);
    }
    Ok(out)
}

/// Sets a generation file's correctness: `exact_match >= 1` where every row stores it (else
/// lighteval's `em`), else the first stored metric (by name) that is 0/1 on every row; with
/// none, the rows are dropped with a notice.
pub(crate) fn decide(out: &mut Parsed, path: &Path, task: &str) {
    if crate::source::decide_generation(&mut out.examples, &["exact_match", "em"]).is_none() {
        out.notices.push(crate::source::undecided(path, task));
        out.examples.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predictions_names() {
        assert_eq!(
            predictions_name(Path::new("a/task-003-arc_easy-predictions.jsonl")),
            Some((3, "arc_easy".to_string()))
        );
        assert_eq!(
            predictions_name(Path::new("task-012-arc_easy_mc__olmes-predictions.jsonl")),
            Some((12, "arc_easy_mc__olmes".to_string()))
        );
        assert_eq!(predictions_name(Path::new("task-x-arc-predictions.jsonl")), None);
        assert_eq!(predictions_name(Path::new("task-001-arc-metrics.json")), None);
        assert_eq!(predictions_name(Path::new("samples_arc_2024.jsonl")), None);
    }

    fn unit(path: &str) -> Unit {
        Unit { path: PathBuf::from(path), step: 5, task: "t".into() }
    }

    #[test]
    fn choice_line_is_read_with_olmes_decisions() {
        let line = json!({
            "doc_id": 7, "native_id": "Mercury_1", "label": 1,
            "metrics": {"predicted_index_raw": 0, "predicted_index_per_char": 1, "correct_choice": 1,
                        "acc_raw": 0, "acc_per_char": 1},
            "model_output": [
                {"sum_logits": -2.0, "num_tokens": 1, "is_greedy": false, "logits_per_char": -1.0, "num_chars": 2},
                {"sum_logits": -3.0, "num_tokens": 2, "is_greedy": true, "logits_per_char": -0.5, "num_chars": 6}
            ]
        });
        let p = parse_predictions(&unit("f.jsonl"), format!("{line}\n").as_bytes()).unwrap();
        let r = &p.examples[0];
        assert_eq!((r.gold, r.predicted, r.predicted_norm, r.correct, r.correct_norm), (1, 0, 1, false, true));
        assert_eq!((r.lengths_chars.clone(), r.lengths_tokens.clone()), (vec![2, 6], vec![1, 2]));
        assert!(r.gold_is_greedy && r.example_id == "t/7" && r.item_hash.len() == 64);
    }

    #[test]
    fn generation_without_a_binary_metric_is_left_to_the_task_level() {
        let line = json!({"doc_id": 0, "label": "x", "metrics": {"f1": 0.5},
                          "model_output": [{"continuation": "y"}]});
        let p = parse_predictions(&unit("f.jsonl"), format!("{line}\n").as_bytes()).unwrap();
        assert!(p.examples.is_empty());
        assert!(p.notices[0].contains("no exact_match"), "{:?}", p.notices);
    }
}
