//! `analysis report` on the vendored Pythia results under their own names
//! (`<model>_step<N>.json`) and on the same numbers laid out as `lm_eval --output_path OUT`
//! writes them (`OUT/<model>/results_<timestamp>.json`, the step only in `config.model_args`):
//! the two reports are identical, and a rerun with an older timestamp is set aside.

use std::path::{Path, PathBuf};
use std::process::Command;

const PYTHIA: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/external/pythia-v1-zero-shot/pythia-160m-deduped");
const TASKS: &str = "arc_easy,arc_challenge,piqa,sciq,lambada_openai";

fn report(inputs: &[PathBuf], out: &Path, extra: &[&str]) -> (String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_analysis"))
        .arg("report")
        .args(inputs)
        .args(["--out".as_ref(), out.as_os_str(), "--tasks".as_ref(), TASKS.as_ref()])
        .args(extra)
        .output()
        .unwrap();
    let (stdout, stderr) =
        (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned());
    assert!(o.status.success(), "analysis report failed: {stderr}");
    // the last line names the output folder
    (stdout.lines().filter(|l| !l.starts_with("tables written to")).collect::<Vec<_>>().join("\n"), stderr)
}

#[test]
fn an_lm_eval_output_folder_gives_the_same_report_as_the_pythia_naming() {
    let dir = tempfile::tempdir().unwrap();
    let mut files: Vec<PathBuf> = std::fs::read_dir(PYTHIA).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert_eq!(files.len(), 27, "the vendored Pythia 160m results");
    // OUT/<model>/results_<ts>.json, every revision of the model in one folder as lm_eval writes
    // it; model_args alternately as the old `k=v,k=v` string and as 0.4.13's JSON object
    let model = dir.path().join("OUT").join("EleutherAI__pythia-v1.1-160m-deduped");
    std::fs::create_dir_all(&model).unwrap();
    for (i, f) in files.iter().enumerate() {
        let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        let args = v["config"]["model_args"].as_str().unwrap().to_string();
        assert!(args.contains("revision=step"), "{args}");
        if i % 2 == 1 {
            let obj: serde_json::Map<String, serde_json::Value> =
                args.split(',').map(|kv| kv.split_once('=').unwrap()).map(|(k, v)| (k.to_string(), v.into())).collect();
            v["config"]["model_args"] = obj.into();
        }
        let ts = format!("2024-06-{:02}T10-00-00.{:06}", 1 + i / 10, i);
        std::fs::write(model.join(format!("results_{ts}.json")), serde_json::to_string_pretty(&v).unwrap()).unwrap();
        if i == 20 {
            // an earlier rerun of the same revision with other numbers: set aside
            for (_, m) in v["results"].as_object_mut().unwrap() {
                if let Some(a) = m.get_mut("acc") {
                    *a = 0.0.into();
                }
            }
            std::fs::write(model.join("results_2024-05-01T00-00-00.000001.json"), serde_json::to_string(&v).unwrap())
                .unwrap();
        }
    }
    let (pythia, _) = report(&[PathBuf::from(PYTHIA)], &dir.path().join("a"), &[]);
    let (layout, notes) = report(&[dir.path().join("OUT")], &dir.path().join("b"), &[]);
    assert!(pythia.contains("arc_easy") && pythia.contains("window: final"), "{pythia}");
    assert_eq!(layout, pythia, "the lm-eval layout gives another report");
    assert!(notes.contains("kept the newest") && notes.contains("results_2024-05-01T00-00-00.000001.json"), "{notes}");
    for f in ["task_metrics.csv", "task_metrics.parquet"] {
        assert_eq!(
            std::fs::read(dir.path().join("a").join(f)).unwrap(),
            std::fs::read(dir.path().join("b").join(f)).unwrap(),
            "{f} differs"
        );
    }
    let prov: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("b/provenance.json")).unwrap()).unwrap();
    assert!(prov["notices"][0].as_str().unwrap().contains("set aside"), "{prov}");
    // a glob over the results files gives it too
    let (globbed, _) = report(&[model.join("results_2024-06-*.json")], &dir.path().join("c"), &[]);
    assert_eq!(globbed, pythia);
}

#[test]
fn lm_eval_inputs_need_an_output_folder_and_a_step() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("OUT/org__model");
    std::fs::create_dir_all(&m).unwrap();
    std::fs::write(
        m.join("results_2024-01-01T00-00-00.1.json"),
        r#"{"results": {"t": {"acc,none": 0.5}}, "config": {"model_args": {"pretrained": "org/model"}}}"#,
    )
    .unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_analysis"))
            .arg("report")
            .arg(dir.path().join("OUT"))
            .args(args)
            .output()
            .unwrap()
    };
    // the cheap check first: without --out nothing is read
    let o = run(&[]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("--out is required"));
    let out = dir.path().join("x").display().to_string();
    let o = run(&["--out", &out]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && e.contains("results_2024-01-01T00-00-00.1.json") && e.contains("--step-from"),
        "{e}"
    );
    let o = run(&["--out", &out, "--step-from", "[("]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("--step-from"));
    // a step map gives the step; one checkpoint is too few to analyse, but it reads
    std::fs::write(dir.path().join("map.csv"), format!("path,step\n{},5\n", m.display())).unwrap();
    let o = run(&["--step-map", &dir.path().join("map.csv").display().to_string()]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--out is required"), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!dir.path().join("OUT/analysis").exists(), "nothing written into the lm-eval folder");
}

/// `analysis report` on an lm_eval folder with `--log_samples`: example-level figures from the
/// samples, equal to the hand values. Three revisions, four examples, option 0 gold; correct
/// per step: C C C / C W C / W W C / W W W.
#[test]
fn log_samples_give_the_example_level_report_through_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("OUT/org__model");
    std::fs::create_dir_all(&m).unwrap();
    let correct = [[true, true, true], [true, false, true], [false, false, true], [false, false, false]];
    for (i, step) in [100, 200, 300].into_iter().enumerate() {
        let ts = format!("2024-01-0{}T00-00-00.000001", i + 1);
        let acc = correct.iter().filter(|c| c[i]).count() as f64 / 4.0;
        let results = serde_json::json!({"results": {"t": {"acc,none": acc, "acc_stderr,none": 0.1, "alias": "t"}}, "config": {"model": "hf", "model_args": format!("pretrained=org/model,revision=step{step}")}});
        std::fs::write(m.join(format!("results_{ts}.json")), results.to_string()).unwrap();
        let lines: String = correct
            .iter()
            .enumerate()
            .map(|(doc, c)| {
                let (l0, l1) = if c[i] { ("-1.0", "-2.0") } else { ("-2.0", "-1.0") };
                format!("{{\"doc_id\": {doc}, \"target\": 0, \"arguments\": [[\"Q\", \" x\"], [\"Q\", \" y\"]], \"filtered_resps\": [[\"{l0}\", \"False\"], [\"{l1}\", \"False\"]], \"acc\": {}}}\n", if c[i] { "1.0" } else { "0.0" })
            })
            .collect();
        std::fs::write(m.join(format!("samples_t_{ts}.jsonl")), lines).unwrap();
    }
    let out = dir.path().join("report");
    let o = Command::new(env!("CARGO_BIN_EXE_analysis"))
        .arg("report")
        .arg(dir.path().join("OUT"))
        .args(["--out".as_ref(), out.as_os_str()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tm = std::fs::read_to_string(out.join("task_metrics.csv")).unwrap();
    // no quoted fields in this table
    let mut lines = tm.lines().map(|l| l.split(',').collect::<Vec<_>>());
    let h = lines.next().unwrap();
    let col = |name: &str| h.iter().position(|x| *x == name).unwrap();
    let row = lines
        .find(|r| r[col("task")] == "t" && r[col("window")] == "all" && r[col("metric")] == "acc")
        .expect("an all-checkpoint acc row of t");
    let num = |name: &str| row[col(name)].parse::<f64>().unwrap();
    // task scores 0.5, 0.25, 0.75: MTV (0.25 + 0.5) / 2; flip rates 0, 1, 0.5, 0: mean 0.375
    assert!((num("mtv") - 0.375).abs() < 1e-12 && (num("mean_flip_rate") - 0.375).abs() < 1e-12, "{tm}");
    assert_eq!(row[col("examples")], "4");
    let em = std::fs::read_to_string(out.join("example_metrics.csv")).unwrap();
    assert!(em.lines().any(|l| l.starts_with("t,all,t/1,1,1,1.0")), "{em}");
}
