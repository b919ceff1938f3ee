//! The results of the latest completed sweep of each target and the latest
//! measurement of each gateway pair, held as whole reports and rendered to
//! text when they change; every scrape until the next change reuses that
//! text (with 100 targets rendering takes over 100 ms, and results change
//! only when a sweep ends). Replacing a report is one pointer swap under a
//! lock, so a scrape never mixes two sweeps, and a level or workload missing
//! from the new report simply stops being exported (no stale series to
//! delete).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use prometheus::core::Desc;
use prometheus::proto::{self, LabelPair, MetricFamily, MetricType};

use crate::config::Target;
use crate::metrics::names::{self, quantity, Spec};
use crate::metrics::{encode_into, read, write};
use crate::stats::report::{PairReport, Percentiles, Setup, SweepReport};
use crate::stats::sample::Outcome;

/// The first label of `llmprobe_target_info`, never taken from a target's labels.
const TARGET_LABEL: &str = names::TARGET_INFO_LABELS[0];

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
pub(super) struct Results {
    sweeps: RwLock<BTreeMap<String, TargetSweeps>>,
    /// target -> label pairs of its info series (target label excluded).
    target_info: RwLock<BTreeMap<String, Vec<(String, String)>>>,
    /// pair -> overhead percentiles by quantity (in exposition order).
    gateway: RwLock<BTreeMap<String, [(&'static str, Percentiles); 2]>>,
    /// Bumped after every change: a rendering is reused while it is current.
    generation: AtomicU64,
    /// The latest rendering and the generation it shows.
    rendered: Mutex<Option<(u64, Arc<String>)>>,
}

/// Checks the names and label names of every result family, as registering
/// them would (they are rendered apart from the registry).
pub(super) fn check_names() -> Result<(), prometheus::Error> {
    for spec in names::RESULT_FAMILIES {
        Desc::new(
            spec.name.to_string(),
            spec.help.to_string(),
            spec.labels.iter().map(|l| l.to_string()).collect(),
            HashMap::new(),
        )?;
    }
    Ok(())
}

/// Labels of `llmprobe_target_info` for `target`: what the server told and
/// the output-limit field in use, then the configured labels (which win: an
/// operator may know better).
pub(super) fn target_info(
    target: &Target,
    setup: &Setup,
    max_tokens_field: &str,
) -> Vec<(String, String)> {
    let [model, server, server_version] = names::TARGET_INFO_FROM_SERVER;
    let mut info = vec![
        (model.to_string(), target.model.clone()),
        (server.to_string(), setup.server.clone()),
        (server_version.to_string(), setup.server_version.clone()),
        (
            names::TARGET_INFO_MAX_TOKENS_FIELD.to_string(),
            max_tokens_field.to_string(),
        ),
    ];
    info.extend(target.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    info
}

impl Results {
    /// Takes in a finished sweep; see [`Metrics::publish_sweep`](super::Metrics::publish_sweep).
    pub(super) fn publish_sweep(&self, report: &SweepReport) {
        {
            let mut sweeps = write(&self.sweeps);
            let entry = sweeps.entry(report.target.clone()).or_default();
            entry.success = report.success;
            entry.duration_seconds = report.duration_seconds;
            if report.success {
                entry.last_good = Some(Arc::new(report.clone()));
            }
        }
        self.changed();
    }

    /// Replaces the info series of `target`; see [`Metrics::set_target_info`](super::Metrics::set_target_info).
    pub(super) fn set_target_info(&self, target: &str, labels: &[(String, String)]) {
        let mut extra: BTreeMap<String, String> = BTreeMap::new();
        for (name, value) in labels {
            if let Some(name) = sanitize_label_name(name) {
                if name != TARGET_LABEL {
                    extra.insert(name, value.clone());
                }
            }
        }
        let mut pairs: Vec<(String, String)> = names::TARGET_INFO_LABELS[1..]
            .iter()
            .map(|name| (name.to_string(), extra.remove(*name).unwrap_or_default()))
            .collect();
        pairs.extend(extra);
        write(&self.target_info).insert(target.to_string(), pairs);
        self.changed();
    }

    /// Replaces the overhead of the report's pair.
    pub(super) fn publish_pair(&self, report: &PairReport) {
        write(&self.gateway).insert(
            report.pair.clone(),
            [
                (quantity::LATENCY, report.latency_overhead_seconds),
                (quantity::TTFT, report.ttft_overhead_seconds),
            ],
        );
        self.changed();
    }

    /// Removes the results and info of `target`.
    pub(super) fn forget_target(&self, target: &str) {
        write(&self.sweeps).remove(target);
        write(&self.target_info).remove(target);
        self.changed();
    }

    /// Removes the overhead of `pair`.
    pub(super) fn forget_pair(&self, pair: &str) {
        write(&self.gateway).remove(pair);
        self.changed();
    }

    /// Marks the rendering stale; call after every change.
    fn changed(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// The text of every result family, rendered again only after a change.
    pub(super) fn text(&self) -> Arc<String> {
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
            out.add(
                &names::SWEEP_SUCCESS,
                &[t],
                if state.success { 1.0 } else { 0.0 },
            );
            out.add(&names::SWEEP_DURATION, &[t], state.duration_seconds);
            let Some(report) = &state.last_good else {
                continue;
            };
            out.add(
                &names::SWEEP_LAST_COMPLETION,
                &[t],
                report.finished_at_unix_seconds,
            );
            let m = report.model.as_str();
            for wl in &report.workloads {
                let w = wl.workload.as_str();
                for level in &wl.levels {
                    let concurrency = level.concurrency.to_string();
                    let c = concurrency.as_str();
                    let quantities: [(&Spec, &str, &Percentiles); 5] = [
                        (&names::SWEEP_TTFT, quantity::TTFT, &level.ttft_seconds),
                        (
                            &names::SWEEP_LATENCY,
                            quantity::LATENCY,
                            &level.latency_seconds,
                        ),
                        (
                            &names::SWEEP_ITL,
                            quantity::INTER_TOKEN_LATENCY,
                            &level.inter_token_latency_seconds,
                        ),
                        (
                            &names::SWEEP_GENERATION,
                            quantity::GENERATION_SPEED,
                            &level.generation_tokens_per_second,
                        ),
                        (
                            &names::SWEEP_CONNECT,
                            quantity::CONNECT,
                            &level.connect_seconds,
                        ),
                    ];
                    for (spec, quantity, p) in quantities {
                        for (percentile, value) in names::percentiles(p) {
                            if let Some(v) = value {
                                out.add(spec, &[t, m, w, c, percentile], v);
                            }
                        }
                        out.add(
                            &names::SWEEP_SAMPLES,
                            &[t, m, w, c, quantity],
                            p.count as f64,
                        );
                    }
                    out.add(
                        &names::SWEEP_THROUGHPUT,
                        &[t, m, w, c],
                        level.throughput_tokens_per_second,
                    );
                    out.add(
                        &names::SWEEP_ACHIEVED,
                        &[t, m, w, c],
                        level.achieved_concurrency,
                    );
                    out.add(
                        &names::SWEEP_NEW_CONNECTIONS,
                        &[t, m, w, c],
                        level.new_connections as f64,
                    );
                    out.add(&names::SWEEP_SHED, &[t, m, w, c], level.shed_ratio);
                    out.add(&names::SWEEP_ERROR, &[t, m, w, c], level.error_ratio);
                    for outcome in Outcome::ALL {
                        let n = level.count(outcome);
                        out.add(
                            &names::SWEEP_REQUESTS,
                            &[t, m, w, c, outcome.as_str()],
                            n as f64,
                        );
                    }
                }
                let cap = &wl.capacity;
                out.add(
                    &names::CAPACITY_KNEE,
                    &[t, m, w],
                    f64::from(cap.knee_concurrency),
                );
                out.add(
                    &names::CAPACITY_KNEE_LOWER_BOUND,
                    &[t, m, w],
                    if cap.knee_is_lower_bound { 1.0 } else { 0.0 },
                );
                out.add(
                    &names::CAPACITY_THROUGHPUT,
                    &[t, m, w],
                    cap.throughput_tokens_per_second,
                );
                out.add(
                    &names::RECOMMENDED,
                    &[t, m, w],
                    f64::from(cap.recommended_max_in_flight),
                );
                if let Some(s) = cap.saturation_concurrency {
                    out.add(&names::CAPACITY_SATURATION, &[t, m, w], f64::from(s));
                }
            }
        }
    }

    /// Builds `llmprobe_target_info`.
    fn collect_info(&self, out: &mut Families) {
        for (target, pairs) in read(&self.target_info).iter() {
            let mut labels = vec![label(TARGET_LABEL, target)];
            labels.extend(pairs.iter().map(|(n, v)| label(n, v)));
            out.add_pairs(&names::TARGET_INFO, labels, 1.0);
        }
    }

    /// Builds the gateway overhead families.
    fn collect_gateway(&self, out: &mut Families) {
        for (pair, quantities) in read(&self.gateway).iter() {
            for (quantity, p) in quantities {
                for (percentile, value) in names::percentiles(p) {
                    if let Some(v) = value {
                        out.add(&names::GATEWAY_OVERHEAD, &[pair, quantity, percentile], v);
                    }
                }
                out.add(&names::GATEWAY_SAMPLES, &[pair, quantity], p.count as f64);
            }
        }
    }
}

/// Makes `name` a valid Prometheus label name, or None when nothing is left.
/// Names starting with `__` are reserved by Prometheus, so a leading run of
/// underscores is shortened to one.
pub(super) fn sanitize_label_name(name: &str) -> Option<String> {
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
