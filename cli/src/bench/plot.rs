//! `--plot FILE.svg`: the rounds drawn with `plotters` (SVG backend only).
//!
//! Throughput and memory: one bar per column per round, side by side.
//! Latency: the percentile curve of each column (median over the rounds:
//! p50, p90, p99, p99.9, max), and p50 and p99 per round. Each column's
//! series is named by its title (`baseline (raw SSE)`, `genmcp`, or the
//! `--url`).

use plotters::prelude::*;

use super::report::{kind_name, median, mode_name};
use super::{BenchConfig, Mode, Results, Sample};

const WIDTH: u32 = 1100;
const HEIGHT: u32 = 460;
const COLOURS: [RGBColor; 4] = [
    RGBColor(90, 110, 140),
    RGBColor(230, 120, 30),
    RGBColor(60, 160, 90),
    RGBColor(170, 60, 140),
];

type Error = String;

fn err(e: impl std::fmt::Display) -> Error {
    format!("drawing the chart: {e}")
}

fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

/// The chart of `results` as an SVG document.
pub fn svg(cfg: &BenchConfig, results: &Results) -> Result<String, Error> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let title = format!(
            "genmcp bench · {} · {} streams × {} events · {}",
            mode_name(cfg.mode),
            cfg.streams,
            cfg.events,
            kind_name(cfg.kind)
        );
        let root = root.titled(&title, ("sans-serif", 20)).map_err(err)?;
        match cfg.mode {
            Mode::Throughput => {
                per_round(&root, results, "frames per second", |s| s.frames_per_sec)?
            }
            Mode::Memory => {
                per_round(&root, results, "server KiB per open stream", |s| {
                    s.kib_per_stream
                })?;
            }
            Mode::Latency => {
                let (left, right) = root.split_horizontally(WIDTH / 2);
                percentiles(&left, results)?;
                latency_per_round(&right, results)?;
            }
        }
        root.present().map_err(err)?;
    }
    Ok(out)
}

/// `2.5 M`, `800 k`, `12.3`.
fn short(y: f64) -> String {
    if y >= 1e6 {
        format!("{:.1} M", y / 1e6)
    } else if y >= 1e3 {
        format!("{:.0} k", y / 1e3)
    } else {
        format!("{y:.1}")
    }
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// One bar per column per round.
fn per_round(area: &Area<'_>, results: &Results, unit: &str, value: Figure) -> Result<(), Error> {
    let rounds = results.rounds.len();
    let top = results
        .rounds
        .iter()
        .flatten()
        .map(value)
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{unit}, per round"), ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(90)
        .build_cartesian_2d(0.5f64..rounds as f64 + 0.5, 0f64..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("round")
        .y_desc(unit)
        .y_label_formatter(&|y| short(*y))
        .x_labels(rounds + 2)
        .x_label_formatter(&|x| {
            if (x.fract()).abs() < 1e-9 && *x >= 1.0 {
                format!("{x:.0}")
            } else {
                String::new()
            }
        })
        .disable_x_mesh()
        .draw()
        .map_err(err)?;
    let columns = results.keys.len();
    let width = 0.8 / columns as f64;
    for (c, title) in results.titles.iter().enumerate() {
        let fill = colour(c);
        let bars = results.rounds.iter().enumerate().map(|(i, r)| {
            let left = i as f64 + 1.0 - 0.4 + c as f64 * width;
            Rectangle::new(
                [(left, 0.0), (left + width * 0.9, value(&r[c]))],
                fill.filled(),
            )
        });
        chart
            .draw_series(bars)
            .map_err(err)?
            .label(title.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], fill.filled()));
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)
}

fn legend<'a, DB: DrawingBackend + 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    at: SeriesLabelPosition,
) -> Result<(), Error> {
    chart
        .configure_series_labels()
        .position(at)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(err)
}

/// A figure of a sample, in the chart's unit.
type Figure = fn(&Sample) -> f64;

const PERCENTILES: [(&str, Figure); 5] = [
    ("p50", |s| s.p50.as_secs_f64() * 1e3),
    ("p90", |s| s.p90.as_secs_f64() * 1e3),
    ("p99", |s| s.p99.as_secs_f64() * 1e3),
    ("p99.9", |s| s.p999.as_secs_f64() * 1e3),
    ("max", |s| s.max.as_secs_f64() * 1e3),
];

/// The percentile curve of each column, median over the rounds.
fn percentiles(area: &Area<'_>, results: &Results) -> Result<(), Error> {
    let curves: Vec<Vec<f64>> = (0..results.keys.len())
        .map(|c| {
            PERCENTILES
                .iter()
                .map(|(_, f)| {
                    median(results.rounds.iter().map(|r| f(&r[c])).collect()).unwrap_or(0.0)
                })
                .collect()
        })
        .collect();
    let top = curves
        .iter()
        .flatten()
        .copied()
        .fold(0.0, f64::max)
        .max(1e-3)
        * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption("latency percentiles (median of rounds)", ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.3f64..PERCENTILES.len() as f64 - 0.7, 0f64..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_labels(PERCENTILES.len())
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                PERCENTILES
                    .get(i as usize)
                    .map_or_else(String::new, |(n, _)| (*n).to_owned())
            } else {
                String::new()
            }
        })
        .y_desc("ms, publish to receive")
        .draw()
        .map_err(err)?;
    for (c, (curve, title)) in curves.iter().zip(&results.titles).enumerate() {
        let style = colour(c).stroke_width(2);
        chart
            .draw_series(
                LineSeries::new(curve.iter().enumerate().map(|(i, v)| (i as f64, *v)), style)
                    .point_size(4),
            )
            .map_err(err)?
            .label(title.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)
}

/// p50 (solid) and p99 (thin) of each column, per round.
fn latency_per_round(area: &Area<'_>, results: &Results) -> Result<(), Error> {
    let rounds = results.rounds.len();
    let p50 = PERCENTILES[0].1;
    let p99 = PERCENTILES[2].1;
    let top = results
        .rounds
        .iter()
        .flatten()
        .map(p99)
        .fold(0.0, f64::max)
        .max(1e-3)
        * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption("p50 and p99, per round", ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(0.7f64..rounds as f64 + 0.3, 0f64..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("round")
        .x_labels(rounds + 1)
        .x_label_formatter(&|x| {
            if x.fract().abs() < 1e-9 {
                format!("{x:.0}")
            } else {
                String::new()
            }
        })
        .y_desc("ms")
        .draw()
        .map_err(err)?;
    for (c, title) in results.titles.iter().enumerate() {
        for (name, f, width) in [("p50", p50, 3), ("p99", p99, 1)] {
            let style = colour(c).stroke_width(width);
            let points = results
                .rounds
                .iter()
                .enumerate()
                .map(|(i, r)| (i as f64 + 1.0, f(&r[c])));
            chart
                .draw_series(LineSeries::new(points, style).point_size(3))
                .map_err(err)?
                .label(format!("{title} {name}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
        }
    }
    legend(&mut chart, SeriesLabelPosition::LowerRight)
}
