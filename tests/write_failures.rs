//! Write failures injected with `FLUCT_FAIL_AFTER_BYTES` (every write of the process fails, as
//! on a full disk, once that many bytes are written; CI runs as root, so a read-only folder
//! would not fail a write): each command exits non-zero naming the file it was writing, the
//! previous outputs stay byte-identical, no temp file is left, and a rerun completes.

mod common;
use common::*;

const FULL: &str = "no space left on device";

#[test]
fn a_failing_write_keeps_previous_outputs_and_names_the_file() {
    let m = Micro::new(20);
    let run = m.path("run");
    let r = |rel: &str| run.join(rel).display().to_string();
    ok(
        exec_env(
            "lm",
            &["train", "--quiet", "--config", &m.s("micro.toml"), "--out", &r(""), "--stop-after", "10"],
            &[],
        ),
        "train to 10",
    );
    ok(m.eval(&run), "eval");
    ok(exec("integrate", &["sweep", "--checkpoints", &r("checkpoints"), "--windows", "2", "--last", "2"]), "sweep");
    ok(exec("integrate", &["ensemble", "--eval", &r("eval"), "--windows", "1,2"]), "ensemble");
    let avg = m.s("avg");
    let inputs = [r("checkpoints/step_000005.safetensors"), r("checkpoints/step_000010.safetensors")];
    ok(exec("integrate", &["average", "--window", "2", &inputs[0], &inputs[1], "-o", &avg]), "average");
    ok(exec("analysis", &["report", &r(""), "--bootstrap", "20"]), "report");

    // (command, args, folder whose files must survive)
    let mut cases: Vec<(&str, Vec<String>, String)> = vec![
        (
            "lm",
            vec![
                "eval".into(),
                "--quiet".into(),
                "--checkpoints".into(),
                r("checkpoints"),
                "--config".into(),
                m.s("eval.toml"),
            ],
            r("eval"),
        ),
        (
            "integrate",
            vec!["ensemble".into(), "--eval".into(), r("eval"), "--windows".into(), "1,2".into()],
            r("ensembled"),
        ),
        (
            "integrate",
            vec![
                "average".into(),
                "--force".into(),
                "--window".into(),
                "2".into(),
                "--weights".into(),
                "0.25,0.75".into(),
                inputs[0].clone(),
                inputs[1].clone(),
                "-o".into(),
                avg.clone(),
            ],
            avg.clone(),
        ),
        ("analysis", vec!["report".into(), r(""), "--bootstrap".into(), "30".into()], r("analysis")),
    ];
    // averaging new windows (k = 3 is not there yet) fails on its first file
    cases.push((
        "integrate",
        vec![
            "sweep".into(),
            "--checkpoints".into(),
            r("checkpoints"),
            "--windows".into(),
            "3".into(),
            "--last".into(),
            "1".into(),
        ],
        r("averaged"),
    ));
    let mut failures = 0;
    for (bin_name, args, keep) in &cases {
        // a third budget that fails part-way through the files the command rewrites (eval's
        // per-checkpoint caches are up to date, a sweep adds one model of the size of one there)
        let rewritten = |k: &String| !(bin_name == &"lm" && k.starts_with("step_"));
        let size: usize =
            tree(std::path::Path::new(keep)).iter().filter(|(k, _)| rewritten(k)).map(|(_, v)| v.len()).sum::<usize>()
                / if args[0] == "sweep" { 3 } else { 1 };
        for budget in ["0".to_string(), "700".to_string(), (size / 2).to_string()] {
            let budget = budget.as_str();
            let before = tree(std::path::Path::new(keep));
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            let o = exec_env(bin_name, &a, &[("FLUCT_FAIL_AFTER_BYTES", budget)]);
            let what = format!("{bin_name} {} with {budget} bytes", args[0]);
            refused(&o, FULL, &what);
            refused(&o, keep, &what); // names a file in the output folder
            same_tree(&tree(std::path::Path::new(keep)), &before, &what);
            assert!(leftovers(m.dir.path()).is_empty(), "{what}: left {:?}", leftovers(m.dir.path()));
            failures += 1;
        }
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(exec(bin_name, &a), &format!("{bin_name} {} rerun without faults", args[0]));
    }

    // training: a checkpoint write fails part-way; older checkpoints and the log's rows survive
    let before = tree(&run.join("checkpoints"));
    let log = std::fs::read_to_string(run.join("train_log.csv")).unwrap();
    for budget in ["0", "5000", "60000"] {
        let o = exec_env(
            "lm",
            &["train", "--quiet", "--config", &m.s("micro.toml"), "--out", &r("")],
            &[("FLUCT_FAIL_AFTER_BYTES", budget)],
        );
        refused(&o, FULL, &format!("train with {budget} bytes"));
        refused(&o, &r(""), &format!("train with {budget} bytes"));
        let now = tree(&run.join("checkpoints"));
        for (k, v) in &before {
            // sidecars of older checkpoints may lose their optimizer entry (pruned), weights never change
            if k.ends_with(".safetensors") && !k.contains("optim") {
                assert!(now.get(k) == Some(v), "train with {budget} bytes: {k} changed or vanished");
            }
        }
        assert!(
            std::fs::read_to_string(run.join("train_log.csv")).unwrap().starts_with(&log),
            "train with {budget} bytes: the log lost rows"
        );
        assert!(leftovers(m.dir.path()).is_empty(), "train with {budget}: left {:?}", leftovers(m.dir.path()));
        failures += 1;
    }
    let o = ok(m.train("micro", &run), "train resumed without faults");
    assert!(text(&o).contains("resumed from step"), "{}", text(&o));
    eprintln!("write failures: {failures} injected, every one refused with the file named, previous outputs intact");
}
