//! Hugging Face lighteval (0.13) outputs into [`ExampleRecord`]s and [`TaskRecord`]s
//! ([`Lighteval`]).
//!
//! `lighteval ... --output-dir OUT --save-details` writes, per run
//! (`src/lighteval/logging/evaluation_tracker.py`, `EvaluationTracker.save`, `save_results`,
//! `save_details`):
//! - `OUT/results/<model_name>/results_<date_id>.json`: `config_general` (with `model_name` and
//!   `model_config`: `model_name`, `revision`, ...), `results` (`{"<task>|<fewshot>": {"acc":
//!   .., "acc_stderr": .., "em": ..}, "all": ..}`), `versions`, `config_tasks`, `summary_tasks`,
//!   `summary_general`;
//! - `OUT/details/<model_name>/<date_id>/details_<task>|<fewshot>_<date_id>.parquet`: one row
//!   per doc, `Dataset.from_list([asdict(detail)])` of `DetailsLogger.Detail`
//!   (`src/lighteval/logging/info_loggers.py`), columns sorted by name: `doc` (struct of
//!   `src/lighteval/tasks/requests.py` `Doc`: `query`, `choices`, `gold_index` (an int or a list
//!   of them), `id` (the doc's index in its split, as text), `task_name`, `sampling_methods`
//!   (`LOGPROBS`, `GENERATIVE`, `PERPLEXITY`), ...), `metric` (struct: one field per metric of the
//!   task, the doc's value: `acc`, `em`, ...), `model_response` (struct of
//!   `src/lighteval/models/model_output.py` `ModelResponse`: `text`, `text_post_processed`,
//!   `logprobs`, `argmax_logits_eq_gold`, `input_tokens`, `output_tokens`, ...). `<date_id>` is
//!   `datetime.now().isoformat()` with `:` as `-`; `<model_name>` may hold `/` (one folder per
//!   part).
//!
//! Rows:
//! - a `LOGPROBS` task (multiple choice): `logliks` = `model_response.logprobs` (one per choice),
//!   `gold` = `doc.gold_index` (the first, where it is a list), `lengths_chars` /
//!   `lengths_bytes` = each choice's characters without its leading space / UTF-8 bytes,
//!   `predicted` = argmax of the log-likelihoods, `predicted_norm` = argmax per character,
//!   `correct` = the doc's `metric.acc` where stored (else `predicted == gold`), `correct_norm` =
//!   `metric.acc_norm` where stored (else `predicted_norm == gold`), `gold_is_greedy` =
//!   `argmax_logits_eq_gold[gold]`;
//! - a `GENERATIVE` task: `output` = `text_post_processed[0]` (else `text[0]`), `targets` = the
//!   gold choices (`Doc.get_golds`: `choices[i]` for each gold index), `score_names` /
//!   `score_values` = every numeric (or boolean) field of `metric`, by name; `correct` =
//!   `exact_match >= 1`, else `em >= 1` (lighteval's `Metrics.exact_match`), else the first
//!   metric that is 0/1 on every doc (none: the task is left to the task level, with a notice);
//! - a `PERPLEXITY` task is not read per example (a notice; its task row stays).
//!
//! `item_hash` is the sha256 of `[query, choices, gold_index]` (lighteval hashes the query with
//! xxhash but does not store it in the details). The example id is `doc.id`.
//!
//! Task rows: `acc` (multiple choice) or `em` / `exact_match` (generation) of the results file
//! of the same run (same `<model_name>` and `<date_id>`), with their `_stderr`.
//!
//! The step of a run: `--step-from` over the details file's path, else `step<N>` in
//! `model_config.revision` or in the last part of `model_name` that has one, else the
//! `--step-map` row of the file, of a folder above it, or of the model name, else `step<N>` in
//! the file name. Several runs of one model and task in one details folder (reruns) keep the
//! newest `<date_id>`, with a notice; one (step, task) in runs of different models is refused.
//!
//! All of this was checked against files that lighteval 0.13.0 itself wrote
//! (`scripts/make_lighteval_fixture.py`, `tests/fixtures/lighteval/`).

use anyhow::{bail, Context, Result};
use polars::prelude::*;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Cursor;
use std::path::{Path, PathBuf};

use crate::harness::{choice_chars, expand, read_json, StepRule, MAX_TEXT_BYTES};
use crate::olmes::{collect, decide, num, one_per_step_task, sha256_hex, step_of_model, walk};
use crate::source::{Discovered, Parsed, Reader, Unit};
use crate::{argmax, ExampleRecord, TaskRecord};

/// The lighteval reader.
pub struct Lighteval;

/// `details_<task>_<date_id>.parquet` -> (task, date_id). The date id is the file's folder name
/// where the name ends with it (as lighteval writes it), else the part after the last `_`.
pub fn details_name(path: &Path) -> Option<(String, String)> {
    let name = path.file_name()?.to_str()?;
    let rest = name.strip_prefix("details_")?.strip_suffix(".parquet")?;
    let folder = path.parent().and_then(Path::file_name).and_then(|n| n.to_str()).unwrap_or("");
    if !folder.is_empty() {
        if let Some(task) = rest.strip_suffix(folder).and_then(|t| t.strip_suffix('_')) {
            if !task.is_empty() {
                return Some((task.to_string(), folder.to_string()));
            }
        }
    }
    let (task, stamp) = rest.rsplit_once('_')?;
    (!task.is_empty() && !stamp.is_empty()).then(|| (task.to_string(), stamp.to_string()))
}

/// Where a details file's run is: (the output folder, the model name as its folders say), from
/// `OUT/details/<model_name>/<date_id>/details_...parquet`.
fn run_of(path: &Path) -> Option<(PathBuf, String)> {
    let stamp_dir = path.parent()?;
    let mut model = Vec::new();
    let mut d = stamp_dir.parent()?;
    loop {
        if d.file_name().is_some_and(|n| n == "details") {
            let out = d.parent()?.to_path_buf();
            model.reverse();
            return (!model.is_empty()).then(|| (out, model.join("/")));
        }
        model.push(d.file_name()?.to_str()?.to_string());
        d = d.parent()?;
    }
}

/// The results file of a details file's run, if there is one.
fn results_of(path: &Path, stamp: &str) -> Option<PathBuf> {
    let (out, model) = run_of(path)?;
    let p = out.join("results").join(&model).join(format!("results_{stamp}.json"));
    p.is_file().then_some(p)
}

fn is_details(p: &Path) -> bool {
    details_name(p).is_some()
}

/// The task row of a results file's `results[task]`: `acc`, else `em`, else `exact_match`.
fn task_row(path: &Path, v: &Value, task: &str, step: u64) -> Result<Option<TaskRecord>> {
    let Some(m) = v.get("results").and_then(|r| r.get(task)) else { return Ok(None) };
    let get = |k: &str| m.get(k).and_then(num);
    let Some((key, acc)) = ["acc", "em", "exact_match"].iter().find_map(|k| get(k).map(|x| (*k, x))) else {
        return Ok(None);
    };
    if !acc.is_finite() {
        bail!("{}: task {task} has a non-finite {key}", path.display());
    }
    Ok(Some(TaskRecord {
        step,
        task: task.to_string(),
        n: None,
        acc,
        acc_stderr: get(&format!("{key}_stderr")).unwrap_or(f64::NAN),
        acc_norm: if key == "acc" { get("acc_norm") } else { None },
        acc_norm_stderr: if key == "acc" { get("acc_norm_stderr") } else { None },
    }))
}

impl Reader for Lighteval {
    fn name(&self) -> &'static str {
        "lighteval"
    }

    fn version(&self) -> u32 {
        1
    }

    fn detect(&self, input: &Path) -> bool {
        let Ok(paths) = expand(input) else { return false };
        paths.iter().any(|p| {
            if p.is_file() {
                is_details(p)
            } else if p.is_dir() {
                walk(p, &is_details).is_ok_and(|v| !v.is_empty())
            } else {
                false
            }
        })
    }

    fn discover(&self, inputs: &[PathBuf], rule: &StepRule) -> Result<Discovered> {
        let files = collect(inputs, &is_details, "a lighteval details file (details_<task>_<date_id>.parquet)")?;
        if files.is_empty() {
            bail!(
                "{}: no lighteval details files (details/<model>/<date_id>/details_<task>_<date_id>.parquet) found",
                inputs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            );
        }
        let mut d = Discovered::default();
        let mut sources = BTreeSet::new();
        let mut results: BTreeMap<PathBuf, Value> = BTreeMap::new();
        // candidates per (step, task): (unit, date id, the run's model folder, its task row)
        let mut cands: BTreeMap<(u64, String), Vec<(Unit, String, PathBuf, Option<TaskRecord>)>> = BTreeMap::new();
        for f in files {
            let (task, stamp) = details_name(&f).unwrap();
            let res = results_of(&f, &stamp);
            let v = match &res {
                Some(p) => {
                    if !results.contains_key(p) {
                        results.insert(p.clone(), read_json(p)?);
                        sources.insert(p.clone());
                    }
                    results.get(p)
                }
                None => None,
            };
            let general = v.and_then(|v| v.get("config_general"));
            let model = general
                .and_then(|g| g.get("model_config").and_then(|c| c.get("model_name")).or_else(|| g.get("model_name")))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| run_of(&f).map(|r| r.1));
            let revision = general
                .and_then(|g| g.get("model_config"))
                .and_then(|c| c.get("revision"))
                .and_then(Value::as_str)
                .map(str::to_owned);
            let step = step_of_model(rule, &f, model.as_deref(), revision.as_deref(), &mut d.notices)?;
            let row = match (&res, v) {
                (Some(p), Some(v)) => task_row(p, v, &task, step)?,
                _ => None,
            };
            let model_dir = f.parent().and_then(Path::parent).map_or_else(PathBuf::new, Path::to_path_buf);
            sources.insert(f.clone());
            cands.entry((step, task.clone())).or_default().push((Unit { path: f, step, task }, stamp, model_dir, row));
        }
        for ((step, task), mut c) in cands {
            if c.len() > 1 {
                let names = c.iter().map(|x| x.0.path.display().to_string()).collect::<Vec<_>>().join(", ");
                if c.iter().any(|x| x.2 != c[0].2) {
                    bail!(
                        "step {step} of task {task} is in runs of different models: {names}; give each run its own step (--step-from, --step-map) or leave one out"
                    );
                }
                c.sort_by(|a, b| a.1.cmp(&b.1));
                let kept = c.pop().unwrap();
                d.notices.push(format!(
                    "step {step} task {task}: kept the newest of {} runs, {}; set aside {}",
                    c.len() + 1,
                    kept.0.path.display(),
                    c.iter().map(|x| x.0.path.display().to_string()).collect::<Vec<_>>().join(", ")
                ));
                c = vec![kept];
            }
            let (unit, _, _, row) = c.pop().unwrap();
            d.tasks.extend(row);
            d.units.push(unit);
        }
        d.units.sort();
        one_per_step_task(&d.units)?;
        d.sources = sources.into_iter().collect();
        Ok(d)
    }

    fn parse(&self, unit: &Unit, bytes: &[u8]) -> Result<Parsed> {
        parse_details(unit, bytes)
    }
}

/// A struct column of the details and its fields by name.
struct Fields {
    path: PathBuf,
    column: &'static str,
    fields: BTreeMap<String, Series>,
}

impl Fields {
    fn of(df: &DataFrame, path: &Path, column: &'static str) -> Result<Fields> {
        let c = df.column(column).map_err(|_| {
            anyhow::anyhow!(
                "{}: no `{column}` column; not a lighteval details file (columns: {})",
                path.display(),
                df.get_column_names().iter().map(|n| n.as_str()).collect::<Vec<_>>().join(", ")
            )
        })?;
        let s = c.as_materialized_series();
        let st = s
            .struct_()
            .map_err(|_| anyhow::anyhow!("{}: column `{column}` is {}, not a struct", path.display(), s.dtype()))?;
        let fields = st.fields_as_series().into_iter().map(|f| (f.name().to_string(), f)).collect();
        Ok(Fields { path: path.to_path_buf(), column, fields })
    }

    fn get(&self, name: &str) -> Option<&Series> {
        self.fields.get(name).filter(|s| !matches!(s.dtype(), DataType::Null))
    }

    fn need(&self, name: &str) -> Result<&Series> {
        self.get(name).with_context(|| format!("{}: no `{}.{name}`", self.path.display(), self.column))
    }

    fn str_at(&self, name: &str, i: usize) -> Result<Option<String>> {
        let Some(s) = self.get(name) else { return Ok(None) };
        let ca = s.str().map_err(|_| {
            anyhow::anyhow!("{}: `{}.{name}` is {}, not text", self.path.display(), self.column, s.dtype())
        })?;
        Ok(ca.get(i).map(str::to_owned))
    }

    /// The list at row `i` of a list field (None where the field is absent, null or not a list
    /// of that type).
    fn list_at(&self, name: &str, i: usize) -> Option<Series> {
        let s = self.get(name)?;
        s.list().ok()?.get_as_series(i).filter(|x| !matches!(x.dtype(), DataType::Null))
    }
}

fn strings(s: &Series) -> Option<Vec<Option<String>>> {
    let ca = s.str().ok()?;
    Some((0..ca.len()).map(|j| ca.get(j).map(str::to_owned)).collect())
}

fn floats(s: &Series) -> Option<Vec<Option<f64>>> {
    if !s.dtype().is_primitive_numeric() && !matches!(s.dtype(), DataType::Boolean) {
        return None;
    }
    let c = s.cast(&DataType::Float64).ok()?;
    let ca = c.f64().ok()?;
    Some((0..ca.len()).map(|j| ca.get(j)).collect())
}

/// The example rows of one lighteval details parquet file (see the module's notes).
pub fn parse_details(unit: &Unit, bytes: &[u8]) -> Result<Parsed> {
    let path = &unit.path;
    let task = unit.task.as_str();
    let df = ParquetReader::new(Cursor::new(bytes))
        .finish()
        .map_err(|e| anyhow::anyhow!("{}: not a readable parquet file (truncated?): {e}", path.display()))?;
    let mut out = Parsed::default();
    if df.height() == 0 {
        bail!("{}: no docs", path.display());
    }
    let doc = Fields::of(&df, path, "doc")?;
    let resp = Fields::of(&df, path, "model_response")?;
    let metric = Fields::of(&df, path, "metric")?;
    // the doc's metrics, by name: numeric and boolean fields
    let metrics: Vec<(String, Vec<Option<f64>>)> =
        metric.fields.iter().filter_map(|(n, s)| Some((n.clone(), floats(s)?))).collect();
    let gold_field = doc.need("gold_index")?;
    let methods: BTreeSet<String> = doc
        .list_at("sampling_methods", 0)
        .and_then(|s| strings(&s))
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .collect();
    let choice = if methods.is_empty() {
        // older details without sampling methods: by the responses' shape
        resp.list_at("logprobs", 0).is_some_and(|l| l.len() > 1) && resp.list_at("text", 0).is_none_or(|t| t.is_empty())
    } else if methods.contains("LOGPROBS") {
        true
    } else if methods.contains("GENERATIVE") {
        false
    } else {
        out.notices.push(format!(
            "{}: task {task} is scored by {} (not per option or per generation); analysed at the task level",
            path.display(),
            methods.into_iter().collect::<Vec<_>>().join(", ")
        ));
        return Ok(out);
    };
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..df.height() {
        let id = doc.str_at("id", i)?.filter(|s| !s.is_empty()).unwrap_or_else(|| i.to_string());
        let at = || format!("{} (row {}, doc {id})", path.display(), i + 1);
        if let Some(first) = seen.insert(id.clone(), i + 1) {
            bail!("{}: doc id {id} appears twice in the file (also row {first}): refused", at());
        }
        let query = doc.str_at("query", i)?.unwrap_or_default();
        let choices: Vec<String> = doc
            .list_at("choices", i)
            .and_then(|s| strings(&s))
            .with_context(|| format!("{}: no `doc.choices`", at()))?
            .into_iter()
            .map(Option::unwrap_or_default)
            .collect();
        let golds: Vec<usize> = match gold_field.dtype() {
            DataType::List(_) => gold_field
                .list()?
                .get_as_series(i)
                .and_then(|s| floats(&s))
                .unwrap_or_default()
                .into_iter()
                .flatten()
                .map(|g| g as usize)
                .collect(),
            _ => floats(gold_field)
                .with_context(|| format!("{}: `doc.gold_index` is {}, not an index", at(), gold_field.dtype()))?[i]
                .map(|g| g as usize)
                .into_iter()
                .collect(),
        };
        let Some(&gold) = golds.first() else { bail!("{}: no `doc.gold_index`", at()) };
        if let Some(g) = golds.iter().find(|&&g| g >= choices.len()) {
            bail!("{}: gold index {g} but {} choices", at(), choices.len());
        }
        let scores: Vec<(String, f64)> = metrics.iter().filter_map(|(n, v)| v[i].map(|x| (n.clone(), x))).collect();
        if let Some((n, x)) = scores.iter().find(|(_, x)| !x.is_finite()) {
            bail!("{}: metric `{n}` is {x}, not a finite number", at());
        }
        let score = |name: &str| scores.iter().find(|(n, _)| n == name).map(|(_, x)| *x);
        let mut r = ExampleRecord {
            step: unit.step,
            task: task.to_string(),
            example_id: format!("{task}/{id}"),
            item_hash: sha256_hex(&json!([query, choices, golds])),
            ..Default::default()
        };
        if choice {
            let logliks: Vec<f64> = resp
                .list_at("logprobs", i)
                .and_then(|s| floats(&s))
                .with_context(|| format!("{}: no `model_response.logprobs`", at()))?
                .into_iter()
                .map(|x| x.unwrap_or(f64::NAN))
                .collect();
            if logliks.len() != choices.len() || logliks.len() < 2 {
                bail!("{}: {} log-likelihoods for {} choices", at(), logliks.len(), choices.len());
            }
            if let Some(x) = logliks.iter().find(|x| !x.is_finite()) {
                bail!("{}: non-finite log-likelihood {x}", at());
            }
            let chars: Vec<u32> = choices.iter().map(|c| choice_chars(c)).collect();
            let norm: Vec<f64> = logliks.iter().zip(&chars).map(|(l, &c)| l / f64::from(c.max(1))).collect();
            let (p, pn) = (argmax(&logliks), argmax(&norm));
            let greedy: Vec<bool> = resp
                .list_at("argmax_logits_eq_gold", i)
                .and_then(|s| s.bool().ok().map(|b| (0..b.len()).map(|j| b.get(j).unwrap_or(false)).collect()))
                .unwrap_or_default();
            r.gold = gold as u32;
            r.predicted = p as u32;
            r.predicted_norm = pn as u32;
            r.correct = score("acc").map_or(p == gold, |x| x > 0.5);
            r.correct_norm = score("acc_norm").map_or(pn == gold, |x| x > 0.5);
            r.gold_is_greedy = greedy.get(gold).copied().unwrap_or(false);
            r.lengths_tokens = vec![0; logliks.len()];
            r.lengths_bytes = choices.iter().map(|c| c.len() as u32).collect();
            r.lengths_chars = chars;
            r.logliks = logliks;
            r.output = p.to_string();
        } else {
            let first = |name: &str| {
                resp.list_at(name, i).and_then(|s| strings(&s)).and_then(|v| v.into_iter().next().flatten())
            };
            let output = first("text_post_processed")
                .or_else(|| first("text"))
                .with_context(|| format!("{}: no generated text (`model_response.text`)", at()))?;
            if output.len() > MAX_TEXT_BYTES {
                bail!(
                    "{}: the generated text holds {} bytes, more than {MAX_TEXT_BYTES}: not an answer",
                    at(),
                    output.len()
                );
            }
            r.output = output;
            r.targets = golds.iter().map(|&g| choices[g].clone()).collect();
            (r.score_names, r.score_values) = scores.into_iter().unzip();
        }
        out.examples.push(r);
    }
    if !choice {
        decide(&mut out, path, task);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_names() {
        let p = Path::new(
            "out/details/ckpt/step1/2025-01-01T00-00-00.1/details_mmlu:anatomy|5_2025-01-01T00-00-00.1.parquet",
        );
        assert_eq!(details_name(p), Some(("mmlu:anatomy|5".to_string(), "2025-01-01T00-00-00.1".to_string())));
        assert_eq!(run_of(p), Some((PathBuf::from("out"), "ckpt/step1".to_string())));
        assert_eq!(
            details_name(Path::new("x/details_arc_easy_latest.parquet")),
            Some(("arc_easy".to_string(), "latest".to_string()))
        );
        assert_eq!(details_name(Path::new("x/samples_arc.jsonl")), None);
    }
}
