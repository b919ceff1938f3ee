//! The OTLP sink (`sinks.otlp`): every measured request into the
//! OpenTelemetry GenAI client histograms, every completed sweep's capacity
//! and levels into `llmprobe.*` gauges, pushed to a collector over
//! OTLP/HTTP (protobuf) every interval. Its parts: [`semconv`] (the GenAI
//! conventions: names, attributes, what a request records), [`gauges`]
//! (llmprobe's own: capacity and every quantity of [`Quantity::ALL`] per
//! level, from a finished sweep), [`aggregate`] (the
//! instruments in memory), [`encode`] (the protobuf body), [`export`] (the
//! exporter task: queue, retries, drops).
//!
//! The hooks never wait: they add to the instruments under a lock held
//! for a few additions, and the exporter, a task of its own, does the
//! network. Dropping the sink (a reload that changed `sinks.otlp`, the
//! daemon's end) stops its exporter.

pub mod aggregate;
pub mod encode;
pub mod export;
pub mod gauges;
pub mod semconv;

use std::sync::{Arc, Mutex};

use tokio_util::sync::{CancellationToken, DropGuard};

use crate::config::{OtlpSink, Target, Workload};
use crate::metrics::Metrics;
use crate::sinks::sink::Sink;
use crate::stats::pair_report::PairReport;
#[cfg(doc)]
use crate::stats::quantity::Quantity;
use crate::stats::report::SweepReport;
use crate::stats::sample::Sample;
use aggregate::Aggregator;
use export::{now_nanos, Exporter};

/// Exports to an OpenTelemetry collector.
pub struct Otlp {
    aggregator: Arc<Mutex<Aggregator>>,
    /// Stops the exporter when the sink is dropped.
    _exporter: DropGuard,
}

impl Otlp {
    /// The OTLP sink for its settings, its exporter started on the
    /// current runtime; None when they turn it off (or, said in the log,
    /// when it cannot start: no runtime, a client that cannot be built).
    /// Its drops are counted in `metrics` (daemon state, not a result).
    pub fn build(settings: Option<&OtlpSink>, metrics: &Arc<Metrics>) -> Option<Arc<dyn Sink>> {
        let settings = settings?;
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::error!("OTLP sink not started: no runtime to export from");
            return None;
        };
        let aggregator = Arc::new(Mutex::new(Aggregator::new(now_nanos())));
        let exporter = match Exporter::new(settings, aggregator.clone(), metrics.clone()) {
            Ok(e) => e,
            Err(e) => {
                tracing::error!(error = %e, "OTLP sink not started");
                return None;
            }
        };
        metrics.otlp_started();
        let cancel = CancellationToken::new();
        runtime.spawn(exporter.run(cancel.clone()));
        tracing::info!(
            endpoint = %settings.endpoint,
            interval = %humantime::format_duration(settings.interval),
            semconv = semconv::SEMCONV_VERSION,
            "OTLP export on"
        );
        Some(Arc::new(Otlp {
            aggregator,
            _exporter: cancel.drop_guard(),
        }))
    }

    fn with(&self, f: impl FnOnce(&mut Aggregator)) {
        // A panic elsewhere while holding the lock leaves plain counts.
        f(&mut self.aggregator.lock().unwrap_or_else(|e| e.into_inner()));
    }
}

impl Sink for Otlp {
    fn request(
        &self,
        target: &Target,
        workload: &Workload,
        sample: &Sample,
        concurrency: Option<u32>,
    ) {
        // Built outside the lock: the hook holds it only to add.
        let attrs = semconv::request_attrs(target, workload, concurrency);
        let recordings = semconv::record(sample, &attrs);
        self.with(|a| {
            for (instrument, attrs, value) in recordings {
                a.record(instrument, attrs, value);
            }
        });
    }

    fn sweep(&self, target: &Target, report: &Arc<SweepReport>) {
        // A failed sweep leaves the last completed one's capacity, as
        // /metrics does.
        if !report.success {
            return;
        }
        let now = now_nanos();
        let rounds: Vec<_> = report
            .workloads
            .iter()
            .map(|w| (w.workload.clone(), gauges::round(report, w)))
            .collect();
        self.with(|a| {
            for (workload, points) in rounds {
                a.set_round(&target.name, &workload, now, points);
            }
        });
    }

    fn pair(&self, _report: &PairReport) {}

    fn forget_target(&self, name: &str) {
        self.with(|a| a.forget(name));
    }
}
