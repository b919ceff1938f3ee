//! The `/metrics` sink: every measured request into the running totals, a
//! finished round's results into [`Metrics`]. The one writer of results to
//! `/metrics`; the daemon's own state (sweeps postponed, requests in
//! flight, reloads, the fleet) is written where it changes.

use std::sync::Arc;

use crate::config::{Schedule, Target, Workload};
use crate::metrics::{Metrics, TargetLimits};
use crate::sinks::sink::Sink;
use crate::stats::pair_report::PairReport;
use crate::stats::probe::ProbeEvent;
use crate::stats::report::SweepReport;
use crate::stats::sample::Sample;

/// Exports results on `/metrics`.
pub struct Prometheus(pub Arc<Metrics>);

impl Sink for Prometheus {
    fn target_configured(&self, target: &Arc<Target>, schedule: &Schedule) {
        // Each measured target's SLO and interval, for alert rules.
        self.0
            .set_target_limits(&target.name, &limits(target, schedule));
        let probes = target.probe.interval.map(|d| d.as_secs_f64());
        self.0
            .set_probe_interval(&target.name, &target.model, probes);
    }

    fn target_started(&self, target: &Target) {
        // The configured output-limit field; found at the first sweep otherwise.
        let field = target.max_tokens_field.map_or("", |f| f.as_str());
        self.0.describe_target(target, &Default::default(), field);
        self.0.target_started(&target.name);
    }

    fn request(&self, target: &Target, workload: &Workload, sample: &Sample, _: Option<u32>) {
        self.0
            .observe_request(&target.name, &target.model, &workload.name, sample);
    }

    fn probe(&self, target: &Target, event: &ProbeEvent) {
        self.0.observe_probe(&target.name, &target.model, event);
    }

    fn sweep(&self, target: &Target, report: &Arc<SweepReport>) {
        self.0
            .describe_target(target, &report.setup, &report.output_limit.field);
        self.0.publish_sweep(report);
    }

    fn pair(&self, report: &PairReport) {
        self.0.publish_pair(report);
    }

    fn forget_target(&self, name: &str) {
        self.0.forget_target(name);
    }

    fn forget_pair(&self, name: &str) {
        self.0.forget_pair(name);
    }
}

fn limits(target: &Target, schedule: &Schedule) -> TargetLimits {
    TargetLimits {
        p95_latency: target.slo.p95_latency,
        max_shed_ratio: target.slo.max_shed_ratio,
        max_error_ratio: target.slo.max_error_ratio,
        interval: schedule.interval,
    }
}
