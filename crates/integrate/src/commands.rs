//! The commands of `integrate` as library functions (its main.rs only parses and dispatches):
//! [`average`] of checkpoint folders of any size (given on the command line or by a
//! [`mergekit`]-style YAML config) and [`ensemble`] of stored scores, of a run's eval folder or
//! of lm-evaluation-harness outputs.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

use crate::average::{self, Accumulate, Checkpoint, Layout, OutDtype};
use crate::ensemble::{self, Rule};
use run::provenance::Input;
use run::RunDir;

/// Files of a Hugging Face folder that describe the model rather than hold its weights; the
/// average carries the newest input's over, so the output loads like the inputs did.
const CARRIED: &[&str] = &[
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
];

/// `p` made absolute with symlinks resolved as far as it exists.
fn resolved(p: &Path) -> PathBuf {
    let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let mut tail = Vec::new();
    let mut cur = abs.as_path();
    loop {
        if let Ok(c) = cur.canonicalize() {
            return tail.iter().rev().fold(c, |acc: PathBuf, t| acc.join(t));
        }
        match (cur.parent(), cur.file_name()) {
            (Some(parent), Some(name)) => {
                tail.push(name.to_os_string());
                cur = parent;
            }
            _ => return abs,
        }
    }
}

/// Refuses an output folder that is an input, lies inside an input's folder or contains one.
fn check_output_place(out: &Path, inputs: &[PathBuf]) -> Result<()> {
    let o = resolved(out);
    for i in inputs {
        let r = resolved(i);
        let home = if r.is_dir() { r.clone() } else { r.parent().map_or(r.clone(), Path::to_path_buf) };
        if o == r || o.starts_with(&home) || r.starts_with(&o) {
            bail!("{}: the output may not be an input, lie inside an input's folder ({}) or contain an input; choose another --out", out.display(), home.display());
        }
    }
    Ok(())
}

/// The first output of an earlier average (`integration.json`'s `outputs`: file and sha256)
/// that is missing or no longer has its recorded sha256, said in words; None if all are intact.
fn damaged_output(out: &Path, outputs: &serde_json::Value) -> Option<String> {
    let Some(outputs) = outputs.as_array().filter(|o| !o.is_empty()) else {
        return Some("integration.json records no outputs".into());
    };
    for o in outputs {
        let (Some(file), Some(sha)) = (o["file"].as_str(), o["sha256"].as_str()) else {
            return Some(format!("integration.json has a malformed output entry {o}"));
        };
        match crate::sha256_file(&out.join(file)) {
            Ok(actual) if actual == sha => {}
            Ok(_) => return Some(format!("{file} does not have the sha256 integration.json records")),
            Err(_) => return Some(format!("{file}, recorded in integration.json, cannot be read")),
        }
    }
    None
}

/// What `integrate average` is asked: the last `window` of `checkpoints` (oldest first) averaged
/// with uniform, exponential (`ema`) or explicit `weights`, or the models and weights of a
/// mergekit-style `config`, into the folder `out`, in `out_dtype` and shards of at most
/// `out_shard_size` bytes.
pub struct AverageRequest {
    /// required without `config`
    pub window: Option<usize>,
    pub ema: Option<f64>,
    pub weights: Vec<f64>,
    pub accumulate: Accumulate,
    /// None: every tensor in its inputs' dtype (or the config's `out_dtype`, else `dtype`)
    pub out_dtype: Option<OutDtype>,
    /// at most this many tensor bytes per file ([`average::DEFAULT_SHARD_SIZE`] by default)
    pub out_shard_size: u64,
    /// a mergekit YAML of a linear merge, in place of `window`, `ema`, `weights`, `checkpoints`
    pub config: Option<PathBuf>,
    pub checkpoints: Vec<PathBuf>,
    pub out: PathBuf,
    /// Replace `out` if it holds an earlier average of other inputs or weights.
    pub force: bool,
}

/// `integrate average`: checks everything, then writes `out` as a whole (weights, the newest
/// input's model files, integration.json), or keeps it when it already holds this average.
/// Prints one line saying which.
pub fn average(req: AverageRequest) -> Result<()> {
    let AverageRequest { window, ema, weights, accumulate, out_dtype, out_shard_size, config, checkpoints, out, force } =
        req;
    // everything is checked before anything is written
    if out_shard_size == 0 {
        bail!("--out-shard-size must be at least one byte");
    }
    let (chosen, w, out_dtype, config_record) = match &config {
        Some(path) => {
            if window.is_some() || ema.is_some() || !weights.is_empty() || !checkpoints.is_empty() {
                bail!(
                    "{}: the config gives the models and their weights; --window, --ema, --weights and checkpoint arguments cannot be given with --config",
                    path.display()
                );
            }
            let c = mergekit::read(path)?;
            if out_dtype.is_some() && c.out_dtype.is_some() {
                bail!(
                    "{}: `{}` gives the output dtype; --out-dtype cannot be given as well",
                    path.display(),
                    c.out_dtype_key
                );
            }
            let record = serde_json::json!({"file": path, "sha256": crate::sha256_file(path)?, "normalize": c.normalize, "weights_given": c.weights});
            let w = c.effective_weights();
            (c.models, w, out_dtype.or(c.out_dtype), Some(record))
        }
        None => {
            let Some(window) = window else { bail!("--window is required (or --config)") };
            if window == 0 || window > checkpoints.len() {
                bail!("--window {window} needs between 1 and {} checkpoints", checkpoints.len());
            }
            if let Some(a) = ema {
                if !(a > 0.0 && a <= 1.0) {
                    bail!("--ema {a}: alpha must lie in (0, 1]");
                }
            }
            if ema.is_some() && !weights.is_empty() {
                bail!("--ema and --weights cannot both be given");
            }
            if !weights.is_empty() && weights.len() != window {
                bail!("--weights has {} values for a window of {window}", weights.len());
            }
            let w = match (ema, weights.is_empty()) {
                (Some(a), _) => average::exponential(window, a),
                (None, false) => weights,
                (None, true) => average::uniform(window),
            };
            if w.iter().any(|x| !(x.is_finite() && *x >= 0.0)) || (w.iter().sum::<f64>() - 1.0).abs() > 1e-9 {
                bail!("--weights must be non-negative and sum to 1, got {w:?}");
            }
            (checkpoints[checkpoints.len() - window..].to_vec(), w, out_dtype, None)
        }
    };
    let window = chosen.len();
    let layout = Layout { dtype: out_dtype, max_shard_size: out_shard_size };
    check_output_place(&out, &chosen)?;
    let opened: Vec<Checkpoint> = chosen.iter().map(|p| Checkpoint::open(p)).collect::<Result<_>>()?;
    average::check_compatible(&opened)?;
    // an integer tensor is refused here, before the output folder exists
    average::check_dtypes(&opened, accumulate)?;
    let inputs: Vec<serde_json::Value> = opened
        .iter()
        .map(|c| {
            let files: Vec<Input> = c.files().iter().map(|f| Input::of(f)).collect::<Result<_>>()?;
            Ok(serde_json::json!({"checkpoint": c.source, "files": files}))
        })
        .collect::<Result<_>>()?;
    let method = if ema.is_some() {
        "exponential average"
    } else if (w.iter().sum::<f64>() - 1.0).abs() <= 1e-9 {
        "weighted average"
    } else {
        "weighted sum"
    };
    let mut recipe = serde_json::json!({"method": method, "weights": w, "accumulate": accumulate, "inputs": inputs});
    // only what differs from the defaults, so that averages written before these options existed
    // are still recognised as the same
    if let Some(d) = out_dtype {
        recipe["out_dtype"] = serde_json::json!(d);
    }
    if out_shard_size != average::DEFAULT_SHARD_SIZE {
        recipe["out_shard_size"] = serde_json::json!(out_shard_size);
    }
    let record = out.join("integration.json");
    // an existing folder is locked before it is looked at (its writer may still be at work);
    // one left empty by an interrupted average counts as new
    let existing = if out.is_dir() { Some(output::FolderLock::acquire(&out, "integrate average")?) } else { None };
    let empty = std::fs::read_dir(&out).map(|d| d.flatten().all(|e| e.file_name() == ".lock")).unwrap_or(true);
    if out.exists() && !empty {
        let earlier =
            std::fs::read_to_string(&record).ok().and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
        match earlier {
            None => bail!("{}: exists and is not an average written by `integrate average` (no readable integration.json); choose another --out", out.display()),
            Some(e) if e["recipe"] == recipe => match damaged_output(&out, &e["outputs"]) {
                None => {
                    println!("{}: up to date (same inputs and weights)", out.display());
                    return Ok(());
                }
                // the same average, damaged since it was written (e.g. a truncated copy): made again
                Some(why) => eprintln!("note: {}: {why}; writing the average again", out.display()),
            },
            Some(_) if !force => bail!("{}: holds an average of other inputs or weights; pass --force to replace it", out.display()),
            Some(_) => {}
        }
    }
    let newest = chosen.last().unwrap();
    let carried: Vec<(String, Vec<u8>)> = if newest.is_dir() {
        CARRIED
            .iter()
            .filter(|n| newest.join(n).is_file())
            .map(|n| {
                Ok((
                    n.to_string(),
                    std::fs::read(newest.join(n))
                        .with_context(|| format!("{}: cannot read", newest.join(n).display()))?,
                ))
            })
            .collect::<Result<_>>()?
    } else {
        Vec::new()
    };
    let lock = match existing {
        Some(l) => l,
        None => output::FolderLock::acquire(&out, "integrate average")?,
    };
    let stale: Vec<PathBuf> = std::fs::read_dir(&out)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n != ".lock"))
        .collect();
    let mut set = output::FileSet::begin(&lock, &out)?;
    let t = std::time::Instant::now();
    let mut files = average::average_into_layout(&opened, &w, accumulate, &layout, &mut set, "model.safetensors")?;
    let secs = t.elapsed().as_secs_f64();
    for (name, bytes) in &carried {
        set.write(name, bytes)?;
        files.push(name.clone());
    }
    let outputs: Vec<serde_json::Value> = files
        .iter()
        .map(|f| Ok(serde_json::json!({"file": f, "sha256": crate::sha256_file(&set.staged(f))?})))
        .collect::<Result<_>>()?;
    let mut sidecar = serde_json::json!({"recipe": recipe, "outputs": outputs, "git_commit": crate::git_commit(), "host": output::provenance::host()});
    if let Some(c) = config_record {
        sidecar["config"] = c;
    }
    set.write("integration.json", serde_json::to_string_pretty(&sidecar)?.as_bytes())?;
    set.commit()?;
    // files of a replaced average that the new one does not have (e.g. other shard names)
    for p in stale {
        if !p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| files.iter().any(|f| f == n) || n == "integration.json")
        {
            let _ = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
        }
    }
    println!("{}: average of {window} checkpoints in {secs:.2} s; record {}", out.display(), record.display());
    Ok(())
}

/// mergekit's YAML configuration, for the one merge method that is a weighted average
/// (`merge_method: linear`, mergekit/merge_methods/linear.py, schema in mergekit/config.py):
///
/// ```yaml
/// models:
///   - model: ckpts/step_9000
///     parameters: {weight: 1.0}
///   - model: ckpts/step_10000
///     parameters: {weight: 1.0}
/// merge_method: linear
/// parameters: {normalize: true}   # mergekit's default
/// dtype: bfloat16                 # optional
/// out_dtype: bfloat16             # optional, defaults to dtype
/// ```
///
/// Anything else of mergekit's schema (other methods, `slices`, `modules`, `base_model`,
/// tokenizer settings, weights given as lists or filters, LoRA `model+adapter` references, Hub
/// ids) is refused, naming the file and the key, rather than ignored.
pub mod mergekit {
    use anyhow::{bail, Context, Result};
    use serde_norway::Value;
    use std::path::{Path, PathBuf};

    use crate::average::OutDtype;

    /// A linear merge as a mergekit config gives it.
    #[derive(Debug, Clone, PartialEq)]
    pub struct LinearMerge {
        /// in the order listed; the last one's config and tokenizer files are carried over
        pub models: Vec<PathBuf>,
        /// one per model, as written
        pub weights: Vec<f64>,
        /// `parameters.normalize` (mergekit's default: true): divide by the sum of the weights
        pub normalize: bool,
        /// `out_dtype`, else `dtype`
        pub out_dtype: Option<OutDtype>,
        /// which key gave `out_dtype`, for messages
        pub out_dtype_key: &'static str,
    }

    impl LinearMerge {
        /// The weights applied: w_j / sum w with `normalize` (mergekit's sum of w_j x_j divided
        /// by sum w, up to rounding), w_j as written without.
        pub fn effective_weights(&self) -> Vec<f64> {
            if self.normalize {
                let total: f64 = self.weights.iter().sum();
                self.weights.iter().map(|w| w / total).collect()
            } else {
                self.weights.clone()
            }
        }
    }

    const TOP_KEYS: &[&str] = &["models", "merge_method", "parameters", "dtype", "out_dtype"];

    fn refused_top_key(key: &str) -> String {
        match key {
            "slices" | "modules" => format!(
                "`{key}`: only a `models` list is read (a linear merge of whole checkpoints); no slices or modules"
            ),
            "base_model" => {
                "`base_model`: a linear merge takes no base model here (list it under `models` with its weight)".into()
            }
            "tokenizer_source" | "tokenizer" | "chat_template" => {
                format!("`{key}`: not read; the output's config and tokenizer files are the last listed model's")
            }
            _ => format!("`{key}`: not a key of the mergekit configs read here (only {})", TOP_KEYS.join(", ")),
        }
    }

    fn number(file: &Path, key: &str, v: &Value) -> Result<f64> {
        match v {
            Value::Number(n) => n
                .as_f64()
                .filter(|x| x.is_finite())
                .with_context(|| format!("{}: `{key}`: {n:?} is not a finite number", file.display())),
            Value::Sequence(_) => bail!(
                "{}: `{key}`: weights given as a list (a gradient over layers) are not read; give one number per model",
                file.display()
            ),
            Value::Mapping(_) => bail!(
                "{}: `{key}`: tensor-specific weights (filters) are not read; give one number per model",
                file.display()
            ),
            other => bail!("{}: `{key}`: {} is not a number", file.display(), show(other)),
        }
    }

    fn show(v: &Value) -> String {
        serde_norway::to_string(v).map(|s| s.trim().to_string()).unwrap_or_else(|_| format!("{v:?}"))
    }

    fn string<'a>(file: &Path, key: &str, v: &'a Value) -> Result<&'a str> {
        v.as_str().with_context(|| format!("{}: `{key}`: {} is not a string", file.display(), show(v)))
    }

    fn mapping<'a>(file: &Path, key: &str, v: &'a Value) -> Result<&'a serde_norway::Mapping> {
        v.as_mapping()
            .with_context(|| format!("{}: `{key}`: expected a mapping of keys, got {}", file.display(), show(v)))
    }

    fn dtype(file: &Path, key: &str, v: &Value) -> Result<OutDtype> {
        let name = string(file, key, v)?;
        OutDtype::from_name(name).with_context(|| {
            format!(
                "{}: `{key}: {name}`: not a dtype averages are written in (float32, bfloat16 or float16)",
                file.display()
            )
        })
    }

    /// Reads and checks `file`. Model paths are taken as written, relative ones from the
    /// current folder (as mergekit takes them).
    pub fn read(file: &Path) -> Result<LinearMerge> {
        let text = std::fs::read_to_string(file).with_context(|| format!("{}: cannot read", file.display()))?;
        parse(file, &text)
    }

    /// [`read`] on the text of `file`.
    pub fn parse(file: &Path, text: &str) -> Result<LinearMerge> {
        let doc: Value =
            serde_norway::from_str(text).with_context(|| format!("{}: not a valid YAML document", file.display()))?;
        let top = doc.as_mapping().with_context(|| {
            format!(
                "{}: a mergekit config is a mapping (models, merge_method, ...), got {}",
                file.display(),
                show(&doc)
            )
        })?;
        for key in top.keys() {
            let k = string(file, "(a top-level key)", key)?;
            if !TOP_KEYS.contains(&k) {
                bail!("{}: {}", file.display(), refused_top_key(k));
            }
        }
        match top.get("merge_method") {
            None => bail!("{}: `merge_method` is missing (only `linear` is read)", file.display()),
            Some(m) => {
                let m = string(file, "merge_method", m)?;
                if m != "linear" {
                    bail!("{}: `merge_method: {m}`: only `linear` (a weighted average) is read; run mergekit itself for other methods", file.display());
                }
            }
        }
        let (mut normalize, mut default_weight) = (true, None);
        if let Some(p) = top.get("parameters") {
            for (k, v) in mapping(file, "parameters", p)? {
                match string(file, "parameters (a key)", k)? {
                    "normalize" => {
                        normalize = v.as_bool().with_context(|| {
                            format!("{}: `parameters.normalize`: {} is not true or false", file.display(), show(v))
                        })?
                    }
                    "weight" => default_weight = Some(number(file, "parameters.weight", v)?),
                    other => bail!(
                        "{}: `parameters.{other}`: not a parameter of a linear merge (normalize, weight)",
                        file.display()
                    ),
                }
            }
        }
        let models = top.get("models").with_context(|| format!("{}: `models` is missing", file.display()))?;
        let models = models.as_sequence().filter(|m| !m.is_empty()).with_context(|| {
            format!("{}: `models`: expected a non-empty list of {{model, parameters}}", file.display())
        })?;
        let (mut paths, mut weights) = (Vec::new(), Vec::new());
        for (i, m) in models.iter().enumerate() {
            let at = format!("models[{i}]");
            let entry = mapping(file, &at, m)?;
            let mut weight = None;
            let mut path = None;
            for (k, v) in entry {
                match string(file, &at, k)? {
                    "model" => path = Some(string(file, &format!("{at}.model"), v)?),
                    "parameters" => {
                        for (pk, pv) in mapping(file, &format!("{at}.parameters"), v)? {
                            match string(file, &format!("{at}.parameters"), pk)? {
                                "weight" => weight = Some(number(file, &format!("{at}.parameters.weight"), pv)?),
                                other => bail!(
                                    "{}: `{at}.parameters.{other}`: not a parameter of a linear merge (only weight)",
                                    file.display()
                                ),
                            }
                        }
                    }
                    other => bail!(
                        "{}: `{at}.{other}`: not read (a model entry has `model` and `parameters`)",
                        file.display()
                    ),
                }
            }
            let path = path.with_context(|| format!("{}: `{at}.model` is missing", file.display()))?;
            let weight = weight.or(default_weight).with_context(|| {
                format!("{}: `{at}.parameters.weight` is missing (a linear merge needs a weight per model, or `parameters.weight` for all)", file.display())
            })?;
            let p = PathBuf::from(path);
            if !p.exists() {
                let why = if path.contains('+') {
                    "LoRA adapters (`model+adapter`) are not read"
                } else {
                    "no such file or folder (Hugging Face Hub ids are not downloaded: give a local checkpoint)"
                };
                bail!("{}: `{at}.model: {path}`: {why}", file.display());
            }
            paths.push(p);
            weights.push(weight);
        }
        if normalize {
            let total: f64 = weights.iter().sum();
            if total == 0.0 || !total.is_finite() {
                bail!("{}: the weights sum to {total}; with `normalize: true` (the default) they are divided by their sum", file.display());
            }
        }
        let (out_dtype, out_dtype_key) = match (top.get("out_dtype"), top.get("dtype")) {
            (Some(v), _) => (Some(dtype(file, "out_dtype", v)?), "out_dtype"),
            (None, Some(v)) => (Some(dtype(file, "dtype", v)?), "dtype"),
            (None, None) => (None, "out_dtype"),
        };
        if let (Some(_), Some(v)) = (top.get("out_dtype"), top.get("dtype")) {
            dtype(file, "dtype", v)?;
        }
        Ok(LinearMerge { models: paths, weights, normalize, out_dtype, out_dtype_key })
    }
}

/// What `integrate ensemble` is asked: the inputs (a run's eval folder, or lm-evaluation-harness
/// outputs with their step rule), the windows, the rule and the output folder.
pub struct EnsembleRequest {
    pub eval: Vec<PathBuf>,
    pub step_from: Option<String>,
    pub step_map: Option<PathBuf>,
    pub windows: Vec<usize>,
    pub rule: Rule,
    /// Default: the run's ensemble folder of the rule (required for harness inputs).
    pub out: Option<PathBuf>,
}

/// `integrate ensemble`: the ensemble of the k checkpoints ending at every step, per window,
/// each `k<K>/` written as one set with its provenance.
pub fn ensemble(req: EnsembleRequest) -> Result<()> {
    let EnsembleRequest { eval, step_from, step_map, windows, rule, out } = req;
    if windows.contains(&0) {
        bail!("--windows: window sizes must be at least 1");
    }
    // one folder with a run's tables (or nothing lm-eval wrote) is a run's eval folder
    let run_eval = match eval.as_slice() {
        [e] if e.join("examples.parquet").is_file()
            || e.join("tasks.parquet").is_file()
            || !records::harness::is_harness_output(e) =>
        {
            Some(e.clone())
        }
        _ => None,
    };
    let (rows, input) = match &run_eval {
        Some(e) => {
            let src = e.join("examples.parquet");
            let rows =
                records::read_examples(&src).with_context(|| format!("{}: run `lm eval` first", src.display()))?;
            if rows.is_empty() {
                bail!("{}: no example rows", src.display());
            }
            let sha = crate::sha256_file(&src)?;
            (rows, serde_json::json!({"input": src, "input_sha256": sha}))
        }
        None => {
            let step_rule = records::harness::StepRule::new(step_from.as_deref(), step_map.as_deref())?;
            let l = records::harness::load(&eval, &step_rule)?;
            for n in &l.notices {
                eprintln!("note: {n}");
            }
            if l.examples.is_empty() {
                bail!(
                    "{}: no per-example samples of a multiple-choice or generation task; run lm_eval with --log_samples",
                    eval.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
                );
            }
            let files: Vec<Input> = l.sources.iter().map(|f| Input::of(f)).collect::<Result<_>>()?;
            (l.examples, serde_json::json!({"inputs": files, "notices": l.notices}))
        }
    };
    let out = match (out, &run_eval) {
        (Some(o), _) => o,
        (None, Some(e)) => RunDir::of_eval(e).ensembled(rule.method()),
        (None, None) => {
            bail!("--out is required for lm-evaluation-harness inputs (nothing is written into them)")
        }
    };
    // generation tasks: the vote over their texts is the one rule for them; the mean rules leave
    // them out (a text has no distribution to average), saying so
    let text_tasks: std::collections::BTreeSet<&str> =
        rows.iter().filter(|r| r.is_generation()).map(|r| r.task.as_str()).collect();
    let text_note = if text_tasks.is_empty() {
        None
    } else if rule.ensembles_text() {
        Some(serde_json::json!({
            "tasks": text_tasks,
            "included": true,
            "rule": "vote over the members' generated texts, the rule for text: the text most members produce after normalisation (Unicode NFKC, whitespace trimmed and collapsed, case kept); ties to the highest mean char F1 (llm-jp-eval's char_f1) to the other members' texts, then to the latest member; the row is the latest member's that produced the winning text, its output, correct flag and stored scores unchanged",
        }))
    } else {
        let why = format!(
            "{} generation task(s) ({}) left out: the {} rule averages distributions over options, which generated text does not have; the vote (`--rule vote`, {}/) is the rule for text",
            text_tasks.len(),
            text_tasks.iter().copied().collect::<Vec<_>>().join(", "),
            serde_json::to_value(rule)?.as_str().unwrap_or("mean").to_lowercase(),
            run::RunDir::new("").ensembled(run::Method::EnsembleVote).display()
        );
        eprintln!("note: {why}");
        Some(serde_json::json!({"tasks": text_tasks, "included": false, "why": why}))
    };
    let lock = output::FolderLock::acquire(&out, "integrate ensemble")?;
    for k in windows {
        let e = ensemble::ensemble_rows(&rows, k, rule)?;
        if e.is_empty() {
            // e.g. only generation tasks under a mean rule: an empty table would read as a
            // variant without tasks; nothing is written
            eprintln!(
                "note: {}: nothing to ensemble by this rule (no task it applies to); nothing written",
                run::layout::window_dir(&out, k).display()
            );
            continue;
        }
        let mut set = output::FileSet::begin(&lock, &run::layout::window_dir(&out, k))?;
        records::stage_frame(&mut set, "examples.parquet", &mut records::examples_frame(&e)?)?;
        let mut tf = records::tasks_frame(&records::summarise(&e)?)?;
        records::stage_frame(&mut set, "tasks.parquet", &mut tf)?;
        records::stage_frame(&mut set, "tasks.csv", &mut tf)?;
        let mut prov =
            serde_json::json!({"method": rule.method(), "rule": rule, "k": k, "git_commit": crate::git_commit()});
        for (key, v) in input.as_object().unwrap() {
            prov[key] = v.clone();
        }
        if let Some(n) = &text_note {
            prov["generation_tasks"] = n.clone();
        }
        set.write("provenance.json", serde_json::to_string_pretty(&prov)?.as_bytes())?;
        set.commit()?;
        println!("{}: {} rows", run::layout::window_dir(&out, k).display(), e.len());
    }
    Ok(())
}
