//! Figure 7: the same task-level analysis on real runs, the Pythia "deduped" suite (70M to 12B
//! parameters, lm-evaluation-harness zero-shot results at 27 checkpoints, vendored in
//! `data/external`): score against step for every model size, then the final-stage MTV against
//! model size with the pooled size trend (slope of ln MTV on ln parameters, task fixed effects,
//! 95% t interval: `experiments::pythia_size_trend`), and its ratio to the MTV that independent
//! binomial noise would give. The results files hold no per-example data, so that ratio is the
//! conservative figure: it ignores that all checkpoints share one eval set, and overstates the
//! noise (a ratio below 1 does not mean noise alone).

use analysis::TaskMetrics;
use anyhow::Result;
use clap::Parser;
use experiments::plot::{color, font, legend, panel, titled_grid, Figure};
use experiments::{curve, mean, pythia_models, Args, Output, Run, PYTHIA_TASKS};
use plotters::coord::Shift;
use plotters::prelude::*;

/// the tasks drawn: the first six of PYTHIA_TASKS (logiqa and wsc are in the claims table)
const DRAWN: usize = 6;

struct Model {
    name: String,
    params: f64,
    /// per drawn task, in PYTHIA_TASKS order: (steps, scores)
    curves: Vec<(Vec<f64>, Vec<f64>)>,
    /// per drawn task: the final-stage metrics
    last: Vec<TaskMetrics>,
}

struct Fig(Vec<Model>, Option<analysis::trend::Slope>);

impl Figure for Fig {
    fn size(&self) -> (u32, u32) {
        (2400, 1150)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let panels = titled_grid(root, "Pythia (deduped), zero-shot lm-evaluation-harness scores over training, and their final-stage fluctuation by model size", 2, 4)?;
        for (t, task) in PYTHIA_TASKS[..DRAWN].iter().enumerate() {
            let yr = experiments::plot::padded(self.0.iter().flat_map(|m| m.curves[t].1.iter().copied()));
            let mut chart = panel(&panels[t], task, 64).build_cartesian_2d((1f64..2e5).log_scale(), yr)?;
            chart
                .configure_mesh()
                .x_desc("training step + 1 (log scale)")
                .y_desc("accuracy")
                .x_label_formatter(&|v| format!("{v:.0}"))
                .y_label_formatter(&|v| format!("{v:.2}"))
                .label_style(font(15))
                .axis_desc_style(font(17))
                .light_line_style(TRANSPARENT)
                .bold_line_style(RGBColor(225, 225, 225))
                .draw()?;
            for (i, m) in self.0.iter().enumerate() {
                let c = color(i);
                let pts: Vec<(f64, f64)> =
                    m.curves[t].0.iter().map(|s| s + 1.0).zip(m.curves[t].1.iter().copied()).collect();
                chart
                    .draw_series(LineSeries::new(pts, c.stroke_width(2)))?
                    .label(m.name.as_str())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(3)));
            }
            if t == 0 {
                legend(&mut chart, SeriesLabelPosition::UpperLeft, 14)?;
            }
        }
        let sizes = self.0.iter().map(|m| m.params);
        let xr = (sizes.clone().fold(f64::INFINITY, f64::min) / 1.5)..(sizes.fold(0.0, f64::max) * 1.5);
        let panels_metrics: [(&str, &str, fn(&TaskMetrics) -> Option<f64>); 2] = [
            ("final-stage MTV of the task score", "MTV (mean |change| of accuracy)", |m| Some(m.mtv)),
            ("final-stage MTV / independent-binomial MTV (upper bound on noise)", "ratio", |m| m.binomial_bound_ratio),
        ];
        for (p, (title, ydesc, f)) in panels_metrics.iter().enumerate() {
            let values: Vec<f64> = self.0.iter().flat_map(|m| m.last.iter().filter_map(f)).collect();
            let top = values.iter().cloned().fold(0.0, f64::max) * 1.1;
            let title = match (&self.1, p) {
                (Some(s), 0) => format!("{title}: pooled slope {:+.3} [{:+.3}, {:+.3}]", s.slope, s.ci_low, s.ci_high),
                _ => title.to_string(),
            };
            let mut chart =
                panel(&panels[6 + p], &title, 72).build_cartesian_2d(xr.clone().log_scale(), 0f64..top.max(1e-3))?;
            chart
                .configure_mesh()
                .x_desc("parameters (log scale)")
                .y_desc(*ydesc)
                .x_label_formatter(&|v| {
                    if *v >= 1e9 {
                        format!("{:.0}B", v / 1e9)
                    } else {
                        format!("{:.0}M", v / 1e6)
                    }
                })
                .y_label_formatter(&|v| format!("{v:.3}"))
                .label_style(font(15))
                .axis_desc_style(font(17))
                .light_line_style(TRANSPARENT)
                .bold_line_style(RGBColor(225, 225, 225))
                .draw()?;
            for (t, task) in PYTHIA_TASKS[..DRAWN].iter().enumerate() {
                let c = color(t);
                let pts: Vec<(f64, f64)> = self.0.iter().filter_map(|m| f(&m.last[t]).map(|v| (m.params, v))).collect();
                chart
                    .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
                    .label(*task)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(3)));
                chart.draw_series(pts.into_iter().map(|q| Circle::new(q, 5, c.filled())))?;
            }
            let means: Vec<(f64, f64)> =
                self.0.iter().map(|m| (m.params, mean(&m.last.iter().filter_map(f).collect::<Vec<_>>()))).collect();
            chart
                .draw_series(LineSeries::new(means, BLACK.stroke_width(4)))?
                .label("mean over tasks")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], BLACK.stroke_width(4)));
            if p == 0 {
                legend(&mut chart, SeriesLabelPosition::UpperRight, 14)?;
            }
        }
        Ok(())
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let run = Run::new(&args.pythia)?;
    let mut models = vec![];
    let all = pythia_models(&args.pythia, &run)?;
    let trend = experiments::pythia_size_trend(&all);
    for m in all {
        let curves = PYTHIA_TASKS[..DRAWN]
            .iter()
            .map(|t| {
                let (s, a, _) = curve(&m.rows, t);
                (s, a)
            })
            .collect();
        models.push(Model { name: m.name, params: m.params, curves, last: m.last[..DRAWN].to_vec() });
    }
    Output::new(&args.out, "fig7_pythia")?.figure(&Fig(models, trend.pooled), &run)
}
