//! The one table of `just bench`: every benchmark writes its headline rows in one shape, ours
//! beside the anchor we compare with (PyTorch, numpy, one thread) and the bound we cannot beat
//! (a matmul peak, a memory copy), each a median of repetitions with min and max, to
//! `runs/bench/<bench>.summary.json` with its provenance; the `bench_table` example gathers them
//! into BENCHMARKS.md's table and runs/bench/summary.csv.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Median, min and max of repeated measurements.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub reps: usize,
}

impl Spread {
    /// The spread of `samples` (the median of an even count is the upper middle value, so it
    /// is always one of the measurements). Panics on an empty slice or a NaN.
    pub fn of(samples: &[f64]) -> Spread {
        assert!(!samples.is_empty(), "Spread::of: no samples");
        let mut s = samples.to_vec();
        s.sort_by(|a, b| a.partial_cmp(b).expect("Spread::of: NaN sample"));
        Spread { median: s[s.len() / 2], min: s[0], max: s[s.len() - 1], reps: s.len() }
    }
}

/// Another implementation (anchor) or a limit of the machine (bound), in the row's unit.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Reference {
    pub name: String,
    pub median: f64,
}

/// What a row promises, if anything.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Goal {
    /// At least this many times as fast as the anchor.
    Speedup(f64),
    /// At most this many times the bound (for times: the bound is the fastest possible).
    WithinBound(f64),
}

/// One headline measurement of a benchmark.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Row {
    pub bench: String,
    pub measure: String,
    /// "tokens/s", "examples/s", "s", ...
    pub unit: String,
    /// A rate (true) or a time (false).
    pub higher_is_better: bool,
    pub ours: Spread,
    pub anchor: Option<Reference>,
    pub bound: Option<Reference>,
    pub goal: Option<Goal>,
}

impl Row {
    /// How many times as fast as the anchor (> 1: ours is faster), on medians.
    pub fn speedup(&self) -> Option<f64> {
        let a = self.anchor.as_ref()?.median;
        Some(if self.higher_is_better { self.ours.median / a } else { a / self.ours.median })
    }

    /// Ours over the bound, on medians: for a rate the share of the bound reached (an MFU),
    /// for a time how many times the bound's time it takes.
    pub fn of_bound(&self) -> Option<f64> {
        Some(self.ours.median / self.bound.as_ref()?.median)
    }

    /// Whether the goal is met; None without a goal or without what it is measured against.
    pub fn goal_met(&self) -> Option<bool> {
        match self.goal? {
            Goal::Speedup(g) => Some(self.speedup()? >= g),
            Goal::WithinBound(g) => {
                let x = self.of_bound()?;
                Some(if self.higher_is_better { 1.0 / x <= g } else { x <= g })
            }
        }
    }
}

/// The summary file of one benchmark in `dir`.
pub fn summary_path(dir: &Path, bench: &str) -> PathBuf {
    dir.join(format!("{bench}.summary.json"))
}

/// Writes `rows` of benchmark `bench` to `<dir>/<bench>.summary.json` (atomically), with the
/// git commit and the host; `details` is anything else the benchmark wants kept.
pub fn write_summary(dir: &Path, bench: &str, rows: &[Row], details: serde_json::Value) -> Result<PathBuf> {
    anyhow::ensure!(rows.iter().all(|r| r.bench == bench), "rows of another bench than {bench}");
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let path = summary_path(dir, bench);
    let doc = serde_json::json!({
        "bench": bench, "git_commit": crate::provenance::git_commit(), "host": crate::provenance::host(),
        "rows": rows, "details": details,
    });
    crate::write_atomic(&path, serde_json::to_string_pretty(&doc)?.as_bytes())?;
    Ok(path)
}

/// The rows of a summary file, and its git commit.
pub fn read_summary(path: &Path) -> Result<(Vec<Row>, String)> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?;
    let doc: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
    let rows = serde_json::from_value(doc["rows"].clone())
        .with_context(|| format!("{}: `rows` is not a list of bench rows", path.display()))?;
    Ok((rows, doc["git_commit"].as_str().unwrap_or("unknown").to_string()))
}

/// A number with three significant digits at most (no exponent below 1e6).
fn num(x: f64) -> String {
    let a = x.abs();
    if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

fn goal_text(r: &Row) -> String {
    let Some(goal) = r.goal else { return String::new() };
    let what = match goal {
        Goal::Speedup(g) => format!(">= {g}x anchor"),
        Goal::WithinBound(g) => format!("<= {g}x bound"),
    };
    match r.goal_met() {
        Some(true) => format!("{what}: met"),
        Some(false) => format!("{what}: **missed**"),
        None => format!("{what}: not measured"),
    }
}

/// The rows as one Markdown table.
pub fn markdown(rows: &[Row]) -> String {
    let mut s = String::from("| bench | measure | unit | ours: median (min, max) | anchor | ours vs anchor | bound | ours / bound | goal |\n");
    s.push_str("|---|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        let anchor = r.anchor.as_ref().map_or(String::new(), |a| format!("{} {}", a.name, num(a.median)));
        let bound = r.bound.as_ref().map_or(String::new(), |b| format!("{} {}", b.name, num(b.median)));
        let speedup = r.speedup().map_or(String::new(), |x| format!("{:.2}x", x));
        let of_bound = match r.of_bound() {
            None => String::new(),
            Some(x) if r.higher_is_better => format!("{:.0}%", 100.0 * x),
            Some(x) => format!("{x:.2}x"),
        };
        s.push_str(&format!(
            "| {} | {} | {} | {} ({}, {}) x{} | {anchor} | {speedup} | {bound} | {of_bound} | {} |\n",
            r.bench,
            r.measure,
            r.unit,
            num(r.ours.median),
            num(r.ours.min),
            num(r.ours.max),
            r.ours.reps,
            goal_text(r)
        ));
    }
    s
}

/// The rows as CSV (one line each, ratios computed, empty where not defined).
pub fn csv(rows: &[Row]) -> String {
    let opt = |x: Option<f64>| x.map_or(String::new(), |v| v.to_string());
    let quote =
        |t: &str| if t.contains([',', '"']) { format!("\"{}\"", t.replace('"', "\"\"")) } else { t.to_string() };
    let mut s = String::from("bench,measure,unit,higher_is_better,median,min,max,reps,anchor,anchor_median,speedup,bound,bound_median,of_bound,goal,goal_met\n");
    for r in rows {
        let goal = match r.goal {
            Some(Goal::Speedup(g)) => format!("speedup >= {g}"),
            Some(Goal::WithinBound(g)) => format!("of bound <= {g}"),
            None => String::new(),
        };
        s.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
            quote(&r.bench),
            quote(&r.measure),
            quote(&r.unit),
            r.higher_is_better,
            r.ours.median,
            r.ours.min,
            r.ours.max,
            r.ours.reps,
            quote(r.anchor.as_ref().map_or("", |a| &a.name)),
            opt(r.anchor.as_ref().map(|a| a.median)),
            opt(r.speedup()),
            quote(r.bound.as_ref().map_or("", |b| &b.name)),
            opt(r.bound.as_ref().map(|b| b.median)),
            opt(r.of_bound()),
            goal,
            r.goal_met().map_or(String::new(), |m| m.to_string())
        ));
    }
    s
}

/// `text` with what lies between the lines `begin` and `end` replaced by `block`; the markers
/// are appended (after a blank line) when `text` has none.
pub fn replace_block(text: &str, begin: &str, end: &str, block: &str) -> Result<String> {
    match (text.find(begin), text.find(end)) {
        (Some(b), Some(e)) if b < e => {
            let inner = b + begin.len();
            Ok(format!("{}\n{}{}", &text[..inner], block, &text[e..]))
        }
        (None, None) => Ok(format!("{}\n\n{begin}\n{block}{end}\n", text.trim_end())),
        _ => anyhow::bail!("the markers {begin} and {end} are not both present, in that order"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(higher: bool, ours: &[f64], anchor: Option<f64>, bound: Option<f64>, goal: Option<Goal>) -> Row {
        Row {
            bench: "b".into(),
            measure: "m".into(),
            unit: if higher { "tokens/s".into() } else { "s".into() },
            higher_is_better: higher,
            ours: Spread::of(ours),
            anchor: anchor.map(|m| Reference { name: "A".into(), median: m }),
            bound: bound.map(|m| Reference { name: "B".into(), median: m }),
            goal,
        }
    }

    #[test]
    fn spread_is_median_min_max_of_the_samples() {
        assert_eq!(Spread::of(&[3.0, 1.0, 2.0]), Spread { median: 2.0, min: 1.0, max: 3.0, reps: 3 });
        assert_eq!(Spread::of(&[4.0, 1.0, 3.0, 2.0]).median, 3.0);
    }

    #[test]
    fn speedup_and_bound_follow_the_direction_of_the_unit() {
        // a rate: 150 tokens/s against 100 is 1.5x; 150 of a 300 bound is half of it
        let r = row(true, &[150.0], Some(100.0), Some(300.0), Some(Goal::Speedup(1.5)));
        assert_eq!((r.speedup(), r.of_bound(), r.goal_met()), (Some(1.5), Some(0.5), Some(true)));
        // a time: 2 s against the anchor's 10 s is 5x; against a 1 s bound it is 2x the bound
        let t = row(false, &[2.0], Some(10.0), Some(1.0), Some(Goal::WithinBound(1.9)));
        assert_eq!((t.speedup(), t.of_bound(), t.goal_met()), (Some(5.0), Some(2.0), Some(false)));
        assert_eq!(row(false, &[2.0], None, None, Some(Goal::Speedup(1.0))).goal_met(), None);
        assert_eq!(row(true, &[149.0], Some(100.0), None, Some(Goal::Speedup(1.5))).goal_met(), Some(false));
    }

    #[test]
    fn summaries_round_trip_through_their_file() {
        let dir = tempfile::tempdir().unwrap();
        let rows = vec![
            row(true, &[1.0, 2.0, 3.0], Some(1.5), None, Some(Goal::Speedup(1.0))),
            row(false, &[0.5], None, Some(0.25), None),
        ];
        let path = write_summary(dir.path(), "b", &rows, serde_json::json!({"k": 1})).unwrap();
        assert_eq!(read_summary(&path).unwrap().0, rows);
        assert!(write_summary(dir.path(), "other", &rows, serde_json::Value::Null).is_err());
        std::fs::write(&path, "{\"rows\": 3}").unwrap();
        let err = format!("{:#}", read_summary(&path).unwrap_err());
        assert!(err.contains("b.summary.json") && err.contains("rows"), "{err}");
    }

    #[test]
    fn the_block_between_markers_is_replaced_and_only_it() {
        let t = "# T\nintro\n<!-- b -->\nold\n<!-- e -->\nafter\n";
        assert_eq!(
            replace_block(t, "<!-- b -->", "<!-- e -->", "new\n").unwrap(),
            "# T\nintro\n<!-- b -->\nnew\n<!-- e -->\nafter\n"
        );
        assert_eq!(
            replace_block("# T\n", "<!-- b -->", "<!-- e -->", "x\n").unwrap(),
            "# T\n\n<!-- b -->\nx\n<!-- e -->\n"
        );
        assert!(replace_block("<!-- e -->\n<!-- b -->\n", "<!-- b -->", "<!-- e -->", "x\n").is_err());
        assert!(replace_block("<!-- b -->\n", "<!-- b -->", "<!-- e -->", "x\n").is_err());
    }

    #[test]
    fn the_table_and_csv_of_two_rows() {
        let rows = vec![
            Row {
                measure: "lm bf16, with a comma".into(),
                ..row(true, &[3987.0, 3795.0, 4101.0], Some(2782.0), Some(9083.0), Some(Goal::Speedup(1.5)))
            },
            row(false, &[0.082, 0.08, 0.09], Some(1.55), Some(0.096), Some(Goal::WithinBound(2.0))),
        ];
        insta::assert_snapshot!(format!("{}\n{}", markdown(&rows), csv(&rows)));
    }
}
