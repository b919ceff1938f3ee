//! The results of the latest completed sweep of each target and the latest
//! measurement of each gateway pair, kept as the text they are exported as,
//! written when they change, in pieces per target (or pair): a sweep's end
//! writes only its target's (tens of microseconds), and a scrape copies
//! every piece into the response as it is (see [`super::exposition`]).
//! Replacing a piece is one pointer swap under a lock, so a scrape never
//! mixes two sweeps, and a level or workload missing from the new report
//! simply stops being exported (no stale series to delete).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use prometheus::core::Desc;

use crate::config::Target;
use crate::metrics::locks::{read, write};
use crate::metrics::names::{self, quantity, stat};
use crate::metrics::pieces::{Piece, PieceWriter, ResultsSource};
use crate::stats::decision::{Basis, Verdict};
use crate::stats::pair_report::PairReport;
use crate::stats::quantity::{Quantity, Reading};
use crate::stats::report::{LevelRole, LevelSummary, Setup, SweepReport};
use crate::stats::sample::Outcome;
use crate::stats::setup_error::Cause;
use crate::stats::sustained::Sustained;

/// The first label of `llmprobe_target_info`, never taken from a target's labels.
const TARGET_LABEL: &str = names::TARGET_INFO_LABELS[0];

/// The latest sweep of a target, good or not.
#[derive(Debug, Clone, Copy)]
struct LatestSweep {
    success: bool,
    /// The setup mistake that stopped it, if one did.
    setup_error: Option<Cause>,
    /// Its wall time.
    duration_seconds: f64,
}

/// What is exported about one target, and its text in two pieces: what
/// the latest successful report says (kept as text only: the report is
/// not held), and what changes without one (the latest sweep's success
/// and duration, the info series). The two hold different families.
#[derive(Debug, Default)]
struct TargetState {
    /// None until its first sweep ends.
    latest: Option<LatestSweep>,
    /// Label pairs of its info series (target label excluded); None until
    /// its server was described.
    info: Option<Vec<(String, String)>>,
    /// `latest` and `info` as text.
    piece: Arc<Piece>,
    /// The results of the latest successful sweep as text; they stay
    /// exported while later sweeps fail.
    good: Option<Arc<Piece>>,
}

impl TargetState {
    /// Writes the piece of `latest` and `info` again.
    fn render(&mut self, target: &str) {
        let mut out = PieceWriter::default();
        if let Some(latest) = self.latest {
            let success = if latest.success { 1.0 } else { 0.0 };
            out.add(&names::SWEEP_SUCCESS, &[target], success);
            if let Some(cause) = latest.setup_error {
                out.add(&names::TARGET_SETUP_ERROR, &[target, cause.as_str()], 1.0);
            }
            out.add(&names::SWEEP_DURATION, &[target], latest.duration_seconds);
        }
        if let Some(info) = &self.info {
            let labels = std::iter::once((TARGET_LABEL, target))
                .chain(info.iter().map(|(n, v)| (n.as_str(), v.as_str())));
            out.add_pairs(&names::TARGET_INFO, labels, 1.0);
        }
        self.piece = Arc::new(out.finish());
    }
}

/// Results exported at scrape time; see the module comment.
#[derive(Debug, Default)]
pub(super) struct Results {
    targets: RwLock<BTreeMap<String, TargetState>>,
    /// pair -> the text of its overhead percentiles.
    pairs: RwLock<BTreeMap<String, Arc<Piece>>>,
}

/// Checks the names and label names of every result family, as registering
/// them would (they are rendered apart from the registry).
pub(super) fn check_names() -> Result<(), prometheus::Error> {
    for spec in &names::RESULT_FAMILIES {
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
        // Written before taking the lock: scrapes and other sweeps go on.
        let good = report.success.then(|| {
            let mut out = PieceWriter::default();
            write_results(&mut out, report);
            Arc::new(out.finish())
        });
        let mut targets = write(&self.targets);
        let state = targets.entry(report.target.clone()).or_default();
        state.latest = Some(LatestSweep {
            success: report.success,
            setup_error: report.setup_error.as_ref().map(|e| e.cause),
            duration_seconds: report.duration_seconds,
        });
        if good.is_some() {
            state.good = good;
        }
        state.render(&report.target);
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
        let mut targets = write(&self.targets);
        let state = targets.entry(target.to_string()).or_default();
        state.info = Some(pairs);
        state.render(target);
    }

    /// Replaces the overhead of the report's pair.
    pub(super) fn publish_pair(&self, report: &PairReport) {
        let mut out = PieceWriter::default();
        let quantities = [
            (quantity::LATENCY, &report.latency_overhead_seconds),
            (quantity::TTFT, &report.ttft_overhead_seconds),
        ];
        let pair = report.pair.as_str();
        for (quantity, p) in quantities {
            for (percentile, value) in names::percentiles(p) {
                if let Some(v) = value {
                    out.add(&names::GATEWAY_OVERHEAD, &[pair, quantity, percentile], v);
                }
            }
            out.add(&names::GATEWAY_SAMPLES, &[pair, quantity], p.count as f64);
        }
        write(&self.pairs).insert(report.pair.clone(), Arc::new(out.finish()));
    }

    /// Removes the results and info of `target`.
    pub(super) fn forget_target(&self, target: &str) {
        write(&self.targets).remove(target);
    }

    /// Removes the overhead of `pair`.
    pub(super) fn forget_pair(&self, pair: &str) {
        write(&self.pairs).remove(pair);
    }

    /// Every result family, from the pieces as they are now (targets in
    /// name order, then pairs).
    pub(super) fn source(&self) -> ResultsSource {
        let mut pieces: Vec<Arc<Piece>> = Vec::new();
        for state in read(&self.targets).values() {
            pieces.push(Arc::clone(&state.piece));
            pieces.extend(state.good.clone());
        }
        pieces.extend(read(&self.pairs).values().cloned());
        ResultsSource::new(pieces)
    }

    /// The piece of `target`, if it has one.
    #[cfg(test)]
    pub(super) fn piece(&self, target: &str) -> Option<Arc<Piece>> {
        read(&self.targets)
            .get(target)
            .map(|s| Arc::clone(&s.piece))
    }

    /// Every result family in one string.
    #[cfg(test)]
    pub(super) fn text(&self) -> String {
        super::exposition::Exposition::new(vec![Box::new(self.source())]).into_string()
    }
}

/// Writes the evidence behind a level's verdict (labels: target, model,
/// workload, concurrency).
fn write_verdict(out: &mut PieceWriter, level: [&str; 4], v: &Verdict) {
    let [t, m, w, c] = level;
    let decided_by = v.decided_by.map_or("none", |b| b.as_str());
    out.add(
        &names::SWEEP_VERDICT,
        &[
            t,
            m,
            w,
            c,
            v.decision.as_str(),
            decided_by,
            v.counted_as.as_str(),
        ],
        1.0,
    );
    out.add(&names::SWEEP_VERDICT_REQUESTS, &level, v.requests as f64);
    out.add(
        &names::SWEEP_VERDICT_POOLED,
        &level,
        f64::from(v.pooled_sweeps),
    );
    // The bound of the test that decided (a pass has none): one series,
    // not three, per level of every target.
    let bound = match v.decided_by {
        Some(Basis::Shed) => Some((names::verdict_quantity::SHED, v.lower_bounds.shed_ratio)),
        Some(Basis::Errors) => Some((names::verdict_quantity::ERRORS, v.lower_bounds.error_ratio)),
        Some(Basis::P95Latency) => Some((names::verdict_quantity::SLOW, v.lower_bounds.slow_ratio)),
        Some(Basis::NoSuccess) | None => None,
    };
    if let Some((quantity, bound)) = bound {
        out.add(&names::SWEEP_VERDICT_BOUND, &[t, m, w, c, quantity], bound);
    }
}

/// Writes one level's series (labels: target, model, workload); a level
/// that does not say when it was measured counts as measured at
/// `finished_at`, the sweep's end.
fn write_level(out: &mut PieceWriter, workload: [&str; 3], level: &LevelSummary, finished_at: f64) {
    let [t, m, w] = workload;
    let concurrency = level.concurrency.to_string();
    let c = concurrency.as_str();
    // Documents written before the field: the sweep's end.
    let measured_at = if level.measured_at_unix_seconds > 0.0 {
        level.measured_at_unix_seconds
    } else {
        finished_at
    };
    out.add(&names::SWEEP_LEVEL_MEASURED, &[t, m, w, c], measured_at);
    for (spec, q) in names::RESULT_FAMILIES.iter().zip(Quantity::ALL) {
        match q.read(level) {
            Reading::Percentiles(p) => {
                for (percentile, value) in names::percentiles(p) {
                    if let Some(v) = value {
                        out.add(spec, &[t, m, w, c, percentile], v);
                    }
                }
                let label = q.spec().label;
                out.add(&names::SWEEP_SAMPLES, &[t, m, w, c, label], p.count as f64);
            }
            Reading::Value(Some(v)) => out.add(spec, &[t, m, w, c], v),
            Reading::Value(None) => {}
        }
    }
    out.add(
        &names::SWEEP_REASONING_TOKENS,
        &[t, m, w, c],
        level.reasoning_tokens as f64,
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
    if let Some(v) = &level.verdict {
        write_verdict(out, [t, m, w, c], v);
    }
    if let Some(s) = level.server.as_ref().filter(|s| s.readings > 0) {
        let gauges = [
            (&names::SWEEP_SERVER_RUNNING, s.running),
            (&names::SWEEP_SERVER_WAITING, s.waiting),
        ];
        for (spec, g) in gauges {
            if let Some(g) = g {
                out.add(spec, &[t, m, w, c, stat::MAX], g.max);
                out.add(spec, &[t, m, w, c, stat::MEAN], g.mean);
            }
        }
        if let Some(u) = s.kv_cache_usage_max {
            out.add(&names::SWEEP_SERVER_KV_CACHE, &[t, m, w, c], u);
        }
        if let Some(p) = s.preemptions {
            out.add(&names::SWEEP_SERVER_PREEMPTIONS, &[t, m, w, c], p);
        }
    }
    if let Some(lag) = &level.client_lag {
        out.add(
            &names::SWEEP_CLIENT_LAG,
            &[t, m, w, c, stat::P99],
            lag.p99_seconds,
        );
        out.add(
            &names::SWEEP_CLIENT_LAG,
            &[t, m, w, c, stat::MAX],
            lag.max_seconds,
        );
    }
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

/// Writes the results of a successful sweep: its completion time, levels
/// and capacity.
fn write_results(out: &mut PieceWriter, report: &SweepReport) {
    let t = report.target.as_str();
    out.add(
        &names::SWEEP_LAST_COMPLETION,
        &[t],
        report.finished_at_unix_seconds,
    );
    let m = report.model.as_str();
    for wl in &report.workloads {
        let w = wl.workload.as_str();
        // The levels a sweep did not run are exported as last measured,
        // with when that was: a warm sweep exports what a full one does.
        let mut levels: Vec<_> = wl.levels.iter().chain(&wl.carried_levels).collect();
        levels.sort_by_key(|l| l.concurrency);
        for level in levels {
            write_level(out, [t, m, w], level, report.finished_at_unix_seconds);
        }
        let cap = &wl.capacity;
        out.add(
            &names::CAPACITY_KNEE,
            &[t, m, w],
            f64::from(cap.knee_concurrency),
        );
        if let Some(limit) = cap.limit {
            out.add(&names::CAPACITY_LIMIT, &[t, m, w, limit.as_str()], 1.0);
        }
        out.add(
            &names::SWEEP_LEVELS_NOT_MEASURED,
            &[t, m, w],
            cap.levels_not_measured.len() as f64,
        );
        let by_client = cap.not_measured_client.as_ref();
        out.add(
            &names::SWEEP_LEVELS_NOT_MEASURED_CLIENT,
            &[t, m, w],
            by_client.map_or(0.0, |_| cap.levels_not_measured.len() as f64),
        );
        out.add(
            &names::CAPACITY_KNEE_CARRIED_OVER,
            &[t, m, w],
            if cap.knee_carried_over { 1.0 } else { 0.0 },
        );
        if cap.knee_concurrency > 0 {
            let at = cap
                .knee_measured_at_unix_seconds
                .filter(|at| *at > 0.0)
                .unwrap_or(report.finished_at_unix_seconds);
            out.add(&names::CAPACITY_KNEE_MEASURED, &[t, m, w], at);
        }
        out.add(
            &names::CAPACITY_KNEE_DECIDED,
            &[t, m, w],
            if cap.knee_undecided { 0.0 } else { 1.0 },
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
            &names::CAPACITY_REQUEST_RATE,
            &[t, m, w],
            cap.requests_per_second,
        );
        out.add(
            &names::CAPACITY_REQUEST_RATE_SAMPLES,
            &[t, m, w],
            cap.requests_per_second_samples as f64,
        );
        out.add(
            &names::RECOMMENDED,
            &[t, m, w],
            f64::from(cap.recommended_max_in_flight),
        );
        if let Some(s) = cap.saturation_concurrency {
            out.add(&names::CAPACITY_SATURATION, &[t, m, w], f64::from(s));
        }
        if let Some(s) = &cap.sustained {
            write_sustained(out, [t, m, w], s);
        }
    }
}

/// The sustained rate of one workload and the steps of its search.
fn write_sustained(out: &mut PieceWriter, [t, m, w]: [&str; 3], s: &Sustained) {
    if let Some(r) = s.requests_per_second {
        out.add(&names::SUSTAINED_RATE, &[t, m, w], r);
    }
    out.add(
        &names::SUSTAINED_INFO,
        &[t, m, w, s.status.as_str(), s.arrivals.as_str()],
        1.0,
    );
    out.add(
        &names::SUSTAINED_MEASURED,
        &[t, m, w],
        s.measured_at_unix_seconds,
    );
    out.add(
        &names::SUSTAINED_AGE,
        &[t, m, w],
        f64::from(s.sweeps_since_measured),
    );
    out.add(&names::SUSTAINED_CONFIDENCE, &[t, m, w], s.confidence);
    for (i, step) in s.steps.iter().enumerate() {
        let n = (i + 1).to_string();
        let l = [t, m, w, n.as_str()];
        out.add(&names::STEP_OFFERED, &l, step.offered_requests_per_second);
        out.add(&names::STEP_ACHIEVED, &l, step.achieved_requests_per_second);
        out.add(&names::STEP_GOODPUT, &l, step.goodput_requests_per_second);
        out.add(&names::STEP_SHED, &l, step.shed_ratio);
        out.add(&names::STEP_ERROR, &l, step.error_ratio);
        out.add(
            &names::STEP_NOT_SENT,
            &l,
            step.not_sent_client_ceiling as f64,
        );
        for (spec, p) in [
            (
                &names::STEP_SCHEDULED_LATENCY,
                &step.scheduled_latency_seconds,
            ),
            (&names::STEP_DISPATCH_LAG, &step.dispatch_lag_seconds),
        ] {
            for (pct, v) in names::percentiles(p) {
                if let Some(v) = v {
                    out.add(spec, &[t, m, w, n.as_str(), pct], v);
                }
            }
        }
        out.add(
            &names::STEP_IN_FLIGHT,
            &[t, m, w, n.as_str(), "p99"],
            step.in_flight_p99,
        );
        out.add(
            &names::STEP_IN_FLIGHT,
            &[t, m, w, n.as_str(), names::stat::MAX],
            f64::from(step.in_flight_max),
        );
        out.add(
            &names::STEP_RESULT,
            &[t, m, w, n.as_str(), step.result.as_str()],
            1.0,
        );
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
