//! The charts of one workload against concurrency: one per quantity of the
//! list ([`Quantity::ALL`]: its title, its unit, its percentiles), then the
//! shed and error ratios and, when it told, the server's own view; each with
//! the knee, the recommendation, where a level stopped early, and the band
//! of levels over the SLO.

use super::charts::{LineChart, Rule, RuleKind, Series, Unit};
use super::settings::TargetSettings;
use crate::faces::text;
use crate::stats::quantity::{self, Percentile, Quantity, Reading};
use crate::stats::report::{LevelSummary, WorkloadReport};
use crate::stats::server::ServerSignals;

/// Series colours (fixed here, never from input).
const BLUE: &str = "#2563eb";
const TEAL: &str = "#0891b2";
const ORANGE: &str = "#ea580c";
const INDIGO: &str = "#4f46e5";
const AMBER: &str = "#d97706";
const PINK: &str = "#db2777";

/// A percentile's colour, the same on every chart.
fn colour(p: Percentile) -> &'static str {
    match p {
        Percentile::P50 => TEAL,
        Percentile::P95 => ORANGE,
        Percentile::P99 => PINK,
    }
}

/// How a chart writes a quantity's unit.
fn unit(u: quantity::Unit) -> Unit {
    match u {
        quantity::Unit::Seconds => Unit::Seconds,
        quantity::Unit::TokensPerSecond => Unit::TokensPerSecond,
        quantity::Unit::Requests => Unit::Requests,
    }
}

fn series(
    key: &str,
    label: &str,
    color: &'static str,
    dashed: bool,
    levels: &[LevelSummary],
    value: impl Fn(&LevelSummary) -> Option<f64>,
) -> Series {
    Series {
        key: key.to_string(),
        label: label.to_string(),
        color,
        dashed,
        points: levels
            .iter()
            .map(|l| (f64::from(l.concurrency), value(l)))
            .collect(),
    }
}

/// The lines of `q`'s chart: one per percentile it draws (the first
/// solid), or its one figure.
fn quantity_series(q: Quantity, levels: &[LevelSummary]) -> Vec<Series> {
    let spec = q.spec();
    if !q.has_percentiles() {
        let value = |l: &LevelSummary| match q.read(l) {
            Reading::Value(v) => v,
            Reading::Percentiles(_) => None,
        };
        return vec![series(
            spec.series,
            spec.heading,
            BLUE,
            false,
            levels,
            value,
        )];
    }
    spec.chart
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            let key = format!("{}_p{}", spec.series, p.as_str());
            let label = format!("p{}", p.as_str());
            let value = move |l: &LevelSummary| match q.read(l) {
                Reading::Percentiles(ps) => p.of(ps),
                Reading::Value(_) => None,
            };
            series(&key, &label, colour(p), i > 0, levels, value)
        })
        .collect()
}

/// The vertical rules every chart of the workload carries: the knee, the
/// recommendation, and each level stopped early (a level that sent only
/// part of its requests: its throughput is left out, not a collapse).
fn x_rules(w: &WorkloadReport) -> Vec<Rule> {
    let c = &w.capacity;
    let mut rules = Vec::new();
    if c.knee_concurrency > 0 {
        rules.push(Rule {
            at: f64::from(c.knee_concurrency),
            label: format!("knee {}", c.knee_concurrency),
            kind: RuleKind::Knee,
        });
    }
    if c.recommended_max_in_flight > 0 {
        rules.push(Rule {
            at: f64::from(c.recommended_max_in_flight),
            label: format!("recommended {}", c.recommended_max_in_flight),
            kind: RuleKind::Recommended,
        });
    }
    for s in w.levels.iter().filter(|l| l.stopped_early.is_some()) {
        rules.push(Rule {
            at: f64::from(s.concurrency),
            label: format!("stopped early at {}", s.concurrency),
            kind: RuleKind::Stopped,
        });
    }
    rules
}

fn slo_rule(at: f64, label: String) -> Rule {
    Rule {
        at,
        label,
        kind: RuleKind::Slo,
    }
}

/// The SLO's ratio limits: one rule when shed and errors share one.
fn ratio_rules(settings: Option<&TargetSettings>) -> Vec<Rule> {
    match settings {
        None => Vec::new(),
        Some(s) if s.max_shed_ratio == s.max_error_ratio => vec![slo_rule(
            s.max_shed_ratio,
            format!("SLO {}", Unit::Ratio.format(s.max_shed_ratio)),
        )],
        Some(s) => vec![
            slo_rule(
                s.max_shed_ratio,
                format!("shed SLO {}", Unit::Ratio.format(s.max_shed_ratio)),
            ),
            slo_rule(
                s.max_error_ratio,
                format!("error SLO {}", Unit::Ratio.format(s.max_error_ratio)),
            ),
        ],
    }
}

/// The charts of a workload: one per quantity of the list (a reasoning
/// model's answer TTFT only when it reasoned; a quantity without a value at
/// any level, such as connect time over warmed connections, left out), then
/// the outcome ratios and the server's own gauges.
pub fn charts(w: &WorkloadReport, settings: Option<&TargetSettings>) -> Vec<LineChart> {
    let l = &w.levels;
    let x_rules = x_rules(w);
    let over_slo_from = l
        .iter()
        .find(|l| !l.within_slo)
        .map(|l| f64::from(l.concurrency));
    let chart = |title: &str, unit: Unit, series: Vec<Series>, y_rules: Vec<Rule>| LineChart {
        title: title.to_string(),
        unit,
        series,
        x_rules: x_rules.clone(),
        y_rules,
        over_slo_from,
    };
    let latency_rule = |q: Quantity| -> Vec<Rule> {
        let s = settings.filter(|_| q.spec().slo_rule);
        s.map(|s| {
            slo_rule(
                s.slo_p95_latency_seconds,
                format!("SLO {}", Unit::Seconds.format(s.slo_p95_latency_seconds)),
            )
        })
        .into_iter()
        .collect()
    };
    let reasoned = text::reasons(w);
    let mut charts: Vec<LineChart> = Quantity::ALL
        .into_iter()
        .filter(|q| reasoned || !q.spec().reasoning_only)
        .map(|q| (q, quantity_series(q, l)))
        .filter(|(_, s)| s.iter().any(|s| s.points.iter().any(|p| p.1.is_some())))
        .map(|(q, series)| {
            let spec = q.spec();
            chart(spec.title, unit(spec.unit), series, latency_rule(q))
        })
        .collect();
    charts.push(chart(
        "Shed and error ratio",
        Unit::Ratio,
        vec![
            series("shed_ratio", "shed", AMBER, false, l, |l| {
                Some(l.shed_ratio)
            }),
            series("error_ratio", "errors", PINK, true, l, |l| {
                Some(l.error_ratio)
            }),
        ],
        ratio_rules(settings),
    ));
    charts.extend(server_charts(l, chart));
    charts
}

/// One line of the server's chart: key, legend, colour, dashed, reader.
type Gauge = (
    &'static str,
    &'static str,
    &'static str,
    bool,
    fn(&ServerSignals) -> Option<f64>,
);

/// The server's own view, beside the client's: what it ran and queued, and
/// how full its KV cache was, at each level (none when it told nothing).
fn server_charts(
    l: &[LevelSummary],
    chart: impl Fn(&str, Unit, Vec<Series>, Vec<Rule>) -> LineChart,
) -> Vec<LineChart> {
    let server = |f: fn(&ServerSignals) -> Option<f64>| {
        move |l: &LevelSummary| l.server.as_ref().filter(|s| s.readings > 0).and_then(f)
    };
    let mut charts = Vec::new();
    if l.iter()
        .any(|l| server(|s| s.running.or(s.waiting).map(|g| g.max))(l).is_some())
    {
        let gauges: [Gauge; 4] = [
            ("server_running_max", "running max", BLUE, false, |s| {
                s.running.map(|g| g.max)
            }),
            ("server_running_mean", "running mean", TEAL, true, |s| {
                s.running.map(|g| g.mean)
            }),
            ("server_waiting_max", "waiting max", ORANGE, false, |s| {
                s.waiting.map(|g| g.max)
            }),
            ("server_waiting_mean", "waiting mean", AMBER, true, |s| {
                s.waiting.map(|g| g.mean)
            }),
        ];
        let lines = gauges
            .into_iter()
            .map(|(key, label, color, dashed, f)| series(key, label, color, dashed, l, server(f)))
            .collect();
        charts.push(chart(
            "Server: requests running and waiting",
            Unit::Requests,
            lines,
            Vec::new(),
        ));
    }
    if l.iter()
        .any(|l| server(|s| s.kv_cache_usage_max)(l).is_some())
    {
        charts.push(chart(
            "Server: KV-cache usage",
            Unit::Ratio,
            vec![series(
                "server_kv_cache_max",
                "max",
                INDIGO,
                false,
                l,
                server(|s| s.kv_cache_usage_max),
            )],
            vec![slo_rule(
                crate::stats::limit::KV_CACHE_FULL,
                "full".to_string(),
            )],
        ));
    }
    charts
}
