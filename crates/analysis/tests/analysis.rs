//! The analysis on hand-made and simulated evaluation tables.

use analysis::{analyse, Options};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use records::{ExampleRecord, TaskRecord};

fn opts() -> Options {
    Options { bootstrap: 200, noise_sims: 300, splits: 20, ..Default::default() }
}

/// Rows of one task from a correctness matrix [example][checkpoint] and outputs.
fn rows(correct: &[Vec<bool>], outputs: Option<&[Vec<u32>]>, steps: &[u64]) -> (Vec<TaskRecord>, Vec<ExampleRecord>) {
    let mut ex = Vec::new();
    for (e, c) in correct.iter().enumerate() {
        for (t, &ok) in c.iter().enumerate() {
            let out = outputs.map_or(u32::from(!ok), |o| o[e][t]);
            ex.push(ExampleRecord {
                step: steps[t],
                task: "toy".into(),
                example_id: format!("toy/{e}"),
                gold: 0,
                predicted: out,
                predicted_norm: out,
                correct: ok,
                correct_norm: ok,
                // the gold option (0) is the likelier one exactly when the example is right
                logliks: if ok { vec![-1.0, -2.5] } else { vec![-2.0, -1.0] },
                lengths_chars: vec![1, 1],
                lengths_tokens: vec![1, 1],
                lengths_bytes: vec![2, 2],
                gold_is_greedy: false,
                output: out.to_string(),
                item_hash: String::new(),
                targets: Vec::new(),
                score_names: Vec::new(),
                score_values: Vec::new(),
            });
        }
    }
    (records::summarise(&ex).unwrap(), ex)
}

fn matrix_strategy() -> impl Strategy<Value = Vec<Vec<bool>>> {
    (2usize..12, 3usize..15).prop_flat_map(|(n, m)| prop::collection::vec(prop::collection::vec(any::<bool>(), m), n))
}

#[test]
fn hand_worked_run() {
    // two examples over four checkpoints: a = 0101 (3 flips), b = 0011 (1 flip)
    let c = vec![vec![false, true, false, true], vec![false, false, true, true]];
    let (t, e) = rows(&c, None, &[0, 10, 30, 100]);
    let (tm, em) = analyse(&t, &e, &opts()).unwrap();
    let all = tm.iter().find(|m| m.window == "all" && m.metric == "acc").unwrap();
    // task score 0, 0.5, 0.5, 1: MTV = (0.5 + 0 + 0.5) / 3
    assert!((all.mtv - 1.0 / 3.0).abs() < 1e-12);
    assert!((all.mean_flip_rate.unwrap() - (1.0 + 1.0 / 3.0) / 2.0).abs() < 1e-12);
    assert_eq!(all.learned_then_forgotten, Some(0.5));
    assert_eq!((all.best_step, all.final_score, all.direction_changes), (100, 1.0, 0));
    let a = em.iter().find(|x| x.example_id == "toy/0" && x.window == "all").unwrap();
    assert_eq!((a.flips_to_right, a.flips_to_wrong, a.stable_from_step), (2, 1, 100));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// A constant series has zero fluctuation at every level.
    #[test]
    fn constant_series_have_zero_fluctuation(n in 1usize..10, m in 3usize..12, v in any::<bool>()) {
        let c = vec![vec![v; m]; n];
        let steps: Vec<u64> = (0..m as u64).collect();
        let (t, e) = rows(&c, None, &steps);
        let (tm, _) = analyse(&t, &e, &opts()).unwrap();
        for x in tm {
            prop_assert_eq!(x.mtv, 0.0);
            prop_assert_eq!(x.mean_flip_rate, Some(0.0));
            prop_assert_eq!(x.mean_instability, if x.metric == "acc" { Some(0.0) } else { None });
            // no discordant example anywhere: the paired null cannot reject
            prop_assert_eq!(x.null_p_value, Some(1.0));
            prop_assert_eq!((x.direction_changes, x.largest_drop), (0, 0.0));
            prop_assert_eq!(x.detrended_sd, 0.0);
        }
    }

    /// Relabelling (permuting) examples changes neither MTV nor flip counts.
    #[test]
    fn relabelling_examples_changes_nothing(c in matrix_strategy(), seed in any::<u64>()) {
        let steps: Vec<u64> = (0..c[0].len() as u64).map(|s| s * 7).collect();
        let mut perm = c.clone();
        rand::seq::SliceRandom::shuffle(perm.as_mut_slice(), &mut ChaCha8Rng::seed_from_u64(seed));
        let (a, _) = analyse(&rows(&c, None, &steps).0, &rows(&c, None, &steps).1, &opts()).unwrap();
        let (b, _) = analyse(&rows(&perm, None, &steps).0, &rows(&perm, None, &steps).1, &opts()).unwrap();
        for (x, y) in a.iter().zip(&b) {
            prop_assert!((x.mtv - y.mtv).abs() < 1e-12);
            prop_assert!((x.mean_flip_rate.unwrap() - y.mean_flip_rate.unwrap()).abs() < 1e-12);
            prop_assert_eq!(x.learned_then_forgotten, y.learned_then_forgotten);
        }
    }

    /// Reversing the checkpoint order keeps MTV and the flip rate.
    #[test]
    fn reversed_series_have_the_same_mtv(c in matrix_strategy()) {
        let m = c[0].len();
        let steps: Vec<u64> = (0..m as u64).collect();
        let rev: Vec<Vec<bool>> = c.iter().map(|r| r.iter().rev().cloned().collect()).collect();
        let (a, _) = analyse(&rows(&c, None, &steps).0, &rows(&c, None, &steps).1, &opts()).unwrap();
        let (b, _) = analyse(&rows(&rev, None, &steps).0, &rows(&rev, None, &steps).1, &opts()).unwrap();
        let (x, y) = (a.iter().find(|t| t.window == "all").unwrap(), b.iter().find(|t| t.window == "all").unwrap());
        prop_assert!((x.mtv - y.mtv).abs() < 1e-12);
        prop_assert!((x.mean_flip_rate.unwrap() - y.mean_flip_rate.unwrap()).abs() < 1e-12);
    }
}

/// Simulated data with a known true mean flip rate: each example is right with probability p_e
/// ~ U(0.2, 0.8) independently at each checkpoint, so its expected flip rate is 2 p (1 - p), and
/// the population mean is 2 (E p - E p^2) = 2 (0.5 - 0.28) = 0.44. The 95% bootstrap interval
/// must cover it in about 95% of 300 replications: with sd sqrt(.95 * .05 / 300) = 1.3%, the
/// band [0.90, 0.99] fails by chance with probability < 1e-4.
#[test]
fn bootstrap_intervals_cover_the_true_flip_rate_at_the_nominal_rate() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let reps = 300;
    let mut covered = 0;
    let steps: Vec<u64> = (0..20).collect();
    for _ in 0..reps {
        let c: Vec<Vec<bool>> = (0..150)
            .map(|_| {
                let p = rng.gen_range(0.2..0.8);
                (0..20).map(|_| rng.gen_bool(p)).collect()
            })
            .collect();
        let (t, e) = rows(&c, None, &steps);
        let (tm, _) =
            analyse(&t, &e, &Options { bootstrap: 300, noise_sims: 10, splits: 4, ..Default::default() }).unwrap();
        let all = tm.iter().find(|m| m.window == "all" && m.metric == "acc").unwrap();
        if all.flip_rate_ci_low.unwrap() <= 0.44 && 0.44 <= all.flip_rate_ci_high.unwrap() {
            covered += 1;
        }
    }
    let rate = covered as f64 / reps as f64;
    assert!((0.90..=0.99).contains(&rate), "coverage {rate}");
}

#[test]
fn report_snapshot_on_a_small_fixed_input() {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let c: Vec<Vec<bool>> = (0..40)
        .map(|e| (0..12).map(|t| rng.gen_bool((0.3 + 0.04 * t as f64 + 0.005 * e as f64).min(0.95))).collect())
        .collect();
    let outs: Vec<Vec<u32>> =
        c.iter().map(|r| r.iter().map(|&ok| if ok { 0 } else { rng.gen_range(1..4) }).collect()).collect();
    let steps: Vec<u64> = (0..12).map(|t| t * 10).collect();
    let (t, e) = rows(&c, Some(&outs), &steps);
    let (tm, _) = analyse(&t, &e, &opts()).unwrap();
    insta::assert_snapshot!(format!(
        "{}\n{}",
        analysis::report::render(&tm, "all", "acc"),
        analysis::report::render(&tm, "final", "acc")
    ));
}

/// The outputs of one report are one set: a report without example rows into a folder that
/// holds an earlier report's example tables removes them (they would be stale beside the new
/// task tables), and the earlier files are gone only once the new ones are in.
#[test]
fn a_report_replaces_the_earlier_reports_tables_whole() {
    let out = tempfile::tempdir().unwrap();
    let (t, e) = rows(&[vec![false, true, false, true], vec![true, true, false, false]], None, &[0, 10, 20, 30]);
    let input = |examples: Vec<ExampleRecord>| analysis::report::Input {
        tasks: t.clone(),
        panels: analysis::panel::Panel::all(&examples).unwrap(),
        sources: vec![],
        harness: true,
        notices: vec![],
        run: None,
    };
    analysis::report::write(&input(e.clone()), out.path(), &opts(), false).unwrap();
    assert!(out.path().join("example_metrics.csv").is_file() && out.path().join("example_metrics.parquet").is_file());
    analysis::report::write(&input(vec![]), out.path(), &opts(), false).unwrap();
    assert!(out.path().join("task_metrics.csv").is_file());
    assert!(!out.path().join("example_metrics.csv").exists() && !out.path().join("example_metrics.parquet").exists());
}

#[test]
fn uneven_steps_are_ordered_by_step_not_by_row_order() {
    let (mut t, _) = rows(&[vec![false, true, false]], None, &[0, 1000, 5]);
    t.reverse();
    let (tm, _) = analyse(&t, &[], &opts()).unwrap();
    let all = tm.iter().find(|m| m.window == "all" && m.metric == "acc").unwrap();
    // ordered by step 0, 5, 1000 -> scores 0, 0, 1 and MTV 0.5 (in row order, 0, 1, 0: MTV 1)
    assert_eq!((all.first_step, all.last_step, all.best_step), (0, 1000, 1000));
    assert!((all.mtv - 0.5).abs() < 1e-12);
}

/// A trail of pure example churn at a constant population accuracy (1,000 examples, 41
/// checkpoints, each example's correctness redrawn from its own fixed probability): the paired
/// null must call it noise (ratio about 1; the old independent-binomial figure said 0.59x), and
/// the MTV interval must contain its own estimate (the old percentile interval, [0.012, 0.020]
/// around 0.011, did not).
#[test]
fn pure_churn_is_called_noise_and_its_interval_contains_the_estimate() {
    let mut rng = ChaCha8Rng::seed_from_u64(41);
    let c: Vec<Vec<bool>> = (0..1000)
        .map(|_| {
            let p: f64 = 1.0 / (1.0 + (-(0.4 + 1.5 * theory::noise::std_normal(&mut rng))).exp());
            (0..41).map(|_| rng.gen_bool(p)).collect()
        })
        .collect();
    let steps: Vec<u64> = (0..41).map(|t| 10 * t).collect();
    let (t, e) = rows(&c, None, &steps);
    let (tm, _) = analyse(&t, &e, &Options { bootstrap: 300, splits: 20, ..Default::default() }).unwrap();
    let all = tm.iter().find(|m| m.window == "all" && m.metric == "acc").unwrap();
    let ratio = all.null_ratio.unwrap();
    assert!((0.85..1.15).contains(&ratio), "paired null ratio {ratio}");
    assert!(all.null_p_value.unwrap() > 0.01, "{:?}", all.null_p_value);
    assert_eq!(all.mtv_interval.as_deref(), Some("upper bound"));
    assert!(all.mtv_ci_low.unwrap() <= all.mtv && all.mtv <= all.mtv_ci_high.unwrap(), "{all:?}");
    // the bias-corrected MTV is below the observed one: resampling adds fluctuation
    assert!(all.mtv_bias_corrected.unwrap() < all.mtv);
}

/// Writes the tables of one variant (`tasks.parquet`, `examples.parquet`) into `dir`.
fn write_variant(dir: &std::path::Path, t: &[TaskRecord], e: &[ExampleRecord]) {
    std::fs::create_dir_all(dir).unwrap();
    records::write_frame(&dir.join("tasks.parquet"), &mut records::tasks_frame(t).unwrap()).unwrap();
    records::write_frame(&dir.join("examples.parquet"), &mut records::examples_frame(e).unwrap()).unwrap();
}

/// `analysis compare` pairs the variants example by example (one bootstrap draw indexes every
/// variant's columns), so a variant that scored other examples must be refused, naming its
/// folder, not silently compared column by column; the same examples compare fine.
#[test]
fn compare_refuses_variants_that_scored_other_examples() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let c: Vec<Vec<bool>> = (0..30).map(|_| (0..8).map(|_| rng.gen_bool(0.6)).collect()).collect();
    let steps: Vec<u64> = (1..=8).map(|t| 10 * t).collect();
    let (t, e) = rows(&c, None, &steps);
    let run = tempfile::tempdir().unwrap();
    write_variant(&run.path().join("eval"), &t, &e);
    let avg = run.path().join("eval-avg-k2");
    write_variant(&avg, &t, &e);
    let o = opts();
    let (stab, _, _) = analysis::compare::compare(run.path(), &o).expect("the same examples compare");
    assert!(stab.iter().any(|r| r.method == "average"), "{stab:?}");

    // the same number of examples, one id different
    let renamed: Vec<ExampleRecord> = e
        .iter()
        .map(|r| ExampleRecord {
            example_id: if r.example_id == "toy/3" { "toy/x3".into() } else { r.example_id.clone() },
            ..r.clone()
        })
        .collect();
    write_variant(&avg, &t, &renamed);
    let err = format!("{:#}", analysis::compare::compare(run.path(), &o).unwrap_err());
    assert!(err.contains("eval-avg-k2") && err.contains("ids differ"), "{err}");

    // one example fewer
    let fewer: Vec<ExampleRecord> = e.iter().filter(|r| r.example_id != "toy/7").cloned().collect();
    write_variant(&avg, &records::summarise(&fewer).unwrap(), &fewer);
    let err = format!("{:#}", analysis::compare::compare(run.path(), &o).unwrap_err());
    assert!(err.contains("eval-avg-k2") && err.contains("has 29 examples"), "{err}");
}

/// Intervals that respect their bounds (issue 30 item 4): a task right on 0, 1, n - 1 and all n
/// of its examples at every checkpoint gets a final-score interval inside [0, 1] that contains the
/// score and is never of zero width, and an MTV upper bound above 0 although no example changes.
#[test]
fn intervals_stay_in_bounds_and_are_not_degenerate_at_the_edges() {
    let n = 64;
    let steps: Vec<u64> = (0..6).map(|t| 10 * t).collect();
    for right in [0, 1, n - 1, n] {
        let c: Vec<Vec<bool>> = (0..n).map(|e| vec![e < right; steps.len()]).collect();
        let (t, e) = rows(&c, None, &steps);
        let (tm, _) = analyse(&t, &e, &opts()).unwrap();
        for m in tm.iter().filter(|m| m.metric == "acc") {
            let (lo, hi) = (m.final_ci_low.unwrap(), m.final_ci_high.unwrap());
            let p = right as f64 / n as f64;
            assert!(0.0 <= lo && lo <= p && p <= hi && hi <= 1.0, "{right}/{n}: [{lo}, {hi}]");
            assert!(hi - lo > 0.01, "{right}/{n}: degenerate [{lo}, {hi}]");
            assert_eq!(m.mtv, 0.0);
            let mtv_hi = m.mtv_ci_high.unwrap();
            // the Wilson bound of 0 changes among n (T - 1) example-transitions
            let want = analysis::proportion::wilson(0, (n * (m.checkpoints - 1)) as u64, 0.95).unwrap().1;
            assert!(mtv_hi > 0.0 && (mtv_hi - want).abs() < 1e-12, "{right}/{n}, {}: MTV bound {mtv_hi}", m.window);
        }
    }
}
