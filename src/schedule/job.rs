//! What one loop of the schedule does, for either kind of job: wait for its
//! stagger offset, reach its endpoints, then measure, publish and wait a
//! jittered interval, until cancelled. A target's loop sweeps it (behind its
//! idle gate); a gateway pair's loop measures the pair interleaved. The
//! one-shot `llmprobe sweep` ([`super::once`]) reaches and measures a job
//! the same way, once.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::{GatewayPair, Schedule, Target};
use crate::metrics::Metrics;
use crate::schedule::endpoint::{self, Reachable};
use crate::schedule::handoff::Handoff;
use crate::schedule::idle_gate::{self, IdleGate};
use crate::schedule::jitter::jittered;
use crate::schedule::memory::Memory;
use crate::schedule::probes;
use crate::schedule::state::{self, StateDir};
use crate::schedule::sweep_lock::{self, Claim};
use crate::sinks::Sinks;
use crate::stats::pair_report::PairReport;
use crate::stats::probe::ProbeEvent;
use crate::stats::report::SweepReport;
use crate::sweep::probe_stream::{Lane, SweepGuard};
use crate::sweep::{self, interleaved, SweepEnv};

/// What one loop measures. Equal jobs measure alike: a reload keeps the
/// loops whose job it did not change.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Job {
    /// Sweeps of one target.
    Target(Arc<Target>),
    /// Interleaved measurements of a gateway pair, with its two targets.
    Pair {
        /// The pair.
        pair: GatewayPair,
        /// Its direct target.
        direct: Arc<Target>,
        /// Its through-the-gateway target.
        through: Arc<Target>,
    },
}

/// A job with its endpoints reached, held for the loop's lifetime
/// (dropping it stops a simulated engine started for the job).
pub(crate) enum Reached<'a> {
    Target(&'a Arc<Target>, Reachable),
    Pair {
        pair: &'a GatewayPair,
        direct: (&'a Arc<Target>, Reachable),
        through: (&'a Arc<Target>, Reachable),
    },
}

/// What one round of a job measured.
pub(crate) enum Measured<'a> {
    // Boxed, both: reports are hundreds of bytes on the stack. A sweep's is
    // shared with the index page and kept for the loop's next sweep.
    Sweep(&'a Target, Arc<SweepReport>),
    Pair(Box<PairReport>),
}

/// Where a target's loop finds and keeps what it learnt.
pub(crate) struct Keep {
    /// The state directory, if any.
    pub dir: Option<Arc<StateDir>>,
    /// What a stopped loop left for the loop started in its place.
    pub handoff: Arc<Handoff>,
}

/// What every loop publishes to.
#[derive(Clone)]
pub(crate) struct Outputs {
    /// Where results go.
    pub sinks: Sinks,
    /// The daemon's own state (postponed sweeps); results go to `sinks`.
    pub metrics: Arc<Metrics>,
}

/// Runs `job` every interval of `schedule` (as it is at each round: a
/// reload may change it), starting after `offset`, until `env.cancel`
/// fires; a target's loop starts from what the loop it replaces left, else
/// its saved state, and keeps its state (`keep`).
pub(crate) async fn run(
    job: Job,
    env: SweepEnv,
    schedule: watch::Receiver<Schedule>,
    offset: Duration,
    out: Outputs,
    keep: Keep,
) {
    let cancel = env.cancel.clone();
    if cancel.is_cancelled() {
        return;
    }
    job.announce(&out);
    tokio::select! {
        _ = tokio::time::sleep(offset) => {}
        _ = cancel.cancelled() => return,
    }
    // The futures of a round are boxed: held inline, the largest of them
    // made every idle loop's task about 12 KB (heaptrack, 200 targets), for
    // a future that only lives while it runs.
    let reached = match Box::pin(job.reach()).await {
        Ok(r) => r,
        Err(e) => {
            job.unreachable(&e);
            return;
        }
    };
    job.started(&out);
    // A new loop (first start, a restart, or a reload that restarted it)
    // starts from what the loop it replaces left, else from the target's
    // saved state, else from nothing.
    let mut memory = job.memory();
    if let (Some(m), Job::Target(t)) = (&mut memory, &job) {
        let interval = schedule.borrow().interval;
        let found = match keep.handoff.take(t) {
            Some(saved) => Some((saved, "previous loop")),
            None => match &keep.dir {
                Some(dir) => load(dir, t, interval).await.map(|s| (s, "state_dir")),
                None => None,
            },
        };
        if let Some((saved, source)) = found {
            *m = Memory::restored(t, saved);
            tracing::info!(target_name = %t.name, source, pooled_sweeps = m.pooled_sweeps(), "started from the saved state");
        }
    }
    let lane = Lane::default();
    let sweeps = async {
        sweep_rounds(
            &job,
            &reached,
            &env,
            &schedule,
            &out,
            &keep,
            &lane,
            &mut memory,
        )
        .await;
        memory
    };
    let (memory, ()) = tokio::join!(sweeps, reached.probes(&env, &lane, &out));
    // Stopped (by a reload, or at shutdown): the loop started in its place
    // takes up from here.
    if let (Some(m), Job::Target(t)) = (&memory, &job) {
        keep.handoff.leave(t, m.saved());
    }
}

/// The loop's rounds, until cancelled: each waits for the idle gate, holds
/// the target's lane (probes pause), measures, publishes, and waits a
/// jittered interval.
#[allow(clippy::too_many_arguments)]
async fn sweep_rounds(
    job: &Job,
    reached: &Reached<'_>,
    env: &SweepEnv,
    schedule: &watch::Receiver<Schedule>,
    out: &Outputs,
    keep: &Keep,
    lane: &Lane,
    memory: &mut Option<Memory>,
) {
    let cancel = &env.cancel;
    let mut save_failed = false;
    let mut said_busy = false;
    loop {
        if !Box::pin(job.may_start(env, out, cancel, lane)).await {
            break;
        }
        // Held to the end of the round: a `llmprobe sweep` of the target
        // meanwhile refuses; while one runs, this loop waits for it.
        let locked = match claim(job, keep).await {
            Claim::Busy => {
                if !said_busy {
                    said_busy = true;
                    tracing::info!(target_name = %job_name(job), "a one-shot `llmprobe sweep` of the target runs: sweep waits for it");
                }
                tokio::select! {
                    _ = tokio::time::sleep(sweep_lock::RETRY_EVERY) => continue,
                    _ = cancel.cancelled() => break,
                }
            }
            Claim::Unknown(e) => {
                tracing::warn!(target_name = %job_name(job), error = %e, "sweep lock unusable: a one-shot `llmprobe sweep` cannot see this sweep");
                None
            }
            Claim::Held(held) => Some(held),
            Claim::Free => None,
        };
        said_busy = false;
        let timing = schedule.borrow().clone();
        let prior = memory.as_mut().map(Memory::prior).unwrap_or_default();
        let held = reached.pause_probes(lane, out).await;
        let measured = Box::pin(reached.measure(env, timing.sweep_timeout, prior)).await;
        drop(held);
        reached.resume_probes(out);
        if cancel.is_cancelled() {
            break;
        }
        measured.publish(out);
        if let (Some(m), Measured::Sweep(_, report)) = (memory.as_mut(), measured) {
            m.record(report);
            if let (Some(dir), Job::Target(t)) = (&keep.dir, job) {
                save(dir, t, m, &mut save_failed).await;
            }
        }
        drop(locked);
        let timing = schedule.borrow().clone();
        let wait = jittered(timing.interval, timing.jitter, fastrand::f64());
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = cancel.cancelled() => break,
        }
    }
}

impl Job {
    /// The targets the job sends requests to.
    pub(crate) fn targets(&self) -> impl Iterator<Item = &Arc<Target>> {
        let (first, second) = match self {
            Job::Target(t) => (t, None),
            Job::Pair {
                direct, through, ..
            } => (direct, Some(through)),
        };
        std::iter::once(first).chain(second)
    }

    /// Resolves the job's endpoints, starting simulated engines; the error
    /// of the first that cannot be reached.
    pub(crate) async fn reach(&self) -> Result<Reached<'_>, String> {
        match self {
            Job::Target(target) => Ok(Reached::Target(target, endpoint::reach(target).await?)),
            Job::Pair {
                pair,
                direct,
                through,
            } => match (
                endpoint::reach(direct).await,
                endpoint::reach(through).await,
            ) {
                (Ok(d), Ok(t)) => Ok(Reached::Pair {
                    pair,
                    direct: (direct, d),
                    through: (through, t),
                }),
                (Err(e), _) | (_, Err(e)) => Err(e),
            },
        }
    }

    /// Logs that the job's endpoints could not be reached: its loop ends.
    fn unreachable(&self, error: &str) {
        match self {
            Job::Target(target) => {
                tracing::error!(target_name = %target.name, error = %error, "cannot reach target");
            }
            Job::Pair { pair, .. } => {
                tracing::error!(pair = %pair.name, error = %error, "cannot reach a target of the gateway pair");
            }
        }
    }

    /// What a target's loop remembers between sweeps (none for a pair).
    fn memory(&self) -> Option<Memory> {
        match self {
            Job::Target(t) => Some(Memory::new(t)),
            Job::Pair { .. } => None,
        }
    }

    /// Shows a target on the index page before its first sweep.
    fn announce(&self, out: &Outputs) {
        if let Job::Target(target) = self {
            out.sinks.target_announced(target);
        }
    }

    /// Exports what is known before the first round.
    fn started(&self, out: &Outputs) {
        if let Job::Target(target) = self {
            out.sinks.target_started(target);
        }
    }

    /// Waits while a target's server reports more work than its idle gate
    /// allows; false when cancelled meanwhile.
    async fn may_start(
        &self,
        env: &SweepEnv,
        out: &Outputs,
        cancel: &CancellationToken,
        lane: &Lane,
    ) -> bool {
        match self {
            Job::Target(target) => match &target.idle_gate {
                Some(gate) => wait_until_idle(env, target, gate, &out.metrics, cancel, lane).await,
                None => true,
            },
            Job::Pair { .. } => true,
        }
    }
}

impl Reached<'_> {
    /// The target's probes between sweeps, until the loop is cancelled
    /// (none for a pair, or a target whose probes are off).
    async fn probes(&self, env: &SweepEnv, lane: &Lane, out: &Outputs) {
        if let Reached::Target(target, at) = self {
            probes::run(env, target, &at.base_url, lane, &out.sinks).await;
        }
    }

    /// Holds a target's lane for a round (waiting for the probe in flight)
    /// and tells the sinks that its probes pause.
    async fn pause_probes<'l>(&self, lane: &'l Lane, out: &Outputs) -> Option<SweepGuard<'l>> {
        match self {
            Reached::Target(target, _) if target.probe.interval.is_some() => {
                out.sinks.probe(target, &ProbeEvent::Paused(true));
                Some(lane.sweep().await)
            }
            _ => None,
        }
    }

    /// Tells the sinks that a target's probes resume.
    fn resume_probes(&self, out: &Outputs) {
        if let Reached::Target(target, _) = self {
            if target.probe.interval.is_some() {
                out.sinks.probe(target, &ProbeEvent::Paused(false));
            }
        }
    }

    /// One round: a sweep of the target (full, or warm as `plan` says), or
    /// one measurement of the pair.
    pub(crate) async fn measure(
        &self,
        env: &SweepEnv,
        time_limit: Duration,
        prior: sweep::Prior<'_>,
    ) -> Measured<'_> {
        match self {
            Reached::Target(target, at) => Measured::Sweep(
                target,
                Arc::new(sweep::run_after(env, target, &at.base_url, time_limit, prior).await),
            ),
            Reached::Pair {
                pair,
                direct,
                through,
            } => Measured::Pair(Box::new(
                interleaved::measure(
                    env,
                    pair,
                    (direct.0, &direct.1.base_url),
                    (through.0, &through.1.base_url),
                    time_limit,
                )
                .await,
            )),
        }
    }
}

impl Measured<'_> {
    /// The sweep's report; None for a pair's.
    pub(crate) fn into_sweep(self) -> Option<SweepReport> {
        match self {
            Measured::Sweep(_, report) => Some(Arc::unwrap_or_clone(report)),
            Measured::Pair(_) => None,
        }
    }

    /// The pair's report; None for a sweep's.
    pub(crate) fn into_pair(self) -> Option<PairReport> {
        match self {
            Measured::Sweep(..) => None,
            Measured::Pair(report) => Some(*report),
        }
    }

    /// Hands a finished round to every sink.
    fn publish(&self, out: &Outputs) {
        match self {
            Measured::Sweep(target, report) => out.sinks.sweep(target, report),
            Measured::Pair(report) => out.sinks.pair(report),
        }
    }
}

/// Tries a target's sweep lock in the state directory, off the runtime's
/// workers; [`Claim::Free`] for a pair or without a state directory.
async fn claim(job: &Job, keep: &Keep) -> Claim {
    let (Some(dir), Job::Target(target)) = (&keep.dir, job) else {
        return Claim::Free;
    };
    let (dir, target) = (dir.clone(), target.clone());
    tokio::task::spawn_blocking(move || sweep_lock::try_claim(&dir, &target, true))
        .await
        .unwrap_or_else(|e| Claim::Unknown(e.to_string()))
}

/// The name a job's log lines carry.
fn job_name(job: &Job) -> &str {
    match job {
        Job::Target(t) => &t.name,
        Job::Pair { pair, .. } => &pair.name,
    }
}

/// `target`'s saved state, read off the runtime's workers.
async fn load(
    dir: &Arc<StateDir>,
    target: &Arc<Target>,
    interval: Duration,
) -> Option<state::Saved> {
    let (dir, target) = (dir.clone(), target.clone());
    tokio::task::spawn_blocking(move || dir.load(&target, interval, state::unix_now()))
        .await
        .ok()
        .flatten()
}

/// Saves the loop's memory after a sweep, off the runtime's workers; a
/// failure is logged once per loop (the loop goes on without).
async fn save(dir: &Arc<StateDir>, target: &Arc<Target>, memory: &Memory, failed: &mut bool) {
    let (dir, target_name, target) = (dir.clone(), target.name.clone(), target.clone());
    let saved = memory.saved();
    let done =
        tokio::task::spawn_blocking(move || dir.save(&target, saved, state::unix_now())).await;
    let result = done.map_err(|e| e.to_string()).and_then(|r| r);
    match result {
        Ok(()) => *failed = false,
        Err(e) if !*failed => {
            *failed = true;
            tracing::warn!(target_name = %target_name, error = %e, "cannot save the target's state: a restart will start it from nothing");
        }
        Err(_) => {}
    }
}

/// Waits while the server reports more work than the gate allows (each
/// busy reading counted as a postponed sweep); false when cancelled
/// meanwhile.
async fn wait_until_idle(
    env: &SweepEnv,
    target: &Target,
    gate: &IdleGate,
    metrics: &Metrics,
    cancel: &CancellationToken,
    lane: &Lane,
) -> bool {
    let client = env.clients.for_target(target);
    // A probe of llmprobe's own in flight is not the server's load.
    let own = || lane.probes_in_flight();
    idle_gate::wait_until_idle(client, &target.name, gate, cancel, own, |v| {
        metrics.sweep_postponed(&target.name);
        tracing::info!(target_name = %target.name, metric = %gate.metric, value = v, "server busy: sweep postponed");
    })
    .await
}
