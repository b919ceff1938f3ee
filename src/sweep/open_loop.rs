//! One open-loop step: arrivals on an absolute schedule fixed before the
//! step (a slow server cannot slow them), each sent at its time whatever
//! the others are doing. The client's ceiling on requests in flight is a
//! limit, not a queue: an arrival that finds it reached is counted as not
//! sent and never sent later, so no burst follows a stall. Per request, the
//! dispatch lag (actual minus scheduled send) goes with its sample, so the
//! latency a user arriving on schedule saw can be judged
//! ([`crate::stats::sustained`]).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::stats::sample::Outcome;
use crate::stats::sustained::{as_scheduled, Arrival, StepMeasure};
use crate::stats::verdict::Tally;
use crate::sweep::closed_loop::Run;

/// What one step sends.
pub(crate) struct Step<'a> {
    /// Scheduled sends, seconds from the step's start, increasing.
    pub times: &'a [f64],
    /// The first this many arrivals are sent but not counted.
    pub uncounted: usize,
    /// Most requests in flight at once.
    pub ceiling: u32,
    /// The p99 dispatch lag the step may reach, seconds.
    pub lag_bound: f64,
    /// The early verdict on the counted requests, judged on scheduled
    /// latency: the step stops once it is certain to break.
    pub tally: Option<Tally>,
}

/// What a request task hands back.
struct Ended {
    index: usize,
    arrival: Arrival,
    freed: Instant,
}

/// Runs one step from places the caller holds in the global cap (at least
/// `step.ceiling` of them), until every request sent has ended.
pub(crate) async fn run_step(run: &Run, step: Step<'_>) -> StepMeasure {
    let decided = run.cancel.child_token();
    let in_flight = Arc::new(AtomicU32::new(0));
    let judge = step.tally.map(|t| Arc::new(Mutex::new(t)));
    let mut m = StepMeasure {
        counted_from: step.times.get(step.uncounted).copied().unwrap_or(0.0),
        lag_bound: step.lag_bound,
        ..StepMeasure::default()
    };
    let mut tasks = tokio::task::JoinSet::new();
    let start = Instant::now();
    for (index, at) in step.times.iter().enumerate() {
        let due = start + Duration::from_secs_f64(*at);
        tokio::select! {
            _ = tokio::time::sleep_until(due.into()) => {}
            _ = decided.cancelled() => break,
        }
        let counted = index >= step.uncounted;
        if in_flight.load(Ordering::SeqCst) >= step.ceiling.max(1) {
            m.not_sent_client_ceiling += u64::from(counted);
            continue;
        }
        let now_in_flight = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        m.in_flight.push(now_in_flight);
        let (env, requests, cancel) = (run.env.clone(), run.requests.clone(), decided.clone());
        let (in_flight, judge) = (in_flight.clone(), judge.clone());
        let at = *at;
        tasks.spawn(async move {
            let placed = requests
                .send_placed(&env, &cancel, index as u64, counted, false, None)
                .await;
            in_flight.fetch_sub(1, Ordering::SeqCst);
            // The lag of the actual send: the dispatcher's wake-up and the
            // task's start on a busy runtime both delay it.
            let lag = placed.sent.saturating_duration_since(due).as_secs_f64();
            if let (true, Some(j)) = (counted, &judge) {
                if placed.sample.outcome != Outcome::Cancelled {
                    let mut tally = j.lock().unwrap_or_else(PoisonError::into_inner);
                    tally.record(&as_scheduled(&placed.sample, lag));
                    if tally.certain_break(&[]).is_some() {
                        cancel.cancel();
                    }
                }
            }
            (
                counted,
                Ended {
                    index,
                    arrival: Arrival {
                        sample: placed.sample,
                        lag,
                        scheduled_at: at,
                    },
                    freed: placed.freed,
                },
            )
        });
    }
    let mut ended = Vec::with_capacity(step.times.len());
    while let Some(joined) = tasks.join_next().await {
        if let Ok((counted, e)) = joined {
            m.lags.push(e.arrival.lag);
            if counted {
                ended.push(e);
            }
        }
    }
    ended.sort_by_key(|e| e.index);
    m.last_end = m.counted_from;
    for e in ended {
        m.last_end = m.last_end.max((e.freed - start).as_secs_f64());
        if e.arrival.sample.outcome != Outcome::Cancelled {
            m.arrivals.push(e.arrival);
        }
    }
    m.cut_short = run.cancel.is_cancelled();
    m.stopped_early = decided.is_cancelled() && !m.cut_short;
    m
}
