//! One level of a closed-loop climb: its places held in the global cap,
//! its connections opened, its counted passes until the verdict is decided
//! (pooled with what earlier sweeps saw), with the server's readings and
//! the client's own lag watched beside it; then the level summarised. The
//! climb ([`super::run_workload`]) decides what the summary means for the
//! knee, the client's limits included (`stats::client`).

use std::time::Duration;

use crate::config::Target;
use crate::stats::decision::{Basis, Counts, Decision, Verdict};
use crate::stats::evidence;
use crate::stats::level;
use crate::stats::report::{FoundIn, LevelRole, LevelSummary};
use crate::stats::sample::Sample;
use crate::stats::verdict::{self, Breach, Tally};
use crate::sweep::client_lag::LagWatch;
use crate::sweep::closed_loop::{self, Pass};
use crate::sweep::signals;
use crate::sweep::timing::unix_now;

/// Why a level was not measured.
pub(super) enum Stop {
    /// The sweep ended (its time limit, shutdown or reload) during it.
    Cancelled,
    /// Its places in the global cap were not free within the wait.
    Places(String),
    /// An answer was beyond the output limit: the workload starts again.
    Unbounded(String, FoundIn),
}

/// Measures level `concurrency` of `role`, from places it holds for it,
/// judged with `pooled` (what earlier sweeps saw there): its summary, and
/// its requests' samples (a first level's decide whether the setup is wrong).
pub(super) async fn measure(
    run: &closed_loop::Run,
    concurrency: u32,
    role: LevelRole,
    server: Option<&signals::Watch>,
    pooled: &evidence::Prior,
) -> Result<(LevelSummary, Vec<Sample>), Stop> {
    let target = &run.requests.target;
    let workload = &run.requests.workload;
    let unbounded = || run.watch.as_ref().and_then(|w| w.unbounded());
    let n = target
        .requests_per_level
        .count(concurrency, target.min_requests_per_level);
    // Told before the wait for places and the pool: a level is under way
    // (for the progress display) from the moment the climb moves to it.
    run.env
        .observer
        .level_started(target, workload, concurrency, n);
    let places = run
        .hold_places(concurrency, target.request_timeout)
        .await
        .map_err(Stop::Places)?;
    // The pool holds `concurrency` open connections before anything is
    // counted: a connection opened during the level would count its
    // handshake as latency.
    run.level(concurrency, u64::from(concurrency), Pass::Pool, None)
        .await;
    if let Some(why) = unbounded() {
        return Err(Stop::Unbounded(why, FoundIn::Pool));
    }
    let reading = server.map(signals::Watch::start);
    let lag = LagWatch::start();
    let judged = judge_level(run, target, concurrency, n, pooled).await;
    drop(places);
    let client_lag = lag.finish().await;
    let server_signals = match reading {
        Some(r) => Some(r.finish().await),
        None => None,
    };
    if let Some(why) = unbounded() {
        return Err(Stop::Unbounded(why, FoundIn::Counted));
    }
    if run.cancel.is_cancelled() {
        return Err(Stop::Cancelled);
    }
    let Judged {
        measured,
        first_spans,
        planned,
        verdict,
    } = judged;
    let mut summary =
        level::summarize_level(concurrency, &measured.samples, measured.wall, &target.slo);
    // Judged on the first pass: between passes the loop drains by design.
    level::judge_concurrency(&mut summary, &first_spans);
    summary.measured_at_unix_seconds = unix_now();
    summary.role = role;
    summary.planned_requests = planned;
    summary.within_slo = verdict.counted_as == Decision::Pass;
    summary.verdict = Some(verdict);
    summary.server = server_signals;
    summary.client_lag = Some(client_lag);
    if let Some(breach) = measured.stopped {
        // Certain to break in full (stats::verdict): the partial level
        // is judged as the full one would be.
        level::mark_stopped_early(&mut summary, breach, planned);
    }
    Ok((summary, measured.samples))
}

/// What the passes over one level measured, and their verdict.
struct Judged {
    /// Every pass's samples, walls added; `stopped` from the last pass.
    measured: closed_loop::Measured,
    /// The spans of the first pass (the planned count).
    first_spans: Vec<level::Span>,
    /// Requests the passes were to send in all.
    planned: u64,
    verdict: Verdict,
}

/// Runs the counted passes over a level from places the caller holds: its
/// planned count `n`, then, while the verdict (pooled with what earlier
/// sweeps saw, `prior`) is undecided, `n` more, up to the target's
/// `verdict_ceiling` times `n`, and so while (above the lowest level) it
/// passes on that pool while this sweep's own requests observe a share over
/// its limit ([`verdict::pass_in_doubt`]); while they put its errors in
/// doubt ([`verdict::errors_in_doubt`]), up to [`verdict::DOUBT_CEILING`]
/// times that when `n` is [`verdict::fine`] and the ceiling is over 1.
/// Still undecided, the level counts as it was
/// last decided on this server (a break only while this sweep's own
/// requests still observe it, [`verdict::stand_in`]), or, when it never
/// was, as undecided: it neither raises nor lowers the knee, which says so.
async fn judge_level(
    run: &closed_loop::Run,
    target: &Target,
    concurrency: u32,
    n: u64,
    prior: &evidence::Prior,
) -> Judged {
    let window = &prior.window;
    let ceiling = n.saturating_mul(u64::from(target.verdict_ceiling.max(1)));
    let fine = verdict::fine(n, &target.slo);
    // A ceiling of 1 is an operator's "no more requests".
    let doubt_ceiling = if fine && target.verdict_ceiling > 1 {
        ceiling.saturating_mul(verdict::DOUBT_CEILING)
    } else {
        ceiling
    };
    let mut all = closed_loop::Measured {
        samples: Vec::new(),
        wall: Duration::ZERO,
        spans: Vec::new(),
        stopped: None,
    };
    let mut first_spans = None;
    let mut before = Counts::default();
    let mut planned = 0;
    loop {
        let step = n.min(doubt_ceiling - planned);
        let tally = target
            .early_stop
            .then(|| Tally::new(step, &target.slo, target.verdict_confidence, before, window));
        let pass = run.level(concurrency, step, Pass::Counted, tally).await;
        planned += step;
        before = before + Counts::of(&pass.samples, &target.slo);
        all.wall += pass.wall;
        all.stopped = pass.stopped;
        first_spans.get_or_insert_with(|| pass.spans.clone());
        all.spans.extend(pass.spans);
        all.samples.extend(pass.samples);
        let mut verdict = verdict::decide(window, &before, &target.slo, target.verdict_confidence);
        if let Some(breach) = all.stopped {
            verdict.decision = Decision::Break;
            verdict.counted_as = Decision::Break;
            verdict.decided_by = Some(match breach {
                Breach::Shed => Basis::Shed,
                Breach::Errors => Basis::Errors,
                Breach::Latency => Basis::P95Latency,
            });
        }
        if verdict.decision == Decision::Undecided && !verdict.change_seen {
            // Never decided here (or a break this sweep no longer shows):
            // neither a pass nor a break (stats::knee).
            verdict.counted_as = verdict::stand_in(prior.last_decided, &before, &target.slo);
        }
        // Not at the lowest level: its pool reads a server failing at every
        // load (knee 0), and extra passes there, drawn after an unlucky
        // first one, broke it falsely on a server failing 4% (BENCHMARKS.md).
        let lowest = target.levels.first().is_some_and(|&l| concurrency <= l);
        let doubt = !lowest && verdict::pass_in_doubt(&verdict, &before, &target.slo);
        let errors_doubt = !lowest
            && verdict::errors_in_doubt(&verdict, &before, &target.slo, fine && planned == n);
        let more = ((verdict.decision == Decision::Undecided || doubt) && planned < ceiling
            || errors_doubt && planned < doubt_ceiling)
            && !run.cancel.is_cancelled()
            // An answer over the output limit restarts the workload anyway.
            && run.watch.as_ref().map_or(true, |w| w.unbounded().is_none());
        if !more {
            return Judged {
                measured: all,
                first_spans: first_spans.unwrap_or_default(),
                planned,
                verdict,
            };
        }
    }
}
