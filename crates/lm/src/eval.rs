//! Downstream evaluation of every checkpoint of a run, keeping per-example records.
//!
//! `lm eval --checkpoints runs/<name>/checkpoints` scores every checkpoint on every task of
//! `data/tasks/` and writes into `runs/<name>/eval/`:
//! - `step_NNNNNN.parquet` + `step_NNNNNN.json`: one checkpoint's example rows and the key they
//!   were computed under (weights sha256, task versions, eval config, [`SCORING_VERSION`]). A
//!   checkpoint whose key matches is skipped, so a rerun only scores what is new;
//! - `examples.parquet` (all rows), `tasks.parquet` and `tasks.csv` (accuracy and standard error
//!   per step and task), `provenance.json`.

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use records::{argmax, ExampleRecord};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tasks::{Kind, Task};
use tch::{nn::VarStore, Device};

use crate::checkpoint::{self, Sidecar};
use crate::model::Gpt;
use crate::score::{score_groups, Request};
use crate::tokenize::Tok;

pub use run::config::EvalConfig;

/// Version of the scoring code, part of every cached result's key: a change of how requests are
/// encoded or scored makes every checkpoint be scored again. 1: context and continuation encoded
/// apart, empty context after "\n\n", `acc_norm` over characters with the delimiter. 2:
/// lm-evaluation-harness's `_encode_pair`, empty context after the prefix token, `acc_norm` over
/// the choice without the delimiter, byte lengths stored. 3: the options of an example scored
/// together behind their shared context (`score_groups`; equal to version 2 within float
/// rounding, so a near-tie may decide the other way: results are not mixed across versions).
pub const SCORING_VERSION: u32 = 3;

/// A task ready to score: its examples (subset, with shots) tokenized once for all checkpoints.
pub struct Prepared {
    pub name: String,
    pub kind: Kind,
    pub version: String,
    pub ids: Vec<String>,
    /// [`tasks::Example::text_hash`] of each example as the task file holds it (before shots).
    pub hashes: Vec<String>,
    pub gold: Vec<usize>,
    pub requests: Vec<Vec<Request>>,
    pub chars: Vec<Vec<u32>>,
    pub bytes: Vec<Vec<u32>>,
    /// A generation task's decoding and scoring, its prompts (shots included) and each prompt's
    /// acceptable answers (the task file's continuations); `requests` is then empty.
    pub generation: Option<tasks::GenerationSpec>,
    pub prompts: Vec<String>,
    pub targets: Vec<Vec<String>>,
}

/// Subsets, adds shots and tokenizes every task as lm-evaluation-harness does
/// ([`Tok::encode_pair`]; an empty context is scored after [`Tok::prefix_token`]).
pub fn prepare(tasks: &[Task], tok: &Tok, cfg: &EvalConfig) -> Result<Vec<Prepared>> {
    let mut out = Vec::new();
    for t in tasks {
        let cap = cfg.max_examples_per_task.get(&t.info.name).copied().unwrap_or(cfg.max_examples);
        let chosen = tasks::subsample(&t.examples, cap, cfg.seed);
        let examples = tasks::with_shots(&t.examples, &chosen, cfg.shots, cfg.seed);
        let mut p = Prepared {
            name: t.info.name.clone(),
            kind: t.info.kind,
            version: t.info.sha256.clone(),
            ids: vec![],
            hashes: vec![],
            gold: vec![],
            requests: vec![],
            chars: vec![],
            bytes: vec![],
            generation: t.info.generation.clone(),
            prompts: vec![],
            targets: vec![],
        };
        // with_shots keeps the order: `chosen[i]` is `examples[i]` without its shots
        for (e, plain) in examples.iter().zip(&chosen) {
            if t.info.kind == Kind::Generate {
                p.ids.push(e.id.clone());
                p.hashes.push(plain.text_hash());
                p.gold.push(0);
                p.prompts.push(e.choices[0].context.clone());
                p.targets.push(e.choices.iter().map(|c| c.continuation.clone()).collect());
                continue;
            }
            let (mut reqs, mut bytes) = (Vec::new(), Vec::new());
            for c in &e.choices {
                let (context, continuation, scored) = tok
                    .encode_pair(&c.context, &c.continuation)
                    .with_context(|| format!("task {} example {}", t.info.name, e.id))?;
                reqs.push(Request { context, continuation });
                bytes.push(scored.len() as u32);
            }
            p.ids.push(e.id.clone());
            p.hashes.push(plain.text_hash());
            p.gold.push(e.gold);
            p.chars.push(e.choices.iter().map(|c| records::harness::choice_chars(&c.continuation)).collect());
            p.bytes.push(bytes);
            p.requests.push(reqs);
        }
        out.push(p);
    }
    Ok(out)
}

/// The tasks an eval config's `only` names (every task when it names none); a name the manifest
/// lacks is an error that lists the manifest's names.
pub fn select(all: Vec<Task>, only: &[String], dir: &Path) -> Result<Vec<Task>> {
    if only.is_empty() {
        return Ok(all);
    }
    if let Some(missing) = only.iter().find(|n| !all.iter().any(|t| &t.info.name == *n)) {
        let names: Vec<&str> = all.iter().map(|t| t.info.name.as_str()).collect();
        bail!(
            "the eval config's `only` names task `{missing}`, which {}/manifest.json does not have (it has {}); rebuild with `just data`?",
            dir.display(),
            names.join(", ")
        );
    }
    Ok(all.into_iter().filter(|t| only.contains(&t.info.name)).collect())
}

/// Scores one model on the prepared tasks.
pub fn evaluate(
    model: &Gpt,
    tok: &Tok,
    prepared: &[Prepared],
    step: u64,
    batch_tokens: usize,
    device: Device,
) -> Result<Vec<ExampleRecord>> {
    // one group per example: its options share their context's tokens (score_groups)
    let groups: Vec<&[Request]> = prepared.iter().flat_map(|p| p.requests.iter().map(Vec::as_slice)).collect();
    let mut it = score_groups(model, &groups, batch_tokens, device)?.into_iter();
    let mut rows = Vec::new();
    for p in prepared {
        if let Some(spec) = &p.generation {
            rows.extend(generated_rows(model, tok, p, spec, step, batch_tokens, device)?);
            continue;
        }
        for (i, reqs) in p.requests.iter().enumerate() {
            let s = it.next().context("score_groups returned fewer groups than examples")?;
            let logliks: Vec<f64> = s.iter().map(|x| x.loglik).collect();
            let norm: Vec<f64> = logliks.iter().zip(&p.chars[i]).map(|(l, &c)| l / c.max(1) as f64).collect();
            let gold = p.gold[i];
            let (pred, pred_n) = (argmax(&logliks), argmax(&norm));
            let (correct, correct_n, output) = match p.kind {
                Kind::Cloze => (s[gold].greedy, s[gold].greedy, tok.decode(&s[gold].argmax)?),
                Kind::MultipleChoice | Kind::MinimalPair => (pred == gold, pred_n == gold, pred.to_string()),
                Kind::Generate => unreachable!("generation tasks are decoded, not scored"),
            };
            rows.push(ExampleRecord {
                step,
                task: p.name.clone(),
                example_id: p.ids[i].clone(),
                gold: gold as u32,
                predicted: pred as u32,
                predicted_norm: pred_n as u32,
                correct,
                correct_norm: correct_n,
                logliks,
                lengths_chars: p.chars[i].clone(),
                lengths_tokens: reqs.iter().map(|r| r.continuation.len() as u32).collect(),
                lengths_bytes: p.bytes[i].clone(),
                gold_is_greedy: s[gold].greedy,
                output,
                item_hash: p.hashes[i].clone(),
                targets: Vec::new(),
                score_names: Vec::new(),
                score_values: Vec::new(),
            });
        }
    }
    Ok(rows)
}

/// Rows of a generation task: each prompt decoded greedily ([`crate::generate`], KV cache,
/// batches of `batch_tokens / context` prompts), the answer taken from the text by the task's
/// rule, scored by lm-eval's `exact_match` (with the task's options) against the best of the
/// acceptable answers, which go through the same rule. A row holds the answer as `output`, the
/// answers as `targets`, `exact_match` as its one stored score and `correct` = exact match; the
/// analysis computes character F1 and the instability score from the texts (as for lm-eval's
/// `generate_until` samples, whose rows have the same shape).
fn generated_rows(
    model: &Gpt,
    tok: &Tok,
    p: &Prepared,
    spec: &tasks::GenerationSpec,
    step: u64,
    batch_tokens: usize,
    device: Device,
) -> Result<Vec<ExampleRecord>> {
    let options = textmatch::ExactMatchOptions {
        ignore_case: spec.ignore_case,
        ignore_punctuation: spec.ignore_punctuation,
        ignore_numbers: false,
        regexes_to_ignore: spec
            .regexes_to_ignore
            .iter()
            .map(|r| textmatch::IgnoreRegex::new(r))
            .collect::<Result<_, _>>()
            .with_context(|| format!("task {}: a regex to ignore", p.name))?,
    };
    let opts = crate::generate::Options {
        max_new_tokens: spec.max_new_tokens,
        until: spec.until.clone(),
        batch_size: (batch_tokens / model.config.context as usize).clamp(1, 64),
        cache: true,
    };
    let generated = crate::generate::generate(model, tok, &p.prompts, &opts, device)
        .with_context(|| format!("task {}: decoding", p.name))?;
    let mut rows = Vec::with_capacity(generated.len());
    for (i, g) in generated.iter().enumerate() {
        let answer = spec.answer.of(&g.text);
        let golds: Vec<String> = p.targets[i].iter().map(|t| spec.answer.of(t)).collect();
        let em = textmatch::exact_match_multi_target(&answer, &golds, &options)
            .with_context(|| format!("task {} example {}: exact match", p.name, p.ids[i]))?;
        let correct = em >= 1.0;
        rows.push(ExampleRecord {
            step,
            task: p.name.clone(),
            example_id: p.ids[i].clone(),
            correct,
            correct_norm: correct,
            gold_is_greedy: correct,
            output: answer,
            item_hash: p.hashes[i].clone(),
            targets: golds,
            score_names: vec!["exact_match".into()],
            score_values: vec![em],
            ..Default::default()
        });
    }
    Ok(rows)
}

/// The key a checkpoint's results were computed under.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct ResultKey {
    step: u64,
    weights_sha256: String,
    eval_config_hash: String,
    task_versions: Vec<(String, String)>,
    /// absent in keys written before it existed (version 1)
    #[serde(default = "scoring_v1")]
    scoring_version: u32,
}

fn scoring_v1() -> u32 {
    1
}

#[derive(Debug, Clone)]
pub struct EvalSummary {
    pub checkpoints: usize,
    pub scored: usize,
    pub skipped: usize,
    pub examples_per_checkpoint: usize,
    pub scoring_s: f64,
    pub out: PathBuf,
}

/// Finds the tokenizer a checkpoint's config names: as given, then relative to each folder above
/// the checkpoint folder (configs name it relative to the repository root, and runs live below it).
pub fn resolve_tokenizer(named: &Path, ckpt_dir: &Path) -> Result<PathBuf> {
    if named.is_file() || named.is_absolute() {
        return Ok(named.to_path_buf());
    }
    let start = ckpt_dir.canonicalize().unwrap_or_else(|_| ckpt_dir.to_path_buf());
    for dir in start.ancestors() {
        let p = dir.join(named);
        if p.is_file() {
            return Ok(p);
        }
    }
    bail!(
        "{}: tokenizer not found, neither from the working folder nor above {}; pass --tokenizer",
        named.display(),
        ckpt_dir.display()
    )
}

/// Cached example rows of one checkpoint, if they were computed under `key` and still read.
/// Rows cached before tables carried `item_hash` (table version 2) get the hashes of `prepared`:
/// the key matched, so they scored exactly those examples (same task files, same subset and
/// shots); the scores do not change, so nothing is scored again for it.
fn cached_rows(
    rows_path: &Path,
    key_path: &Path,
    key: &ResultKey,
    prepared: &[Prepared],
) -> Option<Vec<ExampleRecord>> {
    let text = std::fs::read_to_string(key_path).ok()?;
    if serde_json::from_str::<ResultKey>(&text).ok()? != *key || !rows_path.is_file() {
        return None;
    }
    match records::read_examples(rows_path) {
        Ok(mut rows) => {
            fill_hashes(&mut rows, prepared);
            Some(rows)
        }
        Err(e) => {
            eprintln!("warning: scoring again: {e:#}");
            None
        }
    }
}

/// Sets the empty `item_hash` of rows to their example's hash in `prepared` (by task and id);
/// rows with a hash, or of an example not prepared, are left as they are.
fn fill_hashes(rows: &mut [ExampleRecord], prepared: &[Prepared]) {
    let known: std::collections::HashMap<(&str, &str), &str> = prepared
        .iter()
        .flat_map(|p| p.ids.iter().zip(&p.hashes).map(move |(id, h)| ((p.name.as_str(), id.as_str()), h.as_str())))
        .collect();
    for r in rows.iter_mut().filter(|r| r.item_hash.is_empty()) {
        if let Some(h) = known.get(&(r.task.as_str(), r.example_id.as_str())) {
            r.item_hash = h.to_string();
        }
    }
}

/// Evaluates every checkpoint (sidecar) in `ckpt_dir`, writing into `out_dir` (locked for the
/// run: a second writer is refused). `tokenizer` overrides the path the checkpoints' config names.
pub fn run(
    ckpt_dir: &Path,
    cfg: &EvalConfig,
    out_dir: &Path,
    tokenizer: Option<&Path>,
    quiet: bool,
) -> Result<EvalSummary> {
    let mut ckpts = checkpoint::list(ckpt_dir)?;
    if ckpts.is_empty() {
        bail!("{}: no checkpoints (step_*.json) found", ckpt_dir.display());
    }
    // the run config's schedule names the checkpoints worth scoring (all, without one)
    let saved = ckpts.len();
    ckpts.retain(|(_, m)| m.config.eval.is_none() || m.config.eval_steps().contains(&m.step));
    if ckpts.is_empty() {
        bail!("{}: none of the {saved} checkpoints is in the run config's [eval] schedule (`lm schedule --config` lists it)", ckpt_dir.display());
    }
    if ckpts.len() < saved && !quiet {
        eprintln!("scoring {} of {saved} checkpoints (the run config's [eval] schedule)", ckpts.len());
    }
    let first: &Sidecar = &ckpts[0].1;
    let tok_path = match tokenizer {
        Some(p) => p.to_path_buf(),
        None => resolve_tokenizer(&first.config.data.tokenizer, ckpt_dir)?,
    };
    let tok = Tok::load(&tok_path)?;
    let all_tasks = select(tasks::load_all(&cfg.tasks)?, &cfg.only, &cfg.tasks)?;
    let prepared = prepare(&all_tasks, &tok, cfg)?;
    let task_versions: Vec<(String, String)> = prepared.iter().map(|p| (p.name.clone(), p.version.clone())).collect();
    let n_examples: usize = prepared.iter().map(|p| p.ids.len()).sum();
    let lock = output::FolderLock::acquire(out_dir, "lm eval")?;
    let device = Device::cuda_if_available();
    let bar = if quiet { ProgressBar::hidden() } else { ProgressBar::new(ckpts.len() as u64) };
    bar.set_style(
        ProgressStyle::with_template("eval [{bar:30}] {pos}/{len} checkpoints {msg} ETA {eta}")
            .unwrap()
            .progress_chars("=> "),
    );
    let (mut scored, mut skipped, mut scoring_s) = (0, 0, 0.0);
    let mut all_rows = Vec::new();
    for (path, meta) in &ckpts {
        let stem = checkpoint::stem(meta.step);
        let key = ResultKey {
            step: meta.step,
            weights_sha256: meta.weights_sha256.clone(),
            eval_config_hash: cfg.hash(),
            task_versions: task_versions.clone(),
            scoring_version: SCORING_VERSION,
        };
        let (rows_path, key_path) = (out_dir.join(format!("{stem}.parquet")), out_dir.join(format!("{stem}.json")));
        let rows = if let Some(rows) = cached_rows(&rows_path, &key_path, &key, &prepared) {
            skipped += 1;
            rows
        } else {
            if meta.config.data.vocab_size != first.config.data.vocab_size || meta.tokenizer_sha256 != tok.sha256 {
                bail!("{}: checkpoints in {} use different tokenizers", path.display(), ckpt_dir.display());
            }
            let mut vs = VarStore::new(device);
            let model = Gpt::new(&vs.root(), &meta.config.model, meta.config.data.vocab_size);
            checkpoint::load(path, &mut vs, &tok.sha256)?;
            let t = std::time::Instant::now();
            let rows = evaluate(&model, &tok, &prepared, meta.step, cfg.batch_tokens, device)?;
            scoring_s += t.elapsed().as_secs_f64();
            records::summarise(&rows).with_context(|| format!("{}", path.display()))?;
            // the key goes last: rows without their key are scored again
            let _ = std::fs::remove_file(&key_path);
            records::write_frame(&rows_path, &mut records::examples_frame(&rows)?)?;
            output::write_atomic(&key_path, serde_json::to_string_pretty(&key)?.as_bytes())?;
            scored += 1;
            rows
        };
        all_rows.extend(rows);
        bar.set_message(format!("step {}", meta.step));
        bar.inc(1);
    }
    bar.finish();
    let summary = records::summarise(&all_rows)?;
    let mut set = output::FileSet::begin(&lock, out_dir)?;
    records::stage_frame(&mut set, "examples.parquet", &mut records::examples_frame(&all_rows)?)?;
    let mut tf = records::tasks_frame(&summary)?;
    records::stage_frame(&mut set, "tasks.parquet", &mut tf)?;
    records::stage_frame(&mut set, "tasks.csv", &mut tf)?;
    let provenance = run::provenance::EvalProvenance {
        checkpoints: ckpt_dir.to_path_buf(),
        eval_config: cfg.clone(),
        eval_config_hash: cfg.hash(),
        tasks: task_versions,
        tokenizer_sha256: tok.sha256.clone(),
        scoring_version: Some(SCORING_VERSION),
        git_commit: output::provenance::git_commit(),
        host: output::provenance::host(),
        weights: ckpts.iter().map(|(_, m)| (m.step, m.weights_sha256.clone())).collect(),
    };
    // through a Value: keys sorted, as every provenance.json is written
    set.write("provenance.json", serde_json::to_string_pretty(&serde_json::to_value(&provenance)?)?.as_bytes())?;
    set.commit()?;
    drop(lock);
    Ok(EvalSummary {
        checkpoints: ckpts.len(),
        scored,
        skipped,
        examples_per_checkpoint: n_examples,
        scoring_s,
        out: out_dir.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelConfig;
    use tch::nn;

    fn moby_tokenizer(dir: &Path) -> Tok {
        let text =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/moby_dick_excerpt.txt"))
                .unwrap();
        std::fs::write(dir.join("t.txt"), &text).unwrap();
        crate::tokenize::train(&dir.join("t.txt"), 300, &dir.join("tok.json")).unwrap()
    }

    /// Requests are encoded as lm-evaluation-harness's `_encode_pair`: a context's trailing
    /// whitespace moves to the continuation, whose tokens are the tail of the joint encoding;
    /// an empty context is the prefix token. Checked against the joint encoding by hand.
    #[test]
    fn pairs_are_encoded_as_lm_eval_encodes_them() {
        let dir = tempfile::tempdir().unwrap();
        let tok = moby_tokenizer(dir.path());
        let (ctx, cont, scored) = tok.encode_pair("Call me Ishmael. Some years ", "ago").unwrap();
        assert_eq!(scored, " ago");
        assert_eq!(ctx, tok.encode("Call me Ishmael. Some years").unwrap());
        let whole = tok.encode("Call me Ishmael. Some years ago").unwrap();
        assert_eq!([ctx.clone(), cont.clone()].concat(), whole);
        // joint encoding may merge across the boundary; the continuation is still the tail
        let (c2, t2, _) = tok.encode_pair("the wh", "ale of the sea").unwrap();
        let w2 = tok.encode("the whale of the sea").unwrap();
        assert_eq!(t2, w2[c2.len()..].to_vec());
        let (c3, t3, s3) = tok.encode_pair("", " The sea.").unwrap();
        assert_eq!(
            (c3, t3, s3.as_str()),
            (vec![tok.prefix_token().unwrap()], tok.encode(" The sea.").unwrap(), " The sea.")
        );
        assert_eq!(tok.decode(&[tok.prefix_token().unwrap()]).unwrap(), "\n");
    }

    /// A generation task's rows: the model's greedy continuation (as `lm generate` decodes it)
    /// cut to the task's answer, exact match against the best answer under the task's options
    /// (here case ignored), the answers as targets, exact match the one stored score.
    #[test]
    fn generation_tasks_store_the_answer_its_targets_and_exact_match() {
        let dir = tempfile::tempdir().unwrap();
        let tok = moby_tokenizer(dir.path());
        tch::manual_seed(3);
        let vs = nn::VarStore::new(Device::Cpu);
        let c = ModelConfig {
            d_model: 32,
            n_layers: 1,
            n_heads: 4,
            d_ff: 64,
            context: 64,
            rope_theta: 1e4,
            norm_eps: 1e-5,
            init_std: 0.3,
            dropout: 0.0,
        };
        let model = Gpt::new(&vs.root(), &c, tok.vocab_size());
        let spec = tasks::GenerationSpec {
            until: vec![],
            max_new_tokens: 6,
            answer: tasks::Answer::FirstWord,
            ignore_case: true,
            ignore_punctuation: false,
            regexes_to_ignore: vec![],
        };
        let prompts = ["Call me", "The whale", "Some years ago"];
        let opts = crate::generate::Options { max_new_tokens: 6, until: vec![], batch_size: 1, cache: true };
        let alone = crate::generate::generate(&model, &tok, &prompts.map(String::from), &opts, Device::Cpu).unwrap();
        let words: Vec<String> = alone.iter().map(|g| tasks::Answer::FirstWord.of(&g.text)).collect();
        assert!(
            words.iter().all(|w| !w.is_empty()),
            "the seeded model starts every continuation with a word: {words:?}"
        );
        // example 0: its own word in upper case among two answers (right, case ignored);
        // example 1: a word it did not say (wrong); example 2: its word with trailing punctuation
        let answers = [
            vec![" nothing".to_string(), format!(" {}", words[0].to_uppercase())],
            vec![format!(" {}zz", words[1])],
            vec![format!(" {}.", words[2])],
        ];
        let examples: Vec<tasks::Example> = prompts
            .iter()
            .zip(&answers)
            .enumerate()
            .map(|(i, (p, a))| tasks::Example {
                id: format!("g/{i}"),
                choices: a.iter().map(|a| tasks::Choice { context: p.to_string(), continuation: a.clone() }).collect(),
                gold: 0,
            })
            .collect();
        let info = tasks::TaskInfo {
            name: "g".into(),
            kind: Kind::Generate,
            file: "g.jsonl".into(),
            sha256: "0".repeat(64),
            examples: 3,
            chance: 0.0,
            source: String::new(),
            license: String::new(),
            generation: Some(spec),
        };
        let cfg = EvalConfig {
            tasks: dir.path().into(),
            seed: 0,
            shots: 0,
            max_examples: 10,
            max_examples_per_task: Default::default(),
            batch_tokens: 128, // two prompts a batch: batching changes no text
            only: vec![],
        };
        let hashes: Vec<String> = examples.iter().map(|e| e.text_hash()).collect();
        let prepared = prepare(&[Task { info, examples }], &tok, &cfg).unwrap();
        let mut rows = evaluate(&model, &tok, &prepared, 7, cfg.batch_tokens, Device::Cpu).unwrap();
        rows.sort_by(|a, b| a.example_id.cmp(&b.example_id));
        let outputs: Vec<&str> = rows.iter().map(|r| r.output.as_str()).collect();
        assert_eq!(outputs, words.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(rows.iter().map(|r| r.correct).collect::<Vec<_>>(), [true, false, true]);
        assert_eq!(rows[0].targets, vec!["nothing".to_string(), words[0].to_uppercase()]);
        for (r, h) in rows.iter().zip(&hashes) {
            assert!(r.is_generation() && r.logliks.is_empty() && r.step == 7 && &r.item_hash == h);
            assert_eq!(
                (r.score_names.as_slice(), r.score_values[0]),
                (&["exact_match".to_string()][..], f64::from(u8::from(r.correct)))
            );
            assert_eq!((r.correct_norm, r.gold_is_greedy), (r.correct, r.correct));
        }
        // a task the config's `only` does not name is not scored; an unknown name is an error
        let named = |only: &[&str]| select(vec![], &only.iter().map(|s| s.to_string()).collect::<Vec<_>>(), dir.path());
        assert!(named(&[]).unwrap().is_empty());
        let e = format!("{:#}", named(&["nope"]).unwrap_err());
        assert!(e.contains("`only` names task `nope`"), "{e}");
    }

    /// acc uses summed log-likelihoods, acc_norm divides each by its option's length in
    /// characters (lm-evaluation-harness's `acc_norm`), and both come from the same scores.
    #[test]
    fn acc_norm_divides_by_the_option_length_in_characters() {
        let dir = tempfile::tempdir().unwrap();
        let text =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/moby_dick_excerpt.txt"))
                .unwrap();
        std::fs::write(dir.path().join("t.txt"), &text).unwrap();
        let tok = crate::tokenize::train(&dir.path().join("t.txt"), 300, &dir.path().join("tok.json")).unwrap();
        tch::manual_seed(1);
        let vs = nn::VarStore::new(Device::Cpu);
        let c = ModelConfig {
            d_model: 32,
            n_layers: 1,
            n_heads: 4,
            d_ff: 64,
            context: 32,
            rope_theta: 1e4,
            norm_eps: 1e-5,
            init_std: 0.3,
            dropout: 0.0,
        };
        let model = Gpt::new(&vs.root(), &c, tok.vocab_size());
        let options = [" the whale", " a long and winding sentence about the sea", " ship"];
        let ex = tasks::Example {
            id: "t/0".into(),
            choices: options
                .iter()
                .map(|o| tasks::Choice { context: "Call me".into(), continuation: o.to_string() })
                .collect(),
            gold: 1,
        };
        let info = tasks::TaskInfo {
            name: "t".into(),
            kind: Kind::MultipleChoice,
            file: "t.jsonl".into(),
            sha256: "0".repeat(64),
            examples: 1,
            chance: 1.0 / 3.0,
            source: String::new(),
            license: String::new(),
            generation: None,
        };
        let cfg = EvalConfig {
            tasks: dir.path().into(),
            seed: 0,
            shots: 0,
            max_examples: 10,
            max_examples_per_task: Default::default(),
            batch_tokens: 256,
            only: vec![],
        };
        let hash = ex.text_hash();
        let prepared = prepare(&[Task { info, examples: vec![ex] }], &tok, &cfg).unwrap();
        let rows = evaluate(&model, &tok, &prepared, 5, 256, Device::Cpu).unwrap();
        let r = &rows[0];
        assert_eq!(r.item_hash, hash, "rows carry the identity of the example's text");
        // rows cached by a build before table version 3 (no hash) get it; others keep theirs
        let mut cached = vec![
            ExampleRecord { item_hash: String::new(), ..r.clone() },
            ExampleRecord { item_hash: "f".repeat(64), ..r.clone() },
            ExampleRecord { item_hash: String::new(), example_id: "t/unknown".into(), ..r.clone() },
        ];
        fill_hashes(&mut cached, &prepared);
        let filled: Vec<&str> = cached.iter().map(|c| c.item_hash.as_str()).collect();
        assert_eq!(filled, vec![hash.as_str(), &"f".repeat(64), ""]);
        // lm-eval's acc_norm length: the choice without its leading delimiter; bytes with it
        assert_eq!(r.lengths_chars, options.iter().map(|o| o.chars().count() as u32 - 1).collect::<Vec<_>>());
        assert_eq!(r.lengths_bytes, options.iter().map(|o| o.len() as u32).collect::<Vec<_>>());
        let norm: Vec<f64> = r.logliks.iter().zip(&r.lengths_chars).map(|(l, &n)| l / n as f64).collect();
        assert_eq!(r.predicted as usize, argmax(&r.logliks));
        assert_eq!(r.predicted_norm as usize, argmax(&norm));
        assert_eq!((r.correct, r.correct_norm), (r.predicted == 1, r.predicted_norm == 1));
        // the long option has the lowest summed log-likelihood but not the lowest per character
        assert_eq!(argmax(&r.logliks.iter().map(|v| -v).collect::<Vec<_>>()), 1);
    }
}
