//! A batch as an OTLP `ExportMetricsServiceRequest` in the protobuf wire
//! format, written by hand: the few messages it needs are varints,
//! length-delimited fields and 64-bit fixed values, and a code generator
//! (prost and its build step) would cost more to build than this file.
//! Field numbers are those of opentelemetry-proto v1.10.0
//! (`collector/metrics/v1/metrics_service.proto`, `metrics/v1/metrics.proto`,
//! `common/v1/common.proto`, `resource/v1/resource.proto`). Pure.

use super::aggregate::{Batch, GaugePoint, HistogramPoint};
use super::gauges;
use super::semconv::{Attrs, Value, HISTOGRAMS, SCHEMA_URL};
use crate::config::Temporality;

/// Protobuf wire types.
const VARINT: u32 = 0;
const I64: u32 = 1;
const LEN: u32 = 2;

/// A message being written.
#[derive(Default)]
struct Message(Vec<u8>);

impl Message {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn tag(&mut self, field: u32, wire: u32) {
        self.varint(u64::from(field << 3 | wire));
    }

    fn uint(&mut self, field: u32, v: u64) {
        self.tag(field, VARINT);
        self.varint(v);
    }

    fn int(&mut self, field: u32, v: i64) {
        // int64: two's complement, ten bytes when negative.
        self.uint(field, v as u64);
    }

    fn fixed64(&mut self, field: u32, v: u64) {
        self.tag(field, I64);
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn double(&mut self, field: u32, v: f64) {
        self.fixed64(field, v.to_bits());
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.tag(field, LEN);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn string(&mut self, field: u32, s: &str) {
        self.bytes(field, s.as_bytes());
    }

    fn message(&mut self, field: u32, write: impl FnOnce(&mut Message)) {
        let mut inner = Message::default();
        write(&mut inner);
        self.bytes(field, &inner.0);
    }

    /// A packed `repeated fixed64` / `repeated double`.
    fn packed64(&mut self, field: u32, values: impl ExactSizeIterator<Item = u64>) {
        self.tag(field, LEN);
        self.varint(values.len() as u64 * 8);
        for v in values {
            self.0.extend_from_slice(&v.to_le_bytes());
        }
    }
}

/// `KeyValue` fields (`key` 1, `value` 2) and `AnyValue`'s
/// (`string_value` 1, `int_value` 3).
fn attribute(m: &mut Message, field: u32, key: &str, value: &Value) {
    m.message(field, |kv| {
        kv.string(1, key);
        kv.message(2, |any| match value {
            Value::Str(s) => any.string(1, s),
            Value::Int(i) => any.int(3, *i),
        });
    });
}

fn attributes(m: &mut Message, field: u32, attrs: &Attrs) {
    for (k, v) in attrs {
        attribute(m, field, k, v);
    }
}

/// `AggregationTemporality`.
fn temporality(t: Temporality) -> u64 {
    match t {
        Temporality::Delta => 1,
        Temporality::Cumulative => 2,
    }
}

/// `HistogramDataPoint`: attributes 9, start 2, time 3, count 4, sum 5,
/// bucket_counts 6, explicit_bounds 7, min 11, max 12.
fn histogram_point(m: &mut Message, p: &HistogramPoint, bounds: &[f64], time: u64) {
    attributes(m, 9, &p.attrs);
    m.fixed64(2, p.start);
    m.fixed64(3, time);
    m.fixed64(4, p.count);
    m.double(5, p.sum);
    m.packed64(6, p.counts.iter().copied());
    m.packed64(7, bounds.iter().map(|b| b.to_bits()));
    if p.count > 0 {
        m.double(11, p.min);
        m.double(12, p.max);
    }
}

/// `NumberDataPoint`: attributes 7, time 3, as_double 4.
fn gauge_point(m: &mut Message, p: &GaugePoint) {
    attributes(m, 7, &p.attrs);
    m.fixed64(3, p.time);
    m.double(4, p.value);
}

/// `Metric`: name 1, description 2, unit 3, gauge 5 / histogram 9.
fn metrics(scope: &mut Message, batch: &Batch) {
    for (spec, points) in HISTOGRAMS.iter().zip(&batch.histograms) {
        if points.is_empty() {
            continue;
        }
        scope.message(2, |metric| {
            metric.string(1, spec.name);
            metric.string(2, spec.description);
            metric.string(3, spec.unit);
            metric.message(9, |h| {
                for p in points {
                    h.message(1, |dp| histogram_point(dp, p, spec.bounds, batch.time));
                }
                h.uint(2, temporality(batch.temporality));
            });
        });
    }
    for (spec, points) in gauges::specs().iter().zip(&batch.gauges) {
        if points.is_empty() {
            continue;
        }
        scope.message(2, |metric| {
            metric.string(1, &spec.name);
            metric.string(2, spec.description);
            metric.string(3, spec.unit);
            metric.message(5, |g| {
                for p in points {
                    g.message(1, |dp| gauge_point(dp, p));
                }
            });
        });
    }
}

/// The request body: one `ResourceMetrics` (the resource: `service.name`
/// llmprobe and its version) holding one `ScopeMetrics` (the scope:
/// llmprobe, with the conventions' schema URL).
pub fn export_request(batch: &Batch) -> Vec<u8> {
    let version = env!("CARGO_PKG_VERSION");
    let mut request = Message::default();
    request.message(1, |rm| {
        rm.message(1, |resource| {
            attribute(resource, 1, "service.name", &Value::Str("llmprobe".into()));
            attribute(resource, 1, "service.version", &Value::Str(version.into()));
        });
        rm.message(2, |sm| {
            sm.message(1, |scope| {
                scope.string(1, "llmprobe");
                scope.string(2, version);
            });
            metrics(sm, batch);
            sm.string(3, SCHEMA_URL);
        });
    });
    request.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_negative_ints_are_written_as_protobuf_does() {
        let mut m = Message::default();
        m.varint(300);
        assert_eq!(m.0, [0xac, 0x02]);
        let mut m = Message::default();
        m.int(3, -1);
        assert_eq!(m.0.len(), 11);
        assert_eq!(m.0[0], 3 << 3);
        assert_eq!(m.0[10], 0x01);
    }

    #[test]
    fn a_packed_double_list_is_eight_bytes_each() {
        let mut m = Message::default();
        m.packed64(7, [1.0f64, 2.0].iter().map(|b| b.to_bits()));
        assert_eq!(m.0[0], 7 << 3 | 2);
        assert_eq!(m.0[1], 16);
        assert_eq!(&m.0[2..10], &1.0f64.to_le_bytes());
    }

    #[test]
    fn an_empty_batch_still_names_the_service() {
        let batch = Batch {
            time: 1,
            temporality: Temporality::Cumulative,
            histograms: vec![Vec::new(); HISTOGRAMS.len()],
            gauges: vec![Vec::new(); gauges::specs().len()],
        };
        let body = export_request(&batch);
        let text = String::from_utf8_lossy(&body);
        assert!(text.contains("service.name") && text.contains(SCHEMA_URL));
        assert!(!text.contains("gen_ai"));
    }
}
