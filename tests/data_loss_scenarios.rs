//! The data-loss cases found on review (D1-D5, M1-M3), one named test each, driving the built
//! binaries. Each failed on 61298da.

mod common;
use common::*;

fn trained(steps: u64, stop_after: &str) -> (Micro, std::path::PathBuf) {
    let m = Micro::new(steps);
    let run = m.path("run");
    ok(
        exec(
            "lm",
            &[
                "train",
                "--quiet",
                "--config",
                &m.s("micro.toml"),
                "--out",
                &run.display().to_string(),
                "--stop-after",
                stop_after,
            ],
        ),
        "train",
    );
    (m, run)
}

/// D1: checkpoints without a loadable optimizer state must not restart the run over them.
#[test]
fn d1_a_run_whose_checkpoints_cannot_resume_is_refused_not_restarted() {
    let (m, run) = trained(20, "10");
    let ck = run.join("checkpoints");
    std::fs::remove_file(ck.join("step_000010.optim.safetensors")).unwrap();
    let o = ck.join("step_000005.optim.safetensors");
    let bytes = std::fs::read(&o).unwrap();
    std::fs::write(&o, &bytes[..bytes.len() / 2]).unwrap();
    let before = tree(&run);
    let out = m.train("micro", &run);
    refused(&out, "none to resume from", "lm train over unresumable checkpoints");
    refused(&out, "--restart", "lm train over unresumable checkpoints");
    refused(&out, "step_000005.optim.safetensors", "lm train over unresumable checkpoints");
    same_tree(&tree(&run), &before, "the run after the refusal");
    // --restart moves it aside, it does not delete it
    ok(
        exec_env(
            "lm",
            &["train", "--quiet", "--restart", "--config", &m.s("micro.toml"), "--out", &run.display().to_string()],
            &[],
        ),
        "--restart",
    );
    same_tree(&tree(&m.path("run.old-1")), &before, "the run moved aside");
    assert!(run.join("checkpoints/step_000020.json").is_file());
}

/// D2: `integrate average -o` naming an input (or its checkpoint folder) must be refused.
#[test]
fn d2_average_into_an_input_is_refused_and_the_run_still_evaluates() {
    let (m, run) = trained(10, "10");
    let ck = run.join("checkpoints");
    let (a, b) = (
        ck.join("step_000005.safetensors").display().to_string(),
        ck.join("step_000010.safetensors").display().to_string(),
    );
    let before = tree(&run);
    for target in [b.clone(), ck.display().to_string(), ck.join("avg").display().to_string(), run.display().to_string()]
    {
        let o = exec("integrate", &["average", "--window", "2", &a, &b, "-o", &target]);
        refused(&o, "may not be an input", &format!("-o {target}"));
        same_tree(&tree(&run), &before, &format!("the run after -o {target}"));
    }
    ok(m.eval(&run), "lm eval of the run after the refusals");
}

/// D3: a failed write leaves no `.partial` or temp file and the old set of outputs whole.
#[test]
fn d3_a_failed_write_leaves_the_old_outputs_and_no_temp_files() {
    let (m, run) = trained(10, "10");
    ok(m.eval(&run), "eval");
    let before = tree(&run.join("eval"));
    let o = exec_env(
        "lm",
        &[
            "eval",
            "--quiet",
            "--checkpoints",
            &run.join("checkpoints").display().to_string(),
            "--config",
            &m.s("eval.toml"),
        ],
        &[("FLUCT_FAIL_AFTER_BYTES", "2000")],
    );
    refused(&o, "no space left on device", "eval on a full disk");
    same_tree(&tree(&run.join("eval")), &before, "eval outputs after the failure");
    assert!(leftovers(m.dir.path()).is_empty(), "{:?}", leftovers(m.dir.path()));
}

/// D4: two `lm eval` on one folder at once: the second is refused, the first's outputs are right.
#[test]
fn d4_two_evaluations_of_one_folder_the_second_is_refused() {
    let (m, run) = trained(150, "150");
    let reference = m.path("reference");
    copy_dir(&run, &reference);
    let ckpts = run.join("checkpoints").display().to_string();
    let mut first = spawn_holding(
        "lm",
        &["eval", "--quiet", "--checkpoints", &ckpts, "--config", &m.s("eval.toml")],
        &run.join("eval/.lock"),
    );
    let second = exec_env("lm", &["eval", "--quiet", "--checkpoints", &ckpts, "--config", &m.s("eval.toml")], &[]);
    assert!(first.try_wait().unwrap().is_none(), "the first eval finished before the second started: make it longer");
    refused(&second, "another writer holds this folder", "second lm eval");
    assert!(first.wait().unwrap().success());
    ok(m.eval(&reference), "eval of an undisturbed copy");
    let (a, b) = (tree(&run.join("eval")), tree(&reference.join("eval")));
    let strip = |t: std::collections::BTreeMap<String, Vec<u8>>| {
        t.into_iter().filter(|(k, _)| k != "provenance.json").collect()
    };
    same_tree(&strip(a), &strip(b), "eval outputs against an undisturbed eval");
}

/// D5: averaging single-file Hugging Face folders works, and a failure writes nothing.
#[test]
fn d5_average_of_hf_folders_validates_first_and_writes_a_whole_folder() {
    let (m, run) = trained(10, "10");
    let ck = run.join("checkpoints");
    for (name, step) in [("hf1", 5), ("hf2", 10)] {
        let d = m.path(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::copy(ck.join(format!("step_{step:06}.safetensors")), d.join("model.safetensors")).unwrap();
        std::fs::write(d.join("config.json"), format!("{{\"step\": {step}}}")).unwrap();
    }
    let out = m.path("avg");
    ok(
        exec("integrate", &["average", "--window", "2", &m.s("hf1"), &m.s("hf2"), "-o", &out.display().to_string()]),
        "average of HF folders",
    );
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("integration.json")).unwrap()).unwrap();
    assert_eq!(
        rec["recipe"]["inputs"][1]["files"][0]["sha256"],
        output::sha256_file(&m.path("hf2/model.safetensors")).unwrap()
    );
    assert_eq!(std::fs::read_to_string(out.join("config.json")).unwrap(), "{\"step\": 10}");
    assert!(out.join("model.safetensors").is_file());
    // a bad input is found before anything is written
    let bytes = std::fs::read(m.path("hf2/model.safetensors")).unwrap();
    std::fs::write(m.path("hf2/model.safetensors"), &bytes[..bytes.len() - 100]).unwrap();
    let out2 = m.path("avg2");
    let o =
        exec("integrate", &["average", "--window", "2", &m.s("hf1"), &m.s("hf2"), "-o", &out2.display().to_string()]);
    refused(&o, "hf2/model.safetensors", "average with a truncated input");
    assert!(!out2.exists(), "a failed average left {}", out2.display());
}

/// M1: an unreadable cached parquet is scored again; one bad sidecar does not block resume.
#[test]
fn m1_a_bad_cache_file_is_rescored_and_a_bad_old_sidecar_does_not_block_resume() {
    let (m, run) = trained(20, "10");
    ok(m.eval(&run), "eval");
    let before = tree(&run.join("eval"));
    let p = run.join("eval/step_000005.parquet");
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
    let o = ok(m.eval(&run), "eval over a truncated cache file");
    assert!(text(&o).contains("scoring again") && text(&o).contains("1 scored"), "{}", text(&o));
    same_tree(&tree(&run.join("eval")), &before, "eval outputs after rescoring");
    let s = run.join("checkpoints/step_000000.json");
    let t = std::fs::read_to_string(&s).unwrap();
    std::fs::write(&s, &t[..t.len() / 2]).unwrap();
    let o = ok(m.train("micro", &run), "resume with one bad old sidecar");
    assert!(text(&o).contains("resumed from step 10") && text(&o).contains("step_000000.json"), "{}", text(&o));
}

/// M2: an empty report and out-of-range options are refused, not accepted or clamped.
#[test]
fn m2_empty_reports_and_out_of_range_options_are_refused() {
    let (m, run) = trained(10, "10");
    ok(m.eval(&run), "eval");
    let r = run.display().to_string();
    refused(
        &exec_env("analysis", &["report", &r, "--tasks", "no_such_task"], &[]),
        "no task scores",
        "report with zero rows",
    );
    refused(
        &exec_env("analysis", &["report", &r, "--final-fraction", "0"], &[]),
        "--final-fraction",
        "final fraction 0",
    );
    refused(
        &exec_env("analysis", &["report", &r, "--final-fraction", "1.5"], &[]),
        "--final-fraction",
        "final fraction 1.5",
    );
    let ck = run.join("checkpoints");
    let (a, b) = (
        ck.join("step_000005.safetensors").display().to_string(),
        ck.join("step_000010.safetensors").display().to_string(),
    );
    refused(
        &exec_env("integrate", &["average", "--window", "2", "--ema=-0.5", &a, &b, "-o", &m.s("avg")], &[]),
        "--ema",
        "ema -0.5",
    );
    refused(
        &exec_env("integrate", &["average", "--window", "2", "--ema", "1.5", &a, &b, "-o", &m.s("avg")], &[]),
        "--ema",
        "ema 1.5",
    );
    assert!(!m.path("avg").exists() && !run.join("analysis").exists());
}

/// M3: `lm eval` from another working folder finds the tokenizer the sidecar names.
#[test]
fn m3_eval_from_another_working_folder_finds_the_tokenizer() {
    let m = Micro::new(10);
    let cfg = std::fs::read_to_string(m.path("micro.toml")).unwrap();
    let rel = cfg.replace(&m.s("corpus"), "corpus").replace(&m.s("tok.json"), "tok.json");
    std::fs::write(m.path("rel.toml"), rel).unwrap();
    ok(
        exec_in(m.dir.path(), "lm", &["train", "--quiet", "--config", "rel.toml", "--out", "run"], &[]),
        "train with relative paths",
    );
    let elsewhere = tempfile::tempdir().unwrap();
    let o = exec_in(
        elsewhere.path(),
        "lm",
        &["eval", "--quiet", "--checkpoints", &m.s("run/checkpoints"), "--config", &m.s("eval.toml")],
        &[],
    );
    ok(o, "lm eval from another folder");
    assert!(m.path("run/eval/tasks.csv").is_file());
}
