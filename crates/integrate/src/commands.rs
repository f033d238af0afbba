//! The commands of `integrate` as library functions (its main.rs only parses and dispatches):
//! [`average`] of checkpoint folders of any size and [`ensemble`] of stored scores, of a run's
//! eval folder or of lm-evaluation-harness outputs.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

use crate::average::{self, Accumulate, Checkpoint};
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
/// with uniform, exponential (`ema`) or explicit `weights` into the folder `out`.
pub struct AverageRequest {
    pub window: usize,
    pub ema: Option<f64>,
    pub weights: Vec<f64>,
    pub accumulate: Accumulate,
    pub checkpoints: Vec<PathBuf>,
    pub out: PathBuf,
    /// Replace `out` if it holds an earlier average of other inputs or weights.
    pub force: bool,
}

/// `integrate average`: checks everything, then writes `out` as a whole (weights, the newest
/// input's model files, integration.json), or keeps it when it already holds this average.
/// Prints one line saying which.
pub fn average(req: AverageRequest) -> Result<()> {
    let AverageRequest { window, ema, weights, accumulate, checkpoints, out, force } = req;
    // everything is checked before anything is written
    if window == 0 || window > checkpoints.len() {
        bail!("--window {window} needs between 1 and {} checkpoints", checkpoints.len());
    }
    if let Some(a) = ema {
        if !(a > 0.0 && a <= 1.0) {
            bail!("--ema {a}: alpha must lie in (0, 1]");
        }
    }
    if !weights.is_empty() && weights.len() != window {
        bail!("--weights has {} values for a window of {window}", weights.len());
    }
    let chosen = &checkpoints[checkpoints.len() - window..];
    let w = match (ema, weights.is_empty()) {
        (Some(a), _) => average::exponential(window, a),
        (None, false) => weights,
        (None, true) => average::uniform(window),
    };
    if w.iter().any(|x| !(x.is_finite() && *x >= 0.0)) || (w.iter().sum::<f64>() - 1.0).abs() > 1e-9 {
        bail!("--weights must be non-negative and sum to 1, got {w:?}");
    }
    check_output_place(&out, chosen)?;
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
    let recipe = serde_json::json!({"method": if ema.is_some() { "exponential average" } else { "weighted average" }, "weights": w, "accumulate": accumulate, "inputs": inputs});
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
    let mut files = average::average_into(&opened, &w, accumulate, &mut set, "model.safetensors")?;
    let secs = t.elapsed().as_secs_f64();
    for (name, bytes) in &carried {
        set.write(name, bytes)?;
        files.push(name.clone());
    }
    let outputs: Vec<serde_json::Value> = files
        .iter()
        .map(|f| Ok(serde_json::json!({"file": f, "sha256": crate::sha256_file(&set.staged(f))?})))
        .collect::<Result<_>>()?;
    let sidecar = serde_json::json!({"recipe": recipe, "outputs": outputs, "git_commit": crate::git_commit(), "host": output::provenance::host()});
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
                    "{}: no per-example samples of a multiple-choice task; run lm_eval with --log_samples",
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
    let lock = output::FolderLock::acquire(&out, "integrate ensemble")?;
    for k in windows {
        let e = ensemble::ensemble_rows(&rows, k, rule)?;
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
        set.write("provenance.json", serde_json::to_string_pretty(&prov)?.as_bytes())?;
        set.commit()?;
        println!("{}: {} rows", run::layout::window_dir(&out, k).display(), e.len());
    }
    Ok(())
}
