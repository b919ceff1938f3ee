//! The OTLP sink's instruments in memory: a histogram per instrument and
//! attribute set, the latest capacity gauges of each target and workload,
//! and a collection of all of them into one batch, cumulative or delta.
//! Pure: the sink's hooks write to it under a short lock, the exporter
//! collects from it. Its size is bounded by the configuration (targets,
//! workloads, levels, outcomes), never by the number of requests.

use std::collections::BTreeMap;

use super::gauges;
use super::semconv::{Attrs, HISTOGRAMS};
use crate::config::Temporality;

/// One histogram series.
#[derive(Debug, Clone, PartialEq)]
struct Series {
    /// Start of the counts (the sink's start, or the last delta export).
    start: u64,
    counts: Vec<u64>,
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
}

impl Series {
    fn new(buckets: usize, start: u64) -> Self {
        Series {
            start,
            counts: vec![0; buckets],
            count: 0,
            sum: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }

    fn add(&mut self, bounds: &[f64], v: f64) {
        // Upper bounds are inclusive in OTLP: bucket i holds (b[i-1], b[i]].
        let i = bounds.partition_point(|b| *b < v);
        self.counts[i] += 1;
        self.count += 1;
        self.sum += v;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }
}

/// A histogram point, as sent.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramPoint {
    /// Its attributes.
    pub attrs: Attrs,
    /// Start of the counts, Unix nanoseconds.
    pub start: u64,
    /// Count of every bucket (one more than the bounds).
    pub counts: Vec<u64>,
    /// Number of values.
    pub count: u64,
    /// Their sum.
    pub sum: f64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
}

/// A gauge point, as sent.
#[derive(Debug, Clone, PartialEq)]
pub struct GaugePoint {
    /// Its attributes.
    pub attrs: Attrs,
    /// When it was set, Unix nanoseconds.
    pub time: u64,
    /// Its value.
    pub value: f64,
}

/// Everything one export sends: the points of each histogram of
/// [`HISTOGRAMS`] and each gauge of [`gauges::specs`], by index.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// When it was collected, Unix nanoseconds.
    pub time: u64,
    /// Cumulative or delta.
    pub temporality: Temporality,
    /// Points of each histogram.
    pub histograms: Vec<Vec<HistogramPoint>>,
    /// Points of each gauge.
    pub gauges: Vec<Vec<GaugePoint>>,
}

impl Batch {
    /// Number of data points.
    pub fn points(&self) -> usize {
        self.histograms.iter().map(Vec::len).sum::<usize>()
            + self.gauges.iter().map(Vec::len).sum::<usize>()
    }
}

/// The gauges of one target and workload, replaced as a whole.
type RoundGauges = Vec<gauges::Point>;

/// The instruments of one sink.
#[derive(Debug)]
pub struct Aggregator {
    /// When the sink started: every cumulative series counts from it.
    start: u64,
    histograms: BTreeMap<(usize, Attrs), Series>,
    /// By (target, workload): the gauges of its latest round, and when.
    gauges: BTreeMap<(String, String), (u64, RoundGauges)>,
}

impl Aggregator {
    /// Empty, counting from `start` (Unix nanoseconds).
    pub fn new(start: u64) -> Self {
        Aggregator {
            start,
            histograms: BTreeMap::new(),
            gauges: BTreeMap::new(),
        }
    }

    /// Adds `value` to histogram `instrument` under `attrs`.
    pub fn record(&mut self, instrument: usize, attrs: Attrs, value: f64) {
        let Some(spec) = HISTOGRAMS.get(instrument) else {
            return;
        };
        if !value.is_finite() {
            return;
        }
        let start = self.start;
        self.histograms
            .entry((instrument, attrs))
            .or_insert_with(|| Series::new(spec.bounds.len() + 1, start))
            .add(spec.bounds, value);
    }

    /// Replaces the gauges of `target`'s `workload` with `points`, set at `time`.
    pub fn set_round(&mut self, target: &str, workload: &str, time: u64, points: RoundGauges) {
        self.gauges
            .insert((target.to_string(), workload.to_string()), (time, points));
    }

    /// Drops every series of `target` (its attribute `llmprobe.target`).
    pub fn forget(&mut self, target: &str) {
        let of_target = |attrs: &Attrs| {
            attrs.iter().any(|(k, v)| {
                *k == super::semconv::key::TARGET
                    && *v == super::semconv::Value::Str(target.to_string())
            })
        };
        self.histograms.retain(|(_, attrs), _| !of_target(attrs));
        self.gauges.retain(|(t, _), _| t != target);
    }

    /// Every point at `now`; with `Delta`, the histograms count only what
    /// was added since the previous collection (series with nothing new
    /// are left out) and start again from zero.
    pub fn collect(&mut self, temporality: Temporality, now: u64) -> Batch {
        let mut histograms = vec![Vec::new(); HISTOGRAMS.len()];
        for ((instrument, attrs), s) in self.histograms.iter_mut() {
            if temporality == Temporality::Delta && s.count == 0 {
                continue;
            }
            histograms[*instrument].push(HistogramPoint {
                attrs: attrs.clone(),
                start: s.start,
                counts: s.counts.clone(),
                count: s.count,
                sum: s.sum,
                min: s.min,
                max: s.max,
            });
            if temporality == Temporality::Delta {
                *s = Series::new(s.counts.len(), now);
            }
        }
        let mut gauges = vec![Vec::new(); gauges::specs().len()];
        for (time, points) in self.gauges.values() {
            for (gauge, attrs, value) in points {
                if let Some(out) = gauges.get_mut(*gauge) {
                    out.push(GaugePoint {
                        attrs: attrs.clone(),
                        time: *time,
                        value: *value,
                    });
                }
            }
        }
        Batch {
            time: now,
            temporality,
            histograms,
            gauges,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::semconv::{key, Value};
    use super::*;

    fn attrs(target: &str) -> Attrs {
        vec![(key::TARGET, Value::Str(target.into()))]
    }

    #[test]
    fn values_fall_in_inclusive_upper_buckets() {
        let mut a = Aggregator::new(1);
        for v in [0.005, 0.01, 0.011, 100.0] {
            a.record(0, attrs("t"), v);
        }
        let b = a.collect(Temporality::Cumulative, 2);
        let p = &b.histograms[0][0];
        assert_eq!(p.counts.len(), 15);
        assert_eq!((p.counts[0], p.counts[1], p.counts[14]), (2, 1, 1));
        assert_eq!((p.count, p.min, p.max, p.start), (4, 0.005, 100.0, 1));
    }

    #[test]
    fn cumulative_keeps_counting_and_delta_starts_again() {
        let mut a = Aggregator::new(1);
        a.record(0, attrs("t"), 1.0);
        assert_eq!(
            a.collect(Temporality::Cumulative, 2).histograms[0][0].count,
            1
        );
        a.record(0, attrs("t"), 1.0);
        assert_eq!(
            a.collect(Temporality::Cumulative, 3).histograms[0][0].count,
            2
        );

        let mut d = Aggregator::new(1);
        d.record(0, attrs("t"), 1.0);
        d.record(0, attrs("t"), 2.0);
        let first = d.collect(Temporality::Delta, 5);
        assert_eq!(
            (first.histograms[0][0].count, first.histograms[0][0].start),
            (2, 1)
        );
        assert_eq!(d.collect(Temporality::Delta, 6).points(), 0);
        d.record(0, attrs("t"), 3.0);
        // Counted since the last point sent: nothing came in between.
        let third = d.collect(Temporality::Delta, 7);
        assert_eq!(
            (third.histograms[0][0].count, third.histograms[0][0].start),
            (1, 5)
        );
    }

    #[test]
    fn a_round_replaces_its_gauges_and_a_target_is_forgotten_whole() {
        let mut a = Aggregator::new(1);
        a.set_round(
            "t",
            "w",
            5,
            vec![(0, attrs("t"), 8.0), (4, attrs("t"), 1.0)],
        );
        a.set_round("t", "w", 6, vec![(0, attrs("t"), 4.0)]);
        a.set_round("u", "w", 6, vec![(0, attrs("u"), 2.0)]);
        a.record(1, attrs("t"), 3.0);
        let b = a.collect(Temporality::Cumulative, 7);
        assert_eq!(b.gauges[0].len(), 2);
        assert_eq!(b.gauges[4].len(), 0);
        assert_eq!(b.gauges[0][0].value, 4.0);
        a.forget("t");
        let b = a.collect(Temporality::Cumulative, 8);
        assert_eq!(b.points(), 1);
        assert_eq!(b.gauges[0][0].value, 2.0);
    }
}
