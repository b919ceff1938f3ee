//! The results of the latest completed sweep of each target and the latest
//! measurement of each gateway pair, held as whole reports and rendered to
//! text when they change; every scrape until the next change reuses that
//! text (with 100 targets x 3 workloads x 8 levels rendering takes about
//! 30 ms, and results change only when a sweep ends). Replacing a report is one pointer swap under a
//! lock, so a scrape never mixes two sweeps, and a level or workload missing
//! from the new report simply stops being exported (no stale series to
//! delete).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use std::fmt::Write;

use prometheus::core::Desc;

use crate::config::Target;
use crate::metrics::names::{self, quantity, Spec};
use crate::metrics::{read, write};
use crate::stats::report::{LevelRole, PairReport, Percentiles, Setup, SweepReport};
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
    rendered: Mutex<Option<(u64, Arc<Rendered>)>>,
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
    pub(super) fn text(&self) -> Arc<Rendered> {
        // Held while rendering, so concurrent scrapes render once.
        let mut rendered = self.rendered.lock().unwrap_or_else(PoisonError::into_inner);
        // Read before rendering: a change made meanwhile leaves it stale.
        let generation = self.generation.load(Ordering::Acquire);
        if let Some((g, text)) = rendered.as_ref() {
            if *g == generation {
                return Arc::clone(text);
            }
        }
        let mut families = Families::new(rendered.as_ref().map(|(_, r)| r.as_ref()));
        self.collect_sweeps(&mut families);
        self.collect_info(&mut families);
        self.collect_gateway(&mut families);
        let text = Arc::new(families.into_rendered());
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
                    // A level stopped early completed too few requests for
                    // its throughput to mean anything: left out, as a
                    // percentile without samples is.
                    if level.stopped_early.is_none() {
                        out.add(
                            &names::SWEEP_THROUGHPUT,
                            &[t, m, w, c],
                            level.throughput_tokens_per_second,
                        );
                    }
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
                    let early = level.stopped_early;
                    out.add(
                        &names::SWEEP_STOPPED_EARLY,
                        &[t, m, w, c],
                        if early.is_some() { 1.0 } else { 0.0 },
                    );
                    out.add(
                        &names::SWEEP_REQUESTS_SAVED,
                        &[t, m, w, c],
                        early.map_or(0.0, |e| e.saved_requests as f64),
                    );
                    out.add(
                        &names::SWEEP_REFINEMENT,
                        &[t, m, w, c],
                        if level.role == LevelRole::Refinement {
                            1.0
                        } else {
                            0.0
                        },
                    );
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
            let labels = std::iter::once((TARGET_LABEL, target.as_str()))
                .chain(pairs.iter().map(|(n, v)| (n.as_str(), v.as_str())));
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

/// One rendering of every result family: a block of text per family (its
/// `# HELP` and `# TYPE` lines, then its series), in name order. Kept as
/// blocks so that a response body can lend each one instead of copying
/// them into one string (megabytes with a thousand targets).
#[derive(Debug, Default)]
pub(super) struct Rendered {
    families: Vec<(&'static str, String)>,
}

impl Rendered {
    /// The blocks, in exposition order.
    pub(super) fn blocks(&self) -> impl Iterator<Item = &str> {
        self.families.iter().map(|(_, text)| text.as_str())
    }

    /// Total size in bytes.
    pub(super) fn len(&self) -> usize {
        self.families.iter().map(|(_, t)| t.len()).sum()
    }

    /// Every block in one string.
    #[cfg(test)]
    pub(super) fn concat(&self) -> String {
        self.blocks().collect()
    }

    /// Block `i` lent to a response body (empty when there is none).
    pub(super) fn block_bytes(self: &Arc<Self>, i: usize) -> bytes::Bytes {
        bytes::Bytes::from_owner(Block(Arc::clone(self), i))
    }

    /// Number of blocks.
    pub(super) fn count(&self) -> usize {
        self.families.len()
    }
}

/// Block `.1` of a rendering, as bytes.
struct Block(Arc<Rendered>, usize);

impl AsRef<[u8]> for Block {
    fn as_ref(&self) -> &[u8] {
        self.0
            .families
            .get(self.1)
            .map_or(&[][..], |(_, t)| t.as_bytes())
    }
}

/// Families being written as text during one rendering, keyed by name so
/// that each family stays one block; only families with at least one
/// series get one. Written directly as text (format 0.0.4, as the
/// prometheus crate's encoder writes it): building its protobuf tree first
/// took more memory than the text itself and most of the rendering time.
struct Families<'a> {
    blocks: BTreeMap<&'static str, String>,
    /// The previous rendering, whose block sizes size the new ones.
    previous: Option<&'a Rendered>,
}

impl<'a> Families<'a> {
    fn new(previous: Option<&'a Rendered>) -> Self {
        Families {
            blocks: BTreeMap::new(),
            previous,
        }
    }

    /// The block of `spec`, started with its header when new.
    fn block(&mut self, spec: &Spec) -> &mut String {
        let previous = self.previous;
        self.blocks.entry(spec.name).or_insert_with(|| {
            // Room for what the family held last time and a little more,
            // so that a block is allocated once rather than doubled.
            let last = previous
                .and_then(|r| r.families.iter().find(|(n, _)| *n == spec.name))
                .map_or(0, |(_, t)| t.len());
            let mut text = String::with_capacity(last + last / 16 + 256);
            family_header(&mut text, spec, "gauge");
            text
        })
    }

    /// Adds a gauge series whose label values follow `spec.labels`.
    fn add(&mut self, spec: &Spec, values: &[&str], value: f64) {
        let out = self.block(spec);
        write_series(
            out,
            spec.name,
            spec.labels.iter().copied().zip(values.iter().copied()),
            value,
        );
    }

    /// Adds a gauge series with explicit label pairs.
    fn add_pairs<'l>(
        &mut self,
        spec: &Spec,
        labels: impl IntoIterator<Item = (&'l str, &'l str)>,
        value: f64,
    ) {
        let out = self.block(spec);
        write_series(out, spec.name, labels, value);
    }

    fn into_rendered(self) -> Rendered {
        Rendered {
            families: self.blocks.into_iter().collect(),
        }
    }
}

/// Appends the `# HELP` and `# TYPE` lines of a family of type `kind`.
pub(super) fn family_header(out: &mut String, spec: &Spec, kind: &str) {
    out.push_str("# HELP ");
    out.push_str(spec.name);
    out.push(' ');
    escape_into(out, spec.help, false);
    out.push_str("\n# TYPE ");
    out.push_str(spec.name);
    out.push(' ');
    out.push_str(kind);
    out.push('\n');
}

/// Appends one series line: `name{label="value",...} value`.
pub(super) fn write_series<'l>(
    out: &mut String,
    name: &str,
    labels: impl IntoIterator<Item = (&'l str, &'l str)>,
    value: f64,
) {
    out.push_str(name);
    let mut separator = '{';
    for (label, v) in labels {
        out.push(separator);
        out.push_str(label);
        out.push_str("=\"");
        escape_into(out, v, true);
        out.push('"');
        separator = ',';
    }
    if separator == ',' {
        out.push('}');
    }
    // Writing to a String cannot fail.
    let _ = writeln!(out, " {value}");
}

/// Appends `s` escaped as the text format wants: backslash and newline,
/// and in label values the double quote.
fn escape_into(out: &mut String, s: &str, quote: bool) {
    if !s.contains(['\\', '\n', '"']) {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if quote => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::proto::{self, LabelPair, MetricFamily, MetricType};

    /// The same series through the prometheus crate's protobuf and encoder.
    fn through_the_crate(spec: &Spec, series: &[(Vec<(&str, &str)>, f64)]) -> String {
        let mut mf = MetricFamily::default();
        mf.set_name(spec.name.to_string());
        mf.set_help(spec.help.to_string());
        mf.set_field_type(MetricType::GAUGE);
        for (labels, value) in series {
            let pairs = labels
                .iter()
                .map(|(n, v)| {
                    let mut p = LabelPair::default();
                    p.set_name(n.to_string());
                    p.set_value(v.to_string());
                    p
                })
                .collect();
            let mut gauge = proto::Gauge::default();
            gauge.set_value(*value);
            let mut m = proto::Metric::from_label(pairs);
            m.set_gauge(gauge);
            mf.mut_metric().push(m);
        }
        let mut out = String::new();
        crate::metrics::encode_into(&[mf], &mut out);
        out
    }

    #[test]
    fn text_is_written_as_the_prometheus_encoder_writes_it() {
        let spec = Spec {
            name: "llmprobe_test_gauge",
            help: "A help with a \\ backslash\nand a newline \"quoted\".",
            labels: &["target", "workload"],
        };
        let series: Vec<(Vec<(&str, &str)>, f64)> = vec![
            (vec![("target", "a"), ("workload", "chat")], 0.25),
            (
                vec![("target", "q\"uo\\te"), ("workload", "new\nline")],
                3.0,
            ),
            (vec![("target", "é"), ("workload", "")], 1e-7),
            (vec![("target", "big"), ("workload", "x")], 12345678901.5),
            (vec![("target", "inf"), ("workload", "x")], f64::INFINITY),
            (vec![("target", "nan"), ("workload", "x")], f64::NAN),
            (vec![("target", "neg"), ("workload", "x")], -0.0),
        ];
        let mut families = Families::new(None);
        for (labels, value) in &series {
            let values: Vec<&str> = labels.iter().map(|(_, v)| *v).collect();
            families.add(&spec, &values, *value);
        }
        let rendered = families.into_rendered();
        assert_eq!(rendered.count(), 1);
        assert_eq!(
            rendered.blocks().collect::<String>(),
            through_the_crate(&spec, &series)
        );
    }

    #[test]
    fn a_family_without_labels_has_no_braces() {
        let spec = Spec {
            name: "llmprobe_test_plain",
            help: "Plain.",
            labels: &[],
        };
        let mut families = Families::new(None);
        families.add(&spec, &[], 2.0);
        let text: String = families.into_rendered().blocks().collect();
        assert_eq!(text, through_the_crate(&spec, &[(vec![], 2.0)]));
        assert!(text.ends_with("\nllmprobe_test_plain 2\n"), "{text}");
    }

    #[test]
    fn blocks_are_sized_from_the_previous_rendering() {
        let spec = Spec {
            name: "llmprobe_test_sized",
            help: "Sized.",
            labels: &["target"],
        };
        let names: Vec<String> = (0..500).map(|i| format!("t{i:05}")).collect();
        let render = |previous: Option<&Rendered>| {
            let mut families = Families::new(previous);
            for n in &names {
                families.add(&spec, &[n], 1.0);
            }
            families.into_rendered()
        };
        let first = render(None);
        let second = render(Some(&first));
        let (len, cap) = (second.families[0].1.len(), second.families[0].1.capacity());
        assert_eq!(len, first.len());
        // Allocated once with a little room, not doubled.
        assert!(cap >= len && cap <= len + len / 16 + 256, "{len} in {cap}");
    }
}
