//! kill -9 at seeded random points of training, evaluation, averaging and ensembling on a micro
//! run; each interrupted stage, run again, must give outputs byte-identical to an uninterrupted
//! run and leave no temp file or lock behind. `FAULT_KILLS` sets the number of kills (CI: 32;
//! `just test-faults`: more).

mod common;
use common::*;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

struct Stage {
    name: &'static str,
    /// output folder, relative to the run folder ("" = the whole run)
    out: &'static str,
    bin: &'static str,
    args: Vec<String>,
}

fn stages(m: &Micro, run: &Path) -> Vec<Stage> {
    let r = |rel: &str| run.join(rel).display().to_string();
    vec![
        Stage {
            name: "train",
            out: "",
            bin: "lm",
            args: vec!["train".into(), "--quiet".into(), "--config".into(), m.s("micro.toml"), "--out".into(), r("")],
        },
        Stage {
            name: "eval",
            out: "eval",
            bin: "lm",
            args: vec![
                "eval".into(),
                "--quiet".into(),
                "--checkpoints".into(),
                r("checkpoints"),
                "--config".into(),
                m.s("eval.toml"),
            ],
        },
        Stage {
            name: "average",
            out: "averaged",
            bin: "integrate",
            args: vec![
                "sweep".into(),
                "--checkpoints".into(),
                r("checkpoints"),
                "--windows".into(),
                "2,4".into(),
                "--last".into(),
                "4".into(),
            ],
        },
        Stage {
            name: "ensemble",
            out: "ensembled",
            bin: "integrate",
            args: vec!["ensemble".into(), "--eval".into(), r("eval"), "--windows".into(), "1,2,4".into()],
        },
    ]
}

fn run_stage(s: &Stage) -> std::process::Output {
    let args: Vec<&str> = s.args.iter().map(String::as_str).collect();
    exec(s.bin, &args)
}

#[test]
fn killed_at_random_points_every_stage_resumes_to_identical_outputs() {
    let kills: usize = std::env::var("FAULT_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(32);
    let m = Micro::new(40);
    let run_dir = m.path("work/run");
    let stages = stages(&m, &run_dir);
    // the uninterrupted reference, timing each stage
    let mut secs = Vec::new();
    for s in &stages {
        let t = Instant::now();
        ok(run_stage(s), s.name);
        secs.push(t.elapsed().as_secs_f64());
    }
    let reference = tree(&run_dir);
    assert!(leftovers(&run_dir).is_empty(), "{:?}", leftovers(&run_dir));
    let saved = m.path("reference");
    copy_dir(&run_dir, &saved);

    let mut rng = Rng(20261203);
    let mut landed = [0usize; 4];
    for i in 0..kills {
        let k = i % stages.len();
        let s = &stages[k];
        // the state before this stage: the reference without this stage's outputs
        std::fs::remove_dir_all(&run_dir).unwrap();
        if s.out.is_empty() {
            std::fs::create_dir_all(&run_dir).unwrap();
        } else {
            copy_dir(&saved, &run_dir);
            std::fs::remove_dir_all(run_dir.join(s.out)).unwrap();
        }
        let mut child = Command::new(bin(s.bin))
            .args(&s.args)
            .current_dir(root())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_secs_f64(rng.unit() * secs[k] * 1.1));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap(); // SIGKILL
            landed[k] += 1;
        }
        child.wait().unwrap();
        ok(run_stage(s), &format!("{} resumed after kill {i}", s.name));
        let expected: std::collections::BTreeMap<String, Vec<u8>> = if s.out.is_empty() {
            reference
                .iter()
                .filter(|(k, _)| k.starts_with("checkpoints/") || *k == "config.toml" || *k == "train_log.csv")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        } else {
            reference.clone()
        };
        same_tree(&tree(&run_dir), &expected, &format!("{} after kill {i}", s.name));
        assert!(leftovers(&run_dir).is_empty(), "{} after kill {i} left {:?}", s.name, leftovers(&run_dir));
    }
    let total: usize = landed.iter().sum();
    eprintln!("kill -9: {kills} injected, {total} landed while running (train {}, eval {}, average {}, ensemble {}); every resume byte-identical, nothing left behind", landed[0], landed[1], landed[2], landed[3]);
    assert!(total * 2 >= kills, "too few kills landed mid-run ({total} of {kills}): the stage timings are off");
}
