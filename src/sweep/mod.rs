//! One sweep of one target: per workload, warm-up, then one closed-loop level
//! per concurrency value until a level breaks the SLO. The gateway pairs'
//! interleaved executor ([`interleaved`]) sends through the same [`Requests`].

pub mod interleaved;
pub mod ladder;
pub mod refine;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::config::{Slo, Target, Workload};
use crate::probe::body;
use crate::probe::client::Client;
use crate::probe::exchange::{self as probe, RequestSpec};
use crate::stats::knee;
use crate::stats::level;
use crate::stats::report::{EarlyStop, LevelSummary, SweepKind, SweepReport, WorkloadReport};
use crate::stats::sample::{Outcome, Sample};
use crate::stats::verdict::{Breach, Tally};
use crate::sweep::ladder::{Ladder, WarmStart};

/// Pause after a level that stopped early, before the next one: the
/// requests it cancelled leave the server only once it notices their closed
/// connections (at its next step or check), and the next level must not
/// meet them still queued there.
pub const SETTLE_AFTER_EARLY_STOP: Duration = Duration::from_millis(500);

/// Receives what a sweep does as it happens (metrics, progress line).
pub trait Observer: Send + Sync {
    /// A measured (counted) request.
    fn request(&self, _target: &Target, _workload: &Workload, _sample: &Sample) {}
    /// A level is about to start.
    fn level_started(
        &self,
        _target: &Target,
        _workload: &Workload,
        _concurrency: u32,
        _requests: u64,
    ) {
    }
    /// A request took a place in the global cap; it is given back when the
    /// returned guard (if any) is dropped.
    fn in_flight(&self) -> Option<Box<dyn Send>> {
        None
    }
}

/// An observer that ignores everything.
pub struct NoObserver;
impl Observer for NoObserver {}

/// What every sweep shares.
#[derive(Clone)]
pub struct SweepEnv {
    /// The HTTP client (connections pooled across sweeps).
    pub client: Client,
    /// Global cap on requests in flight across all targets.
    pub in_flight: Arc<Semaphore>,
    /// Cancels everything on shutdown or reload.
    pub cancel: CancellationToken,
    /// Receives requests and progress.
    pub observer: Arc<dyn Observer>,
}

/// Runs one sweep of `target` served at `base_url`, within `time_limit`:
/// a full climb, or a warm start (per workload name) when `warm` is given.
pub async fn run(
    env: &SweepEnv,
    target: &Arc<Target>,
    base_url: &str,
    time_limit: Duration,
    warm: Option<&BTreeMap<String, WarmStart>>,
) -> SweepReport {
    let started = Instant::now();
    let setup = crate::probe::setup::discover(
        &env.client,
        base_url,
        target.api_key.as_ref(),
        &target.model,
    )
    .await;
    if setup.model_listed == Some(false) {
        tracing::warn!(
            target_name = %target.name,
            model = %target.model,
            served = %setup.models.join(","),
            "the configured model is not among the models the server lists"
        );
    }
    let mut workloads = Vec::new();
    let cancel = env.cancel.child_token();
    let work = async {
        for w in &target.workloads {
            let start = warm.map(|m| m.get(&w.name).cloned().unwrap_or_default());
            workloads.push(run_workload(env, &cancel, target, w, base_url, start.as_ref()).await);
            if cancel.is_cancelled() {
                break;
            }
        }
    };
    let timed_out = tokio::time::timeout(time_limit, work).await.is_err();
    cancel.cancel();
    let error = if timed_out {
        Some(format!(
            "sweep exceeded its time limit of {}",
            humantime::format_duration(time_limit)
        ))
    } else if env.cancel.is_cancelled() {
        Some("sweep cancelled".to_string())
    } else {
        unreachable_error(&workloads)
    };
    SweepReport {
        target: target.name.clone(),
        kind: if warm.is_some() {
            SweepKind::Warm
        } else {
            SweepKind::Full
        },
        model: target.model.clone(),
        success: error.is_none(),
        error,
        duration_seconds: started.elapsed().as_secs_f64(),
        finished_at_unix_seconds: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
        setup,
        workloads,
    }
}

/// A sweep in which no request reached the server did not measure anything.
fn unreachable_error(workloads: &[WorkloadReport]) -> Option<String> {
    let levels = workloads.iter().flat_map(|w| &w.levels);
    let (mut total, mut unreachable) = (0, 0);
    for l in levels {
        total += l.requests;
        unreachable += l.count(Outcome::ConnectError);
    }
    (total > 0 && unreachable == total)
        .then(|| "no request could connect to the server".to_string())
}

async fn run_workload(
    env: &SweepEnv,
    cancel: &CancellationToken,
    target: &Arc<Target>,
    workload: &Arc<Workload>,
    base_url: &str,
    warm: Option<&WarmStart>,
) -> WorkloadReport {
    let shared = Arc::new(Shared {
        env: env.clone(),
        cancel: cancel.clone(),
        requests: Requests::new(target, workload, base_url),
    });

    // Warm-up opens connections and wakes caches; its samples are dropped.
    let first_level = target.levels.first().copied().unwrap_or(1);
    if target.warmup_requests > 0 {
        let c = target.warmup_requests.min(first_level.max(1));
        run_level(&shared, c, target.warmup_requests as u64, false, None).await;
    }

    let mut ladder = Ladder::new(&target.levels, target.refine_resolution, warm);
    let mut levels: Vec<LevelSummary> = Vec::new();
    let judge = target.early_stop.then_some(&target.slo);
    let mut settle = false;
    while let Some((concurrency, role)) = ladder.next() {
        if settle {
            // The server is told of the cancelled requests only when their
            // connections close; the next level waits for it to let them go.
            tokio::select! {
                _ = tokio::time::sleep(SETTLE_AFTER_EARLY_STOP) => {}
                _ = cancel.cancelled() => {}
            }
        }
        if cancel.is_cancelled() {
            break;
        }
        let n = target
            .requests_per_level
            .count(concurrency, target.min_requests_per_level);
        env.observer.level_started(target, workload, concurrency, n);
        let run = run_level(&shared, concurrency, n, true, judge).await;
        if cancel.is_cancelled() {
            break;
        }
        let mut summary = level::summarize_level(concurrency, &run.samples, run.wall, &target.slo);
        summary.role = role;
        summary.planned_requests = n;
        if let Some(breach) = run.stopped {
            // Certain to break in full (stats::verdict): the partial level
            // is judged as the full one would be.
            summary.within_slo = false;
            summary.stopped_early = Some(EarlyStop {
                breach,
                saved_requests: n.saturating_sub(summary.requests),
            });
        }
        settle = summary.stopped_early.is_some();
        ladder.record(concurrency, summary.within_slo);
        levels.push(summary);
    }
    levels.sort_by_key(|l| l.concurrency);
    // Why climbing stopped: the lowest level that broke the SLO.
    let stopped_because = levels
        .iter()
        .find(|l| !l.within_slo)
        .map(|l| slo_breach(l, target));
    let capacity = knee::capacity(&levels, target.headroom, stopped_because);
    WorkloadReport {
        workload: workload.name.clone(),
        levels,
        skipped_levels: ladder.skipped().to_vec(),
        capacity,
    }
}

fn slo_breach(l: &LevelSummary, target: &Target) -> String {
    let slo = &target.slo;
    let mut why = Vec::new();
    match l.latency_seconds.p95 {
        None => why.push("no request succeeded".to_string()),
        Some(p) if p > slo.p95_latency.as_secs_f64() => why.push(format!(
            "p95 latency {:.3}s over {}",
            p,
            humantime::format_duration(slo.p95_latency)
        )),
        _ => {}
    }
    if l.shed_ratio > slo.max_shed_ratio {
        why.push(format!(
            "shed ratio {:.3} over {}",
            l.shed_ratio, slo.max_shed_ratio
        ));
    }
    if l.error_ratio > slo.max_error_ratio {
        why.push(format!(
            "error ratio {:.3} over {}",
            l.error_ratio, slo.max_error_ratio
        ));
    }
    if let Some(e) = &l.stopped_early {
        why.push(format!(
            "{} certain after {} of {} requests",
            e.breach.as_str().replace('_', " "),
            l.requests,
            l.planned_requests
        ));
    }
    format!("concurrency {}: {}", l.concurrency, why.join(", "))
}

struct Shared {
    env: SweepEnv,
    cancel: CancellationToken,
    requests: Requests,
}

/// What every request of one target and workload shares; sweeps and gateway
/// pairs send through it.
pub(crate) struct Requests {
    /// The target requests go to.
    pub(crate) target: Arc<Target>,
    /// The workload they belong to.
    pub(crate) workload: Arc<Workload>,
    url: String,
    bodies: Vec<Bytes>,
}

impl Requests {
    /// Bodies built once, for the target's model and token field.
    pub(crate) fn new(target: &Arc<Target>, workload: &Arc<Workload>, base_url: &str) -> Self {
        Requests {
            target: target.clone(),
            workload: workload.clone(),
            url: format!("{base_url}/chat/completions"),
            bodies: body::bodies(&target.model, workload, target.max_tokens_field),
        }
    }

    /// Sends request number `i` (prompts round robin) once it has a place in
    /// the global cap, and returns its sample with the time it ended; None
    /// when cancelled while waiting. `counted` requests reach the observer.
    pub(crate) async fn send(
        &self,
        env: &SweepEnv,
        cancel: &CancellationToken,
        i: u64,
        counted: bool,
    ) -> Option<(Sample, Instant)> {
        // Waiting for the global cap is not latency: the clock starts in `measure`.
        let permit = tokio::select! {
            p = env.in_flight.acquire() => p.ok()?,
            _ = cancel.cancelled() => return None,
        };
        let counted_in_flight = env.observer.in_flight();
        let body = self
            .bodies
            .get((i as usize) % self.bodies.len().max(1))
            .cloned()
            .unwrap_or_default();
        let spec = RequestSpec {
            url: &self.url,
            key: self.target.api_key.as_ref(),
            timeout: self.target.request_timeout,
        };
        let sample = probe::measure(&env.client, &spec, body, cancel).await;
        let ended = Instant::now();
        drop(permit);
        drop(counted_in_flight);
        if counted {
            env.observer.request(&self.target, &self.workload, &sample);
        }
        Some((sample, ended))
    }
}

/// What one level did.
struct LevelRun {
    /// One sample per request sent (cancelled ones included).
    samples: Vec<Sample>,
    /// From the level's start to its last completion.
    wall: Duration,
    /// Set when the level stopped early: the limit it was certain to break.
    stopped: Option<Breach>,
}

/// The early verdict shared by the workers of one level.
struct Judge {
    slo: Slo,
    tally: Mutex<Tally>,
    stopped: Mutex<Option<Breach>>,
    /// Cancels the level's requests, in flight and waiting, once it is decided.
    decided: CancellationToken,
}

impl Judge {
    /// Records a finished request; decides the level when its break is certain.
    fn record(&self, s: &Sample) {
        if s.outcome == Outcome::Cancelled {
            return;
        }
        let mut tally = self.tally.lock().unwrap_or_else(|e| e.into_inner());
        tally.record(s);
        let mut stopped = self.stopped.lock().unwrap_or_else(|e| e.into_inner());
        if stopped.is_none() {
            if let Some(b) = tally.certain_break(&self.slo, &[]) {
                *stopped = Some(b);
                self.decided.cancel();
            }
        }
    }
}

/// Keeps exactly `concurrency` requests in flight (a finished one replaced at
/// once) until `n` were sent, or, when `early_stop` gives the SLO, until the
/// level is certain to break it (requests in flight are then cancelled).
async fn run_level(
    shared: &Arc<Shared>,
    concurrency: u32,
    n: u64,
    counted: bool,
    early_stop: Option<&Slo>,
) -> LevelRun {
    let next = Arc::new(AtomicU64::new(0));
    let decided = shared.cancel.child_token();
    let judge = early_stop.map(|slo| {
        Arc::new(Judge {
            slo: *slo,
            tally: Mutex::new(Tally::new(n)),
            stopped: Mutex::new(None),
            decided: decided.clone(),
        })
    });
    let start = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let shared = shared.clone();
        let next = next.clone();
        let decided = decided.clone();
        let judge = judge.clone();
        workers.spawn(async move {
            let mut mine = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n || decided.is_cancelled() {
                    break;
                }
                match shared
                    .requests
                    .send(&shared.env, &decided, i, counted)
                    .await
                {
                    Some((s, ended)) => {
                        if let Some(j) = &judge {
                            j.record(&s);
                        }
                        mine.push((s, ended));
                    }
                    None => break,
                }
            }
            mine
        });
    }
    let mut samples = Vec::with_capacity(n as usize);
    let mut end = start;
    while let Some(joined) = workers.join_next().await {
        if let Ok(mine) = joined {
            for (s, ended) in mine {
                end = end.max(ended);
                samples.push(s);
            }
        }
    }
    let stopped = judge.and_then(|j| *j.stopped.lock().unwrap_or_else(|e| e.into_inner()));
    LevelRun {
        samples,
        wall: end - start,
        stopped,
    }
}
