//! The log sink: one line per finished sweep or pair measurement (failed
//! requests summarised, never one line each); `sinks.log.rounds: false`
//! turns it off.

use std::collections::BTreeMap;

use std::sync::Arc;

use crate::config::{LogSink, Target};
use crate::sinks::sink::Sink;
use crate::stats::pair_report::PairReport;
use crate::stats::report::SweepReport;
use crate::stats::sample::Outcome;

/// Writes a line per finished round.
pub struct Log;

impl Log {
    /// The log sink for its settings; None when they turn it off.
    pub fn build(settings: &LogSink) -> Option<Arc<dyn Sink>> {
        settings.rounds.then(|| Arc::new(Log) as Arc<dyn Sink>)
    }
}

impl Sink for Log {
    fn sweep(&self, _target: &Target, report: &Arc<SweepReport>) {
        sweep(report);
    }

    fn pair(&self, report: &PairReport) {
        pair(report);
    }
}

/// One line per sweep.
fn sweep(report: &SweepReport) {
    let knees: Vec<String> = report
        .workloads
        .iter()
        .map(|w| format!("{}={}", w.workload, w.capacity.knee_concurrency))
        .collect();
    let mut failures: BTreeMap<&str, u64> = BTreeMap::new();
    let mut examples: BTreeMap<&str, &str> = BTreeMap::new();
    for l in report.workloads.iter().flat_map(|w| &w.levels) {
        for outcome in Outcome::ALL.into_iter().filter(|o| *o != Outcome::Ok) {
            let n = l.count(outcome);
            if n > 0 {
                *failures.entry(outcome.as_str()).or_default() += n;
            }
        }
        for (outcome, e) in &l.error_examples {
            examples.entry(outcome).or_insert(e);
        }
    }
    let failures: Vec<String> = failures.iter().map(|(o, n)| format!("{o}={n}")).collect();
    // One message per failed outcome says what went wrong; bounded by the
    // number of outcomes, whatever the number of requests.
    let examples: Vec<String> = examples.iter().map(|(o, e)| format!("{o}: {e}")).collect();
    if let Some(setup) = &report.setup_error {
        // Nothing was measured: the line says what to fix, not a capacity.
        tracing::warn!(
            target_name = %report.target,
            cause = setup.cause.as_str(),
            error = %setup.message,
            duration_s = format!("{:.1}", report.duration_seconds),
            "sweep stopped by a setup error"
        );
    } else if report.success {
        tracing::info!(
            target_name = %report.target,
            knee = %knees.join(","),
            duration_s = format!("{:.1}", report.duration_seconds),
            failed_requests = %failures.join(","),
            errors = %examples.join("; "),
            "sweep finished"
        );
    } else {
        tracing::warn!(
            target_name = %report.target,
            error = report.error.as_deref().unwrap_or(""),
            duration_s = format!("{:.1}", report.duration_seconds),
            failed_requests = %failures.join(","),
            errors = %examples.join("; "),
            "sweep failed"
        );
    }
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.3}", v * 1000.0))
}

/// One line per gateway pair measurement.
fn pair(r: &PairReport) {
    if r.success {
        tracing::info!(
            pair = %r.pair,
            latency_overhead_p50_ms = %ms(r.latency_overhead_seconds.p50),
            latency_overhead_p95_ms = %ms(r.latency_overhead_seconds.p95),
            ttft_overhead_p50_ms = %ms(r.ttft_overhead_seconds.p50),
            samples = r.latency_overhead_seconds.count,
            "gateway overhead measured"
        );
    } else {
        tracing::warn!(
            pair = %r.pair,
            error = r.error.as_deref().unwrap_or(""),
            samples = r.latency_overhead_seconds.count,
            "gateway overhead measurement failed"
        );
    }
}
