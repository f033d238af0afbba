//! The lighteval, OLMES and llm-jp-eval readers on their fixtures (`tests/fixtures/*`), through
//! `source::load_all`, and on broken copies of them: a truncated file, examples missing at one
//! checkpoint, a duplicate id in one file, options that change between checkpoints.

use records::harness::StepRule;
use records::lighteval::Lighteval;
use records::llmjp::LlmJpEval;
use records::olmes::Olmes;
use records::polars::prelude::*;
use records::source::{load_all, Ingest, Loaded, Reader};
use records::{ExampleRecord, TaskRecord};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn load(reader: &dyn Reader, input: &Path, rule: &StepRule) -> anyhow::Result<(Loaded, Vec<ExampleRecord>)> {
    load_all(reader, &[input.to_path_buf()], rule, &Ingest::default())
}

fn err(r: anyhow::Result<(Loaded, Vec<ExampleRecord>)>) -> String {
    match r {
        Ok((l, rows)) => panic!("expected an error, got {} rows and notices {:?}", rows.len(), l.notices),
        Err(e) => format!("{e:#}"),
    }
}

fn row<'a>(rows: &'a [ExampleRecord], step: u64, id: &str) -> &'a ExampleRecord {
    rows.iter().find(|r| r.step == step && r.example_id == id).unwrap_or_else(|| panic!("no row {id} at step {step}"))
}

fn task_row<'a>(tasks: &'a [TaskRecord], step: u64, task: &str) -> &'a TaskRecord {
    tasks.iter().find(|t| t.step == step && t.task == task).unwrap_or_else(|| panic!("no task row {task} at {step}"))
}

/// A copy of a fixture folder in a temporary folder.
fn copy_of(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dst = tmp.path().join(name);
    copy_dir(&fixture(name), &dst);
    (tmp, dst)
}

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}

/// The one file below `dir` whose path contains every one of `parts`.
fn find(dir: &Path, parts: &[&str]) -> PathBuf {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if parts.iter().all(|s| p.to_string_lossy().contains(s)) {
                hits.push(p);
            }
        }
    }
    assert_eq!(hits.len(), 1, "{parts:?}: {hits:?}");
    hits.pop().unwrap()
}

fn truncate(path: &Path) {
    let b = std::fs::read(path).unwrap();
    std::fs::write(path, &b[..b.len() * 2 / 3]).unwrap();
}

// ---------------------------------------------------------------------------------------------
// lighteval (fixture written by lighteval 0.13.0 itself: scripts/make_lighteval_fixture.py)

#[test]
fn lighteval_fixture_reads_through_load_all() {
    let (loaded, rows) = load(&Lighteval, &fixture("lighteval"), &StepRule::default()).unwrap();
    assert!(loaded.notices.is_empty(), "{:?}", loaded.notices);
    let steps: BTreeSet<u64> = rows.iter().map(|r| r.step).collect();
    assert_eq!(steps, BTreeSet::from([1000, 2000, 3000]), "steps from the model names ckpt/step<N>");
    let tasks: BTreeSet<&str> = rows.iter().map(|r| r.task.as_str()).collect();
    assert_eq!(tasks, BTreeSet::from(["tinymc|0", "tinyqa|0"]));
    assert_eq!(rows.len(), 3 * 2 * 5);
    // 6 details files and 3 results files
    assert_eq!(loaded.sources.len(), 9, "{:?}", loaded.sources);

    // multiple choice: doc 3 ("What do bees make?", gold " honey") is never right
    let r = row(&rows, 1000, "tinymc|0/3");
    assert_eq!((r.gold, r.logliks.len(), r.correct), (0, 4, false));
    assert_eq!(r.predicted as usize, records::argmax(&r.logliks));
    assert_eq!(r.lengths_chars, vec![5, 4, 4, 4], "choices without their leading space");
    assert_eq!(r.lengths_bytes, vec![6, 5, 5, 5]);
    assert!(r.targets.is_empty() && r.score_names.is_empty() && r.item_hash.len() == 64);
    let r = row(&rows, 3000, "tinymc|0/0");
    assert_eq!((r.gold, r.predicted, r.correct, r.logliks.len()), (0, 0, true, 3));
    assert!(r.gold_is_greedy, "argmax_logits_eq_gold of the gold choice");
    for r in rows.iter().filter(|r| r.task == "tinymc|0") {
        assert_eq!(r.correct, r.example_id != "tinymc|0/3", "{} at {}", r.example_id, r.step);
    }

    // generation: doc 1 ("The capital of France is", "Paris") and doc 2 ("The opposite of hot
    // is", "cold") flip between checkpoints
    let at = |step, id| {
        let r = row(&rows, step, id);
        (r.output.trim().to_string(), r.targets.clone(), r.correct, r.score("em"))
    };
    assert_eq!(at(1000, "tinyqa|0/1"), ("cold".into(), vec!["Paris".to_string()], false, Some(0.0)));
    assert_eq!(at(2000, "tinyqa|0/1"), ("Paris".into(), vec!["Paris".to_string()], true, Some(1.0)));
    assert_eq!(at(1000, "tinyqa|0/2"), ("cold".into(), vec!["cold".to_string()], true, Some(1.0)));
    assert_eq!(at(2000, "tinyqa|0/2"), ("Paris".into(), vec!["cold".to_string()], false, Some(0.0)));
    let r = row(&rows, 3000, "tinyqa|0/0");
    assert!(r.is_generation() && r.logliks.is_empty() && r.score_names == ["em"]);

    // task rows: the results files' acc and em, with their standard errors
    for step in [1000, 2000, 3000] {
        let t = task_row(&loaded.tasks, step, "tinymc|0");
        assert!((t.acc - 0.8).abs() < 1e-12 && (t.acc_stderr - 0.2).abs() < 1e-12, "{t:?}");
        let t = task_row(&loaded.tasks, step, "tinyqa|0");
        assert!((t.acc - 0.8).abs() < 1e-12, "{t:?}");
    }
    assert_eq!(loaded.tasks.len(), 6, "{:?}", loaded.tasks);
}

/// Rewrites a details parquet file through `edit` (polars, as the reader reads it).
fn edit_parquet(path: &Path, edit: &dyn Fn(DataFrame) -> DataFrame) {
    let df = ParquetReader::new(std::fs::File::open(path).unwrap()).finish().unwrap();
    let mut df = edit(df);
    ParquetWriter::new(std::fs::File::create(path).unwrap()).finish(&mut df).unwrap();
}

/// The frame with `doc.id` of row `i` set to `ids[i]`.
fn with_doc_ids(df: DataFrame, ids: &[&str]) -> DataFrame {
    let doc = df.column("doc").unwrap().as_materialized_series().struct_().unwrap().clone();
    let fields: Vec<Series> = doc
        .fields_as_series()
        .into_iter()
        .map(|f| if f.name() == "id" { Series::new("id".into(), ids) } else { f })
        .collect();
    let new = StructChunked::from_series("doc".into(), df.height(), fields.iter()).unwrap().into_series();
    let mut df = df;
    df.replace("doc", new.into()).unwrap();
    df
}

fn doc_ids(df: &DataFrame) -> Vec<String> {
    let doc = df.column("doc").unwrap().as_materialized_series().struct_().unwrap().clone();
    let ids = doc.field_by_name("id").unwrap();
    let ids = ids.str().unwrap();
    (0..ids.len()).map(|i| ids.get(i).unwrap().to_string()).collect()
}

#[test]
fn lighteval_truncated_details_name_the_file() {
    let (_t, dir) = copy_of("lighteval");
    let f = find(&dir, &["step2000", "details_tinymc"]);
    truncate(&f);
    let e = err(load(&Lighteval, &dir, &StepRule::default()));
    assert!(e.contains(&f.display().to_string()) && e.contains("truncated"), "{e}");
}

#[test]
fn lighteval_truncated_results_name_the_file_and_line() {
    let (_t, dir) = copy_of("lighteval");
    let f = find(&dir, &["step1000", "results_"]);
    truncate(&f);
    let e = err(load(&Lighteval, &dir, &StepRule::default()));
    assert!(e.contains(&format!("{}:", f.display())) && e.contains("truncated"), "{e}");
}

#[test]
fn lighteval_missing_examples_at_one_checkpoint_are_refused() {
    let (_t, dir) = copy_of("lighteval");
    let f = find(&dir, &["step2000", "details_tinymc"]);
    edit_parquet(&f, &|df| df.slice(0, 4));
    let e = err(load(&Lighteval, &dir, &StepRule::default()));
    assert!(e.contains("tinymc|0"), "{e}");
}

#[test]
fn lighteval_duplicate_doc_ids_are_refused() {
    let (_t, dir) = copy_of("lighteval");
    let f = find(&dir, &["step3000", "details_tinyqa"]);
    edit_parquet(&f, &|df| {
        let mut ids = doc_ids(&df);
        ids[1] = ids[0].clone();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        with_doc_ids(df, &ids)
    });
    let e = err(load(&Lighteval, &dir, &StepRule::default()));
    assert!(e.contains(&f.display().to_string()) && e.contains("appears twice"), "{e}");
}

#[test]
fn lighteval_option_counts_changing_between_checkpoints_are_refused() {
    let (_t, dir) = copy_of("lighteval");
    let f = find(&dir, &["step2000", "details_tinymc"]);
    // doc "0" has 3 choices and doc "1" has 4: swap their ids at one checkpoint
    edit_parquet(&f, &|df| {
        let ids: Vec<String> = doc_ids(&df)
            .into_iter()
            .map(|i| {
                if i == "0" {
                    "1".into()
                } else if i == "1" {
                    "0".into()
                } else {
                    i
                }
            })
            .collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        with_doc_ids(df, &ids)
    });
    let e = err(load(&Lighteval, &dir, &StepRule::default()));
    assert!(e.contains("options") && e.contains("different questions") && e.contains("step 2000"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// OLMES (hand-made fixture: tests/fixtures/olmes/README.md)

#[test]
fn olmes_fixture_reads_through_load_all() {
    let (loaded, rows) = load(&Olmes, &fixture("olmes"), &StepRule::default()).unwrap();
    assert!(loaded.notices.is_empty(), "{:?}", loaded.notices);
    let steps: BTreeSet<u64> = rows.iter().map(|r| r.step).collect();
    assert_eq!(steps, BTreeSet::from([1000, 2000, 3000]), "steps from model_config.revision stage1-step<N>-...");
    assert_eq!(rows.len(), 30);
    assert_eq!(loaded.sources.len(), 15, "predictions, task metrics and metrics.json of 3 folders");
    // multiple choice: acc_raw and acc_per_char as OLMES decided them
    let r = row(&rows, 1000, "arc_easy/3");
    assert_eq!((r.gold, r.predicted, r.predicted_norm, r.correct, r.correct_norm), (0, 0, 2, true, false));
    assert_eq!(r.logliks, vec![-1.9, -2.4, -2.2, -2.8]);
    assert_eq!(r.lengths_chars, vec![4, 5, 5, 5], "num_chars: the continuation with its space");
    let r = row(&rows, 3000, "arc_easy/2");
    assert_eq!((r.logliks.len(), r.gold, r.correct, r.correct_norm), (3, 1, false, false));
    let acc: Vec<bool> = [1000, 2000, 3000].iter().map(|&s| row(&rows, s, "arc_easy/0").correct).collect();
    assert_eq!(acc, [false, true, true]);
    // generation: model_answer, the label, the stored metrics
    let r = row(&rows, 1000, "gsm8k/2");
    assert_eq!((r.output.as_str(), r.targets.clone(), r.correct), ("7000", vec!["70000".to_string()], false));
    assert_eq!(r.score_names, ["exact_match", "exact_match_simple", "num_tokens"]);
    assert_eq!(r.score_values, [0.0, 0.0, 16.0]);
    let em: Vec<bool> = [1000, 2000, 3000].iter().map(|&s| row(&rows, s, "gsm8k/3").correct).collect();
    assert_eq!(em, [true, false, true]);
    // task rows: acc_raw / acc_per_char and exact_match, n = num_instances
    let t = task_row(&loaded.tasks, 2000, "arc_easy");
    assert_eq!((t.acc, t.acc_norm, t.n), (0.8, Some(0.8), Some(5)));
    assert!((t.acc_stderr - (0.8f64 * 0.2 / 4.0).sqrt()).abs() < 1e-12);
    assert_eq!(task_row(&loaded.tasks, 1000, "gsm8k").acc, 0.4);
    assert_eq!(loaded.tasks.len(), 6);
}

#[test]
fn olmes_task_rows_fall_back_to_metrics_json() {
    let (_t, dir) = copy_of("olmes");
    std::fs::remove_file(dir.join("OLMo-2-1B-stage1-step3000/task-001-gsm8k-metrics.json")).unwrap();
    let (loaded, _) = load(&Olmes, &dir, &StepRule::default()).unwrap();
    assert_eq!(task_row(&loaded.tasks, 3000, "gsm8k").acc, 1.0);
}

#[test]
fn olmes_truncated_predictions_name_the_file_and_line() {
    let (_t, dir) = copy_of("olmes");
    let f = dir.join("OLMo-2-1B-stage1-step2000/task-000-arc_easy-predictions.jsonl");
    truncate(&f);
    let e = err(load(&Olmes, &dir, &StepRule::default()));
    assert!(e.contains(&format!("{}:4", f.display())) && e.contains("truncated"), "{e}");
}

#[test]
fn olmes_truncated_metrics_name_the_file_and_line() {
    let (_t, dir) = copy_of("olmes");
    let f = dir.join("OLMo-2-1B-stage1-step2000/task-001-gsm8k-metrics.json");
    truncate(&f);
    let e = err(load(&Olmes, &dir, &StepRule::default()));
    assert!(e.contains(&format!("{}:", f.display())) && e.contains("truncated"), "{e}");
}

fn edit_lines(path: &Path, edit: &dyn Fn(Vec<String>) -> Vec<String>) {
    let text = std::fs::read_to_string(path).unwrap();
    let lines = edit(text.lines().map(str::to_owned).collect());
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn olmes_missing_examples_at_one_checkpoint_are_refused() {
    let (_t, dir) = copy_of("olmes");
    let f = dir.join("OLMo-2-1B-stage1-step2000/task-001-gsm8k-predictions.jsonl");
    edit_lines(&f, &|mut l| {
        l.remove(2);
        l
    });
    let e = err(load(&Olmes, &dir, &StepRule::default()));
    assert!(e.contains("gsm8k"), "{e}");
}

#[test]
fn olmes_duplicate_doc_ids_are_refused() {
    let (_t, dir) = copy_of("olmes");
    let f = dir.join("OLMo-2-1B-stage1-step1000/task-000-arc_easy-predictions.jsonl");
    edit_lines(&f, &|mut l| {
        l[3] = l[3].replacen("\"doc_id\": 3", "\"doc_id\": 1", 1);
        l
    });
    let e = err(load(&Olmes, &dir, &StepRule::default()));
    assert!(e.contains(&format!("{}:4", f.display())) && e.contains("doc_id 1 appears twice"), "{e}");
}

#[test]
fn olmes_option_counts_changing_between_checkpoints_are_refused() {
    let (_t, dir) = copy_of("olmes");
    let f = dir.join("OLMo-2-1B-stage1-step3000/task-000-arc_easy-predictions.jsonl");
    edit_lines(&f, &|l| {
        l.into_iter()
            .map(|line| {
                let mut v: serde_json::Value = serde_json::from_str(&line).unwrap();
                if v["doc_id"] == 0 {
                    v["model_output"].as_array_mut().unwrap().pop();
                }
                v.to_string()
            })
            .collect()
    });
    let e = err(load(&Olmes, &dir, &StepRule::default()));
    assert!(
        e.contains("doc 0 of task arc_easy has 3 options") && e.contains("step 3000") && e.contains("step 1000"),
        "{e}"
    );
}

// ---------------------------------------------------------------------------------------------
// llm-jp-eval (hand-made fixture: tests/fixtures/llmjp/README.md)

fn llmjp_rule() -> StepRule {
    StepRule::new(None, Some(&fixture("llmjp/steps.csv"))).unwrap()
}

#[test]
fn llmjp_fixture_reads_through_load_all() {
    let logs = fixture("llmjp/logs");
    // the checkpoints are `.../iter_0001000`: no step<N> anywhere, so a step map is needed
    let e = err(load(&LlmJpEval, &logs, &StepRule::default()));
    assert!(e.contains("cannot tell the checkpoint step"), "{e}");
    let (loaded, rows) = load(&LlmJpEval, &logs, &llmjp_rule()).unwrap();
    assert!(loaded.notices.is_empty(), "{:?}", loaded.notices);
    let steps: BTreeSet<u64> = rows.iter().map(|r| r.step).collect();
    assert_eq!(steps, BTreeSet::from([1000, 2000, 3000]));
    assert_eq!(rows.len(), 30);
    assert_eq!(loaded.sources.len(), 3);
    let r = row(&rows, 1000, "jemhopqa/0");
    assert_eq!((r.output.as_str(), r.targets.clone(), r.correct), ("富士", vec!["富士山".to_string()], false));
    assert_eq!(r.score_names, ["char_f1", "exact_match"]);
    assert_eq!(r.score_values, [0.8, 0.0]);
    assert!(r.is_generation() && r.item_hash.len() == 64);
    let em: Vec<bool> = [1000, 2000, 3000].iter().map(|&s| row(&rows, s, "jemhopqa/1").correct).collect();
    assert_eq!(em, [true, false, true]);
    let em: Vec<bool> = [1000, 2000, 3000].iter().map(|&s| row(&rows, s, "jnli/3").correct).collect();
    assert_eq!(em, [true, true, false]);
    // task rows: scores.<dataset>_exact_match
    assert_eq!(task_row(&loaded.tasks, 1000, "jemhopqa").acc, 0.2);
    assert_eq!(task_row(&loaded.tasks, 2000, "jnli").acc, 0.8);
    assert_eq!(task_row(&loaded.tasks, 2000, "jnli").n, Some(5));
    assert_eq!(loaded.tasks.len(), 6);
    // the same steps by --step-from over the file names
    let rule = StepRule::new(Some(r"iter(\d+)_"), None).unwrap();
    let (_, by_regex) = load(&LlmJpEval, &logs, &rule).unwrap();
    assert_eq!(by_regex, rows);
}

#[test]
fn llmjp_truncated_output_names_the_file_and_line() {
    let (_t, dir) = copy_of("llmjp");
    let f = find(&dir, &["iter0002000"]);
    truncate(&f);
    let e = err(load(&LlmJpEval, &dir.join("logs"), &llmjp_rule()));
    assert!(e.contains(&format!("{}:", f.display())) && e.contains("truncated"), "{e}");
}

fn edit_json(path: &Path, edit: &dyn Fn(&mut serde_json::Value)) {
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

#[test]
fn llmjp_missing_examples_at_one_checkpoint_are_refused() {
    let (_t, dir) = copy_of("llmjp");
    let f = find(&dir, &["iter0003000"]);
    edit_json(&f, &|v| {
        v["outputs"]["jnli"].as_array_mut().unwrap().pop();
    });
    let e = err(load(&LlmJpEval, &dir.join("logs"), &llmjp_rule()));
    assert!(e.contains("jnli"), "{e}");
}

#[test]
fn llmjp_duplicate_ids_are_refused() {
    let (_t, dir) = copy_of("llmjp");
    let f = find(&dir, &["iter0001000"]);
    edit_json(&f, &|v| {
        for (i, r) in v["outputs"]["jnli"].as_array_mut().unwrap().iter_mut().enumerate() {
            r["id"] = serde_json::json!(if i == 4 { 2 } else { i });
        }
    });
    let e = err(load(&LlmJpEval, &dir.join("logs"), &llmjp_rule()));
    assert!(e.contains(&f.display().to_string()) && e.contains("id 2 appears twice"), "{e}");
}

/// llm-jp-eval's datasets are all generation tasks: what changes between checkpoints is the
/// gold text at a position (a reordered or changed dataset), refused by `same_questions`.
#[test]
fn llmjp_changed_gold_between_checkpoints_is_refused() {
    let (_t, dir) = copy_of("llmjp");
    let f = find(&dir, &["iter0002000"]);
    edit_json(&f, &|v| {
        v["outputs"]["jemhopqa"].as_array_mut().unwrap().swap(0, 1);
    });
    let e = err(load(&LlmJpEval, &dir.join("logs"), &llmjp_rule()));
    assert!(e.contains("different questions") && e.contains("step 2000"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// detection

#[test]
fn each_reader_detects_only_its_own_harness() {
    let lm_eval =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/external/pythia-v1-zero-shot/pythia-160m-deduped");
    let readers: [(&dyn Reader, &str); 3] = [(&Lighteval, "lighteval"), (&Olmes, "olmes"), (&LlmJpEval, "llmjp")];
    for (reader, own) in readers {
        for (_, other) in readers {
            assert_eq!(reader.detect(&fixture(other)), own == other, "{} on {other}", reader.name());
        }
        if lm_eval.is_dir() {
            assert!(!reader.detect(&lm_eval), "{} on lm-eval results", reader.name());
        }
        assert!(!reader.detect(&fixture("no-such-folder")), "{}", reader.name());
    }
    // single files and globs
    let details = find(&fixture("lighteval"), &["step1000", "details_tinymc"]);
    assert!(Lighteval.detect(&details) && !Olmes.detect(&details) && !LlmJpEval.detect(&details));
    let pred = fixture("olmes/OLMo-2-1B-stage1-step1000/task-000-arc_easy-predictions.jsonl");
    assert!(Olmes.detect(&pred) && !Lighteval.detect(&pred) && !LlmJpEval.detect(&pred));
    let glob = fixture("llmjp/logs/*.json");
    assert!(LlmJpEval.detect(&glob) && !Olmes.detect(&glob) && !Lighteval.detect(&glob));
}
