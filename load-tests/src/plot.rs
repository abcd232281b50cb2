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

use crate::report::{PerDependency, RunReport, SecondSummary, ServiceSeries};

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
        "queue" => RGBColor(140, 86, 75),
        "hedged" => RGBColor(255, 127, 14),
        "p2c" => RGBColor(23, 190, 207),
        "envoy" => RGBColor(188, 189, 34),
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
    let groups = by_scenario(runs);
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

/// `runs` grouped by scenario, in the order each scenario first appears,
/// each group's runs in run order.
///
/// ```
/// # fn demo(runs: &[load_tests::report::RunReport]) {
/// for (scenario, group) in load_tests::plot::by_scenario(runs) {
///     assert!(group.iter().all(|r| r.scenario == scenario));
/// }
/// # }
/// ```
pub fn by_scenario(runs: &[RunReport]) -> Vec<(&str, Vec<&RunReport>)> {
    let mut groups: Vec<(&str, Vec<&RunReport>)> = Vec::new();
    for r in runs {
        match groups.iter_mut().find(|(s, _)| *s == r.scenario) {
            Some((_, g)) => g.push(r),
            None => groups.push((&r.scenario, vec![r])),
        }
    }
    groups
}

/// One chart of the HTML report ([`crate::html`]), drawn as an SVG string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chart {
    /// What it shows, in a few words.
    pub title: String,
    /// The `<svg>` element.
    pub svg: String,
    /// The data points drawn: one dot (`<circle>`) per value.
    pub points: usize,
    /// Its lines, for a legend beside it: the label and the CSS colour
    /// (`rgb(r, g, b)`).
    pub legend: Vec<(String, String)>,
}

/// The size of each chart of [`scenario_charts`], px (the SVG's viewBox;
/// the page scales it).
pub const CHART_SIZE: (u32, u32) = (640, 320);

/// The charts of one scenario's runs, each its own SVG: goodput per
/// second (a line per mode, and the offered load in grey), p99 latency per
/// second (a line per mode, log scale, the client's budget dashed); when a
/// run read the services' state ([`ServiceSeries`], budget mode), the floor
/// in force and the adaptive concurrency limit per dependency, each only
/// when it has a dependency.
///
/// # Errors
///
/// When plotters cannot draw (a degenerate range).
///
/// ```
/// # fn demo(runs: &[&load_tests::report::RunReport]) -> Result<(), load_tests::plot::PlotError> {
/// let charts = load_tests::plot::scenario_charts(runs)?;
/// assert!(charts[0].svg.starts_with("<svg"));
/// # Ok(()) }
/// ```
pub fn scenario_charts(runs: &[&RunReport]) -> Result<Vec<Chart>, PlotError> {
    let seconds = seconds(runs);
    let per_second = |run: &RunReport, f: &dyn Fn(&SecondSummary) -> Option<f64>| {
        run.timeline.iter().map(f).collect::<Vec<_>>()
    };
    // The page writes the legend beside each chart.
    fn chart<'a>(
        caption: &'a str,
        y_desc: &'a str,
        seconds: f64,
        lines: &'a [Line],
    ) -> LineChart<'a> {
        LineChart {
            caption,
            y_desc,
            seconds,
            lines,
            legend: false,
            reference: None,
            log: false,
        }
    }
    let mut charts = Vec::new();

    let mut goodput: Vec<Line> = runs
        .first()
        .map(|r| Line {
            label: "offered load (requests due)".to_owned(),
            colour: RGBColor(150, 150, 150),
            width: 1,
            values: per_second(r, &|s| Some(s.due as f64)),
        })
        .into_iter()
        .collect();
    goodput.extend(runs.iter().map(|r| Line {
        label: format!("{} mode", r.mode),
        colour: colour(&r.mode),
        width: 2,
        values: per_second(r, &|s| Some(s.good as f64)),
    }));
    let spec = chart(
        "goodput: answers in time, per second",
        "req/s",
        seconds,
        &goodput,
    );
    charts.push(svg_chart(
        "goodput per second",
        &spec,
        0f64..y_top(&goodput),
    )?);

    let budget_ms = runs.iter().map(|r| r.budget_ms).max().unwrap_or(0) as f64;
    let p99: Vec<Line> = runs
        .iter()
        .map(|r| Line {
            label: format!("{} mode", r.mode),
            colour: colour(&r.mode),
            width: 2,
            values: per_second(r, &|s| s.p99_ms),
        })
        .collect();
    let values = || {
        p99.iter()
            .flat_map(|l| l.values.iter().flatten().copied())
            .chain((budget_ms > 0.0).then_some(budget_ms))
    };
    let low = values().fold(f64::INFINITY, f64::min);
    let low = if low.is_finite() {
        (low / 2.0).max(1.0)
    } else {
        1.0
    };
    let high = values().fold(low * 2.0, f64::max) * 1.5;
    let p99: Vec<Line> = p99
        .iter()
        .map(|l| Line {
            values: l.values.iter().map(|v| v.map(|v| v.max(low))).collect(),
            ..l.clone()
        })
        .collect();
    let spec = LineChart {
        log: true,
        reference: (budget_ms > 0.0)
            .then(|| (budget_ms, format!("the client's budget, {budget_ms:.0} ms"))),
        ..chart(
            "p99 latency per second, ms (log scale)",
            "ms",
            seconds,
            &p99,
        )
    };
    charts.push(svg_chart(
        "p99 latency per second",
        &spec,
        (low..high).log_scale(),
    )?);

    type Pick = fn(&ServiceSeries) -> Option<&PerDependency>;
    let services: [(&str, &str, &str, Pick); 2] = [
        (
            "floor in force per dependency",
            "floor in force per dependency, ms",
            "ms",
            |s| s.learned_floor_ms.as_ref(),
        ),
        (
            "adaptive concurrency limit per dependency",
            "adaptive concurrency limit per dependency",
            "calls in flight",
            |s| s.adaptive_limit.as_ref(),
        ),
    ];
    for (title, caption, y_desc, pick) in services {
        let lines = service_lines(runs, pick);
        if lines.is_empty() {
            continue;
        }
        let spec = chart(caption, y_desc, seconds, &lines);
        charts.push(svg_chart(title, &spec, 0f64..y_top(&lines))?);
    }
    Ok(charts)
}

/// Draws `spec` on a white [`CHART_SIZE`] SVG.
fn svg_chart<Y>(title: &str, spec: &LineChart<'_>, y_range: Y) -> Result<Chart, PlotError>
where
    Y: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
    Y::CoordDescType: plotters::coord::ranged1d::ValueFormatter<f64>,
{
    let mut svg = String::new();
    let points = {
        let root = SVGBackend::with_string(&mut svg, CHART_SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let points = draw_lines(&root, spec, y_range)?;
        root.present().map_err(err)?;
        points
    };
    Ok(Chart {
        title: title.to_owned(),
        svg,
        points,
        legend: spec
            .lines
            .iter()
            .map(|l| {
                let RGBColor(r, g, b) = l.colour;
                (l.label.clone(), format!("rgb({r}, {g}, {b})"))
            })
            .collect(),
    })
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
) -> Result<usize, PlotError> {
    let lines = service_lines(runs, pick);
    let spec = LineChart {
        caption,
        y_desc,
        seconds: seconds(runs),
        lines: &lines,
        legend: true,
        reference: None,
        log: false,
    };
    draw_lines(area, &spec, 0f64..y_top(&lines))
}

/// The lines of a chart of the services' state: one per run and
/// dependency that `pick` finds.
fn service_lines(
    runs: &[&RunReport],
    pick: fn(&ServiceSeries) -> Option<&PerDependency>,
) -> Vec<Line> {
    runs.iter()
        .filter_map(|r| pick(&r.services).map(|m| (*r, m)))
        .flat_map(|(run, series)| {
            series.iter().map(move |(dependency, values)| Line {
                label: format!("{} mode: {dependency}", run.mode),
                colour: dependency_colour(dependency),
                width: 2,
                values: values.clone(),
            })
        })
        .collect()
}

/// The seconds a chart of `runs` spans: the longest timeline, at least 1.
fn seconds(runs: &[&RunReport]) -> f64 {
    runs.iter()
        .map(|r| r.timeline.len())
        .max()
        .unwrap_or(1)
        .max(1) as f64
}

/// The top of a linear axis for `lines`: 15 % over the largest value, at
/// least 1.
fn y_top(lines: &[Line]) -> f64 {
    lines
        .iter()
        .flat_map(|l| l.values.iter().flatten())
        .fold(1.0_f64, |a, &b| a.max(b))
        * 1.15
}

/// One line of a per-second chart: a value per second of the run
/// (`None`: none that second, the line is broken there).
#[derive(Clone, Debug)]
struct Line {
    label: String,
    colour: RGBColor,
    width: u32,
    values: Vec<Option<f64>>,
}

/// What a per-second chart shows (see [`draw_lines`]).
#[derive(Clone, Debug)]
struct LineChart<'a> {
    /// The title drawn above the chart.
    caption: &'a str,
    /// The y axis's description.
    y_desc: &'a str,
    /// The x axis's end: the seconds of the run.
    seconds: f64,
    /// The lines.
    lines: &'a [Line],
    /// Draw the legend inside the chart (the SVG file); the HTML page
    /// writes its own beside the chart.
    legend: bool,
    /// A horizontal line and its label, not data (the client's budget).
    reference: Option<(f64, String)>,
    /// A log-scale y axis: only its 1, 2 and 5 of each decade labelled.
    log: bool,
}

/// Whether `y` is 1, 2 or 5 times a power of ten: the labels a log axis
/// keeps, so that they do not crowd.
fn one_two_five(y: f64) -> bool {
    if y <= 0.0 || !y.is_finite() {
        return false;
    }
    let mantissa = y / 10f64.powf(y.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .any(|m| (mantissa - m).abs() < 1e-6)
}

/// A per-second chart: each line of `chart.lines` at x = second + 0.5,
/// broken where a second has no value, with a dot per value (so a lone
/// second shows too). Without any value it says so. The number of dots
/// drawn (one per value) is what it returns.
fn draw_lines<DB, Y>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    spec: &LineChart<'_>,
    y_range: Y,
) -> Result<usize, PlotError>
where
    DB: DrawingBackend,
    Y: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
    Y::CoordDescType: plotters::coord::ranged1d::ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .caption(spec.caption, ("sans-serif", 14).into_font())
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(64)
        .right_y_label_area_size(64)
        .build_cartesian_2d(0f64..spec.seconds, y_range)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("second of the run")
        .y_desc(spec.y_desc)
        // Whole seconds: at most one label per second, at most 11.
        .x_labels((spec.seconds as usize + 1).min(11))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| {
            if spec.log && !one_two_five(*y) {
                String::new()
            } else {
                format!("{y:.0}")
            }
        })
        .light_line_style(RGBColor(240, 240, 240))
        // A log axis already has a line at each 1 to 9 of a decade.
        .y_max_light_lines(if spec.log { 0 } else { 10 })
        .draw()
        .map_err(err)?;
    let (x_range, y_range) = (chart.x_range(), chart.y_range());
    if let Some((y, label)) = &spec.reference {
        let grey = RGBColor(110, 110, 110);
        chart
            .draw_series(DashedLineSeries::new(
                [(x_range.start, *y), (x_range.end, *y)],
                5,
                4,
                grey.stroke_width(1),
            ))
            .map_err(err)?;
        chart
            .plotting_area()
            .draw(&Text::new(
                label.clone(),
                (x_range.start + (x_range.end - x_range.start) * 0.02, *y),
                ("sans-serif", 12).into_font().color(&grey),
            ))
            .map_err(err)?;
    }
    let mut dots = 0;
    for line in spec.lines {
        let c = line.colour;
        let width = line.width;
        let mut segments: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
        for (i, v) in line.values.iter().enumerate() {
            match v {
                Some(v) => segments
                    .last_mut()
                    .map_or((), |s| s.push((i as f64 + 0.5, *v))),
                None => segments.push(Vec::new()),
            }
        }
        let mut labelled = false;
        for segment in segments.into_iter().filter(|s| !s.is_empty()) {
            let points = segment.clone();
            let drawn_series = chart
                .draw_series(LineSeries::new(segment, c.stroke_width(width)))
                .map_err(err)?;
            if !labelled {
                drawn_series
                    .label(line.label.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(width))
                    });
                labelled = true;
            }
            dots += points.len();
            chart
                .draw_series(points.into_iter().map(|p| Circle::new(p, 2, c.filled())))
                .map_err(err)?;
        }
    }
    if dots == 0 {
        // Nothing read (a fixed limit has no adaptive one): say so.
        let x = (x_range.start + x_range.end) / 2.0;
        let y = (y_range.start + y_range.end) / 2.0;
        chart
            .plotting_area()
            .draw(&Text::new(
                "no value read in this run",
                (x, y),
                ("sans-serif", 14)
                    .into_font()
                    .color(&RGBColor(120, 120, 120)),
            ))
            .map_err(err)?;
    } else if spec.legend {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.7))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
    }
    Ok(dots)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_axis_keeps_the_labels_1_2_and_5_of_each_decade() {
        for y in [1.0, 2.0, 5.0, 10.0, 200.0, 5000.0, 20000.0] {
            assert!(one_two_five(y), "{y}");
        }
        for y in [0.0, -10.0, 3.0, 7000.0, 30000.0, f64::NAN] {
            assert!(!one_two_five(y), "{y}");
        }
    }
}
