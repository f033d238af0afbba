//! Figure 2: every example of every task at every checkpoint, correct (dark) or wrong (light),
//! rows sorted by the step from which the example stays correct (never-learned ones last).

use anyhow::Result;
use clap::Parser;
use experiments::plot::{color, font, int_label, panel, task_grid, Figure};
use experiments::{task_names, Args, Output, Run};
use plotters::coord::Shift;
use plotters::prelude::*;
use run::Variant;
use std::collections::BTreeMap;

struct Panel {
    task: String,
    steps: Vec<f64>,
    /// correct[row][checkpoint], rows in display order
    correct: Vec<Vec<bool>>,
}

/// Index of the first checkpoint from which the example is correct to the end (`m` if never).
fn learned_at(c: &[bool]) -> usize {
    c.iter().rposition(|&x| !x).map_or(0, |i| i + 1)
}

/// Rows sorted by learning checkpoint, then by how often they are correct (most first), then id.
fn sort_rows(mut rows: Vec<(String, Vec<bool>)>) -> Vec<(String, Vec<bool>)> {
    rows.sort_by_key(|(id, c)| (learned_at(c), std::cmp::Reverse(c.iter().filter(|&&x| x).count()), id.clone()));
    rows
}

struct Fig(Vec<Panel>);

impl Figure for Fig {
    fn size(&self) -> (u32, u32) {
        (2400, 1200)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let title = "Example-level correctness over checkpoints (dark: correct, light: wrong); rows sorted by the step from which an example stays correct";
        let panels = task_grid(root, title, self.0.len())?;
        for (i, (p, area)) in self.0.iter().zip(&panels).enumerate() {
            let n = p.correct.len();
            let m = p.steps.len();
            let dx = if m > 1 { p.steps[m - 1] - p.steps[m - 2] } else { 1.0 };
            let x1 = p.steps[m - 1] + dx;
            let mut chart = panel(area, &format!("{} ({} examples)", p.task, n), 64)
                .build_cartesian_2d(p.steps[0]..x1, 0f64..n as f64)?;
            chart
                .configure_mesh()
                .disable_mesh()
                .x_desc("training step")
                .y_desc("example (sorted)")
                .x_labels(5)
                .y_labels(5)
                .x_label_formatter(&int_label)
                .y_label_formatter(&int_label)
                .label_style(font(16))
                .axis_desc_style(font(18))
                .draw()?;
            chart.draw_series(std::iter::once(Rectangle::new(
                [(p.steps[0], 0.0), (x1, n as f64)],
                RGBColor(236, 236, 236).filled(),
            )))?;
            // one rectangle per run of consecutive correct checkpoints
            let c = color(i);
            let mut cells = vec![];
            for (row, corr) in p.correct.iter().enumerate() {
                let y = (n - 1 - row) as f64; // first row at the top
                let mut t = 0;
                while t < m {
                    if corr[t] {
                        let start = t;
                        while t < m && corr[t] {
                            t += 1;
                        }
                        let end = if t < m { p.steps[t] } else { x1 };
                        cells.push(Rectangle::new([(p.steps[start], y), (end, y + 1.0)], c.filled()));
                    } else {
                        t += 1;
                    }
                }
            }
            chart.draw_series(cells)?;
        }
        Ok(())
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let run = Run::new(&args.run)?;
    let examples = run.examples(Variant::SINGLE)?;
    let mut panels = vec![];
    for task in task_names(examples.iter().map(|r| r.task.as_str())) {
        let mut steps: Vec<u64> = examples.iter().filter(|r| r.task == task).map(|r| r.step).collect();
        steps.sort_unstable();
        steps.dedup();
        let col: BTreeMap<u64, usize> = steps.iter().enumerate().map(|(i, s)| (*s, i)).collect();
        let mut by_id: BTreeMap<String, Vec<bool>> = BTreeMap::new();
        for r in examples.iter().filter(|r| r.task == task) {
            by_id.entry(r.example_id.clone()).or_insert_with(|| vec![false; steps.len()])[col[&r.step]] = r.correct;
        }
        let rows = sort_rows(by_id.into_iter().collect());
        panels.push(Panel {
            task,
            steps: steps.iter().map(|&s| s as f64).collect(),
            correct: rows.into_iter().map(|(_, c)| c).collect(),
        });
    }
    Output::new(&args.out, "fig2_example_heatmap")?.figure(&Fig(panels), &run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_sort_by_the_checkpoint_they_are_learned_at() {
        let rows = vec![
            ("never".to_string(), vec![true, false, true, false]),
            ("late".to_string(), vec![false, false, false, true]),
            ("always".to_string(), vec![true, true, true, true]),
            ("mid".to_string(), vec![false, true, true, true]),
        ];
        let order: Vec<String> = sort_rows(rows).into_iter().map(|r| r.0).collect();
        assert_eq!(order, ["always", "mid", "late", "never"]);
        assert_eq!(learned_at(&[true, false, true, false]), 4);
    }
}
