//! One sweep of one target: per workload a warm-up and one closed-loop
//! level per concurrency value, until a level breaks the SLO or cannot keep
//! its concurrency; every answer judged against the output limit
//! ([`output_limit`]), a workload started again with the next field when
//! one is beyond it. The gateway pairs'
//! interleaved executor ([`interleaved`]) sends through the same [`Requests`].

mod client_lag;
mod climb;
mod closed_loop;
mod env;
pub mod interleaved;
pub mod ladder;
mod level_run;
pub mod online;
mod open_loop;
pub mod output_limit;
pub mod probe_stream;
pub mod refine;
mod requests;
mod setup_check;
mod shared_bodies;
pub(crate) mod signals;
pub mod sustained;
mod timing;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::config::Target;
use crate::stats::conclusion::{self, Concluded, Earlier};
use crate::stats::evidence::{self, Evidence};
use crate::stats::report::{FoundIn, LevelSummary, Setup, SweepKind, SweepReport, WorkloadReport};
use crate::stats::sample::{Outcome, ReasoningFields};
use crate::stats::setup_error::SetupError;
use crate::sweep::ladder::{Ladder, WarmStart};
use closed_loop::Pass;
pub use env::{NoObserver, Observer, SweepEnv};
pub(crate) use requests::Requests;
use setup_check::Stop;
pub use timing::SETTLE_AFTER_EARLY_STOP;
use timing::{unix_now, Ending};

/// What a target's loop knows from its earlier sweeps (nothing for a
/// one-shot sweep without `--state`, or the first sweep of a target with no
/// saved state).
#[derive(Debug, Clone, Copy, Default)]
pub struct Prior<'a> {
    /// Where each workload starts, by name, for a warm sweep; None: a full one.
    pub warm: Option<&'a BTreeMap<String, WarmStart>>,
    /// The loop's latest sweep: the output-limit field it used.
    pub latest: Option<&'a SweepReport>,
    /// The loop's latest successful sweep: the levels it measured stand in
    /// for those this one does not run (on the same server only).
    pub good: Option<&'a SweepReport>,
    /// What its earlier sweeps saw at each level, pooled into the verdicts.
    pub evidence: Option<&'a Evidence>,
}

/// How long `run` waits for the workloads to notice the end of the sweep's
/// time limit (every wait in a sweep also watches the cancel token).
const WIND_DOWN: Duration = Duration::from_secs(5);

/// Runs one sweep of `target` served at `base_url`, within `time_limit`:
/// a full climb, or a warm start (per workload name) when `warm` is given.
pub async fn run(
    env: &SweepEnv,
    target: &Arc<Target>,
    base_url: &str,
    time_limit: Duration,
    warm: Option<&BTreeMap<String, WarmStart>>,
) -> SweepReport {
    let prior = Prior {
        warm,
        ..Prior::default()
    };
    run_after(env, target, base_url, time_limit, prior).await
}

/// [`run`], for a sweep of a loop that knows what its earlier sweeps found.
pub async fn run_after(
    env: &SweepEnv,
    target: &Arc<Target>,
    base_url: &str,
    time_limit: Duration,
    prior: Prior<'_>,
) -> SweepReport {
    let started = Instant::now();
    let cancel = env.cancel.child_token();
    let (timer, limit_hit) = start_timer(&cancel, time_limit);
    let client = env.clients.for_target(target);
    let setup = tokio::select! {
        s = crate::probe::setup::discover(client, base_url, target.api_key.as_ref(), &target.model) => s,
        _ = cancel.cancelled() => Default::default(),
    };
    let (server_metrics, server) = tokio::select! {
        found = signals::locate(client, target, base_url) => found,
        _ = cancel.cancelled() => Default::default(),
    };
    // A warm start rests on the knee of the server the loop last swept:
    // another one (a restart may meet an upgraded server) climbs in full.
    let warm = prior.warm.filter(|_| {
        prior
            .latest
            .map_or(true, |l| evidence::same_server(&l.setup, &setup))
    });
    if setup.model_listed == Some(false) {
        tracing::warn!(
            target_name = %target.name,
            model = %target.model,
            served = %setup.models.join(","),
            "the configured model is not among the models the server lists"
        );
    }
    let ending = Ending {
        limit_hit: limit_hit.clone(),
        time_limit,
    };
    let earlier = prior.latest.map(|r| output_limit::Earlier {
        model: &r.model,
        setup: &r.setup,
        output_limit: &r.output_limit,
    });
    let mut choice = output_limit::Choice::start_for(
        crate::probe::api::kind(target.api).output_limit_fields(),
        target.max_tokens_field,
        &target.model,
        &setup,
        earlier,
    );
    let sweeping = Sweeping {
        env,
        target,
        base_url,
        cancel: &cancel,
        ending: &ending,
        server: server.as_ref(),
        setup: &setup,
        evidence: prior.evidence,
    };
    // Levels measured on another server (or model) say nothing of this one.
    let good = prior
        .good
        .filter(|g| g.model == target.model && g.setup == setup);
    let mut measured = Measured::default();
    // In a block: the future borrows the results, and is dropped before they are read.
    {
        let work = run_workloads(&sweeping, warm, good, &mut choice, &mut measured);
        tokio::pin!(work);
        tokio::select! {
            _ = &mut work => {}
            _ = cancel.cancelled() => {
                // Everything watches the token: let the workloads say where they stopped.
                let _ = tokio::time::timeout(WIND_DOWN, &mut work).await;
            }
        }
    }
    cancel.cancel();
    timer.abort();
    let Measured {
        workloads,
        checked,
        error,
        setup_error,
    } = measured;
    let error = if let Some(e) = &setup_error {
        Some(e.message.clone())
    } else if limit_hit.load(Ordering::SeqCst) {
        Some(ending.time_limit_text())
    } else if env.cancel.is_cancelled() {
        Some("sweep cancelled".to_string())
    } else {
        error.or_else(|| unreachable_error(&workloads))
    };
    let mut setup = setup;
    setup.reasoning_field = reasoning_fields(&workloads);
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
        setup_error,
        duration_seconds: started.elapsed().as_secs_f64(),
        finished_at_unix_seconds: unix_now(),
        setup,
        output_limit: choice.report(checked),
        server_metrics,
        workloads,
    }
}

/// The fields the levels' reasoning came in, as the setup reports them.
fn reasoning_fields(workloads: &[WorkloadReport]) -> String {
    workloads
        .iter()
        .flat_map(|w| &w.levels)
        .fold(ReasoningFields::default(), |f, l| {
            f.union(l.reasoning_fields)
        })
        .names()
        .to_string()
}

/// Cancels `cancel` once `time_limit` has passed, and says so in the flag.
fn start_timer(
    cancel: &CancellationToken,
    time_limit: Duration,
) -> (tokio::task::JoinHandle<()>, Arc<AtomicBool>) {
    let limit_hit = Arc::new(AtomicBool::new(false));
    let (cancel, hit) = (cancel.clone(), limit_hit.clone());
    let timer = tokio::spawn(async move {
        tokio::select! {
            _ = tokio::time::sleep(time_limit) => {
                hit.store(true, Ordering::SeqCst);
                cancel.cancel();
            }
            _ = cancel.cancelled() => {}
        }
    });
    (timer, limit_hit)
}

/// What every workload of one sweep shares.
struct Sweeping<'a> {
    env: &'a SweepEnv,
    target: &'a Arc<Target>,
    base_url: &'a str,
    cancel: &'a CancellationToken,
    ending: &'a Ending,
    /// The engine's own metrics, when they were found.
    server: Option<&'a signals::Watch>,
    setup: &'a Setup,
    /// The loop's pooled evidence.
    evidence: Option<&'a Evidence>,
}

/// What the workloads of one sweep gave.
#[derive(Default)]
struct Measured {
    workloads: Vec<WorkloadReport>,
    /// Answers judged within the output limit.
    checked: u64,
    /// Why the sweep ended without its every workload, when it did.
    error: Option<String>,
    /// The setup error that ended it, when one did.
    setup_error: Option<SetupError>,
}

/// Runs the target's workloads in order into `out`, until one ends the
/// sweep (a setup error, an output nothing bounds) or it is cancelled.
async fn run_workloads(
    s: &Sweeping<'_>,
    warm: Option<&BTreeMap<String, WarmStart>>,
    good: Option<&SweepReport>,
    choice: &mut output_limit::Choice,
    out: &mut Measured,
) {
    for w in &s.target.workloads {
        let start = warm.map(|m| m.get(&w.name).cloned().unwrap_or_default());
        let earlier = good.and_then(|g| {
            let workload = g.workloads.iter().find(|x| x.workload == w.name)?;
            Some(Earlier {
                workload,
                finished_at: g.finished_at_unix_seconds,
            })
        });
        match measure_workload(s, w, start.as_ref(), earlier, choice, &mut out.checked).await {
            Ok(Some(report)) => out.workloads.push(report),
            Ok(None) => return,
            // Every other workload would fail alike: the sweep ends.
            Err(Stop::Setup(e)) => {
                out.setup_error = Some(e);
                return;
            }
            Err(Stop::Unbounded(why, _)) => {
                out.error = Some(why);
                return;
            }
        }
    }
}

/// Measures workload `w`; each answer is judged against the output limit,
/// and one beyond it starts the workload again with the next field (a few
/// at most). Ok(None): cancelled; Err(Stop::Unbounded): no field bounds
/// the output.
async fn measure_workload(
    s: &Sweeping<'_>,
    w: &Arc<crate::config::Workload>,
    start: Option<&WarmStart>,
    earlier: Option<Earlier<'_>>,
    choice: &mut output_limit::Choice,
    checked: &mut u64,
) -> Result<Option<WorkloadReport>, Stop> {
    loop {
        if s.cancel.is_cancelled() {
            return Ok(None);
        }
        let limit = u64::from(w.max_completion_tokens);
        let watch = choice.watch(limit).map(Arc::new);
        let requests = Requests::for_sweep(s.target, w, s.base_url, choice.field()).await;
        let pool = |level| {
            s.evidence
                .map_or_else(Default::default, |e| e.prior(s.setup, &w.name, level))
        };
        let measured = run_workload(
            s.env,
            s.cancel,
            s.ending,
            requests,
            start,
            watch.clone(),
            earlier,
            &pool,
            s.server,
            s.setup,
        )
        .await;
        *checked += watch.as_ref().map_or(0, |w| w.bounded());
        let (why, found_in) = match measured {
            Ok(report) => return Ok(Some(report)),
            Err(Stop::Unbounded(why, found_in)) => (why, found_in),
            Err(stop) => return Err(stop),
        };
        let left = choice.field();
        let field = choice
            .unbounded(why, found_in, limit)
            .map_err(|e| Stop::Unbounded(e, found_in))?;
        tracing::warn!(
            target_name = %s.target.name,
            field = field.as_str(),
            "the server does not honour `{}`: sending the output limit as `{}` \
             (set max_tokens_field to say so)",
            left.as_str(),
            field.as_str()
        );
        // The abandoned answers leave the server once it notices their
        // closed connections.
        tokio::select! {
            _ = tokio::time::sleep(SETTLE_AFTER_EARLY_STOP) => {}
            _ = s.cancel.cancelled() => {}
        }
    }
}

/// A sweep in which no request reached the server did not measure anything.
fn unreachable_error(workloads: &[WorkloadReport]) -> Option<String> {
    let levels = workloads.iter().flat_map(|w| &w.levels);
    let (mut total, mut unreachable, mut proxy) = (0, 0, 0);
    for l in levels {
        total += l.requests;
        unreachable += l.count(Outcome::ConnectError);
        proxy += l.count(Outcome::ProxyError);
    }
    match (total > 0 && unreachable + proxy == total, proxy > 0) {
        (false, _) => None,
        (true, false) => Some("no request could connect to the server".to_string()),
        (true, true) => Some("no request got through the proxy to the server".to_string()),
    }
}

/// Runs one workload: warm-up, then its levels; Err: why it was abandoned.
// The workload's own inputs and the two things its loop knows (the last good
// sweep's levels, the pooled evidence): grouping them would only rename them.
#[allow(clippy::too_many_arguments)]
async fn run_workload(
    env: &SweepEnv,
    cancel: &CancellationToken,
    ending: &Ending,
    requests: Requests,
    warm: Option<&WarmStart>,
    watch: Option<Arc<output_limit::Watch>>,
    earlier: Option<Earlier<'_>>,
    pool: &(dyn Fn(u32) -> evidence::Prior + Sync),
    server: Option<&signals::Watch>,
    setup: &Setup,
) -> Result<WorkloadReport, Stop> {
    let requests = Arc::new(requests);
    let target = requests.target.clone();
    let workload = requests.workload.clone();
    let run = closed_loop::Run {
        env: env.clone(),
        cancel: cancel.clone(),
        requests,
        watch,
    };
    let unbounded = || run.watch.as_ref().and_then(|w| w.unbounded());

    // Warm-up opens connections and wakes caches; its samples are dropped
    // (its answers are judged against the output limit all the same).
    let first_level = target.levels.first().copied().unwrap_or(1);
    let mut first = setup_check::First::new(setup);
    if target.warmup_requests > 0 {
        let c = target.warmup_requests.min(first_level.max(1));
        run.env
            .observer
            .warmup_started(&target, &workload, u64::from(target.warmup_requests));
        if let Ok(places) = run.hold_places(c, target.request_timeout).await {
            let warm = run
                .level(c, u64::from(target.warmup_requests), Pass::Warm, None)
                .await;
            drop(places);
            // A field the server refuses is found first: the workload
            // starts again with the next one, which may well be accepted.
            if let Some(why) = unbounded() {
                return Err(Stop::Unbounded(why, FoundIn::WarmUp));
            }
            first.judge(&run.requests, &warm.samples)?;
        }
    }
    if let Some(why) = unbounded() {
        return Err(Stop::Unbounded(why, FoundIn::WarmUp));
    }

    // Which level comes next: the configured ones from the lowest (a warm
    // start skips those up to half the last knee), then the refinement
    // probes; each verdict decides the next.
    let ladder = Ladder::new(&target.levels, target.refine_resolution, warm);
    let climb = climb::run(&run, ending, ladder, pool, server, &mut first).await?;
    let skipped_levels = climb.skipped.clone();
    let window = |c| {
        let p = pool(c);
        p.ages.into_iter().zip(p.window).collect()
    };
    let Concluded {
        levels,
        carried_levels,
        mut capacity,
    } = conclusion::conclude(climb, &target, earlier, &window, unix_now());
    let last = earlier.and_then(|e| e.workload.capacity.sustained.as_ref());
    capacity.sustained = match sustained::plan(&target.sustained, last, capacity.knee_concurrency) {
        sustained::Plan::None => None,
        sustained::Plan::Carry(s) => Some(s),
        sustained::Plan::Search(last) if !cancel.is_cancelled() => {
            let all: Vec<&LevelSummary> = levels.iter().chain(&carried_levels).collect();
            let ladder = sustained::Ladder {
                capacity: &capacity,
                levels: &all,
                requests: levels.iter().map(|l| l.requests).sum(),
            };
            sustained::search(&run, &target, ladder, last.as_ref()).await
        }
        sustained::Plan::Search(_) => None,
    };
    Ok(WorkloadReport {
        workload: workload.name.clone(),
        levels,
        skipped_levels,
        carried_levels,
        capacity,
    })
}
