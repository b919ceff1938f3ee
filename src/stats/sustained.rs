//! The sustained rate: what an open-loop search found (the highest arrival
//! rate at which the SLO held) and each step it ran, and the judgement of
//! one step from its requests. Pure: the dispatcher (`sweep::open_loop`)
//! hands in samples and timestamps.

use std::time::Duration;

use crate::config::Slo;
use crate::stats::binomial;
use crate::stats::decision::{Counts, Decision};
use crate::stats::level::percentiles;
pub use crate::stats::report::{RateStep, StepResult, Sustained, SustainedStatus};
use crate::stats::sample::{Outcome, Sample};
use crate::stats::verdict;

/// Confidence at which a confirmation's pass must hold: it passes only
/// when each share's upper bound at this confidence is within its limit
/// (about its median-unbiased estimate), not merely its observed value. The rate a
/// search reports is one a fleet is sized on: a 40-request step at the
/// server's saturation rate passes on its observed shed ratio often enough
/// to overstate the rate by a quarter, and this rule stops most of those.
pub const PASS_CONFIDENCE: f64 = 0.5;

/// Whether every share of `c` is within its limit by the pass rule.
pub fn clearly_within(c: &Counts, slo: &Slo) -> bool {
    let alpha = 1.0 - PASS_CONFIDENCE;
    let upper = |k: u64, n: u64| {
        if n == 0 {
            0.0
        } else {
            1.0 - binomial::lower_bound(n - k, n, alpha)
        }
    };
    upper(c.shed, c.ended) <= slo.max_shed_ratio
        && upper(c.failed, c.ended) <= slo.max_error_ratio
        && upper(c.slow, c.timed) <= verdict::SLOW_SHARE
}

/// One counted request of a step, as the dispatcher saw it.
#[derive(Debug, Clone)]
pub struct Arrival {
    /// Its measurement (clocks from the actual send).
    pub sample: Sample,
    /// Actual send minus scheduled send, seconds.
    pub lag: f64,
    /// Scheduled send, seconds from the step's start.
    pub scheduled_at: f64,
}

/// The sample as a user who arrived at the scheduled moment saw it: the
/// dispatch lag added to every clock, so that the verdict's latency tests
/// judge the scheduled latency.
pub fn as_scheduled(sample: &Sample, lag: f64) -> Sample {
    let lag = Duration::from_secs_f64(lag.max(0.0));
    let mut s = sample.clone();
    s.ttft = s.ttft.map(|t| t + lag);
    s.latency = s.latency.map(|t| t + lag);
    s.elapsed += lag;
    s
}

/// What the dispatcher measured of one step, to be judged.
#[derive(Debug, Clone, Default)]
pub struct StepMeasure {
    /// Counted requests that were sent.
    pub arrivals: Vec<Arrival>,
    /// Counted arrivals not sent: the client's ceiling was reached.
    pub not_sent_client_ceiling: u64,
    /// Dispatch lag of every arrival sent, seconds.
    pub lags: Vec<f64>,
    /// Requests in flight at each send.
    pub in_flight: Vec<u32>,
    /// First counted scheduled send, seconds from the step's start.
    pub counted_from: f64,
    /// The p99 of dispatch lag the step may reach, seconds: beyond it the
    /// client sent too late for what it measured to be the offered traffic.
    pub lag_bound: f64,
    /// Last end of a counted request, seconds from the step's start.
    pub last_end: f64,
    /// Whether the step was stopped because it was certain to break.
    pub stopped_early: bool,
    /// Whether the sweep ended (time limit, shutdown) during the step.
    pub cut_short: bool,
}

/// The inputs of a step beyond its measure.
#[derive(Debug, Clone, Copy)]
pub struct StepPlan {
    /// The arrival rate.
    pub rate: f64,
    /// Seed of its schedule.
    pub seed: u64,
    /// Arrivals scheduled in all.
    pub scheduled: u64,
    /// First arrivals not counted.
    pub uncounted: u64,
    /// Whether this is the longer step that confirms a rate: judged by the
    /// strict pass rule ([`PASS_CONFIDENCE`]); the shorter steps that steer
    /// the search pass on their observed shares, as levels do.
    pub confirming: bool,
    /// Counts of the earlier steps at the same rate that a confirmation
    /// pools with its own (none for a step that steers).
    pub prior: Counts,
}

/// Judges one step: the same verdict as a closed-loop level (shed and error
/// ratios, the order-statistic bound on the p95), on scheduled latency.
pub fn judge_step(plan: StepPlan, m: &StepMeasure, slo: &Slo, confidence: f64) -> RateStep {
    let scheduled: Vec<Sample> = m
        .arrivals
        .iter()
        .map(|a| as_scheduled(&a.sample, a.lag))
        .collect();
    let counts = Counts::of(&scheduled, slo);
    let window: &[Counts] = if plan.prior.ended > 0 {
        std::slice::from_ref(&plan.prior)
    } else {
        &[]
    };
    let mut v = verdict::decide(window, &counts, slo, confidence);
    if m.stopped_early {
        v.decision = Decision::Break;
    }
    // The pool is left out when it differs from this step beyond chance.
    let evidence = if v.pooled_sweeps > 0 {
        plan.prior + counts
    } else {
        counts
    };
    // A confirmation stands on the pool by the strict rule, and on its own
    // requests by a step's rule: the step it pools passed, which is where a
    // rate over the limit gets lucky.
    if plan.confirming
        && v.decision == Decision::Pass
        && (!clearly_within(&evidence, slo) || !verdict::within_observed(&counts, slo))
    {
        v.decision = Decision::Undecided;
    }
    v.counted_as = v.decision;
    let limit = slo.p95_latency.as_secs_f64();
    let window = (m.last_end - m.counted_from).max(1e-9);
    let ended = counts.ended;
    let good = scheduled
        .iter()
        .filter(|s| s.outcome == Outcome::Ok && s.decision_latency().as_secs_f64() <= limit)
        .count();
    let mut sched_lat: Vec<f64> = scheduled
        .iter()
        .filter_map(Sample::decision_seconds)
        .collect();
    let mut lat: Vec<f64> = m
        .arrivals
        .iter()
        .filter_map(|a| a.sample.decision_seconds())
        .collect();
    let mut ttft: Vec<f64> = m
        .arrivals
        .iter()
        .filter_map(|a| a.sample.ttft.map(|t| t.as_secs_f64()))
        .collect();
    let mut lags = m.lags.clone();
    let lag = percentiles(&mut lags);
    let mut in_flight: Vec<f64> = m.in_flight.iter().map(|n| f64::from(*n)).collect();
    let in_flight_p99 = percentiles(&mut in_flight).p99.unwrap_or(0.0);
    let lag_p99 = lag.p99.unwrap_or(0.0);
    let (result, note) = if v.decision == Decision::Break {
        // A break stands whatever else happened: it rests on requests the
        // server answered.
        (StepResult::Break, None)
    } else if m.cut_short {
        (
            StepResult::NotMeasured,
            Some("the sweep ended during the step".to_string()),
        )
    } else if m.not_sent_client_ceiling > 0 {
        (
            StepResult::NotMeasured,
            Some(format!(
                "{} arrivals found the client's ceiling of requests in flight reached \
                 (sustained.max_in_flight) and were not sent",
                m.not_sent_client_ceiling
            )),
        )
    } else if lag_p99 > m.lag_bound {
        (
            StepResult::NotMeasured,
            Some(format!(
                "the client sent late: dispatch lag p99 {:.1} ms over its bound of {:.1} ms",
                lag_p99 * 1e3,
                m.lag_bound * 1e3
            )),
        )
    } else if v.decision == Decision::Undecided {
        (StepResult::Undecided, None)
    } else {
        (StepResult::Pass, None)
    };
    RateStep {
        offered_requests_per_second: plan.rate,
        seed: plan.seed,
        scheduled: plan.scheduled,
        uncounted: plan.uncounted,
        sent: m.arrivals.len() as u64,
        not_sent_client_ceiling: m.not_sent_client_ceiling,
        achieved_requests_per_second: ended as f64 / window,
        goodput_requests_per_second: good as f64 / window,
        shed_ratio: crate::stats::binomial::ratio(counts.shed, ended),
        error_ratio: crate::stats::binomial::ratio(counts.failed, ended),
        scheduled_latency_seconds: percentiles(&mut sched_lat),
        latency_seconds: percentiles(&mut lat),
        ttft_seconds: percentiles(&mut ttft),
        dispatch_lag_seconds: lag,
        in_flight_p99,
        in_flight_max: m.in_flight.iter().copied().max().unwrap_or(0),
        duration_seconds: m.last_end.max(0.0),
        stopped_early: m.stopped_early,
        verdict: v,
        confirmation: plan.confirming,
        result,
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(latency_ms: u64) -> Sample {
        let mut s = Sample::failed(Outcome::Ok, Some(200), "");
        s.error = None;
        s.ttft = Some(Duration::from_millis(latency_ms / 4));
        s.latency = Some(Duration::from_millis(latency_ms));
        s.elapsed = Duration::from_millis(latency_ms);
        s.output_tokens = 8;
        s
    }

    fn slo() -> Slo {
        Slo {
            p95_latency: Duration::from_secs(1),
            max_shed_ratio: 0.05,
            max_error_ratio: 0.05,
        }
    }

    fn plan() -> StepPlan {
        StepPlan {
            rate: 10.0,
            seed: 1,
            scheduled: 42,
            uncounted: 2,
            confirming: false,
            prior: Counts::default(),
        }
    }

    fn measure(lag: f64, latency_ms: u64) -> StepMeasure {
        StepMeasure {
            arrivals: (0..40)
                .map(|i| Arrival {
                    sample: ok(latency_ms),
                    lag,
                    scheduled_at: f64::from(i) * 0.1,
                })
                .collect(),
            lags: vec![lag; 40],
            in_flight: vec![3; 40],
            counted_from: 0.0,
            lag_bound: 0.025,
            last_end: 4.0,
            ..Default::default()
        }
    }

    #[test]
    fn scheduled_latency_includes_the_wait_a_stalled_client_or_server_causes() {
        // Each request took 0.6 s from its send, but was sent 0.5 s late:
        // the user who arrived on schedule waited 1.1 s, over the limit.
        let m = measure(0.02, 600);
        let mut late = m.clone();
        for a in &mut late.arrivals {
            a.lag = 0.5;
        }
        let on_time = judge_step(plan(), &m, &slo(), 0.95);
        assert_eq!(on_time.result, StepResult::Pass);
        assert!((on_time.scheduled_latency_seconds.p95.unwrap() - 0.62).abs() < 1e-9);
        let stalled = judge_step(plan(), &late, &slo(), 0.95);
        assert!((stalled.scheduled_latency_seconds.p95.unwrap() - 1.1).abs() < 1e-9);
        assert!((stalled.latency_seconds.p95.unwrap() - 0.6).abs() < 1e-9);
        assert_eq!(stalled.result, StepResult::Break);
        assert_eq!(stalled.goodput_requests_per_second, 0.0);
        assert!((on_time.goodput_requests_per_second - 10.0).abs() < 1e-9);
    }

    #[test]
    fn a_client_that_cannot_keep_the_schedule_measures_nothing() {
        let mut m = measure(0.02, 100);
        m.lags = vec![0.2; 40];
        let s = judge_step(plan(), &m, &slo(), 0.95);
        assert_eq!(s.result, StepResult::NotMeasured);
        assert!(s.note.unwrap().contains("dispatch lag p99 200.0 ms"));
        let mut full = measure(0.0, 100);
        full.not_sent_client_ceiling = 3;
        let s = judge_step(plan(), &full, &slo(), 0.95);
        assert_eq!(
            (s.result, s.not_sent_client_ceiling),
            (StepResult::NotMeasured, 3)
        );
    }

    #[test]
    fn shed_requests_break_a_step_by_the_same_test_as_a_level() {
        let mut m = measure(0.0, 100);
        for a in m.arrivals.iter_mut().take(8) {
            a.sample = Sample::failed(Outcome::Shed, Some(503), "shed");
        }
        let s = judge_step(plan(), &m, &slo(), 0.95);
        assert_eq!(s.result, StepResult::Break);
        assert!((s.shed_ratio - 0.2).abs() < 1e-12);
        // 2 of 40 (5%) is within 5% observed: a step that steers the
        // search passes; a confirmation does not (not clearly within).
        let mut m = measure(0.0, 100);
        for a in m.arrivals.iter_mut().take(2) {
            a.sample = Sample::failed(Outcome::Shed, Some(503), "shed");
        }
        assert_eq!(
            judge_step(plan(), &m, &slo(), 0.95).result,
            StepResult::Pass
        );
        let confirming = StepPlan {
            confirming: true,
            ..plan()
        };
        let c = judge_step(confirming, &m, &slo(), 0.95);
        assert_eq!((c.result, c.confirmation), (StepResult::Undecided, true));
        let mut m = measure(0.0, 100);
        m.arrivals[0].sample = Sample::failed(Outcome::Shed, Some(503), "shed");
        assert_eq!(
            judge_step(plan(), &m, &slo(), 0.95).result,
            StepResult::Pass
        );
        // 3 of 40 (7.5%) is over 5%, but not at 95% confidence.
        let mut m = measure(0.0, 100);
        for a in m.arrivals.iter_mut().take(3) {
            a.sample = Sample::failed(Outcome::Shed, Some(503), "shed");
        }
        assert_eq!(
            judge_step(plan(), &m, &slo(), 0.95).result,
            StepResult::Undecided
        );
    }

    #[test]
    fn a_confirmation_pools_the_steps_before_it_at_its_rate() {
        // 1 shed of 40 alone is clearly within 5% at 50% confidence...
        let mut m = measure(0.0, 100);
        m.arrivals[0].sample = Sample::failed(Outcome::Shed, Some(503), "shed");
        let alone = StepPlan {
            confirming: true,
            ..plan()
        };
        assert_eq!(judge_step(alone, &m, &slo(), 0.95).result, StepResult::Pass);
        // ...but not with an earlier step at the rate that shed 3 of 40:
        // 4 of 80 is 5% observed, its median-unbiased bound over it.
        let earlier = judge_step(
            plan(),
            &{
                let mut e = measure(0.0, 100);
                for a in e.arrivals.iter_mut().take(3) {
                    a.sample = Sample::failed(Outcome::Shed, Some(503), "shed");
                }
                e
            },
            &slo(),
            0.95,
        );
        let pooled = StepPlan {
            prior: earlier.verdict.counts,
            ..alone
        };
        let c = judge_step(pooled, &m, &slo(), 0.95);
        assert_eq!(c.verdict.requests, 80);
        assert_eq!(c.result, StepResult::Undecided);
    }

    #[test]
    fn a_confirmation_over_the_limit_on_its_own_requests_does_not_pass() {
        // The step it pools shed nothing of 40; its own 40 shed 3 (7.5%).
        // Pooled, 3 of 80 is clearly within 5%; its own share is not.
        let clean = judge_step(plan(), &measure(0.0, 100), &slo(), 0.95);
        let mut m = measure(0.0, 100);
        for a in m.arrivals.iter_mut().take(3) {
            a.sample = Sample::failed(Outcome::Shed, Some(503), "shed");
        }
        let c = judge_step(
            StepPlan {
                confirming: true,
                prior: clean.verdict.counts,
                ..plan()
            },
            &m,
            &slo(),
            0.95,
        );
        assert_eq!(c.verdict.requests, 80);
        assert!(clearly_within(
            &(clean.verdict.counts + c.verdict.counts),
            &slo()
        ));
        assert_eq!(c.result, StepResult::Undecided);
    }
}
