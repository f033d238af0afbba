//! llm-jp-eval (v1.4.x, the study's own harness) outputs into [`ExampleRecord`]s and
//! [`TaskRecord`]s ([`LlmJpEval`]).
//!
//! One evaluation run (`scripts/evaluate_llm.py`) writes one JSON file,
//! `<log_dir>/<run_name>_<YYYYMMDD_HHMMSS>.json`, holding every dataset of the run:
//!
//! ```json
//! {"scores": {"<dataset>_<metric>": 0.41, "<CATEGORY>": .., "AVG": ..},
//!  "outputs": {"<dataset>": [{"input": .., "pred": .., "gold": .., ...}, ...]},
//!  "config": {"model": {"pretrained_model_name_or_path": ..}, "metainfo": {"basemodel_name": ..},
//!             "wandb": {"run_name": ..}, ...}}
//! ```
//!
//! A record of `outputs` is one example of the dataset, in the order of the dataset's samples
//! (`get_evaluation_result` in `src/llm_jp_eval/utils.py`): `input`, `pred` (the generated text
//! after the harness's answer extraction and NFKC normalisation), `gold` (normalised the same
//! way), and, where the version stores them, `prompt`, `raw_pred` and per-example scores
//! (`exact_match` or `exact`, `char_f1`, `set_f1`, `bleu_ja`, ...). Every dataset is a generation
//! task: a row has `output` = `pred`, `targets` = [`gold`], `score_names` / `score_values` =
//! every number the record stores (its id excepted), `correct` = `exact_match` (or `exact`)
//! `>= 1`. A record that stores no exact match gets llm-jp-eval's own rule, `exact_match` =
//! 1 if `pred == gold` else 0 (`utils.py`: `exact = 1 if y_pred == y_true else 0`, both texts
//! already normalised), added to its scores under that name; nothing else is computed.
//!
//! A record has no id: its example id is its position in the dataset's list (`<dataset>/<i>`),
//! unless it carries `id` or `idx`. Ids are positional, so the identity of the text is kept
//! too: `item_hash` is the sha256 of `[input, gold]`. A dataset whose gold changes between
//! checkpoints at the same position is refused ([`crate::source::same_questions`]).
//!
//! Task rows: `scores["<dataset>_exact_match"]` where the run stored it (`n` = the dataset's
//! records; standard error of a 0/1 mean); other datasets get theirs from the rows.
//!
//! The step of a run: `--step-from` over the file's path, else `step<N>` in
//! `config.model.pretrained_model_name_or_path` (its last component that has one) or in
//! `config.model.revision`, else the `--step-map` row of the file, of a folder above it or of
//! that model name (else `config.metainfo.basemodel_name`, else `config.wandb.run_name`), else
//! `step<N>` in the file name.
//!
//! The llm-jp/llm-jp-eval repository could not be read from where this reader was written (it is
//! not on PyPI, and no copy of its `evaluator.py` was in reach); the layout above follows the
//! project's notes (shared harness notes, `crates/textmatch`, which cites `utils.py` as read in
//! public forks) and is tolerant where versions differ (`outputs` also as `output_records` or
//! `records`, scores stored or not). `tests/fixtures/llmjp/README.md` says the same of the fixture.

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::harness::{expand, json_of, read_json, text_field, StepRule};
use crate::olmes::{collect, decide, id_text, num, one_per_step_task, sha256_hex, step_of_model, walk};
use crate::source::{Discovered, Parsed, Reader, Unit};
use crate::{ExampleRecord, TaskRecord};

/// The llm-jp-eval reader.
pub struct LlmJpEval;

/// The keys a run's per-example records are found under, in the order tried.
const OUTPUT_KEYS: [&str; 3] = ["outputs", "output_records", "records"];

/// The per-dataset records of a run file: the first of [`OUTPUT_KEYS`] that is an object of
/// lists.
fn outputs(v: &Value) -> Option<&serde_json::Map<String, Value>> {
    OUTPUT_KEYS
        .iter()
        .filter_map(|k| v.get(*k).and_then(Value::as_object))
        .find(|m| !m.is_empty() && m.values().all(Value::is_array))
}

/// Whether a JSON value is an llm-jp-eval run: per-dataset records holding `pred` and `gold`.
fn is_run(v: &Value) -> bool {
    outputs(v).is_some_and(|m| {
        m.values().filter_map(|l| l.as_array()?.first()).all(|r| r.get("pred").is_some() && r.get("gold").is_some())
    })
}

/// A `.json` file that may be a run (cheap test by name and first bytes: not a results file of
/// lm-eval or lighteval, and it names `outputs` or `records` near its start or anywhere).
fn may_be_run(p: &Path) -> bool {
    let Some(name) = p.file_name().and_then(|n| n.to_str()) else { return false };
    if !name.ends_with(".json") || name.starts_with("results_") || name.starts_with("task-") || name == "metrics.json" {
        return false;
    }
    std::fs::read(p).is_ok_and(|b| {
        let s = String::from_utf8_lossy(&b);
        OUTPUT_KEYS.iter().any(|k| s.contains(&format!("\"{k}\""))) && s.contains("\"pred\"")
    })
}

fn str_path<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, k| v.get(*k))?.as_str().filter(|s| !s.is_empty())
}

impl Reader for LlmJpEval {
    fn name(&self) -> &'static str {
        "llm-jp-eval"
    }

    fn version(&self) -> u32 {
        1
    }

    fn detect(&self, input: &Path) -> bool {
        let Ok(paths) = expand(input) else { return false };
        let is = |p: &Path| may_be_run(p) && read_json(p).is_ok_and(|v| is_run(&v));
        paths.iter().any(|p| {
            if p.is_file() {
                is(p)
            } else if p.is_dir() {
                walk(p, &|f| may_be_run(f)).is_ok_and(|v| v.iter().any(|f| is(f)))
            } else {
                false
            }
        })
    }

    fn discover(&self, inputs: &[PathBuf], rule: &StepRule) -> Result<Discovered> {
        let files = collect(inputs, &may_be_run, "an llm-jp-eval output JSON (with `outputs` records holding `pred`)")?;
        let mut d = Discovered::default();
        let mut sources = BTreeSet::new();
        for f in files {
            let v = read_json(&f)?;
            if !is_run(&v) {
                continue;
            }
            let cfg = v.get("config").unwrap_or(&Value::Null);
            let pretrained = str_path(cfg, &["model", "pretrained_model_name_or_path"])
                .or_else(|| str_path(cfg, &["metainfo", "basemodel_name"]))
                .or_else(|| str_path(cfg, &["wandb", "run_name"]));
            let revision = str_path(cfg, &["model", "revision"]);
            let step = step_of_model(rule, &f, pretrained, revision, &mut d.notices)?;
            let scores = v.get("scores");
            for (dataset, records) in outputs(&v).unwrap() {
                let n = records.as_array().map_or(0, Vec::len) as u64;
                if let Some(acc) = scores.and_then(|s| s.get(format!("{dataset}_exact_match"))).and_then(num) {
                    if !acc.is_finite() {
                        bail!("{}: scores.{dataset}_exact_match is {acc}, not a finite number", f.display());
                    }
                    let se = crate::stderr_of_mean01(acc, n as usize);
                    d.tasks.push(TaskRecord {
                        step,
                        task: dataset.clone(),
                        n: Some(n),
                        acc,
                        acc_stderr: se,
                        acc_norm: None,
                        acc_norm_stderr: None,
                    });
                }
                d.units.push(Unit { path: f.clone(), step, task: dataset.clone() });
            }
            sources.insert(f);
        }
        if d.units.is_empty() {
            bail!(
                "{}: no llm-jp-eval output JSON (`outputs` per dataset, records with `pred` and `gold`) found",
                inputs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            );
        }
        d.units.sort();
        one_per_step_task(&d.units)?;
        d.sources = sources.into_iter().collect();
        Ok(d)
    }

    fn parse(&self, unit: &Unit, bytes: &[u8]) -> Result<Parsed> {
        parse_run(unit, bytes)
    }
}

/// The rows of one dataset (`unit.task`) of an llm-jp-eval run file.
pub fn parse_run(unit: &Unit, bytes: &[u8]) -> Result<Parsed> {
    let path = &unit.path;
    let task = unit.task.as_str();
    let v = json_of(path, bytes)?;
    let Some(all) = outputs(&v) else {
        bail!("{}: no `outputs` object of per-dataset records: not an llm-jp-eval output JSON", path.display());
    };
    let records = all
        .get(task)
        .and_then(Value::as_array)
        .with_context(|| format!("{}: no records of dataset {task}", path.display()))?;
    let mut out = Parsed::default();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (i, rec) in records.iter().enumerate() {
        let at = || format!("{}: outputs.{task}[{i}]", path.display());
        if !rec.is_object() {
            bail!("{}: not an object", at());
        }
        let id = match rec.get("id").or_else(|| rec.get("idx")) {
            Some(x) if !x.is_null() => id_text(x),
            _ => i.to_string(),
        };
        if let Some(first) = seen.insert(id.clone(), i) {
            bail!("{}: id {id} appears twice in dataset {task} (also record {first}): refused", at());
        }
        let pred = text_field(rec.get("pred").unwrap_or(&Value::Null), "pred", &at)?;
        let gold = text_field(rec.get("gold").unwrap_or(&Value::Null), "gold", &at)?;
        let input = rec.get("input").and_then(Value::as_str).unwrap_or("");
        let mut names = Vec::new();
        let mut values = Vec::new();
        for (k, x) in rec.as_object().unwrap() {
            if matches!(k.as_str(), "id" | "idx") || !(x.is_number() || x.is_boolean()) {
                continue;
            }
            let x = num(x).unwrap();
            if !x.is_finite() {
                bail!("{}: score `{k}` is {x}, not a finite number", at());
            }
            names.push(k.clone());
            values.push(x);
        }
        if !names.iter().any(|n| n == "exact_match") {
            // `exact` as the run stored it, else llm-jp-eval's rule on the stored texts
            let em = match names.iter().position(|n| n == "exact") {
                Some(j) => values[j],
                None => f64::from(u8::from(pred == gold)),
            };
            names.push("exact_match".into());
            values.push(em);
        }
        out.examples.push(ExampleRecord {
            step: unit.step,
            task: task.to_string(),
            example_id: format!("{task}/{id}"),
            output: pred,
            item_hash: sha256_hex(&json!([input, gold])),
            targets: vec![gold],
            score_names: names,
            score_values: values,
            ..Default::default()
        });
    }
    if out.examples.is_empty() {
        bail!("{}: dataset {task} has no records", path.display());
    }
    decide(&mut out, path, task);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_without_scores_get_the_harness_exact_match() {
        let v = json!({"scores": {}, "outputs": {"jnli": [
            {"input": "a", "pred": "entailment", "gold": "entailment"},
            {"input": "b", "pred": "neutral", "gold": "contradiction", "char_f1": 0.25}
        ]}});
        let u = Unit { path: "run.json".into(), step: 3, task: "jnli".into() };
        let p = parse_run(&u, v.to_string().as_bytes()).unwrap();
        assert_eq!(p.examples.len(), 2);
        assert!(p.examples[0].correct && !p.examples[1].correct);
        assert_eq!(p.examples[1].score("char_f1"), Some(0.25));
        assert_eq!(p.examples[1].score("exact_match"), Some(0.0));
        assert_eq!(p.examples[1].example_id, "jnli/1");
    }
}
