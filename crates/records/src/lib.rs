//! Evaluation records, the tables between evaluation and analysis.
//!
//! - [`ExampleRecord`]: one row per (checkpoint step, task, example): gold and predicted option,
//!   correct under `acc` and `acc_norm`, and per option the summed log-likelihood, the length in
//!   characters (lm-evaluation-harness's `acc_norm` denominator: the choice without the target
//!   delimiter), in tokens and in UTF-8 bytes (of the continuation as scored, delimiter
//!   included: the bits-per-byte denominator), whether the gold continuation is the greedy one,
//!   and the model's output (the chosen option, or the argmax text for cloze). Keeping every
//!   option's log-likelihood lets ensembles of checkpoints be scored offline and continuous
//!   metrics be derived (`analysis::continuous`).
//! - [`TaskRecord`]: one row per (step, task): accuracy and its standard error.
//!
//! Tables are written as parquet (and CSV for the task table) whole or not at all (`output`).
//! Harness outputs come in through [`source`]: the contract every reader fulfils and the one
//! loader (task by task, through the ingest cache of [`cache`]). The readers: [`harness`]
//! (lm-evaluation-harness results and `--log_samples` files), [`lighteval`], [`olmes`],
//! [`llmjp`] (llm-jp-eval).

pub mod cache;
pub mod frames;
pub mod harness;
pub mod lighteval;
pub mod llmjp;
pub mod olmes;
pub mod source;

use anyhow::{bail, Context as _, Result};
use polars::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

pub use polars;

/// `Default` is the row with no options, no output and no scores, every flag false: readers
/// start from it and set what their harness gives.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExampleRecord {
    pub step: u64,
    pub task: String,
    pub example_id: String,
    pub gold: u32,
    /// argmax of the summed log-likelihoods (`acc`)
    pub predicted: u32,
    /// argmax of log-likelihood / characters (`acc_norm`)
    pub predicted_norm: u32,
    pub correct: bool,
    pub correct_norm: bool,
    pub logliks: Vec<f64>,
    /// Characters of each choice without the target delimiter (lm-eval's `acc_norm` length).
    pub lengths_chars: Vec<u32>,
    pub lengths_tokens: Vec<u32>,
    /// UTF-8 bytes of each continuation as scored (delimiter included); empty in tables of
    /// version 1, which did not store them.
    pub lengths_bytes: Vec<u32>,
    /// Greedy decoding reproduces the gold continuation (the cloze metric).
    pub gold_is_greedy: bool,
    /// What the model produced: the chosen option's index, or for cloze the argmax tokens' text.
    pub output: String,
    /// Identity of the example's text: the sha256 hex of the example as scored, so that rows of
    /// two runs or checkpoints can be matched by text, not only by id. For `lm eval`, of the
    /// example as its task file holds it (`tasks::Example::text_hash`: id, every choice's
    /// context and continuation, gold; the shots prepended at scoring belong to the eval
    /// config, not to the item); for lm-evaluation-harness samples, their `doc_hash`. Empty =
    /// unknown (tables written before version 3, samples without `doc_hash`).
    pub item_hash: String,
    /// The gold answer texts of a generation task (every one the harness gives; the output is
    /// scored against the best of them); empty for multiple choice and in tables before
    /// version 4. A generation row has no options: `logliks` and `lengths_*` are empty, `gold`,
    /// `predicted` and `predicted_norm` are 0, `output` is the generated text (after the
    /// harness's filter), `correct` = `correct_norm` = `gold_is_greedy` = exact match.
    pub targets: Vec<String>,
    /// The per-example metrics the harness stored (`exact_match`, ...), as given, by name:
    /// `score_names[i]` scored `score_values[i]`. Two parallel lists, not a list of pairs, so that
    /// they are two plain list columns (`list[str]`, `list[f64]`) that any parquet reader reads
    /// without a struct type. Empty where the harness stored none and before version 4.
    pub score_names: Vec<String>,
    pub score_values: Vec<f64>,
}

impl ExampleRecord {
    /// Whether the row is of a generation task (gold texts, no options).
    pub fn is_generation(&self) -> bool {
        !self.targets.is_empty()
    }

    /// The value of a per-example metric the harness stored, by name.
    pub fn score(&self, name: &str) -> Option<f64> {
        self.score_names.iter().position(|n| n == name).and_then(|i| self.score_values.get(i).copied())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    pub step: u64,
    pub task: String,
    /// Examples scored (None where a results file does not say).
    pub n: Option<u64>,
    pub acc: f64,
    pub acc_stderr: f64,
    pub acc_norm: Option<f64>,
    pub acc_norm_stderr: Option<f64>,
}

/// argmax, first index on ties (as numpy and lm-evaluation-harness do).
pub use theory::mixture::argmax;

/// Sample standard error of a 0/1 mean, `sqrt(p (1 - p) / (n - 1))`, as lm-evaluation-harness.
pub fn stderr_of_mean01(p: f64, n: usize) -> f64 {
    if n < 2 {
        0.0
    } else {
        (p * (1.0 - p) / (n as f64 - 1.0)).sqrt()
    }
}

/// Per-(step, task) accuracy of a set of example rows. Every row must have finite
/// log-likelihoods; a NaN names its task, step and example.
pub fn summarise(rows: &[ExampleRecord]) -> Result<Vec<TaskRecord>> {
    let mut groups: BTreeMap<(u64, &str), (usize, usize, usize)> = BTreeMap::new();
    for r in rows {
        if r.logliks.iter().any(|v| !v.is_finite()) {
            bail!(
                "task {} step {} example {}: non-finite log-likelihood {:?}",
                r.task,
                r.step,
                r.example_id,
                r.logliks
            );
        }
        let g = groups.entry((r.step, &r.task)).or_default();
        g.0 += 1;
        g.1 += usize::from(r.correct);
        g.2 += usize::from(r.correct_norm);
    }
    Ok(groups
        .into_iter()
        .map(|((step, task), (n, c, cn))| {
            let (acc, acc_norm) = (c as f64 / n as f64, cn as f64 / n as f64);
            TaskRecord {
                step,
                task: task.to_string(),
                n: Some(n as u64),
                acc,
                acc_stderr: stderr_of_mean01(acc, n),
                acc_norm: Some(acc_norm),
                acc_norm_stderr: Some(stderr_of_mean01(acc_norm, n)),
            }
        })
        .collect())
}

fn list_f64(name: &str, v: impl Iterator<Item = Vec<f64>>) -> Series {
    let s: Vec<Series> = v.map(|x| Series::new("".into(), x)).collect();
    Series::new(name.into(), s)
}

fn list_u32(name: &str, v: impl Iterator<Item = Vec<u32>>) -> Series {
    let s: Vec<Series> = v.map(|x| Series::new("".into(), x)).collect();
    Series::new(name.into(), s)
}

fn list_str<'a>(name: &str, v: impl Iterator<Item = &'a [String]>) -> Series {
    let s: Vec<Series> = v
        .map(|x| {
            Series::new("".into(), x.iter().map(String::as_str).collect::<Vec<_>>()).cast(&DataType::String).unwrap()
        })
        .collect();
    let mut out = Series::new(name.into(), s);
    // a column of only empty lists is typed list[null]: keep list[str] whatever the rows hold
    if out.dtype() != &DataType::List(Box::new(DataType::String)) {
        out = out.cast(&DataType::List(Box::new(DataType::String))).unwrap();
    }
    out
}

pub fn examples_frame(rows: &[ExampleRecord]) -> Result<DataFrame> {
    let cols: Vec<Column> = vec![
        Series::new("step".into(), rows.iter().map(|r| r.step).collect::<Vec<_>>()).into(),
        Series::new("task".into(), rows.iter().map(|r| r.task.as_str()).collect::<Vec<_>>()).into(),
        Series::new("example_id".into(), rows.iter().map(|r| r.example_id.as_str()).collect::<Vec<_>>()).into(),
        Series::new("gold".into(), rows.iter().map(|r| r.gold).collect::<Vec<_>>()).into(),
        Series::new("predicted".into(), rows.iter().map(|r| r.predicted).collect::<Vec<_>>()).into(),
        Series::new("predicted_norm".into(), rows.iter().map(|r| r.predicted_norm).collect::<Vec<_>>()).into(),
        Series::new("correct".into(), rows.iter().map(|r| r.correct).collect::<Vec<_>>()).into(),
        Series::new("correct_norm".into(), rows.iter().map(|r| r.correct_norm).collect::<Vec<_>>()).into(),
        list_f64("logliks", rows.iter().map(|r| r.logliks.clone())).into(),
        list_u32("lengths_chars", rows.iter().map(|r| r.lengths_chars.clone())).into(),
        list_u32("lengths_tokens", rows.iter().map(|r| r.lengths_tokens.clone())).into(),
        list_u32("lengths_bytes", rows.iter().map(|r| r.lengths_bytes.clone())).into(),
        Series::new("gold_is_greedy".into(), rows.iter().map(|r| r.gold_is_greedy).collect::<Vec<_>>()).into(),
        Series::new("output".into(), rows.iter().map(|r| r.output.as_str()).collect::<Vec<_>>()).into(),
        Series::new("item_hash".into(), rows.iter().map(|r| r.item_hash.as_str()).collect::<Vec<_>>()).into(),
        list_str("targets", rows.iter().map(|r| r.targets.as_slice())).into(),
        list_str("score_names", rows.iter().map(|r| r.score_names.as_slice())).into(),
        list_f64("score_values", rows.iter().map(|r| r.score_values.clone())).into(),
    ];
    Ok(DataFrame::new(rows.len(), cols)?)
}

pub fn tasks_frame(rows: &[TaskRecord]) -> Result<DataFrame> {
    let cols: Vec<Column> = vec![
        Series::new("step".into(), rows.iter().map(|r| r.step).collect::<Vec<_>>()).into(),
        Series::new("task".into(), rows.iter().map(|r| r.task.as_str()).collect::<Vec<_>>()).into(),
        Series::new("n".into(), rows.iter().map(|r| r.n).collect::<Vec<_>>()).into(),
        Series::new("acc".into(), rows.iter().map(|r| r.acc).collect::<Vec<_>>()).into(),
        Series::new("acc_stderr".into(), rows.iter().map(|r| r.acc_stderr).collect::<Vec<_>>()).into(),
        Series::new("acc_norm".into(), rows.iter().map(|r| r.acc_norm).collect::<Vec<_>>()).into(),
        Series::new("acc_norm_stderr".into(), rows.iter().map(|r| r.acc_norm_stderr).collect::<Vec<_>>()).into(),
    ];
    Ok(DataFrame::new(rows.len(), cols)?)
}

/// The field names of a flat struct, in declaration order (the csv crate's header writer
/// walks the struct as serde sees it).
fn field_names<T: Serialize>(row: &T) -> Result<Vec<String>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.serialize(row)?;
    let bytes = w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut r = csv::Reader::from_reader(bytes.as_slice());
    Ok(r.headers()?.iter().map(str::to_owned).collect())
}

/// A frame from any rows that serialise as flat structs of numbers, booleans, strings and
/// options of them; columns in field order (nulls where a field is None).
pub fn frame_of<T: Serialize>(rows: &[T]) -> Result<DataFrame> {
    use serde_json::Value;
    let values: Vec<serde_json::Map<String, Value>> = rows
        .iter()
        .map(|r| match serde_json::to_value(r) {
            Ok(Value::Object(m)) => Ok(m),
            _ => bail!("rows must serialise as JSON objects"),
        })
        .collect::<Result<_>>()?;
    let Some(first) = rows.first() else { return Ok(DataFrame::empty()) };
    let mut cols = Vec::new();
    for key in field_names(first)? {
        let key = key.as_str();
        let cells: Vec<&Value> = values.iter().map(|m| m.get(key).unwrap_or(&Value::Null)).collect();
        let kind = cells.iter().find(|v| !v.is_null()).copied().unwrap_or(&Value::Null);
        let name: PlSmallStr = key.into();
        let s = match kind {
            Value::Bool(_) => Series::new(name, cells.iter().map(|v| v.as_bool()).collect::<Vec<_>>()),
            Value::String(_) => Series::new(name, cells.iter().map(|v| v.as_str()).collect::<Vec<_>>()),
            Value::Number(n) if n.is_u64() && cells.iter().all(|v| v.is_null() || v.is_u64()) => {
                Series::new(name, cells.iter().map(|v| v.as_u64()).collect::<Vec<_>>())
            }
            Value::Number(n) if n.is_i64() && cells.iter().all(|v| v.is_null() || v.is_i64()) => {
                Series::new(name, cells.iter().map(|v| v.as_i64()).collect::<Vec<_>>())
            }
            _ => Series::new(name, cells.iter().map(|v| v.as_f64()).collect::<Vec<_>>()),
        };
        cols.push(s.into());
    }
    Ok(DataFrame::new(rows.len(), cols)?)
}

/// How a frame is stored: parquet, or CSV when the file name ends in `.csv`.
pub fn is_csv(name: impl AsRef<Path>) -> bool {
    name.as_ref().extension().is_some_and(|e| e == "csv")
}

/// Version of the table layouts this build writes, stored in every parquet file under the key
/// [`VERSION_KEY`]. Files without the key are version 1 and read as such; a newer version is
/// refused with a message. Version 2 added `lengths_bytes` to the example table (version 1
/// tables read with it empty). Version 3 added `item_hash` to the example table, the sha256 hex
/// of each example's text (versions 1 and 2 read with it empty: identity unknown). Version 4
/// added `targets` (the gold texts of a generation task), `score_names` and `score_values` (the
/// per-example metrics the harness stored) to the example table (versions 1-3 read with them
/// empty: multiple choice, no stored scores).
pub const TABLE_VERSION: u32 = 4;
pub const VERSION_KEY: &str = "fluctuation_table_version";

/// Writes a frame as parquet (or CSV) into any writer.
pub fn write_frame_to(w: &mut dyn std::io::Write, df: &mut DataFrame, csv: bool) -> Result<()> {
    if csv {
        CsvWriter::new(w).finish(df).map_err(|e| anyhow::anyhow!("CSV: {e}"))
    } else {
        let kv = polars::io::parquet::write::KeyValueMetadata::from_static(vec![(
            VERSION_KEY.to_string(),
            TABLE_VERSION.to_string(),
        )]);
        ParquetWriter::new(w)
            .with_key_value_metadata(Some(kv))
            .finish(df)
            .map(|_| ())
            .map_err(|e| anyhow::anyhow!("parquet: {e}"))
    }
}

/// The per-example table with log-likelihoods stored as f32, the form `results/` commits (half
/// the bytes; relative error 6e-8, far below any difference the analysis reads); the stored
/// decisions (`predicted`, `correct`...) are the exact ones. [`read_examples`] reads both forms.
pub fn compact_examples_frame(rows: &[ExampleRecord]) -> Result<DataFrame> {
    let mut df = examples_frame(rows)?;
    let f32s = df.column("logliks")?.cast(&DataType::List(Box::new(DataType::Float32)))?;
    df.with_column(f32s)?;
    Ok(df)
}

/// Writes a frame as parquet (or CSV if the path ends in .csv), whole or not at all
/// ([`output::write_atomic_with`]).
pub fn write_frame(path: &Path, df: &mut DataFrame) -> Result<()> {
    output::write_atomic_with(path, |w| write_frame_to(w, df, is_csv(path)))
}

/// Writes a frame into a staged set of files ([`output::FileSet`]).
pub fn stage_frame(set: &mut output::FileSet, name: &str, df: &mut DataFrame) -> Result<()> {
    set.write_with(name, |w| write_frame_to(w, df, is_csv(name)))
}

pub fn read_parquet(path: &Path) -> Result<DataFrame> {
    let file = std::fs::File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
    let unreadable =
        |e: PolarsError| anyhow::anyhow!("{}: not a readable parquet file (truncated?): {e}", path.display());
    let mut reader = ParquetReader::new(file);
    let version = reader
        .get_metadata()
        .map_err(unreadable)?
        .key_value_metadata
        .as_ref()
        .and_then(|kv| kv.iter().find(|k| k.key == VERSION_KEY))
        .and_then(|k| k.value.as_deref()?.parse::<u32>().ok())
        .unwrap_or(1);
    if version > TABLE_VERSION {
        bail!(
            "{}: table version {version} is newer than this build reads ({TABLE_VERSION}); update the workspace",
            path.display()
        );
    }
    reader.finish().map_err(unreadable)
}

fn col<'a>(df: &'a DataFrame, path: &Path, name: &str) -> Result<&'a Column> {
    df.column(name).map_err(|_| anyhow::anyhow!("{}: column `{name}` missing", path.display()))
}

fn lists<T: PolarsNumericType>(c: &Column, path: &Path) -> Result<Vec<Vec<T::Native>>> {
    let l = c.list().map_err(|_| anyhow::anyhow!("{}: column `{}` is not a list", path.display(), c.name()))?;
    (0..l.len())
        .map(|i| l.get_as_series(i))
        .map(|s| {
            let s = s.with_context(|| format!("{}: null in `{}`", path.display(), c.name()))?;
            let ca = s
                .unpack::<T>()
                .map_err(|e| anyhow::anyhow!("{e}"))
                .with_context(|| format!("{}: wrong item type in `{}`", path.display(), c.name()))?;
            Ok(ca.no_null_iter().collect())
        })
        .collect()
}

/// A `list[str]` column as one vector per row; a column of a table before its version is
/// absent: empty lists.
fn str_lists(df: &DataFrame, path: &Path, name: &str) -> Result<Vec<Vec<String>>> {
    let Ok(c) = df.column(name) else { return Ok(vec![Vec::new(); df.height()]) };
    let l = c.list().map_err(|_| anyhow::anyhow!("{}: column `{name}` is not a list", path.display()))?;
    (0..l.len())
        .map(|i| {
            let s = l.get_as_series(i).with_context(|| format!("{}: null in `{name}`", path.display()))?;
            if s.is_empty() {
                return Ok(Vec::new());
            }
            let ca = s.str().map_err(|_| anyhow::anyhow!("{}: wrong item type in `{name}`", path.display()))?;
            Ok(ca.no_null_iter().map(str::to_owned).collect())
        })
        .collect()
}

/// Reads the per-example table written by [`examples_frame`] + [`write_frame`].
pub fn read_examples(path: &Path) -> Result<Vec<ExampleRecord>> {
    let df = read_parquet(path)?;
    let u64s = |n: &str| -> Result<Vec<u64>> { Ok(col(&df, path, n)?.u64()?.no_null_iter().collect()) };
    let u32s = |n: &str| -> Result<Vec<u32>> { Ok(col(&df, path, n)?.u32()?.no_null_iter().collect()) };
    let bools = |n: &str| -> Result<Vec<bool>> { Ok(col(&df, path, n)?.bool()?.no_null_iter().collect()) };
    let strs =
        |n: &str| -> Result<Vec<String>> { Ok(col(&df, path, n)?.str()?.no_null_iter().map(str::to_owned).collect()) };
    let (step, task, id) = (u64s("step")?, strs("task")?, strs("example_id")?);
    let (gold, pred, pred_n) = (u32s("gold")?, u32s("predicted")?, u32s("predicted_norm")?);
    let (correct, correct_n, greedy) = (bools("correct")?, bools("correct_norm")?, bools("gold_is_greedy")?);
    // `results/` keeps log-likelihoods as f32 ([`compact_examples_frame`])
    let ll = col(&df, path, "logliks")?;
    let ll = if ll.dtype() == &DataType::List(Box::new(DataType::Float32)) {
        ll.cast(&DataType::List(Box::new(DataType::Float64)))?
    } else {
        ll.clone()
    };
    let logliks = lists::<Float64Type>(&ll, path)?;
    let lc = lists::<UInt32Type>(col(&df, path, "lengths_chars")?, path)?;
    let lt = lists::<UInt32Type>(col(&df, path, "lengths_tokens")?, path)?;
    let lb = match df.column("lengths_bytes") {
        Ok(c) => lists::<UInt32Type>(c, path)?,
        Err(_) => vec![Vec::new(); df.height()],
    };
    let output = strs("output")?;
    let hashes = match df.column("item_hash") {
        Ok(_) => strs("item_hash")?,
        Err(_) => vec![String::new(); df.height()],
    };
    let targets = str_lists(&df, path, "targets")?;
    let score_names = str_lists(&df, path, "score_names")?;
    let score_values = match df.column("score_values") {
        Ok(c) => lists::<Float64Type>(c, path)?,
        Err(_) => vec![Vec::new(); df.height()],
    };
    if let Some(i) = (0..df.height()).find(|&i| score_names[i].len() != score_values[i].len()) {
        bail!(
            "{}: row {i} has {} score names but {} score values",
            path.display(),
            score_names[i].len(),
            score_values[i].len()
        );
    }
    Ok((0..df.height())
        .map(|i| ExampleRecord {
            step: step[i],
            task: task[i].clone(),
            example_id: id[i].clone(),
            gold: gold[i],
            predicted: pred[i],
            predicted_norm: pred_n[i],
            correct: correct[i],
            correct_norm: correct_n[i],
            logliks: logliks[i].clone(),
            lengths_chars: lc[i].clone(),
            lengths_tokens: lt[i].clone(),
            lengths_bytes: lb[i].clone(),
            gold_is_greedy: greedy[i],
            output: output[i].clone(),
            item_hash: hashes[i].clone(),
            targets: targets[i].clone(),
            score_names: score_names[i].clone(),
            score_values: score_values[i].clone(),
        })
        .collect())
}

/// Reads the per-task table written by [`tasks_frame`] + [`write_frame`] (parquet).
pub fn read_tasks(path: &Path) -> Result<Vec<TaskRecord>> {
    let df = read_parquet(path)?;
    let f = |n: &str| -> Result<Vec<Option<f64>>> { Ok(col(&df, path, n)?.f64()?.iter().collect()) };
    let step: Vec<u64> = col(&df, path, "step")?.u64()?.no_null_iter().collect();
    let task: Vec<String> = col(&df, path, "task")?.str()?.no_null_iter().map(str::to_owned).collect();
    let n: Vec<Option<u64>> = col(&df, path, "n")?.u64()?.iter().collect();
    let (acc, se, an, ans) = (f("acc")?, f("acc_stderr")?, f("acc_norm")?, f("acc_norm_stderr")?);
    (0..df.height())
        .map(|i| {
            Ok(TaskRecord {
                step: step[i],
                task: task[i].clone(),
                n: n[i],
                acc: acc[i].with_context(|| format!("{}: null acc in row {i}", path.display()))?,
                acc_stderr: se[i].unwrap_or(f64::NAN),
                acc_norm: an[i],
                acc_norm_stderr: ans[i],
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn sample_rows() -> Vec<ExampleRecord> {
        (0..4)
            .map(|i| ExampleRecord {
                step: 10 * (i / 2),
                task: "piqa".into(),
                example_id: format!("piqa/{}", i % 2),
                gold: 1,
                predicted: (i % 2) as u32,
                predicted_norm: 1,
                correct: i % 2 == 1,
                correct_norm: true,
                logliks: vec![-3.5 - i as f64, -3.25],
                lengths_chars: vec![12, 9],
                lengths_tokens: vec![3, 2],
                lengths_bytes: vec![13, 10],
                gold_is_greedy: false,
                output: (i % 2).to_string(),
                item_hash: format!("{:064x}", i % 2),
                targets: Vec::new(),
                score_names: Vec::new(),
                score_values: Vec::new(),
            })
            .collect()
    }

    /// Rows of a generation task: gold texts, stored harness scores, no options.
    pub fn generation_rows() -> Vec<ExampleRecord> {
        (0..4)
            .map(|i| ExampleRecord {
                step: 10 * (i / 2),
                task: "gsm8k/strict-match".into(),
                example_id: format!("gsm8k/{}", i % 2),
                gold: 0,
                predicted: 0,
                predicted_norm: 0,
                correct: i % 2 == 1,
                correct_norm: i % 2 == 1,
                logliks: Vec::new(),
                lengths_chars: Vec::new(),
                lengths_tokens: Vec::new(),
                lengths_bytes: Vec::new(),
                gold_is_greedy: i % 2 == 1,
                output: format!("answer {i}"),
                item_hash: String::new(),
                targets: if i % 2 == 0 { vec!["18".into()] } else { vec!["3".into(), "three".into()] },
                score_names: vec!["exact_match".into()],
                score_values: vec![f64::from(u8::from(i % 2 == 1))],
            })
            .collect()
    }

    #[test]
    fn example_table_round_trips_through_parquet() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("examples.parquet");
        let rows = sample_rows();
        write_frame(&p, &mut examples_frame(&rows).unwrap()).unwrap();
        assert_eq!(read_examples(&p).unwrap(), rows);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temp file left");
        let t = summarise(&rows).unwrap();
        let q = dir.path().join("tasks.parquet");
        write_frame(&q, &mut tasks_frame(&t).unwrap()).unwrap();
        assert_eq!(read_tasks(&q).unwrap(), t);
        assert_eq!((t[0].acc, t[0].acc_stderr), (0.5, (0.25f64).sqrt()));
    }

    /// The compact form stores log-likelihoods as f32 and reads back as their f32 rounding,
    /// with every other field exact.
    #[test]
    fn compact_table_reads_back_with_f32_logliks() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("examples.parquet");
        let mut rows = sample_rows();
        rows[0].logliks[0] = -3.123456789012345;
        write_frame(&p, &mut compact_examples_frame(&rows).unwrap()).unwrap();
        let back = read_examples(&p).unwrap();
        for (a, b) in rows.iter().zip(&back) {
            assert_eq!(a.logliks.iter().map(|&v| v as f32 as f64).collect::<Vec<_>>(), b.logliks);
            assert_eq!(
                (&a.example_id, a.correct, a.predicted, &a.lengths_bytes),
                (&b.example_id, b.correct, b.predicted, &b.lengths_bytes)
            );
        }
        assert_ne!(back[0].logliks[0], rows[0].logliks[0]);
    }

    /// A version 1 table (no `lengths_bytes`, no version key) still reads, with no byte counts.
    #[test]
    fn version_1_tables_read_with_empty_byte_counts() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("v1.parquet");
        let mut df = examples_frame(&sample_rows()).unwrap().drop("lengths_bytes").unwrap().drop("item_hash").unwrap();
        ParquetWriter::new(std::fs::File::create(&p).unwrap()).finish(&mut df).unwrap();
        let rows = read_examples(&p).unwrap();
        assert_eq!(rows.len(), 4);
        assert!(rows.iter().all(|r| r.lengths_bytes.is_empty() && r.item_hash.is_empty()));
        assert_eq!(rows[0].lengths_chars, vec![12, 9]);
        // a table of a newer version than this build is refused by name
        let q = dir.path().join("v9.parquet");
        let kv =
            polars::io::parquet::write::KeyValueMetadata::from_static(vec![(VERSION_KEY.to_string(), "9".to_string())]);
        ParquetWriter::new(std::fs::File::create(&q).unwrap())
            .with_key_value_metadata(Some(kv))
            .finish(&mut df)
            .unwrap();
        let e = read_examples(&q).unwrap_err().to_string();
        assert!(e.contains("v9.parquet") && e.contains("version 9"), "{e}");
    }

    /// A version 2 table (every committed `results/*/eval/examples.parquet`: no `item_hash`)
    /// reads with empty hashes and everything else intact; a version 3 table keeps its hashes,
    /// in the compact form too.
    #[test]
    fn version_2_tables_read_with_empty_hashes_and_version_3_keeps_them() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("v2.parquet");
        let mut df = examples_frame(&sample_rows()).unwrap().drop("item_hash").unwrap();
        let kv =
            polars::io::parquet::write::KeyValueMetadata::from_static(vec![(VERSION_KEY.to_string(), "2".to_string())]);
        ParquetWriter::new(std::fs::File::create(&p).unwrap())
            .with_key_value_metadata(Some(kv))
            .finish(&mut df)
            .unwrap();
        let rows = read_examples(&p).unwrap();
        assert!(rows.iter().all(|r| r.item_hash.is_empty()));
        let blank: Vec<ExampleRecord> =
            sample_rows().into_iter().map(|r| ExampleRecord { item_hash: String::new(), ..r }).collect();
        assert!(rows.iter().all(|r| r.targets.is_empty() && r.score_names.is_empty() && r.score_values.is_empty()));
        assert_eq!(rows, blank);
        // version 3: the hashes come back, in both forms, and mixed with empty ones
        let mut mixed = sample_rows();
        mixed[3].item_hash = String::new();
        for (name, mut df) in
            [("v3.parquet", examples_frame(&mixed).unwrap()), ("v3c.parquet", compact_examples_frame(&mixed).unwrap())]
        {
            let q = dir.path().join(name);
            write_frame(&q, &mut df).unwrap();
            let back = read_examples(&q).unwrap();
            let hashes: Vec<&str> = back.iter().map(|r| r.item_hash.as_str()).collect();
            assert_eq!(hashes, mixed.iter().map(|r| r.item_hash.as_str()).collect::<Vec<_>>(), "{name}");
            assert_eq!(back[1].item_hash, format!("{:064x}", 1));
        }
    }

    /// A version 4 table keeps the gold texts and stored scores of generation rows beside
    /// multiple-choice rows (whose lists are empty), in both forms; a version 3 table (no such
    /// columns) reads with them empty.
    #[test]
    fn version_4_keeps_generation_fields_and_version_3_reads_them_empty() {
        let dir = tempfile::tempdir().unwrap();
        let mut mixed = sample_rows();
        mixed.extend(generation_rows());
        for (name, mut df) in
            [("v4.parquet", examples_frame(&mixed).unwrap()), ("v4c.parquet", compact_examples_frame(&mixed).unwrap())]
        {
            let p = dir.path().join(name);
            write_frame(&p, &mut df).unwrap();
            assert_eq!(read_examples(&p).unwrap(), mixed, "{name}");
        }
        // only generation rows, only multiple-choice rows: the list columns keep their types
        for rows in [generation_rows(), sample_rows()] {
            let p = dir.path().join("one.parquet");
            write_frame(&p, &mut examples_frame(&rows).unwrap()).unwrap();
            assert_eq!(read_examples(&p).unwrap(), rows);
        }
        let g = &generation_rows()[1];
        assert!(g.is_generation() && !sample_rows()[0].is_generation());
        assert_eq!((g.score("exact_match"), g.score("f1")), (Some(1.0), None));
        // version 3: no targets, no stored scores
        let p = dir.path().join("v3.parquet");
        let mut df = examples_frame(&sample_rows())
            .unwrap()
            .drop("targets")
            .unwrap()
            .drop("score_names")
            .unwrap()
            .drop("score_values")
            .unwrap();
        let kv =
            polars::io::parquet::write::KeyValueMetadata::from_static(vec![(VERSION_KEY.to_string(), "3".to_string())]);
        ParquetWriter::new(std::fs::File::create(&p).unwrap())
            .with_key_value_metadata(Some(kv))
            .finish(&mut df)
            .unwrap();
        assert_eq!(read_examples(&p).unwrap(), sample_rows());
    }

    #[test]
    fn example_schema_snapshot() {
        let df = examples_frame(&sample_rows()).unwrap();
        let schema: Vec<String> = df.schema().iter().map(|(n, t)| format!("{n}: {t}")).collect();
        insta::assert_snapshot!(schema.join("\n"));
    }

    #[test]
    fn nan_scores_and_truncated_tables_are_refused_with_names() {
        let mut rows = sample_rows();
        rows[2].logliks[0] = f64::NAN;
        let e = summarise(&rows).unwrap_err().to_string();
        assert!(e.contains("piqa") && e.contains("step 10") && e.contains("piqa/0"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("examples.parquet");
        write_frame(&p, &mut examples_frame(&sample_rows()).unwrap()).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
        let e = format!("{:#}", read_examples(&p).unwrap_err());
        assert!(e.contains("examples.parquet") && e.contains("not a readable parquet"), "{e}");
    }
}
