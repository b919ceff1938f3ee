//! The daemon's schedule: one loop manager for every loop, a target's sweeps
//! and a gateway pair's measurements alike. One loop per job (one sweep at a
//! time each), staggered at start and jittered on every interval, all
//! sharing one global cap on requests in flight. A reload diffs the jobs:
//! removed ones are cancelled and, once their loops have ended, their series
//! dropped; changed ones restarted; new ones started. A loop started under
//! the name of one that was stopped waits for that one to end (and be
//! forgotten) first. What one loop does is [`job`]'s; [`once`] is the
//! one-shot `llmprobe sweep`, measuring each job as one round of its loop.

pub mod endpoint;
mod forward;
mod handoff;
pub mod idle_gate;
mod jitter;
mod job;
pub mod memory;
pub mod once;
mod probes;
pub mod state;
pub mod sweep_lock;
pub mod warm_start;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, Schedule};
use crate::metrics::Metrics;
use crate::probe::tls::Clients;
use crate::sinks::Sinks;
use crate::sweep::interleaved::pair_targets;
use crate::sweep::SweepEnv;
use handoff::Handoff;
pub use jitter::jittered;
use job::{Job, Keep, Outputs};
use state::StateDir;

/// Names a loop: targets and gateway pairs have names of their own.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum LoopKey {
    /// The loop sweeping the target of this name.
    Target(String),
    /// The loop measuring the gateway pair of this name.
    Pair(String),
}

impl fmt::Display for LoopKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoopKey::Target(name) => write!(f, "target {name}"),
            LoopKey::Pair(name) => write!(f, "gateway pair {name}"),
        }
    }
}

struct Running {
    job: Job,
    cancel: CancellationToken,
    /// Fires when the loop's task has ended, however it ended.
    ended: CancellationToken,
    handle: JoinHandle<()>,
}

/// Owns every loop: the one loop manager.
pub struct Scheduler {
    out: Outputs,
    clients: Clients,
    /// The clients the running loops were started with, until `apply`
    /// compares them with new ones (see [`Scheduler::set_clients`]).
    replaced_clients: Option<Clients>,
    schedule: Option<Schedule>,
    env: Option<SweepEnv>,
    running: BTreeMap<LoopKey, Running>,
    /// Per name, fires once the loop last stopped under it has ended and,
    /// when it was removed, its series are dropped: the next loop of that
    /// name waits for it, so two loops never measure one job at once and a
    /// late forget never drops a new loop's series.
    stopping: BTreeMap<LoopKey, CancellationToken>,
    root: CancellationToken,
    /// The schedule every loop reads at each round: a reload that changes
    /// only its timing keeps the loops.
    timing: Option<watch::Sender<Schedule>>,
    /// Where target loops keep their state, if anywhere.
    state: Option<Arc<StateDir>>,
    /// What stopped target loops left for the loops started in their place.
    handoff: Arc<Handoff>,
}

/// Every job of `config`, targets first (in configuration order), then
/// gateway pairs (by name) whose two targets are there.
fn jobs(config: &Config) -> Vec<(LoopKey, Job)> {
    let targets = config
        .targets
        .iter()
        .map(|t| (LoopKey::Target(t.name.clone()), Job::Target(t.clone())));
    let mut pairs: Vec<(LoopKey, Job)> = config
        .gateway_pairs
        .iter()
        .filter_map(|p| {
            let (direct, through) = pair_targets(config, p)?;
            Some((
                LoopKey::Pair(p.name.clone()),
                Job::Pair {
                    pair: p.clone(),
                    direct: direct.clone(),
                    through: through.clone(),
                },
            ))
        })
        .collect();
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    targets.chain(pairs).collect()
}

impl Scheduler {
    /// A scheduler with no loops yet, whose loops export to `sinks`.
    pub fn new(sinks: Sinks, metrics: Arc<Metrics>, clients: Clients) -> Self {
        Scheduler {
            out: Outputs { sinks, metrics },
            clients,
            replaced_clients: None,
            schedule: None,
            env: None,
            running: BTreeMap::new(),
            stopping: BTreeMap::new(),
            root: CancellationToken::new(),
            timing: None,
            state: None,
            handoff: Arc::default(),
        }
    }

    /// The HTTP clients of the current configuration.
    pub fn clients(&self) -> &Clients {
        &self.clients
    }

    /// The HTTP clients of a new configuration, for the loops the next
    /// [`Scheduler::apply`] starts; a running loop whose target's TLS files
    /// changed is restarted there.
    pub fn set_clients(&mut self, clients: Clients) {
        if let Some(env) = &mut self.env {
            env.clients = clients.clone();
        }
        let old = std::mem::replace(&mut self.clients, clients);
        self.replaced_clients.get_or_insert(old);
    }

    /// Keeps the target loops' state in `dir` (loops started from now on).
    pub fn keep_state_in(&mut self, dir: StateDir) {
        self.state = Some(Arc::new(dir));
    }

    /// Brings the running loops in line with `config`. A loop whose job did
    /// not change is kept (with what it learnt); a change of `schedule`
    /// restarts them all only when it changes the global cap, else it
    /// reaches them at their next round; a loop that is restarted starts
    /// from its saved state.
    pub fn apply(&mut self, config: &Config) {
        let schedule_changed = self.schedule.as_ref() != Some(&config.schedule);
        let cap_changed = self.schedule.as_ref().map(|s| s.max_in_flight_total)
            != Some(config.schedule.max_in_flight_total);
        let old_clients = self.replaced_clients.take();
        let tls_changed = |job: &Job| {
            old_clients
                .as_ref()
                .is_some_and(|old| job.targets().any(|t| old.changed_for(&self.clients, t)))
        };
        if cap_changed {
            // A new global cap needs a new semaphore: restart every loop on it.
            let env = SweepEnv::new(
                self.clients.clone(),
                config.schedule.max_in_flight_total,
                self.root.child_token(),
                Arc::new(forward::ToSinks::of(&self.out)),
            );
            self.env = Some(env);
        }
        if schedule_changed {
            self.schedule = Some(config.schedule.clone());
            match &self.timing {
                Some(timing) => {
                    timing.send_replace(config.schedule.clone());
                }
                None => self.timing = Some(watch::channel(config.schedule.clone()).0),
            }
        }
        let wanted = jobs(config);
        // Looked up once per running loop: a map, so that 100k targets
        // cost a moment, not a scan per loop.
        let by_key: BTreeMap<&LoopKey, &Job> = wanted.iter().map(|(k, j)| (k, j)).collect();
        let wanted_job = |key: &LoopKey| by_key.get(key).copied();
        self.stopping.retain(|_, done| !done.is_cancelled());
        let mut stopped = Vec::new();
        let mut removed = Vec::new();
        let keys: Vec<LoopKey> = self.running.keys().cloned().collect();
        for key in keys {
            let running = &self.running[&key].job;
            let keep = !cap_changed
                && wanted_job(&key).is_some_and(|j| j == running)
                && !tls_changed(running);
            if keep {
                if let (true, Job::Target(target), Some(schedule)) =
                    (schedule_changed, running, &self.schedule)
                {
                    // Its interval gauge follows the new schedule.
                    self.out.sinks.target_configured(target, schedule);
                }
                continue;
            }
            let Some(r) = self.running.remove(&key) else {
                continue;
            };
            r.cancel.cancel();
            tracing::info!(loop_name = %key, "stopping measurement");
            stopped.push(r.ended.clone());
            if wanted_job(&key).is_some() {
                self.stopping.insert(key, r.ended);
            } else {
                removed.push(key);
            }
        }
        if !removed.is_empty() {
            self.retire(removed, stopped);
        }
        let (Some(env), Some(schedule)) = (self.env.clone(), self.schedule.clone()) else {
            return;
        };
        let new: Vec<(LoopKey, Job)> = wanted
            .into_iter()
            .filter(|(k, _)| !self.running.contains_key(k))
            .collect();
        let gap = stagger_gap(schedule.interval, new.len());
        for (i, (key, job)) in new.into_iter().enumerate() {
            let offset = gap * i as u32 + gap.mul_f64(fastrand::f64());
            self.start(key, job, &env, &schedule, offset);
        }
    }

    /// Starts the loop of `job` under `key`, once the loop last stopped
    /// under that key (if any) is done.
    fn start(
        &mut self,
        key: LoopKey,
        job: Job,
        env: &SweepEnv,
        schedule: &Schedule,
        offset: Duration,
    ) {
        if let Job::Target(target) = &job {
            self.out.sinks.target_configured(target, schedule);
        }
        let cancel = self.root.child_token();
        let ended = CancellationToken::new();
        let before = self.stopping.remove(&key);
        let timing = match &self.timing {
            Some(t) => t.subscribe(),
            None => watch::channel(schedule.clone()).1,
        };
        let task = job::run(
            job.clone(),
            SweepEnv {
                cancel: cancel.clone(),
                ..env.clone()
            },
            timing,
            offset,
            self.out.clone(),
            Keep {
                dir: self.state.clone(),
                handoff: self.handoff.clone(),
            },
        );
        let guard = ended.clone().drop_guard();
        let handle = tokio::spawn(async move {
            // Fires `ended` when the task ends, by return or by panic.
            let _guard = guard;
            // Not cancellable: `ended` must imply that the predecessor is
            // done too, or a chain of quick reloads could overtake it.
            if let Some(before) = before {
                before.cancelled().await;
            }
            task.await;
        });
        self.running.insert(
            key,
            Running {
                job,
                cancel,
                ended,
                handle,
            },
        );
    }

    /// Drops the series and statuses of the `removed` loops once every loop
    /// stopped by the same reload has ended (`stopped`): a request still in
    /// flight, ending as `cancelled` after the series were dropped, would
    /// create them again and they would stay forever. A pair loop sends to
    /// its targets too, hence every stopped loop, not only the removed ones.
    fn retire(&mut self, removed: Vec<LoopKey>, stopped: Vec<CancellationToken>) {
        let done = CancellationToken::new();
        for key in &removed {
            self.stopping.insert(key.clone(), done.clone());
        }
        let guard = done.drop_guard();
        let out = self.out.clone();
        let handoff = self.handoff.clone();
        tokio::spawn(async move {
            let _guard = guard;
            for ended in stopped {
                ended.cancelled().await;
            }
            for key in removed {
                match key {
                    LoopKey::Target(name) => {
                        handoff.forget(&name);
                        out.sinks.forget_target(&name);
                    }
                    LoopKey::Pair(name) => out.sinks.forget_pair(&name),
                }
            }
        });
    }

    /// Loops that ended although nobody stopped them (a panic, or an
    /// endpoint that could not be started): the watchdog stops on them.
    pub fn dead_loops(&self) -> Vec<LoopKey> {
        self.running
            .iter()
            .filter(|(_, r)| r.handle.is_finished())
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// Cancels every loop (requests in flight included) and waits up to
    /// `grace` for them to end.
    pub async fn shutdown(self, grace: Duration) {
        self.root.cancel();
        let handles = self.running.into_values().map(|r| r.handle);
        let all = futures_util::future::join_all(handles);
        if tokio::time::timeout(grace, all).await.is_err() {
            tracing::warn!("some sweeps did not stop within {grace:?}");
        }
    }
}

/// What the configuration gauges export of `target`.
/// Gap between the first rounds of newly started loops: spread over the
/// interval, but never so far apart that first results take long to appear.
pub(crate) fn stagger_gap(interval: Duration, n: usize) -> Duration {
    if n == 0 {
        return Duration::ZERO;
    }
    (interval / n as u32).min(Duration::from_secs(2))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn loop_keys_name_their_kind() {
        assert_eq!(LoopKey::Target("w1".into()).to_string(), "target w1");
        assert_eq!(LoopKey::Pair("gw".into()).to_string(), "gateway pair gw");
        assert!(LoopKey::Target("z".into()) < LoopKey::Pair("a".into()));
    }
}
