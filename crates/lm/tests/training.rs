//! Integration tests of the training pipeline on a 100 kB public-domain excerpt (Moby-Dick):
//! checkpoint round trips, exact resumption, clear errors on bad checkpoints, and that a short
//! run learns.

use std::path::{Path, PathBuf};

use lm::checkpoint;
use lm::config::Config;
use lm::model::Gpt;
use lm::tch::{nn::VarStore, Device, Tensor};
use lm::tokenize::{self, Tok};
use lm::train::{self, TrainOptions};

mod common;

/// A tiny config over a corpus folder made from the fixture (train = validation = excerpt halves).
fn setup(dir: &Path) -> Config {
    common::tiny_config(dir, 60, 5, 8)
}

fn quiet() -> TrainOptions {
    TrainOptions { quiet: true, ..Default::default() }
}

/// [`quiet`], stopping after step `n`.
fn stopping_after(n: u64) -> TrainOptions {
    TrainOptions { stop_after: Some(n), ..quiet() }
}

fn weights(path: &Path) -> Vec<(String, Tensor)> {
    let mut v = Tensor::read_safetensors(path).unwrap();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn max_abs_diff(a: &[(String, Tensor)], b: &[(String, Tensor)]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|((na, ta), (nb, tb))| {
            assert_eq!(na, nb);
            f64::try_from((ta - tb).abs().max()).unwrap()
        })
        .fold(0.0, f64::max)
}

#[test]
fn resume_after_a_kill_equals_the_straight_run() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = setup(dir.path());
    let straight = dir.path().join("straight");
    let s = train::train(&cfg, &straight, &quiet()).unwrap();
    assert_eq!(s.last_step, 60);

    let resumed = dir.path().join("resumed");
    let first = train::train(&cfg, &resumed, &stopping_after(30)).unwrap();
    assert_eq!((first.last_step, first.resumed_from), (30, None));
    // a kill between checkpoints leaves a half-written file behind: it must be ignored
    std::fs::write(resumed.join("checkpoints/step_000040.partial"), b"garbage").unwrap();
    let second = train::train(&cfg, &resumed, &quiet()).unwrap();
    assert_eq!((second.resumed_from, second.last_step), (Some(30), 60));

    let a = checkpoint::read_sidecar(&straight.join("checkpoints/step_000060.json")).unwrap();
    let b = checkpoint::read_sidecar(&resumed.join("checkpoints/step_000060.json")).unwrap();
    assert!((a.val_loss - b.val_loss).abs() < 1e-5, "{} vs {}", a.val_loss, b.val_loss);
    assert!((a.train_loss.unwrap() - b.train_loss.unwrap()).abs() < 1e-5);
    let d = max_abs_diff(
        &weights(&straight.join("checkpoints/step_000060.safetensors")),
        &weights(&resumed.join("checkpoints/step_000060.safetensors")),
    );
    assert!(d < 1e-5, "weights differ by {d}");
    // the log holds each step exactly once
    let log = std::fs::read_to_string(resumed.join("train_log.csv")).unwrap();
    assert_eq!(log.lines().count(), 1 + 61, "{log}");
}

/// bf16 mixed precision: a run killed and resumed ends on the same weights as the straight run,
/// to the bit (master weights and AdamW state are fp32 and saved whole), and the precision
/// really changes the computation (the weights differ from the fp32 run's).
#[test]
fn bf16_training_resumes_bit_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let fp32 = setup(dir.path());
    let mut cfg = fp32.clone();
    cfg.train.precision = lm::config::Precision::Bf16;
    let straight = dir.path().join("bf16-straight");
    train::train(&cfg, &straight, &quiet()).unwrap();
    let resumed = dir.path().join("bf16-resumed");
    train::train(&cfg, &resumed, &stopping_after(30)).unwrap();
    let second = train::train(&cfg, &resumed, &quiet()).unwrap();
    assert_eq!((second.resumed_from, second.last_step), (Some(30), 60));
    let last = "checkpoints/step_000060.safetensors";
    assert_eq!(max_abs_diff(&weights(&straight.join(last)), &weights(&resumed.join(last))), 0.0);
    let full = dir.path().join("fp32");
    train::train(&fp32, &full, &quiet()).unwrap();
    assert!(
        max_abs_diff(&weights(&straight.join(last)), &weights(&full.join(last))) > 0.0,
        "bf16 training gave the fp32 weights"
    );
}

#[test]
fn checkpoint_round_trip_is_bit_exact_and_provenance_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = setup(dir.path());
    let run = dir.path().join("run");
    train::train(&cfg, &run, &stopping_after(10)).unwrap();
    let sidecar = run.join("checkpoints/step_000010.json");
    let tok = Tok::load(&cfg.data.tokenizer).unwrap();
    let mut vs = VarStore::new(Device::Cpu);
    let _model = {
        let _rng = train::rng_lock();
        Gpt::new(&vs.root(), &cfg.model, cfg.data.vocab_size)
    };
    let meta = checkpoint::load(&sidecar, &mut vs, &tok.sha256).unwrap();
    assert_eq!((meta.step, meta.seed, meta.tokens_seen), (10, cfg.init_seed(), 10 * 16 * 32));
    assert_eq!(meta.config_hash, cfg.hash());
    assert_eq!(meta.tokenizer_sha256, tok.sha256);
    assert!(!meta.git_commit.is_empty());
    let saved = weights(&run.join("checkpoints/step_000010.safetensors"));
    let loaded = checkpoint::named_weights(&vs);
    for ((n1, a), (n2, b)) in saved.iter().zip(&loaded) {
        assert_eq!(n1, n2);
        assert!(a.equal(b), "{n1} differs after the round trip");
    }
    // saving the loaded weights again gives the same bytes
    let again = dir.path().join("again.safetensors");
    let h = checkpoint::write_tensors(&again, &loaded).unwrap();
    assert_eq!(h, meta.weights_sha256);
}

fn load_err(sidecar: &Path, cfg: &Config, tok_sha: &str) -> String {
    let mut vs = VarStore::new(Device::Cpu);
    let _model = {
        let _rng = train::rng_lock();
        Gpt::new(&vs.root(), &cfg.model, cfg.data.vocab_size)
    };
    format!("{:#}", checkpoint::load(sidecar, &mut vs, tok_sha).unwrap_err())
}

#[test]
fn bad_checkpoints_and_tokenizer_mismatch_give_clear_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = setup(dir.path());
    let run = dir.path().join("run");
    train::train(&cfg, &run, &stopping_after(20)).unwrap();
    let tok = Tok::load(&cfg.data.tokenizer).unwrap();
    let ck: PathBuf = run.join("checkpoints");

    // truncated weights
    let w = ck.join("step_000010.safetensors");
    let bytes = std::fs::read(&w).unwrap();
    std::fs::write(&w, &bytes[..bytes.len() / 2]).unwrap();
    let e = load_err(&ck.join("step_000010.json"), &cfg, &tok.sha256);
    assert!(e.contains("step_000010.safetensors") && e.contains("corrupt or truncated"), "{e}");

    // one flipped byte in the middle: same length, still caught
    let w = ck.join("step_000020.safetensors");
    let mut bytes = std::fs::read(&w).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&w, &bytes).unwrap();
    let e = load_err(&ck.join("step_000020.json"), &cfg, &tok.sha256);
    assert!(e.contains("step_000020.safetensors") && e.contains("corrupt"), "{e}");

    // tokenizer of another vocabulary
    let other = tokenize::train(&cfg.data.corpus.join("train.txt"), 400, &dir.path().join("other.json")).unwrap();
    let e = load_err(&ck.join("step_000000.json"), &cfg, &other.sha256);
    assert!(e.contains("step_000000.json") && e.contains("tokenizer"), "{e}");

    // truncated sidecar
    let s = ck.join("step_000000.json");
    let text = std::fs::read_to_string(&s).unwrap();
    std::fs::write(&s, &text[..text.len() / 3]).unwrap();
    let e = load_err(&s, &cfg, &tok.sha256);
    assert!(e.contains("step_000000.json") && e.contains("malformed or truncated"), "{e}");

    // resuming the same run with another config is refused
    let mut changed = cfg.clone();
    changed.train.lr *= 2.0;
    let e = format!("{:#}", train::train(&changed, &run, &quiet()).unwrap_err());
    assert!(e.contains("config.toml") && e.contains("another config"), "{e}");
}

#[test]
fn a_short_run_lowers_validation_loss() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = setup(dir.path());
    let s = train::train(&cfg, &dir.path().join("run"), &quiet()).unwrap();
    // from ln(512) = 6.24 at init; 60 steps on this text reliably reach below 5.5
    assert!(s.first_val_loss > 6.0 && s.last_val_loss < 5.5, "{} -> {}", s.first_val_loss, s.last_val_loss);
    let ckpts = checkpoint::list(&dir.path().join("run/checkpoints")).unwrap();
    assert_eq!(ckpts.iter().map(|(_, m)| m.step).collect::<Vec<_>>(), vec![0, 10, 20, 30, 40, 50, 60]);
    // optimizer state is kept for the newest two only
    assert_eq!(ckpts.iter().filter(|(_, m)| m.optimizer_file.is_some()).count(), 2);
}

/// D1: a run folder whose checkpoints cannot be resumed is never restarted from scratch over
/// them; `--restart` moves it aside instead of deleting it.
#[test]
fn a_run_without_a_resumable_checkpoint_is_refused_not_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = setup(dir.path());
    let run = dir.path().join("run");
    train::train(&cfg, &run, &stopping_after(20)).unwrap();
    let ck = run.join("checkpoints");
    for f in ["step_000010.optim.safetensors", "step_000020.optim.safetensors"] {
        std::fs::remove_file(ck.join(f)).unwrap();
    }
    let before: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&ck)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.clone(), std::fs::read(&p).unwrap()))
        .collect();
    let log = std::fs::read(run.join("train_log.csv")).unwrap();
    let e = format!("{:#}", train::train(&cfg, &run, &quiet()).unwrap_err());
    assert!(
        e.contains("but none to resume from") && e.contains("--restart") && e.contains("optimizer state missing"),
        "{e}"
    );
    for (p, bytes) in &before {
        assert_eq!(&std::fs::read(p).unwrap(), bytes, "{} changed", p.display());
    }
    assert_eq!(std::fs::read(run.join("train_log.csv")).unwrap(), log);
    // a corrupt optimizer state (hash recorded in the sidecar) is not resumable either
    let s = train::train(
        &cfg,
        &run,
        &TrainOptions { restart: true, stop_after: Some(10), quiet: true, ..Default::default() },
    )
    .unwrap();
    assert_eq!(s.resumed_from, None);
    let aside = dir.path().join("run.old-1");
    for (p, bytes) in &before {
        assert_eq!(&std::fs::read(aside.join("checkpoints").join(p.file_name().unwrap())).unwrap(), bytes);
    }
    let o = ck.join("step_000010.optim.safetensors");
    let mut bytes = std::fs::read(&o).unwrap();
    let n = bytes.len() - 10;
    bytes[n] ^= 1;
    std::fs::write(&o, &bytes).unwrap();
    std::fs::remove_file(ck.join("step_000000.optim.safetensors")).unwrap();
    let e = format!("{:#}", train::train(&cfg, &run, &quiet()).unwrap_err());
    assert!(e.contains("step_000010.optim.safetensors") && e.contains("corrupt"), "{e}");
}

/// Version 2 seeds: `init_seed` alone fixes the step-0 weights, `data_seed` alone the batches;
/// an `[eval]` schedule records the whole-split validation loss at its checkpoints only.
#[test]
fn init_and_data_seeds_act_apart_and_the_schedule_marks_full_validation() {
    let dir = tempfile::tempdir().unwrap();
    let mut base = common::tiny_config(dir.path(), 20, 5, 4);
    (base.schema_version, base.seed, base.init_seed, base.data_seed) = (2, None, Some(1), Some(1));
    base.train.checkpoint_every = 5;
    base.eval = Some(lm::config::EvalSchedule { final_fraction: 0.25, lead: 1, early: 1 });
    base.validate().unwrap();
    assert_eq!(base.eval_steps(), vec![0, 10, 15, 20]);
    let run = |cfg: &Config, name: &str| {
        let d = dir.path().join(name);
        train::train(cfg, &d, &quiet()).unwrap();
        d.join("checkpoints")
    };
    let a = run(&base, "a");
    let mut other_data = base.clone();
    other_data.data_seed = Some(2);
    let b = run(&other_data, "b");
    let mut other_init = base.clone();
    other_init.init_seed = Some(2);
    let c = run(&other_init, "c");
    let w = |d: &Path, s: &str| weights(&d.join(format!("step_0000{s}.safetensors")));
    assert_eq!(max_abs_diff(&w(&a, "00"), &w(&b, "00")), 0.0, "data_seed must not touch the init");
    assert!(max_abs_diff(&w(&a, "00"), &w(&c, "00")) > 0.0, "init_seed must change the init");
    assert!(max_abs_diff(&w(&a, "20"), &w(&b, "20")) > 0.0, "data_seed must change the batches");
    for step in [0u64, 5, 10, 15, 20] {
        let m = checkpoint::read_sidecar(&a.join(format!("{}.json", checkpoint::stem(step)))).unwrap();
        assert_eq!(m.val_loss_full.is_some(), step != 5, "step {step}");
    }
    let log = std::fs::read_to_string(dir.path().join("a/train_log.csv")).unwrap();
    assert!(log.starts_with("step,tokens,lr,train_loss,grad_norm,val_loss,val_loss_full\n"));
    let full_rows = log.lines().skip(1).filter(|l| !l.ends_with(',')).count();
    assert_eq!(full_rows, 4, "{log}");
}

/// libtorch's generator is one per process: another thread drawing from it (under `rng_lock`, as
/// the lock asks) while a run trains must not change the run's weights. Without the lock around
/// training's seeded draws the other thread's draws land between the seed and the init.
#[test]
fn draws_of_another_thread_do_not_change_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = setup(dir.path());
    let alone = dir.path().join("alone");
    train::train(&cfg, &alone, &stopping_after(10)).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let drawer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _rng = train::rng_lock();
                let _ = Tensor::randn([64], (lm::tch::Kind::Float, Device::Cpu));
            }
        })
    };
    let busy = dir.path().join("busy");
    train::train(&cfg, &busy, &stopping_after(10)).unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    drawer.join().unwrap();
    for step in ["00", "10"] {
        let w = |d: &Path| weights(&d.join(format!("checkpoints/step_0000{step}.safetensors")));
        assert_eq!(max_abs_diff(&w(&alone), &w(&busy)), 0.0, "step {step}: another thread's draws changed the run");
    }
}
