//! Table 3, the claims table: each claim of the original study, what this run shows, whether it
//! holds at this scale, and the command that shows it. Every verdict is computed here from the
//! run's tables (and the vendored Pythia results), by the rule written beside it.

use analysis::compare::StabilityRow;
use analysis::TaskMetrics;
use anyhow::{Context, Result};
use clap::Parser;
use experiments::{csv_text, markdown_table, mean, Args, Output, Run};

struct Claim {
    claim: &'static str,
    result: String,
    holds: Verdict,
    command: &'static str,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Verdict {
    Holds,
    Partly,
    Fails,
}

/// All `n` of `n` -> holds; more than half -> partly; else fails.
fn verdict(hits: usize, n: usize) -> Verdict {
    if n > 0 && hits == n {
        Verdict::Holds
    } else if 2 * hits > n {
        Verdict::Partly
    } else {
        Verdict::Fails
    }
}

fn label(v: Verdict) -> &'static str {
    match v {
        Verdict::Holds => "holds",
        Verdict::Partly => "partly",
        Verdict::Fails => "does not hold",
    }
}

fn get<'a>(m: &'a [TaskMetrics], task: &str, window: &str) -> &'a TaskMetrics {
    m.iter()
        .find(|r| r.task == task && r.window == window)
        .expect("task list comes from the same table")
}

fn stab<'a>(s: &'a [StabilityRow], task: &str, method: &str, k: usize) -> Option<&'a StabilityRow> {
    s.iter().find(|r| {
        r.task == task
            && r.method == method
            && r.k == k
            && r.flip_rate.is_some()
            && r.instability.is_some()
    })
}

fn main() -> Result<()> {
    let args = Args::parse();
    let run = Run::new(&args.run)?;
    let tm = run.task_metrics()?;
    let st = run.stability()?;
    let mut claims = vec![];

    // tasks whose score moves at all (a task stuck at 0 over every checkpoint says nothing)
    let mut tasks: Vec<&str> = tm
        .iter()
        .filter(|m| m.window == "all" && m.mtv > 0.0 && m.mean_flip_rate.is_some())
        .map(|m| m.task.as_str())
        .collect();
    tasks.sort_unstable();
    tasks.dedup();
    let stuck: Vec<&str> = tm
        .iter()
        .filter(|m| m.window == "all" && m.mtv == 0.0)
        .map(|m| m.task.as_str())
        .collect();
    let n = tasks.len();
    let note = if stuck.is_empty() {
        String::new()
    } else {
        format!(" ({} left out: constant score)", stuck.join(", "))
    };

    let fin: Vec<&TaskMetrics> = tasks.iter().map(|t| get(&tm, t, "final")).collect();
    let moving = fin.iter().filter(|m| m.direction_changes >= 1).count();
    let mtvs: Vec<f64> = fin.iter().map(|m| m.mtv).collect();
    claims.push(Claim {
        claim: "Task-level scores fluctuate between neighbouring checkpoints, also late in training",
        result: format!("final 20%: task-score MTV {:.4} to {:.4} (mean {:.4}); {moving}/{n} tasks change direction at least once{note}", mtvs.iter().cloned().fold(f64::INFINITY, f64::min), mtvs.iter().cloned().fold(0.0, f64::max), mean(&mtvs)),
        holds: verdict(moving, n),
        command: "just figure fig1_scores",
    });

    let all: Vec<&TaskMetrics> = tasks.iter().map(|t| get(&tm, t, "all")).collect();
    let ratios: Vec<f64> = all
        .iter()
        .map(|m| m.mean_flip_rate.unwrap() / m.mtv)
        .collect();
    let bigger = ratios.iter().filter(|r| **r > 1.0).count();
    claims.push(Claim {
        claim: "Example-level fluctuation is far larger than the task-level one (gains and losses of different examples cancel)",
        result: format!("all checkpoints: mean example flip rate / task-score MTV = {:.1}x to {:.1}x; larger on {bigger}/{n} tasks", ratios.iter().cloned().fold(f64::INFINITY, f64::min), ratios.iter().cloned().fold(0.0, f64::max)),
        holds: verdict(bigger, n),
        command: "just figure fig3_flip_rates",
    });

    let persist = fin
        .iter()
        .filter(|m| m.mean_flip_rate.unwrap_or(0.0) > 0.0)
        .count();
    let flips: Vec<f64> = fin.iter().filter_map(|m| m.mean_flip_rate).collect();
    claims.push(Claim {
        claim: "Example-level fluctuation persists to the end of training",
        result: format!(
            "final 20%: mean example flip rate {:.3} (min {:.3}); non-zero on {persist}/{n} tasks",
            mean(&flips),
            flips.iter().cloned().fold(f64::INFINITY, f64::min)
        ),
        holds: verdict(persist, n),
        command: "just figure fig2_example_heatmap",
    });

    let opt: Vec<f64> = all.iter().filter_map(|m| m.selection_optimism).collect();
    let optimistic = opt.iter().filter(|o| **o > 0.0).count();
    claims.push(Claim {
        claim: "Picking the best checkpoint by its score overstates how good it is (the motivation)",
        result: format!("all checkpoints, checkpoint picked on one half of the examples: its score there minus its score on the other half, mean {:+.3}; positive on {optimistic}/{} tasks", mean(&opt), opt.len()),
        holds: verdict(optimistic, opt.len()),
        command: "just reproduce; target/release/analysis report runs/default",
    });

    // integration: the largest k both methods share
    let k = [16usize, 8, 4, 2]
        .into_iter()
        .find(|k| {
            st.iter().any(|r| r.method == "average" && r.k == *k)
                && st.iter().any(|r| r.method == "ensemble" && r.k == *k)
        })
        .context("analysis/stability.csv: averaging and ensembling share no window k")?;
    let both: Vec<&str> = tasks
        .iter()
        .copied()
        .filter(|t| {
            stab(&st, t, "single", 1).is_some()
                && stab(&st, t, "average", k).is_some()
                && stab(&st, t, "ensemble", k).is_some()
        })
        .collect();
    let nb = both.len();
    for (method, claim, fig) in [
        (
            "average",
            "Checkpoint averaging reduces fluctuation (MTV and IS) without changing training",
            "just figure fig4_integration",
        ),
        (
            "ensemble",
            "Checkpoint ensembling reduces fluctuation (MTV and IS)",
            "just figure fig4_integration",
        ),
    ] {
        let (mut lower, mut d_mtv, mut d_is) = (0, vec![], vec![]);
        for t in &both {
            let (s, v) = (
                stab(&st, t, "single", 1).unwrap(),
                stab(&st, t, method, k).unwrap(),
            );
            lower += usize::from(v.flip_rate < s.flip_rate && v.instability < s.instability);
            d_mtv.push(v.flip_rate.unwrap() - s.flip_rate.unwrap());
            d_is.push(v.instability.unwrap() - s.instability.unwrap());
        }
        claims.push(Claim { claim, result: format!("k={k}, final stage: example MTV {:+.4}, IS {:+.4} on average; both lower on {lower}/{nb} tasks", mean(&d_mtv), mean(&d_is)), holds: verdict(lower, nb), command: fig });
    }

    let mean_is = |method: &str, k: usize| -> Option<f64> {
        let v: Vec<f64> = both
            .iter()
            .filter_map(|t| {
                stab(&st, t, method, k)
                    .or(if k == 1 {
                        stab(&st, t, "single", 1)
                    } else {
                        None
                    })
                    .and_then(|r| r.instability)
            })
            .collect();
        (v.len() == nb && nb > 0).then(|| mean(&v))
    };
    let mut ks: Vec<usize> = st
        .iter()
        .filter(|r| r.method == "ensemble")
        .map(|r| r.k)
        .collect();
    ks.sort_unstable();
    ks.dedup();
    let curve: Vec<(usize, f64)> = ks
        .iter()
        .filter_map(|&k| mean_is("ensemble", k).map(|v| (k, v)))
        .collect();
    let steps_down = curve.windows(2).filter(|w| w[1].1 <= w[0].1).count();
    claims.push(Claim {
        claim: "Larger windows lower fluctuation further",
        result: format!(
            "ensembling, mean IS by k: {}; lower or equal at {steps_down}/{} steps up in k",
            curve
                .iter()
                .map(|(k, v)| format!("k={k}: {v:.4}"))
                .collect::<Vec<_>>()
                .join(", "),
            curve.len().saturating_sub(1)
        ),
        holds: verdict(steps_down, curve.len().saturating_sub(1)),
        command: "just figure fig5_window_size",
    });

    let (ia, ie) = (
        mean_is("average", k).unwrap_or(f64::NAN),
        mean_is("ensemble", k).unwrap_or(f64::NAN),
    );
    let more = both
        .iter()
        .filter(|t| {
            stab(&st, t, "ensemble", k).unwrap().instability
                <= stab(&st, t, "average", k).unwrap().instability
        })
        .count();
    claims.push(Claim {
        claim: "Ensembling stabilises more than averaging (at k times the inference cost)",
        result: format!("k={k}: mean IS ensemble {ie:.4} vs average {ia:.4}; ensemble lower or equal on {more}/{nb} tasks; {k} forward passes vs 1"),
        holds: verdict(more, nb),
        command: "just figure table2_stability",
    });

    for (method, name) in [("average", "averaging"), ("ensemble", "ensembling")] {
        let up = both
            .iter()
            .filter(|t| {
                stab(&st, t, method, k).unwrap().mean_score
                    > stab(&st, t, "single", 1).unwrap().mean_score
            })
            .count();
        let d: Vec<f64> = both
            .iter()
            .map(|t| {
                stab(&st, t, method, k).unwrap().mean_score
                    - stab(&st, t, "single", 1).unwrap().mean_score
            })
            .collect();
        claims.push(Claim {
            claim: if method == "average" { "Averaging often raises the mean score too" } else { "Ensembling often raises the mean score too" },
            result: format!("k={k}, final stage: mean score {:+.4} on average with {name}; higher on {up}/{nb} tasks", mean(&d)),
            holds: verdict(up, nb),
            command: "just figure table1_main_results",
        });
    }

    // Pythia: does the task-level fluctuation vanish with size?
    let mut sizes = vec![];
    for m in experiments::pythia_models(&args.pythia, &run)? {
        sizes.push((
            m.name,
            mean(&m.last.iter().map(|r| r.mtv).collect::<Vec<_>>()),
        ));
    }
    let (smallest, largest) = (&sizes[0], &sizes[sizes.len() - 1]);
    let kept = usize::from(largest.1 >= smallest.1 / 2.0);
    claims.push(Claim {
        claim: "The fluctuation does not vanish with model size (real runs: Pythia 70M to 12B)",
        result: format!("final 20% (5 checkpoints), mean task-score MTV over {} tasks: {}; the largest keeps {:.0}% of the smallest's", experiments::PYTHIA_TASKS.len(), sizes.iter().map(|s| format!("{} {:.4}", s.0.trim_start_matches("pythia-"), s.1)).collect::<Vec<_>>().join(", "), 100.0 * largest.1 / smallest.1),
        holds: verdict(kept, 1),
        command: "just figure fig7_pythia",
    });

    let header = ["claim of the study", "this run", "verdict", "command"];
    let row = |c: &Claim, command: String| {
        vec![
            c.claim.to_string(),
            c.result.clone(),
            label(c.holds).to_string(),
            command,
        ]
    };
    let rows: Vec<Vec<String>> = claims
        .iter()
        .map(|c| row(c, format!("`{}`", c.command)))
        .collect();
    let mut md = markdown_table(&header, &rows);
    md += &format!("\nVerdicts are computed by `table3_claims` from `{}`: \"holds\" when the measure goes the claimed way on every task or step in k (for Pythia: the largest model keeps at least half the smallest model's MTV), \"partly\" on more than half, otherwise \"does not hold\".\n", run.dir.display());
    let csv_rows: Vec<Vec<String>> = claims
        .iter()
        .map(|c| row(c, c.command.to_string()))
        .collect();
    Output::new(&args.out, "table3_claims")?.table(
        &md,
        &csv_text(&["claim", "result", "verdict", "command"], &csv_rows)?,
        &run,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_need_every_case_to_hold_and_a_majority_to_be_partial() {
        assert_eq!(verdict(5, 5), Verdict::Holds);
        assert_eq!(verdict(3, 5), Verdict::Partly);
        assert_eq!(verdict(2, 4), Verdict::Fails);
        assert_eq!(verdict(0, 0), Verdict::Fails);
    }
}
