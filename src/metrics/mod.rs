//! Every Prometheus metric llmprobe exports, owned by one [`Metrics`]. This is
//! the only module that uses the `prometheus` crate, so metric names and
//! labels (a contract with dashboards and alert rules) live in one place.
//!
//! Two kinds of data are exported:
//! - running totals over every measured request (histograms and counters,
//!   for `rate()` and `histogram_quantile()`), held in ordinary metric vecs;
//! - the results of the latest completed sweep of each target, held as whole
//!   [`SweepReport`]s and rendered to text when they change; every scrape
//!   until the next change reuses that text (with 100 targets rendering takes
//!   over 100 ms, and results change only when a sweep ends). Replacing a
//!   report is one pointer swap under a lock, so a scrape never mixes two
//!   sweeps, and a level or workload missing from the new report simply
//!   stops being exported (no stale series to delete).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use prometheus::core::Desc;
use prometheus::proto::{self, LabelPair, MetricFamily, MetricType};
use prometheus::{
    Gauge, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

use crate::stats::report::{Percentiles, SweepReport};
use crate::stats::sample::{Outcome, Sample};

pub mod config_info;
pub use config_info::{ConfigInfo, TargetLimits};

/// Content type of [`Metrics::encode`]'s output (text exposition format 0.0.4).
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Histogram buckets for LLM latencies: a fast TTFT is tens of milliseconds,
/// a long generation under load takes minutes.
const LATENCY_BUCKETS: [f64; 15] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0,
];

/// Labels of the running totals.
const REQUEST_LABELS: [&str; 3] = ["target", "model", "workload"];

/// `llmprobe_target_info` labels that every target has (empty when unknown),
/// besides `target`; extra labels from configuration follow them.
pub const TARGET_INFO_LABELS: [&str; 8] = [
    "model",
    "server",
    "server_version",
    "gpu",
    "driver",
    "gpu_memory",
    "os",
    "via_gateway",
];

/// Name, help and label names of one family built at scrape time.
struct Spec {
    name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
}

const LEVEL: &[&str] = &["target", "model", "workload", "concurrency"];
const LEVEL_PERCENTILE: &[&str] = &["target", "model", "workload", "concurrency", "percentile"];
const WORKLOAD: &[&str] = &["target", "model", "workload"];
const TARGET: &[&str] = &["target"];

const SWEEP_TTFT: Spec = Spec {
    name: "llmprobe_sweep_ttft_seconds",
    help: "Time to first token percentiles of the latest completed sweep, per level.",
    labels: LEVEL_PERCENTILE,
};
const SWEEP_LATENCY: Spec = Spec {
    name: "llmprobe_sweep_latency_seconds",
    help: "End-to-end request latency percentiles of the latest completed sweep, per level.",
    labels: LEVEL_PERCENTILE,
};
const SWEEP_ITL: Spec = Spec {
    name: "llmprobe_sweep_inter_token_latency_seconds",
    help: "Percentiles of the gaps between streamed content chunks in the latest completed sweep, per level.",
    labels: LEVEL_PERCENTILE,
};
const SWEEP_GENERATION: Spec = Spec {
    name: "llmprobe_sweep_generation_tokens_per_second",
    help: "Per-request generation speed percentiles of the latest completed sweep, per level.",
    labels: LEVEL_PERCENTILE,
};
const SWEEP_SAMPLES: Spec = Spec {
    name: "llmprobe_sweep_samples",
    help: "Number of samples the sweep percentiles of a quantity rest on (a p95 of few samples is imprecise).",
    labels: &["target", "model", "workload", "concurrency", "quantity"],
};
const SWEEP_THROUGHPUT: Spec = Spec {
    name: "llmprobe_sweep_throughput_tokens_per_second",
    help: "Aggregate output tokens per second of the level in the latest completed sweep.",
    labels: LEVEL,
};
const SWEEP_SHED: Spec = Spec {
    name: "llmprobe_sweep_shed_ratio",
    help: "Fraction of the level's requests the server declined for load (503 or 429) in the latest completed sweep.",
    labels: LEVEL,
};
const SWEEP_ERROR: Spec = Spec {
    name: "llmprobe_sweep_error_ratio",
    help: "Fraction of the level's requests that failed for any reason other than load shedding in the latest completed sweep.",
    labels: LEVEL,
};
const SWEEP_REQUESTS: Spec = Spec {
    name: "llmprobe_sweep_requests",
    help: "Requests of the level by outcome in the latest completed sweep.",
    labels: &["target", "model", "workload", "concurrency", "outcome"],
};
const CAPACITY_KNEE: Spec = Spec {
    name: "llmprobe_capacity_knee_concurrency",
    help: "Highest concurrency within the SLO with every lower level within it too (0 when even level 1 fails).",
    labels: WORKLOAD,
};
const CAPACITY_THROUGHPUT: Spec = Spec {
    name: "llmprobe_capacity_throughput_tokens_per_second",
    help: "Aggregate output tokens per second at the knee (0 when there is no knee).",
    labels: WORKLOAD,
};
const CAPACITY_SATURATION: Spec = Spec {
    name: "llmprobe_capacity_saturation_concurrency",
    help: "First level whose throughput gained under 10% over the previous level (absent when throughput kept growing).",
    labels: WORKLOAD,
};
const RECOMMENDED: Spec = Spec {
    name: "llmprobe_recommended_max_in_flight",
    help: "Recommended max_in_flight for the worker: the knee times the configured headroom.",
    labels: WORKLOAD,
};
const SWEEP_SUCCESS: Spec = Spec {
    name: "llmprobe_sweep_success",
    help: "1 if the last sweep of the target completed, 0 if it failed (the results of the last completed one stay exported).",
    labels: TARGET,
};
const SWEEP_DURATION: Spec = Spec {
    name: "llmprobe_sweep_duration_seconds",
    help: "Wall time of the last sweep of the target, completed or failed.",
    labels: TARGET,
};
const SWEEP_LAST_COMPLETION: Spec = Spec {
    name: "llmprobe_sweep_last_completion_timestamp_seconds",
    help: "Unix time at which the latest completed sweep of the target finished.",
    labels: TARGET,
};
const TARGET_INFO: Spec = Spec {
    name: "llmprobe_target_info",
    help: "Setup of a target: server, version, GPU, driver, memory, OS, gateway, and configured labels; always 1.",
    labels: &[
        "target",
        "model",
        "server",
        "server_version",
        "gpu",
        "driver",
        "gpu_memory",
        "os",
        "via_gateway",
    ],
};
const GATEWAY_OVERHEAD: Spec = Spec {
    name: "llmprobe_gateway_overhead_seconds",
    help: "Time a gateway adds (through the gateway minus direct), by quantity (latency or ttft) and percentile.",
    labels: &["pair", "quantity", "percentile"],
};
const GATEWAY_SAMPLES: Spec = Spec {
    name: "llmprobe_gateway_overhead_samples",
    help: "Number of samples the gateway overhead percentiles of a quantity rest on.",
    labels: &["pair", "quantity"],
};

/// Every family rendered from the sweep results.
const SNAPSHOT_SPECS: [&Spec; 19] = [
    &SWEEP_TTFT,
    &SWEEP_LATENCY,
    &SWEEP_ITL,
    &SWEEP_GENERATION,
    &SWEEP_SAMPLES,
    &SWEEP_THROUGHPUT,
    &SWEEP_SHED,
    &SWEEP_ERROR,
    &SWEEP_REQUESTS,
    &CAPACITY_KNEE,
    &CAPACITY_THROUGHPUT,
    &CAPACITY_SATURATION,
    &RECOMMENDED,
    &SWEEP_SUCCESS,
    &SWEEP_DURATION,
    &SWEEP_LAST_COMPLETION,
    &TARGET_INFO,
    &GATEWAY_OVERHEAD,
    &GATEWAY_SAMPLES,
];

/// What is exported about the sweeps of one target.
#[derive(Debug, Default)]
struct TargetSweeps {
    /// The latest report with `success`; its results stay exported while
    /// later sweeps fail.
    last_good: Option<Arc<SweepReport>>,
    /// Whether the latest sweep, good or not, succeeded.
    success: bool,
    /// Wall time of the latest sweep, good or not.
    duration_seconds: f64,
}

/// Results exported as a whole at scrape time; see the module comment.
#[derive(Debug, Default)]
struct Snapshot {
    sweeps: RwLock<BTreeMap<String, TargetSweeps>>,
    /// target -> label pairs of its info series (target label excluded).
    target_info: RwLock<BTreeMap<String, Vec<(String, String)>>>,
    /// (pair, quantity) -> overhead percentiles.
    gateway: RwLock<BTreeMap<(String, String), Percentiles>>,
    /// Bumped after every change: a rendering is reused while it is current.
    generation: AtomicU64,
    /// The latest rendering and the generation it shows.
    rendered: Mutex<Option<(u64, Arc<String>)>>,
}

/// Running totals of one (target, model, workload): which series exist, so
/// that `forget_target` can delete them (the vecs cannot match a partial
/// label set).
type RunningKeys = BTreeMap<String, BTreeMap<String, Vec<String>>>;

/// Owns every metric handle of llmprobe; see the module comment.
pub struct Metrics {
    registry: Registry,
    request_ttft: HistogramVec,
    request_duration: HistogramVec,
    requests: IntCounterVec,
    output_tokens: IntCounterVec,
    prompt_tokens: IntCounterVec,
    sweeps_total: IntCounterVec,
    sweeps_postponed: IntCounterVec,
    in_flight: IntGauge,
    reload_successful: IntGauge,
    reload_timestamp: Gauge,
    snapshot: Arc<Snapshot>,
    running: Mutex<RunningKeys>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// Counts one request in `llmprobe_in_flight_requests` until dropped, so a
/// cancelled request cannot leave the gauge too high.
#[derive(Debug)]
pub struct InFlightGuard(IntGauge);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Reads through a poisoned lock: the data behind it is plain values that a
/// panicking writer cannot leave half-updated in a way worth losing metrics over.
fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

/// Writes through a poisoned lock; see [`read`].
fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
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
        let histogram = |name: &str, help: &str| -> Result<HistogramVec, prometheus::Error> {
            let h = HistogramVec::new(
                HistogramOpts::new(name, help).buckets(LATENCY_BUCKETS.to_vec()),
                &REQUEST_LABELS,
            )?;
            registry.register(Box::new(h.clone()))?;
            Ok(h)
        };
        let counter =
            |name: &str, help: &str, labels: &[&str]| -> Result<IntCounterVec, prometheus::Error> {
                let c = IntCounterVec::new(Opts::new(name, help), labels)?;
                registry.register(Box::new(c.clone()))?;
                Ok(c)
            };

        let request_ttft = histogram(
            "llmprobe_request_ttft_seconds",
            "Time to first token of every request that completed (outcome ok).",
        )?;
        let request_duration = histogram(
            "llmprobe_request_duration_seconds",
            "Latency from send to the last content chunk of every request that completed (outcome ok).",
        )?;
        let requests = counter(
            "llmprobe_requests_total",
            "Measured requests by outcome.",
            &["target", "model", "workload", "outcome"],
        )?;
        let output_tokens = counter(
            "llmprobe_output_tokens_total",
            "Output tokens of requests that completed (outcome ok).",
            &REQUEST_LABELS,
        )?;
        let prompt_tokens = counter(
            "llmprobe_prompt_tokens_total",
            "Prompt tokens reported by the server for requests that completed (outcome ok).",
            &REQUEST_LABELS,
        )?;
        let sweeps_total = counter(
            "llmprobe_sweeps_total",
            "Sweeps finished, by result (ok or failed).",
            &["target", "result"],
        )?;
        let sweeps_postponed = counter(
            "llmprobe_sweeps_postponed_total",
            "Sweeps postponed because the server was busy (idle gate).",
            &["target"],
        )?;

        let in_flight = IntGauge::new(
            "llmprobe_in_flight_requests",
            "Benchmark requests in flight across all targets.",
        )?;
        registry.register(Box::new(in_flight.clone()))?;

        let build_info = IntGauge::with_opts(
            Opts::new(
                "llmprobe_build_info",
                "Version of llmprobe that is running; always 1.",
            )
            .const_label("version", env!("CARGO_PKG_VERSION")),
        )?;
        build_info.set(1);
        registry.register(Box::new(build_info))?;

        let reload_successful = IntGauge::new(
            "llmprobe_config_last_reload_successful",
            "1 if the last configuration (re)load succeeded, else 0.",
        )?;
        registry.register(Box::new(reload_successful.clone()))?;
        let reload_timestamp = Gauge::new(
            "llmprobe_config_last_reload_success_timestamp_seconds",
            "Unix time of the last successful configuration (re)load.",
        )?;
        registry.register(Box::new(reload_timestamp.clone()))?;
        reload_successful.set(1);
        reload_timestamp.set(now_unix());

        // The results are rendered apart from the registry; their names and
        // label names are still checked here, as registering would.
        for spec in SNAPSHOT_SPECS {
            Desc::new(
                spec.name.to_string(),
                spec.help.to_string(),
                spec.labels.iter().map(|l| l.to_string()).collect(),
                HashMap::new(),
            )?;
        }
        let snapshot = Arc::new(Snapshot::default());

        #[cfg(target_os = "linux")]
        registry.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))?;

        Ok(Metrics {
            registry: registry.clone(),
            request_ttft,
            request_duration,
            requests,
            output_tokens,
            prompt_tokens,
            sweeps_total,
            sweeps_postponed,
            in_flight,
            reload_successful,
            reload_timestamp,
            snapshot,
            running: Mutex::new(BTreeMap::new()),
        })
    }

    /// Adds one measured request to the running totals.
    ///
    /// Every request counts in `llmprobe_requests_total` under its outcome. Only
    /// requests with outcome `ok` feed the histograms and the token counters,
    /// matching the sweep's own definitions (throughput counts completed
    /// requests only); a failed request has no meaningful latency.
    pub fn observe_request(&self, target: &str, model: &str, workload: &str, sample: &Sample) {
        // Held while updating so that `forget_target` sees either all of this
        // request or none of it.
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        self.ensure_running_series(&mut running, target, model, workload);

        let labels = [target, model, workload];
        if let Ok(c) = self.requests.get_metric_with_label_values(&[
            target,
            model,
            workload,
            sample.outcome.as_str(),
        ]) {
            c.inc();
        }
        if sample.outcome != Outcome::Ok {
            return;
        }
        if let (Some(ttft), Ok(h)) = (
            sample.ttft,
            self.request_ttft.get_metric_with_label_values(&labels),
        ) {
            h.observe(ttft.as_secs_f64());
        }
        if let (Some(latency), Ok(h)) = (
            sample.latency,
            self.request_duration.get_metric_with_label_values(&labels),
        ) {
            h.observe(latency.as_secs_f64());
        }
        if let Ok(c) = self.output_tokens.get_metric_with_label_values(&labels) {
            c.inc_by(sample.output_tokens);
        }
        if let (Some(tokens), Ok(c)) = (
            sample.prompt_tokens,
            self.prompt_tokens.get_metric_with_label_values(&labels),
        ) {
            c.inc_by(tokens);
        }
    }

    /// Creates, at zero, every running-total series of a (target, model,
    /// workload) seen for the first time, so that `rate()` and alerts on an
    /// outcome work from its first occurrence.
    fn ensure_running_series(
        &self,
        running: &mut RunningKeys,
        target: &str,
        model: &str,
        workload: &str,
    ) {
        let known = running
            .get(target)
            .and_then(|models| models.get(model))
            .is_some_and(|workloads| workloads.iter().any(|w| w == workload));
        if known {
            return;
        }
        running
            .entry(target.to_string())
            .or_default()
            .entry(model.to_string())
            .or_default()
            .push(workload.to_string());
        let labels = [target, model, workload];
        for outcome in Outcome::ALL {
            let _ = self.requests.get_metric_with_label_values(&[
                target,
                model,
                workload,
                outcome.as_str(),
            ]);
        }
        let _ = self.request_ttft.get_metric_with_label_values(&labels);
        let _ = self.request_duration.get_metric_with_label_values(&labels);
        let _ = self.output_tokens.get_metric_with_label_values(&labels);
        let _ = self.prompt_tokens.get_metric_with_label_values(&labels);
    }

    /// Publishes the outcome of a finished sweep and counts it in
    /// `llmprobe_sweeps_total`.
    ///
    /// A successful report replaces every sweep, capacity and recommendation
    /// series of its target as a whole. A failed one only sets
    /// `llmprobe_sweep_success` to 0 and updates the duration: the results of
    /// the last completed sweep stay, with their completion timestamp, so
    /// dashboards keep the last known capacity while alerts see the failure.
    pub fn publish_sweep(&self, report: &SweepReport) {
        {
            let mut sweeps = write(&self.snapshot.sweeps);
            let entry = sweeps.entry(report.target.clone()).or_default();
            entry.success = report.success;
            entry.duration_seconds = report.duration_seconds;
            if report.success {
                entry.last_good = Some(Arc::new(report.clone()));
            }
        }
        self.snapshot.changed();
        let result = if report.success { "ok" } else { "failed" };
        for r in ["ok", "failed"] {
            if let Ok(c) = self
                .sweeps_total
                .get_metric_with_label_values(&[report.target.as_str(), r])
            {
                if r == result {
                    c.inc();
                }
            }
        }
    }

    /// Creates, at zero, the per-target sweep counters of a target whose
    /// task starts, so that `increase()` counts its first sweep (and first
    /// postponement) and dashboards show 0 rather than no data.
    pub fn target_started(&self, target: &str) {
        for result in ["ok", "failed"] {
            let _ = self
                .sweeps_total
                .get_metric_with_label_values(&[target, result]);
        }
        let _ = self
            .sweeps_postponed
            .get_metric_with_label_values(&[target]);
    }

    /// Records that a sweep of `target` was postponed by the idle gate.
    pub fn sweep_postponed(&self, target: &str) {
        if let Ok(c) = self
            .sweeps_postponed
            .get_metric_with_label_values(&[target])
        {
            c.inc();
        }
    }

    /// Counts one request in flight until the returned guard is dropped.
    pub fn request_in_flight(&self) -> InFlightGuard {
        self.in_flight.inc();
        InFlightGuard(self.in_flight.clone())
    }

    /// Removes every series of `target`: sweep results, info, and running
    /// totals. Call it once the target's tasks have stopped (a request
    /// observed afterwards would create its series again).
    pub fn forget_target(&self, target: &str) {
        write(&self.snapshot.sweeps).remove(target);
        write(&self.snapshot.target_info).remove(target);
        self.snapshot.changed();

        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(models) = running.remove(target) {
            for (model, workloads) in &models {
                for workload in workloads {
                    let labels = [target, model.as_str(), workload.as_str()];
                    // Errors here only mean the series did not exist.
                    let _ = self.request_ttft.remove_label_values(&labels);
                    let _ = self.request_duration.remove_label_values(&labels);
                    let _ = self.output_tokens.remove_label_values(&labels);
                    let _ = self.prompt_tokens.remove_label_values(&labels);
                    for outcome in Outcome::ALL {
                        let _ = self.requests.remove_label_values(&[
                            target,
                            model,
                            workload,
                            outcome.as_str(),
                        ]);
                    }
                }
            }
        }
        drop(running);
        for result in ["ok", "failed"] {
            let _ = self.sweeps_total.remove_label_values(&[target, result]);
        }
        let _ = self.sweeps_postponed.remove_label_values(&[target]);
    }

    /// Replaces the `llmprobe_target_info` series of `target`.
    ///
    /// Label names are sanitised to `[a-zA-Z_][a-zA-Z0-9_]*`; a later pair
    /// overrides an earlier one with the same sanitised name (pass configured
    /// labels first, discovered ones after, or the other way round, to choose
    /// which wins). The standard labels ([`TARGET_INFO_LABELS`]) are always
    /// present, empty when unknown; a `target` pair is ignored.
    pub fn set_target_info(&self, target: &str, labels: &[(String, String)]) {
        let mut extra: BTreeMap<String, String> = BTreeMap::new();
        for (name, value) in labels {
            if let Some(name) = sanitize_label_name(name) {
                if name != "target" {
                    extra.insert(name, value.clone());
                }
            }
        }
        let mut pairs: Vec<(String, String)> = TARGET_INFO_LABELS
            .iter()
            .map(|name| (name.to_string(), extra.remove(*name).unwrap_or_default()))
            .collect();
        pairs.extend(extra);
        write(&self.snapshot.target_info).insert(target.to_string(), pairs);
        self.snapshot.changed();
    }

    /// Records the outcome of a configuration reload.
    pub fn config_reloaded(&self, ok: bool) {
        self.reload_successful.set(i64::from(ok));
        if ok {
            self.reload_timestamp.set(now_unix());
        }
    }

    /// Replaces the gateway overhead of `pair` for `quantity` ("latency" or
    /// "ttft"): through the gateway minus direct, per percentile.
    pub fn publish_gateway_overhead(&self, pair: &str, quantity: &str, p: &Percentiles) {
        write(&self.snapshot.gateway).insert((pair.to_string(), quantity.to_string()), *p);
        self.snapshot.changed();
    }

    /// Removes every gateway overhead series of `pair`.
    pub fn forget_pair(&self, pair: &str) {
        write(&self.snapshot.gateway).retain(|(p, _), _| p != pair);
        self.snapshot.changed();
    }

    /// Every metric in the text exposition format 0.0.4 ([`TEXT_CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        let families = self.registry.gather();
        let results = self.snapshot.text();
        let mut out = String::with_capacity(results.len() + (1 << 16));
        encode_into(&families, &mut out);
        // Distinct family names, so each family stays in one block.
        out.push_str(&results);
        out
    }

    /// [`encode`](Self::encode) in two pieces for a response body: the live
    /// metrics, then the sweep results, shared with every scrape until they
    /// change instead of copied (megabytes with a hundred targets).
    pub fn encode_parts(&self) -> [Bytes; 2] {
        let families = self.registry.gather();
        let mut live = String::new();
        encode_into(&families, &mut live);
        [
            Bytes::from(live),
            Bytes::from_owner(SharedText(self.snapshot.text())),
        ]
    }
}

/// Makes `name` a valid Prometheus label name, or None when nothing is left.
/// Names starting with `__` are reserved by Prometheus, so a leading run of
/// underscores is shortened to one.
fn sanitize_label_name(name: &str) -> Option<String> {
    let mut s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    let rest = s.trim_start_matches('_');
    if rest.is_empty() {
        return None;
    }
    if rest.len() != s.len() {
        s = format!("_{rest}");
    }
    Some(s)
}

/// Families under construction during one scrape, keyed by name; only
/// families with at least one series are created.
#[derive(Default)]
struct Families(BTreeMap<&'static str, MetricFamily>);

impl Families {
    /// Adds a gauge series whose label values follow `spec.labels`.
    fn add(&mut self, spec: &Spec, values: &[&str], value: f64) {
        let pairs = spec
            .labels
            .iter()
            .zip(values)
            .map(|(name, value)| label(name, value))
            .collect();
        self.add_pairs(spec, pairs, value);
    }

    /// Adds a gauge series with explicit label pairs.
    fn add_pairs(&mut self, spec: &Spec, labels: Vec<LabelPair>, value: f64) {
        let family = self.0.entry(spec.name).or_insert_with(|| {
            let mut mf = MetricFamily::default();
            mf.set_name(spec.name.to_string());
            mf.set_help(spec.help.to_string());
            mf.set_field_type(MetricType::GAUGE);
            mf
        });
        let mut gauge = proto::Gauge::default();
        gauge.set_value(value);
        let mut metric = proto::Metric::from_label(labels);
        metric.set_gauge(gauge);
        family.mut_metric().push(metric);
    }

    fn into_vec(self) -> Vec<MetricFamily> {
        self.0.into_values().collect()
    }
}

fn label(name: &str, value: &str) -> LabelPair {
    let mut pair = LabelPair::default();
    pair.set_name(name.to_string());
    pair.set_value(value.to_string());
    pair
}

/// A rendering lent to a response body.
struct SharedText(Arc<String>);

impl AsRef<[u8]> for SharedText {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// Appends `families` in the text format.
fn encode_into(families: &[MetricFamily], out: &mut String) {
    // The encoder only fails on empty or unnamed families, which are never
    // built; log rather than lose the whole scrape.
    if let Err(e) = TextEncoder::new().encode_utf8(families, out) {
        tracing::error!(error = %e, "encoding metrics failed");
    }
}

impl Snapshot {
    /// Marks the rendering stale; call after every change.
    fn changed(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// The text of every result family, rendered again only after a change.
    fn text(&self) -> Arc<String> {
        // Held while rendering, so concurrent scrapes render once.
        let mut rendered = self.rendered.lock().unwrap_or_else(PoisonError::into_inner);
        // Read before rendering: a change made meanwhile leaves it stale.
        let generation = self.generation.load(Ordering::Acquire);
        if let Some((g, text)) = rendered.as_ref() {
            if *g == generation {
                return Arc::clone(text);
            }
        }
        let mut families = Families::default();
        self.collect_sweeps(&mut families);
        self.collect_info(&mut families);
        self.collect_gateway(&mut families);
        let mut text = String::new();
        encode_into(&families.into_vec(), &mut text);
        let text = Arc::new(text);
        *rendered = Some((generation, Arc::clone(&text)));
        text
    }

    /// Builds the sweep and capacity families of every target.
    fn collect_sweeps(&self, out: &mut Families) {
        let sweeps = read(&self.sweeps);
        for (target, state) in sweeps.iter() {
            let t = target.as_str();
            out.add(&SWEEP_SUCCESS, &[t], if state.success { 1.0 } else { 0.0 });
            out.add(&SWEEP_DURATION, &[t], state.duration_seconds);
            let Some(report) = &state.last_good else {
                continue;
            };
            out.add(
                &SWEEP_LAST_COMPLETION,
                &[t],
                report.finished_at_unix_seconds,
            );
            let m = report.model.as_str();
            for wl in &report.workloads {
                let w = wl.workload.as_str();
                for level in &wl.levels {
                    let concurrency = level.concurrency.to_string();
                    let c = concurrency.as_str();
                    let quantities: [(&Spec, &str, &Percentiles); 4] = [
                        (&SWEEP_TTFT, "ttft", &level.ttft_seconds),
                        (&SWEEP_LATENCY, "latency", &level.latency_seconds),
                        (
                            &SWEEP_ITL,
                            "inter_token_latency",
                            &level.inter_token_latency_seconds,
                        ),
                        (
                            &SWEEP_GENERATION,
                            "generation_speed",
                            &level.generation_tokens_per_second,
                        ),
                    ];
                    for (spec, quantity, p) in quantities {
                        for (percentile, value) in p.labelled() {
                            if let Some(v) = value {
                                out.add(spec, &[t, m, w, c, percentile], v);
                            }
                        }
                        out.add(&SWEEP_SAMPLES, &[t, m, w, c, quantity], p.count as f64);
                    }
                    out.add(
                        &SWEEP_THROUGHPUT,
                        &[t, m, w, c],
                        level.throughput_tokens_per_second,
                    );
                    out.add(&SWEEP_SHED, &[t, m, w, c], level.shed_ratio);
                    out.add(&SWEEP_ERROR, &[t, m, w, c], level.error_ratio);
                    for outcome in Outcome::ALL {
                        let n = level.outcomes.get(outcome.as_str()).copied().unwrap_or(0);
                        out.add(&SWEEP_REQUESTS, &[t, m, w, c, outcome.as_str()], n as f64);
                    }
                }
                let cap = &wl.capacity;
                out.add(&CAPACITY_KNEE, &[t, m, w], f64::from(cap.knee_concurrency));
                out.add(
                    &CAPACITY_THROUGHPUT,
                    &[t, m, w],
                    cap.throughput_tokens_per_second,
                );
                out.add(
                    &RECOMMENDED,
                    &[t, m, w],
                    f64::from(cap.recommended_max_in_flight),
                );
                if let Some(s) = cap.saturation_concurrency {
                    out.add(&CAPACITY_SATURATION, &[t, m, w], f64::from(s));
                }
            }
        }
    }

    /// Builds `llmprobe_target_info`.
    fn collect_info(&self, out: &mut Families) {
        for (target, pairs) in read(&self.target_info).iter() {
            let mut labels = vec![label("target", target)];
            labels.extend(pairs.iter().map(|(n, v)| label(n, v)));
            out.add_pairs(&TARGET_INFO, labels, 1.0);
        }
    }

    /// Builds the gateway overhead families.
    fn collect_gateway(&self, out: &mut Families) {
        for ((pair, quantity), p) in read(&self.gateway).iter() {
            for (percentile, value) in p.labelled() {
                if let Some(v) = value {
                    out.add(&GATEWAY_OVERHEAD, &[pair, quantity, percentile], v);
                }
            }
            out.add(&GATEWAY_SAMPLES, &[pair, quantity], p.count as f64);
        }
    }
}

/// Metrics of target discovery from files and of sharding (see `fleet`),
/// registered next to [`Metrics`] on the same registry.
pub struct FleetMetrics {
    read_errors: IntCounterVec,
    file_targets: prometheus::IntGaugeVec,
    file_invalid: prometheus::IntGaugeVec,
    fleet_target: prometheus::IntGaugeVec,
    shard_targets: prometheus::IntGaugeVec,
    shard_info: prometheus::IntGaugeVec,
    exported: Mutex<FleetExported>,
}

/// Label values exported now, so that those that went away can be removed.
#[derive(Default)]
struct FleetExported {
    files: std::collections::BTreeSet<String>,
    targets: std::collections::BTreeSet<[String; 3]>,
    shard: Option<[String; 2]>,
}

impl fmt::Debug for FleetMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetMetrics").finish_non_exhaustive()
    }
}

impl FleetMetrics {
    /// Creates the discovery and sharding metrics and registers them.
    pub fn new(registry: &Registry) -> Result<FleetMetrics, prometheus::Error> {
        let gauge = |name: &str, help: &str, labels: &[&str]| {
            let g = prometheus::IntGaugeVec::new(Opts::new(name, help), labels)?;
            registry.register(Box::new(g.clone()))?;
            Ok::<_, prometheus::Error>(g)
        };
        let read_errors = IntCounterVec::new(
            Opts::new(
                "llmprobe_file_sd_read_errors_total",
                "Failed reads of a file_sd file (unreadable or unparsable); the file keeps the targets it gave last time.",
            ),
            &["file"],
        )?;
        registry.register(Box::new(read_errors.clone()))?;
        Ok(FleetMetrics {
            read_errors,
            file_targets: gauge(
                "llmprobe_file_sd_targets",
                "Valid targets a file_sd file gives (as of its last successful read).",
                &["file"],
            )?,
            file_invalid: gauge(
                "llmprobe_file_sd_invalid_targets",
                "Entries of a file_sd file skipped as invalid at its last successful read (see the log or check-config).",
                &["file"],
            )?,
            fleet_target: gauge(
                "llmprobe_fleet_target",
                "Every target this instance knows (static or from file_sd), owned or not; shard is the instance that should measure it. Always 1.",
                &["target", "source", "shard"],
            )?,
            shard_targets: gauge(
                "llmprobe_shard_targets",
                "Targets owned, and so measured, by this instance.",
                &["shard"],
            )?,
            shard_info: gauge(
                "llmprobe_shard_info",
                "This instance's shard index and the shard count it was configured with. Always 1.",
                &["index", "count"],
            )?,
            exported: Mutex::new(FleetExported::default()),
        })
    }

    /// Counts a failed read of a discovery file.
    pub fn file_read_failed(&self, file: &str) {
        self.read_errors.with_label_values(&[file]).inc();
    }

    /// Replaces the per-file series: `(file, valid targets, invalid entries)`;
    /// files not listed any more lose their series.
    pub fn set_files(&self, files: &[(String, usize, usize)]) {
        let mut exported = self.exported.lock().unwrap_or_else(PoisonError::into_inner);
        let now: std::collections::BTreeSet<String> =
            files.iter().map(|(f, _, _)| f.clone()).collect();
        for gone in exported.files.difference(&now) {
            let _ = self.read_errors.remove_label_values(&[gone]);
            let _ = self.file_targets.remove_label_values(&[gone]);
            let _ = self.file_invalid.remove_label_values(&[gone]);
        }
        for (file, valid, invalid) in files {
            // Present at 0 from the start, so increase() sees the first error.
            let _ = self.read_errors.with_label_values(&[file]);
            self.file_targets
                .with_label_values(&[file])
                .set(*valid as i64);
            self.file_invalid
                .with_label_values(&[file])
                .set(*invalid as i64);
        }
        exported.files = now;
    }

    /// Replaces the fleet series: every known target as `(name, source,
    /// owning shard)`, this instance's shard and how many targets it owns.
    pub fn set_fleet(&self, targets: &[(&str, &str, u32)], index: u32, count: u32, owned: usize) {
        let mut exported = self.exported.lock().unwrap_or_else(PoisonError::into_inner);
        let now: std::collections::BTreeSet<[String; 3]> = targets
            .iter()
            .map(|(t, s, o)| [t.to_string(), s.to_string(), o.to_string()])
            .collect();
        for gone in exported.targets.difference(&now) {
            let _ = self
                .fleet_target
                .remove_label_values(&[&gone[0], &gone[1], &gone[2]]);
        }
        for t in &now {
            self.fleet_target
                .with_label_values(&[&t[0], &t[1], &t[2]])
                .set(1);
        }
        exported.targets = now;
        let shard = [index.to_string(), count.to_string()];
        if let Some(old) = exported.shard.take() {
            if old != shard {
                let _ = self.shard_info.remove_label_values(&[&old[0], &old[1]]);
                let _ = self.shard_targets.remove_label_values(&[&old[0]]);
            }
        }
        self.shard_info
            .with_label_values(&[&shard[0], &shard[1]])
            .set(1);
        self.shard_targets
            .with_label_values(&[&shard[0]])
            .set(owned as i64);
        exported.shard = Some(shard);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::report::{Capacity, LevelSummary, WorkloadReport};
    use crate::stats::sample::TokenSource;
    use std::time::Duration;

    type Series = (String, BTreeMap<String, String>, f64);

    /// Parses the exposition text into (name, labels, value), unescaping values.
    fn parse(text: &str) -> Vec<Series> {
        let mut out = Vec::new();
        for line in text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
        {
            let (series, value) = line.rsplit_once(' ').expect("sample line");
            let value: f64 = value.parse().expect("value");
            let (name, mut rest) = match series.split_once('{') {
                Some((n, r)) => (n.to_string(), r),
                None => (series.to_string(), ""),
            };
            let mut labels = BTreeMap::new();
            while let Some((lname, r)) = rest.split_once("=\"") {
                let mut v = String::new();
                let mut chars = r.char_indices();
                let mut end = r.len();
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => match chars.next() {
                            Some((_, 'n')) => v.push('\n'),
                            Some((_, c)) => v.push(c),
                            None => {}
                        },
                        '"' => {
                            end = i;
                            break;
                        }
                        c => v.push(c),
                    }
                }
                labels.insert(lname.trim_start_matches(',').to_string(), v);
                rest = &r[end + 1..];
            }
            out.push((name, labels, value));
        }
        out
    }

    /// Value of the series with exactly these labels.
    fn get(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        parse(text)
            .into_iter()
            .find(|(n, l, _)| n == name && *l == want)
            .map(|(_, _, v)| v)
    }

    /// Number of series of `name` whose labels include `labels`.
    fn count(text: &str, name: &str, labels: &[(&str, &str)]) -> usize {
        parse(text)
            .into_iter()
            .filter(|(n, l, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
            })
            .count()
    }

    fn pct(count: usize, base: f64) -> Percentiles {
        Percentiles {
            count,
            p50: Some(base),
            p95: Some(base * 2.0),
            p99: Some(base * 3.0),
        }
    }

    fn level(concurrency: u32) -> LevelSummary {
        let c = f64::from(concurrency);
        let mut outcomes = BTreeMap::new();
        outcomes.insert("ok", 10);
        outcomes.insert("shed", 2);
        LevelSummary {
            concurrency,
            requests: 12,
            outcomes,
            shed_ratio: 2.0 / 12.0,
            error_ratio: 0.0,
            ttft_seconds: pct(10, 0.1 * c),
            latency_seconds: pct(10, 2.0 * c),
            inter_token_latency_seconds: pct(500, 0.01 * c),
            generation_tokens_per_second: pct(10, 50.0 / c),
            throughput_tokens_per_second: 40.0 * c,
            output_tokens: 2560,
            prompt_tokens: 300,
            cached_prompt_tokens: 0,
            wall_seconds: 10.0,
            token_source: "usage",
            tokens_per_content_chunk: None,
            streams_without_finish_reason: 0,
            error_examples: Default::default(),
            decision_latency_seconds: Default::default(),
            achieved_concurrency: f64::from(concurrency),
            littles_law_concurrency: f64::from(concurrency),
            kept_concurrency: true,
            new_connections: 0,
            connect_seconds: Default::default(),
            usage_disagreements: 0,
            within_slo: true,
        }
    }

    fn workload(name: &str, levels: &[u32]) -> WorkloadReport {
        WorkloadReport {
            workload: name.to_string(),
            levels: levels.iter().map(|c| level(*c)).collect(),
            capacity: Capacity {
                knee_concurrency: levels.last().copied().unwrap_or(0),
                throughput_tokens_per_second: 123.0,
                recommended_max_in_flight: 3,
                saturation_concurrency: Some(4),
                saturated_before_knee: false,
                stopped_because: None,
                knee_is_lower_bound: false,
            },
        }
    }

    fn report(target: &str, workloads: Vec<WorkloadReport>) -> SweepReport {
        SweepReport {
            target: target.to_string(),
            model: "qwen".to_string(),
            success: true,
            error: None,
            duration_seconds: 60.0,
            finished_at_unix_seconds: 1_700_000_000.0,
            setup: Default::default(),
            output_limit: Default::default(),
            workloads,
        }
    }

    fn ok_sample() -> Sample {
        Sample {
            outcome: Outcome::Ok,
            status: Some(200),
            ttft: Some(Duration::from_millis(120)),
            latency: Some(Duration::from_millis(1500)),
            inter_token: vec![Duration::from_millis(10)],
            output_tokens: 100,
            token_source: TokenSource::Usage,
            prompt_tokens: Some(40),
            cached_prompt_tokens: None,
            content_chunks: 100,
            finish_reason_seen: true,
            error: None,
            elapsed: Duration::from_millis(1500),
            connect: None,
            usage_disagreed: false,
        }
    }

    fn metrics() -> Metrics {
        Metrics::new(&Registry::new()).expect("metrics")
    }

    const W1C1: [(&str, &str); 4] = [
        ("target", "w1"),
        ("model", "qwen"),
        ("workload", "chat"),
        ("concurrency", "1"),
    ];

    fn with<'a>(
        base: &[(&'a str, &'a str)],
        more: &[(&'a str, &'a str)],
    ) -> Vec<(&'a str, &'a str)> {
        base.iter().chain(more).copied().collect()
    }

    #[test]
    fn sweep_values_appear_with_their_labels() {
        let m = metrics();
        m.publish_sweep(&report("w1", vec![workload("chat", &[1, 2, 4])]));
        let text = m.encode();

        let ttft = |c: &str, p: &str| {
            get(
                &text,
                "llmprobe_sweep_ttft_seconds",
                &[
                    ("target", "w1"),
                    ("model", "qwen"),
                    ("workload", "chat"),
                    ("concurrency", c),
                    ("percentile", p),
                ],
            )
        };
        assert_eq!(ttft("1", "50"), Some(0.1));
        assert_eq!(ttft("2", "95"), Some(0.4));
        assert_eq!(ttft("4", "99"), Some(1.2000000000000002));
        assert_eq!(
            get(
                &text,
                "llmprobe_sweep_latency_seconds",
                &with(&W1C1, &[("percentile", "95")])
            ),
            Some(4.0)
        );
        assert_eq!(
            get(
                &text,
                "llmprobe_sweep_generation_tokens_per_second",
                &with(&W1C1, &[("percentile", "50")])
            ),
            Some(50.0)
        );
        assert_eq!(
            get(
                &text,
                "llmprobe_sweep_inter_token_latency_seconds",
                &with(&W1C1, &[("percentile", "50")])
            ),
            Some(0.01)
        );
        assert_eq!(
            get(
                &text,
                "llmprobe_sweep_samples",
                &with(&W1C1, &[("quantity", "inter_token_latency")])
            ),
            Some(500.0)
        );
        assert_eq!(
            get(
                &text,
                "llmprobe_sweep_samples",
                &with(&W1C1, &[("quantity", "generation_speed")])
            ),
            Some(10.0)
        );
        assert_eq!(
            get(&text, "llmprobe_sweep_throughput_tokens_per_second", &W1C1),
            Some(40.0)
        );
        assert_eq!(
            get(&text, "llmprobe_sweep_shed_ratio", &W1C1),
            Some(2.0 / 12.0)
        );
        assert_eq!(get(&text, "llmprobe_sweep_error_ratio", &W1C1), Some(0.0));
        assert_eq!(
            get(
                &text,
                "llmprobe_sweep_requests",
                &with(&W1C1, &[("outcome", "shed")])
            ),
            Some(2.0)
        );
        assert_eq!(
            get(
                &text,
                "llmprobe_sweep_requests",
                &with(&W1C1, &[("outcome", "timeout")])
            ),
            Some(0.0),
            "every outcome is exported, zeros included"
        );
        assert_eq!(count(&text, "llmprobe_sweep_requests", &W1C1), 8);

        let wl = [("target", "w1"), ("model", "qwen"), ("workload", "chat")];
        assert_eq!(
            get(&text, "llmprobe_capacity_knee_concurrency", &wl),
            Some(4.0)
        );
        assert_eq!(
            get(&text, "llmprobe_capacity_throughput_tokens_per_second", &wl),
            Some(123.0)
        );
        assert_eq!(
            get(&text, "llmprobe_recommended_max_in_flight", &wl),
            Some(3.0)
        );
        assert_eq!(
            get(&text, "llmprobe_capacity_saturation_concurrency", &wl),
            Some(4.0)
        );
        let t = [("target", "w1")];
        assert_eq!(get(&text, "llmprobe_sweep_success", &t), Some(1.0));
        assert_eq!(
            get(&text, "llmprobe_sweep_duration_seconds", &t),
            Some(60.0)
        );
        assert_eq!(
            get(
                &text,
                "llmprobe_sweep_last_completion_timestamp_seconds",
                &t
            ),
            Some(1_700_000_000.0)
        );
        assert_eq!(
            get(
                &text,
                "llmprobe_sweeps_total",
                &[("target", "w1"), ("result", "ok")]
            ),
            Some(1.0)
        );
        assert_eq!(
            get(
                &text,
                "llmprobe_sweeps_total",
                &[("target", "w1"), ("result", "failed")]
            ),
            Some(0.0)
        );
        for family in [
            "llmprobe_sweep_ttft_seconds",
            "llmprobe_sweep_samples",
            "llmprobe_sweep_requests",
            "llmprobe_capacity_knee_concurrency",
            "llmprobe_sweep_success",
        ] {
            assert!(
                text.contains(&format!("# HELP {family} ")),
                "{family} has HELP"
            );
            assert!(
                text.contains(&format!("# TYPE {family} gauge")),
                "{family} is a gauge"
            );
        }
    }

    #[test]
    fn a_new_report_replaces_the_old_one_as_a_whole() {
        let m = metrics();
        m.publish_sweep(&report(
            "w1",
            vec![workload("chat", &[1, 2, 4, 8]), workload("docs", &[1, 2])],
        ));
        m.publish_sweep(&report("w2", vec![workload("chat", &[1])]));
        let before = m.encode();
        assert_eq!(
            count(&before, "llmprobe_sweep_ttft_seconds", &[("target", "w1")]),
            18
        );

        let mut second = report("w1", vec![workload("chat", &[1, 2])]);
        second.workloads[0].capacity.saturation_concurrency = None;
        second.finished_at_unix_seconds = 1_700_000_900.0;
        m.publish_sweep(&second);
        let text = m.encode();

        let w1 = [("target", "w1")];
        assert_eq!(count(&text, "llmprobe_sweep_ttft_seconds", &w1), 6);
        assert_eq!(
            count(
                &text,
                "llmprobe_sweep_latency_seconds",
                &[("target", "w1"), ("concurrency", "8")]
            ),
            0
        );
        for family in [
            "llmprobe_sweep_requests",
            "llmprobe_sweep_samples",
            "llmprobe_sweep_throughput_tokens_per_second",
            "llmprobe_capacity_knee_concurrency",
            "llmprobe_recommended_max_in_flight",
        ] {
            assert_eq!(
                count(&text, family, &[("target", "w1"), ("workload", "docs")]),
                0,
                "{family}: workload docs is gone"
            );
        }
        assert_eq!(
            count(&text, "llmprobe_capacity_saturation_concurrency", &w1),
            0
        );
        assert_eq!(
            get(
                &text,
                "llmprobe_sweep_last_completion_timestamp_seconds",
                &w1
            ),
            Some(1_700_000_900.0)
        );
        assert_eq!(
            get(
                &text,
                "llmprobe_sweeps_total",
                &[("target", "w1"), ("result", "ok")]
            ),
            Some(2.0)
        );
        // The other target is untouched.
        assert_eq!(
            count(&text, "llmprobe_sweep_ttft_seconds", &[("target", "w2")]),
            3
        );
    }

    #[test]
    fn results_are_rendered_again_only_after_a_change() {
        let m = metrics();
        m.publish_sweep(&report("w1", vec![workload("chat", &[1, 2])]));
        let first = m.snapshot.text();
        assert!(Arc::ptr_eq(&first, &m.snapshot.text()), "nothing changed");
        m.publish_gateway_overhead("gw", "latency", &pct(30, 0.002));
        let second = m.snapshot.text();
        assert!(!Arc::ptr_eq(&first, &second));
        assert!(second.contains("llmprobe_gateway_overhead_seconds{"));
        m.forget_pair("gw");
        assert!(!m.encode().contains("llmprobe_gateway_overhead_seconds{"));
    }

    #[test]
    fn a_failed_sweep_keeps_the_last_results_and_reports_failure() {
        let m = metrics();
        m.publish_sweep(&report("w1", vec![workload("chat", &[1, 2])]));
        let mut failed = report("w1", vec![workload("chat", &[1])]);
        failed.success = false;
        failed.error = Some("connection refused".to_string());
        failed.duration_seconds = 5.0;
        failed.finished_at_unix_seconds = 1_700_009_999.0;
        failed.workloads[0].capacity.knee_concurrency = 0;
        m.publish_sweep(&failed);
        let text = m.encode();

        let t = [("target", "w1")];
        assert_eq!(get(&text, "llmprobe_sweep_success", &t), Some(0.0));
        assert_eq!(get(&text, "llmprobe_sweep_duration_seconds", &t), Some(5.0));
        assert_eq!(
            get(
                &text,
                "llmprobe_sweep_last_completion_timestamp_seconds",
                &t
            ),
            Some(1_700_000_000.0)
        );
        assert_eq!(count(&text, "llmprobe_sweep_ttft_seconds", &t), 6);
        assert_eq!(
            get(
                &text,
                "llmprobe_capacity_knee_concurrency",
                &[("target", "w1"), ("model", "qwen"), ("workload", "chat")]
            ),
            Some(2.0)
        );
        assert_eq!(
            get(
                &text,
                "llmprobe_sweeps_total",
                &[("target", "w1"), ("result", "failed")]
            ),
            Some(1.0)
        );
        assert!(
            !text.contains("connection refused"),
            "errors never become labels"
        );
    }

    #[test]
    fn a_failed_first_sweep_exports_only_success_and_duration() {
        let m = metrics();
        let mut failed = report("w1", vec![workload("chat", &[1])]);
        failed.success = false;
        m.publish_sweep(&failed);
        let text = m.encode();
        assert_eq!(
            get(&text, "llmprobe_sweep_success", &[("target", "w1")]),
            Some(0.0)
        );
        assert_eq!(
            count(
                &text,
                "llmprobe_sweep_last_completion_timestamp_seconds",
                &[]
            ),
            0
        );
        assert_eq!(count(&text, "llmprobe_sweep_ttft_seconds", &[]), 0);
        assert_eq!(count(&text, "llmprobe_capacity_knee_concurrency", &[]), 0);
    }

    #[test]
    fn forget_target_removes_every_series_of_the_target() {
        let m = metrics();
        for target in ["w1", "w2"] {
            m.publish_sweep(&report(target, vec![workload("chat", &[1, 2])]));
            m.observe_request(target, "qwen", "chat", &ok_sample());
            m.observe_request(
                target,
                "qwen",
                "chat",
                &Sample::failed(Outcome::Shed, Some(503), "busy"),
            );
            m.set_target_info(target, &[("gpu".to_string(), "L40S".to_string())]);
            m.sweep_postponed(target);
        }
        m.forget_target("w1");
        let text = m.encode();

        let leftovers: Vec<String> = parse(&text)
            .into_iter()
            .filter(|(_, l, _)| l.get("target").map(String::as_str) == Some("w1"))
            .map(|(n, l, _)| format!("{n}{l:?}"))
            .collect();
        assert!(leftovers.is_empty(), "left over: {leftovers:?}");
        assert_eq!(
            count(&text, "llmprobe_sweep_ttft_seconds", &[("target", "w2")]),
            6
        );
        assert_eq!(
            count(&text, "llmprobe_requests_total", &[("target", "w2")]),
            8
        );
        assert_eq!(count(&text, "llmprobe_target_info", &[("target", "w2")]), 1);
        assert_eq!(
            count(
                &text,
                "llmprobe_sweeps_postponed_total",
                &[("target", "w2")]
            ),
            1
        );

        // A target added again starts from zero.
        m.observe_request("w1", "qwen", "chat", &ok_sample());
        let text = m.encode();
        let ok = [
            ("target", "w1"),
            ("model", "qwen"),
            ("workload", "chat"),
            ("outcome", "ok"),
        ];
        assert_eq!(get(&text, "llmprobe_requests_total", &ok), Some(1.0));
    }

    #[test]
    fn a_percentile_without_samples_is_omitted() {
        let m = metrics();
        let mut r = report("w1", vec![workload("chat", &[1])]);
        let l = &mut r.workloads[0].levels[0];
        l.ttft_seconds = Percentiles::default();
        l.generation_tokens_per_second = Percentiles {
            count: 1,
            p50: Some(7.0),
            p95: None,
            p99: None,
        };
        m.publish_sweep(&r);
        let text = m.encode();
        assert_eq!(count(&text, "llmprobe_sweep_ttft_seconds", &[]), 0);
        assert_eq!(
            get(
                &text,
                "llmprobe_sweep_samples",
                &with(&W1C1, &[("quantity", "ttft")])
            ),
            Some(0.0)
        );
        assert_eq!(
            count(&text, "llmprobe_sweep_generation_tokens_per_second", &[]),
            1
        );
        assert_eq!(
            get(
                &text,
                "llmprobe_sweep_generation_tokens_per_second",
                &with(&W1C1, &[("percentile", "50")])
            ),
            Some(7.0)
        );
        assert_eq!(count(&text, "llmprobe_sweep_latency_seconds", &[]), 3);
    }

    #[test]
    fn requests_count_by_outcome_and_only_ok_ones_feed_latency() {
        let m = metrics();
        m.observe_request("w1", "qwen", "chat", &ok_sample());
        m.observe_request(
            "w1",
            "qwen",
            "chat",
            &Sample::failed(Outcome::Timeout, None, "timed out"),
        );
        let mut partial = ok_sample();
        partial.outcome = Outcome::ProtocolError;
        m.observe_request("w1", "qwen", "chat", &partial);
        let text = m.encode();

        let base = [("target", "w1"), ("model", "qwen"), ("workload", "chat")];
        let outcome = |o: &'static str| {
            get(
                &text,
                "llmprobe_requests_total",
                &with(&base, &[("outcome", o)]),
            )
        };
        assert_eq!(outcome("ok"), Some(1.0));
        assert_eq!(outcome("timeout"), Some(1.0));
        assert_eq!(outcome("protocol_error"), Some(1.0));
        assert_eq!(
            outcome("cancelled"),
            Some(0.0),
            "all outcomes start at zero"
        );
        assert_eq!(
            get(&text, "llmprobe_request_duration_seconds_count", &base),
            Some(1.0)
        );
        assert_eq!(
            get(&text, "llmprobe_request_duration_seconds_sum", &base),
            Some(1.5)
        );
        assert_eq!(
            get(&text, "llmprobe_request_ttft_seconds_count", &base),
            Some(1.0)
        );
        assert_eq!(
            get(
                &text,
                "llmprobe_request_ttft_seconds_bucket",
                &with(&base, &[("le", "0.25")])
            ),
            Some(1.0)
        );
        assert_eq!(
            get(
                &text,
                "llmprobe_request_ttft_seconds_bucket",
                &with(&base, &[("le", "0.1")])
            ),
            Some(0.0)
        );
        assert_eq!(
            get(&text, "llmprobe_output_tokens_total", &base),
            Some(100.0)
        );
        assert_eq!(
            get(&text, "llmprobe_prompt_tokens_total", &base),
            Some(40.0)
        );
    }

    #[test]
    fn target_info_is_replaced_and_its_label_names_sanitised() {
        let m = metrics();
        let s = |a: &str, b: &str| (a.to_string(), b.to_string());
        m.set_target_info("w1", &[s("gpu", "A100"), s("rack-id", "r1")]);
        m.set_target_info(
            "w1",
            &[
                s("gpu", "L40S"),
                s("gpu", "H100"),
                s("9zone", "eu"),
                s("__meta", "x"),
                s("target", "evil"),
                s("-", "dropped"),
                s("model", "qwen"),
            ],
        );
        let text = m.encode();
        assert_eq!(count(&text, "llmprobe_target_info", &[]), 1);
        assert_eq!(
            get(
                &text,
                "llmprobe_target_info",
                &[
                    ("target", "w1"),
                    ("model", "qwen"),
                    ("server", ""),
                    ("server_version", ""),
                    ("gpu", "H100"),
                    ("driver", ""),
                    ("gpu_memory", ""),
                    ("os", ""),
                    ("via_gateway", ""),
                    ("_9zone", "eu"),
                    ("_meta", "x"),
                ]
            ),
            Some(1.0)
        );
    }

    #[test]
    fn label_names_are_sanitised() {
        assert_eq!(sanitize_label_name("gpu").as_deref(), Some("gpu"));
        assert_eq!(
            sanitize_label_name("gpu-memory.total").as_deref(),
            Some("gpu_memory_total")
        );
        assert_eq!(sanitize_label_name("1x").as_deref(), Some("_1x"));
        assert_eq!(sanitize_label_name("__name__").as_deref(), Some("_name__"));
        assert_eq!(sanitize_label_name("zoné").as_deref(), Some("zon_"));
        assert_eq!(sanitize_label_name("").as_deref(), None);
        assert_eq!(sanitize_label_name("__").as_deref(), None);
    }

    #[test]
    fn gateway_overhead_is_published_and_forgotten() {
        let m = metrics();
        m.publish_gateway_overhead("gw", "latency", &pct(30, 0.002));
        m.publish_gateway_overhead(
            "gw",
            "ttft",
            &Percentiles {
                count: 0,
                ..Percentiles::default()
            },
        );
        m.publish_gateway_overhead("other", "latency", &pct(30, 0.001));
        let text = m.encode();
        assert_eq!(
            get(
                &text,
                "llmprobe_gateway_overhead_seconds",
                &[
                    ("pair", "gw"),
                    ("quantity", "latency"),
                    ("percentile", "95")
                ]
            ),
            Some(0.004)
        );
        assert_eq!(
            count(
                &text,
                "llmprobe_gateway_overhead_seconds",
                &[("quantity", "ttft")]
            ),
            0
        );
        assert_eq!(
            get(
                &text,
                "llmprobe_gateway_overhead_samples",
                &[("pair", "gw"), ("quantity", "ttft")]
            ),
            Some(0.0)
        );
        m.forget_pair("gw");
        let text = m.encode();
        assert_eq!(
            count(
                &text,
                "llmprobe_gateway_overhead_seconds",
                &[("pair", "gw")]
            ),
            0
        );
        assert_eq!(
            count(
                &text,
                "llmprobe_gateway_overhead_samples",
                &[("pair", "gw")]
            ),
            0
        );
        assert_eq!(
            count(
                &text,
                "llmprobe_gateway_overhead_seconds",
                &[("pair", "other")]
            ),
            3
        );
    }

    #[test]
    fn self_metrics_are_exported() {
        let m = metrics();
        let a = m.request_in_flight();
        let b = m.request_in_flight();
        assert_eq!(
            get(&m.encode(), "llmprobe_in_flight_requests", &[]),
            Some(2.0)
        );
        drop(a);
        drop(b);
        m.config_reloaded(false);
        let text = m.encode();
        assert_eq!(get(&text, "llmprobe_in_flight_requests", &[]), Some(0.0));
        assert_eq!(
            get(&text, "llmprobe_config_last_reload_successful", &[]),
            Some(0.0)
        );
        assert!(
            get(
                &text,
                "llmprobe_config_last_reload_success_timestamp_seconds",
                &[]
            )
            .unwrap_or(0.0)
                > 1.6e9
        );
        assert_eq!(
            get(
                &text,
                "llmprobe_build_info",
                &[("version", env!("CARGO_PKG_VERSION"))]
            ),
            Some(1.0)
        );
        #[cfg(target_os = "linux")]
        assert!(text.contains("process_resident_memory_bytes"));
    }

    #[test]
    fn sweep_counters_start_at_zero_with_the_target() {
        let m = metrics();
        m.target_started("w1");
        let text = m.encode();
        for (name, labels) in [
            (
                "llmprobe_sweeps_total",
                &[("target", "w1"), ("result", "ok")][..],
            ),
            (
                "llmprobe_sweeps_total",
                &[("target", "w1"), ("result", "failed")][..],
            ),
            ("llmprobe_sweeps_postponed_total", &[("target", "w1")][..]),
        ] {
            assert_eq!(get(&text, name, labels), Some(0.0), "{name} {labels:?}");
        }
        m.forget_target("w1");
        assert!(!m.encode().contains("target=\"w1\""));
    }

    #[test]
    fn two_metrics_can_live_side_by_side() {
        // No global registry: tests and reloads may build several.
        let a = metrics();
        let b = metrics();
        a.sweep_postponed("w1");
        assert_eq!(
            count(&b.encode(), "llmprobe_sweeps_postponed_total", &[]),
            0
        );
    }
}
