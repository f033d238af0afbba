//! Checkpoint ensembling of generation tasks by a vote over the members' generated texts
//! (`integrate::ensemble::vote_text`, issue 27 item 6): the majority text up to normalisation
//! (NFKC, whitespace trimmed and collapsed, case kept) wins and the row is that of its latest
//! supporter; a tie of texts goes to the highest mean char F1 to the other members' texts, then
//! to the latest member; k = 1 is the single checkpoints; the multiple-choice ensembles of a
//! table that also holds generation rows are those of the table without them; and end to end,
//! `integrate ensemble` on an eval folder with generation rows writes the vote (and the mean
//! rules say they left text out), which `analysis compare` then compares.

use integrate::ensemble::{ensemble_rows, normalise, vote_text, Rule};
use records::ExampleRecord;
use std::path::Path;
use std::process::Command;

/// A generation row of task `task`, example `id`, at `step`, that generated `output`; gold "42".
fn gen(task: &str, id: usize, step: u64, output: &str) -> ExampleRecord {
    let em = output.trim() == "42";
    let f1 = textmatch::char_f1(output, "42");
    ExampleRecord {
        step,
        task: task.into(),
        example_id: format!("{task}/{id}"),
        output: output.into(),
        correct: em,
        correct_norm: em,
        gold_is_greedy: em,
        item_hash: format!("{:064x}", id + 1),
        targets: vec!["42".into()],
        score_names: vec!["exact_match".into(), "char_f1".into()],
        score_values: vec![f64::from(u8::from(em)), f1],
        ..Default::default()
    }
}

/// A multiple-choice row (three options) whose option `pick` is the most likely.
fn choice(task: &str, id: usize, step: u64, pick: usize, spread: f64) -> ExampleRecord {
    let ll: Vec<f64> = (0..3).map(|o| if o == pick { -1.0 } else { -1.0 - spread * (1 + o) as f64 }).collect();
    ExampleRecord {
        step,
        task: task.into(),
        example_id: format!("{task}/{id}"),
        gold: (id % 3) as u32,
        predicted: pick as u32,
        predicted_norm: pick as u32,
        correct: pick == id % 3,
        correct_norm: pick == id % 3,
        logliks: ll,
        lengths_chars: vec![4, 7, 5],
        lengths_tokens: vec![1, 2, 2],
        lengths_bytes: vec![5, 8, 6],
        output: pick.to_string(),
        item_hash: format!("{:064x}", 1000 + id),
        ..Default::default()
    }
}

/// Two of three members generate the same text up to whitespace: that text wins, and the row is
/// the later of those two members' (its raw output, flags and scores unchanged), at the window's
/// last step; the odd member out, although it is the latest, does not give the row.
#[test]
fn two_of_three_agreeing_up_to_whitespace_win_with_the_later_ones_row() {
    let window =
        vec![gen("g", 0, 10, "the answer is  42"), gen("g", 0, 20, " the answer\tis 42\n"), gen("g", 0, 30, "7")];
    assert_eq!(normalise(&window[0].output), normalise(&window[1].output));
    assert_ne!(window[0].output, window[1].output, "the raw texts differ");
    let e = ensemble_rows(&window, 3, Rule::Vote).unwrap();
    assert_eq!(e.len(), 1);
    assert_eq!(e[0], ExampleRecord { step: 30, ..window[1].clone() });
    assert_eq!(e[0].output, " the answer\tis 42\n", "the raw output of the chosen member");
    // the same when the supporters come first and last: the later supporter, the latest member
    let window = vec![gen("g", 0, 10, "the answer is 42"), gen("g", 0, 20, "7"), gen("g", 0, 30, "the  answer is 42 ")];
    assert_eq!(ensemble_rows(&window, 3, Rule::Vote).unwrap(), vec![window[2].clone()]);
    // NFKC: full-width digits and an ideographic space count as their plain forms; case counts
    assert_eq!(vote_text(&["Answer:\u{3000}４２", "x", "Answer: 42"]), 2);
    assert_eq!(vote_text(&["Paris", "paris", "PARIS"]), 2, "three texts, all different: a three-way tie");
}

/// Three different texts: a three-way tie, decided by the mean char F1 of each to the other two.
/// By hand (fuzzywuzzy's ratio of the single tokens, round(100 * (1 - indel / (len1 + len2)))):
/// F1("abc", "abd") = 1 - 2/6 = 0.67, F1("abc", "xbd") = 1 - 4/6 = 0.33, F1("abd", "xbd") = 0.67,
/// so the means are 0.50 ("abc"), 0.67 ("abd"), 0.50 ("xbd"): "abd", the middle member, wins,
/// where the latest member would give "xbd" and the first "abc".
#[test]
fn a_three_way_tie_goes_to_the_highest_mean_char_f1() {
    let texts = ["abc", "abd ", "xbd"];
    let f1 = |a: &str, b: &str| textmatch::char_f1(a, b);
    // computed by textmatch, not by the code under test
    let mean: Vec<f64> =
        (0..3).map(|i| (0..3).filter(|&j| j != i).map(|j| f1(texts[i], texts[j])).sum::<f64>() / 2.0).collect();
    assert_eq!(
        [f1("abc", "abd"), f1("abc", "xbd"), f1("abd", "xbd")],
        [0.67, 0.33, 0.67],
        "the hand computation of the doc comment"
    );
    let best = (0..3).max_by(|&a, &b| mean[a].total_cmp(&mean[b])).unwrap();
    assert!((0..3).filter(|&i| i != best).all(|i| mean[i] < mean[best] - 0.1), "a unique best: {mean:?}");
    assert_eq!(best, 1);
    let window: Vec<ExampleRecord> =
        texts.iter().enumerate().map(|(t, s)| gen("g", 0, 10 * (t as u64 + 1), s)).collect();
    let e = ensemble_rows(&window, 3, Rule::Vote).unwrap();
    assert_eq!(e, vec![ExampleRecord { step: 30, ..window[best].clone() }]);
    assert_eq!(e[0].output, "abd ", "the raw text, not the normalised one");
    // the tie-break matters: the latest member (the last tie-break alone) and the first member
    // would each pick another text
    assert_ne!(best, 2);
    assert_ne!(best, 0);
    // and the order of the members does not change which text wins, only when the F1 ties
    let turned: Vec<&str> = vec![texts[1], texts[2], texts[0]];
    assert_eq!(vote_text(&turned), 0);
    // a three-way tie the char F1 cannot decide (every pair scores 0): the latest member
    assert_eq!(vote_text(&["aaa", "bbb", "ccc"]), 2);
}

/// k = 1: every ensemble row is the single checkpoint's row, exactly.
#[test]
fn an_ensemble_of_one_is_the_single_checkpoint() {
    let mut rows = Vec::new();
    for (t, step) in [0u64, 10, 20, 30].into_iter().enumerate() {
        for id in 0..5 {
            let text = match (id + t) % 3 {
                0 => "42".to_string(),
                1 => format!(" 4{t}  "),
                _ => format!("the answer is {}", id * t),
            };
            rows.push(gen("g", id, step, &text));
        }
    }
    let mut expected = rows.clone();
    expected.sort_by(|a, b| (a.step, &a.task, &a.example_id).cmp(&(b.step, &b.task, &b.example_id)));
    assert_eq!(ensemble_rows(&rows, 1, Rule::Vote).unwrap(), expected);
    for rule in [Rule::Distribution, Rule::Sequence] {
        assert!(ensemble_rows(&rows, 1, rule).unwrap().is_empty(), "{rule:?} leaves text out");
    }
}

/// A table of a multiple-choice task, a minimal pair-like two-option task and a generation task,
/// over `steps` checkpoints.
fn mixed_table(steps: usize) -> (Vec<ExampleRecord>, Vec<ExampleRecord>) {
    let (mut mc, mut text) = (Vec::new(), Vec::new());
    for t in 0..steps {
        let step = 10 * (t as u64 + 1);
        for id in 0..24 {
            mc.push(choice("mc", id, step, (id * 7 + t * (id % 4)) % 3, 0.1 + 0.05 * ((id + t) % 5) as f64));
            let mut two = choice("pair", id, step, (id + t / 2) % 2, 0.3);
            two.logliks.truncate(2);
            two.lengths_chars.truncate(2);
            two.lengths_tokens.truncate(2);
            two.lengths_bytes.truncate(2);
            two.gold = 0;
            two.correct = two.predicted == 0;
            mc.push(two);
            let out = match (id * 5 + t * (id % 3 + 1)) % 4 {
                0 | 1 => "42".to_string(),
                2 => format!("the answer is {}", 40 + (id + t) % 3),
                _ => " 42 \n".to_string(),
            };
            text.push(gen("gen", id, step, &out));
        }
    }
    (mc, text)
}

fn write_eval(dir: &Path, rows: &[ExampleRecord]) {
    std::fs::create_dir_all(dir).unwrap();
    records::write_frame(&dir.join("examples.parquet"), &mut records::examples_frame(rows).unwrap()).unwrap();
    let mut tf = records::tasks_frame(&records::summarise(rows).unwrap()).unwrap();
    records::write_frame(&dir.join("tasks.parquet"), &mut tf).unwrap();
}

fn ensemble(eval: &Path, rule: &str, windows: &str, out: Option<&Path>) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_integrate"));
    c.arg("ensemble").arg("--eval").arg(eval).args(["--windows", windows, "--rule", rule]);
    if let Some(o) = out {
        c.arg("--out").arg(o);
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o
}

/// Adding generation rows to a table leaves its multiple-choice ensembles as they were, for every
/// rule and window: in the library and in the files `integrate ensemble` writes (examples and
/// task tables, compared with those of the table without generation rows).
#[test]
fn generation_rows_leave_the_choice_ensembles_as_they_were() {
    let (mc, text) = mixed_table(6);
    let mixed: Vec<ExampleRecord> = mc.iter().chain(&text).cloned().collect();
    for rule in [Rule::Distribution, Rule::Sequence, Rule::Vote] {
        for k in [1, 2, 3, 5] {
            let before = ensemble_rows(&mc, k, rule).unwrap();
            let after: Vec<ExampleRecord> =
                ensemble_rows(&mixed, k, rule).unwrap().into_iter().filter(|r| !r.is_generation()).collect();
            assert_eq!(after, before, "{rule:?} k={k}");
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let (only, both) = (dir.path().join("only/eval"), dir.path().join("both/eval"));
    write_eval(&only, &mc);
    write_eval(&both, &mixed);
    for rule in ["distribution", "sequence", "vote"] {
        let (a, b) = (dir.path().join(format!("a-{rule}")), dir.path().join(format!("b-{rule}")));
        ensemble(&only, rule, "1,3", Some(&a));
        ensemble(&both, rule, "1,3", Some(&b));
        for k in ["k1", "k3"] {
            let ea = records::read_examples(&a.join(k).join("examples.parquet")).unwrap();
            let eb = records::read_examples(&b.join(k).join("examples.parquet")).unwrap();
            let choice: Vec<ExampleRecord> = eb.iter().filter(|r| !r.is_generation()).cloned().collect();
            assert_eq!(choice, ea, "{rule} {k}");
            assert_eq!(eb.len() > ea.len(), rule == "vote", "{rule} {k}: only the vote holds text rows");
            let ta = records::read_tasks(&a.join(k).join("tasks.parquet")).unwrap();
            let tb: Vec<_> = records::read_tasks(&b.join(k).join("tasks.parquet"))
                .unwrap()
                .into_iter()
                .filter(|t| t.task != "gen")
                .collect();
            assert_eq!(tb, ta, "{rule} {k}");
        }
    }
}

/// End to end: `integrate ensemble --rule vote` on a run's eval folder with generation rows
/// writes ensembled-vote/k<K>/ whose text rows are the vote of the library, says in its
/// provenance that the vote is the rule for text, and a mean rule writes no text rows and says
/// why (on stderr and in its provenance); `analysis compare` then compares the generation task
/// with the vote ensembles (and without the mean ones, which have no text), the multiple-choice
/// tasks with both.
#[test]
fn integrate_ensemble_votes_over_the_texts_of_an_eval_folder_and_compare_reads_them() {
    let (mc, text) = mixed_table(6);
    let mixed: Vec<ExampleRecord> = mc.iter().chain(&text).cloned().collect();
    let run = tempfile::tempdir().unwrap();
    let eval = run.path().join("eval");
    write_eval(&eval, &mixed);

    let o = ensemble(&eval, "vote", "1,2,3", None);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("ensembled-vote/k3"), "{stdout}");
    for k in [1usize, 2, 3] {
        let dir = run.path().join(format!("ensembled-vote/k{k}"));
        let got = records::read_examples(&dir.join("examples.parquet")).unwrap();
        let texts: Vec<ExampleRecord> = got.iter().filter(|r| r.is_generation()).cloned().collect();
        assert_eq!(texts.len(), 24 * (6 + 1 - k));
        let want: Vec<ExampleRecord> = ensemble_rows(&text, k, Rule::Vote).unwrap();
        assert_eq!(texts, want, "k={k}");
        if k == 1 {
            let mut single = text.clone();
            single.sort_by(|a, b| (a.step, &a.task, &a.example_id).cmp(&(b.step, &b.task, &b.example_id)));
            assert_eq!(texts, single, "k = 1 is the single checkpoints");
        }
        // every text row is one of its window's members' rows, at the window's last step
        for r in &texts {
            let members: Vec<&ExampleRecord> = text
                .iter()
                .filter(|m| m.example_id == r.example_id && m.step <= r.step && m.step + 10 * k as u64 > r.step)
                .collect();
            assert_eq!(members.len(), k);
            assert!(members.iter().any(|m| ExampleRecord { step: r.step, ..(*m).clone() } == *r), "{r:?}");
        }
        let prov: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("provenance.json")).unwrap()).unwrap();
        assert_eq!(prov["method"], "ensemble_vote");
        assert_eq!(prov["generation_tasks"]["tasks"], serde_json::json!(["gen"]));
        assert_eq!(prov["generation_tasks"]["included"], true);
        assert!(prov["generation_tasks"]["rule"].as_str().unwrap().contains("the rule for text"), "{prov}");
        let tasks = records::read_tasks(&dir.join("tasks.parquet")).unwrap();
        assert!(tasks.iter().any(|t| t.task == "gen"));
    }

    let o = ensemble(&eval, "distribution", "2,3", None);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("generation task(s) (gen) left out") && stderr.contains("--rule vote"), "{stderr}");
    for k in [2, 3] {
        let dir = run.path().join(format!("ensembled/k{k}"));
        let got = records::read_examples(&dir.join("examples.parquet")).unwrap();
        assert!(!got.is_empty() && got.iter().all(|r| !r.is_generation()));
        let prov: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("provenance.json")).unwrap()).unwrap();
        assert_eq!(prov["generation_tasks"]["included"], false);
        assert!(prov["generation_tasks"]["why"].as_str().unwrap().contains("the rule for text"), "{prov}");
    }

    let opts = analysis::Options { bootstrap: 50, noise_sims: 50, splits: 5, ..Default::default() };
    let (stab, diffs, _) = analysis::compare::compare(run.path(), &opts).unwrap();
    let has = |task: &str, m: run::Method, k: usize| stab.iter().any(|r| r.task == task && r.method == m && r.k == k);
    for k in [2, 3] {
        assert!(has("gen", run::Method::EnsembleVote, k), "the vote over texts is compared");
        assert!(!has("gen", run::Method::EnsembleMean, k), "no mean ensemble of text");
        for task in ["mc", "pair"] {
            assert!(has(task, run::Method::EnsembleVote, k) && has(task, run::Method::EnsembleMean, k), "{task}");
        }
    }
    assert!(has("gen", run::Method::Single, 1) && has("gen", run::Method::Smoothing, 3));
    assert!(stab.iter().any(|r| r.task == "gen" && r.metric == "char_f1" && r.method == run::Method::EnsembleVote));
    assert!(diffs
        .iter()
        .any(|d| d.task == "gen" && d.method == run::Method::EnsembleVote && d.baseline == run::Method::Single));
}

/// An eval folder of generation tasks only (`configs/eval-study-gen.toml`): a mean rule has no
/// task to ensemble and writes nothing (an empty table would read as a variant without tasks,
/// and `analysis compare` then failed on it); the vote writes its ensembles, and compare runs.
#[test]
fn a_mean_rule_on_generation_tasks_only_writes_nothing_and_compare_still_runs() {
    let (_, text) = mixed_table(6);
    let run = tempfile::tempdir().unwrap();
    let eval = run.path().join("eval");
    write_eval(&eval, &text);
    let o = ensemble(&eval, "distribution", "1,2", None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("nothing to ensemble by this rule") && stderr.contains("nothing written"), "{stderr}");
    assert!(
        !run.path().join("ensembled/k1").exists() && !run.path().join("ensembled/k2").exists(),
        "no empty ensembles"
    );
    let o = ensemble(&eval, "vote", "2", None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let opts = analysis::Options { bootstrap: 50, noise_sims: 50, splits: 5, ..Default::default() };
    let (stab, _, _) = analysis::compare::compare(run.path(), &opts).unwrap();
    assert!(stab.iter().any(|r| r.task == "gen" && r.method == run::Method::EnsembleVote && r.k == 2));
    // the single checkpoints' instability score compares texts by char F1, as the report does,
    // over the steps every variant shares (the vote of 2 starts at the second step)
    let single = stab.iter().find(|r| r.task == "gen" && r.metric == "acc" && r.method == run::Method::Single).unwrap();
    let ids: std::collections::BTreeSet<&str> = text.iter().map(|r| r.example_id.as_str()).collect();
    let per_example: Vec<f64> = ids
        .iter()
        .map(|id| {
            let mut rows: Vec<&ExampleRecord> = text.iter().filter(|r| r.example_id == *id && r.step >= 20).collect();
            rows.sort_by_key(|r| r.step);
            let texts: Vec<&str> = rows.iter().map(|r| r.output.as_str()).collect();
            theory::sequence::instability(&texts, |a, b| textmatch::char_f1(a, b)).unwrap()
        })
        .collect();
    let want = per_example.iter().sum::<f64>() / per_example.len() as f64;
    let got = single.instability.unwrap();
    assert!((got - want).abs() < 1e-12, "IS {got} vs char-F1 IS {want}");
    let by_exact: f64 = ids
        .iter()
        .map(|id| {
            let mut rows: Vec<&ExampleRecord> = text.iter().filter(|r| r.example_id == *id && r.step >= 20).collect();
            rows.sort_by_key(|r| r.step);
            let texts: Vec<&str> = rows.iter().map(|r| r.output.as_str()).collect();
            theory::sequence::instability(&texts, |a, b| theory::sequence::exact_match(a, b)).unwrap()
        })
        .sum::<f64>()
        / ids.len() as f64;
    assert!((by_exact - want).abs() > 1e-6, "the texts tell char F1 from exact match apart");
}
