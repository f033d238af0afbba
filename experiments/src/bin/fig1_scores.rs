//! Figure 1: the downstream score of every checkpoint, per task, with the checkpoint that
//! best-checkpoint selection would pick marked, and the final stage (last 20%) shaded.

use anyhow::{Context, Result};
use clap::Parser;
use experiments::plot::{color, int_label, legend, mesh, padded, panel, task_grid, two_decimals, Figure};
use experiments::{curve, task_names, Args, Output, Run};
use plotters::coord::Shift;
use plotters::prelude::*;
use run::Variant;

struct Panel {
    task: String,
    steps: Vec<f64>,
    scores: Vec<f64>,
    stderr: Vec<f64>,
    best: (f64, f64),
    final_start: f64,
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
        let panels = task_grid(
            root,
            "Downstream accuracy at every checkpoint (band: ±1 standard error; shaded: final 20% of checkpoints)",
            self.0.len(),
        )?;
        for (i, (p, area)) in self.0.iter().zip(&panels).enumerate() {
            let x1 = *p.steps.last().unwrap_or(&1.0);
            let yr = padded(p.scores.iter().zip(&p.stderr).flat_map(|(s, e)| [s - e, s + e]));
            let mut chart = panel(area, &format!("{} (best: step {})", p.task, p.best.0), 64)
                .build_cartesian_2d(0f64..x1, yr.clone())?;
            mesh(&mut chart, "training step", "accuracy", &int_label, &two_decimals)?;
            chart.draw_series(std::iter::once(Rectangle::new(
                [(p.final_start, yr.start), (x1, yr.end)],
                RGBColor(235, 235, 235).filled(),
            )))?;
            let c = color(i);
            let band: Vec<(f64, f64)> = p
                .steps
                .iter()
                .zip(&p.scores)
                .zip(&p.stderr)
                .map(|((x, s), e)| (*x, s + e))
                .chain(p.steps.iter().zip(&p.scores).zip(&p.stderr).rev().map(|((x, s), e)| (*x, s - e)))
                .collect();
            chart.draw_series(std::iter::once(Polygon::new(band, c.mix(0.18).filled())))?;
            chart
                .draw_series(LineSeries::new(p.steps.iter().copied().zip(p.scores.iter().copied()), c.stroke_width(2)))?
                .label("accuracy")
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(3)));
            chart
                .draw_series(std::iter::once(Circle::new(p.best, 8, RED.filled())))?
                .label("best checkpoint")
                .legend(|(x, y)| Circle::new((x + 12, y), 6, RED.filled()));
            let last = (x1, *p.scores.last().unwrap_or(&0.0));
            chart
                .draw_series(std::iter::once(TriangleMarker::new(last, 9, BLACK.filled())))?
                .label("final checkpoint")
                .legend(|(x, y)| TriangleMarker::new((x + 12, y), 6, BLACK.filled()));
            if i == 0 {
                legend(&mut chart, SeriesLabelPosition::LowerRight, 16)?;
            }
        }
        Ok(())
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let run = Run::new(&args.run)?;
    let rows = run.tasks(Variant::SINGLE)?;
    let metrics = run.task_metrics()?;
    let mut panels = vec![];
    for task in task_names(rows.iter().map(|r| r.task.as_str())) {
        let (steps, scores, stderr) = curve(&rows, &task);
        let all = metrics
            .iter()
            .find(|m| m.task == task && m.window == "all")
            .with_context(|| format!("analysis/task_metrics.csv: no `all` row for {task}"))?;
        let fin = metrics
            .iter()
            .find(|m| m.task == task && m.window == "final")
            .with_context(|| format!("analysis/task_metrics.csv: no `final` row for {task}"))?;
        panels.push(Panel {
            task,
            steps,
            scores,
            stderr,
            best: (all.best_step as f64, all.best_score),
            final_start: fin.first_step as f64,
        });
    }
    Output::new(&args.out, "fig1_scores")?.figure(&Fig(panels), &run)
}
