//! Ensemble decoding on checkpoints of tiny trained runs: k copies of one checkpoint (each
//! loaded on its own) decode exactly what the checkpoint decodes alone, batched and one prompt
//! at a time; checkpoints of another architecture or vocabulary are refused, named.

use std::path::{Path, PathBuf};

use lm::generate::{self, Options};
use lm::model::Gpt;
use lm::train::{self, TrainOptions};
use tch::Device;

mod common;

/// Trains a tiny run (10 steps, checkpoints at 0 and 10) into `dir/<name>`, with `edit` applied
/// to the tiny config over `dir`'s corpus and tokenizer; returns its checkpoints folder.
fn tiny_run(dir: &Path, name: &str, edit: impl FnOnce(&mut lm::config::Config)) -> PathBuf {
    let mut cfg = common::tiny_config(dir, 10, 2, 2);
    edit(&mut cfg);
    let run = dir.join(name);
    train::train(&cfg, &run, &TrainOptions { quiet: true, ..Default::default() }).unwrap();
    run.join("checkpoints")
}

fn prompts() -> Vec<String> {
    ["Call me Ishmael.", "The whale", "", "It was the best of", "And so, at last, the ship"].map(String::from).to_vec()
}

#[test]
fn generate_ensemble_of_k_loaded_copies_of_a_checkpoint_equals_its_greedy_output_and_mismatches_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let a = tiny_run(dir.path(), "a", |_| {});
    let a10 = a.join("step_000010.json");
    let single = generate::load(&a10, None, Device::Cpu).unwrap();
    let p = prompts();
    let o = Options { max_new_tokens: 12, until: vec![], batch_size: 8, cache: true };
    let reference = generate::generate(&single.model, &single.tok, &p, &o, Device::Cpu).unwrap();
    assert!(reference.iter().all(|g| g.tokens.len() == 12));
    for k in 1..=3 {
        let paths: Vec<&Path> = vec![a10.as_path(); k];
        let members = generate::load_ensemble(&paths, None, Device::Cpu).unwrap();
        let models: Vec<&Gpt> = members.iter().map(|l| &l.model).collect();
        for batch_size in [8, 2] {
            let got = generate::generate_ensemble(
                &models,
                &members[0].tok,
                &p,
                &Options { batch_size, ..o.clone() },
                Device::Cpu,
            )
            .unwrap();
            assert_eq!(got, reference, "k = {k}, batches of {batch_size}");
        }
        for (i, q) in p.iter().enumerate() {
            let alone = generate::generate_ensemble(&models, &members[0].tok, std::slice::from_ref(q), &o, Device::Cpu)
                .unwrap();
            assert_eq!(alone[0], reference[i], "k = {k}, prompt {i} alone");
        }
    }

    // two checkpoints of one run make an ensemble
    let a0 = a.join("step_000000.json");
    let pair = generate::load_ensemble(&[a0.as_path(), a10.as_path()], None, Device::Cpu).unwrap();
    assert_eq!(pair.iter().map(|l| l.meta.step).collect::<Vec<_>>(), [0, 10]);

    // another architecture (one layer), same tokenizer
    let b = tiny_run(dir.path(), "b", |c| c.model.n_layers = 1);
    let b10 = b.join("step_000010.json");
    let e = generate::load_ensemble(&[a10.as_path(), b10.as_path()], None, Device::Cpu).err().unwrap().to_string();
    assert!(e.contains(&b10.display().to_string()) && e.contains("architecture") && e.contains("1 layers"), "{e}");

    // another vocabulary (and so tokenizer): a run with a 256-token BPE
    let other = dir.path().join("other");
    let c = tiny_run(&other, "c", |c| c.data.vocab_size = 256);
    let c10 = c.join("step_000010.safetensors");
    let e = generate::load_ensemble(&[a10.as_path(), a10.as_path(), c10.as_path()], None, Device::Cpu)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains(&c10.display().to_string()) && e.contains("vocabulary of 256 tokens") && e.contains("512"),
        "{e}"
    );
    // an unreadable member is named too
    let missing = a.join("step_000999.json");
    let e = generate::load_ensemble(&[a10.as_path(), missing.as_path()], None, Device::Cpu).err().unwrap();
    assert!(format!("{e:#}").contains("step_000999"), "{e:#}");
}
