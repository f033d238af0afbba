//! Table 8: schedules and sizes as contrasts of the claims (issue 30 item 2). For every recipe of
//! the grid that differs from the cosine seeds (the seed group with the most runs, the yardstick)
//! in its learning-rate schedule only or its model size only, each claim's effect (its headline
//! statistic, the estimate Table 3 shows: acc for a claim over several metrics) is compared as
//! the difference of the two recipes' mean estimates, with the pooled-variance t interval of
//! `analysis::seeds::pooled_t_difference` (the one Table 6 uses for the size difference of final
//! scores): its spread is the runs' between-seed spread, so a schedule or size that changes a
//! claim's effect by no more than seeds do reads as inconclusive. With one run of a schedule the
//! spread is the cosine seeds' alone (df = 2).
//!
//! A separate table rather than a section of Table 3: Table 3 decides claims within a recipe,
//! this one compares recipes, and it belongs with the grid's other axes in the paper's Section 6.

use analysis::claims::Verdict;
use analysis::seeds::t_quantile;
use anyhow::Result;
use clap::Parser;
use experiments::recipe::{contrast, grid_claims, pairings, Contrast};
use experiments::study::load_results;
use experiments::{csv_text, markdown_table, Args, Output, Run};

/// The most runs per arm the search for "runs per arm to decide" tries.
const MAX_RUNS: usize = 1000;

fn main() -> Result<()> {
    let args = Args::parse();
    let prov = Run::new(&args.results)?;
    let runs = load_results(&args.results, &prov)?;
    let models = experiments::pythia_models(&args.pythia, &prov)?;
    let per_run = grid_claims(&runs, &models, &prov)?;
    let pairs = pairings(&runs);

    // every (pairing, claim) with a contrast; the family is the contrasts with an interval
    let mut cells: Vec<(usize, usize, Contrast)> = vec![];
    for (p, pairing) in pairs.iter().enumerate() {
        for i in 0..per_run[pairing.reference[0]].len() {
            if let Some(c) = contrast(&per_run, pairing, i) {
                cells.push((p, i, c));
            }
        }
    }
    let family = cells.iter().filter(|c| c.2.at_95.is_some()).count().max(1);
    let level = 1.0 - 0.05 / family as f64;

    let header = [
        "contrast",
        "",
        "claim of the study",
        "runs of the recipe: estimate, own verdict",
        "yardstick: mean (sd)",
        "difference",
        "95% interval",
        "family-level interval",
        "verdict",
        "runs per arm to decide",
    ];
    let (mut rows, mut csv_rows) = (vec![], vec![]);
    let (mut higher, mut lower, mut inconclusive, mut unadjusted, mut none) = (0, 0, 0, 0, 0);
    let mut unadjusted_list: Vec<String> = vec![];
    for (p, i, c) in &cells {
        let pairing = &pairs[*p];
        let claim = &per_run[pairing.reference[0]][*i];
        let own = pairing
            .other
            .iter()
            .map(|&r| format!("{} {:+.4} {}", runs[r].name, per_run[r][*i].estimate, per_run[r][*i].verdict.label()))
            .collect::<Vec<_>>()
            .join("; ");
        let (m, sd) = c.reference_spread();
        let at_family = c.at(level);
        let (verdict, needed) = match (&c.at_95, &at_family) {
            (Some(_), Some(f)) if f.low > 0.0 => {
                higher += 1;
                ("differs: higher".to_string(), "-".to_string())
            }
            (Some(_), Some(f)) if f.high < 0.0 => {
                lower += 1;
                ("differs: lower".to_string(), "-".to_string())
            }
            (Some(_), Some(_)) => {
                inconclusive += 1;
                (
                    Verdict::Inconclusive.label().to_string(),
                    c.runs_needed(level, MAX_RUNS).map_or(format!("> {MAX_RUNS} or never"), |n| n.to_string()),
                )
            }
            _ => {
                none += 1;
                ("- (no seed spread: the runs are copies, or too few)".to_string(), "-".to_string())
            }
        };
        if let Some(d) = c.at_95.as_ref().filter(|d| d.low > 0.0 || d.high < 0.0) {
            unadjusted += 1;
            unadjusted_list.push(format!("{} {} {:+.4}", pairing.label, claim.id, d.estimate));
        }
        let fmt = |d: &Option<analysis::seeds::Difference>| {
            d.as_ref().map_or("-".into(), |d| format!("[{:+.4}, {:+.4}]", d.low, d.high))
        };
        let diff = c
            .at_95
            .as_ref()
            .map_or(format!("{:+.4}", experiments::mean(&c.other) - experiments::mean(&c.reference)), |d| {
                format!("{:+.4}", d.estimate)
            });
        let label = format!("{} - {}", pairing.label, pairing.reference_label);
        let row = vec![
            label.clone(),
            claim.id.to_string(),
            claim.claim.to_string(),
            own,
            if sd.is_finite() { format!("{m:+.4} ({sd:.4})") } else { format!("{m:+.4}") },
            diff,
            fmt(&c.at_95),
            fmt(&at_family),
            verdict,
            needed,
        ];
        csv_rows.push({
            let mut r = row.clone();
            r.insert(1, pairing.axis.to_string());
            r
        });
        rows.push(row);
    }

    let mut md = if pairs.is_empty() {
        format!(
            "No recipe under `{}` differs from the seed group with the most runs in its schedule only or its size only: no contrast to show.\n",
            args.results.display()
        )
    } else if rows.is_empty() {
        format!(
            "Every claim gives every run under `{}` the same estimate (the runs are copies of one run, or the claim is decided on data outside them): no contrast to show.\n",
            args.results.display()
        )
    } else {
        markdown_table(&header, &rows)
    };
    if !rows.is_empty() {
        let yard = &pairs[0];
        // the family-level half-width in pooled between-seed sds, per design (runs against runs)
        let mut designs: Vec<(usize, usize)> = pairs.iter().map(|p| (p.other.len(), p.reference.len())).collect();
        designs.sort();
        designs.dedup();
        let widths = designs
            .iter()
            .filter(|(a, b)| a + b > 2)
            .map(|&(a, b)| {
                let w = t_quantile(a + b - 2, level) * (1.0 / a as f64 + 1.0 / b as f64).sqrt();
                let w95 = t_quantile(a + b - 2, 0.95) * (1.0 / a as f64 + 1.0 / b as f64).sqrt();
                format!("{w:.1} ({w95:.1} at 95%) with {a} run{} against {b}", if a == 1 { "" } else { "s" })
            })
            .collect::<Vec<_>>()
            .join(", ");
        md += &format!(
            "\nEach contrast: a recipe that differs from the yardstick `{}` ({}) in its schedule or its size alone, claim by claim: the mean of its runs' claim estimates minus the yardstick's (the claim's headline statistic, acc for a claim over several metrics), with a pooled-variance Student t interval on runs - 2 degrees of freedom whose spread is the runs' between-seed spread, equal variances assumed, so with one run of a recipe the spread is the yardstick's seeds' alone (`analysis::seeds::pooled_t_difference`, as Table 6's size difference; coverage 93-97% of 1,000 simulated grids with one or two runs against three, `analysis::seeds` test `contrast_intervals_cover_at_their_level`). \"runs of the recipe\": each run's own estimate and verdict by Table 3's rules. The Pythia claim (C16) is the same in every run and has no contrast. The verdict is at the family level {:.2}% = 1 - 0.05/{family} (Bonferroni over the table's {family} contrasts): \"differs\" when that interval excludes 0. {} contrasts: {higher} higher, {lower} lower, {inconclusive} inconclusive{}. At an unadjusted 95% {unadjusted} would exclude 0 (about {:.1} expected by chance alone if no recipe changed any claim){}: leads for more seeds, not findings. The family-level half-width is {widths} pooled between-seed sds, so only a schedule or size that moves a claim's effect by that many seed sds could be seen with these runs. \"runs per arm to decide\": runs of each recipe that would exclude 0 at the family level if the difference and the pooled spread stay as observed.\n",
            yard.reference_label,
            yard.reference.iter().map(|&r| runs[r].name.as_str()).collect::<Vec<_>>().join(", "),
            100.0 * level,
            cells.len(),
            if none > 0 { format!(", {none} without a seed spread") } else { String::new() },
            0.05 * (cells.len() - none) as f64,
            if unadjusted_list.is_empty() { String::new() } else { format!(": {}", unadjusted_list.join("; ")) },
        );
    }
    Output::new(&args.out, "table8_claim_contrasts")?.table(
        &md,
        &csv_text(
            &[
                "contrast",
                "axis",
                "id",
                "claim",
                "runs",
                "yardstick_mean_sd",
                "difference",
                "ci95",
                "ci_family",
                "verdict",
                "runs_per_arm_to_decide",
            ],
            &csv_rows,
        )?,
        &prov,
    )
}
