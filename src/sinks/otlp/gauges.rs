//! llmprobe's own figures as OTLP gauges, under `llmprobe.` (no convention
//! covers them): each workload's capacity (knee, recommended
//! `max_in_flight`, throughput, sustained rate, limit) and every quantity
//! a level reports, one gauge per entry of [`Quantity::ALL`] (a new
//! quantity is exported here without an edit). Set from a finished
//! sweep, as `/metrics`'s results are. Pure.

use std::borrow::Cow;
use std::sync::OnceLock;

use super::semconv::{key, Attrs, Value};
use crate::stats::quantity::{Percentile, Quantity, Reading, Unit};
use crate::stats::report::{LevelSummary, SweepReport, WorkloadReport};

/// One gauge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GaugeSpec {
    /// Its name.
    pub name: Cow<'static, str>,
    /// Its UCUM unit.
    pub unit: &'static str,
    /// Its description.
    pub description: &'static str,
}

const fn fixed(name: &'static str, unit: &'static str, description: &'static str) -> GaugeSpec {
    GaugeSpec {
        name: Cow::Borrowed(name),
        unit,
        description,
    }
}

/// The capacity gauges, in [`specs`]'s order.
const CAPACITY: [GaugeSpec; 5] = [
    fixed(
        "llmprobe.capacity.knee_concurrency",
        "{request}",
        "Highest concurrency within the SLO with every lower level within it too (0 when even level 1 fails).",
    ),
    fixed(
        "llmprobe.capacity.recommended_max_in_flight",
        "{request}",
        "Recommended max_in_flight for the worker: floor(knee x headroom).",
    ),
    fixed(
        "llmprobe.capacity.throughput",
        "{token}/s",
        "Aggregate output tokens per second at the knee (0 when there is no knee).",
    ),
    fixed(
        "llmprobe.capacity.sustained_rate",
        "{request}/s",
        "Highest arrival rate at which the SLO held, from the open-loop search.",
    ),
    fixed(
        "llmprobe.capacity.limit",
        "1",
        "What binds at the knee (attribute llmprobe.limit); always 1.",
    ),
];
const KNEE: usize = 0;
const RECOMMENDED: usize = 1;
const THROUGHPUT: usize = 2;
const SUSTAINED: usize = 3;
const LIMIT: usize = 4;

/// A quantity's gauge name: `llmprobe.sweep.` and its label (`ttft`...).
pub fn quantity_name(q: Quantity) -> String {
    format!("llmprobe.sweep.{}", q.spec().label)
}

/// The UCUM unit of a quantity's values.
fn unit(u: Unit) -> &'static str {
    match u {
        Unit::Seconds => "s",
        Unit::TokensPerSecond => "{token}/s",
        Unit::Requests => "{request}",
    }
}

/// Every gauge, in export order: the capacity's, then one per quantity of
/// [`Quantity::ALL`]; an index in it names one.
pub fn specs() -> &'static [GaugeSpec] {
    static SPECS: OnceLock<Vec<GaugeSpec>> = OnceLock::new();
    SPECS.get_or_init(|| {
        let quantities = Quantity::ALL.into_iter().map(|q| GaugeSpec {
            name: Cow::Owned(quantity_name(q)),
            unit: unit(q.spec().unit),
            description: q.spec().help,
        });
        CAPACITY.into_iter().chain(quantities).collect()
    })
}

/// One gauge point: (index in [`specs`], attributes, value).
pub type Point = (usize, Attrs, f64);

/// The gauges of one workload of a completed sweep: its capacity, then
/// every quantity of every level it reports (those it ran and those carried
/// from earlier sweeps, as `/metrics` has them).
pub fn round(report: &SweepReport, w: &WorkloadReport) -> Vec<Point> {
    let attrs: Attrs = vec![
        (key::MODEL, Value::Str(report.model.clone())),
        (key::TARGET, Value::Str(report.target.clone())),
        (key::WORKLOAD, Value::Str(w.workload.clone())),
    ];
    let c = &w.capacity;
    let mut out = vec![
        (KNEE, attrs.clone(), f64::from(c.knee_concurrency)),
        (
            RECOMMENDED,
            attrs.clone(),
            f64::from(c.recommended_max_in_flight),
        ),
        (THROUGHPUT, attrs.clone(), c.throughput_tokens_per_second),
    ];
    if let Some(rate) = c.sustained.as_ref().and_then(|s| s.requests_per_second) {
        out.push((SUSTAINED, attrs.clone(), rate));
    }
    if let Some(limit) = c.limit {
        let mut a = attrs.clone();
        a.push((key::LIMIT, Value::Str(limit.as_str().into())));
        out.push((LIMIT, a, 1.0));
    }
    for level in w.levels.iter().chain(&w.carried_levels) {
        out.extend(level_points(&attrs, level));
    }
    out
}

/// Every quantity of one level, a point per percentile for those read as
/// percentiles (a percentile without samples is left out, as on `/metrics`).
fn level_points(workload: &Attrs, level: &LevelSummary) -> Vec<Point> {
    let mut attrs = workload.clone();
    attrs.push((key::CONCURRENCY, Value::Int(i64::from(level.concurrency))));
    let mut out = Vec::new();
    for (i, q) in Quantity::ALL.into_iter().enumerate() {
        let gauge = CAPACITY.len() + i;
        match q.read(level) {
            Reading::Percentiles(p) => {
                for percentile in Percentile::ALL {
                    if let Some(v) = percentile.of(p) {
                        let mut a = attrs.clone();
                        a.push((key::PERCENTILE, Value::Str(percentile.as_str().into())));
                        out.push((gauge, a, v));
                    }
                }
            }
            Reading::Value(Some(v)) => out.push((gauge, attrs.clone(), v)),
            Reading::Value(None) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_quantity_has_its_gauge_after_the_capacity() {
        let specs = specs();
        assert_eq!(specs.len(), CAPACITY.len() + Quantity::ALL.len());
        assert_eq!(specs[CAPACITY.len()].name, quantity_name(Quantity::ALL[0]));
        assert_eq!(quantity_name(Quantity::Ttft), "llmprobe.sweep.ttft");
        let names: std::collections::BTreeSet<_> = specs.iter().map(|s| &s.name).collect();
        assert_eq!(names.len(), specs.len(), "names are unique");
    }
}
