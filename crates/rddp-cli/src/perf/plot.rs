//! `--plot FILE.svg`: Gbit/s and messages/s against message size (log2 axis).

use super::report::Measurement;
use plotters::prelude::*;
use std::path::Path;

/// "64 B", "4 KiB", "1 MiB".
pub(crate) fn human_size(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} B"),
    }
}

/// Write the chart of `ms` (one point per size) to `path` as SVG.
pub(crate) fn write_svg(path: &Path, ms: &[Measurement]) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("drawing {}: {e}", path.display());
    if ms.is_empty() {
        return Err(err(&"no results to plot"));
    }
    let log2 = |m: &Measurement| m.size.max(1).ilog2() as i32;
    let gbit: Vec<(i32, f64)> = ms.iter().map(|m| (log2(m), m.gbit_per_s())).collect();
    let mmsg: Vec<(i32, f64)> = ms.iter().map(|m| (log2(m), m.msgs_per_s() / 1e6)).collect();
    let lo = gbit.iter().map(|p| p.0).min().unwrap_or(0);
    let hi = gbit.iter().map(|p| p.0).max().unwrap_or(0).max(lo + 1);
    let title = format!("rddp perf: {}", ms[0].op.name());

    let root = SVGBackend::new(path, (900, 720)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let root = root
        .titled(&title, ("sans-serif", 22))
        .map_err(|e| err(&e))?;
    let (top, bottom) = root.split_vertically(340);
    panel(&top, "Bandwidth", "Gbit/s", lo..hi, &gbit, BLUE).map_err(|e| err(&e))?;
    panel(&bottom, "Message rate", "Mmsg/s", lo..hi, &mmsg, RED).map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    unit: &str,
    xs: std::ops::Range<i32>,
    pts: &[(i32, f64)],
    color: RGBColor,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let ymax = pts.iter().map(|p| p.1).fold(0.0, f64::max) * 1.1;
    let ymax = if ymax > 0.0 { ymax } else { 1.0 };
    let n = (xs.end - xs.start + 1) as usize;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(xs, 0f64..ymax)?;
    chart
        .configure_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| human_size(1u64 << (*x).clamp(0, 40)))
        .x_desc("message size")
        .y_desc(unit)
        .draw()?;
    chart.draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?;
    chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_people_write_them() {
        assert_eq!(human_size(64), "64 B");
        assert_eq!(human_size(4096), "4 KiB");
        assert_eq!(human_size(4 << 20), "4 MiB");
        assert_eq!(human_size(1000), "1000 B");
    }
}
