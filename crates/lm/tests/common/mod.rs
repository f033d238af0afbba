//! What the integration tests share: a tiny config over a corpus folder made from the fixture
//! (a 100 kB Moby-Dick excerpt, split 80 kB train / the rest validation).

use std::path::Path;

use lm::config::{Config, Precision};

/// The smoke config (in fp32) shrunk to a 512-token vocabulary and a context of 32, training `steps`
/// steps with `warmup_steps` of warm-up and `val_windows` validation windows, a checkpoint every
/// 10 steps, over `dir/corpus` with the tokenizer at `dir/tok.json`.
pub fn tiny_config(dir: &Path, steps: u64, warmup_steps: u64, val_windows: i64) -> Config {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/moby_dick_excerpt.txt"))
            .unwrap();
    let (a, b) = text.split_at(80_000);
    let corpus = dir.join("corpus");
    std::fs::create_dir_all(&corpus).unwrap();
    std::fs::write(corpus.join("train.txt"), a).unwrap();
    std::fs::write(corpus.join("validation.txt"), b).unwrap();
    let mut cfg = Config::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/smoke.toml")).unwrap();
    cfg.data.corpus = corpus;
    cfg.data.tokenizer = dir.join("tok.json");
    cfg.data.vocab_size = 512;
    cfg.model.context = 32;
    cfg.train.steps = steps;
    cfg.train.warmup_steps = warmup_steps;
    cfg.train.checkpoint_every = 10;
    cfg.train.val_windows = val_windows;
    // fp32 unless a test asks for bf16 (the smoke config trains in bf16)
    cfg.train.precision = Precision::Fp32;
    cfg
}
