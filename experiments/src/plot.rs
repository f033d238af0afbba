//! Drawing: one [`Figure`] is drawn twice, to SVG and to an RGB buffer for the PNG, with the
//! bundled DejaVu Sans so that text looks, and measures, the same on every machine.

use anyhow::{anyhow, Result};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::{CoordTranslate, Shift};
use plotters::prelude::*;
use run::Method;
use std::sync::Once;

/// DejaVu Sans 2.37 (Bitstream Vera licence, `fonts/LICENSE-DejaVu`).
const FONT: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");
pub const SANS: &str = "sans-serif";

/// A figure that can draw itself on any plotters backend.
pub trait Figure {
    /// Width and height in pixels of the PNG (and user units of the SVG).
    fn size(&self) -> (u32, u32);
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static;
}

fn register_font() -> Result<()> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        result = plotters::style::register_font(SANS, FontStyle::Normal, FONT)
            .map_err(|_| anyhow!("the bundled DejaVu Sans does not parse"));
    });
    result
}

/// The SVG text and the PNG bytes of a figure.
pub fn render(fig: &impl Figure) -> Result<(String, Vec<u8>)> {
    register_font()?;
    let (w, h) = fig.size();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        root.fill(&WHITE)?;
        fig.draw(&root)?;
        root.present()?;
    }
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        root.fill(&WHITE)?;
        fig.draw(&root)?;
        root.present()?;
    }
    Ok((svg, crate::png::encode_rgb(w, h, &rgb)))
}

/// Okabe-Ito colours (distinguishable with the common colour-vision deficiencies), then greys.
pub const PALETTE: [RGBColor; 10] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(230, 159, 0),   // orange
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(0, 0, 0),       // black
    RGBColor(0, 90, 90),     // dark teal
    RGBColor(120, 120, 120), // grey
    RGBColor(150, 80, 40),   // brown
];

pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// The colour of a method in every figure: single checkpoints grey, averages blue, ensembles vermillion.
pub fn method_color(method: Method) -> RGBColor {
    match method {
        Method::Average => PALETTE[0],
        Method::EnsembleMean => PALETTE[1],
        Method::EnsembleVote => PALETTE[3],
        Method::Smoothing => RGBColor(150, 150, 150),
        _ => RGBColor(90, 90, 90),
    }
}

pub fn font(size: u32) -> TextStyle<'static> {
    (SANS, size).into_font().into()
}

/// A range around `values` with 8% padding (and a minimum width, so a flat line is not a crash).
pub fn padded(values: impl Iterator<Item = f64>) -> std::ops::Range<f64> {
    let (lo, hi) =
        values.filter(|v| v.is_finite()).fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
    if !lo.is_finite() {
        return 0.0..1.0;
    }
    let pad = ((hi - lo) * 0.08).max(0.01);
    (lo - pad)..(hi + pad)
}

/// A title strip and one panel per task, in two rows.
pub fn task_grid<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    tasks: usize,
) -> Result<Vec<DrawingArea<DB, Shift>>>
where
    DB::ErrorType: 'static,
{
    titled_grid(root, title, 2, tasks.div_ceil(2).max(1))
}

/// Splits a root into a title strip and a grid of `rows x cols` panels.
pub fn titled_grid<'a, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, Shift>,
    title: &str,
    rows: usize,
    cols: usize,
) -> Result<Vec<DrawingArea<DB, Shift>>>
where
    DB::ErrorType: 'static,
{
    let body = root.titled(title, font(30))?;
    Ok(body.split_evenly((rows, cols)))
}

/// A chart builder with the margins, label areas and caption every panel uses; `y_labels` is
/// the width of the y label area (wider for long category names).
pub fn panel<'a, 'b, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    caption: &str,
    y_labels: u32,
) -> ChartBuilder<'a, 'b, DB> {
    let mut b = ChartBuilder::on(area);
    b.caption(caption, font(22)).margin(12).margin_right(28).x_label_area_size(48).y_label_area_size(y_labels);
    b
}

/// The axes every linear chart uses: a light grid, and the given label formats.
pub fn mesh<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    x_desc: &str,
    y_desc: &str,
    x_fmt: &dyn Fn(&f64) -> String,
    y_fmt: &dyn Fn(&f64) -> String,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_labels(6)
        .y_labels(6)
        .x_label_formatter(x_fmt)
        .y_label_formatter(y_fmt)
        .label_style(font(16))
        .axis_desc_style(font(18))
        .light_line_style(TRANSPARENT)
        .bold_line_style(RGBColor(225, 225, 225))
        .draw()?;
    Ok(())
}

/// Integer labels, for step axes.
pub fn int_label(v: &f64) -> String {
    format!("{v:.0}")
}

/// Two decimals, for accuracy axes.
pub fn two_decimals(v: &f64) -> String {
    format!("{v:.2}")
}

/// The legend box every chart uses, at `pos`, in `size` px type.
pub fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    pos: SeriesLabelPosition,
    size: u32,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    chart
        .configure_series_labels()
        .label_font(font(size))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(pos)
        .draw()?;
    Ok(())
}
