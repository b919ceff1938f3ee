//! The daemon's schedule: one loop per target (one sweep at a time each),
//! staggered at start and jittered on every interval, sharing one global cap
//! on requests in flight. A reload diffs the targets: removed ones are
//! cancelled and their series dropped, changed ones restarted, new ones started.

pub mod endpoint;
pub mod idle_gate;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, Schedule, Target, Workload};
use crate::metrics::{ConfigInfo, Metrics, TargetLimits};
use crate::probe::client::Client;
use crate::stats::report::SweepReport;
use crate::stats::sample::{Outcome, Sample};
use crate::sweep::{self, Observer, SweepEnv};

/// What the index page shows of a target.
#[derive(Debug, Clone, Default)]
pub struct Status {
    /// Model id.
    pub model: String,
    /// Unix time of the last successful sweep.
    pub last_success_unix: Option<f64>,
    /// Why the last sweep failed, if it did.
    pub last_error: Option<String>,
    /// The target as configured (for the pages' configuration facts).
    pub target: Option<Arc<Target>>,
    /// The latest sweep's report, successful or not (for the pages' charts).
    pub last_report: Option<Arc<SweepReport>>,
}

/// Shared view of every target's status.
pub type Statuses = Arc<RwLock<BTreeMap<String, Status>>>;

struct Running {
    target: Arc<Target>,
    cancel: CancellationToken,
    handle: JoinHandle<()>,
}

/// Owns the per-target loops.
pub struct Scheduler {
    metrics: Arc<Metrics>,
    client: Client,
    statuses: Statuses,
    schedule: Option<Schedule>,
    env: Option<SweepEnv>,
    running: BTreeMap<String, Running>,
    root: CancellationToken,
    /// One loop per gateway pair (see `gateway`).
    pairs: crate::sweep::pair::PairLoops,
    /// Each measured target's SLO and interval, for alert rules.
    config_info: Option<ConfigInfo>,
}

/// Feeds every measured request into the running totals.
struct MetricsObserver(Arc<Metrics>);

impl Observer for MetricsObserver {
    fn request(&self, target: &Target, workload: &Workload, sample: &Sample) {
        self.0
            .observe_request(&target.name, &target.model, &workload.name, sample);
    }
    fn in_flight(&self) -> Option<Box<dyn Send>> {
        Some(Box::new(self.0.request_in_flight()))
    }
}

impl Scheduler {
    /// A scheduler with no targets yet.
    pub fn new(metrics: Arc<Metrics>, client: Client, statuses: Statuses) -> Self {
        Scheduler {
            metrics,
            client,
            statuses,
            schedule: None,
            env: None,
            running: BTreeMap::new(),
            root: CancellationToken::new(),
            pairs: Default::default(),
            config_info: None,
        }
    }

    /// Exports each measured target's SLO and interval on `info`.
    pub fn with_config_info(mut self, info: ConfigInfo) -> Self {
        self.config_info = Some(info);
        self
    }

    /// Brings the running loops in line with `config`.
    pub fn apply(&mut self, config: &Config) {
        let schedule_changed = self.schedule.as_ref() != Some(&config.schedule);
        if schedule_changed {
            // A new global cap needs a new semaphore: restart every loop on it.
            let learned = self.env.as_ref().map(|e| e.learned.clone());
            let mut env = SweepEnv::new(
                self.client.clone(),
                config.schedule.max_in_flight_total,
                self.root.child_token(),
                Arc::new(MetricsObserver(self.metrics.clone())),
            );
            // What warm-up found out about a server outlives a new cap.
            if let Some(learned) = learned {
                env.learned = learned;
            }
            self.env = Some(env);
            self.schedule = Some(config.schedule.clone());
        }
        let wanted: BTreeMap<&str, &Arc<Target>> = config
            .targets
            .iter()
            .map(|t| (t.name.as_str(), t))
            .collect();
        let names: Vec<String> = self.running.keys().cloned().collect();
        for name in names {
            let keep = !schedule_changed
                && wanted
                    .get(name.as_str())
                    .is_some_and(|t| **t == self.running[&name].target);
            if !keep {
                if let Some(r) = self.running.remove(&name) {
                    r.cancel.cancel();
                    tracing::info!(target_name = %name, "stopping measurement of target");
                }
                if !wanted.contains_key(name.as_str()) {
                    self.metrics.forget_target(&name);
                    if let Some(info) = &self.config_info {
                        info.forget_target(&name);
                    }
                    self.statuses
                        .write()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&name);
                }
            }
        }
        let (Some(env), Some(schedule)) = (self.env.clone(), self.schedule.clone()) else {
            return;
        };
        self.pairs.apply(
            config,
            &env,
            &schedule,
            schedule_changed,
            &self.root,
            &self.metrics,
        );
        let new: Vec<&Arc<Target>> = config
            .targets
            .iter()
            .filter(|t| !self.running.contains_key(&t.name))
            .collect();
        let gap = stagger_gap(schedule.interval, new.len());
        for (i, target) in new.into_iter().enumerate() {
            let cancel = self.root.child_token();
            let offset = gap * i as u32 + gap.mul_f64(fastrand::f64());
            {
                let mut statuses = self.statuses.write().unwrap_or_else(|e| e.into_inner());
                let status = statuses.entry(target.name.clone()).or_default();
                status.model = target.model.clone();
                status.target = Some(target.clone());
            }
            if let Some(info) = &self.config_info {
                info.set_target(&target.name, &limits(target, &schedule));
            }
            let handle = tokio::spawn(target_loop(
                target.clone(),
                env.clone(),
                schedule.clone(),
                offset,
                cancel.clone(),
                self.metrics.clone(),
                self.statuses.clone(),
            ));
            self.running.insert(
                target.name.clone(),
                Running {
                    target: target.clone(),
                    cancel,
                    handle,
                },
            );
        }
    }

    /// Targets whose loop ended although nobody stopped it (a panic, or an
    /// endpoint that could not be started): the watchdog stops on them.
    pub fn dead_targets(&self) -> Vec<String> {
        self.running
            .iter()
            .filter(|(_, r)| r.handle.is_finished())
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Cancels every loop (requests in flight included) and waits up to
    /// `grace` for them to end.
    pub async fn shutdown(self, grace: Duration) {
        self.root.cancel();
        let mut handles: Vec<JoinHandle<()>> =
            self.running.into_values().map(|r| r.handle).collect();
        handles.extend(self.pairs.into_handles());
        let all = futures_util::future::join_all(handles);
        if tokio::time::timeout(grace, all).await.is_err() {
            tracing::warn!("some sweeps did not stop within {grace:?}");
        }
    }
}

/// What the configuration gauges export of `target`.
fn limits(target: &Target, schedule: &Schedule) -> TargetLimits {
    TargetLimits {
        p95_latency: target.slo.p95_latency,
        max_shed_ratio: target.slo.max_shed_ratio,
        max_error_ratio: target.slo.max_error_ratio,
        interval: schedule.interval,
    }
}

/// Gap between the first sweeps of newly started targets: spread over the
/// interval, but never so far apart that first results take long to appear.
pub(crate) fn stagger_gap(interval: Duration, n: usize) -> Duration {
    if n == 0 {
        return Duration::ZERO;
    }
    (interval / n as u32).min(Duration::from_secs(2))
}

/// The interval with up to `jitter` of it added at random.
pub fn jittered(interval: Duration, jitter: f64, unit_random: f64) -> Duration {
    // Saturating: an interval near Duration::MAX must not panic the loop.
    interval.saturating_add(interval.mul_f64(jitter * unit_random))
}

async fn target_loop(
    target: Arc<Target>,
    env: SweepEnv,
    schedule: Schedule,
    offset: Duration,
    cancel: CancellationToken,
    metrics: Arc<Metrics>,
    statuses: Statuses,
) {
    let env = SweepEnv {
        cancel: cancel.clone(),
        ..env
    };
    tokio::select! {
        _ = tokio::time::sleep(offset) => {}
        _ = cancel.cancelled() => return,
    }
    let reachable = match endpoint::reach(&target).await {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(target_name = %target.name, error = %e, "cannot reach target");
            return;
        }
    };
    metrics.set_target_info(&target.name, &target_info(&target, &Default::default()));
    metrics.target_started(&target.name);
    loop {
        if let Some(gate) = &target.idle_gate {
            if !wait_until_idle(&env, &target, gate, &metrics, &cancel).await {
                break;
            }
        }
        let report = sweep::run(&env, &target, &reachable.base_url, schedule.sweep_timeout).await;
        if cancel.is_cancelled() {
            break;
        }
        log_sweep(&report);
        metrics.set_target_info(&target.name, &target_info(&target, &report.setup));
        metrics.publish_sweep(&report);
        {
            let mut st = statuses.write().unwrap_or_else(|e| e.into_inner());
            let s = st.entry(target.name.clone()).or_default();
            s.model = target.model.clone();
            if report.success {
                s.last_success_unix = Some(report.finished_at_unix_seconds);
                s.last_error = None;
            } else {
                s.last_error = report.error.clone();
            }
            s.last_report = Some(Arc::new(report));
        }
        let wait = jittered(schedule.interval, schedule.jitter, fastrand::f64());
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = cancel.cancelled() => break,
        }
    }
}

/// Labels of `llmprobe_target_info`: what the server told, then the
/// configured labels (which win: an operator may know better).
fn target_info(target: &Target, setup: &crate::probe::setup::Setup) -> Vec<(String, String)> {
    let mut info = vec![
        ("model".to_string(), target.model.clone()),
        ("server".to_string(), setup.server.clone()),
        ("server_version".to_string(), setup.server_version.clone()),
    ];
    info.extend(target.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    info
}

/// Waits while the server reports more work than the gate allows; false
/// when cancelled meanwhile. A gate that cannot be read does not block the
/// sweep (a server without metrics must still be measured), but says so.
async fn wait_until_idle(
    env: &SweepEnv,
    target: &Target,
    gate: &crate::schedule::idle_gate::IdleGate,
    metrics: &Metrics,
    cancel: &CancellationToken,
) -> bool {
    loop {
        match crate::schedule::idle_gate::read(&env.client, gate).await {
            Ok(v) if v <= gate.max_value => return true,
            Ok(v) => {
                metrics.sweep_postponed(&target.name);
                tracing::info!(target_name = %target.name, metric = %gate.metric, value = v, "server busy: sweep postponed");
            }
            Err(e) => {
                tracing::warn!(target_name = %target.name, error = %e, "idle gate unreadable: sweeping anyway");
                return true;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(gate.retry_every) => {}
            _ = cancel.cancelled() => return false,
        }
    }
}

/// One line per sweep (failed requests summarised, never one line each).
fn log_sweep(report: &SweepReport) {
    let knees: Vec<String> = report
        .workloads
        .iter()
        .map(|w| format!("{}={}", w.workload, w.capacity.knee_concurrency))
        .collect();
    let mut failures: BTreeMap<&str, u64> = BTreeMap::new();
    let mut examples: BTreeMap<&str, &str> = BTreeMap::new();
    for l in report.workloads.iter().flat_map(|w| &w.levels) {
        for (outcome, n) in &l.outcomes {
            if *outcome != Outcome::Ok.as_str() && *n > 0 {
                *failures.entry(outcome).or_default() += n;
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
    if report.success {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_its_fraction() {
        let i = Duration::from_secs(100);
        assert_eq!(jittered(i, 0.1, 0.0), i);
        assert_eq!(jittered(i, 0.1, 0.5), Duration::from_secs(105));
        assert!(jittered(i, 0.1, 0.999) < Duration::from_secs(110));
    }

    #[test]
    fn stagger_gap_is_bounded() {
        let s = Schedule {
            interval: Duration::from_secs(900),
            jitter: 0.1,
            max_in_flight_total: 8,
            sweep_timeout: Duration::from_secs(60),
        };
        assert_eq!(stagger_gap(s.interval, 3), Duration::from_secs(2));
        let fast = Schedule {
            interval: Duration::from_secs(1),
            ..s
        };
        assert_eq!(stagger_gap(fast.interval, 4), Duration::from_millis(250));
    }
}
