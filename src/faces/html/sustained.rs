//! The sustained rate in the HTML report: the headline, a chart of each
//! step's p95 scheduled latency and shed ratio against the offered rate
//! (with the SLO's limits), and the steps' table.

use std::fmt::Write;

use super::escape::escape;
use super::settings::TargetSettings;
use crate::faces::sustained::{headline, step_rows, STEP_HEAD};
use crate::stats::report::WorkloadReport;
use crate::stats::sustained::{StepResult, Sustained};

/// The block for a workload's sustained rate; empty when it has none.
pub fn block(w: &WorkloadReport, settings: Option<&TargetSettings>) -> String {
    let Some(s) = &w.capacity.sustained else {
        return String::new();
    };
    let mut out = String::from("<div class=\"sustained\">\n");
    let _ = writeln!(
        out,
        "<h3>Sustained rate (open loop)</h3>\n<p>{}</p>",
        escape(&headline(s))
    );
    if s.is_fresh() && !s.steps.is_empty() {
        out.push_str("<div class=\"charts\">\n");
        let p95_limit = settings.map(|t| t.slo_p95_latency_seconds);
        let shed_limit = settings.map(|t| t.max_shed_ratio);
        let _ = writeln!(
            out,
            "<figure>{}</figure>",
            scatter(
                "p95 scheduled latency vs offered rate",
                "s",
                s,
                |st| st.scheduled_latency_seconds.p95,
                p95_limit
            )
        );
        let _ = writeln!(
            out,
            "<figure>{}</figure>",
            scatter(
                "shed ratio vs offered rate",
                "",
                s,
                |st| Some(st.shed_ratio),
                shed_limit
            )
        );
        out.push_str("</div>\n");
        out.push_str("<div class=\"scroll\"><table class=\"steps\">\n<thead><tr><th>step</th>");
        for h in STEP_HEAD {
            let _ = write!(out, "<th>{}</th>", escape(h));
        }
        out.push_str("</tr></thead>\n<tbody>\n");
        for (i, row) in step_rows(s).iter().enumerate() {
            let _ = write!(out, "<tr><td>{}</td>", i + 1);
            for cell in row {
                let _ = write!(out, "<td>{}</td>", escape(cell));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody>\n</table></div>\n");
    }
    out.push_str("</div>\n");
    out
}

const W: f64 = 360.0;
const H: f64 = 220.0;
const PAD: f64 = 44.0;

fn color(r: StepResult) -> &'static str {
    match r {
        StepResult::Pass => "#2a9d4b",
        StepResult::Break => "#d1495b",
        StepResult::Undecided => "#e09f3e",
        StepResult::NotMeasured => "#8a8a8a",
    }
}

/// A scatter of one value per step against the offered rate, with the
/// limit as a dashed rule; every point carries its value in a title.
fn scatter(
    title: &str,
    unit: &str,
    s: &Sustained,
    value: impl Fn(&crate::stats::sustained::RateStep) -> Option<f64>,
    limit: Option<f64>,
) -> String {
    let points: Vec<(f64, f64, StepResult)> = s
        .steps
        .iter()
        .filter_map(|st| Some((st.offered_requests_per_second, value(st)?, st.result)))
        .filter(|(x, y, _)| x.is_finite() && y.is_finite())
        .collect();
    let x_hi = points.iter().map(|p| p.0).fold(0.0f64, f64::max) * 1.1;
    let y_hi = points
        .iter()
        .map(|p| p.1)
        .chain(limit)
        .fold(0.0f64, f64::max)
        * 1.15;
    let (x_hi, y_hi) = (x_hi.max(1e-9), y_hi.max(1e-9));
    let px = |x: f64| PAD + x / x_hi * (W - PAD - 10.0);
    let py = |y: f64| H - PAD + 10.0 - y / y_hi * (H - PAD - 10.0);
    let mut svg = format!(
        "<svg class=\"sustained-chart\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"{t}\">\
         <text x=\"{x}\" y=\"14\" text-anchor=\"middle\" font-size=\"12\">{t}</text>",
        t = escape(title),
        x = W / 2.0
    );
    let _ = write!(
        svg,
        "<line x1=\"{PAD}\" y1=\"{y0}\" x2=\"{x1}\" y2=\"{y0}\" stroke=\"#999\"/>\
         <line x1=\"{PAD}\" y1=\"20\" x2=\"{PAD}\" y2=\"{y0}\" stroke=\"#999\"/>\
         <text x=\"{xm}\" y=\"{yl}\" text-anchor=\"middle\" font-size=\"10\">offered req/s (0 to {xh:.1})</text>\
         <text x=\"4\" y=\"30\" font-size=\"10\">{yh:.3}{unit}</text>",
        y0 = py(0.0),
        x1 = W - 10.0,
        xm = W / 2.0,
        yl = H - 8.0,
        xh = x_hi,
        yh = y_hi,
        unit = escape(unit),
    );
    if let Some(l) = limit {
        let _ = write!(
            svg,
            "<line class=\"limit\" x1=\"{PAD}\" y1=\"{y}\" x2=\"{x1}\" y2=\"{y}\" stroke=\"#d1495b\" stroke-dasharray=\"4 3\"/>\
             <text x=\"{x1}\" y=\"{ty}\" text-anchor=\"end\" font-size=\"10\">SLO {l}{unit}</text>",
            y = py(l),
            ty = py(l) - 3.0,
            x1 = W - 10.0,
            unit = escape(unit),
        );
    }
    if let Some(r) = s.requests_per_second.filter(|r| *r > 0.0) {
        let _ = write!(
            svg,
            "<line class=\"sustained-rule\" x1=\"{x}\" y1=\"20\" x2=\"{x}\" y2=\"{y0}\" stroke=\"#2a9d4b\" stroke-dasharray=\"2 2\"/>",
            x = px(r),
            y0 = py(0.0)
        );
    }
    for (x, y, r) in points {
        let _ = write!(
            svg,
            "<circle class=\"step\" cx=\"{cx:.1}\" cy=\"{cy:.1}\" r=\"4\" fill=\"{c}\"><title>{x:.2} req/s: {y:.4}{u} ({r})</title></circle>",
            cx = px(x),
            cy = py(y),
            c = color(r),
            u = escape(unit),
            r = r.as_str(),
        );
    }
    svg.push_str("</svg>");
    svg
}
