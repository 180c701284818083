//! PNG plots: one chart per test, value against message size on log-log axes, one
//! line per configuration, and the machine's limit as a dashed line.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::report::{LIMITS, Summaries};

/// The TTF plotters draws text with (Debian package fonts-dejavu-core).
const FONT_FILES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

fn register_font() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            let path = FONT_FILES
                .iter()
                .find(|p| Path::new(p).is_file())
                .ok_or_else(|| {
                    format!(
                        "no font for the plots (looked for {}); install fonts-dejavu-core \
                         (configure-support/setup does)",
                        FONT_FILES.join(", ")
                    )
                })?;
            let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
            // plotters keeps a reference for the life of the process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                .map_err(|_| format!("{path} is not a usable TTF font"))
        })
        .clone()
}

/// What one chart shows.
pub struct Chart<'a> {
    pub test: &'a str,
    pub title: &'a str,
    pub unit: &'a str,
    /// The x axis's caption.
    pub x_desc: &'a str,
    /// The limit series from `limits` (test name there), drawn dashed.
    pub limit: Option<(&'a str, &'a str)>,
}

/// The x axis of the message-size charts.
pub const MESSAGE_SIZE: &str = "message size (bytes)";

pub const CHARTS: &[Chart<'static>] = &[
    Chart {
        test: "latency",
        title: "Ping-pong latency (half round trip)",
        unit: "us",
        x_desc: MESSAGE_SIZE,
        limit: None,
    },
    Chart {
        test: "bw",
        title: "Unidirectional bandwidth (window of messages)",
        unit: "MB/s",
        x_desc: MESSAGE_SIZE,
        limit: Some(("memcpy", "memcpy (machine limit)")),
    },
    Chart {
        test: "bibw",
        title: "Bidirectional bandwidth",
        unit: "MB/s",
        x_desc: MESSAGE_SIZE,
        limit: Some(("memcpy", "memcpy (machine limit)")),
    },
];

fn series(all: &Summaries, config: &str, test: &str) -> Vec<(f64, f64)> {
    all.iter()
        .filter(|((c, k), s)| c == config && k.1 == test && s.size > 0 && s.median > 0.0)
        .map(|(_, s)| (s.size as f64, s.median))
        .collect()
}

/// Line colours that stay apart on white (the "tab10" set).
const COLORS: &[RGBColor] = &[
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Log-axis ticks fall on powers of ten: label them with decimal prefixes.
fn decimal_label(x: &f64) -> String {
    let v = *x;
    let (scaled, suffix) = if v >= 1e9 {
        (v / 1e9, "G")
    } else if v >= 1e6 {
        (v / 1e6, "M")
    } else if v >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    if scaled >= 10.0 || scaled.fract().abs() < 1e-9 {
        format!("{scaled:.0}{suffix}")
    } else {
        format!("{scaled:.1}{suffix}")
    }
}

/// Draws `chart` into `dir/<test>.png`; Ok(None) when no configuration measured it.
pub fn draw(
    all: &Summaries,
    configs: &[String],
    chart: &Chart,
    dir: &Path,
) -> Result<Option<PathBuf>, String> {
    let lines: Vec<(String, Vec<(f64, f64)>)> = configs
        .iter()
        .map(|c| (c.clone(), series(all, c, chart.test)))
        .filter(|(_, points)| !points.is_empty())
        .collect();
    if lines.is_empty() {
        return Ok(None);
    }
    register_font()?;
    let limit = chart
        .limit
        .map(|(test, label)| (label, series(all, LIMITS, test)))
        .filter(|(_, points)| !points.is_empty());
    let every = lines
        .iter()
        .flat_map(|(_, p)| p.iter())
        .chain(limit.iter().flat_map(|(_, p)| p.iter()));
    let (mut xmin, mut xmax, mut ymin, mut ymax) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in every {
        xmin = xmin.min(x);
        xmax = xmax.max(x);
        ymin = ymin.min(y);
        ymax = ymax.max(y);
    }
    let path = dir.join(format!("{}.png", chart.test));
    let shown = path.display().to_string();
    let failed = |e: &dyn std::fmt::Display| format!("{shown}: {e}");
    let root = BitMapBackend::new(&path, (1100, 700)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| failed(&e))?;
    let mut ctx = ChartBuilder::on(&root)
        .caption(chart.title, ("sans-serif", 26))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(
            (xmin * 0.8..xmax * 1.25).log_scale(),
            (ymin * 0.7..ymax * 1.5).log_scale(),
        )
        .map_err(|e| failed(&e))?;
    ctx.configure_mesh()
        .x_desc(chart.x_desc)
        .y_desc(chart.unit)
        .x_label_formatter(&decimal_label)
        .y_label_formatter(&decimal_label)
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .draw()
        .map_err(|e| failed(&e))?;
    for (i, (name, points)) in lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()].to_rgba();
        ctx.draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(|e| failed(&e))?
            .label(name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(2))
            });
        ctx.draw_series(
            points
                .iter()
                .map(|&(x, y)| Circle::new((x, y), 3, color.filled())),
        )
        .map_err(|e| failed(&e))?;
    }
    if let Some((label, points)) = limit {
        ctx.draw_series(DashedLineSeries::new(points, 8, 6, BLACK.stroke_width(1)))
            .map_err(|e| failed(&e))?
            .label(label)
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], BLACK.stroke_width(1)));
    }
    ctx.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| failed(&e))?;
    root.present().map_err(|e| failed(&e))?;
    Ok(Some(path.clone()))
}
