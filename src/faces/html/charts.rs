//! Line charts against concurrency, as inline SVG: axes with ticks, one
//! polyline per series with a marker per measured level, vertical rules (the
//! knee, the recommendation), horizontal rules (an SLO limit) and a shaded
//! band over the levels that broke the SLO. Pure: data in, text out.
//!
//! Every marker carries its exact value in `data-series`, `data-x` and
//! `data-y` (Rust's shortest round-trip form, so a reader parses back the
//! very `f64` of the report) and a `<title>` that a browser shows on hover.

use std::fmt::Write;

use super::escape::escape;

/// Size of the drawing, in SVG user units (it scales with its box).
const WIDTH: f64 = 400.0;
const HEIGHT: f64 = 250.0;
/// Room for the tick labels on the left, the title and legend on top, the
/// x tick labels and axis title below.
const LEFT: f64 = 58.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 46.0;
const BOTTOM: f64 = 40.0;
/// The plot area inside the margins.
const PLOT_TOP: f64 = TOP;
const PLOT_BOTTOM: f64 = HEIGHT - BOTTOM;
const PLOT_LEFT: f64 = LEFT;
const PLOT_RIGHT: f64 = WIDTH - RIGHT;
/// A rule further above the data than this factor is written as off scale
/// rather than drawn: a 5 s SLO over 150 ms latencies would squash the curve.
const RULE_REACH: f64 = 2.5;

/// What the y values measure, which decides how they are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Seconds, written in ms below one second.
    Seconds,
    /// Tokens per second.
    TokensPerSecond,
    /// A fraction, written as a percentage.
    Ratio,
    /// A number of requests (the server's running and waiting counts).
    Requests,
}

impl Unit {
    /// A value for a reader: "12.3 ms", "1.25 s", "612 tok/s", "4.2%".
    pub fn format(self, v: f64) -> String {
        match self {
            Unit::Seconds if v.abs() >= 1.0 => {
                let s = format!("{v:.2}");
                format!("{} s", s.trim_end_matches('0').trim_end_matches('.'))
            }
            Unit::Seconds => {
                let ms = v * 1000.0;
                match ms.abs() {
                    m if m >= 100.0 => format!("{ms:.0} ms"),
                    m if m >= 10.0 => format!("{ms:.1} ms"),
                    _ => format!("{ms:.2} ms"),
                }
            }
            Unit::TokensPerSecond if v.abs() >= 100.0 => format!("{v:.0} tok/s"),
            Unit::TokensPerSecond => format!("{v:.1} tok/s"),
            Unit::Ratio => format!("{:.1}%", v * 100.0),
            Unit::Requests => format!("{v:.1} requests"),
        }
    }

    /// A tick label, with as many decimals as the tick step needs.
    fn tick(self, v: f64, step: f64, top: f64) -> String {
        let (scale, suffix) = match self {
            Unit::Seconds if top < 1.0 => (1000.0, " ms"),
            Unit::Seconds => (1.0, " s"),
            Unit::TokensPerSecond if top >= 10_000.0 => (0.001, "k"),
            Unit::TokensPerSecond => (1.0, ""),
            Unit::Ratio => (100.0, "%"),
            Unit::Requests => (1.0, ""),
        };
        // As many decimals as the step has (2.5 needs one, 0.05 two).
        let decimals = (0..6)
            .find(|&d| {
                let shifted = step * scale * 10f64.powi(d);
                (shifted - shifted.round()).abs() < 1e-6 * shifted.max(1.0)
            })
            .unwrap_or(6) as usize;
        format!("{:.*}{suffix}", decimals, v * scale)
    }
}

/// One line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Short identifier, written in `data-series` (for readers and tests).
    pub key: String,
    /// Legend text.
    pub label: String,
    /// Stroke colour (a CSS colour written by the caller, never from input).
    pub color: &'static str,
    /// Dashed line (a second percentile of the same quantity).
    pub dashed: bool,
    /// (concurrency, value); None where the level had no sample.
    pub points: Vec<(f64, Option<f64>)>,
}

/// Which rule a line is, for its style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleKind {
    /// The highest level within the SLO.
    Knee,
    /// The recommended max_in_flight.
    Recommended,
    /// An SLO limit.
    Slo,
    /// A level stopped early: its partial figures are no collapse.
    Stopped,
}

impl RuleKind {
    fn class(self) -> &'static str {
        match self {
            RuleKind::Knee => "knee",
            RuleKind::Recommended => "rec",
            RuleKind::Slo => "slo",
            RuleKind::Stopped => "stopped",
        }
    }
}

/// A straight line across the plot at one value, with a label.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// Where: a concurrency for vertical rules, a y value for horizontal ones.
    pub at: f64,
    /// Text beside it.
    pub label: String,
    /// Style.
    pub kind: RuleKind,
}

/// A chart of some quantities against concurrency.
#[derive(Debug, Clone, PartialEq)]
pub struct LineChart {
    /// Title at the top.
    pub title: String,
    /// What the y values measure.
    pub unit: Unit,
    /// The lines.
    pub series: Vec<Series>,
    /// Vertical rules (at a concurrency).
    pub x_rules: Vec<Rule>,
    /// Horizontal rules (at a y value).
    pub y_rules: Vec<Rule>,
    /// The first level over the SLO: the band from it rightwards is shaded.
    pub over_slo_from: Option<f64>,
}

/// Maps concurrency to x: log2 when the levels span a factor of 4 or more
/// (1, 2, 4, 8, 16 come out evenly spaced), linear otherwise.
#[derive(Debug, Clone, Copy)]
struct XScale {
    log: bool,
    lo: f64,
    hi: f64,
}

impl XScale {
    fn new(xs: &[f64]) -> XScale {
        let (mut lo, mut hi) = xs
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                (lo.min(x), hi.max(x))
            });
        if !lo.is_finite() || !hi.is_finite() {
            (lo, hi) = (1.0, 2.0);
        }
        let log = lo > 0.0 && hi / lo >= 4.0;
        let (mut lo, mut hi) = if log {
            (lo.log2(), hi.log2())
        } else {
            (lo, hi)
        };
        if hi - lo < 1e-9 {
            lo -= 1.0;
            hi += 1.0;
        }
        // A margin so that the first and last markers sit off the frame.
        let pad = (hi - lo) * 0.05;
        XScale {
            log,
            lo: lo - pad,
            hi: hi + pad,
        }
    }

    fn px(&self, x: f64) -> f64 {
        let u = if self.log {
            x.max(f64::MIN_POSITIVE).log2()
        } else {
            x
        };
        LEFT + (u - self.lo) / (self.hi - self.lo) * (WIDTH - LEFT - RIGHT)
    }
}

/// Maps values to y, from 0 (or below, for negative data) to a round top.
#[derive(Debug, Clone, Copy)]
struct YScale {
    lo: f64,
    hi: f64,
    step: f64,
}

/// A round step (1, 2, 2.5 or 5 times a power of ten) near `span / 4`.
fn nice_step(span: f64) -> f64 {
    let raw = span / 4.0;
    let power = 10f64.powf(raw.log10().floor());
    let m = raw / power;
    let nice = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 2.5 {
        2.5
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * power
}

impl YScale {
    fn new(lo: f64, hi: f64) -> YScale {
        let lo = lo.min(0.0);
        let hi = if hi > lo { hi } else { lo + 1.0 };
        let step = nice_step(hi - lo);
        YScale {
            lo: (lo / step).floor() * step,
            hi: (hi / step).ceil() * step,
            step,
        }
    }

    fn px(&self, y: f64) -> f64 {
        HEIGHT - BOTTOM - (y - self.lo) / (self.hi - self.lo) * (HEIGHT - TOP - BOTTOM)
    }

    fn ticks(&self) -> Vec<f64> {
        let n = ((self.hi - self.lo) / self.step).round() as i64;
        (0..=n.clamp(0, 20))
            .map(|i| self.lo + i as f64 * self.step)
            .collect()
    }
}

/// Coordinates with two decimals: enough for the eye, short in the file.
fn c(v: f64) -> String {
    format!("{v:.2}")
}

/// Rough width of a label in the 11-unit sans-serif font of the legend.
fn text_width(s: &str) -> f64 {
    s.chars().count() as f64 * 6.3
}

/// Where a chart's values land: its measured levels, both scales, and its
/// horizontal rules split into those drawn and those only written.
struct Frame<'a> {
    /// The measured levels, in order, once each.
    xs: Vec<f64>,
    xscale: XScale,
    yscale: YScale,
    /// Horizontal rules near enough the data to draw.
    drawn: Vec<&'a Rule>,
    /// Those too far above it: only written.
    off_scale: Vec<&'a Rule>,
}

impl<'a> Frame<'a> {
    /// The frame of `chart`: the y scale reaches the data and the rules drawn.
    fn of(chart: &'a LineChart) -> Frame<'a> {
        let finite_points = || {
            chart
                .series
                .iter()
                .flat_map(|s| s.points.iter())
                .filter_map(|&(x, y)| y.map(|y| (x, y)))
                .filter(|(x, y)| x.is_finite() && y.is_finite())
        };
        let mut xs: Vec<f64> = chart
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .filter(|x| x.is_finite())
            .collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        let rule_xs: Vec<f64> = chart
            .x_rules
            .iter()
            .map(|r| r.at)
            .filter(|x| x.is_finite())
            .collect();
        let xscale = XScale::new(&[xs.as_slice(), rule_xs.as_slice()].concat());
        let (data_lo, data_hi) = finite_points()
            .fold((0.0f64, f64::NEG_INFINITY), |(lo, hi), (_, y)| {
                (lo.min(y), hi.max(y))
            });
        let data_hi = if data_hi.is_finite() { data_hi } else { 0.0 };
        // Rules near the data are drawn; far above it, only mentioned.
        let (drawn, off_scale): (Vec<&Rule>, Vec<&Rule>) = chart
            .y_rules
            .iter()
            .filter(|r| r.at.is_finite())
            .partition(|r| data_hi <= 0.0 || r.at <= data_hi * RULE_REACH);
        let hi = drawn.iter().map(|r| r.at).fold(data_hi, f64::max);
        let yscale = YScale::new(data_lo, hi * 1.08);
        Frame {
            xs,
            xscale,
            yscale,
            drawn,
            off_scale,
        }
    }
}

impl LineChart {
    /// The chart as one `<svg>` element.
    pub fn svg(&self) -> String {
        let f = Frame::of(self);
        let mut out = String::new();
        self.write_head(&mut out);
        self.write_band(&mut out, &f);
        self.write_grid(&mut out, &f);
        self.write_x_axis(&mut out, &f);
        self.write_x_rules(&mut out, &f);
        self.write_y_rules(&mut out, &f);
        self.write_off_scale(&mut out, &f);
        self.write_lines(&mut out, &f);
        out.push_str("</svg>");
        out
    }

    /// The title, and the legend under it.
    fn write_head(&self, out: &mut String) {
        let _ = write!(
            out,
            "<svg class=\"chart\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" aria-label=\"{t}\">\
             <title>{t}</title>",
            t = escape(&self.title)
        );
        let _ = write!(
            out,
            "<text class=\"title\" x=\"{LEFT}\" y=\"17\">{}</text>",
            escape(&self.title)
        );
        // Legend, left to right under the title.
        let mut lx = LEFT;
        for s in &self.series {
            let _ = write!(
                out,
                "<line x1=\"{}\" y1=\"32\" x2=\"{}\" y2=\"32\" stroke=\"{}\" stroke-width=\"2.5\"{}/>\
                 <text class=\"legend\" x=\"{}\" y=\"36\">{}</text>",
                c(lx),
                c(lx + 18.0),
                s.color,
                if s.dashed {
                    " stroke-dasharray=\"5 3\""
                } else {
                    ""
                },
                c(lx + 23.0),
                escape(&s.label)
            );
            lx += 23.0 + text_width(&s.label) + 14.0;
        }
        if self.over_slo_from.is_some_and(f64::is_finite) {
            let _ = write!(
                out,
                "<rect class=\"over-slo\" x=\"{}\" y=\"27\" width=\"14\" height=\"10\"/>\
                 <text class=\"legend\" x=\"{}\" y=\"36\">over SLO</text>",
                c(lx),
                c(lx + 19.0)
            );
        }
    }

    /// The band over the levels over the SLO.
    fn write_band(&self, out: &mut String, f: &Frame<'_>) {
        // The band over the SLO, from halfway between the last good level
        // and the first bad one.
        if let Some(from) = self.over_slo_from.filter(|x| x.is_finite()) {
            let at = f.xscale.px(from);
            let prev =
                f.xs.iter()
                    .rev()
                    .find(|&&x| x < from)
                    .map_or(PLOT_LEFT, |&x| f.xscale.px(x));
            let start = ((prev + at) / 2.0).max(PLOT_LEFT);
            let _ = write!(
                out,
                "<rect class=\"over-slo\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"><title>levels over the SLO</title></rect>",
                c(start),
                c(PLOT_TOP),
                c((PLOT_RIGHT - start).max(0.0)),
                c(PLOT_BOTTOM - PLOT_TOP),
            );
        }
    }

    /// The horizontal grid with its value ticks.
    fn write_grid(&self, out: &mut String, f: &Frame<'_>) {
        // Horizontal grid with value ticks.
        for t in f.yscale.ticks() {
            let y = f.yscale.px(t);
            let _ = write!(
                out,
                "<line class=\"grid\" x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\"/>\
                 <text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
                c(PLOT_LEFT),
                c(PLOT_RIGHT),
                c(PLOT_LEFT - 6.0),
                c(y + 4.0),
                escape(&self.unit.tick(t, f.yscale.step, f.yscale.hi)),
                y = c(y)
            );
        }
    }

    /// The concurrency ticks and both axes.
    fn write_x_axis(&self, out: &mut String, f: &Frame<'_>) {
        // Concurrency ticks at the measured levels (thinned when crowded).
        let every = f.xs.len().div_ceil(12).max(1);
        for (i, &x) in f.xs.iter().enumerate() {
            if i % every != 0 && i + 1 != f.xs.len() {
                continue;
            }
            let px = f.xscale.px(x);
            let _ = write!(
                out,
                "<line class=\"axis\" x1=\"{px}\" y1=\"{}\" x2=\"{px}\" y2=\"{}\"/>\
                 <text class=\"tick\" x=\"{px}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                c(PLOT_BOTTOM),
                c(PLOT_BOTTOM + 4.0),
                c(PLOT_BOTTOM + 16.0),
                x,
                px = c(px)
            );
        }
        let _ = write!(
            out,
            "<line class=\"axis\" x1=\"{l}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\"/>\
             <line class=\"axis\" x1=\"{l}\" y1=\"{t}\" x2=\"{l}\" y2=\"{b}\"/>\
             <text class=\"axis-title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">concurrency (requests in flight{})</text>",
            c((PLOT_LEFT + PLOT_RIGHT) / 2.0),
            c(HEIGHT - 6.0),
            if f.xscale.log { ", log scale" } else { "" },
            l = c(PLOT_LEFT),
            r = c(PLOT_RIGHT),
            t = c(PLOT_TOP),
            b = c(PLOT_BOTTOM),
        );
    }

    /// The vertical rules.
    fn write_x_rules(&self, out: &mut String, f: &Frame<'_>) {
        // Vertical rules: the recommendation's label to the left of its
        // line, the knee's to the right, so that the two never overlap.
        for r in self.x_rules.iter().filter(|r| r.at.is_finite()) {
            let x = f.xscale.px(r.at);
            let (dx, anchor, y) = match r.kind {
                RuleKind::Recommended => (-4.0, "end", PLOT_TOP + 22.0),
                RuleKind::Stopped => (4.0, "start", PLOT_TOP + 33.0),
                _ => (4.0, "start", PLOT_TOP + 11.0),
            };
            let _ = write!(
                out,
                "<line class=\"rule {k}\" x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\"/>\
                 <text class=\"rule-label {k}\" x=\"{}\" y=\"{}\" text-anchor=\"{anchor}\">{}</text>",
                c(PLOT_TOP),
                c(PLOT_BOTTOM),
                c(x + dx),
                c(y),
                escape(&r.label),
                k = r.kind.class(),
                x = c(x)
            );
        }
    }

    /// The horizontal rules drawn.
    fn write_y_rules(&self, out: &mut String, f: &Frame<'_>) {
        // Horizontal rules are labelled at the left, clear of the band
        // over the SLO.
        for r in &f.drawn {
            let y = f.yscale.px(r.at);
            let _ = write!(
                out,
                "<line class=\"rule {k}\" x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\"/>\
                 <text class=\"rule-label {k}\" x=\"{}\" y=\"{}\" text-anchor=\"start\">{}</text>",
                c(PLOT_LEFT),
                c(PLOT_RIGHT),
                c(PLOT_LEFT + 4.0),
                c(y - 4.0),
                escape(&r.label),
                k = r.kind.class(),
                y = c(y)
            );
        }
    }

    /// The rules too far above the data to draw, written.
    fn write_off_scale(&self, out: &mut String, f: &Frame<'_>) {
        // Off-scale rules are written at the top left of the plot, where
        // curves that rise with concurrency leave room.
        let off: Vec<String> = f.off_scale.iter().map(|r| escape(&r.label)).collect();
        if !off.is_empty() {
            let _ = write!(
                out,
                "<text class=\"rule-label slo\" x=\"{}\" y=\"{}\">{} (off scale ↑)</text>",
                c(PLOT_LEFT + 4.0),
                c(PLOT_TOP + 11.0),
                off.join(", ")
            );
        }
    }

    /// The lines and their markers.
    fn write_lines(&self, out: &mut String, f: &Frame<'_>) {
        // The lines, broken where a level had no value, then their markers.
        for s in &self.series {
            let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
            for &(x, y) in &s.points {
                match y.filter(|y| y.is_finite() && x.is_finite()) {
                    Some(y) => {
                        if let Some(run) = runs.last_mut() {
                            run.push((x, y));
                        }
                    }
                    None => runs.push(Vec::new()),
                }
            }
            for run in runs.iter().filter(|r| r.len() > 1) {
                let points: Vec<String> = run
                    .iter()
                    .map(|&(x, y)| format!("{},{}", c(f.xscale.px(x)), c(f.yscale.px(y))))
                    .collect();
                let _ = write!(
                    out,
                    "<polyline class=\"line\" points=\"{}\" stroke=\"{}\"{}/>",
                    points.join(" "),
                    s.color,
                    if s.dashed {
                        " stroke-dasharray=\"6 4\""
                    } else {
                        ""
                    }
                );
            }
            for &(x, y) in runs.iter().flatten() {
                let _ = write!(
                    out,
                    "<circle class=\"point\" cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"{}\" \
                     data-series=\"{}\" data-x=\"{x}\" data-y=\"{y}\">\
                     <title>{}, concurrency {x}: {}</title></circle>",
                    c(f.xscale.px(x)),
                    c(f.yscale.px(y)),
                    s.color,
                    escape(&s.key),
                    escape(&s.label),
                    escape(&self.unit.format(y)),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(key: &str, points: &[(f64, Option<f64>)]) -> Series {
        Series {
            key: key.into(),
            label: key.into(),
            color: "#000",
            dashed: false,
            points: points.to_vec(),
        }
    }

    fn chart(series: Vec<Series>) -> LineChart {
        LineChart {
            title: "t".into(),
            unit: Unit::Seconds,
            series,
            x_rules: vec![],
            y_rules: vec![],
            over_slo_from: None,
        }
    }

    /// (cx, cy) of each marker, in order.
    fn markers(svg: &str) -> Vec<(f64, f64)> {
        svg.split("<circle ")
            .skip(1)
            .map(|tag| {
                let attr = |name: &str| -> f64 {
                    let start = tag.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
                    let end = start + tag[start..].find('"').unwrap();
                    tag[start..end].parse().unwrap()
                };
                (attr("cx"), attr("cy"))
            })
            .collect()
    }

    #[test]
    fn nice_steps_are_round() {
        assert_eq!(nice_step(4.0), 1.0);
        assert_eq!(nice_step(0.6), 0.2);
        assert_eq!(nice_step(9.0), 2.5);
        assert_eq!(nice_step(1800.0), 500.0);
        let y = YScale::new(0.0, 0.163);
        assert_eq!(y.step, 0.05);
        assert_eq!(y.hi, 0.2);
        assert_eq!(y.ticks().len(), 5);
    }

    #[test]
    fn doubling_levels_are_evenly_spaced_and_values_rise_upwards() {
        let svg = chart(vec![series(
            "a",
            &[(1.0, Some(1.0)), (2.0, Some(2.0)), (4.0, Some(3.0))],
        )])
        .svg();
        let m = markers(&svg);
        assert_eq!(m.len(), 3);
        assert!(
            ((m[1].0 - m[0].0) - (m[2].0 - m[1].0)).abs() < 0.02,
            "{m:?}"
        );
        assert!(m[0].1 > m[1].1 && m[1].1 > m[2].1, "{m:?}");
        // Every marker inside the plot area.
        for (x, y) in m {
            assert!((LEFT..=WIDTH - RIGHT).contains(&x), "{x}");
            assert!((TOP..=HEIGHT - BOTTOM).contains(&y), "{y}");
        }
        assert!(svg.contains("data-series=\"a\" data-x=\"4\" data-y=\"3\""));
    }

    #[test]
    fn missing_values_break_the_line_and_non_finite_ones_are_dropped() {
        let svg = chart(vec![series(
            "a",
            &[
                (1.0, Some(1.0)),
                (2.0, Some(2.0)),
                (4.0, None),
                (8.0, Some(f64::NAN)),
                (16.0, Some(1.0)),
                (32.0, Some(1.5)),
            ],
        )])
        .svg();
        assert_eq!(svg.matches("<polyline").count(), 2, "{svg}");
        assert_eq!(markers(&svg).len(), 4);
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
    }

    #[test]
    fn an_empty_chart_still_draws_axes() {
        let svg = chart(vec![series("a", &[])]).svg();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("class=\"axis\""));
        assert!(!svg.contains("NaN"), "{svg}");
    }

    #[test]
    fn a_far_rule_is_written_not_drawn() {
        let mut ch = chart(vec![series("a", &[(1.0, Some(0.1)), (2.0, Some(0.2))])]);
        ch.y_rules.push(Rule {
            at: 5.0,
            label: "SLO 5 s".into(),
            kind: RuleKind::Slo,
        });
        let svg = ch.svg();
        assert!(svg.contains("SLO 5 s (off scale ↑)"), "{svg}");
        assert!(!svg.contains("<line class=\"rule slo\""));
        ch.y_rules[0].at = 0.3;
        let svg = ch.svg();
        assert!(svg.contains("<line class=\"rule slo\""), "{svg}");
    }

    #[test]
    fn labels_are_escaped() {
        let mut ch = chart(vec![series("<a>", &[(1.0, Some(1.0))])]);
        ch.title = "x\"><script>".into();
        let svg = ch.svg();
        assert!(!svg.contains("<script>") && !svg.contains("<a>"), "{svg}");
        assert!(svg.contains("x&quot;&gt;&lt;script&gt;"));
    }

    #[test]
    fn units_read_well() {
        assert_eq!(Unit::Seconds.format(0.0123), "12.3 ms");
        assert_eq!(Unit::Seconds.format(1.5), "1.5 s");
        assert_eq!(Unit::Seconds.format(5.0), "5 s");
        assert_eq!(Unit::Seconds.format(12.345), "12.35 s");
        assert_eq!(Unit::TokensPerSecond.format(612.4), "612 tok/s");
        assert_eq!(Unit::Ratio.format(0.042), "4.2%");
        assert_eq!(Unit::Seconds.tick(0.05, 0.05, 0.2), "50 ms");
        assert_eq!(Unit::Ratio.tick(0.25, 0.25, 1.0), "25%");
        assert_eq!(
            Unit::TokensPerSecond.tick(12_500.0, 2500.0, 15_000.0),
            "12.5k"
        );
    }
}
