//! One sweep of one target: per workload, warm-up, then one closed-loop level
//! per concurrency value until a level breaks the SLO. The gateway pairs'
//! interleaved executor ([`interleaved`]) sends through the same [`Requests`].

pub mod interleaved;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::config::{Target, Workload};
use crate::probe::body;
use crate::probe::exchange::{self as probe, RequestSpec};
use crate::probe::tls::Clients;
use crate::stats::knee;
use crate::stats::level;
use crate::stats::report::{LevelSummary, SweepReport, WorkloadReport};
use crate::stats::sample::{Outcome, Sample};

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
    /// The HTTP clients, one per TLS setting (connections pooled across sweeps).
    pub clients: Clients,
    /// Global cap on requests in flight across all targets.
    pub in_flight: Arc<Semaphore>,
    /// Cancels everything on shutdown or reload.
    pub cancel: CancellationToken,
    /// Receives requests and progress.
    pub observer: Arc<dyn Observer>,
}

/// Runs one sweep of `target` served at `base_url`, within `time_limit`.
pub async fn run(
    env: &SweepEnv,
    target: &Arc<Target>,
    base_url: &str,
    time_limit: Duration,
) -> SweepReport {
    let started = Instant::now();
    let setup = crate::probe::setup::discover(
        env.clients.for_target(target),
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
            workloads.push(run_workload(env, &cancel, target, w, base_url).await);
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
        run_level(&shared, c, target.warmup_requests as u64, false).await;
    }

    let mut levels: Vec<LevelSummary> = Vec::new();
    let mut stopped_because = None;
    for &concurrency in &target.levels {
        if cancel.is_cancelled() {
            break;
        }
        let n = target
            .requests_per_level
            .count(concurrency, target.min_requests_per_level);
        env.observer.level_started(target, workload, concurrency, n);
        let (samples, wall) = run_level(&shared, concurrency, n, true).await;
        if cancel.is_cancelled() {
            break;
        }
        let summary = level::summarize_level(concurrency, &samples, wall, &target.slo);
        let ok = summary.within_slo;
        if !ok {
            stopped_because = Some(slo_breach(&summary, target));
        }
        levels.push(summary);
        if !ok {
            break;
        }
    }
    let capacity = knee::capacity(&levels, target.headroom, stopped_because);
    WorkloadReport {
        workload: workload.name.clone(),
        levels,
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
        let sample =
            probe::measure(env.clients.for_target(&self.target), &spec, body, cancel).await;
        let ended = Instant::now();
        drop(permit);
        drop(counted_in_flight);
        if counted {
            env.observer.request(&self.target, &self.workload, &sample);
        }
        Some((sample, ended))
    }
}

/// Keeps exactly `concurrency` requests in flight (a finished one replaced at
/// once) until `n` were sent. Returns the samples and the level's wall time,
/// from its start to the last completion.
async fn run_level(
    shared: &Arc<Shared>,
    concurrency: u32,
    n: u64,
    counted: bool,
) -> (Vec<Sample>, Duration) {
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let shared = shared.clone();
        let next = next.clone();
        workers.spawn(async move {
            let mut mine = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n || shared.cancel.is_cancelled() {
                    break;
                }
                match shared
                    .requests
                    .send(&shared.env, &shared.cancel, i, counted)
                    .await
                {
                    Some(done) => mine.push(done),
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
    (samples, end - start)
}
