//! Figure 9, generated text (issue 27): per generation task, the instability score of the texts
//! (IS: mean over transitions of 1 - char F1 of consecutive outputs) of every run with generation
//! results (`results/<run>/generation/`), for the single checkpoints, the averages of the last 4
//! and 16 checkpoints and the ensembles by a vote over texts of 4 and 16 (the rule for text: the
//! output most members produce; `integrate ensemble --rule vote`), over the positions they share
//! (`analysis compare`). Lower is steadier text.

use analysis::compare::StabilityRow;
use anyhow::Result;
use clap::Parser;
use experiments::plot::{font, legend, mesh, method_color, panel, task_grid, two_decimals, Figure};
use experiments::{read_csv, task_names, Args, Output, Run};
use plotters::coord::Shift;
use plotters::prelude::*;
use run::{Method, Variant};

const METHODS: [(Method, usize); 5] = [
    (Method::Single, 1),
    (Method::Average, 4),
    (Method::Average, 16),
    (Method::EnsembleVote, 4),
    (Method::EnsembleVote, 16),
];

/// One task: per run (in order), the IS of each method of [`METHODS`] where it was computed.
struct Panel {
    task: String,
    runs: Vec<(String, Vec<Option<f64>>)>,
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
        let title = "Instability of generated text (1 - char F1 of consecutive outputs): single checkpoints, averages and votes over texts";
        if self.0.is_empty() {
            let body = root.titled(title, font(30))?;
            body.draw_text("no run has generation results (`just study-gen RUN` makes them)", &font(26), (80, 200))?;
            return Ok(());
        }
        let panels = task_grid(root, title, self.0.len())?;
        let y1 =
            self.0.iter().flat_map(|p| p.runs.iter().flat_map(|r| r.1.iter().flatten().copied())).fold(0.05, f64::max)
                * 1.15;
        for (p, area) in self.0.iter().zip(&panels) {
            let n = p.runs.len() as f64;
            let mut chart = panel(area, &p.task, 64).build_cartesian_2d(-0.5f64..n - 0.5, 0f64..y1)?;
            let names: Vec<String> = p.runs.iter().map(|r| r.0.clone()).collect();
            mesh(
                &mut chart,
                "run",
                "IS of the texts",
                &|v| {
                    if (v - v.round()).abs() < 1e-6 {
                        names.get(v.round() as usize).cloned().unwrap_or_default()
                    } else {
                        String::new()
                    }
                },
                &two_decimals,
            )?;
            for (j, &(m, k)) in METHODS.iter().enumerate() {
                let dx = (j as f64 - 2.0) * 0.12;
                let c = method_color(m);
                let points: Vec<(f64, f64)> =
                    p.runs.iter().enumerate().filter_map(|(i, r)| r.1[j].map(|v| (i as f64 + dx, v))).collect();
                let marker = move |(x, y): (f64, f64)| -> DynElement<'static, DB, (f64, f64)> {
                    if k == 16 {
                        TriangleMarker::new((x, y), 9, c.filled()).into_dyn()
                    } else {
                        Circle::new((x, y), 7, c.filled()).into_dyn()
                    }
                };
                chart.draw_series(points.into_iter().map(marker))?.label(Variant::new(m, k).to_string()).legend(
                    move |(x, y)| -> DynElement<'static, DB, (i32, i32)> {
                        if k == 16 {
                            TriangleMarker::new((x + 10, y), 7, c.filled()).into_dyn()
                        } else {
                            Circle::new((x + 10, y), 6, c.filled()).into_dyn()
                        }
                    },
                );
            }
            legend(&mut chart, SeriesLabelPosition::UpperRight, 15)?;
        }
        Ok(())
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let prov = Run::new(&args.results)?;
    let mut names: Vec<String> = std::fs::read_dir(&args.results)?
        .flatten()
        .filter(|e| e.path().join("generation/analysis/stability.csv").is_file())
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .collect();
    names.sort();
    let mut tables: Vec<(String, Vec<StabilityRow>)> = vec![];
    for name in &names {
        let rows: Vec<StabilityRow> = read_csv(&prov.file(&format!("{name}/generation/analysis/stability.csv"))?)?;
        tables.push((name.clone(), rows.into_iter().filter(|r| r.metric == "acc").collect()));
    }
    let tasks = task_names(tables.iter().flat_map(|(_, rows)| rows.iter().map(|r| r.task.as_str())));
    let panels = tasks
        .into_iter()
        .map(|task| Panel {
            runs: tables
                .iter()
                .map(|(name, rows)| {
                    let is = METHODS
                        .iter()
                        .map(|&(m, k)| {
                            rows.iter()
                                .find(|r| r.task == task && r.method == m && r.k == k)
                                .and_then(|r| r.instability)
                        })
                        .collect();
                    (name.clone(), is)
                })
                .collect(),
            task,
        })
        .collect();
    Output::new(&args.out, "fig9_generation")?.figure(&Fig(panels), &prov)
}
