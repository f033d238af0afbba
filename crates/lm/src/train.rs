//! The pretraining loop: tokens in, a dense trail of checkpoints out.
//!
//! Batch `s` is drawn from `(data_seed, s)` alone and libtorch is reseeded (from `init_seed`)
//! at every step, so a run
//! killed after any checkpoint and resumed from it continues exactly as if never stopped.
//! `runs/<name>/` holds `config.toml`, `train_log.csv` (loss per step, validation loss per
//! checkpoint) and `checkpoints/`.

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tch::{nn::VarStore, Device, Kind, Tensor};

use crate::checkpoint::{self, Sidecar};
use crate::config::Config;
use crate::model::Gpt;
use crate::optim::AdamW;
use crate::tokenize::{self, Tok};
use output::provenance::git_commit;

/// Token streams of the training and validation splits.
pub struct TokenData {
    pub train: Vec<u16>,
    pub val: Vec<u16>,
}

/// libtorch has one random generator per process, so a seed followed by draws is reproducible
/// only if no other thread draws in between (cargo runs tests in parallel threads: two trainings
/// in one process interleaved their weight inits). Every seeded draw of training holds this lock.
static TORCH_RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Holds libtorch's generator: other code of a training process that draws from it (a model
/// built only to load weights into) takes this first.
pub fn rng_lock() -> std::sync::MutexGuard<'static, ()> {
    TORCH_RNG.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` with libtorch's generator seeded to `seed`, no other seeded draw interleaving.
fn seeded<T>(seed: i64, f: impl FnOnce() -> T) -> T {
    let _rng = rng_lock();
    tch::manual_seed(seed);
    f()
}

/// SplitMix64: a tiny, well-mixed hash, enough to place batch windows reproducibly.
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn windows(tokens: &[u16], starts: &[usize], t: usize, device: Device) -> (Tensor, Tensor) {
    let mut x = Vec::with_capacity(starts.len() * t);
    let mut y = Vec::with_capacity(starts.len() * t);
    for &s in starts {
        x.extend(tokens[s..s + t].iter().map(|&v| v as i64));
        y.extend(tokens[s + 1..s + t + 1].iter().map(|&v| v as i64));
    }
    let shape = [starts.len() as i64, t as i64];
    (Tensor::from_slice(&x).view(shape).to(device), Tensor::from_slice(&y).view(shape).to(device))
}

impl TokenData {
    /// Loads (encoding once, then from cache) the splits named by the config.
    pub fn load(cfg: &Config, tok: &Tok) -> Result<TokenData> {
        let train = tok.encode_file_cached(&cfg.data.corpus.join("train.txt"))?;
        let val = tok.encode_file_cached(&cfg.data.corpus.join("validation.txt"))?;
        let need = cfg.model.context as usize + 2;
        if train.len() < need || val.len() < need {
            bail!("{}: corpus splits are shorter than one context window", cfg.data.corpus.display());
        }
        Ok(TokenData { train, val })
    }

    /// The training batch of step `step`: `batch_size` windows at positions hashed from (data seed, step).
    pub fn batch(&self, cfg: &Config, step: u64, device: Device) -> (Tensor, Tensor) {
        let t = cfg.model.context as usize;
        let span = (self.train.len() - t - 1) as u64;
        let starts: Vec<usize> = (0..cfg.train.batch_size as u64)
            .map(|i| (splitmix64(cfg.data_seed() ^ splitmix64(step.wrapping_mul(1 << 20) + i)) % span) as usize)
            .collect();
        windows(&self.train, &starts, t, device)
    }

    /// Mean validation loss over `val_windows` fixed windows spread evenly over the split.
    pub fn val_loss(&self, cfg: &Config, model: &Gpt, device: Device) -> f64 {
        let t = cfg.model.context as usize;
        let n = cfg.train.val_windows.max(1) as usize;
        let stride = ((self.val.len() - t - 1) / n).max(1);
        let starts: Vec<usize> = (0..n).map(|i| (i * stride).min(self.val.len() - t - 1)).collect();
        self.mean_val_loss(&starts, t, model, device)
    }

    /// Mean validation loss per token over the whole validation split, in non-overlapping
    /// windows of `context` tokens (the tail shorter than a window is left out).
    pub fn val_loss_full(&self, cfg: &Config, model: &Gpt, device: Device) -> f64 {
        let t = cfg.model.context as usize;
        let starts: Vec<usize> = (0..(self.val.len() - 1) / t).map(|i| i * t).collect();
        self.mean_val_loss(&starts, t, model, device)
    }

    /// Mean loss of the validation windows of `t` tokens at `starts`, 16 windows per batch.
    fn mean_val_loss(&self, starts: &[usize], t: usize, model: &Gpt, device: Device) -> f64 {
        tch::no_grad(|| {
            let mut total = 0.0;
            for chunk in starts.chunks(16) {
                let (x, y) = windows(&self.val, chunk, t, device);
                total += f64::try_from(model.loss(&x, &y, false)).unwrap() * chunk.len() as f64;
            }
            total / starts.len() as f64
        })
    }
}

/// Loads the config's tokenizer, training it first if the file does not exist yet, and checks
/// that its vocabulary matches the model's.
pub fn tokenizer_for(cfg: &Config) -> Result<Tok> {
    let tok = if cfg.data.tokenizer.is_file() {
        Tok::load(&cfg.data.tokenizer)?
    } else {
        eprintln!("training tokenizer {} (vocab {})", cfg.data.tokenizer.display(), cfg.data.vocab_size);
        tokenize::train(&cfg.data.corpus.join("train.txt"), cfg.data.vocab_size as usize, &cfg.data.tokenizer)?
    };
    if tok.vocab_size() != cfg.data.vocab_size {
        bail!(
            "{}: vocab size {} differs from the config's {}",
            tok.path.display(),
            tok.vocab_size(),
            cfg.data.vocab_size
        );
    }
    Ok(tok)
}

#[derive(Debug, Clone, Default)]
pub struct TrainOptions {
    /// Stop after this step even if the config asks for more (used to test resumption).
    pub stop_after: Option<u64>,
    /// No progress bar.
    pub quiet: bool,
    /// Move an existing run folder aside (`<run>.old-<n>`) and start again from step 0.
    pub restart: bool,
}

#[derive(Debug, Clone)]
pub struct TrainSummary {
    pub resumed_from: Option<u64>,
    pub last_step: u64,
    pub first_val_loss: f64,
    pub last_val_loss: f64,
    pub steps_run: u64,
    pub wall_s: f64,
    pub tokens_per_s: f64,
    pub n_params: i64,
}

/// Newest checkpoint whose sidecar, weights and optimizer state all verify, loaded into `vs` and
/// `opt`; `None` only if the folder has no checkpoint at all. Checkpoints that do not verify are
/// skipped with a warning (never deleted); if some exist but none verifies, training refuses to
/// start, since starting at step 0 would overwrite them.
fn resume_point(ckpt_dir: &Path, vs: &mut VarStore, opt: &mut AdamW, tok: &Tok) -> Result<Option<Sidecar>> {
    let all = checkpoint::list_all(ckpt_dir)?;
    let mut candidates = Vec::new();
    let mut problems = Vec::new();
    for (path, meta) in all {
        match meta {
            Ok(m) => candidates.push((path, m)),
            Err(e) => problems.push(format!("{e:#}")),
        }
    }
    candidates.sort_by_key(|(_, m)| m.step);
    for (path, meta) in candidates.into_iter().rev() {
        if meta.optimizer_file.is_none() {
            continue; // pruned: only the newest two checkpoints keep optimizer state
        }
        let verified = checkpoint::verify(&path, vs, &tok.sha256)
            .and_then(|(m, w)| Ok((m.clone(), w, checkpoint::verify_optimizer(&path, &m)?)));
        match verified.and_then(|(m, w, state)| {
            opt.load_state(state)
                .with_context(|| format!("{}: optimizer state does not fit the model", path.display()))?;
            w.apply();
            Ok(m)
        }) {
            Ok(m) => {
                for p in &problems {
                    eprintln!("warning: skipped a checkpoint that does not verify: {p}");
                }
                return Ok(Some(m));
            }
            Err(e) => problems.push(format!("{e:#}")),
        }
    }
    // weights without a sidecar are an interrupted save, which never counts as a checkpoint
    let sidecars = checkpoint::list_all(ckpt_dir)?.len();
    if sidecars > 0 {
        bail!(
            "{}: has {sidecars} checkpoint(s) but none to resume from (weights, optimizer state and sidecar must all verify):\n  {}\nStarting at step 0 would overwrite them. Restore the files, or pass --restart to move this run aside and start again",
            ckpt_dir.display(),
            if problems.is_empty() { "no checkpoint keeps optimizer state".to_string() } else { problems.join("\n  ") }
        );
    }
    Ok(None)
}

/// Moves a run folder aside to `<run>.old-<n>` (the first free n), never deleting anything.
fn move_aside(run_dir: &Path) -> Result<PathBuf> {
    let name = run_dir.file_name().and_then(|n| n.to_str()).context("run folder has no name")?;
    let aside = (1..).map(|n| run_dir.with_file_name(format!("{name}.old-{n}"))).find(|p| !p.exists()).unwrap();
    std::fs::rename(run_dir, &aside)
        .with_context(|| format!("{}: cannot move aside to {}", run_dir.display(), aside.display()))?;
    Ok(aside)
}

/// Keeps the training log consistent with the step we resume from: rows after it are dropped.
fn open_log(path: &Path, resumed: Option<u64>) -> Result<std::fs::File> {
    let header = "step,tokens,lr,train_loss,grad_norm,val_loss,val_loss_full\n";
    let mut kept = String::from(header);
    if let (Some(step), Ok(old)) = (resumed, std::fs::read_to_string(path)) {
        for line in old.lines().skip(1) {
            if line.split(',').next().and_then(|s| s.parse::<u64>().ok()).is_some_and(|s| s <= step) {
                kept.push_str(line);
                kept.push('\n');
            }
        }
    }
    output::write_atomic(path, kept.as_bytes())?;
    std::fs::OpenOptions::new().append(true).open(path).with_context(|| format!("{}: cannot append", path.display()))
}

/// Trains `cfg` in `run_dir`, resuming from the newest good checkpoint there. The run folder is
/// locked for the whole run: a second writer is refused.
pub fn train(cfg: &Config, run_dir: &Path, opts: &TrainOptions) -> Result<TrainSummary> {
    let tok = tokenizer_for(cfg)?;
    let data = TokenData::load(cfg, &tok)?;
    let mut lock = output::FolderLock::acquire(run_dir, "lm train")?;
    if opts.restart
        && std::fs::read_dir(run_dir).map(|d| d.flatten().any(|e| e.file_name() != ".lock")).unwrap_or(false)
    {
        let aside = move_aside(run_dir)?;
        let _ = std::fs::remove_file(aside.join(".lock"));
        eprintln!("moved the previous run aside to {}", aside.display());
        drop(lock);
        lock = output::FolderLock::acquire(run_dir, "lm train")?;
    }
    let cfg_path = run_dir.join("config.toml");
    if cfg_path.is_file() {
        let existing = Config::load(&cfg_path)?;
        if existing != *cfg {
            bail!("{}: this run was started with another config (hash {}); use another --out, or --restart to move this run aside", cfg_path.display(), &existing.hash()[..12]);
        }
    } else {
        output::write_atomic(&cfg_path, toml::to_string(cfg)?.as_bytes())?;
    }
    let ckpt_dir = run::RunDir::new(run_dir).checkpoints();
    let device = Device::cuda_if_available();
    let mut vs = VarStore::new(device);
    let mut model = seeded(cfg.init_seed() as i64, || Gpt::new(&vs.root(), &cfg.model, cfg.data.vocab_size));
    model.set_train_compute(crate::model::precision_kind(cfg.train.precision));
    let t = &cfg.train;
    let mut opt = AdamW::new(&vs, t.beta1, t.beta2, t.eps, t.weight_decay);
    let resumed = resume_point(&ckpt_dir, &mut vs, &mut opt, &tok)?;
    let start = resumed.as_ref().map_or(0, |m| m.step);
    let mut log = open_log(&run_dir.join("train_log.csv"), resumed.as_ref().map(|m| m.step))?;
    let tokens_per_step = (t.batch_size * cfg.model.context) as u64;
    let commit = git_commit();
    // the whole validation split is scored at the checkpoints `lm eval` scores (a schedule
    // exists from config version 2); elsewhere the `val_windows` sample stands in
    let scheduled = cfg.eval.as_ref().map(|_| cfg.eval_steps());
    let full_val = |step: u64, model: &Gpt| {
        scheduled.as_ref().filter(|s| s.contains(&step)).map(|_| data.val_loss_full(cfg, model, device))
    };
    let meta = |step: u64, train_loss: Option<f64>, val_loss: f64, val_loss_full: Option<f64>, lr: f64| Sidecar {
        step,
        tokens_seen: step * tokens_per_step,
        train_loss,
        val_loss,
        val_loss_full,
        lr,
        seed: cfg.init_seed(),
        config_hash: cfg.hash(),
        tokenizer_sha256: tok.sha256.clone(),
        weights_file: String::new(),
        weights_sha256: String::new(),
        optimizer_file: None,
        optimizer_sha256: None,
        schema_version: checkpoint::SIDECAR_VERSION,
        git_commit: commit.clone(),
        config: cfg.clone(),
        integration: None,
    };
    let first_val = data.val_loss(cfg, &model, device);
    if resumed.is_none() {
        let full = full_val(0, &model);
        checkpoint::save(&ckpt_dir, &vs, Some(opt.named_state()), meta(0, None, first_val, full, 0.0))?;
        writeln!(log, "0,0,0,,,{first_val},{}", full.map_or(String::new(), |v| v.to_string()))?;
    }
    let end = opts.stop_after.map_or(t.steps, |s| s.min(t.steps));
    let bar = if opts.quiet { ProgressBar::hidden() } else { ProgressBar::new(t.steps) };
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} steps {msg} ETA {eta}")
            .unwrap()
            .progress_chars("=> "),
    );
    bar.set_prefix(cfg.name.clone());
    bar.set_position(start);
    let began = Instant::now();
    let (mut loss_sum, mut loss_n, mut last_val) = (0.0, 0u64, first_val);
    for step in start..end {
        let lr = cfg.lr_at(step);
        let (x, y) = data.batch(cfg, step, device);
        // the step's dropout masks are drawn in the forward pass
        let loss = seeded((cfg.init_seed() ^ splitmix64(step)) as i64 & i64::MAX, || model.loss(&x, &y, true));
        loss.backward();
        let grad_norm = opt.clip_grad_norm(t.grad_clip);
        opt.step(lr);
        let loss = f64::try_from(loss.to_kind(Kind::Double))?;
        if !loss.is_finite() {
            bail!("training diverged at step {}: loss {loss}", step + 1);
        }
        loss_sum += loss;
        loss_n += 1;
        let done = step + 1;
        let at_checkpoint = done % t.checkpoint_every == 0 || done == t.steps;
        let val = if at_checkpoint { Some(data.val_loss(cfg, &model, device)) } else { None };
        let full = if at_checkpoint { full_val(done, &model) } else { None };
        let show = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
        writeln!(log, "{done},{},{lr},{loss},{grad_norm},{},{}", done * tokens_per_step, show(val), show(full))?;
        if let Some(v) = val {
            log.flush()?;
            checkpoint::save(
                &ckpt_dir,
                &vs,
                Some(opt.named_state()),
                meta(done, Some(loss_sum / loss_n as f64), v, full, lr),
            )?;
            prune_optimizer_state(&ckpt_dir, 2)?;
            (loss_sum, loss_n, last_val) = (0.0, 0, v);
        }
        let secs = began.elapsed().as_secs_f64();
        bar.set_message(format!(
            "loss {loss:.3} val {last_val:.3} {:.0} tok/s",
            (done - start) as f64 * tokens_per_step as f64 / secs
        ));
        bar.inc(1);
    }
    bar.finish();
    // a run killed after its last checkpoint was saved but before the prune resumes with nothing
    // left to train: prune here too, so a resumed run ends with the files an uninterrupted one has
    prune_optimizer_state(&ckpt_dir, 2)?;
    drop(lock);
    let wall_s = began.elapsed().as_secs_f64();
    let steps_run = end.saturating_sub(start);
    Ok(TrainSummary {
        resumed_from: resumed.map(|m| m.step),
        last_step: end.max(start),
        first_val_loss: first_val,
        last_val_loss: last_val,
        steps_run,
        wall_s,
        tokens_per_s: (steps_run * tokens_per_step) as f64 / wall_s.max(1e-9),
        n_params: cfg.n_params(),
    })
}

/// Deletes optimizer state of all but the newest `keep` checkpoints (weights are never deleted)
/// and clears their sidecars' `optimizer_file`.
fn prune_optimizer_state(dir: &Path, keep: usize) -> Result<()> {
    let mut with_state: Vec<(PathBuf, Sidecar)> = checkpoint::list_all(dir)?
        .into_iter()
        .filter_map(|(p, m)| m.ok().map(|m| (p, m)))
        .filter(|(_, m)| m.optimizer_file.is_some())
        .collect();
    with_state.sort_by_key(|(_, m)| m.step);
    for (path, mut meta) in with_state.into_iter().rev().skip(keep) {
        let f = dir.join(meta.optimizer_file.take().unwrap());
        meta.optimizer_sha256 = None;
        output::write_atomic(&path, serde_json::to_string_pretty(&meta)?.as_bytes())?;
        let _ = std::fs::remove_file(f);
    }
    // state files whose sidecar no longer names them (a prune interrupted between the two steps)
    for (_, meta) in checkpoint::list_all(dir)?.into_iter().filter_map(|(p, m)| m.ok().map(|m| (p, m))) {
        let f = dir.join(format!("{}.optim.safetensors", checkpoint::stem(meta.step)));
        if meta.optimizer_file.is_none() && f.is_file() {
            let _ = std::fs::remove_file(f);
        }
    }
    Ok(())
}
