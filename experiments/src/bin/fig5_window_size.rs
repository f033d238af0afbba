//! Figure 5: fluctuation against the window size k, for averaging and ensembling, over the
//! final-stage steps every variant shares: MTV of the task score, mean example flip rate
//! (example-level MTV) and mean instability score (IS). Bold: mean over tasks; faint: each task.
//! The smoothing baseline (k-moving average of the single checkpoints' scores) is drawn in the
//! MTV panel, where it is defined; ensembling is the mean of the members' option distributions.

use analysis::compare::StabilityRow;
use anyhow::{bail, Result};
use clap::Parser;
use experiments::plot::{font, legend, method_color, padded, panel, titled_grid, Figure};
use experiments::{mean, task_names, Args, Output, Run};
use plotters::coord::Shift;
use plotters::prelude::*;
use run::Method;

const METRICS: [&str; 3] = ["MTV of the task score", "mean example flip rate", "mean instability score (IS)"];

fn metric(r: &StabilityRow, i: usize) -> Option<f64> {
    [Some(r.mtv), r.flip_rate, r.instability][i]
}

/// method -> (per task: [(log2 k, value)], mean over tasks: [(log2 k, value)]); k = 1 is the single checkpoint.
type Lines = Vec<(Method, Vec<Vec<(f64, f64)>>, Vec<(f64, f64)>)>;

fn lines(rows: &[StabilityRow], i: usize) -> Lines {
    let tasks = task_names(rows.iter().map(|r| r.task.as_str()));
    [Method::Smoothing, Method::Average, Method::EnsembleMean]
        .into_iter()
        .map(|method| {
            let mut ks: Vec<usize> =
                rows.iter().filter(|r| r.method == method || r.method == Method::Single).map(|r| r.k).collect();
            ks.sort_unstable();
            ks.dedup();
            let value = |task: &str, k: usize| {
                rows.iter()
                    .find(|r| {
                        r.task == task && r.k == k && (r.method == method || (k == 1 && r.method == Method::Single))
                    })
                    .and_then(|r| metric(r, i))
            };
            let per_task: Vec<Vec<(f64, f64)>> = tasks
                .iter()
                .map(|t| ks.iter().filter_map(|&k| value(t, k).map(|v| ((k as f64).log2(), v))).collect())
                .collect();
            let means = ks
                .iter()
                .map(|&k| ((k as f64).log2(), mean(&tasks.iter().filter_map(|t| value(t, k)).collect::<Vec<_>>())))
                .collect();
            (method, per_task, means)
        })
        // the smoothing baseline has no example-level measures
        .filter(|(_, _, means): &(Method, Vec<Vec<(f64, f64)>>, Vec<(f64, f64)>)| {
            means.iter().filter(|q| q.1.is_finite()).count() > 1
        })
        .collect()
}

fn label(method: Method) -> &'static str {
    match method {
        Method::EnsembleMean => "ensemble, mean of distributions",
        Method::Smoothing => "smoothing baseline",
        m => m.name(),
    }
}

struct Fig(Vec<Lines>);

impl Figure for Fig {
    fn size(&self) -> (u32, u32) {
        (2100, 700)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let panels = titled_grid(root, "Fluctuation over the final stage against the number k of checkpoints integrated (k = 1: single checkpoints)", 1, 3)?;
        for ((title, lines), area) in METRICS.iter().zip(&self.0).zip(&panels) {
            // x is log2 k, labelled with k
            let kmax = lines.iter().flat_map(|l| l.2.iter().map(|q| q.0)).fold(1.0, f64::max);
            let yr = padded(lines.iter().flat_map(|l| l.1.iter().flatten().chain(&l.2)).map(|q| q.1));
            let yr = yr.start.max(0.0)..yr.end;
            let mut chart = panel(area, title, 72).build_cartesian_2d(-0.2f64..kmax + 0.2, yr)?;
            chart
                .configure_mesh()
                .x_desc("window size k (checkpoints)")
                .y_desc("mean over the final-stage steps")
                .x_labels(kmax as usize + 1)
                .x_label_formatter(&|v| {
                    if (v - v.round()).abs() < 1e-6 && *v >= 0.0 {
                        format!("{}", 2f64.powi(v.round() as i32))
                    } else {
                        String::new()
                    }
                })
                .y_label_formatter(&|v| format!("{v:.3}"))
                .label_style(font(16))
                .axis_desc_style(font(17))
                .light_line_style(TRANSPARENT)
                .bold_line_style(RGBColor(225, 225, 225))
                .draw()?;
            for (method, per_task, means) in lines {
                let c = method_color(*method);
                for t in per_task {
                    chart.draw_series(LineSeries::new(t.clone(), c.mix(0.18).stroke_width(1)))?;
                }
                chart
                    .draw_series(LineSeries::new(means.clone(), c.stroke_width(4)))?
                    .label(format!("{} (mean over tasks)", label(*method)))
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(4)));
                chart.draw_series(means.iter().map(|&q| Circle::new(q, 6, c.filled())))?;
            }
            legend(&mut chart, SeriesLabelPosition::UpperRight, 16)?;
        }
        Ok(())
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let run = Run::new(&args.run)?;
    let rows = run.stability()?;
    if !rows.iter().any(|r| r.method != Method::Single) {
        bail!("{}: analysis/stability.csv has no averaged or ensembled rows; run `just reproduce`", run.dir.display());
    }
    let fig = Fig((0..METRICS.len()).map(|i| lines(&rows, i)).collect());
    Output::new(&args.out, "fig5_window_size")?.figure(&fig, &run)
}
