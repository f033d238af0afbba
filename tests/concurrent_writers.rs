//! Two writers on one folder: the second is refused with the holder's pid, and nothing the
//! first writes is corrupted.

mod common;
use common::*;

#[test]
fn a_second_writer_of_any_command_is_refused() {
    let m = Micro::new(10);
    let run = m.path("run");
    let r = |rel: &str| run.join(rel).display().to_string();
    ok(m.train("micro", &run), "train");
    ok(m.eval(&run), "eval");
    ok(run_cmd_sweep(&r("checkpoints")), "sweep");
    let cases: Vec<(&str, Vec<String>, String)> = vec![
        (
            "lm",
            vec!["train".into(), "--quiet".into(), "--config".into(), m.s("micro.toml"), "--out".into(), r("")],
            r(""),
        ),
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
            vec!["sweep".into(), "--checkpoints".into(), r("checkpoints"), "--windows".into(), "2".into()],
            r("averaged"),
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
                "--window".into(),
                "2".into(),
                r("checkpoints/step_000005.safetensors"),
                r("checkpoints/step_000010.safetensors"),
                "-o".into(),
                m.s("avg"),
            ],
            m.s("avg"),
        ),
        ("analysis", vec!["report".into(), r(""), "--bootstrap".into(), "10".into()], r("analysis")),
    ];
    for (b, args, folder) in &cases {
        let lock = output::FolderLock::acquire(std::path::Path::new(folder), "the test").unwrap();
        let before = tree(std::path::Path::new(folder));
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = exec(b, &a);
        let what = format!("{b} {} while the folder is locked", args[0]);
        refused(&o, "another writer holds this folder", &what);
        refused(&o, &format!("pid {}", std::process::id()), &what);
        same_tree(&tree(std::path::Path::new(folder)), &before, &what);
        drop(lock);
        ok(exec(b, &a), &format!("{b} {} once the folder is free", args[0]));
    }
}

fn run_cmd_sweep(ckpts: &str) -> std::process::Output {
    exec("integrate", &["sweep", "--checkpoints", ckpts, "--windows", "2", "--last", "1"])
}

#[test]
fn two_trainings_of_one_run_the_second_is_refused_and_the_first_is_intact() {
    let m = Micro::new(300);
    let (a, reference) = (m.path("a"), m.path("b"));
    ok(m.train("micro", &reference), "reference run");
    let a_str = a.display().to_string();
    let mut first =
        spawn_holding("lm", &["train", "--quiet", "--config", &m.s("micro.toml"), "--out", &a_str], &a.join(".lock"));
    let second = m.train("micro", &a);
    let busy = first.try_wait().unwrap().is_none();
    assert!(busy, "the first training finished before the second started: make the run longer");
    refused(&second, "another writer holds this folder", "second lm train");
    refused(&second, &format!("pid {}", first.id()), "second lm train");
    assert!(first.wait().unwrap().success(), "the first training failed");
    same_tree(&tree(&a), &tree(&reference), "the first training against an undisturbed run");
    assert!(leftovers(&a).is_empty());
}
