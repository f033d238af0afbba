//! Figure 4: over the final stage, the score of single checkpoints beside the smoothing baseline
//! (k-moving average of the single checkpoints' scores: what window overlap alone gives),
//! averaged (one model, weights of the last k checkpoints) and ensembled (mean of the last k
//! predictive distributions over the options) ones, k = 4 and 16, on the same steps.

use anyhow::{bail, Result};
use clap::Parser;
use experiments::plot::{int_label, legend, mesh, method_color, padded, panel, task_grid, two_decimals, Figure};
use experiments::{curve, task_names, Args, Output, Run};
use plotters::coord::Shift;
use plotters::prelude::*;
use run::{Method, Variant};

/// (label, method, k); the smoothing baseline is computed from the single checkpoints' scores
const VARIANTS: [(&str, Method, usize); 7] = [
    ("single checkpoint", Method::Single, 1),
    ("smoothing k=4", Method::Smoothing, 4),
    ("smoothing k=16", Method::Smoothing, 16),
    ("average k=4", Method::Average, 4),
    ("average k=16", Method::Average, 16),
    ("ensemble k=4", Method::EnsembleMean, 4),
    ("ensemble k=16", Method::EnsembleMean, 16),
];

struct Panel {
    task: String,
    /// one curve per variant, in VARIANTS order, cut to the steps every variant has
    curves: Vec<Vec<(f64, f64)>>,
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
        let panels = task_grid(root, "Final stage: single checkpoints vs the smoothing baseline, checkpoint averaging and ensembling (mean of option distributions) over the last k checkpoints", self.0.len())?;
        for (i, (p, area)) in self.0.iter().zip(&panels).enumerate() {
            let xs = p.curves[0].iter().map(|q| q.0);
            let (x0, x1) = (xs.clone().fold(f64::INFINITY, f64::min), xs.fold(f64::NEG_INFINITY, f64::max));
            let yr = padded(p.curves.iter().flatten().map(|q| q.1));
            let mut chart = panel(area, &p.task, 64).build_cartesian_2d(x0..x1, yr)?;
            mesh(&mut chart, "training step", "accuracy", &int_label, &two_decimals)?;
            for ((label, method, k), pts) in VARIANTS.iter().zip(&p.curves) {
                let c = method_color(*method);
                let style = c.stroke_width(if *method == Method::Single { 2 } else { 3 });
                let pts = pts.clone();
                if *method == Method::Smoothing {
                    chart
                        .draw_series(DashedLineSeries::new(pts, if *k == 4 { 4 } else { 12 }, 4, style))?
                        .label(*label)
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 10, y)], style));
                } else if *k == 4 {
                    chart
                        .draw_series(DashedLineSeries::new(pts, 10, 6, style))?
                        .label(*label)
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 10, y)], style));
                } else {
                    chart
                        .draw_series(LineSeries::new(pts, style))?
                        .label(*label)
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
                }
            }
            if i == 0 {
                legend(&mut chart, SeriesLabelPosition::LowerRight, 15)?;
            }
        }
        Ok(())
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let run = Run::new(&args.run)?;
    let tables = VARIANTS.iter().map(|v| run.tasks(Variant::new(v.1, v.2))).collect::<Result<Vec<_>>>()?;
    let mut panels = vec![];
    for task in task_names(tables[0].iter().map(|r| r.task.as_str())) {
        let curves: Vec<Vec<(f64, f64)>> = tables
            .iter()
            .zip(&VARIANTS)
            .map(|(t, v)| {
                let (s, a, _) = curve(t, &task);
                if v.1 == Method::Smoothing {
                    // the k-moving average of the single scores, at the last step of each window
                    let ma = theory::sequence::moving_average(&a, v.2);
                    s[v.2 - 1..].iter().copied().zip(ma).collect()
                } else {
                    s.into_iter().zip(a).collect()
                }
            })
            .collect();
        if let Some(i) = curves.iter().position(|c| c.is_empty()) {
            // cloze tasks have no ensemble: there is no distribution over options to average
            eprintln!("{task}: not in the tables of {}; left out", Variant::new(VARIANTS[i].1, VARIANTS[i].2));
            continue;
        }
        // the steps that every variant was scored at
        let shared: Vec<f64> =
            curves[0].iter().map(|q| q.0).filter(|s| curves.iter().all(|c| c.iter().any(|q| q.0 == *s))).collect();
        if shared.len() < 2 {
            bail!("{task}: fewer than two steps are shared by single, averaged and ensembled tables; run `just reproduce`");
        }
        let curves = curves.into_iter().map(|c| c.into_iter().filter(|q| shared.contains(&q.0)).collect()).collect();
        panels.push(Panel { task, curves });
    }
    Output::new(&args.out, "fig4_integration")?.figure(&Fig(panels), &run)
}
