//! Figure 3: the distribution over examples of the flip rate (example-level MTV of 0/1
//! correctness) per task, with its mean beside the MTV of the task score: gains and losses of
//! different examples cancel in the aggregate, so the task moves far less than its examples.

use anyhow::{Context, Result};
use clap::Parser;
use experiments::plot::{color, legend, mesh, panel, task_grid, two_decimals, Figure};
use experiments::{mean, task_names, Args, Output, Run};
use plotters::coord::Shift;
use plotters::prelude::*;

const BIN: f64 = 0.02;

struct Panel {
    task: String,
    /// fraction of examples per bin of width BIN, from 0
    hist: Vec<f64>,
    mean_flip: f64,
    task_mtv: f64,
}

fn histogram(rates: &[f64]) -> Vec<f64> {
    let bins = (rates.iter().cloned().fold(0.0, f64::max) / BIN).floor() as usize + 1;
    let mut counts = vec![0usize; bins];
    for r in rates {
        counts[((r / BIN).floor() as usize).min(bins - 1)] += 1;
    }
    counts.into_iter().map(|c| c as f64 / rates.len() as f64).collect()
}

struct Fig(Vec<Panel>);

impl Figure for Fig {
    fn size(&self) -> (u32, u32) {
        (2400, 1100)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let x1 = self.0.iter().map(|p| p.hist.len() as f64 * BIN).fold(0.1, f64::max);
        let panels = task_grid(root, "Per-example flip rate over all checkpoints (bars), its mean (dashed) and the MTV of the task score (solid)", self.0.len())?;
        for (i, (p, area)) in self.0.iter().zip(&panels).enumerate() {
            let mut chart = panel(area, &p.task, 64).build_cartesian_2d(0f64..x1, 0f64..1.0)?;
            mesh(
                &mut chart,
                "flip rate (flips per checkpoint transition)",
                "fraction of examples",
                &two_decimals,
                &|v| format!("{v:.1}"),
            )?;
            let c = color(i);
            chart.draw_series(p.hist.iter().enumerate().map(|(b, &f)| {
                Rectangle::new([(b as f64 * BIN, 0.0), ((b + 1) as f64 * BIN, f)], c.mix(0.75).filled())
            }))?;
            chart
                .draw_series(DashedLineSeries::new(
                    [(p.mean_flip, 0.0), (p.mean_flip, 1.0)],
                    10,
                    6,
                    BLACK.stroke_width(2),
                ))?
                .label(format!("mean flip rate {:.3}", p.mean_flip))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], BLACK.stroke_width(2)));
            chart
                .draw_series(LineSeries::new([(p.task_mtv, 0.0), (p.task_mtv, 1.0)], RED.stroke_width(2)))?
                .label(format!("task-score MTV {:.3}", p.task_mtv))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], RED.stroke_width(2)));
            legend(&mut chart, SeriesLabelPosition::UpperRight, 15)?;
        }
        Ok(())
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let run = Run::new(&args.run)?;
    let examples = run.example_metrics()?;
    let tasks = run.task_metrics()?;
    let mut panels = vec![];
    for task in task_names(examples.iter().map(|e| e.task.as_str())) {
        let rates: Vec<f64> =
            examples.iter().filter(|e| e.task == task && e.window == "all").map(|e| e.flip_rate).collect();
        let tm = tasks
            .iter()
            .find(|m| m.task == task && m.window == "all")
            .with_context(|| format!("analysis/task_metrics.csv: no `all` row for {task}"))?;
        panels.push(Panel { task, hist: histogram(&rates), mean_flip: mean(&rates), task_mtv: tm.mtv });
    }
    Output::new(&args.out, "fig3_flip_rates")?.figure(&Fig(panels), &run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_fractions_sum_to_one_and_bin_left_closed() {
        let h = histogram(&[0.0, 0.0, 0.019, 0.02, 0.05]);
        assert_eq!(h.len(), 3);
        assert_eq!(h, vec![0.6, 0.2, 0.2]);
    }
}
