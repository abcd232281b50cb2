//! The SVG plot: per scenario, p99 latency (solid, left axis, log scale)
//! and goodput (dashed, right axis) for each second of the run (by
//! intended send time), one colour per mode, every mode on one chart; a
//! ramp's panel also has the offered load per second (thin, grey, right
//! axis).

use std::path::Path;

use plotters::prelude::*;

use crate::report::RunReport;

/// Why the plot could not be drawn or written.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw the plot: {0}")]
pub struct PlotError(String);

fn err(e: impl std::fmt::Display) -> PlotError {
    PlotError(e.to_string())
}

/// The colour of a mode's lines.
fn colour(mode: &str) -> RGBColor {
    match mode {
        "budget" => RGBColor(31, 119, 180),
        "naive" => RGBColor(214, 39, 40),
        "peer" => RGBColor(148, 103, 189),
        _ => RGBColor(44, 160, 44),
    }
}

/// Writes one panel per scenario of `runs` (in the order they first
/// appear) to `path`.
///
/// # Errors
///
/// When the file cannot be written.
pub fn write_svg(path: &Path, runs: &[RunReport]) -> Result<(), PlotError> {
    let mut groups: Vec<(&str, Vec<&RunReport>)> = Vec::new();
    for r in runs {
        match groups.iter_mut().find(|(s, _)| *s == r.scenario) {
            Some((_, g)) => g.push(r),
            None => groups.push((&r.scenario, vec![r])),
        }
    }
    let panels = groups.len().max(1) as u32;
    let root = SVGBackend::new(path, (960, 340 * panels)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    for (area, (scenario, group)) in root
        .split_evenly((groups.len().max(1), 1))
        .iter()
        .zip(&groups)
    {
        draw_panel(area, scenario, group)?;
    }
    root.present().map_err(err)
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    scenario: &str,
    runs: &[&RunReport],
) -> Result<(), PlotError> {
    let seconds = runs
        .iter()
        .map(|r| r.timeline.len())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let p99_min = runs
        .iter()
        .flat_map(|r| r.timeline.iter().filter_map(|s| s.p99_ms))
        .fold(f64::INFINITY, f64::min);
    let p99_min = if p99_min.is_finite() {
        (p99_min / 2.0).max(1.0)
    } else {
        1.0
    };
    let p99_max = runs
        .iter()
        .flat_map(|r| r.timeline.iter().filter_map(|s| s.p99_ms))
        .fold(p99_min * 2.0, f64::max)
        * 1.5;
    let good_max = runs
        .iter()
        .flat_map(|r| r.timeline.iter().map(|s| s.due.max(s.good) as f64))
        .fold(1.0_f64, f64::max)
        * 1.1;
    let description = runs.first().map_or("", |r| r.description.as_str());
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{scenario}: {description}"),
            ("sans-serif", 16).into_font(),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .right_y_label_area_size(64)
        .build_cartesian_2d(0f64..seconds, (p99_min..p99_max).log_scale())
        .map_err(err)?
        .set_secondary_coord(0f64..seconds, 0f64..good_max);
    chart
        .configure_mesh()
        .x_desc("second of the run (by intended send time)")
        .y_desc("p99 latency, ms, log scale (solid)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .light_line_style(RGBColor(240, 240, 240))
        .draw()
        .map_err(err)?;
    chart
        .configure_secondary_axes()
        .y_desc("goodput, req/s (dashed)")
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .map_err(err)?;
    if let Some(run) = runs.iter().find(|r| r.ramp.is_some()) {
        // A ramp: the offered load, thin and grey, on the goodput axis.
        let offered: Vec<(f64, f64)> = run
            .timeline
            .iter()
            .map(|s| (s.second as f64 + 0.5, s.due as f64))
            .collect();
        let grey = RGBColor(140, 140, 140);
        chart
            .draw_secondary_series(LineSeries::new(offered, grey.stroke_width(1)))
            .map_err(err)?
            .label("offered load, req/s")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], grey));
    }
    for run in runs {
        let c = colour(&run.mode);
        let p99: Vec<(f64, f64)> = run
            .timeline
            .iter()
            .filter_map(|s| s.p99_ms.map(|p| (s.second as f64 + 0.5, p.max(p99_min))))
            .collect();
        let good: Vec<(f64, f64)> = run
            .timeline
            .iter()
            .map(|s| (s.second as f64 + 0.5, s.good as f64))
            .collect();
        chart
            .draw_series(LineSeries::new(p99, c.stroke_width(2)))
            .map_err(err)?
            .label(format!("{} mode p99 latency", run.mode))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart
            .draw_secondary_series(DashedLineSeries::new(good, 6, 4, c.stroke_width(2)))
            .map_err(err)?
            .label(format!("{} mode goodput", run.mode))
            .legend(move |(x, y)| {
                PathElement::new(
                    vec![(x, y), (x + 8, y), (x + 12, y), (x + 20, y)],
                    c.stroke_width(1),
                )
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::MiddleRight)
        .background_style(WHITE.mix(0.7))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    Ok(())
}
