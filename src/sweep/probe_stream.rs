//! The probes between sweeps: one request at a time, on a Poisson schedule
//! fixed ahead from a seeded generator (open-loop arrivals at a low rate:
//! nothing the server does moves a send time), each a new conversation with
//! a small output budget. A probe whose time comes while the target is swept,
//! while the probe before is still in flight, or after the client stalled
//! past it is not sent, and never sent later: no burst follows a stall. A
//! sweep of the target waits for the probe in flight, then holds the
//! [`Lane`] so that no probe runs beside it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::config::{ProbeSettings, Target, Workload};
use crate::stats::arrivals::{self, Arrivals};
use crate::stats::probe::{ColdRule, ProbeEvent, ProbeResult, Skip};
use crate::stats::sample::Outcome;
use crate::sweep::client_lag::LagWatch;
use crate::sweep::env::SweepEnv;
use crate::sweep::requests::Requests;

/// Arrivals drawn at a time; each block has a seed of its own.
const BLOCK: usize = 64;
/// A probe reached this long after its time is late, and not sent: the
/// client stalled.
pub const LATE_AFTER: Duration = Duration::from_secs(1);

/// What a target's sweeps and its probes share.
#[derive(Debug, Default)]
pub struct Lane {
    /// Held by a sweep for its whole run, and by each probe in flight.
    held: tokio::sync::Mutex<()>,
    /// Whether a probe is in flight (the idle gate leaves it out).
    probing: AtomicBool,
    /// When the last request from llmprobe to the target ended.
    last_end: Mutex<Option<Instant>>,
}

impl Lane {
    /// Waits for the probe in flight, if any, and holds the lane until the
    /// guard is dropped (then counts the sweep's end as the target's last
    /// request).
    pub async fn sweep(&self) -> SweepGuard<'_> {
        SweepGuard {
            lane: self,
            _held: self.held.lock().await,
        }
    }

    /// Requests from llmprobe to the target that the server is serving now
    /// and that a sweep does not count as the server's own load: the probe
    /// in flight.
    pub fn probes_in_flight(&self) -> u32 {
        u32::from(self.probing.load(Ordering::SeqCst))
    }

    fn ended_now(&self) {
        *self.last_end.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
    }

    fn idle_at(&self, t: Instant) -> Option<Duration> {
        let last = *self.last_end.lock().unwrap_or_else(PoisonError::into_inner);
        last.map(|l| t.saturating_duration_since(l))
    }
}

/// A sweep's hold on the lane.
pub struct SweepGuard<'a> {
    lane: &'a Lane,
    _held: tokio::sync::MutexGuard<'a, ()>,
}

impl Drop for SweepGuard<'_> {
    fn drop(&mut self) {
        self.lane.ended_now();
    }
}

/// The workload a probe sends: the configured one, else the target's first,
/// with the probe's output budget.
fn probe_workload(target: &Target, settings: &ProbeSettings) -> Option<Arc<Workload>> {
    let w = match &settings.workload {
        Some(name) => target.workloads.iter().find(|w| &w.name == name)?,
        None => target.workloads.first()?,
    };
    let mut w = Workload::clone(w);
    w.max_completion_tokens = settings.max_completion_tokens;
    Some(Arc::new(w))
}

/// Sends `target`'s probes at `base_url` until `env.cancel` fires, each
/// event to `report`. Returns at once when the target has no probes.
pub async fn run(
    env: &SweepEnv,
    target: &Arc<Target>,
    base_url: &str,
    lane: &Lane,
    report: &(dyn Fn(ProbeEvent) + Send + Sync),
) {
    let settings = &target.probe;
    let (Some(interval), Some(workload)) = (settings.interval, probe_workload(target, settings))
    else {
        return;
    };
    let requests = Requests::new(target, &workload, base_url).await;
    let seed = settings.seed.unwrap_or_else(|| fastrand::u64(..));
    let mut times = SendTimes::new(1.0 / interval.as_secs_f64(), seed).peekable();
    let mut cold = ColdRule::new(settings.cold_after);
    let start = Instant::now();
    let at = |t: f64| start + Duration::from_secs_f64(t);
    let mut sent: u64 = 0;
    while let Some(t) = times.next() {
        let due = at(t);
        tokio::select! {
            _ = tokio::time::sleep_until(due.into()) => {}
            _ = env.cancel.cancelled() => return,
        }
        let now = Instant::now();
        // One at a time: a probe (or sweep) was in flight at this time.
        if lane.last_end_after(due) {
            report(ProbeEvent::Skipped(Skip::Overlap));
            continue;
        }
        // A stalled client sends at most the last of the arrivals it
        // missed, and only if that one is not long overdue.
        let next_due = times.peek().map(|n| at(*n));
        if now.saturating_duration_since(due) > LATE_AFTER || next_due.is_some_and(|n| n <= now) {
            report(ProbeEvent::Skipped(Skip::Late));
            continue;
        }
        let Ok(_held) = lane.held.try_lock() else {
            report(ProbeEvent::Skipped(Skip::Sweeping));
            continue;
        };
        let Some(result) = probe_once(env, &requests, lane, sent, due, &mut cold).await else {
            return;
        };
        sent += 1;
        report(ProbeEvent::Probed(result));
    }
}

/// Send times, seconds from the stream's start, without end: Poisson
/// arrivals at `rate`, drawn [`BLOCK`] at a time from seeds that follow
/// `seed`, so a seed gives the same schedule every time.
struct SendTimes {
    rate: f64,
    seed: u64,
    block: u64,
    offset: f64,
    pending: std::vec::IntoIter<f64>,
}

impl SendTimes {
    fn new(rate: f64, seed: u64) -> Self {
        SendTimes {
            rate,
            seed,
            block: 0,
            offset: 0.0,
            pending: Vec::new().into_iter(),
        }
    }
}

impl Iterator for SendTimes {
    type Item = f64;

    fn next(&mut self) -> Option<f64> {
        if let Some(t) = self.pending.next() {
            return Some(t);
        }
        let seed = self.seed.wrapping_add(self.block);
        let times = arrivals::schedule(Arrivals::Poisson, self.rate, BLOCK, seed);
        let offset = self.offset;
        self.offset += times.last().copied()?;
        self.block += 1;
        self.pending = times
            .into_iter()
            .map(|t| t + offset)
            .collect::<Vec<_>>()
            .into_iter();
        self.pending.next()
    }
}

impl Lane {
    /// Whether the last request ended after `t`: one was in flight then.
    fn last_end_after(&self, t: Instant) -> bool {
        self.last_end
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some_and(|l| l > t)
    }
}

/// Sends one probe from a place in the global cap and judges it; None when
/// cancelled.
async fn probe_once(
    env: &SweepEnv,
    requests: &Requests,
    lane: &Lane,
    i: u64,
    due: Instant,
    cold: &mut ColdRule,
) -> Option<ProbeResult> {
    // Waiting for the global cap is the client's delay: it is in the lag.
    let _permit = tokio::select! {
        p = env.in_flight.acquire() => p.ok()?,
        _ = env.cancel.cancelled() => return None,
    };
    lane.probing.store(true, Ordering::SeqCst);
    let idle = lane.idle_at(Instant::now());
    // A stall of the client's own process while the probe runs lands in its
    // TTFT: watched, so that the host's stall is not read as the server's.
    let watch = LagWatch::start();
    let placed = requests
        .send_placed(env, &env.cancel, i, false, false, None)
        .await;
    let stall = watch.finish().await.max_seconds;
    lane.probing.store(false, Ordering::SeqCst);
    lane.ended_now();
    let sample = placed.sample;
    if sample.outcome == Outcome::Cancelled {
        return None;
    }
    let lag = placed.sent.saturating_duration_since(due).as_secs_f64();
    let mut result = ProbeResult::of(&sample, lag, stall);
    result.cold = match (result.outcome.served(), sample.ttft) {
        // The client's TTFT says nothing of the model: not judged, and not
        // in the warm window.
        (true, Some(_)) if result.client_stall.is_some() => None,
        (true, Some(ttft)) => cold.judge(idle, ttft),
        _ => {
            cold.failed();
            None
        }
    };
    Some(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_times_go_on_past_a_block_and_repeat_with_the_seed() {
        let a: Vec<f64> = SendTimes::new(10.0, 4).take(200).collect();
        let b: Vec<f64> = SendTimes::new(10.0, 4).take(200).collect();
        assert_eq!(a, b);
        assert!(
            a.windows(2).all(|w| w[1] > w[0]),
            "increasing across blocks"
        );
        // 200 gaps of mean 0.1 s: about 20 s (the sum's sd is 1.4 s).
        assert!((14.0..26.0).contains(&a[199]), "{}", a[199]);
        assert_ne!(a, SendTimes::new(10.0, 5).take(200).collect::<Vec<_>>());
    }
}
