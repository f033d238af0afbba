//! Figure 6: validation loss against step beside the downstream scores of the same checkpoints,
//! and how far each curve travels compared with the span it covers (total variation over
//! max - min: 1 for a monotone curve): the loss is smooth, the scores are not.

use anyhow::{bail, Result};
use clap::Parser;
use experiments::plot::{color, font, int_label, legend, mesh, padded, panel, titled_grid, two_decimals, Figure};
use experiments::{curve, task_names, Args, Output, Run};
use plotters::coord::Shift;
use plotters::prelude::*;
use run::Variant;

/// Sum of |increments| over (max - min); None for a constant curve.
fn roughness(y: &[f64]) -> Option<f64> {
    let span = y.iter().cloned().fold(f64::NEG_INFINITY, f64::max) - y.iter().cloned().fold(f64::INFINITY, f64::min);
    (span > 1e-12).then(|| theory::sequence::total_variation(y) / span)
}

struct Fig {
    loss: Vec<(f64, f64)>,
    scores: Vec<(String, Vec<(f64, f64)>)>,
    /// (name, roughness), the loss first
    rough: Vec<(String, f64)>,
}

impl Figure for Fig {
    fn size(&self) -> (u32, u32) {
        (2400, 800)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let panels =
            titled_grid(root, "Validation loss is smooth, downstream scores are not (same checkpoints)", 1, 3)?;
        let x1 = self.loss.last().map_or(1.0, |q| q.0);
        let mut chart = panel(&panels[0], "validation loss", 64)
            .build_cartesian_2d(0f64..x1, padded(self.loss.iter().map(|q| q.1)))?;
        mesh(&mut chart, "training step", "cross-entropy (nats/token)", &int_label, &two_decimals)?;
        chart.draw_series(LineSeries::new(self.loss.clone(), BLACK.stroke_width(3)))?;

        let mut chart = panel(&panels[1], "downstream accuracy", 64)
            .build_cartesian_2d(0f64..x1, padded(self.scores.iter().flat_map(|s| s.1.iter().map(|q| q.1))))?;
        mesh(&mut chart, "training step", "accuracy", &int_label, &two_decimals)?;
        for (i, (task, pts)) in self.scores.iter().enumerate() {
            let c = color(i);
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
                .label(task.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(3)));
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft, 14)?;

        // horizontal bars, one per curve, the loss at the top
        let n = self.rough.len();
        let top = self.rough.iter().map(|r| r.1).fold(1.0, f64::max) * 1.5;
        let mut chart = panel(&panels[2], "total variation / (max - min)", 190)
            .build_cartesian_2d((0.8f64..top).log_scale(), 0f64..n as f64)?;
        let names: Vec<String> = self.rough.iter().map(|r| r.0.clone()).collect();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n * 2 + 1)
            .y_label_formatter(&|v| {
                let i = n as f64 - v - 0.5;
                if (i - i.round()).abs() < 0.01 && i >= 0.0 && (i.round() as usize) < n {
                    names[i.round() as usize].clone()
                } else {
                    String::new()
                }
            })
            .x_desc("ratio, log scale (1 = monotone)")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .label_style(font(16))
            .axis_desc_style(font(18))
            .bold_line_style(RGBColor(225, 225, 225))
            .light_line_style(TRANSPARENT)
            .draw()?;
        chart.draw_series(self.rough.iter().enumerate().map(|(i, (name, r))| {
            let c = if name == "validation loss" {
                BLACK
            } else {
                color(self.scores.iter().position(|s| &s.0 == name).unwrap_or(0))
            };
            let y = (n - 1 - i) as f64;
            Rectangle::new([(0.8, y + 0.15), (*r, y + 0.85)], c.filled())
        }))?;
        Ok(())
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let run = Run::new(&args.run)?;
    let log = run.train_log()?;
    let tasks = run.tasks(Variant::SINGLE)?;
    let loss: Vec<(f64, f64)> = log.iter().filter_map(|r| r.val_loss.map(|v| (r.step as f64, v))).collect();
    if loss.len() < 2 {
        bail!("{}: fewer than two validation losses in train_log.csv", run.dir.display());
    }
    let mut scores = vec![];
    let mut rough =
        vec![("validation loss".to_string(), roughness(&loss.iter().map(|q| q.1).collect::<Vec<_>>()).unwrap_or(1.0))];
    for task in task_names(tasks.iter().map(|r| r.task.as_str())) {
        let (s, a, _) = curve(&tasks, &task);
        if let Some(r) = roughness(&a) {
            rough.push((task.clone(), r));
        } else {
            eprintln!("{task}: constant score; no ratio drawn");
        }
        scores.push((task, s.into_iter().zip(a).collect()));
    }
    Output::new(&args.out, "fig6_loss_vs_scores")?.figure(&Fig { loss, scores, rough }, &run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roughness_is_one_for_monotone_curves_and_grows_with_back_and_forth() {
        assert_eq!(roughness(&[3.0, 2.0, 1.5, 1.0]), Some(1.0));
        assert_eq!(roughness(&[0.0, 1.0, 0.0, 1.0]), Some(3.0));
        assert_eq!(roughness(&[0.5, 0.7, 0.5]), Some(2.0));
        assert_eq!(roughness(&[0.5, 0.5]), None);
    }
}
