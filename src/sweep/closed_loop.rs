//! One level's closed loop: the level holds all of its places in the global
//! cap, then keeps exactly `concurrency` requests in flight (a finished one
//! replaced at once) until its request count is reached, or, with an early
//! verdict, until the level is certain to break its SLO.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{Barrier, OwnedSemaphorePermit};
use tokio_util::sync::CancellationToken;

use crate::stats::level::Span;
use crate::stats::sample::{Outcome, Sample};
use crate::stats::verdict::{Breach, Tally};
use crate::sweep::env::SweepEnv;
use crate::sweep::output_limit::Watch;
use crate::sweep::requests::Requests;

/// What a level's requests are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pass {
    /// Warm-up: the workload's requests, not counted.
    Warm,
    /// Opening the level's connections: one-token answers, not counted.
    Pool,
    /// The level itself.
    Counted,
}

/// What a level's requests share.
pub(crate) struct Run {
    /// The client, the global cap and the observer.
    pub(crate) env: SweepEnv,
    /// Fires at the sweep's time limit, shutdown or reload.
    pub(crate) cancel: CancellationToken,
    /// The target's and workload's requests.
    pub(crate) requests: Arc<Requests>,
    /// Judges every answer against the output limit, when the field is not
    /// configured: an answer beyond it ends the pass at once.
    pub(crate) watch: Option<Arc<Watch>>,
}

/// What one pass measured.
pub(crate) struct Measured {
    /// One sample per request.
    pub(crate) samples: Vec<Sample>,
    /// From the start to the last completion.
    pub(crate) wall: Duration,
    /// When each request was sent and freed its place, from the start.
    pub(crate) spans: Vec<Span>,
    /// Set when the level stopped early: the limit it was certain to break.
    pub(crate) stopped: Option<Breach>,
}

/// The early verdict shared by the loops of one level.
struct Judge {
    /// The tally and the verdict, once reached.
    state: Mutex<(Tally, Option<Breach>)>,
    /// Cancels the level's requests, in flight and not yet sent, once decided.
    decided: CancellationToken,
}

impl Judge {
    /// Records a request that ended; decides the level when its break is certain.
    fn record(&self, s: &Sample) {
        // A request cancelled by the verdict (or shutdown) has no outcome of its own.
        if s.outcome == Outcome::Cancelled {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (tally, stopped) = &mut *state;
        tally.record(s);
        if stopped.is_none() {
            if let Some(b) = tally.certain_break(&[]) {
                *stopped = Some(b);
                self.decided.cancel();
            }
        }
    }

    fn verdict(&self) -> Option<Breach> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).1
    }
}

impl Run {
    /// Takes `n` places in the global cap, all at once, so that the level
    /// never runs partly throttled by other targets. Waits at most `wait`
    /// (a request holding a place ends within its time limit); Err says why
    /// the places could not be had.
    pub(crate) async fn hold_places(
        &self,
        n: u32,
        wait: Duration,
    ) -> Result<OwnedSemaphorePermit, String> {
        let acquire = self.env.in_flight.clone().acquire_many_owned(n.max(1));
        tokio::select! {
            r = tokio::time::timeout(wait, acquire) => match r {
                Ok(Ok(permit)) => Ok(permit),
                Ok(Err(_)) => Err("the global cap was closed".into()),
                Err(_) => Err(format!(
                    "its {n} places in the global cap (schedule.max_in_flight_total {}) were not free \
                     within {}: other targets held them",
                    self.env.in_flight_total,
                    humantime::format_duration(wait)
                )),
            },
            _ = self.cancel.cancelled() => Err("cancelled".into()),
        }
    }

    /// Keeps exactly `concurrency` requests in flight until `n` were sent,
    /// from places the caller holds; with `early_stop` (a tally of `n`
    /// requests), only until the pass is certain to give a break (its
    /// requests in flight then end as `cancelled`).
    pub(crate) async fn level(
        &self,
        concurrency: u32,
        n: u64,
        pass: Pass,
        early_stop: Option<Tally>,
    ) -> Measured {
        let next = Arc::new(AtomicU64::new(0));
        let decided = self.cancel.child_token();
        let judge = early_stop.map(|tally| {
            Arc::new(Judge {
                state: Mutex::new((tally, None)),
                decided: decided.clone(),
            })
        });
        // Every loop waits until all have started, so that a runtime slow to
        // wake a thread cannot leave one loop sending alone at first.
        let barrier = Arc::new(Barrier::new(concurrency.max(1) as usize));
        let start = Instant::now();
        let mut workers = tokio::task::JoinSet::new();
        for _ in 0..concurrency.max(1) {
            let (env, cancel, requests) =
                (self.env.clone(), decided.clone(), self.requests.clone());
            let (next, barrier, judge) = (next.clone(), barrier.clone(), judge.clone());
            let watch = self.watch.clone();
            workers.spawn(async move {
                barrier.wait().await;
                let mut mine = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n || cancel.is_cancelled() {
                        break;
                    }
                    let placed = requests
                        .send_placed(
                            &env,
                            &cancel,
                            i,
                            pass == Pass::Counted,
                            pass == Pass::Pool,
                            Some(concurrency),
                        )
                        .await;
                    if let Some(j) = &judge {
                        j.record(&placed.sample);
                    }
                    // The pass measures a field that does not bound the
                    // output: its other answers would run away too.
                    if watch.as_ref().is_some_and(|w| w.check(&placed.sample)) {
                        cancel.cancel();
                    }
                    mine.push(placed);
                }
                mine
            });
        }
        let mut samples = Vec::with_capacity(n as usize);
        let mut spans = Vec::with_capacity(n as usize);
        let mut end = start;
        while let Some(joined) = workers.join_next().await {
            if let Ok(mine) = joined {
                for p in mine {
                    end = end.max(p.freed);
                    spans.push(Span {
                        sent: (p.sent - start).as_secs_f64(),
                        freed: (p.freed - start).as_secs_f64(),
                    });
                    samples.push(p.sample);
                }
            }
        }
        Measured {
            samples,
            wall: end - start,
            spans,
            stopped: judge.and_then(|j| j.verdict()),
        }
    }
}
