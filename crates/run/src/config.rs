//! The run configuration (one TOML file: data, model, training), and its hash, which every
//! checkpoint records so that a run is never resumed or scored under another configuration.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Version of the config layout this build reads and writes. A config without `schema_version`
/// is version 1; version 1 is not written out, so the hashes of existing runs do not change.
/// Version 2: `init_seed` and `data_seed` apart (version 1's `seed` is both), and an `[eval]`
/// schedule of the checkpoints to score. A version 1 file loads and hashes as before.
pub const CONFIG_VERSION: u32 = 2;

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
    /// Version 1: seeds both weight init and the data order. Use [`Config::init_seed`] and
    /// [`Config::data_seed`], which read either layout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Version 2: seeds weight init (and dropout, if any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_seed: Option<u64>,
    /// Version 2: seeds the data order (batch `s` is drawn from `data_seed` and `s` alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_seed: Option<u64>,
    pub data: DataConfig,
    pub model: ModelConfig,
    pub train: TrainConfig,
    /// Version 2: which checkpoints `lm eval` scores (absent: every checkpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval: Option<EvalSchedule>,
}

/// The checkpoints a run's evaluation spends its time on: every checkpoint of the final
/// `final_fraction` of training (the study's final stage), the `lead` checkpoints before them (so
/// that a k-window with k <= lead + 1 and the smoothing baseline are defined at every final
/// position), and `early` log-spaced checkpoints before those (the shape of the whole curve).
/// Every checkpoint is still saved and available for averaging.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EvalSchedule {
    pub final_fraction: f64,
    pub lead: usize,
    pub early: usize,
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
    /// Precision of training's linear layers: `fp32` (absent; not written, so existing configs
    /// hash as before) or `bf16` (bf16 matmuls; fp32 master weights, gradients, AdamW state,
    /// attention, norms and loss; see `lm::model::Gpt::set_train_compute`).
    #[serde(default, skip_serializing_if = "Precision::is_fp32")]
    pub precision: Precision,
}

impl Schedule {
    /// The name in configs and tables (`cosine`, `constant`, `wsd`).
    pub fn name(self) -> &'static str {
        match self {
            Schedule::Cosine => "cosine",
            Schedule::Constant => "constant",
            Schedule::Wsd => "wsd",
        }
    }
}

/// The compute precision of training.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    #[default]
    Fp32,
    Bf16,
}

impl Precision {
    fn is_fp32(&self) -> bool {
        *self == Precision::Fp32
    }
}

/// How `lm eval` scores a run (configs/eval.toml, configs/eval-study.toml): which tasks, how many
/// examples of each (a fixed, seeded subset), how many shots, how large a batch.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EvalConfig {
    /// Folder with the task files and manifest.json (`just data` builds it).
    pub tasks: PathBuf,
    /// Seeds the example subset and the choice of few-shot examples.
    pub seed: u64,
    /// Solved examples prepended to every prompt (0 = zero-shot).
    pub shots: usize,
    /// At most this many examples per task (a fixed, seeded subset).
    pub max_examples: usize,
    /// Per-task caps that replace `max_examples` (e.g. `bigbench_sva = 5000`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub max_examples_per_task: std::collections::BTreeMap<String, usize>,
    /// Tokens per forward batch.
    pub batch_tokens: usize,
    /// Score only these tasks (names of the manifest); empty: every task. A run scored on some
    /// tasks and then on others keeps both sets apart (one eval folder per config).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only: Vec<String>,
}

impl EvalConfig {
    pub fn load(path: &Path) -> Result<EvalConfig> {
        let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?;
        toml::from_str(&text).with_context(|| format!("{}: not a valid eval config", path.display()))
    }

    /// sha256 of the config's canonical JSON form.
    pub fn hash(&self) -> String {
        output::provenance::sha256_hex(&serde_json::to_vec(self).expect("eval config serialises"))
    }
}

impl Config {
    pub fn load(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read config", path.display()))?;
        let cfg: Config =
            toml::from_str(&text).with_context(|| format!("{}: not a valid run config", path.display()))?;
        cfg.validate().with_context(|| format!("{}: invalid config", path.display()))?;
        Ok(cfg)
    }

    pub fn validate(&self) -> Result<()> {
        if self.schema_version > CONFIG_VERSION {
            bail!(
                "schema_version {} is newer than this build reads ({CONFIG_VERSION}); update the workspace",
                self.schema_version
            );
        }
        let m = &self.model;
        if m.d_model % m.n_heads != 0 || (m.d_model / m.n_heads) % 2 != 0 {
            bail!(
                "d_model ({}) must be a multiple of n_heads ({}) with an even head size (rotary)",
                m.d_model,
                m.n_heads
            );
        }
        let t = &self.train;
        if t.steps == 0 || t.checkpoint_every == 0 || t.batch_size <= 0 {
            bail!("steps, checkpoint_every and batch_size must be positive");
        }
        match (self.schema_version, self.seed, self.init_seed, self.data_seed) {
            (1, Some(_), None, None) => {}
            (1, ..) => bail!("a version 1 config has `seed` (no `init_seed`, `data_seed`); set schema_version = 2 to seed them apart"),
            (_, None, Some(_), Some(_)) => {}
            _ => bail!("a version {} config has `init_seed` and `data_seed` (and no `seed`)", self.schema_version),
        }
        if let Some(e) = &self.eval {
            if self.schema_version < 2 {
                bail!("[eval] needs schema_version = 2");
            }
            if !(e.final_fraction > 0.0 && e.final_fraction <= 1.0) {
                bail!("[eval] final_fraction {} must lie in (0, 1]", e.final_fraction);
            }
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

    /// Seed of the weight init (version 1: `seed`).
    pub fn init_seed(&self) -> u64 {
        self.init_seed.or(self.seed).expect("validated config has a seed")
    }

    /// Seed of the data order (version 1: `seed`).
    pub fn data_seed(&self) -> u64 {
        self.data_seed.or(self.seed).expect("validated config has a seed")
    }

    /// Steps at which a checkpoint is saved: 0, every `checkpoint_every` steps, and the last.
    pub fn checkpoint_steps(&self) -> Vec<u64> {
        let t = &self.train;
        let mut s: Vec<u64> = (0..=t.steps).step_by(t.checkpoint_every as usize).collect();
        if s.last() != Some(&t.steps) {
            s.push(t.steps);
        }
        s
    }

    /// First step of the final stage: the first checkpoint at or after `(1 - fraction) * steps`.
    pub fn final_stage_start(&self, fraction: f64) -> u64 {
        let from = ((1.0 - fraction) * self.train.steps as f64).round() as u64;
        *self.checkpoint_steps().iter().find(|&&s| s >= from).expect("the last step is a checkpoint")
    }

    /// The checkpoints `lm eval` scores, ascending: every checkpoint without an `[eval]`
    /// schedule; with one, the final stage, its `lead` predecessors and `early` log-spaced ones
    /// before them (step 0 always included).
    pub fn eval_steps(&self) -> Vec<u64> {
        let all = self.checkpoint_steps();
        let Some(e) = &self.eval else { return all };
        let first_final = all.iter().position(|&s| s >= self.final_stage_start(e.final_fraction)).unwrap();
        let lead_from = first_final.saturating_sub(e.lead);
        let mut chosen: Vec<u64> = all[lead_from..].to_vec();
        // log-spaced indices among the checkpoints before the lead (index 0 is step 0)
        let before = &all[..lead_from];
        if !before.is_empty() && e.early > 0 {
            chosen.push(before[0]);
            let n = before.len() as f64;
            for i in 1..e.early {
                // index n^(i / (early - 1)) - 1: from 0 up to the last index, evenly in log scale
                let idx = (n.powf(i as f64 / (e.early - 1) as f64) - 1.0).round() as usize;
                chosen.push(before[idx.min(before.len() - 1)]);
            }
        }
        chosen.sort_unstable();
        chosen.dedup();
        chosen
    }

    /// How many scored checkpoints lie in the final stage (the analysis' final window).
    pub fn final_stage_len(&self) -> usize {
        let fraction = self.eval.as_ref().map_or(0.2, |e| e.final_fraction);
        let start = self.final_stage_start(fraction);
        self.eval_steps().iter().filter(|&&s| s >= start).count()
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
        b.seed = Some(b.seed.unwrap() + 1);
        assert_ne!(a.hash(), b.hash());
    }

    /// A version 2 config seeds init and data apart; version 1's `seed` is both and its hash is
    /// unchanged by the new (absent) fields; mixing the layouts is refused.
    #[test]
    fn seeds_of_both_layouts() {
        let v1 = cfg();
        assert_eq!((v1.init_seed(), v1.data_seed()), (1234, 1234));
        assert!(!serde_json::to_string(&v1).unwrap().contains("init_seed"));
        let mut v2 = v1.clone();
        (v2.schema_version, v2.seed, v2.init_seed, v2.data_seed) = (2, None, Some(7), Some(9));
        v2.validate().unwrap();
        assert_eq!((v2.init_seed(), v2.data_seed()), (7, 9));
        let back: Config = toml::from_str(&toml::to_string(&v2).unwrap()).unwrap();
        assert_eq!(back, v2);
        let mut mixed = v2.clone();
        mixed.seed = Some(1);
        assert!(mixed.validate().is_err());
        let mut old_with_new = v1.clone();
        old_with_new.init_seed = Some(3);
        assert!(old_with_new.validate().is_err());
    }

    /// `precision` absent is fp32 and leaves the JSON (so the hash) as it was; bf16 is written,
    /// read back, and changes the hash (a bf16 run never resumes an fp32 one).
    #[test]
    fn precision_defaults_to_fp32_without_changing_the_hash() {
        let a = Config::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/default.toml")).unwrap();
        assert_eq!(a.train.precision, Precision::Fp32);
        assert!(!serde_json::to_string(&a).unwrap().contains("precision"));
        let mut b = a.clone();
        b.train.precision = Precision::Bf16;
        let text = toml::to_string(&b).unwrap();
        assert!(text.contains("precision = \"bf16\""), "{text}");
        assert_eq!(toml::from_str::<Config>(&text).unwrap(), b);
        assert_ne!(a.hash(), b.hash());
        assert!(toml::from_str::<Config>(&text.replace("\"bf16\"", "\"fp16\"")).is_err());
    }

    /// The eval schedule: all of the final stage, `lead` checkpoints before it, `early`
    /// log-spaced ones before those starting at step 0; every step is a saved checkpoint.
    #[test]
    fn eval_schedule_covers_the_final_stage_and_its_lead() {
        let mut c = cfg();
        (c.schema_version, c.seed, c.init_seed, c.data_seed) = (2, None, Some(1), Some(1));
        c.train.steps = 2000;
        c.train.checkpoint_every = 20;
        assert_eq!(c.eval_steps(), c.checkpoint_steps());
        c.eval = Some(EvalSchedule { final_fraction: 0.2, lead: 15, early: 15 });
        c.validate().unwrap();
        let s = c.eval_steps();
        let saved = c.checkpoint_steps();
        assert!(s.iter().all(|x| saved.contains(x)) && s.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(c.final_stage_start(0.2), 1600);
        let finals: Vec<u64> = s.iter().copied().filter(|&x| x >= 1600).collect();
        assert_eq!(finals, (1600..=2000).step_by(20).collect::<Vec<_>>());
        assert_eq!(c.final_stage_len(), 21);
        let lead: Vec<u64> = s.iter().copied().filter(|&x| (1300..1600).contains(&x)).collect();
        assert_eq!(lead, (1300..1600).step_by(20).collect::<Vec<_>>());
        let early: Vec<u64> = s.iter().copied().filter(|&x| x < 1300).collect();
        assert_eq!(early[0], 0);
        assert!(early.len() >= 10 && early.len() <= 15, "{early:?}");
        // log spacing: gaps grow
        assert!(early[1] - early[0] <= early[early.len() - 1] - early[early.len() - 2], "{early:?}");
    }

    #[test]
    fn schedule_names_are_the_config_names() {
        for s in [Schedule::Cosine, Schedule::Constant, Schedule::Wsd] {
            assert_eq!(toml::Value::try_from(s).unwrap().as_str(), Some(s.name()));
        }
    }

    #[test]
    fn unknown_fields_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.toml");
        let text =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/smoke.toml")).unwrap();
        std::fs::write(&p, text.replace("seed = 1234", "seed = 1234\nsede = 1")).unwrap();
        let err = format!("{:#}", Config::load(&p).unwrap_err());
        assert!(err.contains("c.toml") && err.contains("sede"), "{err}");
    }
}
