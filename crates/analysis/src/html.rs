//! `report.html`: the analysis as one self-contained page (`analysis report --html`): the
//! decisions of [`crate::decide`] as a summary table, then per task the score trail with its
//! paired-noise band and the averaged, ensembled and smoothed trails, and the example flip heatmap.
//!
//! Plots are inline SVG written here, with inline CSS and no script: the file opens offline in any
//! browser, prints, and holds nothing to fetch or to fail (a vendored JS plotting library, uPlot
//! at ~50 kB or Plotly at ~3.5 MB, would add a dependency to pin and a script to run for what
//! polylines and rectangles draw). The bytes depend only on the inputs, so the page is snapshot
//! tested. Conventions the browser test (`scripts/check_report.py`) reads: every plot is an
//! `<svg class="plot">`, the body says `data-plots` and `data-tasks`, each task is a
//! `<section class="task">`.

use std::fmt::Write as _;

use crate::decide::{Decisions, Verdict};

/// One line of a trail plot.
pub struct Trail {
    pub label: String,
    pub steps: Vec<u64>,
    pub scores: Vec<f64>,
}

/// Per-example correctness over checkpoints, the examples that flip most first.
pub struct Heatmap {
    pub steps: Vec<u64>,
    /// (example id, correct at each step)
    pub rows: Vec<(String, Vec<bool>)>,
    /// examples in the task, and of them how many never flip
    pub total: usize,
    pub never_flip: usize,
}

/// What one task's section shows.
pub struct TaskView {
    pub task: String,
    pub metric: String,
    pub chance: Option<f64>,
    pub steps: Vec<u64>,
    pub scores: Vec<f64>,
    /// per checkpoint, where a change from the previous one stops being noise
    /// ([`crate::decide::noise_band`])
    pub band: Vec<Option<(f64, f64)>>,
    /// the first step of the final window
    pub final_from: u64,
    /// averaged, ensembled and smoothed trails over the steps they cover
    pub others: Vec<Trail>,
    pub heatmap: Option<Heatmap>,
    /// a line under the title: examples, MTV and its null, flip rate, IS
    pub facts: String,
}

/// The page.
pub struct Page<'a> {
    pub title: String,
    /// (label, value) lines of provenance: inputs, commit, options
    pub provenance: Vec<(String, String)>,
    pub decisions: &'a Decisions,
    pub tasks: Vec<TaskView>,
    pub notes: Vec<String>,
}

/// Escapes text for HTML content and attribute values.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

const CSS: &str = "body{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1100px;color:#222;line-height:1.4}\
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ccc}\
table.decisions{border-collapse:collapse;font-size:.85em;width:100%}\
table.decisions td,table.decisions th{border:1px solid #ccc;padding:4px 6px;vertical-align:top;text-align:left}\
table.decisions th{background:#f2f2f2}.real_drop{color:#b2182b;font-weight:bold}.real_rise{color:#1a7837;font-weight:bold}\
.within_noise{color:#555}.facts{color:#444;font-size:.9em}.prov{font-size:.8em;color:#555}\
svg.plot{display:block;margin:8px 0}svg text{font-family:DejaVu Sans,Helvetica,Arial,sans-serif}\
ul.decide{font-size:.9em}";

/// Distinct colours for the other trails (ColorBrewer Dark2).
const COLOURS: [&str; 8] = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"];

/// The page as HTML.
pub fn render(page: &Page) -> String {
    let mut plots = 0;
    let mut body = String::new();
    body += &summary_table(page.decisions);
    for t in &page.tasks {
        let _ = write!(body, "<section class=\"task\" data-task=\"{0}\" id=\"task-{0}\"><h2>{0}</h2>", escape(&t.task));
        let _ = write!(body, "<p class=\"facts\">{}</p>", escape(&t.facts));
        body += &task_decisions(page.decisions, &t.task);
        body += &trail_plot(t);
        plots += 1;
        if let Some(h) = &t.heatmap {
            body += &heatmap_plot(&t.task, h);
            plots += 1;
        }
        body += "</section>";
    }
    let mut prov = String::from("<div class=\"prov\"><h2>Provenance</h2><ul>");
    for (k, v) in &page.provenance {
        let _ = write!(prov, "<li><b>{}</b>: {}</li>", escape(k), escape(v));
    }
    prov += "</ul></div>";
    let notes: String = page.notes.iter().map(|n| format!("<li>{}</li>", escape(n))).collect();
    let notes = if notes.is_empty() { String::new() } else { format!("<h2>Notes</h2><ul>{notes}</ul>") };
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>\
         <style>{CSS}</style></head>\n<body data-plots=\"{plots}\" data-tasks=\"{n}\">\n<h1>{title}</h1>\n\
         <p>Every decision is paired on the eval set's examples (one example set, scored at every checkpoint); \
         points are 100 x accuracy; intervals are 95%. In the trails, a grey bar spans the scores a change from the \
         previous checkpoint must leave to be real (paired test at 5%); a red point left it; the shaded part is the \
         final stage.</p>\n{body}\n{notes}\n{prov}\n</body></html>\n",
        title = escape(&page.title),
        n = page.tasks.len(),
    )
}

fn verdict_class(v: Option<Verdict>) -> &'static str {
    match v {
        Some(Verdict::RealDrop) => "real_drop",
        Some(Verdict::RealRise) => "real_rise",
        _ => "within_noise",
    }
}

fn summary_table(d: &Decisions) -> String {
    let rows = d.rows();
    let tasks: std::collections::BTreeSet<&str> = rows.iter().map(|r| r.task.as_str()).collect();
    let mut s = String::from(
        "<h2>Decisions</h2><table class=\"decisions\"><thead><tr><th>task</th><th>latest change</th>\
         <th>checkpoint to keep</th><th>window to average</th></tr></thead><tbody>",
    );
    for task in tasks {
        let cell = |decision: &str| {
            rows.iter().find(|r| r.task == task && r.decision == decision).map_or("-".to_string(), |r| {
                format!("<span class=\"{}\">{}</span>", verdict_class(r.verdict), escape(&r.headline))
            })
        };
        let _ = write!(
            s,
            "<tr><td><a href=\"#task-{0}\">{0}</a></td><td>{1}</td><td>{2}</td><td>{3}</td></tr>",
            escape(task),
            cell("latest_change"),
            cell("keep"),
            cell("window")
        );
    }
    s + "</tbody></table>"
}

fn task_decisions(d: &Decisions, task: &str) -> String {
    let rows: Vec<_> = d.rows().into_iter().filter(|r| r.task == task).collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut s = String::from("<ul class=\"decide\">");
    for r in rows {
        let _ = write!(
            s,
            "<li><b>{}</b>: <span class=\"{}\">{}</span></li>",
            r.decision.replace('_', " "),
            verdict_class(r.verdict),
            escape(&r.summary)
        );
    }
    s + "</ul>"
}

/// Linear map of [d0, d1] onto [r0, r1].
fn scale(d0: f64, d1: f64, r0: f64, r1: f64) -> impl Fn(f64) -> f64 {
    let span = if d1 > d0 { d1 - d0 } else { 1.0 };
    move |x| r0 + (x - d0) / span * (r1 - r0)
}

/// About five round tick values covering [lo, hi].
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(hi > lo) {
        return vec![lo];
    }
    let raw = (hi - lo) / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

fn fmt_tick(x: f64) -> String {
    let s = format!("{x:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

fn trail_plot(t: &TaskView) -> String {
    let (w, h, ml, mr, mt, mb) = (760.0, 300.0, 56.0, 170.0, 16.0, 40.0);
    let xs: Vec<f64> = t.steps.iter().chain(t.others.iter().flat_map(|o| &o.steps)).map(|&s| s as f64).collect();
    let mut ys: Vec<f64> = t.scores.iter().chain(t.others.iter().flat_map(|o| &o.scores)).copied().collect();
    ys.extend(t.band.iter().flatten().flat_map(|&(a, b)| [a, b]));
    ys.extend(t.chance);
    ys.retain(|y| y.is_finite());
    let (x0, x1) =
        (xs.iter().copied().fold(f64::INFINITY, f64::min), xs.iter().copied().fold(f64::NEG_INFINITY, f64::max));
    let (mut y0, mut y1) =
        (ys.iter().copied().fold(f64::INFINITY, f64::min), ys.iter().copied().fold(f64::NEG_INFINITY, f64::max));
    let pad = ((y1 - y0) * 0.05).max(0.005);
    (y0, y1) = ((y0 - pad).max(0.0), (y1 + pad).min(1.0));
    let sx = scale(x0, x1, ml, w - mr);
    let sy = scale(y0, y1, h - mb, mt);
    let mut s = format!(
        "<svg class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{} score over checkpoints\">",
        escape(&t.task)
    );
    // the final stage
    let _ = write!(
        s,
        "<rect x=\"{:.1}\" y=\"{mt}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#f3efe0\"/>",
        sx(t.final_from as f64),
        (w - mr) - sx(t.final_from as f64),
        h - mb - mt
    );
    // axes and ticks
    for y in ticks(y0, y1) {
        let _ = write!(
            s,
            "<line x1=\"{ml}\" x2=\"{:.1}\" y1=\"{1:.1}\" y2=\"{1:.1}\" stroke=\"#e4e4e4\"/><text x=\"{2}\" y=\"{3:.1}\" font-size=\"11\" text-anchor=\"end\">{4}</text>",
            w - mr,
            sy(y),
            ml - 4.0,
            sy(y) + 4.0,
            fmt_tick(y)
        );
    }
    for x in ticks(x0, x1) {
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{}</text>",
            sx(x),
            h - mb + 14.0,
            fmt_tick(x)
        );
    }
    let _ = write!(
        s,
        "<line x1=\"{ml}\" x2=\"{ml}\" y1=\"{mt}\" y2=\"{0}\" stroke=\"#444\"/><line x1=\"{ml}\" x2=\"{1}\" y1=\"{0}\" y2=\"{0}\" stroke=\"#444\"/>\
         <text x=\"{2:.1}\" y=\"{3:.1}\" font-size=\"12\" text-anchor=\"middle\">step</text>\
         <text x=\"14\" y=\"{4:.1}\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 14 {4:.1})\">{5}</text>",
        h - mb,
        w - mr,
        (ml + w - mr) / 2.0,
        h - 6.0,
        (mt + h - mb) / 2.0,
        escape(&t.metric)
    );
    if let Some(c) = t.chance.filter(|c| *c > y0 && *c < y1) {
        let _ = write!(
            s,
            "<line x1=\"{ml}\" x2=\"{:.1}\" y1=\"{1:.1}\" y2=\"{1:.1}\" stroke=\"#999\" stroke-dasharray=\"4 3\"/><text x=\"{2:.1}\" y=\"{3:.1}\" font-size=\"10\" fill=\"#777\">chance</text>",
            w - mr,
            sy(c),
            ml + 4.0,
            sy(c) - 3.0
        );
    }
    // the paired-noise band: one bar per checkpoint
    let bar = ((w - mr - ml) / t.steps.len().max(1) as f64 * 0.5).clamp(2.0, 10.0);
    for (i, b) in t.band.iter().enumerate() {
        if let Some((lo, hi)) = b {
            let _ = write!(
                s,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{bar:.1}\" height=\"{:.1}\" fill=\"#bbbbbb\" fill-opacity=\"0.6\"/>",
                sx(t.steps[i] as f64) - bar / 2.0,
                sy(*hi),
                (sy(*lo) - sy(*hi)).max(0.5)
            );
        }
    }
    let poly = |steps: &[u64], scores: &[f64]| -> String {
        steps
            .iter()
            .zip(scores)
            .map(|(&x, &y)| format!("{:.1},{:.1}", sx(x as f64), sy(y)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut legend = vec![("single checkpoints".to_string(), "#222")];
    for (o, c) in t.others.iter().zip(COLOURS.iter().cycle()) {
        let _ = write!(
            s,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{c}\" stroke-width=\"1.5\"/>",
            poly(&o.steps, &o.scores)
        );
        legend.push((o.label.clone(), c));
    }
    let _ = write!(
        s,
        "<polyline points=\"{}\" fill=\"none\" stroke=\"#222\" stroke-width=\"1.2\"/>",
        poly(&t.steps, &t.scores)
    );
    for (i, (&x, &y)) in t.steps.iter().zip(&t.scores).enumerate() {
        let out = t.band.get(i).copied().flatten().is_some_and(|(lo, hi)| y < lo || y > hi);
        let _ = write!(
            s,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"{}\" fill=\"{}\"><title>step {x}: {y:.4}</title></circle>",
            sx(x as f64),
            sy(y),
            if out { 3.5 } else { 2.2 },
            if out { "#d62728" } else { "#222" }
        );
    }
    for (i, (label, c)) in legend.iter().enumerate() {
        let y = mt + 10.0 + 16.0 * i as f64;
        let _ = write!(
            s,
            "<line x1=\"{0:.1}\" x2=\"{1:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"{c}\" stroke-width=\"2\"/><text x=\"{2:.1}\" y=\"{3:.1}\" font-size=\"11\">{4}</text>",
            w - mr + 10.0,
            w - mr + 28.0,
            w - mr + 32.0,
            y + 4.0,
            escape(label)
        );
    }
    s + "</svg>"
}

fn heatmap_plot(task: &str, h: &Heatmap) -> String {
    let (ml, mt, mb) = (56.0, 4.0, 30.0);
    let cols = h.steps.len().max(1) as f64;
    let cw = (680.0 / cols).clamp(2.0, 40.0);
    let rh = if h.rows.len() > 60 { 3.0 } else { 6.0 };
    let (w, hh) = (ml + cw * cols + 20.0, mt + rh * h.rows.len() as f64 + mb);
    let mut s = format!(
        "<p class=\"facts\">Examples x checkpoints (dark: right, light: wrong): {} of the {} examples, those that flip most first; {} never flip.</p>\
         <svg class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{hh:.0}\" viewBox=\"0 0 {w:.0} {hh:.0}\" role=\"img\" aria-label=\"{} example flips\">",
        h.rows.len(),
        h.total,
        h.never_flip,
        escape(task)
    );
    // wrong is the background; each run of consecutive right checkpoints is one rectangle
    let _ = write!(
        s,
        "<rect x=\"{ml}\" y=\"{mt}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#dbe9f0\"/>",
        cw * cols,
        rh * h.rows.len() as f64
    );
    for (r, (id, cells)) in h.rows.iter().enumerate() {
        let y = mt + rh * r as f64;
        let _ = write!(s, "<g><title>{}</title>", escape(id));
        let mut c = 0;
        while c < cells.len() {
            if !cells[c] {
                c += 1;
                continue;
            }
            let start = c;
            while c < cells.len() && cells[c] {
                c += 1;
            }
            let _ = write!(
                s,
                "<rect x=\"{:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{rh:.1}\" fill=\"#225e7a\"/>",
                ml + cw * start as f64,
                cw * (c - start) as f64
            );
        }
        s += "</g>";
    }
    let base = mt + rh * h.rows.len() as f64;
    for x in ticks(0.0, cols - 1.0) {
        let i = x as usize;
        if let Some(step) = h.steps.get(i) {
            let _ = write!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"middle\">{step}</text>",
                ml + cw * (i as f64 + 0.5),
                base + 14.0
            );
        }
    }
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">step</text>",
        ml + cw * cols / 2.0,
        base + 27.0
    );
    s + "</svg>"
}

/// Examples that never flip drawn below the flipping ones, for contrast.
const NEVER_FLIP_SHOWN: usize = 10;

/// The heatmap of a panel's 0/1 values: at most `limit` examples, those with the most flips first
/// (ties by id), at most [`NEVER_FLIP_SHOWN`] of them without a flip; `None` if the values are not
/// 0/1 or there are no examples.
pub fn heatmap(steps: &[u64], ids: &[String], v: ndarray::ArrayView2<f64>, limit: usize) -> Option<Heatmap> {
    if v.ncols() == 0 || v.iter().any(|&x| x != 0.0 && x != 1.0) {
        return None;
    }
    let mut rows: Vec<(usize, String, Vec<bool>)> = (0..v.ncols())
        .map(|e| {
            let cells: Vec<bool> = v.column(e).iter().map(|&x| x > 0.5).collect();
            let flips = cells.windows(2).filter(|w| w[0] != w[1]).count();
            (flips, ids[e].clone(), cells)
        })
        .collect();
    let never_flip = rows.iter().filter(|r| r.0 == 0).count();
    rows.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    // the examples that flip, and a few that never do for contrast
    let flipping = rows.len() - never_flip;
    rows.truncate(limit.min(flipping + NEVER_FLIP_SHOWN));
    Some(Heatmap {
        steps: steps.to_vec(),
        rows: rows.into_iter().map(|(_, id, c)| (id, c)).collect(),
        total: v.ncols(),
        never_flip,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 1.0), vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]);
        assert_eq!(ticks(100.0, 1000.0), vec![200.0, 400.0, 600.0, 800.0, 1000.0]);
        assert_eq!(fmt_tick(0.6000000000000001), "0.6");
        assert_eq!(ticks(3.0, 3.0), vec![3.0]);
    }

    /// The whole page of a small hand-made analysis (review every change of this snapshot).
    #[test]
    fn page_snapshot() {
        use crate::decide::{paired_change, Decisions, LatestChange};
        let before = [1.0, 1.0, 0.0, 0.0];
        let after = [1.0, 0.0, 0.0, 1.0];
        let decisions = Decisions {
            latest: vec![LatestChange {
                task: "toy<1>".into(),
                metric: "acc".into(),
                span: "latest",
                from_step: 20,
                to_step: 30,
                change: paired_change(&before, &after, 10, 1),
            }],
            ..Default::default()
        };
        let v = ndarray::array![[1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 1.0]];
        let page = Page {
            title: "Fluctuation report: toy".into(),
            provenance: vec![("input".into(), "runs/toy".into())],
            decisions: &decisions,
            tasks: vec![TaskView {
                task: "toy<1>".into(),
                metric: "acc".into(),
                chance: Some(0.25),
                steps: vec![10, 20, 30],
                scores: vec![0.5, 0.5, 0.5],
                band: crate::decide::noise_band(v.view()),
                final_from: 20,
                others: vec![Trail { label: "average k=2".into(), steps: vec![20, 30], scores: vec![0.5, 0.75] }],
                heatmap: heatmap(&[10, 20, 30], &["a".into(), "b".into(), "c".into(), "d".into()], v.view(), 10),
                facts: "3 checkpoints".into(),
            }],
            notes: vec!["a note".into()],
        };
        let html = render(&page);
        assert!(html.contains("data-plots=\"2\" data-tasks=\"1\""));
        insta::assert_snapshot!(html);
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
    }

    #[test]
    fn the_heatmap_puts_the_most_flipping_examples_first() {
        let v = ndarray::array![[1.0, 0.0, 1.0], [1.0, 1.0, 0.0], [1.0, 0.0, 1.0]];
        let ids: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let h = heatmap(&[1, 2, 3], &ids, v.view(), 2).unwrap();
        assert_eq!((h.total, h.never_flip), (3, 1));
        assert_eq!(h.rows.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), ["b", "c"]);
        assert!(heatmap(&[1, 2, 3], &ids, (v.clone() * 0.5).view(), 2).is_none());
    }
}
