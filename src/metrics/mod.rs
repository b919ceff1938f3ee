//! Every Prometheus metric llmprobe exports, owned by one [`Metrics`]. This
//! is the only module that uses the `prometheus` crate (the daemon's
//! registry included), and every family's name, help and labels (a
//! contract with dashboards and alert rules) live in one place, [`names`]. Callers hand it plain data (reports, samples, the fleet's
//! counts), so the layers that gather that data never see Prometheus. Its
//! parts:
//! - [`names`]: every family's name, help and labels, and the label values
//!   metrics own;
//! - `running`: running totals over every measured request (histograms and
//!   counters, for `rate()` and `histogram_quantile()`);
//! - `results`: the latest sweep and pair results, as text per target
//!   written when a sweep ends;
//! - `exposition`: one scrape, written in chunks as the body is sent;
//! - `daemon`: the daemon's own state (sweeps counted, in flight, reloads);
//! - `bounds`: refused auth and reloads, abandoned discovery reads;
//! - `fleet`: target discovery and sharding;
//! - `config_info`: each measured target's SLO and interval;
//! - `probes`: the probes between sweeps (availability, TTFT, cost).
//! - `register`, `locks`: a counter made and registered in one step; lock
//!   access that survives a panicking writer.

mod bounds;
mod config_info;
mod daemon;
mod exposition;
mod fleet;
mod locks;
pub mod names;
mod pieces;
mod probes;
mod register;
mod results;
mod running;
#[cfg(test)]
mod tests;

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use prometheus::Registry;

use crate::config::Target;
use crate::stats::pair_report::PairReport;
use crate::stats::probe::ProbeEvent;
use crate::stats::report::{Setup, SweepReport};
use crate::stats::sample::Sample;
use bounds::Bounds;
use daemon::DaemonState;
pub use exposition::Exposition;
use exposition::{Gathered, Source};
use results::Results;
use running::RunningTotals;

use config_info::ConfigInfo;
pub use config_info::TargetLimits;
pub use daemon::InFlightGuard;
use fleet::FleetMetrics;
use probes::ProbeMetrics;

/// Content type of [`Metrics::encode`]'s output (text exposition format 0.0.4).
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Owns every metric handle of llmprobe; see the module comment.
pub struct Metrics {
    registry: Registry,
    running: RunningTotals,
    daemon: DaemonState,
    bounds: Bounds,
    results: Results,
    fleet: FleetMetrics,
    config_info: ConfigInfo,
    probes: ProbeMetrics,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// Current Unix time in seconds (0 if the clock is before 1970).
fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl Metrics {
    /// Creates every metric and registers it with `registry`.
    ///
    /// Build one per registry and keep it across reloads (a second one on the
    /// same registry fails with `AlreadyReg`); `forget_target` handles
    /// targets that a reload removed.
    ///
    /// The configuration counts as successfully loaded at construction time,
    /// because a `Metrics` is only built once a valid configuration is in hand.
    pub fn new(registry: &Registry) -> Result<Metrics, prometheus::Error> {
        let running = RunningTotals::new();
        let daemon = DaemonState::new(registry, now_unix())?;
        results::check_names()?;

        #[cfg(target_os = "linux")]
        registry.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))?;

        Ok(Metrics {
            registry: registry.clone(),
            running,
            daemon,
            bounds: Bounds::new(registry)?,
            results: Results::default(),
            fleet: FleetMetrics::new(registry)?,
            config_info: ConfigInfo::new(registry)?,
            probes: ProbeMetrics::new(registry)?,
        })
    }

    /// [`Metrics::new`] on a registry of its own: the daemon's.
    pub fn on_own_registry() -> Result<Metrics, prometheus::Error> {
        Metrics::new(&Registry::new())
    }

    /// Adds one measured request to the running totals.
    ///
    /// Every request counts in `llmprobe_requests_total` under its outcome. Only
    /// requests with outcome `ok` feed the histograms and the token counters,
    /// matching the sweep's own definitions (throughput counts completed
    /// requests only); a failed request has no meaningful latency.
    pub fn observe_request(&self, target: &str, model: &str, workload: &str, sample: &Sample) {
        self.running.observe(target, model, workload, sample);
    }

    /// Publishes the outcome of a finished sweep and counts it in
    /// `llmprobe_sweeps_total`.
    ///
    /// A successful report replaces every sweep, capacity and recommendation
    /// series of its target as a whole. A failed one only sets
    /// `llmprobe_sweep_success` to 0 and updates the duration: the results of
    /// the last completed sweep stay, with their completion timestamp, so
    /// dashboards keep the last known capacity while alerts see the failure.
    /// Requests its levels did not send because they stopped early count
    /// in `llmprobe_requests_saved_total`, whatever the sweep's result.
    pub fn publish_sweep(&self, report: &SweepReport) {
        self.results.publish_sweep(report);
        self.running.sweep_finished(report);
        let result = names::sweep_result(report.success, report.setup_error.is_some());
        self.daemon
            .sweep_finished(&report.target, result, report.kind.as_str());
    }

    /// Replaces the exported overhead of the report's pair with the report's.
    /// A report that was cut short still carries its sample count, so a thin
    /// result is visible as such; one with no successful request on a side
    /// exports only count 0.
    pub fn publish_pair(&self, report: &PairReport) {
        self.results.publish_pair(report);
    }

    /// Creates, at zero, the per-target sweep counters of a target whose
    /// task starts, so that `increase()` counts its first sweep (and first
    /// postponement) and dashboards show 0 rather than no data.
    pub fn target_started(&self, target: &str) {
        self.daemon.target_started(target);
    }

    /// Records that a sweep of `target` was postponed by the idle gate.
    pub fn sweep_postponed(&self, target: &str) {
        self.daemon.sweep_postponed(target);
    }

    /// Exports `llmprobe_otlp_dropped_data_points_total` (at zero until
    /// counted): the OTLP sink is on.
    pub fn otlp_started(&self) {
        self.daemon.otlp_started();
    }

    /// Counts `points` data points the OTLP exporter did not deliver.
    pub fn otlp_dropped(&self, points: u64) {
        self.daemon.otlp_dropped(points);
    }

    /// Counts one request in flight until the returned guard is dropped.
    pub fn request_in_flight(&self) -> InFlightGuard {
        self.daemon.request_in_flight()
    }

    /// Removes every series of `target`: sweep results, info, running
    /// totals and configured limits. Call it once the target's tasks have
    /// stopped (a request observed afterwards would create its series again).
    pub fn forget_target(&self, target: &str) {
        self.results.forget_target(target);
        self.running.forget(target);
        self.daemon.forget(target);
        self.config_info.forget_target(target);
        self.probes.forget(target);
    }

    /// Records one event of a target's probes between sweeps.
    pub fn observe_probe(&self, target: &str, model: &str, event: &ProbeEvent) {
        self.probes.observe(target, model, event, now_unix());
    }

    /// Sets a target's mean probe interval, seconds (None: probes off,
    /// their series removed).
    pub fn set_probe_interval(&self, target: &str, model: &str, interval: Option<f64>) {
        self.probes.configured(target, model, interval);
    }

    /// Sets (or replaces) the configured limits of a measured target: its
    /// SLO and interval, for alert rules.
    pub fn set_target_limits(&self, target: &str, limits: &TargetLimits) {
        self.config_info.set_target(target, limits);
    }

    /// Counts a request the HTTP side refused with 401, for `reason`
    /// ([`names::AUTH_FAILURE_REASONS`]).
    pub fn auth_failed(&self, reason: &str) {
        self.bounds.auth_failed(reason);
    }

    /// Counts a `POST /-/reload` not acted on, for `reason`
    /// ([`names::RELOAD_REFUSED_REASONS`]).
    pub fn reload_refused(&self, reason: &str) {
        self.bounds.reload_refused(reason);
    }

    /// Counts a discovery read abandoned because it did not finish in time.
    pub fn discovery_read_abandoned(&self) {
        self.bounds.discovery_read_abandoned();
    }

    /// Counts a failed read of a discovery file.
    pub fn discovery_read_failed(&self, file: &str) {
        self.fleet.file_read_failed(file);
    }

    /// Replaces the per-file discovery series: `(file, valid targets,
    /// invalid entries)`; files not listed any more lose their series.
    pub fn set_discovery_files(&self, files: &[(String, usize, usize)]) {
        self.fleet.set_files(files);
    }

    /// Replaces the fleet series: every known target as `(name, source,
    /// owning shard)`, this instance's shard `index` of `count` and how many
    /// targets it owns.
    pub fn set_fleet(&self, targets: &[(&str, &str, u32)], index: u32, count: u32, owned: usize) {
        self.fleet.set_fleet(targets, index, count, owned);
    }

    /// Discovered targets this instance owns but did not start, their
    /// prompts over `max_prompt_memory_mib` (0 when none).
    pub fn set_discovery_refused(&self, refused: usize) {
        self.fleet.set_refused(refused);
    }

    /// Removes every gateway overhead series of `pair`.
    pub fn forget_pair(&self, pair: &str) {
        self.results.forget_pair(pair);
    }

    /// Replaces the `llmprobe_target_info` series of `target` with what its
    /// server told (`setup`), the request field that carries the output
    /// limit (`max_tokens_field` label) and its configured labels.
    pub fn describe_target(&self, target: &Target, setup: &Setup, max_tokens_field: &str) {
        self.set_target_info(
            &target.name,
            &results::target_info(target, setup, max_tokens_field),
        );
    }

    /// Replaces the `llmprobe_target_info` series of `target`.
    ///
    /// Label names are sanitised to `[a-zA-Z_][a-zA-Z0-9_]*`; a later pair
    /// overrides an earlier one with the same sanitised name (pass configured
    /// labels first, discovered ones after, or the other way round, to choose
    /// which wins). The standard labels ([`names::TARGET_INFO_LABELS`]) are
    /// always present, empty when unknown; a `target` pair is ignored.
    pub fn set_target_info(&self, target: &str, labels: &[(String, String)]) {
        self.results.set_target_info(target, labels);
    }

    /// Records the outcome of a configuration reload.
    pub fn config_reloaded(&self, ok: bool) {
        self.daemon.config_reloaded(ok, now_unix());
    }

    /// Every metric in the text exposition format 0.0.4 ([`TEXT_CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        self.exposition().into_string()
    }

    /// [`encode`](Self::encode) in chunks for a response body, written as
    /// the body is sent: the registry's families (daemon, fleet, process)
    /// merged in name order with the running totals, as the registry alone
    /// wrote them before the running totals left it, then the results.
    pub fn exposition(&self) -> Exposition {
        let mut running = self.running.sources().into_iter().peekable();
        let mut sources: Vec<Box<dyn Source>> = Vec::new();
        for family in self.registry.gather() {
            while let Some((_, s)) = running.next_if(|(name, _)| *name < family.name()) {
                sources.push(Box::new(s));
            }
            sources.push(Box::new(Gathered(Some(family))));
        }
        sources.extend(running.map(|(_, s)| Box::new(s) as Box<dyn Source>));
        sources.push(Box::new(self.results.source()));
        Exposition::new(sources)
    }
}
