//! Figure 8: the study grid's three axes (`results/<run>/`, `just study`). (a) Seeds: per task
//! above chance, the seed-to-seed sd of the final score (95% chi-square interval) next to the
//! checkpoint-to-checkpoint spread within a run (sd over the final stage, and MTV). (b) LR
//! schedule: final-stage task MTV pooled over the tasks above chance, single checkpoints vs the
//! smoothing baseline, averaging and ensembling at k = 16, per schedule at the default size.
//! (c) Size: the same pooled MTV against parameters for the cosine runs. A panel whose runs are
//! not committed yet says so instead of drawing.

use anyhow::Result;
use clap::Parser;
use experiments::plot::{font, legend, method_color, padded, panel, titled_grid, Figure};
use experiments::study::{load_results, seed_groups, seed_spread, yardstick, SeedSpread, StudyRun};
use experiments::{mean, Args, Output, Run};
use plotters::coord::Shift;
use plotters::prelude::*;
use run::Method;

const METHODS: [(Method, usize, &str); 4] = [
    (Method::Single, 1, "single checkpoints"),
    (Method::Smoothing, 16, "smoothing baseline k=16"),
    (Method::Average, 16, "average k=16"),
    (Method::EnsembleMean, 16, "ensemble k=16"),
];

/// (label, [(method index, pooled MTV)]) per category of an axis.
type Categories = Vec<(String, Vec<(usize, f64)>)>;

fn pooled(runs: &[&StudyRun]) -> Vec<(usize, f64)> {
    METHODS
        .iter()
        .enumerate()
        .filter_map(|(i, (m, k, _))| {
            let v: Vec<f64> = runs.iter().filter_map(|r| r.pooled_mtv(&r.above_chance(), *m, *k)).collect();
            (!v.is_empty()).then(|| (i, mean(&v)))
        })
        .collect()
}

struct Fig {
    seeds: (String, Vec<SeedSpread>),
    schedules: Categories,
    sizes: Vec<(f64, Vec<(usize, f64)>)>,
}

fn empty<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, title: &str, why: &str) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let a = area.titled(title, font(22))?;
    a.draw_text(why, &font(18), (30, 60))?;
    Ok(())
}

fn category_label(names: &[String]) -> impl Fn(&f64) -> String + '_ {
    move |v: &f64| {
        let i = v.round();
        if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < names.len() {
            names[i as usize].clone()
        } else {
            String::new()
        }
    }
}

impl Figure for Fig {
    fn size(&self) -> (u32, u32) {
        (2250, 720)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let panels = titled_grid(root, "The study grid: seed-to-seed vs checkpoint-to-checkpoint spread, and the final-stage MTV per LR schedule and size", 1, 3)?;
        // (a) seeds
        let (group, spread) = &self.seeds;
        let n_seeds = group.split(", ").count();
        let title = if n_seeds < 2 {
            format!("(a) seeds ({group}; the between-seed sd needs 2 or more)")
        } else {
            format!("(a) seeds ({group}): tasks above chance")
        };
        if spread.is_empty() {
            empty(&panels[0], &title, "no task is above chance in every run of the group")?;
        } else {
            let names: Vec<String> = spread.iter().map(|s| s.task.clone()).collect();
            let ys = spread
                .iter()
                .flat_map(|s| [s.within_run_sd, s.within_run_mtv].into_iter().chain(s.between_seed_ci.map(|c| c.1)));
            let yr = padded(ys);
            let mut chart = panel(&panels[0], &title, 72)
                .build_cartesian_2d(-0.5f64..names.len() as f64 - 0.5, yr.start.max(0.0)..yr.end)?;
            let labels = category_label(&names);
            chart
                .configure_mesh()
                .x_labels(names.len() * 2 + 1)
                .x_label_formatter(&labels)
                .y_label_formatter(&|v| format!("{v:.3}"))
                .y_desc("accuracy points (sd or MTV)")
                .label_style(font(15))
                .axis_desc_style(font(17))
                .light_line_style(TRANSPARENT)
                .bold_line_style(RGBColor(225, 225, 225))
                .draw()?;
            let seeds = spread[0].seeds;
            let c = RGBColor(0, 0, 0);
            if spread.iter().any(|s| s.between_seed_sd.is_some()) {
                chart.draw_series(spread.iter().enumerate().filter_map(|(i, s)| {
                    s.between_seed_ci.map(|(lo, hi)| {
                        PathElement::new(vec![(i as f64 - 0.15, lo), (i as f64 - 0.15, hi)], c.stroke_width(2))
                    })
                }))?;
                chart
                    .draw_series(spread.iter().enumerate().filter_map(|(i, s)| {
                        s.between_seed_sd.map(|v| Circle::new((i as f64 - 0.15, v), 7, c.filled()))
                    }))?
                    .label(format!("between-seed sd of the final score ({seeds} seeds, 95%)"))
                    .legend(move |(x, y)| Circle::new((x + 10, y), 6, c.filled()));
            }
            let (c1, c2) = (method_color(Method::Single), method_color(Method::Smoothing));
            chart
                .draw_series(
                    spread
                        .iter()
                        .enumerate()
                        .map(|(i, s)| Cross::new((i as f64 + 0.05, s.within_run_sd), 7, c1.stroke_width(3))),
                )?
                .label("within-run sd over the final stage")
                .legend(move |(x, y)| Cross::new((x + 10, y), 6, c1.stroke_width(3)));
            chart
                .draw_series(
                    spread
                        .iter()
                        .enumerate()
                        .map(|(i, s)| TriangleMarker::new((i as f64 + 0.2, s.within_run_mtv), 7, c2.filled())),
                )?
                .label("within-run MTV (consecutive checkpoints)")
                .legend(move |(x, y)| TriangleMarker::new((x + 10, y), 6, c2.filled()));
            legend(&mut chart, SeriesLabelPosition::UpperLeft, 15)?;
        }
        // (b) schedules and (c) sizes: pooled MTV per method
        let draw_methods = |area: &DrawingArea<DB, Shift>,
                            title: &str,
                            points: &[(f64, Vec<(usize, f64)>)],
                            x_range: std::ops::Range<f64>,
                            x_desc: &str,
                            x_fmt: &dyn Fn(&f64) -> String,
                            labels: usize|
         -> Result<()> {
            let yr = padded(points.iter().flat_map(|p| p.1.iter().map(|q| q.1)));
            let mut chart = panel(area, title, 72).build_cartesian_2d(x_range, yr.start.max(0.0)..yr.end)?;
            chart
                .configure_mesh()
                .x_labels(labels)
                .x_label_formatter(x_fmt)
                .y_label_formatter(&|v| format!("{v:.4}"))
                .x_desc(x_desc)
                .y_desc("task MTV, mean over tasks above chance")
                .label_style(font(15))
                .axis_desc_style(font(17))
                .light_line_style(TRANSPARENT)
                .bold_line_style(RGBColor(225, 225, 225))
                .draw()?;
            for (i, (method, _, label)) in METHODS.iter().enumerate() {
                let c = method_color(*method);
                let off = (i as f64 - 1.5) * 0.08;
                let pts: Vec<(f64, f64)> =
                    points.iter().filter_map(|(x, v)| v.iter().find(|q| q.0 == i).map(|q| (*x + off, q.1))).collect();
                if pts.is_empty() {
                    continue;
                }
                if pts.len() > 1 {
                    chart.draw_series(LineSeries::new(pts.clone(), c.mix(0.5).stroke_width(2)))?;
                }
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 7, c.filled())))?
                    .label(*label)
                    .legend(move |(x, y)| Circle::new((x + 10, y), 6, c.filled()));
            }
            legend(&mut chart, SeriesLabelPosition::UpperRight, 15)
        };
        if self.schedules.is_empty() {
            empty(&panels[1], "(b) LR schedule", "no run at the default size")?;
        } else {
            let names: Vec<String> = self.schedules.iter().map(|c| c.0.clone()).collect();
            let pts: Vec<(f64, Vec<(usize, f64)>)> =
                self.schedules.iter().enumerate().map(|(i, c)| (i as f64, c.1.clone())).collect();
            let labels = category_label(&names);
            draw_methods(
                &panels[1],
                "(b) LR schedule, default size",
                &pts,
                -0.5..names.len() as f64 - 0.5,
                "learning-rate schedule (runs: mean over seeds)",
                &labels,
                names.len() * 2 + 1,
            )?;
        }
        if self.sizes.len() < 2 {
            empty(
                &panels[2],
                "(c) model size, cosine schedule",
                &format!("{} size(s) committed; the size axis needs 2 or more", self.sizes.len()),
            )?;
        } else {
            let xs: Vec<f64> = self.sizes.iter().map(|s| s.0).collect();
            let (lo, hi) = (
                xs.iter().cloned().fold(f64::INFINITY, f64::min),
                xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
            );
            draw_methods(
                &panels[2],
                "(c) model size, cosine schedule",
                &self.sizes,
                lo - 0.3..hi + 0.3,
                "parameters (log scale)",
                &|v: &f64| format!("{:.1}M", 10f64.powf(*v) / 1e6),
                6,
            )?;
        }
        Ok(())
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let prov = Run::new(&args.results)?;
    let runs = load_results(&args.results, &prov)?;
    let groups = seed_groups(&runs);
    let seeds = yardstick(&groups);
    let mut spread = seed_spread(seeds);
    spread.retain(|s| s.above_chance);
    let default_params = seeds[0].params;
    let mut schedules: Categories = vec![];
    for g in groups.iter().filter(|g| g[0].params == default_params) {
        schedules
            .push((format!("{} ({} run{})", g[0].schedule, g.len(), if g.len() > 1 { "s" } else { "" }), pooled(g)));
    }
    let mut sizes: Vec<(f64, Vec<(usize, f64)>)> = groups
        .iter()
        .filter(|g| g[0].schedule == "cosine")
        .map(|g| ((g[0].params as f64).log10(), pooled(g)))
        .collect();
    sizes.sort_by(|a, b| a.0.total_cmp(&b.0));
    let fig =
        Fig { seeds: (seeds.iter().map(|r| r.name.as_str()).collect::<Vec<_>>().join(", "), spread), schedules, sizes };
    Output::new(&args.out, "fig8_study")?.figure(&fig, &prov)
}
