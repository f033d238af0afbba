//! The run configuration (one TOML file: data, model, training), and its hash, which every
//! checkpoint records so that a run is never resumed or scored under another configuration.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Version of the config layout this build reads and writes. A config without `schema_version`
/// is version 1; version 1 is not written out, so the hashes of existing runs do not change.
pub const CONFIG_VERSION: u32 = 1;

fn version_1() -> u32 {
    1
}

fn is_version_1(v: &u32) -> bool {
    *v == 1
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default = "version_1", skip_serializing_if = "is_version_1")]
    pub schema_version: u32,
    /// Run name: checkpoints go to `runs/<name>/` unless `--out` says otherwise.
    pub name: String,
    /// Seeds weight init and the data order (batch `s` is drawn from seed and `s` alone).
    pub seed: u64,
    pub data: DataConfig,
    pub model: ModelConfig,
    pub train: TrainConfig,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DataConfig {
    /// Folder with train.txt and validation.txt (written by `corpus`).
    pub corpus: PathBuf,
    /// Byte-level BPE tokenizer JSON; trained on train.txt by `lm tokenizer` if missing.
    pub tokenizer: PathBuf,
    pub vocab_size: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    pub d_model: i64,
    pub n_layers: i64,
    pub n_heads: i64,
    /// Hidden width of the SwiGLU MLP (about 8/3 d_model, as in LLaMA).
    pub d_ff: i64,
    /// Context length in tokens.
    pub context: i64,
    pub rope_theta: f64,
    pub norm_eps: f64,
    /// Std of the normal init of every matrix; residual output projections get
    /// `init_std / sqrt(2 n_layers)` (GPT-2 / nanoGPT practice).
    pub init_std: f64,
    /// Dropout on attention and MLP outputs; 0 as in current LLM pretraining practice.
    pub dropout: f64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Schedule {
    /// Linear warm-up, then cosine decay to `min_lr_ratio * lr` at the last step.
    Cosine,
    /// Linear warm-up, then constant.
    Constant,
    /// Warm-up, stable, decay: constant, then linear decay over the last `decay_fraction` of steps.
    Wsd,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    pub batch_size: i64,
    pub steps: u64,
    pub schedule: Schedule,
    pub lr: f64,
    pub min_lr_ratio: f64,
    pub warmup_steps: u64,
    pub decay_fraction: f64,
    pub weight_decay: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub grad_clip: f64,
    pub checkpoint_every: u64,
    /// Number of fixed validation windows (of `context` tokens) scored at each checkpoint.
    pub val_windows: i64,
}

impl Config {
    pub fn load(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read config", path.display()))?;
        let cfg: Config = toml::from_str(&text).with_context(|| format!("{}: not a valid run config", path.display()))?;
        cfg.validate().with_context(|| format!("{}: invalid config", path.display()))?;
        Ok(cfg)
    }

    pub fn validate(&self) -> Result<()> {
        if self.schema_version > CONFIG_VERSION {
            bail!("schema_version {} is newer than this build reads ({CONFIG_VERSION}); update the workspace", self.schema_version);
        }
        let m = &self.model;
        if m.d_model % m.n_heads != 0 || (m.d_model / m.n_heads) % 2 != 0 {
            bail!("d_model ({}) must be a multiple of n_heads ({}) with an even head size (rotary)", m.d_model, m.n_heads);
        }
        let t = &self.train;
        if t.steps == 0 || t.checkpoint_every == 0 || t.batch_size <= 0 {
            bail!("steps, checkpoint_every and batch_size must be positive");
        }
        if !(0.0..=1.0).contains(&t.min_lr_ratio) || !(0.0..=1.0).contains(&t.decay_fraction) {
            bail!("min_lr_ratio and decay_fraction must lie in [0, 1]");
        }
        Ok(())
    }

    /// sha256 of the config's canonical JSON form (independent of TOML layout and comments).
    pub fn hash(&self) -> String {
        output::provenance::sha256_hex(&serde_json::to_vec(self).expect("config serialises"))
    }

    /// Learning rate at `step` (0-based) under the configured schedule.
    pub fn lr_at(&self, step: u64) -> f64 {
        let t = &self.train;
        if step < t.warmup_steps {
            return t.lr * (step + 1) as f64 / t.warmup_steps as f64;
        }
        let min = t.lr * t.min_lr_ratio;
        match t.schedule {
            Schedule::Constant => t.lr,
            Schedule::Cosine => {
                let span = (t.steps.saturating_sub(t.warmup_steps)).max(1) as f64;
                let p = ((step - t.warmup_steps) as f64 / span).min(1.0);
                min + 0.5 * (t.lr - min) * (1.0 + (std::f64::consts::PI * p).cos())
            }
            Schedule::Wsd => {
                let decay_start = t.steps - (t.decay_fraction * t.steps as f64).round() as u64;
                if step < decay_start {
                    t.lr
                } else {
                    let p = (step - decay_start) as f64 / (t.steps - decay_start).max(1) as f64;
                    t.lr + (min - t.lr) * p.min(1.0)
                }
            }
        }
    }

    /// Parameter count of the model this config describes (tied embeddings counted once).
    pub fn n_params(&self) -> i64 {
        let m = &self.model;
        let per_layer = 4 * m.d_model * m.d_model + 3 * m.d_model * m.d_ff + 2 * m.d_model;
        self.data.vocab_size * m.d_model + m.n_layers * per_layer + m.d_model
    }

    /// Training FLOPs per token: 6 N for the matrices plus 6 L T d for attention scores and
    /// values with causal masking counted at full cost (the PaLM convention, `6N + 12 L T d` halved
    /// for the causal half is not applied, so MFU is not flattered).
    pub fn train_flops_per_token(&self) -> f64 {
        let m = &self.model;
        let matrices = (self.n_params() - m.d_model * (2 * m.n_layers + 1)) as f64;
        6.0 * matrices + 12.0 * (m.n_layers * m.context * m.d_model) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> Config {
        Config::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/smoke.toml")).unwrap()
    }

    #[test]
    fn schedules_warm_up_then_reach_their_floor() {
        let mut c = cfg();
        let t = c.train.clone();
        assert!((c.lr_at(0) - t.lr / t.warmup_steps as f64).abs() < 1e-12);
        assert!((c.lr_at(t.warmup_steps) - t.lr).abs() < 1e-12);
        assert!((c.lr_at(t.steps) - t.lr * t.min_lr_ratio).abs() < 1e-12);
        c.train.schedule = Schedule::Constant;
        assert_eq!(c.lr_at(t.steps - 1), t.lr);
        c.train.schedule = Schedule::Wsd;
        assert_eq!(c.lr_at(t.steps / 2), t.lr);
        assert!((c.lr_at(t.steps) - t.lr * t.min_lr_ratio).abs() < 1e-12);
    }

    #[test]
    fn hash_ignores_layout_but_not_values() {
        let a = cfg();
        let mut b = a.clone();
        assert_eq!(a.hash(), b.hash());
        b.seed += 1;
        assert_ne!(a.hash(), b.hash());
    }

    #[test]
    fn unknown_fields_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.toml");
        let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/smoke.toml")).unwrap();
        std::fs::write(&p, text.replace("seed = 1234", "seed = 1234\nsede = 1")).unwrap();
        let err = format!("{:#}", Config::load(&p).unwrap_err());
        assert!(err.contains("c.toml") && err.contains("sede"), "{err}");
    }
}
