//! lm-evaluation-harness outputs into [`TaskRecord`]s and [`ExampleRecord`]s.
//!
//! - Results JSON (`{"results": {task: {"acc": .., "acc_stderr": .., "acc_norm": ..}}}`; newer
//!   versions write `"acc,none"`), as `lm_eval --output_path OUT` writes it
//!   (`OUT/<model>/results_<timestamp>.json`) or under any name (the Pythia suite's
//!   `<model>_step<N>.json`).
//! - `--log_samples` JSONL (`OUT/<model>/samples_<task>_<timestamp>.jsonl`): one line per example
//!   with `doc_id`, `target`, `arguments` (context, continuation per option), `resps` /
//!   `filtered_resps` (per option `[loglik, is_greedy]`, numbers often stored as strings) and
//!   `acc` / `acc_norm`.
//! - `--log_samples` JSONL of a `generate_until` task (as lm-eval 0.4.13's `evaluator.py` writes
//!   it): one line per (doc, filter) with `doc_id`, `target` (the gold text, or a list of gold
//!   texts), `filtered_resps` (a list whose first element is the generated text after the
//!   filter), `filter` (the name in the task's `filter_list`, `none` without one), `metrics` (the
//!   names of the per-example metrics) and each metric's value (`exact_match`, ...), `doc_hash`.
//!   Each filter is its own trail of checkpoints: task `<task>` for the filter `none`, else
//!   `<task>/<filter>` (gsm8k gives `gsm8k/strict-match` and `gsm8k/flexible-extract`); a
//!   row's correctness is its `exact_match` (>= 1), else the first metric of `metrics` that is
//!   0/1 on every line ([`read_generation_samples`]).
//! - [`load`] takes any mix of such files, folders holding them (at any depth) and globs, and
//!   finds each file's checkpoint step ([`StepRule`]), never from the file order (Pythia's
//!   checkpoints are unevenly spaced). One (step, task) found in several files of one folder
//!   (reruns) keeps the newest timestamp, with a notice; found in files of different folders,
//!   it is refused, naming them.

use anyhow::{bail, Context, Result};
use regex::Regex;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

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
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// `config.model_args` as key-value pairs: a `k=v,k=v` string (older lm-eval) or a JSON object
/// (0.4.13).
pub fn model_args(v: &Value) -> Vec<(String, String)> {
    let Some(args) = v.get("config").and_then(|c| c.get("model_args")) else { return Vec::new() };
    match args {
        Value::String(s) => s
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect(),
        Value::Object(m) => {
            m.iter().map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_owned))).collect()
        }
        _ => Vec::new(),
    }
}

/// The steps `config.model_args` names: `revision=step<N>`, and `step<N>` / `step_<N>` /
/// `global_step<N>` in the `pretrained=` path (in its last component that has one).
pub fn steps_in_model_args(args: &[(String, String)]) -> BTreeSet<u64> {
    let re = Regex::new(r"(?:^|[^A-Za-z])step[_-]?(\d+)").unwrap();
    let mut out = BTreeSet::new();
    for (k, v) in args {
        match k.as_str() {
            "revision" => out.extend(re.captures(v).and_then(|c| c[1].parse::<u64>().ok())),
            "pretrained" | "peft" | "delta" => {
                let last = v
                    .split(['/', '\\'])
                    .rev()
                    .find_map(|part| re.captures(part).and_then(|c| c[1].parse::<u64>().ok()));
                out.extend(last);
            }
            _ => {}
        }
    }
    out
}

/// A path made absolute and lexically normal (`.` and `..` resolved without touching the disk).
fn normal(p: &Path) -> PathBuf {
    let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// How the checkpoint step of each file is found, in this order: the `--step-from` regex over
/// the file's path (its one capture group), `config.model_args` ([`steps_in_model_args`]), the
/// `--step-map` CSV (`path,step`: the file, or a folder above it, or the `pretrained=` value),
/// and last `step<N>` in the file name.
#[derive(Debug, Default)]
pub struct StepRule {
    regex: Option<Regex>,
    /// (path as written, normalised path, step), from the mapping file
    map: Vec<(String, PathBuf, u64)>,
    map_file: Option<PathBuf>,
}

impl StepRule {
    pub fn new(step_from: Option<&str>, step_map: Option<&Path>) -> Result<StepRule> {
        let regex = match step_from {
            Some(s) => {
                let re = Regex::new(s).with_context(|| format!("--step-from {s:?}: not a regular expression"))?;
                if re.captures_len() != 2 {
                    bail!(
                        "--step-from {s:?}: needs exactly one capture group around the step number, has {}",
                        re.captures_len() - 1
                    );
                }
                Some(re)
            }
            None => None,
        };
        let mut map = Vec::new();
        if let Some(f) = step_map {
            let text =
                std::fs::read_to_string(f).with_context(|| format!("{}: cannot read the step mapping", f.display()))?;
            let mut seen: BTreeMap<PathBuf, (usize, u64)> = BTreeMap::new();
            for (i, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let Some((p, s)) = line.rsplit_once(',') else {
                    bail!("{}:{}: expected `path,step`", f.display(), i + 1)
                };
                let (p, s) = (p.trim().trim_matches('"'), s.trim().trim_matches('"'));
                if i == 0 && s.parse::<u64>().is_err() && p.eq_ignore_ascii_case("path") {
                    continue; // a header
                }
                let step: u64 = s
                    .parse()
                    .with_context(|| format!("{}:{}: step `{s}` is not a whole number", f.display(), i + 1))?;
                let n = normal(Path::new(p));
                if let Some((j, other)) = seen.insert(n.clone(), (i + 1, step)) {
                    if other != step {
                        bail!(
                            "{}:{}: `{p}` is mapped to step {step} here and to step {other} on line {j}",
                            f.display(),
                            i + 1
                        );
                    }
                }
                map.push((p.to_string(), n, step));
            }
            if map.is_empty() {
                bail!("{}: the step mapping has no `path,step` rows", f.display());
            }
        }
        Ok(StepRule { regex, map, map_file: step_map.map(Path::to_path_buf) })
    }

    fn from_regex(&self, path: &Path) -> Result<Option<u64>> {
        let Some(re) = &self.regex else { return Ok(None) };
        let s = path.to_string_lossy();
        let Some(c) = re.captures(&s) else { return Ok(None) };
        let m = c.get(1).map_or("", |m| m.as_str());
        Ok(Some(
            m.parse().with_context(|| format!("{}: --step-from captured `{m}`, not a whole number", path.display()))?,
        ))
    }

    fn from_map(&self, path: &Path, pretrained: Option<&str>) -> Option<u64> {
        let p = normal(path);
        // the most specific row: the file itself, else the deepest folder above it
        let by_path = self
            .map
            .iter()
            .filter(|(_, n, _)| p.starts_with(n))
            .max_by_key(|(_, n, _)| n.components().count())
            .map(|r| r.2);
        by_path.or_else(|| pretrained.and_then(|pre| self.map.iter().find(|(raw, _, _)| raw == pre).map(|r| r.2)))
    }

    /// The step of a file by the rule alone, for harnesses whose files do not name it: the
    /// `--step-from` regex over its path, the `--step-map` row of the file, of a folder above it
    /// or of its model (`model`: the `pretrained=` value or model name the harness recorded),
    /// else `step<N>` in its name.
    pub fn step_of_path(&self, path: &Path, model: Option<&str>) -> Result<u64> {
        if let Some(s) = self.from_regex(path)? {
            return Ok(s);
        }
        if let Some(s) = self.from_map(path, model) {
            return Ok(s);
        }
        step_from_name(path).map_err(|_| self.no_step(path))
    }

    /// The step of a results file (`v`: its JSON).
    pub fn step_of_results(&self, path: &Path, v: &Value) -> Result<u64> {
        if let Some(s) = self.from_regex(path)? {
            return Ok(s);
        }
        let args = model_args(v);
        let steps = steps_in_model_args(&args);
        match steps.len() {
            1 => return Ok(*steps.first().unwrap()),
            0 => {}
            _ => bail!(
                "{}: config.model_args names several steps ({}); say which with --step-from or --step-map",
                path.display(),
                steps.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
            ),
        }
        let pretrained = args.iter().find(|(k, _)| k == "pretrained").map(|(_, v)| v.as_str());
        if let Some(s) = self.from_map(path, pretrained) {
            return Ok(s);
        }
        step_from_name(path).map_err(|_| self.no_step(path))
    }

    /// Where `--step-from` or `--step-map` gives a results file another step than its
    /// config.model_args names, the disagreement and the step `used`, in words (for stderr and
    /// the provenance); None where they agree or model_args names no step.
    pub fn disagreement(&self, path: &Path, v: &Value, used: u64) -> Result<Option<String>> {
        let args = model_args(v);
        let steps = steps_in_model_args(&args);
        let [named] = steps.iter().copied().collect::<Vec<_>>()[..] else { return Ok(None) };
        let pretrained = args.iter().find(|(k, _)| k == "pretrained").map(|(_, v)| v.as_str());
        let mut others = Vec::new();
        if let Some(s) = self.from_regex(path)?.filter(|&s| s != named) {
            others.push(format!("--step-from gives step {s}"));
        }
        if let (Some(s), Some(f)) = (self.from_map(path, pretrained).filter(|&s| s != named), &self.map_file) {
            others.push(format!("--step-map {} gives step {s}", f.display()));
        }
        Ok((!others.is_empty()).then(|| {
            format!(
                "{}: {}, but config.model_args names step {named}; step {used} is used",
                path.display(),
                others.join(" and ")
            )
        }))
    }

    fn no_step(&self, path: &Path) -> anyhow::Error {
        let tried = [
            self.regex.as_ref().map(|r| format!("--step-from {:?} does not match its path", r.as_str())),
            Some("config.model_args has no revision=step<N> and no step<N> in its pretrained path".to_string()),
            self.map_file.as_ref().map(|f| format!("no row of {} matches it", f.display())),
            Some("its name has no step<N>".to_string()),
        ];
        anyhow::anyhow!(
            "{}: cannot tell the checkpoint step ({}); pass --step-from REGEX or --step-map FILE",
            path.display(),
            tried.into_iter().flatten().collect::<Vec<_>>().join("; ")
        )
    }
}

/// Parses a JSON text, naming the file and the line of a syntax error.
pub(crate) fn json_of(path: &Path, bytes: &[u8]) -> Result<Value> {
    serde_json::from_slice(bytes)
        .map_err(|e| anyhow::anyhow!("{}:{}: not JSON (truncated?): {e}", path.display(), e.line()))
}

/// Parses a JSON file, naming the file and the line of a syntax error.
pub(crate) fn read_json(path: &Path) -> Result<Value> {
    let bytes = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    json_of(path, &bytes)
}

/// Task rows of one results JSON: every task that reports `acc`.
pub fn results_rows(path: &Path, v: &Value, step: u64) -> Result<Vec<TaskRecord>> {
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

/// Task rows of one results file, its step found by [`StepRule::default`] (model_args, then
/// the file name).
pub fn read_results(path: &Path) -> Result<Vec<TaskRecord>> {
    let v = read_json(path)?;
    let step = StepRule::default().step_of_results(path, &v)?;
    results_rows(path, &v, step)
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

/// Characters of a choice as lm-evaluation-harness's `acc_norm` counts them: the continuation
/// without its leading target delimiter (one space).
pub fn choice_chars(continuation: &str) -> u32 {
    continuation.strip_prefix(' ').unwrap_or(continuation).chars().count() as u32
}

/// A response of a loglikelihood request: `[loglik, is_greedy]`, possibly wrapped in a list
/// (`resps`), numbers and booleans possibly strings.
fn response(r: &Value) -> (Option<f64>, Option<bool>) {
    let r = r.as_array().and_then(|a| if a.first().is_some_and(Value::is_array) { a[0].as_array() } else { Some(a) });
    match r {
        Some(a) if !a.is_empty() => {
            (num(&a[0]), a.get(1).map(|g| g.as_bool().unwrap_or(matches!(g.as_str(), Some("True" | "true")))))
        }
        _ => (None, None),
    }
}

/// The per-option responses of a sample line: `filtered_resps`, else `resps`.
fn responses(v: &Value) -> Option<&Vec<Value>> {
    v.get("filtered_resps").and_then(Value::as_array).or_else(|| v.get("resps").and_then(Value::as_array))
}

/// A JSON value of a sample line, its strings borrowed from the line where they hold no escape
/// ([`SampleLine`]); [`Lite::Skipped`] stands for a list or object that was passed over unread.
#[derive(Debug, Clone, PartialEq)]
pub enum Lite<'a> {
    Null,
    Bool(bool),
    U64(u64),
    I64(i64),
    F64(f64),
    Str(Cow<'a, str>),
    Arr(Vec<Lite<'a>>),
    Obj(Vec<(Cow<'a, str>, Lite<'a>)>),
    Skipped,
}

impl<'a> Lite<'a> {
    /// A number, or a string holding one (as [`num`] reads a [`Value`]).
    pub fn num(&self) -> Option<f64> {
        match self {
            Lite::U64(u) => Some(*u as f64),
            Lite::I64(i) => Some(*i as f64),
            Lite::F64(f) => Some(*f),
            Lite::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Lite::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value as a [`Value`] (for messages that show it as JSON).
    pub fn to_value(&self) -> Value {
        match self {
            Lite::Null | Lite::Skipped => Value::Null,
            Lite::Bool(b) => Value::Bool(*b),
            Lite::U64(u) => Value::from(*u),
            Lite::I64(i) => Value::from(*i),
            Lite::F64(f) => Value::from(*f),
            Lite::Str(s) => Value::String(s.to_string()),
            Lite::Arr(a) => Value::Array(a.iter().map(Lite::to_value).collect()),
            Lite::Obj(m) => Value::Object(m.iter().map(|(k, v)| (k.to_string(), v.to_value())).collect()),
        }
    }

    /// A response of a loglikelihood request: `[loglik, is_greedy]`, possibly wrapped in a list
    /// (`resps`), numbers and booleans possibly strings (as [`response`] reads a [`Value`]).
    pub fn response(&self) -> (Option<f64>, Option<bool>) {
        let Lite::Arr(a) = self else { return (None, None) };
        let a = match a.first() {
            Some(Lite::Arr(inner)) => inner,
            _ => a,
        };
        match a.first() {
            Some(first) => (
                first.num(),
                a.get(1).map(|g| match g {
                    Lite::Bool(b) => *b,
                    g => matches!(g.as_str(), Some("True" | "true")),
                }),
            ),
            None => (None, None),
        }
    }
}

/// A key of a JSON object, borrowed where it holds no escape.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> std::result::Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> std::result::Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V)
    }
}

/// Reads any JSON value into a [`Lite`]; with `shallow`, a list or object is passed over
/// ([`Lite::Skipped`]).
struct LiteSeed {
    shallow: bool,
}

impl<'de> DeserializeSeed<'de> for LiteSeed {
    type Value = Lite<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Lite<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Deserialize<'de> for Lite<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(LiteSeed { shallow: false })
    }
}

impl<'de> Visitor<'de> for LiteSeed {
    type Value = Lite<'de>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<Lite<'de>, E> {
        Ok(Lite::Null)
    }
    fn visit_none<E: de::Error>(self) -> std::result::Result<Lite<'de>, E> {
        Ok(Lite::Null)
    }
    fn visit_bool<E: de::Error>(self, b: bool) -> std::result::Result<Lite<'de>, E> {
        Ok(Lite::Bool(b))
    }
    fn visit_u64<E: de::Error>(self, u: u64) -> std::result::Result<Lite<'de>, E> {
        Ok(Lite::U64(u))
    }
    fn visit_i64<E: de::Error>(self, i: i64) -> std::result::Result<Lite<'de>, E> {
        // as serde_json's Value: a non-negative integer is a u64
        Ok(if i < 0 { Lite::I64(i) } else { Lite::U64(i as u64) })
    }
    fn visit_f64<E: de::Error>(self, f: f64) -> std::result::Result<Lite<'de>, E> {
        Ok(Lite::F64(f))
    }
    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> std::result::Result<Lite<'de>, E> {
        Ok(Lite::Str(Cow::Borrowed(s)))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<Lite<'de>, E> {
        Ok(Lite::Str(Cow::Owned(s.to_owned())))
    }
    fn visit_string<E: de::Error>(self, s: String) -> std::result::Result<Lite<'de>, E> {
        Ok(Lite::Str(Cow::Owned(s)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Lite<'de>, A::Error> {
        if self.shallow {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(Lite::Skipped);
        }
        let mut out = Vec::new();
        while let Some(x) = seq.next_element::<Lite<'de>>()? {
            out.push(x);
        }
        Ok(Lite::Arr(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Lite<'de>, A::Error> {
        if self.shallow {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(Lite::Skipped);
        }
        let mut out = Vec::new();
        while let Some(Key(k)) = map.next_key::<Key<'de>>()? {
            out.push((k, map.next_value::<Lite<'de>>()?));
        }
        Ok(Lite::Obj(out))
    }
}

/// A continuation (`arg_1`) of `arguments`: the text, or "" where it is not a string.
struct Text<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Ok(match d.deserialize_any(LiteSeed { shallow: true })? {
            Lite::Str(s) => Text(s),
            _ => Text(Cow::Borrowed("")),
        })
    }
}

/// One option of `arguments`: a list (its second element, the continuation, where it has at
/// least two; "" where that is not a string), an object (its `arg_1`, "" where that is not a
/// string) or any other value.
enum ArgItem<'a> {
    Seq(Option<Cow<'a, str>>),
    Obj(Cow<'a, str>),
    Other,
}

impl<'de> Deserialize<'de> for ArgItem<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ArgItem<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<ArgItem<'de>, A::Error> {
                let mut n = 0;
                let mut second = None;
                loop {
                    let more = if n == 1 {
                        seq.next_element::<Text<'de>>()?.map(|t| second = Some(t.0)).is_some()
                    } else {
                        seq.next_element::<IgnoredAny>()?.is_some()
                    };
                    if !more {
                        break;
                    }
                    n += 1;
                }
                Ok(ArgItem::Seq(second.filter(|_| n >= 2)))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<ArgItem<'de>, A::Error> {
                let mut cont = Cow::Borrowed("");
                while let Some(Key(k)) = map.next_key::<Key<'de>>()? {
                    if k == "arg_1" {
                        cont = map.next_value::<Text<'de>>()?.0;
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(ArgItem::Obj(cont))
            }
            fn visit_unit<E: de::Error>(self) -> std::result::Result<ArgItem<'de>, E> {
                Ok(ArgItem::Other)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<ArgItem<'de>, E> {
                Ok(ArgItem::Other)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> std::result::Result<ArgItem<'de>, E> {
                Ok(ArgItem::Other)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<ArgItem<'de>, E> {
                Ok(ArgItem::Other)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<ArgItem<'de>, E> {
                Ok(ArgItem::Other)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> std::result::Result<ArgItem<'de>, E> {
                Ok(ArgItem::Other)
            }
        }
        d.deserialize_any(V)
    }
}

/// A sample's `arguments`: the list layout (per item, its continuation where it is a pair), or
/// the object layout (`gen_args_<i>` and the `arg_1` of each), or any other value.
enum Args<'a> {
    List(Vec<Option<Cow<'a, str>>>),
    Map(Vec<(Cow<'a, str>, Cow<'a, str>)>),
    Other(Lite<'a>),
}

impl<'de> Deserialize<'de> for Args<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Args<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Args<'de>, A::Error> {
                let mut out = Vec::new();
                while let Some(item) = seq.next_element::<ArgItem<'de>>()? {
                    out.push(match item {
                        ArgItem::Seq(c) => c,
                        _ => None,
                    });
                }
                Ok(Args::List(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Args<'de>, A::Error> {
                let mut out = Vec::new();
                while let Some(Key(k)) = map.next_key::<Key<'de>>()? {
                    let c = match map.next_value::<ArgItem<'de>>()? {
                        ArgItem::Obj(c) => c,
                        _ => Cow::Borrowed(""),
                    };
                    out.push((k, c));
                }
                Ok(Args::Map(out))
            }
            fn visit_unit<E: de::Error>(self) -> std::result::Result<Args<'de>, E> {
                Ok(Args::Other(Lite::Null))
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> std::result::Result<Args<'de>, E> {
                Ok(Args::Other(Lite::Bool(b)))
            }
            fn visit_u64<E: de::Error>(self, u: u64) -> std::result::Result<Args<'de>, E> {
                LiteSeed { shallow: true }.visit_u64(u).map(Args::Other)
            }
            fn visit_i64<E: de::Error>(self, i: i64) -> std::result::Result<Args<'de>, E> {
                LiteSeed { shallow: true }.visit_i64(i).map(Args::Other)
            }
            fn visit_f64<E: de::Error>(self, f: f64) -> std::result::Result<Args<'de>, E> {
                Ok(Args::Other(Lite::F64(f)))
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> std::result::Result<Args<'de>, E> {
                Ok(Args::Other(Lite::Str(Cow::Borrowed(s))))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<Args<'de>, E> {
                Ok(Args::Other(Lite::Str(Cow::Owned(s.to_owned()))))
            }
        }
        d.deserialize_any(V)
    }
}

/// One `--log_samples` line read without building a [`Value`]: strings borrowed from the line,
/// `doc` passed over unread (only its kind kept, where it is not a list or object), of
/// `arguments` only the continuations. Keys keep the last of duplicates, as a [`Value`] does.
/// The multiple-choice reader's parser: about twice as fast as a [`Value`] on lm-eval lines
/// (`cargo run --release --example bench_json`).
pub struct SampleLine<'a> {
    fields: Vec<(Cow<'a, str>, Lite<'a>)>,
    args: Option<Args<'a>>,
}

impl<'de> Deserialize<'de> for SampleLine<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = SampleLine<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<SampleLine<'de>, A::Error> {
                let mut line = SampleLine { fields: Vec::with_capacity(16), args: None };
                while let Some(Key(k)) = map.next_key::<Key<'de>>()? {
                    let v = match &*k {
                        "doc" => map.next_value_seed(LiteSeed { shallow: true })?,
                        "arguments" => match map.next_value::<Args<'de>>()? {
                            Args::Other(v) => {
                                line.args = None;
                                v
                            }
                            a => {
                                line.args = Some(a);
                                Lite::Skipped
                            }
                        },
                        _ => map.next_value::<Lite<'de>>()?,
                    };
                    line.fields.push((k, v));
                }
                Ok(line)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<SampleLine<'de>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(SampleLine { fields: Vec::new(), args: None })
            }
            fn visit_unit<E: de::Error>(self) -> std::result::Result<SampleLine<'de>, E> {
                Ok(SampleLine { fields: Vec::new(), args: None })
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<SampleLine<'de>, E> {
                Ok(SampleLine { fields: Vec::new(), args: None })
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> std::result::Result<SampleLine<'de>, E> {
                Ok(SampleLine { fields: Vec::new(), args: None })
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<SampleLine<'de>, E> {
                Ok(SampleLine { fields: Vec::new(), args: None })
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<SampleLine<'de>, E> {
                Ok(SampleLine { fields: Vec::new(), args: None })
            }
            fn visit_str<E: de::Error>(self, _: &str) -> std::result::Result<SampleLine<'de>, E> {
                Ok(SampleLine { fields: Vec::new(), args: None })
            }
        }
        d.deserialize_any(V)
    }
}

impl<'a> SampleLine<'a> {
    /// The value of a top-level key (the last where the line repeats it).
    pub fn get(&self, key: &str) -> Option<&Lite<'a>> {
        self.fields.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The per-option responses: `filtered_resps`, else `resps` (as [`responses`]).
    pub fn responses(&self) -> Option<&[Lite<'a>]> {
        let list = |k| match self.get(k) {
            Some(Lite::Arr(a)) => Some(&a[..]),
            _ => None,
        };
        list("filtered_resps").or_else(|| list("resps"))
    }

    /// The continuation (`arg_1`) of each option of `arguments`, in option order, in either layout
    /// the harness has used (a list of `[context, continuation]` pairs, or
    /// `{"gen_args_0": {"arg_0": .., "arg_1": ..}}` ordered by the number in the key).
    pub fn continuations(&self) -> Vec<Cow<'a, str>> {
        match &self.args {
            Some(Args::List(items)) => items.iter().flatten().cloned().collect(),
            Some(Args::Map(entries)) => {
                // as a JSON object's keys: sorted, the last of duplicates kept
                let mut by_key: Vec<&(Cow<str>, Cow<str>)> = entries.iter().collect();
                by_key.sort_by(|a, b| a.0.cmp(&b.0));
                let mut kept: Vec<&(Cow<str>, Cow<str>)> = Vec::with_capacity(by_key.len());
                for e in by_key {
                    match kept.last_mut() {
                        Some(last) if last.0 == e.0 => *last = e,
                        _ => kept.push(e),
                    }
                }
                kept.sort_by_key(|(k, _)| {
                    k.trim_start_matches(|c: char| !c.is_ascii_digit()).parse::<usize>().unwrap_or(0)
                });
                kept.into_iter().map(|(_, c)| c.clone()).collect()
            }
            _ => Vec::new(),
        }
    }
}

/// Whether a samples file holds a multiple-choice (loglikelihood) task: its first line's
/// responses are `[number, bool]` pairs. Perplexity tasks are not read per example.
fn is_choice_samples(first_line: &Value) -> bool {
    responses(first_line).is_some_and(|rs| rs.len() > 1 && rs.iter().all(|r| response(r).0.is_some()))
}

/// Whether a samples file holds a generation (`generate_until`) task: its first line is not a
/// multiple-choice one and its `filtered_resps` starts with a text (without `filtered_resps`:
/// `resps` starts with a list starting with a text).
fn is_generation_samples(first_line: &Value) -> bool {
    if is_choice_samples(first_line) {
        return false;
    }
    match (first_line.get("filtered_resps"), first_line.get("resps")) {
        (Some(Value::Array(f)), _) => f.first().is_some_and(Value::is_string),
        (None, Some(Value::Array(r))) => {
            r.first().and_then(Value::as_array).and_then(|a| a.first()).is_some_and(Value::is_string)
        }
        _ => false,
    }
}

/// Example rows of one `--log_samples` JSONL file of a multiple-choice task. Correctness is
/// lm-eval's own `acc` / `acc_norm` where the line records them; the predicted options are the
/// argmax of the log-likelihoods (per character of the choice for `acc_norm`).
pub fn read_log_samples(path: &Path, task: &str, step: u64) -> Result<Vec<ExampleRecord>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?;
    choice_rows(path, &text, task, step)
}

/// [`read_log_samples`] of a file's text.
fn choice_rows(path: &Path, text: &str, task: &str, step: u64) -> Result<Vec<ExampleRecord>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let at = || format!("{}:{}", path.display(), i + 1);
        let v: SampleLine =
            serde_json::from_str(line).with_context(|| format!("{}: malformed sample (truncated log?)", at()))?;
        let resps = v.responses().with_context(|| format!("{}: no `filtered_resps` or `resps`", at()))?;
        let mut logliks = Vec::new();
        let mut greedy = Vec::new();
        for r in resps {
            let (ll, g) = r.response();
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
        let args = v.continuations();
        let target = v.get("target").with_context(|| format!("{}: no `target`", at()))?;
        let gold = match target.num() {
            Some(g) if g >= 0.0 && g.fract() == 0.0 => g as usize,
            // a target given as the gold choice's text
            _ => target
                .as_str()
                .and_then(|t| args.iter().position(|c| c == t || c.strip_prefix(' ') == Some(t)))
                .with_context(|| {
                    format!(
                        "{}: `target` {} is neither an option index nor one of the options",
                        at(),
                        target.to_value()
                    )
                })?,
        };
        if gold >= logliks.len() {
            bail!("{}: target {gold} but {} options", at(), logliks.len());
        }
        // lm-eval's acc_norm divides by the choice's length without the target delimiter (" ")
        let chars: Vec<u32> = if args.len() == logliks.len() {
            args.iter().map(|c| choice_chars(c)).collect()
        } else {
            vec![0; logliks.len()]
        };
        let bytes: Vec<u32> =
            if args.len() == logliks.len() { args.iter().map(|c| c.len() as u32).collect() } else { Vec::new() };
        let norm: Vec<f64> = logliks.iter().zip(&chars).map(|(l, &c)| l / c.max(1) as f64).collect();
        let (p, pn) = (argmax(&logliks), argmax(&norm));
        let doc_id = match v.get("doc_id") {
            Some(Lite::Str(s)) => s.to_string(),
            Some(Lite::U64(u)) => u.to_string(),
            Some(d) => d.to_value().to_string(),
            None => i.to_string(),
        };
        // lm-eval 0.4 hashes the doc (and the prompt, the target) of every sample
        let item_hash = match v.get("doc_hash") {
            Some(Lite::Str(h)) => h.to_string(),
            _ => String::new(),
        };
        out.push(ExampleRecord {
            step,
            task: task.into(),
            example_id: format!("{task}/{doc_id}"),
            gold: gold as u32,
            predicted: p as u32,
            predicted_norm: pn as u32,
            correct: v.get("acc").and_then(Lite::num).map(|x| x > 0.5).unwrap_or(p == gold),
            correct_norm: v.get("acc_norm").and_then(Lite::num).map(|x| x > 0.5).unwrap_or(pn == gold),
            logliks,
            lengths_chars: chars,
            lengths_tokens: vec![0; greedy.len()],
            lengths_bytes: bytes,
            gold_is_greedy: greedy[gold],
            output: p.to_string(),
            item_hash,
            targets: Vec::new(),
            score_names: Vec::new(),
            score_values: Vec::new(),
        });
    }
    if out.is_empty() {
        bail!("{}: no samples", path.display());
    }
    Ok(out)
}

/// The most text one field of a generation sample may hold (1 MB): more is a broken file, not
/// an answer.
pub const MAX_TEXT_BYTES: usize = 1 << 20;

/// The trail a generation sample's filter belongs to: `task` for the filter `none` (or none
/// given), `task/filter` otherwise.
pub fn filter_trail(task: &str, filter: &str) -> String {
    if filter.is_empty() || filter == "none" {
        task.to_string()
    } else {
        format!("{task}/{filter}")
    }
}

/// One text field of a sample: a string (a number is taken as its JSON text, as lm-eval casts a
/// gold to the type of the result), at most [`MAX_TEXT_BYTES`].
pub(crate) fn text_field(v: &Value, what: &str, at: &dyn Fn() -> String) -> Result<String> {
    let t = match v {
        Value::String(t) => t.clone(),
        Value::Number(n) => n.to_string(),
        other => bail!("{}: `{what}` is not a string but {}", at(), kind_of(other)),
    };
    if t.len() > MAX_TEXT_BYTES {
        bail!("{}: `{what}` holds {} bytes of text, more than {MAX_TEXT_BYTES}: not an answer", at(), t.len());
    }
    Ok(t)
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The per-example metrics of a generation sample, in the order of its `metrics` list (else
/// every top-level number but `doc_id`, by name), numbers possibly written as strings.
fn stored_scores(v: &Value) -> Vec<(String, f64)> {
    let value = |k: &str| match v.get(k) {
        Some(Value::Bool(b)) => Some(f64::from(u8::from(*b))),
        Some(x) => num(x),
        None => None,
    };
    match v.get("metrics").and_then(Value::as_array) {
        Some(names) => {
            names.iter().filter_map(Value::as_str).filter_map(|k| Some((k.to_string(), value(k)?))).collect()
        }
        None => v
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, x)| *k != "doc_id" && x.is_number())
                    .filter_map(|(k, _)| Some((k.clone(), value(k)?)))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Example rows of one `--log_samples` JSONL file of a generation (`generate_until`) task, by
/// trail ([`filter_trail`]: one per filter). A row has no options (`logliks` and `lengths_*`
/// empty, `gold`, `predicted`, `predicted_norm` 0); `output` is the filtered generation,
/// `targets` every gold text, `score_names` / `score_values` the metrics lm-eval stored;
/// `correct` = `correct_norm` = `gold_is_greedy` is `exact_match >= 1`, else the first metric of
/// the trail that is 0/1 on every line. A trail with no such metric is left out with a notice
/// (in `notices`). Missing, non-text or overlong (> 1 MB) text fields are refused, naming the
/// file and line.
pub fn read_generation_samples(
    path: &Path,
    task: &str,
    step: u64,
    notices: &mut Vec<String>,
) -> Result<BTreeMap<String, Vec<ExampleRecord>>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?;
    generation_rows(path, &text, task, step, notices)
}

/// [`read_generation_samples`] of a file's text.
fn generation_rows(
    path: &Path,
    text: &str,
    task: &str,
    step: u64,
    notices: &mut Vec<String>,
) -> Result<BTreeMap<String, Vec<ExampleRecord>>> {
    let mut trails: BTreeMap<String, Vec<ExampleRecord>> = BTreeMap::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let at = || format!("{}:{}", path.display(), i + 1);
        let v: Value =
            serde_json::from_str(line).with_context(|| format!("{}: malformed sample (truncated log?)", at()))?;
        let (key, resps) = match (v.get("filtered_resps"), v.get("resps")) {
            (Some(r), _) => ("filtered_resps", r),
            (None, Some(r)) => ("resps", r),
            (None, None) => bail!("{}: no `filtered_resps` or `resps` (the generated text)", at()),
        };
        // lm-eval writes one response per request, a generation task one request per doc:
        // `[text]` (`resps`: `[[text]]`)
        let first = match resps {
            Value::Array(a) => a.first().with_context(|| format!("{}: `{key}` is an empty list", at()))?,
            other => bail!("{}: `{key}` is not a list but {}", at(), kind_of(other)),
        };
        let first = match (key, first) {
            ("resps", Value::Array(a)) => {
                a.first().with_context(|| format!("{}: `resps` holds an empty list", at()))?
            }
            _ => first,
        };
        let output = match first {
            Value::String(_) => text_field(first, key, &at)?,
            other => bail!("{}: the first element of `{key}` is not a string but {}", at(), kind_of(other)),
        };
        let targets = match v.get("target") {
            None => bail!("{}: no `target` (the gold text)", at()),
            Some(Value::Array(ts)) => {
                if ts.is_empty() {
                    bail!("{}: `target` is an empty list", at());
                }
                let ts: Vec<String> = ts.iter().map(|t| text_field(t, "target", &at)).collect::<Result<_>>()?;
                let total: usize = ts.iter().map(String::len).sum();
                if total > MAX_TEXT_BYTES {
                    bail!("{}: `target` holds {total} bytes of text, more than {MAX_TEXT_BYTES}: not an answer", at());
                }
                ts
            }
            Some(t) => vec![text_field(t, "target", &at)?],
        };
        let filter = match v.get("filter") {
            None => String::new(),
            Some(Value::String(f)) => f.clone(),
            Some(other) => bail!("{}: `filter` is not a string but {}", at(), kind_of(other)),
        };
        let doc_id = match v.get("doc_id") {
            Some(Value::String(s)) => s.clone(),
            Some(d) => d.to_string(),
            None => i.to_string(),
        };
        let item_hash = match v.get("doc_hash") {
            Some(Value::String(h)) => h.clone(),
            _ => String::new(),
        };
        let (score_names, score_values): (Vec<String>, Vec<f64>) = stored_scores(&v).into_iter().unzip();
        if let Some((n, x)) = score_names.iter().zip(&score_values).find(|(_, x)| !x.is_finite()) {
            bail!("{}: metric `{n}` is {x}, not a finite number", at());
        }
        let trail = filter_trail(task, &filter);
        trails.entry(trail.clone()).or_default().push(ExampleRecord {
            step,
            task: trail.clone(),
            example_id: format!("{trail}/{doc_id}"),
            output,
            item_hash,
            targets,
            score_names,
            score_values,
            ..Default::default()
        });
    }
    if trails.is_empty() {
        bail!("{}: no samples", path.display());
    }
    let mut out = BTreeMap::new();
    for (trail, mut rows) in trails {
        // exact_match where lm-eval stored it, else the first metric that is 0/1 on every line
        if crate::source::decide_generation(&mut rows, &["exact_match"]).is_none() {
            notices.push(crate::source::undecided(path, &trail));
            continue;
        }
        out.insert(trail, rows);
    }
    Ok(out)
}

/// A results or samples file found under the inputs.
#[derive(Debug, Clone)]
struct Found {
    path: PathBuf,
    /// the `<timestamp>` of `results_<timestamp>.json` / `samples_<task>_<timestamp>.jsonl`
    stamp: Option<String>,
    /// the task of a samples file
    task: Option<String>,
}

fn folder(p: &Path) -> PathBuf {
    p.parent().map_or_else(PathBuf::new, Path::to_path_buf)
}

/// `results_<ts>.json` -> Some(ts); `samples_<task>_<ts>.jsonl` -> (task, Some(ts)).
fn classify(path: &Path) -> Option<Found> {
    let name = path.file_name()?.to_str()?;
    if let Some(rest) = name.strip_prefix("samples_").and_then(|r| r.strip_suffix(".jsonl")) {
        // the timestamp (`2024-05-01T12-34-56.123456`) has no underscore; a task name may
        let (task, stamp) = match rest.rsplit_once('_') {
            Some((t, s)) if s.starts_with(|c: char| c.is_ascii_digit()) && s.contains('T') => {
                (t.to_string(), Some(s.to_string()))
            }
            _ => (rest.to_string(), None),
        };
        return Some(Found { path: path.to_path_buf(), stamp, task: Some(task) });
    }
    if name.ends_with(".json") {
        let stamp = name
            .strip_prefix("results_")
            .and_then(|r| r.strip_suffix(".json"))
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        return Some(Found { path: path.to_path_buf(), stamp, task: None });
    }
    None
}

/// Results and samples files below `dir`, at any depth: `results*.json` and `samples_*.jsonl`;
/// a folder with none of those is read as a flat folder of results files (every `*.json`).
/// Symbolic links to folders are followed once (a link back to a folder already walked is
/// passed over, with a notice); a name that is not UTF-8 is passed over with a notice.
fn walk(dir: &Path, out: &mut Vec<Found>, notices: &mut Vec<String>) -> Result<()> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    let mut walked = BTreeSet::new();
    while let Some(d) = stack.pop() {
        let real = std::fs::canonicalize(&d).with_context(|| format!("{}: cannot resolve", d.display()))?;
        if !walked.insert(real.clone()) {
            notices.push(format!(
                "{}: a link to {}, which is already read; not followed again",
                d.display(),
                real.display()
            ));
            continue;
        }
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&d)
            .with_context(|| format!("{}: cannot list", d.display()))?
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<_>>()
            .with_context(|| format!("{}: cannot list", d.display()))?;
        entries.sort();
        for p in entries {
            let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
                notices.push(format!("{}: the name is not UTF-8; passed over (rename it to read it)", p.display()));
                continue;
            };
            if name.starts_with('.') {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else if (name.starts_with("results") && name.ends_with(".json"))
                || (name.starts_with("samples_") && name.ends_with(".jsonl"))
            {
                found.extend(classify(&p));
            }
        }
    }
    if found.is_empty() {
        for entry in std::fs::read_dir(dir).with_context(|| format!("{}: cannot list", dir.display()))? {
            let p = entry?.path();
            if p.is_file() && p.extension().is_some_and(|e| e == "json") {
                found.extend(classify(&p));
            }
        }
    }
    if found.is_empty() {
        bail!(
            "{}: no lm-evaluation-harness results files (results_*.json, *.json) or samples (samples_*.jsonl) found",
            dir.display()
        );
    }
    out.extend(found);
    Ok(())
}

/// The paths a pattern with `*`, `?` or `[..]` names (sorted); an error if it names none.
pub(crate) fn expand(input: &Path) -> Result<Vec<PathBuf>> {
    let s = input.to_string_lossy();
    if !s.contains(['*', '?', '[']) || input.exists() {
        return Ok(vec![input.to_path_buf()]);
    }
    let mut out: Vec<PathBuf> =
        glob::glob(&s).with_context(|| format!("{s}: not a valid glob pattern"))?.filter_map(Result::ok).collect();
    out.sort();
    if out.is_empty() {
        bail!("{s}: the pattern matches nothing");
    }
    Ok(out)
}

/// Whether `p` names lm-evaluation-harness outputs [`load`] reads: a glob pattern, a results or
/// samples file, or a folder holding some.
pub fn is_harness_output(p: &Path) -> bool {
    if !p.exists() {
        return p.to_string_lossy().contains(['*', '?', '[']);
    }
    if p.is_file() {
        return classify(p).is_some();
    }
    walk(p, &mut Vec::new(), &mut Vec::new()).is_ok()
}

/// The lm-evaluation-harness reader ([`crate::source::Reader`]): results files are read at
/// discovery (they give the steps and the task rows), samples files are the units.
pub struct LmEval;

/// The version of [`LmEval`]'s parser (the ingest cache key): raise it when the same samples
/// bytes give other rows.
pub const PARSER_VERSION: u32 = 1;

impl crate::source::Reader for LmEval {
    fn name(&self) -> &'static str {
        "lm-evaluation-harness"
    }

    fn version(&self) -> u32 {
        PARSER_VERSION
    }

    fn detect(&self, input: &Path) -> bool {
        is_harness_output(input)
    }

    fn discover(&self, inputs: &[PathBuf], rule: &StepRule) -> Result<crate::source::Discovered> {
        discover(inputs, rule)
    }

    fn parse(&self, unit: &crate::source::Unit, bytes: &[u8]) -> Result<crate::source::Parsed> {
        parse_samples(unit, bytes)
    }
}

/// The files under `inputs` (any mix of results files, samples files, folders, globs), the step
/// of each, the task rows of the results files, one samples file per (step, task).
fn discover(inputs: &[PathBuf], rule: &StepRule) -> Result<crate::source::Discovered> {
    let mut found = Vec::new();
    let mut d = crate::source::Discovered::default();
    for input in inputs {
        for p in expand(input)? {
            if p.is_dir() {
                walk(&p, &mut found, &mut d.notices)?;
            } else if p.is_file() {
                found
                    .push(classify(&p).with_context(|| {
                        format!("{}: neither a results JSON nor a samples JSONL file", p.display())
                    })?);
            } else {
                bail!("{}: no such file or folder", p.display());
            }
        }
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found.dedup_by(|a, b| normal(&a.path) == normal(&b.path));
    d.sources = found.iter().map(|f| f.path.clone()).collect();

    // results files: their steps, and candidate rows per (step, task)
    let mut result_steps: BTreeMap<(PathBuf, Option<String>), u64> = BTreeMap::new();
    let mut folder_steps: BTreeMap<PathBuf, BTreeSet<u64>> = BTreeMap::new();
    let mut task_rows: BTreeMap<(u64, String), Vec<(&Found, TaskRecord)>> = BTreeMap::new();
    for f in found.iter().filter(|f| f.task.is_none()) {
        let v = read_json(&f.path)?;
        let step = rule.step_of_results(&f.path, &v)?;
        d.notices.extend(rule.disagreement(&f.path, &v, step)?);
        result_steps.insert((folder(&f.path), f.stamp.clone()), step);
        folder_steps.entry(folder(&f.path)).or_default().insert(step);
        for r in results_rows(&f.path, &v, step)? {
            task_rows.entry((r.step, r.task.clone())).or_default().push((f, r));
        }
    }
    for ((step, task), cands) in task_rows {
        let kept = newest(cands, step, &task, &mut d.notices)?;
        d.tasks.push(kept);
    }

    // samples files: the step of the results file of the same run (folder and timestamp), else
    // the rule over the path, else the one step of the folder's results files, else the mapping
    let mut sample_files: BTreeMap<(u64, String), Vec<(&Found, &Found)>> = BTreeMap::new();
    for f in found.iter().filter(|f| f.task.is_some()) {
        let dir = folder(&f.path);
        let step = match result_steps.get(&(dir.clone(), f.stamp.clone())) {
            Some(&s) => s,
            None => match rule.from_regex(&f.path)? {
                Some(s) => s,
                None => match folder_steps.get(&dir).filter(|s| s.len() == 1) {
                    Some(s) => *s.first().unwrap(),
                    None => match rule.from_map(&f.path, None) {
                        Some(s) => s,
                        None => step_from_name(&f.path).map_err(|_| rule.no_step(&f.path)).with_context(|| {
                            format!(
                                "{}: no results file of the same run (folder and timestamp) gives the step",
                                f.path.display()
                            )
                        })?,
                    },
                },
            },
        };
        sample_files.entry((step, f.task.clone().unwrap())).or_default().push((f, f));
    }
    for ((step, task), cands) in sample_files {
        let f = newest(cands, step, &task, &mut d.notices)?;
        d.units.push(crate::source::Unit { path: f.path.clone(), step, task });
    }
    Ok(d)
}

/// The rows of one samples file: a multiple-choice task's ([`read_log_samples`]) or a
/// generation task's ([`read_generation_samples`]); any other kind of task (perplexity,
/// unknown) and an empty file give no rows, with a notice saying why.
fn parse_samples(unit: &crate::source::Unit, bytes: &[u8]) -> Result<crate::source::Parsed> {
    let path = &unit.path;
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() + 1;
        anyhow::anyhow!("{}:{line}: not UTF-8 text", path.display())
    })?;
    let mut parsed = crate::source::Parsed::default();
    let Some((i, first)) = text.lines().enumerate().find(|(_, l)| !l.trim().is_empty()) else {
        parsed.notices.push(format!(
            "{}: empty samples file (no lines); task {} has no per-example data at step {}",
            path.display(),
            unit.task,
            unit.step
        ));
        return Ok(parsed);
    };
    let first: Value = serde_json::from_str(first)
        .with_context(|| format!("{}:{}: malformed sample (truncated log?)", path.display(), i + 1))?;
    if is_generation_samples(&first) {
        for (_, rows) in generation_rows(path, text, &unit.task, unit.step, &mut parsed.notices)? {
            parsed.examples.extend(rows);
        }
    } else if is_choice_samples(&first) {
        parsed.examples = choice_rows(path, text, &unit.task, unit.step)?;
    } else {
        parsed.notices.push(format!(
            "{}: neither a multiple-choice task (per-option log-likelihoods) nor a generation task (generated text); task {} has no per-example data",
            path.display(),
            unit.task
        ));
    }
    Ok(parsed)
}

/// What [`load`] read.
#[derive(Debug, Default)]
pub struct Loaded {
    pub tasks: Vec<TaskRecord>,
    pub examples: Vec<ExampleRecord>,
    /// every file read, in path order
    pub sources: Vec<PathBuf>,
    /// what was set aside and why (older reruns, tasks without per-example data); for stderr and
    /// the provenance
    pub notices: Vec<String>,
}

/// Reads lm-evaluation-harness outputs whole ([`crate::source::load_all`] with [`LmEval`]):
/// any mix of results files, samples files, folders (as `lm_eval --output_path` writes them, or
/// flat folders of results files) and glob patterns. Task rows come from the results files;
/// example rows from the samples files of multiple-choice tasks and of generation tasks (one
/// trail per filter, [`read_generation_samples`]). A (step, task) with samples but no results
/// row gets its task row from the samples. Rows are ordered by step, task (and example).
pub fn load(inputs: &[PathBuf], rule: &StepRule) -> Result<Loaded> {
    let (l, examples) = crate::source::load_all(&LmEval, inputs, rule, &crate::source::Ingest::default())?;
    if l.tasks.is_empty() {
        bail!(
            "{}: no task with an `acc` in any results or samples file",
            inputs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        );
    }
    Ok(Loaded { tasks: l.tasks, examples, sources: l.sources, notices: l.notices })
}

/// One of several files for the same (step, task): reruns in one folder keep the newest
/// timestamp (with a notice); files of different folders, or without timestamps, are refused.
fn newest<T>(mut cands: Vec<(&Found, T)>, step: u64, task: &str, notices: &mut Vec<String>) -> Result<T> {
    if cands.len() == 1 {
        return Ok(cands.pop().unwrap().1);
    }
    let names = |c: &[(&Found, T)]| c.iter().map(|(f, _)| f.path.display().to_string()).collect::<Vec<_>>().join(", ");
    let dir = folder(&cands[0].0.path);
    if cands.iter().any(|(f, _)| folder(&f.path) != dir || f.stamp.is_none()) {
        bail!("step {step} of task {task} is in more than one run: {}; give each run its own step (--step-from, --step-map) or leave one out", names(&cands));
    }
    cands.sort_by(|a, b| a.0.stamp.cmp(&b.0.stamp));
    let (kept, value) = cands.pop().unwrap();
    notices.push(format!(
        "step {step} task {task}: kept the newest of {} runs, {}; set aside {}",
        cands.len() + 1,
        kept.path.display(),
        names(&cands)
    ));
    Ok(value)
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
        // the folder loader reads the same rows
        let loaded = load(&[dir], &StepRule::default()).unwrap();
        assert_eq!(loaded.tasks, rows);
        assert!(loaded.examples.is_empty() && loaded.notices.is_empty());
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
        assert_eq!(
            (rows[0].predicted, rows[0].correct, rows[0].predicted_norm, rows[0].correct_norm),
            (0, false, 1, true)
        );
        assert!(rows[0].gold_is_greedy);
        assert_eq!((rows[0].lengths_chars.clone(), rows[0].lengths_bytes.clone()), (vec![2, 4], vec![3, 5]));
        assert_eq!((rows[1].predicted, rows[1].correct, rows[1].example_id.as_str()), (0, true, "piqa/1"));
        std::fs::write(&p, r#"{"doc_id": 0, "target": 1, "filtered_resps": [["-4.0", "Fal"#).unwrap();
        let e = format!("{:#}", read_log_samples(&p, "piqa", 7).unwrap_err());
        assert!(e.contains("samples_piqa.jsonl:1") && e.contains("truncated"), "{e}");
    }

    /// The identity of a sample's doc is lm-eval 0.4's `doc_hash` where the line has one
    /// (not `prompt_hash` or `target_hash`), else unknown (empty).
    #[test]
    fn doc_hash_is_the_item_hash() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("samples_piqa.jsonl");
        let h = "3b2d0c8a6b9e4f5d1a7c2e8f9b0a1d3c5e7f9a2b4c6d8e0f1a3b5c7d9e1f3a5b";
        std::fs::write(&p, format!(concat!(
            r#"{{"doc_id": 0, "target": 1, "arguments": [["Q:", " ab"], ["Q:", " abcd"]], "filtered_resps": [["-4.0", "False"], ["-6.0", "True"]], "doc_hash": "{}", "prompt_hash": "ff00", "target_hash": "ee11"}}"#, "\n",
            r#"{{"doc_id": 1, "target": 0, "arguments": [["Q:", " a"], ["Q:", " b"]], "filtered_resps": [[-1.5, true], [-2.0, false]], "prompt_hash": "ff01"}}"#, "\n",
        ), h)).unwrap();
        let rows = read_log_samples(&p, "piqa", 7).unwrap();
        assert_eq!((rows[0].item_hash.as_str(), rows[1].item_hash.as_str()), (h, ""));
    }

    /// `resps` (each option wrapped in a list) when `filtered_resps` is absent, a target given as
    /// the gold choice's text, and lm-eval's own acc / acc_norm decide correctness.
    #[test]
    fn resps_text_targets_and_recorded_decisions() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("samples_t_2024-01-01T00-00-00.000001.jsonl");
        std::fs::write(&p, concat!(
            r#"{"doc_id": 3, "target": "b", "arguments": [["Q:", " a"], ["Q:", " b"]], "resps": [[["-1.0", "False"]], [["-2.0", "True"]]], "acc": 1.0, "acc_norm": "0.0"}"#, "\n",
        )).unwrap();
        let r = &read_log_samples(&p, "t", 1).unwrap()[0];
        assert_eq!((r.gold, r.predicted, r.example_id.as_str()), (1, 0, "t/3"));
        assert_eq!((r.correct, r.correct_norm), (true, false), "the recorded decisions, not the recomputed ones");
        assert_eq!(r.logliks, vec![-1.0, -2.0]);
        std::fs::write(&p, r#"{"doc_id": 3, "target": "zz", "arguments": [["Q:", " a"], ["Q:", " b"]], "resps": [[["-1.0", "False"]], [["-2.0", "True"]]]}"#).unwrap();
        let e = format!("{:#}", read_log_samples(&p, "t", 1).unwrap_err());
        assert!(e.contains(".jsonl:1") && e.contains("target"), "{e}");
    }

    /// A gsm8k-like `generate_until` line as lm-eval 0.4.13 writes it: one per (doc, filter).
    fn gen_line(doc: u32, filter: &str, target: Value, out: &str, em: f64) -> String {
        serde_json::json!({
            "doc_id": doc,
            "doc": {"question": format!("q{doc}"), "answer": "#### 18"},
            "target": target,
            "arguments": {"gen_args_0": {"arg_0": format!("Question: q{doc}\nAnswer:"), "arg_1": {"until": ["Question:"], "do_sample": false}}},
            "resps": [[format!("The answer is {out}.\n#### {out}")]],
            "filtered_resps": [out],
            "filter": filter,
            "metrics": ["exact_match"],
            "doc_hash": format!("{doc:064x}"),
            "prompt_hash": "aa",
            "target_hash": "bb",
            "exact_match": em,
        })
        .to_string()
    }

    #[test]
    fn generation_samples_are_read_per_filter() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("samples_gsm8k_2024-01-01T00-00-00.5.jsonl");
        let lines = [
            gen_line(0, "strict-match", "Janet ... #### 18".into(), "18", 1.0),
            gen_line(1, "strict-match", serde_json::json!(["3", "three"]), "[invalid]", 0.0),
            gen_line(0, "flexible-extract", "Janet ... #### 18".into(), "18", 1.0),
            gen_line(1, "flexible-extract", serde_json::json!(["3", "three"]), "3", 1.0),
        ];
        std::fs::write(&p, lines.join("\n") + "\n").unwrap();
        let mut notices = Vec::new();
        let trails = read_generation_samples(&p, "gsm8k", 7, &mut notices).unwrap();
        assert!(notices.is_empty(), "{notices:?}");
        assert_eq!(trails.keys().collect::<Vec<_>>(), ["gsm8k/flexible-extract", "gsm8k/strict-match"]);
        let strict = &trails["gsm8k/strict-match"];
        assert_eq!(strict.len(), 2);
        let r = &strict[1];
        assert_eq!((r.task.as_str(), r.example_id.as_str(), r.step), ("gsm8k/strict-match", "gsm8k/strict-match/1", 7));
        assert_eq!((r.output.as_str(), r.targets.clone()), ("[invalid]", vec!["3".to_string(), "three".to_string()]));
        assert_eq!((r.correct, r.correct_norm, r.gold_is_greedy), (false, false, false));
        assert!(r.logliks.is_empty() && r.lengths_chars.is_empty() && r.lengths_bytes.is_empty());
        assert_eq!((r.gold, r.predicted, r.predicted_norm), (0, 0, 0));
        assert_eq!((r.score_names.clone(), r.score_values.clone()), (vec!["exact_match".to_string()], vec![0.0]));
        assert_eq!(r.item_hash, format!("{:064x}", 1));
        assert!(r.is_generation());
        let flex = &trails["gsm8k/flexible-extract"];
        assert_eq!((flex[1].output.as_str(), flex[1].correct), ("3", true));
        assert_eq!((flex[0].targets.clone(), flex[0].correct), (vec!["Janet ... #### 18".to_string()], true));
        // the filter `none` (or no filter) is the task itself
        assert_eq!(
            (filter_trail("t", "none"), filter_trail("t", ""), filter_trail("t", "f")),
            ("t".into(), "t".into(), "t/f".into())
        );
    }

    /// Without `exact_match`, the first metric that is 0/1 on every line decides; with none, the
    /// trail is left to the task level with a notice.
    #[test]
    fn generation_correctness_falls_back_on_the_first_binary_metric() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("samples_squad.jsonl");
        let line = |doc: u32, f1: f64, hit: f64| {
            serde_json::json!({"doc_id": doc, "target": "Paris", "filtered_resps": ["Paris"], "filter": "none",
                "metrics": ["f1", "hit", "bleu"], "f1": f1, "hit": hit, "bleu": "0.5"})
            .to_string()
        };
        std::fs::write(&p, format!("{}\n{}\n", line(0, 1.0, 1.0), line(1, 0.4, 0.0))).unwrap();
        let mut notices = Vec::new();
        let t = read_generation_samples(&p, "squad", 1, &mut notices).unwrap();
        let rows = &t["squad"];
        assert_eq!((rows[0].correct, rows[1].correct), (true, false), "hit decides: f1 is not 0/1 on every line");
        assert_eq!(rows[1].score_names, ["f1", "hit", "bleu"]);
        assert_eq!(rows[1].score_values, [0.4, 0.0, 0.5], "as stored, strings read as numbers");
        std::fs::write(&p, format!("{}\n", line(0, 0.5, 0.5))).unwrap();
        let t = read_generation_samples(&p, "squad", 1, &mut notices).unwrap();
        assert!(t.is_empty());
        assert!(notices.iter().any(|n| n.contains("samples_squad.jsonl") && n.contains("task level")), "{notices:?}");
    }

    #[test]
    fn bad_generation_lines_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("samples_gsm8k.jsonl");
        let good = gen_line(0, "strict-match", "18".into(), "18", 1.0);
        let long = "x".repeat(MAX_TEXT_BYTES + 1);
        let cases: Vec<(String, &str)> = vec![
            (good.replace(r#""target":"18","#, ""), "no `target`"),
            (good.replace(r#""target":"18""#, r#""target":{"a":1}"#), "`target` is not a string but an object"),
            (good.replace(r#""target":"18""#, r#""target":["3",null]"#), "`target` is not a string but null"),
            (good.replace(r#""target":"18""#, r#""target":[]"#), "empty list"),
            (
                good.replace(r#""filtered_resps":["18"]"#, r#""filtered_resps":[18]"#),
                "first element of `filtered_resps` is not a string but a number",
            ),
            (
                good.replace(r#""filtered_resps":["18"]"#, r#""filtered_resps":"18""#),
                "`filtered_resps` is not a list but a string",
            ),
            (
                good.replace(r#""filtered_resps":["18"],"#, "").replace(r#""resps""#, r#""other""#),
                "no `filtered_resps` or `resps`",
            ),
            (
                good.replace(r#""filtered_resps":["18"]"#, &format!(r#""filtered_resps":["{long}"]"#)),
                "more than 1048576",
            ),
            (good.replace(r#""target":"18""#, &format!(r#""target":["{long}"]"#)), "more than 1048576"),
        ];
        for (bad, want) in cases {
            assert_ne!(bad, good, "{want}: the case must change the line");
            std::fs::write(&p, format!("{good}\n{bad}\n")).unwrap();
            let e = format!("{:#}", read_generation_samples(&p, "gsm8k", 1, &mut Vec::new()).unwrap_err());
            assert!(e.contains("samples_gsm8k.jsonl:2") && e.contains(want), "{want}: {e}");
        }
    }

    /// `load` reads a generation task's samples per example, one trail per filter, with its task
    /// rows from the samples (lm-eval's results give exact_match, not acc); a doc whose gold
    /// text changes between checkpoints is refused.
    #[test]
    fn load_reads_generation_trails() {
        let dir = tempfile::tempdir().unwrap();
        let run = |step: u32, lines: &[String]| {
            let m = dir.path().join(format!("runs__x__hf__step_{step:06}"));
            std::fs::create_dir_all(&m).unwrap();
            let args = serde_json::json!({"pretrained": format!("runs/x/hf/step_{step:06}")});
            let results = serde_json::json!({"results": {"gsm8k": {"exact_match,strict-match": 0.5, "exact_match,flexible-extract": 0.5, "alias": "gsm8k"}}, "config": {"model": "hf", "model_args": args}});
            std::fs::write(m.join("results_2024-01-01T00-00-00.5.json"), results.to_string()).unwrap();
            std::fs::write(m.join("samples_gsm8k_2024-01-01T00-00-00.5.jsonl"), lines.join("\n") + "\n").unwrap();
        };
        let lines = |a: &str, b: &str| {
            vec![
                gen_line(0, "strict-match", "18".into(), a, f64::from(u8::from(a == "18"))),
                gen_line(1, "strict-match", "3".into(), b, f64::from(u8::from(b == "3"))),
                gen_line(0, "flexible-extract", "18".into(), a, f64::from(u8::from(a == "18"))),
                gen_line(1, "flexible-extract", "3".into(), b, f64::from(u8::from(b == "3"))),
            ]
        };
        run(10, &lines("18", "4"));
        run(20, &lines("18", "3"));
        let loaded = load(&[dir.path().to_path_buf()], &StepRule::default()).unwrap();
        assert_eq!(loaded.examples.len(), 8);
        let tasks: Vec<(u64, &str, f64)> = loaded.tasks.iter().map(|t| (t.step, t.task.as_str(), t.acc)).collect();
        assert_eq!(
            tasks,
            vec![
                (10, "gsm8k/flexible-extract", 0.5),
                (10, "gsm8k/strict-match", 0.5),
                (20, "gsm8k/flexible-extract", 1.0),
                (20, "gsm8k/strict-match", 1.0)
            ]
        );
        assert!(!loaded.notices.iter().any(|n| n.contains("not a multiple-choice")), "{:?}", loaded.notices);
        let mut changed = lines("18", "3");
        changed[0] = gen_line(0, "strict-match", "19".into(), "18", 0.0);
        run(20, &changed);
        let e = format!("{:#}", load(&[dir.path().to_path_buf()], &StepRule::default()).unwrap_err());
        assert!(e.contains("doc 0 ") && e.contains("\"19\"") && e.contains("step 10"), "{e}");
    }

    #[test]
    fn a_file_without_a_step_is_refused_by_name() {
        let e = step_from_name(Path::new("results.json")).unwrap_err().to_string();
        assert!(e.contains("results.json") && e.contains("step"), "{e}");
    }

    fn results_json(model_args: Value, acc: f64) -> String {
        serde_json::json!({"results": {"t": {"acc,none": acc, "acc_stderr,none": 0.01, "alias": "t"}}, "config": {"model": "hf", "model_args": model_args}}).to_string()
    }

    fn sample_line(doc: u32, ll0: &str, ll1: &str) -> String {
        format!(
            r#"{{"doc_id": {doc}, "target": 0, "arguments": {{"gen_args_0": {{"arg_0": "Q", "arg_1": " x"}}, "gen_args_1": {{"arg_0": "Q", "arg_1": " yy"}}}}, "resps": [[["{ll0}", "False"]], [["{ll1}", "False"]]], "filtered_resps": [["{ll0}", "False"], ["{ll1}", "False"]], "acc": {}}}"#,
            if ll0.parse::<f64>().unwrap() >= ll1.parse::<f64>().unwrap() { "1.0" } else { "0.0" }
        )
    }

    #[test]
    fn steps_from_model_args_strings_and_json_objects() {
        let v = |a: Value| serde_json::json!({"config": {"model_args": a}});
        let rule = StepRule::default();
        let p = Path::new("OUT/m/results_2024-01-01T00-00-00.1.json");
        assert_eq!(
            rule.step_of_results(p, &v("pretrained=EleutherAI/pythia-160m,revision=step143000,dtype=float32".into()))
                .unwrap(),
            143000
        );
        assert_eq!(
            rule.step_of_results(p, &v(serde_json::json!({"pretrained": "runs/x/hf/step_000120", "dtype": "float32"})))
                .unwrap(),
            120
        );
        assert_eq!(
            rule.step_of_results(p, &v(serde_json::json!({"pretrained": "/ckpt/global_step500/hf"}))).unwrap(),
            500
        );
        assert_eq!(
            rule.step_of_results(p, &v(serde_json::json!({"pretrained": "org/model", "revision": "step7"}))).unwrap(),
            7
        );
        // two different steps named: ambiguous, refused with the file
        let e = rule.step_of_results(p, &v("pretrained=runs/step_5,revision=step6".into())).unwrap_err().to_string();
        assert!(e.contains("results_2024") && e.contains("5, 6") && e.contains("--step-from"), "{e}");
        // nothing names a step: the file and what was tried
        let e = rule.step_of_results(p, &v("pretrained=org/model".into())).unwrap_err().to_string();
        assert!(e.contains("results_2024") && e.contains("--step-map"), "{e}");
    }

    #[test]
    fn the_regex_comes_first_then_model_args_then_the_mapping() {
        let v = serde_json::json!({"config": {"model_args": "pretrained=org/model,revision=step9"}});
        let rule = StepRule::new(Some(r"ckpt-(\d+)/"), None).unwrap();
        assert_eq!(rule.step_of_results(Path::new("OUT/ckpt-42/results_x.json"), &v).unwrap(), 42);
        assert_eq!(rule.step_of_results(Path::new("OUT/other/results_x.json"), &v).unwrap(), 9, "no match: model_args");
        assert!(StepRule::new(Some(r"ckpt-\d+"), None).unwrap_err().to_string().contains("one capture group"));
        assert!(StepRule::new(Some(r"(a)(\d+)"), None).is_err());
        assert!(StepRule::new(Some(r"(\d+"), None).is_err());
        let e = StepRule::new(Some(r"ckpt-(\w+)/"), None)
            .unwrap()
            .step_of_results(Path::new("OUT/ckpt-ab/results_x.json"), &v)
            .unwrap_err()
            .to_string();
        assert!(e.contains("ckpt-ab") && e.contains("`ab`"), "{e}");

        let dir = tempfile::tempdir().unwrap();
        let map = dir.path().join("steps.csv");
        let a = dir.path().join("runA");
        std::fs::write(&map, format!("path,step\n{},100\n{}/sub,150\norg/final,999\n", a.display(), a.display()))
            .unwrap();
        let rule = StepRule::new(None, Some(&map)).unwrap();
        let none = serde_json::json!({"config": {"model_args": {"pretrained": "org/model"}}});
        assert_eq!(rule.step_of_results(&a.join("m/results_x.json"), &none).unwrap(), 100);
        assert_eq!(
            rule.step_of_results(&a.join("sub/m/results_x.json"), &none).unwrap(),
            150,
            "the deepest folder wins"
        );
        let fin = serde_json::json!({"config": {"model_args": {"pretrained": "org/final"}}});
        assert_eq!(rule.step_of_results(Path::new("elsewhere/results_x.json"), &fin).unwrap(), 999, "by pretrained=");
        assert_eq!(rule.step_of_results(&a.join("results_x.json"), &v).unwrap(), 9, "model_args before the mapping");
        // a disagreement with config.model_args is said, with the step used
        let said = rule.disagreement(&a.join("results_x.json"), &v, 9).unwrap().unwrap();
        assert!(
            said.contains("--step-map") && said.contains("gives step 100") && said.contains("step 9 is used"),
            "{said}"
        );
        assert_eq!(rule.disagreement(&a.join("results_x.json"), &none, 100).unwrap(), None, "no step in model_args");
        let re = StepRule::new(Some(r"ckpt-(\d+)/"), None).unwrap();
        let said = re.disagreement(Path::new("OUT/ckpt-42/results_x.json"), &v, 42).unwrap().unwrap();
        assert!(said.contains("--step-from gives step 42") && said.contains("names step 9"), "{said}");
        let agree = serde_json::json!({"config": {"model_args": "pretrained=org/model,revision=step42"}});
        assert_eq!(re.disagreement(Path::new("OUT/ckpt-42/results_x.json"), &agree, 42).unwrap(), None);
        // a mapping that names one path twice with different steps, or a bad step, is refused
        std::fs::write(&map, "a,1\nb,2\na,3\n").unwrap();
        let e = StepRule::new(None, Some(&map)).unwrap_err().to_string();
        assert!(e.contains("steps.csv:3") && e.contains("line 1"), "{e}");
        std::fs::write(&map, "a,1\nb,x\n").unwrap();
        assert!(StepRule::new(None, Some(&map)).unwrap_err().to_string().contains("steps.csv:2"));
    }

    /// A tree as `lm_eval --output_path OUT --log_samples` writes it: one folder per model, all
    /// revisions of one model in one folder; a rerun keeps the newest timestamp.
    #[test]
    fn lm_eval_output_folders_with_reruns_keep_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("OUT");
        let m = out.join("org__model");
        std::fs::create_dir_all(&m).unwrap();
        let runs = [
            ("step10", "2024-01-01T00-00-01.000001", 0.5, ["-1.0", "-2.0"]),
            ("step20", "2024-01-01T00-00-02.000001", 0.6, ["-3.0", "-1.0"]),
            ("step20", "2024-01-02T00-00-00.000001", 0.7, ["-1.0", "-3.0"]),
        ];
        for (i, (rev, ts, acc, ll)) in runs.iter().enumerate() {
            let args = if i % 2 == 0 {
                Value::String(format!("pretrained=org/model,revision={rev}"))
            } else {
                serde_json::json!({"pretrained": "org/model", "revision": rev})
            };
            std::fs::write(m.join(format!("results_{ts}.json")), results_json(args, *acc)).unwrap();
            std::fs::write(
                m.join(format!("samples_t_{ts}.jsonl")),
                format!("{}\n{}\n", sample_line(0, ll[0], ll[1]), sample_line(1, "-0.5", "-0.7")),
            )
            .unwrap();
        }
        let loaded = load(&[out.clone()], &StepRule::default()).unwrap();
        assert_eq!(loaded.tasks.iter().map(|r| (r.step, r.acc)).collect::<Vec<_>>(), vec![(10, 0.5), (20, 0.7)]);
        assert_eq!(loaded.examples.len(), 4);
        let e20: Vec<_> = loaded.examples.iter().filter(|r| r.step == 20).collect();
        assert_eq!(
            (e20[0].example_id.as_str(), e20[0].logliks.clone(), e20[0].correct),
            ("t/0", vec![-1.0, -3.0], true),
            "the newest rerun's samples"
        );
        assert_eq!(loaded.notices.len(), 2, "{:?}", loaded.notices);
        assert!(
            loaded
                .notices
                .iter()
                .all(|n| n.contains("2024-01-02") && n.contains("set aside") && n.contains("2024-01-01T00-00-02")),
            "{:?}",
            loaded.notices
        );
        assert_eq!(loaded.sources.len(), 6);
        // a glob over the files gives the same rows
        let g = load(&[m.join("*_2024-01-0[12]*")], &StepRule::default()).unwrap();
        assert_eq!((g.tasks, g.examples.len()), (loaded.tasks.clone(), 4));
        assert!(load(&[m.join("nothing_*")], &StepRule::default())
            .unwrap_err()
            .to_string()
            .contains("matches nothing"));

        // the same step from a second model folder: refused, naming both files
        let other = out.join("org__model2");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(
            other.join("results_2024-03-01T00-00-00.1.json"),
            results_json("pretrained=org/model2,revision=step10".into(), 0.1),
        )
        .unwrap();
        let e = load(&[out.clone()], &StepRule::default()).unwrap_err().to_string();
        assert!(
            e.contains("step 10") && e.contains("org__model2") && e.contains("org__model/results_2024-01-01T00-00-01"),
            "{e}"
        );
        // ... unless a rule gives the runs their own steps
        std::fs::remove_dir_all(&other).unwrap();
    }

    #[test]
    fn samples_take_the_step_of_their_run_and_bad_lines_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path().join("runs__x__hf__step_000030");
        std::fs::create_dir_all(&m).unwrap();
        std::fs::write(
            m.join("results_2024-01-01T00-00-00.5.json"),
            results_json(serde_json::json!({"pretrained": "runs/x/hf/step_000030"}), 0.5),
        )
        .unwrap();
        std::fs::write(
            m.join("samples_t_2024-01-01T00-00-00.5.jsonl"),
            format!("{}\n{}\n", sample_line(0, "-1", "-2"), sample_line(1, "-3", "-1")),
        )
        .unwrap();
        let loaded = load(&[m.clone()], &StepRule::default()).unwrap();
        assert!(loaded.examples.iter().all(|r| r.step == 30));
        // a generation task's samples are not read per example, with a notice
        std::fs::write(
            m.join("samples_gen_2024-01-01T00-00-00.5.jsonl"),
            r#"{"doc_id": 0, "target": "Paris", "resps": [["Paris"]], "filtered_resps": ["Paris"]}"#,
        )
        .unwrap();
        let loaded = load(&[m.clone()], &StepRule::default()).unwrap();
        assert!(
            loaded.notices.iter().any(|n| n.contains("samples_gen") && n.contains("task level")),
            "{:?}",
            loaded.notices
        );
        std::fs::remove_file(m.join("samples_gen_2024-01-01T00-00-00.5.jsonl")).unwrap();
        // malformed lines and files name the file and the line
        std::fs::write(
            m.join("samples_t_2024-01-01T00-00-00.5.jsonl"),
            format!("{}\n{{\"doc_id\": 1, \"target\n", sample_line(0, "-1", "-2")),
        )
        .unwrap();
        let e = format!("{:#}", load(&[m.clone()], &StepRule::default()).unwrap_err());
        assert!(e.contains("samples_t_2024-01-01T00-00-00.5.jsonl:2") && e.contains("malformed"), "{e}");
        std::fs::write(m.join("results_2024-01-01T00-00-00.5.json"), "{\n\"results\": {\"t\": ").unwrap();
        let e = format!("{:#}", load(&[m.clone()], &StepRule::default()).unwrap_err());
        assert!(e.contains("results_2024-01-01T00-00-00.5.json:2") && e.contains("not JSON"), "{e}");
    }

    /// A doc whose options or target change between checkpoints is refused, naming the file, the
    /// doc and both steps; the same docs at both checkpoints load.
    #[test]
    fn a_doc_that_changes_between_checkpoints_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let run = |step: u32, lines: &[String]| {
            let m = dir.path().join(format!("runs__x__hf__step_{step:06}"));
            std::fs::create_dir_all(&m).unwrap();
            let args = serde_json::json!({"pretrained": format!("runs/x/hf/step_{step:06}")});
            std::fs::write(m.join("results_2024-01-01T00-00-00.5.json"), results_json(args, 0.5)).unwrap();
            std::fs::write(m.join("samples_t_2024-01-01T00-00-00.5.jsonl"), lines.join("\n") + "\n").unwrap();
        };
        run(10, &[sample_line(0, "-1", "-2"), sample_line(1, "-3", "-1")]);
        run(20, &[sample_line(0, "-2", "-1"), sample_line(1, "-3", "-1")]);
        let loaded = load(&[dir.path().to_path_buf()], &StepRule::default()).unwrap();
        assert_eq!(loaded.examples.len(), 4);
        // doc 1 with a third option at step 20
        let three = sample_line(1, "-3", "-1").replace(
            r#""gen_args_1": {"arg_0": "Q", "arg_1": " yy"}}"#,
            r#""gen_args_1": {"arg_0": "Q", "arg_1": " yy"}, "gen_args_2": {"arg_0": "Q", "arg_1": " z"}}"#,
        );
        let three = three.replace(r#"[["-1", "False"]]]"#, r#"[["-1", "False"]], [["-5", "False"]]]"#);
        let three = three.replace(r#"["-1", "False"]], "acc""#, r#"["-1", "False"], ["-5", "False"]], "acc""#);
        run(20, &[sample_line(0, "-2", "-1"), three]);
        let e = format!("{:#}", load(&[dir.path().to_path_buf()], &StepRule::default()).unwrap_err());
        assert!(
            e.contains("step_000020") && e.contains("doc 1 ") && e.contains("3 options") && e.contains("step 10"),
            "{e}"
        );
        // doc 0 with another target at step 20
        run(20, &[sample_line(0, "-2", "-1").replace(r#""target": 0"#, r#""target": 1"#), sample_line(1, "-3", "-1")]);
        let e = format!("{:#}", load(&[dir.path().to_path_buf()], &StepRule::default()).unwrap_err());
        assert!(e.contains("doc 0 ") && e.contains("target 1 at step 20") && e.contains("target 0 at step 10"), "{e}");
    }

    /// The borrowed parser of the multiple-choice reader reads what a `Value` reads, on odd lines
    /// too: escapes, repeated keys (the last wins), both `arguments` layouts with odd items,
    /// numbers as strings, a line that is not an object.
    #[test]
    fn sample_line_reads_what_a_value_reads() {
        let lines = [
            r#"{"doc_id": 7, "doc": {"q": "a\nb"}, "target": "1", "arguments": {"gen_args_10": {"arg_0": "Q\n", "arg_1": " ten"}, "gen_args_2": {"arg_1": " t\u00e9"}, "gen_args_1": [1, 2], "gen_args_2": {"arg_1": 3}}, "resps": [[["-1", "False"]]], "filtered_resps": [["-1.5", "True"], [-2, true], [], "x"], "acc": "1.0", "acc": 0.0}"#,
            r#"{"doc_id": "d\"1", "target": -3, "arguments": [["c", " a"], ["c"], {"arg_1": " b"}, ["c", 5, 6], 4], "filtered_resps": 3, "resps": [[["1e-3", "true"]], [[0.25]]], "doc_hash": 5}"#,
            r#"{"doc_id": 1.5, "target": [1, {"b": 2, "a": null}], "arguments": "x", "doc": 3, "arguments": 7}"#,
            r#"[1, {"doc_id": 2}]"#,
        ];
        for line in lines {
            let v: Value = serde_json::from_str(line).unwrap();
            let s: SampleLine = serde_json::from_str(line).unwrap();
            let want: Vec<_> = responses(&v).map(|rs| rs.iter().map(response).collect()).unwrap_or_default();
            let got: Vec<_> = s.responses().map(|rs| rs.iter().map(Lite::response).collect()).unwrap_or_default();
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "{line}");
            let conts: Vec<String> = match v.get("arguments") {
                Some(Value::Array(items)) => items
                    .iter()
                    .filter_map(|i| i.as_array().filter(|p| p.len() >= 2).map(|p| p[1].as_str().unwrap_or("").into()))
                    .collect(),
                Some(Value::Object(map)) => {
                    let mut keys: Vec<&String> = map.keys().collect();
                    keys.sort_by_key(|k| {
                        k.trim_start_matches(|c: char| !c.is_ascii_digit()).parse::<usize>().unwrap_or(0)
                    });
                    keys.into_iter().map(|k| map[k]["arg_1"].as_str().unwrap_or("").into()).collect()
                }
                _ => Vec::new(),
            };
            assert_eq!(s.continuations(), conts, "{line}");
            for k in ["doc_id", "target", "acc", "doc_hash", "doc", "nothing"] {
                assert_eq!(s.get(k).map(Lite::num), v.get(k).map(num), "{k} of {line}");
                if k != "doc" {
                    assert_eq!(s.get(k).map(Lite::to_value), v.get(k).cloned(), "{k} of {line}");
                }
            }
        }
    }

    #[test]
    fn duplicate_steps_within_a_flat_folder_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a_step10.json"), results_json("pretrained=x".into(), 0.5)).unwrap();
        std::fs::write(dir.path().join("b_step10.json"), results_json("pretrained=y".into(), 0.6)).unwrap();
        let e = load(&[dir.path().to_path_buf()], &StepRule::default()).unwrap_err().to_string();
        assert!(e.contains("a_step10.json") && e.contains("b_step10.json") && e.contains("step 10"), "{e}");
    }

    /// The messages of issue 29 item 7: an empty samples file says so (not "not a
    /// multiple-choice task"); a notice that repeats for every checkpoint is said once; a
    /// symbolic link back up the tree is followed once with a short notice; a name that is not
    /// UTF-8 is named, not skipped silently.
    #[test]
    fn empty_files_repeated_notices_link_loops_and_odd_names_are_said_once_and_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let run = |step: u32, lines: &[String], gen: Option<&str>| {
            let m = dir.path().join(format!("runs__x__hf__step_{step:06}"));
            std::fs::create_dir_all(&m).unwrap();
            let args = serde_json::json!({"pretrained": format!("runs/x/hf/step_{step:06}")});
            std::fs::write(m.join("results_2024-01-01T00-00-00.5.json"), results_json(args, 0.5)).unwrap();
            std::fs::write(m.join("samples_t_2024-01-01T00-00-00.5.jsonl"), lines.join("\n") + "\n").unwrap();
            if let Some(g) = gen {
                std::fs::write(m.join("samples_g_2024-01-01T00-00-00.5.jsonl"), g).unwrap();
            }
        };
        // a generation task with no 0/1 metric, at three checkpoints: one notice, not three
        let no_metric = |doc: u32| {
            gen_line(doc, "none", Value::from("18"), "18", 1.0)
                .replace(r#""exact_match":1.0"#, r#""bleu":0.5"#)
                .replace(r#""metrics":["exact_match"]"#, r#""metrics":["bleu"]"#)
        };
        for step in [10, 20, 30] {
            run(
                step,
                &[sample_line(0, "-1", "-2"), sample_line(1, "-3", "-1")],
                Some(&(no_metric(0) + "\n" + &no_metric(1) + "\n")),
            );
        }
        let l = load(&[dir.path().to_path_buf()], &StepRule::default()).unwrap();
        let about_g: Vec<&String> = l.notices.iter().filter(|n| n.contains("generation task g")).collect();
        assert_eq!(about_g.len(), 1, "{:?}", l.notices);
        assert!(
            about_g[0].contains("and the same in 2 more files of task g")
                && about_g[0].contains("no per-example analysis"),
            "{}",
            about_g[0]
        );
        // an empty samples file at one checkpoint
        run(30, &[], None);
        std::fs::write(dir.path().join("runs__x__hf__step_000030/samples_t_2024-01-01T00-00-00.5.jsonl"), "").unwrap();
        let l = load(&[dir.path().to_path_buf()], &StepRule::default()).unwrap();
        assert!(l.notices.iter().any(|n| n.contains("empty samples file") && n.contains("step 30")), "{:?}", l.notices);
        assert!(!l.notices.iter().any(|n| n.contains("not a multiple-choice")), "{:?}", l.notices);
        assert!(l.examples.iter().all(|r| r.task != "t"), "t lacks samples at step 30: task level only");
        // a link to the folder itself, and a name that is not UTF-8
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            std::os::unix::fs::symlink(dir.path(), dir.path().join("runs__x__hf__step_000010/loop")).unwrap();
            let odd = std::ffi::OsStr::from_bytes(b"samples_\xff_2024-01-01T00-00-00.5.jsonl");
            std::fs::write(dir.path().join("runs__x__hf__step_000010").join(odd), "").unwrap();
            let l = load(&[dir.path().to_path_buf()], &StepRule::default()).unwrap();
            let link: Vec<&String> = l.notices.iter().filter(|n| n.contains("not followed again")).collect();
            assert_eq!(link.len(), 1, "{:?}", l.notices);
            assert!(link[0].len() < 400, "a short notice: {}", link[0]);
            assert!(l.notices.iter().any(|n| n.contains("not UTF-8")), "{:?}", l.notices);
        }
    }
}
