//! A corpus of bad inputs, each given to the command that reads it: every one must be refused
//! with a non-zero exit and an error naming the file (or option) and the problem, never a
//! panic, and nothing may be written to the output folder.

mod common;
use common::*;
use std::path::{Path, PathBuf};

/// A safetensors file of zero-filled tensors (name, dtype, shape).
fn st(tensors: &[(&str, &str, &[usize])]) -> Vec<u8> {
    let size = |d: &str| match d {
        "F64" | "I64" => 8,
        "F16" | "BF16" => 2,
        _ => 4,
    };
    let mut header = serde_json::Map::new();
    let mut off = 0usize;
    for (n, d, shape) in tensors {
        let len = shape.iter().product::<usize>() * size(d);
        header.insert(n.to_string(), serde_json::json!({"dtype": d, "shape": shape, "data_offsets": [off, off + len]}));
        off += len;
    }
    let h = serde_json::to_vec(&header).unwrap();
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend(h);
    out.extend(vec![0u8; off]);
    out
}

struct Case {
    name: &'static str,
    bin: &'static str,
    args: Vec<String>,
    /// what the error must name
    names: String,
    /// folder that must hold no file afterwards
    out: PathBuf,
}

#[test]
fn every_bad_input_is_refused_with_a_clear_error_and_nothing_written() {
    let m = Micro::new(10);
    let run = m.path("run");
    ok(m.train("micro", &run), "train");
    ok(m.eval(&run), "eval");
    m.write_config("other", 10, 32);
    let other = std::fs::read_to_string(m.path("other.toml"))
        .unwrap()
        .replace("tok.json", "tok2.json")
        .replace("vocab_size = 320", "vocab_size = 300");
    std::fs::write(m.path("other.toml"), other).unwrap();
    ok(exec("lm", &["tokenizer", "--config", &m.s("other.toml")]), "second tokenizer");
    m.write_config("wide", 5, 48);
    ok(m.train("wide", &m.path("wide")), "a wider model");

    let ck = run.join("checkpoints");
    let weights = std::fs::read(ck.join("step_000005.safetensors")).unwrap();
    let good = |d: &Path| {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join("good.safetensors"), &weights).unwrap();
        d.join("good.safetensors").display().to_string()
    };
    let mut cases: Vec<Case> = Vec::new();
    let mut n = 0;
    let mut dir = || {
        n += 1;
        let d = m.path(&format!("cases/{n}"));
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    let s = |p: &Path| p.display().to_string();

    // integrate average: broken and mismatched safetensors, bad options, bad places
    let mut avg = |name: &'static str, bytes: Vec<u8>, extra: &[&str], names: &str| {
        let d = dir();
        let a = good(&d.join("in"));
        std::fs::write(d.join("in/bad.safetensors"), bytes).unwrap();
        let mut args = vec!["average".to_string(), "--window".into(), "2".into()];
        args.extend(extra.iter().map(|x| x.to_string()));
        args.extend([a, s(&d.join("in/bad.safetensors")), "-o".into(), s(&d.join("out"))]);
        (name, args, names.to_string(), d.join("out"))
    };
    let mut lying = weights.clone();
    lying[..8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let mut past_end = weights.clone();
    past_end[..8].copy_from_slice(&(weights.len() as u64).to_le_bytes());
    let mut garbled = weights.clone();
    garbled[8..40].fill(b'#');
    let mut offsets = st(&[("w", "F32", &[4])]);
    offsets.truncate(offsets.len() - 8);
    let header_len = u64::from_le_bytes(weights[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&weights[8..8 + header_len]).unwrap();
    let names: Vec<(String, Vec<usize>)> = header
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| *k != "__metadata__")
        .map(|(k, v)| {
            (k.clone(), v["shape"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect())
        })
        .collect();
    let like = |f: &dyn Fn(usize, &str, &[usize]) -> Option<(String, String, Vec<usize>)>| {
        let t: Vec<(String, String, Vec<usize>)> =
            names.iter().enumerate().filter_map(|(i, (n, sh))| f(i, n, sh)).collect();
        let refs: Vec<(&str, &str, &[usize])> =
            t.iter().map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_slice())).collect();
        st(&refs)
    };
    let same = |_: usize, n: &str, sh: &[usize]| Some((n.to_string(), "F32".to_string(), sh.to_vec()));
    let avg_cases = vec![
        avg("truncated safetensors", weights[..weights.len() / 2].to_vec(), &[], "bad.safetensors"),
        avg("header length of 1 TB", lying, &[], "bad.safetensors"),
        avg("header length past the end", past_end, &[], "bad.safetensors"),
        avg("garbled header JSON", garbled, &[], "bad.safetensors"),
        avg("data offsets past the end", offsets, &[], "bad.safetensors"),
        avg("empty file", Vec::new(), &[], "bad.safetensors"),
        avg("eight bytes only", 0u64.to_le_bytes().to_vec(), &[], "bad.safetensors"),
        avg(
            "shape mismatch",
            like(&|i, n, sh| {
                Some((
                    n.to_string(),
                    "F32".into(),
                    if i == 0 { vec![sh[0] + 1, sh.get(1).copied().unwrap_or(1)] } else { sh.to_vec() },
                ))
            }),
            &[],
            "shape",
        ),
        avg(
            "dtype mismatch",
            like(&|i, n, sh| Some((n.to_string(), if i == 0 { "F16".into() } else { "F32".into() }, sh.to_vec()))),
            &[],
            "dtype",
        ),
        avg("a tensor missing", like(&|i, n, sh| if i == 0 { None } else { same(i, n, sh) }), &[], "missing"),
        avg(
            "an extra tensor",
            {
                let mut t = names.clone();
                t.push(("extra.weight".into(), vec![2]));
                let r: Vec<(&str, &str, &[usize])> = t.iter().map(|(a, b)| (a.as_str(), "F32", b.as_slice())).collect();
                st(&r)
            },
            &[],
            "extra.weight",
        ),
        avg("integer weights", like(&|_, n, sh| Some((n.to_string(), "I64".into(), sh.to_vec()))), &[], "dtype"),
        avg("ema below zero", weights.clone(), &["--ema=-0.5"], "--ema"),
        avg("ema above one", weights.clone(), &["--ema", "1.5"], "--ema"),
        avg("weights not summing to one", weights.clone(), &["--weights", "0.5,0.6"], "sum to 1"),
        avg("too few weights", weights.clone(), &["--weights", "1"], "--weights"),
    ];
    for (name, args, names, out) in avg_cases {
        cases.push(Case { name, bin: "integrate", args, names, out });
    }
    {
        let d = dir();
        let a = good(&d.join("in"));
        cases.push(Case {
            name: "window 0",
            bin: "integrate",
            args: vec!["average".into(), "--window".into(), "0".into(), a.clone(), "-o".into(), s(&d.join("out"))],
            names: "--window".into(),
            out: d.join("out"),
        });
        cases.push(Case {
            name: "missing input",
            bin: "integrate",
            args: vec![
                "average".into(),
                "--window".into(),
                "2".into(),
                a,
                s(&d.join("in/nope.safetensors")),
                "-o".into(),
                s(&d.join("out")),
            ],
            names: "nope.safetensors".into(),
            out: d.join("out"),
        });
        std::fs::create_dir_all(d.join("folder")).unwrap();
        cases.push(Case {
            name: "folder without weights",
            bin: "integrate",
            args: vec![
                "average".into(),
                "--window".into(),
                "1".into(),
                s(&d.join("folder")),
                "-o".into(),
                s(&d.join("out")),
            ],
            names: "folder".into(),
            out: d.join("out"),
        });
        let idx = d.join("sharded");
        std::fs::create_dir_all(&idx).unwrap();
        std::fs::write(idx.join("model.safetensors.index.json"), "{\"weight_map\": {").unwrap();
        cases.push(Case {
            name: "malformed shard index",
            bin: "integrate",
            args: vec!["average".into(), "--window".into(), "1".into(), s(&idx), "-o".into(), s(&d.join("out"))],
            names: "model.safetensors.index.json".into(),
            out: d.join("out"),
        });
        let idx2 = d.join("sharded2");
        std::fs::create_dir_all(&idx2).unwrap();
        std::fs::write(
            idx2.join("model.safetensors.index.json"),
            "{\"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\"}}",
        )
        .unwrap();
        cases.push(Case {
            name: "index naming a missing shard",
            bin: "integrate",
            args: vec!["average".into(), "--window".into(), "1".into(), s(&idx2), "-o".into(), s(&d.join("out"))],
            names: "model-00001-of-00002.safetensors".into(),
            out: d.join("out"),
        });
        std::fs::create_dir_all(d.join("taken")).unwrap();
        std::fs::write(d.join("taken/notes.txt"), "mine").unwrap();
        let a = good(&d.join("in2"));
        cases.push(Case {
            name: "output folder of something else",
            bin: "integrate",
            args: vec!["average".into(), "--window".into(), "1".into(), a, "-o".into(), s(&d.join("taken"))],
            names: "not an average".into(),
            out: d.join("none"),
        });
    }

    // integrate sweep / ensemble: bad sidecars and tables
    let ckpt_case = |d: &Path, sidecar: &str| {
        let c = d.join("checkpoints");
        std::fs::create_dir_all(&c).unwrap();
        std::fs::write(c.join("step_000005.safetensors"), &weights).unwrap();
        std::fs::write(c.join("step_000005.json"), sidecar).unwrap();
        c
    };
    let sidecar = std::fs::read_to_string(ck.join("step_000005.json")).unwrap();
    for (name, text, names) in [
        ("truncated sidecar", sidecar[..sidecar.len() / 2].to_string(), "step_000005.json"),
        ("sidecar without weights_file", sidecar.replace("\"weights_file\"", "\"weights_fil\""), "weights_file"),
        ("sidecar without step", sidecar.replace("\"step\"", "\"stp\""), "step"),
    ] {
        let d = dir();
        let c = ckpt_case(&d, &text);
        cases.push(Case {
            name,
            bin: "integrate",
            args: vec![
                "sweep".into(),
                "--checkpoints".into(),
                s(&c),
                "--windows".into(),
                "1".into(),
                "--out".into(),
                s(&d.join("out")),
            ],
            names: names.into(),
            out: d.join("out"),
        });
    }
    {
        let d = dir();
        let c = ckpt_case(&d, &sidecar);
        cases.push(Case {
            name: "sweep window 0",
            bin: "integrate",
            args: vec![
                "sweep".into(),
                "--checkpoints".into(),
                s(&c),
                "--windows".into(),
                "0".into(),
                "--out".into(),
                s(&d.join("out")),
            ],
            names: "window".into(),
            out: d.join("out"),
        });
        std::fs::write(c.join("step_000005.safetensors"), &weights[..100]).unwrap();
        cases.push(Case {
            name: "sweep over truncated weights",
            bin: "integrate",
            args: vec![
                "sweep".into(),
                "--checkpoints".into(),
                s(&c),
                "--windows".into(),
                "1".into(),
                "--out".into(),
                s(&d.join("out2")),
            ],
            names: "step_000005.safetensors".into(),
            out: d.join("out2"),
        });
        std::fs::create_dir_all(d.join("empty")).unwrap();
        cases.push(Case {
            name: "sweep over no checkpoints",
            bin: "integrate",
            args: vec!["sweep".into(), "--checkpoints".into(), s(&d.join("empty")), "--out".into(), s(&d.join("out3"))],
            names: "no checkpoints".into(),
            out: d.join("out3"),
        });
    }
    let examples = std::fs::read(run.join("eval/examples.parquet")).unwrap();
    let tasks_pq = std::fs::read(run.join("eval/tasks.parquet")).unwrap();
    for (name, bytes, names, windows) in [
        ("truncated examples table", Some(examples[..examples.len() / 2].to_vec()), "examples.parquet", "1"),
        ("missing examples table", None, "examples.parquet", "1"),
        ("a task table in place of the examples", Some(tasks_pq.clone()), "column", "1"),
        ("ensemble window 0", Some(examples.clone()), "window", "0"),
    ] {
        let d = dir();
        let e = d.join("eval");
        std::fs::create_dir_all(&e).unwrap();
        if let Some(b) = bytes {
            std::fs::write(e.join("examples.parquet"), b).unwrap();
        }
        cases.push(Case {
            name,
            bin: "integrate",
            args: vec![
                "ensemble".into(),
                "--eval".into(),
                s(&e),
                "--windows".into(),
                windows.into(),
                "--out".into(),
                s(&d.join("out")),
            ],
            names: names.into(),
            out: d.join("out"),
        });
    }

    // analysis report: lm-evaluation-harness results and our tables
    let results =
        |acc: &str| format!("{{\"results\": {{\"arc_easy\": {{\"acc,none\": {acc}, \"acc_stderr,none\": 0.01}}}}}}");
    for (name, files, names) in [
        ("malformed results JSON", vec![("m_step10.json", "{\"results\": [".to_string())], "m_step10.json"),
        ("truncated results JSON", vec![("m_step10.json", results("0.5")[..20].to_string())], "m_step10.json"),
        ("NaN accuracy", vec![("m_step10.json", results("\"nan\""))], "non-finite"),
        ("results file without a step", vec![("model.json", results("0.5"))], "model.json"),
        ("no results object", vec![("m_step10.json", "{\"config\": {}}".to_string())], "results"),
        ("empty folder", vec![], "harness"),
    ] {
        let d = dir();
        let h = d.join("harness");
        std::fs::create_dir_all(&h).unwrap();
        for (f, t) in files {
            std::fs::write(h.join(f), t).unwrap();
        }
        cases.push(Case {
            name,
            bin: "analysis",
            args: vec!["report".into(), s(&h), "--out".into(), s(&d.join("out"))],
            names: names.into(),
            out: d.join("out"),
        });
    }
    {
        let d = dir();
        let e = d.join("eval");
        std::fs::create_dir_all(&e).unwrap();
        std::fs::write(e.join("tasks.parquet"), &tasks_pq[..tasks_pq.len() / 3]).unwrap();
        cases.push(Case {
            name: "truncated task table",
            bin: "analysis",
            args: vec!["report".into(), s(&d), "--out".into(), s(&d.join("out"))],
            names: "tasks.parquet".into(),
            out: d.join("out"),
        });
        cases.push(Case {
            name: "final fraction 0",
            bin: "analysis",
            args: vec![
                "report".into(),
                s(&run),
                "--final-fraction".into(),
                "0".into(),
                "--out".into(),
                s(&d.join("out2")),
            ],
            names: "--final-fraction".into(),
            out: d.join("out2"),
        });
        cases.push(Case {
            name: "no task matches",
            bin: "analysis",
            args: vec!["report".into(), s(&run), "--tasks".into(), "zzz".into(), "--out".into(), s(&d.join("out3"))],
            names: "no task scores".into(),
            out: d.join("out3"),
        });
    }

    // lm eval: checkpoints, tokenizers and task files
    let one_ckpt = |d: &Path, w: &[u8], side: &str| {
        let c = d.join("checkpoints");
        std::fs::create_dir_all(&c).unwrap();
        std::fs::write(c.join("step_000005.safetensors"), w).unwrap();
        std::fs::write(c.join("step_000005.json"), side).unwrap();
        c
    };
    let eval_case = |name: &'static str, c: PathBuf, extra: Vec<String>, names: &str, out: PathBuf| {
        let mut args = vec!["eval".into(), "--quiet".into(), "--checkpoints".into(), s(&c), "--out".into(), s(&out)];
        args.extend(extra);
        if !args.contains(&"--config".to_string()) {
            args.extend(["--config".into(), m.s("eval.toml")]);
        }
        Case { name, bin: "lm", args, names: names.into(), out }
    };
    {
        let d = dir();
        let mut w = weights.clone();
        let mid = w.len() / 2;
        w[mid] ^= 0xff;
        cases.push(eval_case(
            "weights not matching their sidecar hash",
            one_ckpt(&d, &w, &sidecar),
            vec![],
            "step_000005.safetensors",
            d.join("out"),
        ));
        let d = dir();
        cases.push(eval_case(
            "another tokenizer",
            one_ckpt(&d, &weights, &sidecar),
            vec!["--tokenizer".into(), m.s("tok2.json")],
            "tokenizer",
            d.join("out"),
        ));
        let d = dir();
        cases.push(eval_case(
            "truncated sidecar",
            one_ckpt(&d, &weights, &sidecar[..sidecar.len() / 3]),
            vec![],
            "step_000005.json",
            d.join("out"),
        ));
        let d = dir();
        let c = one_ckpt(&d, &weights, &sidecar);
        std::fs::remove_file(c.join("step_000005.safetensors")).unwrap();
        cases.push(eval_case("weights file missing", c, vec![], "step_000005.safetensors", d.join("out")));
        let d = dir();
        let wide = std::fs::read(m.path("wide/checkpoints/step_000005.safetensors")).unwrap();
        let patched = sidecar.replace(&output::sha256_hex(&weights), &output::sha256_hex(&wide));
        cases.push(eval_case(
            "weights of another shape",
            one_ckpt(&d, &wide, &patched),
            vec![],
            "shape",
            d.join("out"),
        ));
        let d = dir();
        std::fs::create_dir_all(d.join("checkpoints")).unwrap();
        cases.push(eval_case("no checkpoints", d.join("checkpoints"), vec![], "no checkpoints", d.join("out")));
        // a version 2 config whose [eval] schedule (10 steps: only step 10) leaves out step 5
        let d = dir();
        let mut v2: serde_json::Value = serde_json::from_str(&sidecar).unwrap();
        let c2 = v2["config"].as_object_mut().unwrap();
        c2.remove("seed");
        c2.insert("schema_version".into(), 2.into());
        c2.insert("init_seed".into(), 7.into());
        c2.insert("data_seed".into(), 8.into());
        c2.insert("eval".into(), serde_json::json!({"final_fraction": 0.2, "lead": 0, "early": 0}));
        cases.push(eval_case(
            "no checkpoint in the [eval] schedule",
            one_ckpt(&d, &weights, &v2.to_string()),
            vec![],
            "lm schedule",
            d.join("out"),
        ));
    }
    let task_case = |name: &'static str, edit: &dyn Fn(&Path), names: &str| {
        let d = dir_for_tasks(&m, name);
        copy_dir(&m.path("tasks"), &d.join("tasks"));
        edit(&d.join("tasks"));
        std::fs::write(
            d.join("eval.toml"),
            std::fs::read_to_string(m.path("eval.toml")).unwrap().replace(&m.s("tasks"), &s(&d.join("tasks"))),
        )
        .unwrap();
        let c = one_ckpt(&d, &weights, &sidecar);
        eval_case(name, c, vec!["--config".into(), s(&d.join("eval.toml"))], names, d.join("out"))
    };
    let rewrite = |dir: &Path, f: &dyn Fn(String) -> String| {
        let text = std::fs::read_to_string(dir.join("mc.jsonl")).unwrap();
        let new = f(text);
        std::fs::write(dir.join("mc.jsonl"), &new).unwrap();
        let mp = dir.join("manifest.json");
        let mut man: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(&mp).unwrap()).unwrap();
        for e in man.iter_mut().filter(|e| e["name"] == "mc") {
            e["sha256"] = serde_json::json!(output::sha256_hex(new.as_bytes()));
            e["examples"] = serde_json::json!(new.lines().filter(|l| !l.trim().is_empty()).count());
        }
        std::fs::write(mp, serde_json::to_string(&man).unwrap()).unwrap();
    };
    cases.push(task_case(
        "duplicate example id",
        &|t| rewrite(t, &|x| x.replace("\"mc/1\"", "\"mc/0\"")),
        "duplicate example id",
    ));
    cases.push(task_case("empty task file", &|t| rewrite(t, &|_| String::new()), "no examples"));
    cases.push(task_case(
        "gold outside the choices",
        &|t| rewrite(t, &|x| x.replacen("\"gold\":0", "\"gold\":7", 1)),
        "gold",
    ));
    cases.push(task_case(
        "malformed example line",
        &|t| rewrite(t, &|x| format!("{{not json\n{x}")),
        "malformed example",
    ));
    cases.push(task_case(
        "task file changed after the manifest",
        &|t| std::fs::write(t.join("mc.jsonl"), "{}\n").unwrap(),
        "differs from the manifest",
    ));
    cases.push(task_case(
        "malformed manifest",
        &|t| std::fs::write(t.join("manifest.json"), "[{").unwrap(),
        "manifest.json",
    ));

    // lm train: configs and corpus
    let train_case = |name: &'static str, edit: &dyn Fn(String) -> String, names: &str, m: &Micro, d: PathBuf| {
        let cfg = edit(std::fs::read_to_string(m.path("micro.toml")).unwrap());
        std::fs::write(d.join("c.toml"), cfg).unwrap();
        Case {
            name,
            bin: "lm",
            args: vec![
                "train".into(),
                "--quiet".into(),
                "--config".into(),
                s(&d.join("c.toml")),
                "--out".into(),
                s(&d.join("out")),
            ],
            names: names.into(),
            out: d.join("out"),
        }
    };
    cases.push(train_case(
        "config with an unknown field",
        &|c| c.replace("seed = 7", "seed = 7\nsede = 1"),
        "sede",
        &m,
        dir(),
    ));
    cases.push(train_case(
        "heads not dividing the width",
        &|c| c.replace("n_heads = 4", "n_heads = 5"),
        "n_heads",
        &m,
        dir(),
    ));
    cases.push(train_case(
        "missing corpus",
        &|c| c.replace(&m.s("corpus"), "/nonexistent/corpus"),
        "/nonexistent/corpus",
        &m,
        dir(),
    ));
    cases.push(train_case(
        "tokenizer of another vocabulary",
        &|c| c.replace(&m.s("tok.json"), &m.s("tok2.json")),
        "vocab size",
        &m,
        dir(),
    ));
    {
        let d = dir();
        copy_dir(&run, &d.join("out"));
        let before = tree(&d.join("out"));
        let c = train_case(
            "another config for an existing run",
            &|c| c.replace("lr = 3e-3", "lr = 4e-3"),
            "another config",
            &m,
            d.clone(),
        );
        let o = exec(c.bin, &c.args.iter().map(String::as_str).collect::<Vec<_>>());
        refused(&o, &c.names, c.name);
        same_tree(&tree(&d.join("out")), &before, c.name);
    }

    // lm-evaluation-harness output folders (OUT/<model>/results_<ts>.json, samples_<task>_<ts>.jsonl)
    let lm_eval_tree = |d: &Path, model: &str, args: &str, samples: &str| {
        let f = d.join("OUT").join(model);
        std::fs::create_dir_all(&f).unwrap();
        std::fs::write(
            f.join("results_2024-01-01T00-00-00.1.json"),
            format!("{{\"results\": {{\"t\": {{\"acc,none\": 0.5}}}}, \"config\": {{\"model_args\": {args}}}}}"),
        )
        .unwrap();
        if !samples.is_empty() {
            std::fs::write(f.join("samples_t_2024-01-01T00-00-00.1.jsonl"), samples).unwrap();
        }
    };
    let line = r#"{"doc_id": 0, "target": 0, "filtered_resps": [["-1.0", "False"], ["-2.0", "False"]]}"#;
    for (name, trees, names, extra) in [
        (
            "malformed samples line",
            vec![("m", r#""pretrained=m,revision=step1""#, format!("{line}\n{{\"doc_id\": 1, \"tar"))],
            "samples_t_2024-01-01T00-00-00.1.jsonl:2",
            vec![],
        ),
        (
            "sample target outside the options",
            vec![("m", r#""pretrained=m,revision=step1""#, line.replace("\"target\": 0", "\"target\": 5"))],
            "samples_t_2024-01-01T00-00-00.1.jsonl:1",
            vec![],
        ),
        (
            "one step in two runs",
            vec![
                ("a", r#"{"pretrained": "a", "revision": "step3"}"#, String::new()),
                ("b", r#"{"pretrained": "runs/step_3"}"#, String::new()),
            ],
            "step 3",
            vec![],
        ),
        (
            "model_args naming two steps",
            vec![("a", r#""pretrained=ckpt/step_4,revision=step5""#, String::new())],
            "results_2024-01-01T00-00-00.1.json",
            vec![],
        ),
        (
            "model_args naming no step",
            vec![("a", r#"{"pretrained": "org/model"}"#, String::new())],
            "--step-map",
            vec![],
        ),
        (
            "step regex without a group",
            vec![("a", r#"{"pretrained": "org/model"}"#, String::new())],
            "--step-from",
            vec!["--step-from".to_string(), "step\\d+".to_string()],
        ),
    ] {
        let d = dir();
        for (model, args, samples) in &trees {
            lm_eval_tree(&d, model, args, samples);
        }
        let mut args = vec!["report".into(), s(&d.join("OUT")), "--out".into(), s(&d.join("out"))];
        args.extend(extra);
        cases.push(Case { name, bin: "analysis", args, names: names.into(), out: d.join("out") });
    }
    {
        let d = dir();
        lm_eval_tree(&d, "m", r#""pretrained=m,revision=step1""#, line);
        cases.push(Case {
            name: "ensemble of lm-eval folders without --out",
            bin: "integrate",
            args: vec!["ensemble".into(), "--eval".into(), s(&d.join("OUT")), "--windows".into(), "1".into()],
            names: "--out is required".into(),
            out: d.join("OUT/m/k1"),
        });
        let d = dir();
        lm_eval_tree(&d, "m", r#""pretrained=m,revision=step1""#, "");
        cases.push(Case {
            name: "ensemble of lm-eval folders without samples",
            bin: "integrate",
            args: vec!["ensemble".into(), "--eval".into(), s(&d.join("OUT")), "--out".into(), s(&d.join("out"))],
            names: "--log_samples".into(),
            out: d.join("out"),
        });
    }

    // lm export: the checkpoint is verified before anything is written
    {
        let d = dir();
        let mut w = weights.clone();
        let mid = w.len() / 2;
        w[mid] ^= 0xff;
        let c = one_ckpt(&d, &w, &sidecar);
        cases.push(Case {
            name: "export of weights not matching their sidecar",
            bin: "lm",
            args: vec!["export".into(), s(&c.join("step_000005.json")), s(&d.join("out"))],
            names: "step_000005.safetensors".into(),
            out: d.join("out"),
        });
        let d = dir();
        let c = one_ckpt(&d, &weights, &sidecar);
        cases.push(Case {
            name: "export of optimizer state",
            bin: "lm",
            args: vec!["export".into(), s(&c.join("step_000005.optim.safetensors")), s(&d.join("out"))],
            names: "optimizer".into(),
            out: d.join("out"),
        });
        let d = dir();
        let c = one_ckpt(&d, &weights, &sidecar);
        cases.push(Case {
            name: "export with another tokenizer",
            bin: "lm",
            args: vec![
                "export".into(),
                s(&c.join("step_000005.json")),
                s(&d.join("out")),
                "--tokenizer".into(),
                m.s("tok2.json"),
            ],
            names: "tokenizer".into(),
            out: d.join("out"),
        });
    }

    let mut refused_count = 0;
    let mut empty = vec![];
    for c in &cases {
        let args: Vec<&str> = c.args.iter().map(String::as_str).collect();
        let existed = c.out.exists();
        let o = exec(c.bin, &args);
        refused(&o, &c.names, c.name);
        let written = tree(&c.out);
        assert!(written.is_empty(), "{}: wrote {:?}", c.name, written.keys().collect::<Vec<_>>());
        // not even an empty folder is left behind (an integer tensor once left one)
        if !existed && c.out.exists() {
            empty.push(c.name);
        }
        refused_count += 1;
    }
    assert!(empty.is_empty(), "refused, but left an empty output folder: {empty:?}");
    let total = refused_count + 1;
    eprintln!("bad inputs: {total} cases, every one refused with a clear error, no panic, nothing written");
    assert!(total >= 40, "only {total} cases");
}

fn dir_for_tasks(m: &Micro, name: &str) -> PathBuf {
    let d = m.path(&format!("task-cases/{}", name.replace(' ', "-")));
    std::fs::create_dir_all(&d).unwrap();
    d
}
