//! The SVG plot: per scenario, p99 latency (solid, left axis, log scale)
//! and goodput (dashed, right axis) for each second of the run (by
//! intended send time), one colour per mode, every mode on one chart; a
//! ramp's panel also has the offered load per second (thin, grey, right
//! axis). When a run read the services' own state
//! ([`crate::report::ServiceSeries`], budget mode), two more charts below
//! the scenario's: the floor in force per dependency (ms) and the
//! adaptive concurrency limit per dependency, one colour per dependency,
//! for the same seconds.

use std::path::Path;

use plotters::prelude::*;

use crate::report::{PerDependency, RunReport, ServiceSeries};

/// The height of a scenario's main chart, px.
const MAIN_HEIGHT: u32 = 340;

/// The height of each chart of the services' state, px.
const SERVICES_HEIGHT: u32 = 220;

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
    let heights: Vec<u32> = groups
        .iter()
        .map(|(_, g)| {
            if g.iter().any(|r| r.services.has_values()) {
                MAIN_HEIGHT + 2 * SERVICES_HEIGHT
            } else {
                MAIN_HEIGHT
            }
        })
        .collect();
    let total = heights.iter().sum::<u32>().max(MAIN_HEIGHT);
    let root = SVGBackend::new(path, (960, total)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut rest = root.clone();
    for ((scenario, group), height) in groups.iter().zip(&heights) {
        let (area, below) = rest.split_vertically(*height);
        rest = below;
        let (main, services) = area.split_vertically(MAIN_HEIGHT);
        draw_panel(&main, scenario, group)?;
        if *height > MAIN_HEIGHT {
            let (floors, limits) = services.split_vertically(SERVICES_HEIGHT);
            draw_services(
                &floors,
                &format!("{scenario}: floor in force per dependency, ms"),
                "floor, ms",
                group,
                |s| s.learned_floor_ms.as_ref(),
            )?;
            draw_services(
                &limits,
                &format!("{scenario}: adaptive concurrency limit per dependency"),
                "limit, calls in flight",
                group,
                |s| s.adaptive_limit.as_ref(),
            )?;
        }
    }
    root.present().map_err(err)
}

/// The colour of a dependency's lines.
fn dependency_colour(dependency: &str) -> RGBColor {
    match dependency {
        "inventory" => RGBColor(255, 127, 14),
        "pricing" => RGBColor(31, 119, 180),
        "recommendations" => RGBColor(44, 160, 44),
        "checkout" => RGBColor(148, 103, 189),
        _ => RGBColor(127, 127, 127),
    }
}

/// One chart of the services' state: `pick`'s series of every run that
/// has one, a line per dependency (broken where a second has no value).
fn draw_services<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    y_desc: &str,
    runs: &[&RunReport],
    pick: fn(&ServiceSeries) -> Option<&PerDependency>,
) -> Result<(), PlotError> {
    let seconds = runs
        .iter()
        .map(|r| r.timeline.len())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let with: Vec<(&RunReport, &PerDependency)> = runs
        .iter()
        .filter_map(|r| pick(&r.services).map(|m| (*r, m)))
        .collect();
    let y_max = with
        .iter()
        .flat_map(|(_, m)| m.values().flatten().flatten())
        .fold(1.0_f64, |a, &b| a.max(b))
        * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 14).into_font())
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(64)
        .right_y_label_area_size(64)
        .build_cartesian_2d(0f64..seconds, 0f64..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("second of the run")
        .y_desc(y_desc)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .light_line_style(RGBColor(240, 240, 240))
        .draw()
        .map_err(err)?;
    let mut drawn = false;
    for (run, series) in &with {
        for (dependency, values) in *series {
            let c = dependency_colour(dependency);
            let mut segments: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
            for (i, v) in values.iter().enumerate() {
                match v {
                    Some(v) => segments
                        .last_mut()
                        .map_or((), |s| s.push((i as f64 + 0.5, *v))),
                    None => segments.push(Vec::new()),
                }
            }
            let label = format!("{} mode: {dependency}", run.mode);
            let mut labelled = false;
            for segment in segments.into_iter().filter(|s| !s.is_empty()) {
                let points = segment.clone();
                let drawn_series = chart
                    .draw_series(LineSeries::new(segment, c.stroke_width(2)))
                    .map_err(err)?;
                if !labelled {
                    drawn_series.label(label.clone()).legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                    });
                    labelled = true;
                }
                // A point per second, so a lone second shows too.
                chart
                    .draw_series(points.into_iter().map(|p| Circle::new(p, 2, c.filled())))
                    .map_err(err)?;
                drawn = true;
            }
        }
    }
    if !drawn {
        // Nothing read (a fixed limit has no adaptive one): say so.
        chart
            .plotting_area()
            .draw(&Text::new(
                "no value read in this run",
                (seconds / 2.0, y_max / 2.0),
                ("sans-serif", 14)
                    .into_font()
                    .color(&RGBColor(120, 120, 120)),
            ))
            .map_err(err)?;
    } else {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.7))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
    }
    Ok(())
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
