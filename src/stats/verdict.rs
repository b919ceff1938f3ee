//! The early verdict of a level: whether, from the requests that ended so
//! far, the level is already certain to break its SLO, whatever the rest do.
//!
//! Why it is exact. A level of `planned` requests breaks its SLO when its
//! shed ratio or its error ratio exceeds the limit, or the p95 of its
//! decision latencies ([`level::decision_seconds`]) exceeds the limit.
//! - The shed and error counts only grow as requests end, over the same
//!   denominator (`planned`), so a count already over the limit stays over.
//! - Each request that has not ended either adds a latency of at least zero
//!   to the decision set (a failure counts the time it took) or stays out of
//!   it (shed or rate limited). The type 7 quantile
//!   never falls when a value rises, and never rises when a minimum is added
//!   (removing the minimum of n values moves the quantile's rank from
//!   (n - 1) q to (n - 2) q + 1, which is not lower as q <= 1): so the lowest
//!   p95 the full level can reach is that of the latencies so far plus one
//!   zero per request not ended. When even that exceeds the limit, the full
//!   level's p95 does too.
//! - A request in flight may count with a floor above zero only when it is
//!   certain to end inside the decision set with at least that latency (the
//!   caller's promise: it can no longer be shed, and its latency cannot end
//!   below the floor; leaving out a value above the minimum could lower the
//!   quantile).
//! - A level without any success breaks its SLO too; that is certain only at
//!   its end, and the early verdict does not claim it.
//!
//! The latency test keeps a margin of a billionth of the limit, so that the
//! rounding of two interpolations over different sets cannot make the early
//! verdict disagree with the full one at the exact boundary.

use crate::config::Slo;
use crate::stats::level::{self, DECISION_QUANTILE};
use crate::stats::sample::Sample;

/// Relative margin above the p95 limit before the latency verdict is certain.
const LATENCY_MARGIN: f64 = 1e-9;

pub use crate::stats::report::Breach;

/// What a level's verdict is decided from, as its requests end.
#[derive(Debug, Clone)]
pub struct Tally {
    planned: u64,
    ended: u64,
    shed: u64,
    failed: u64,
    /// Decision latencies so far, seconds, kept sorted.
    decision: Vec<f64>,
}

impl Tally {
    /// An empty tally of a level that will send `planned` requests.
    pub fn new(planned: u64) -> Self {
        Tally {
            planned,
            ended: 0,
            shed: 0,
            failed: 0,
            decision: Vec::new(),
        }
    }

    /// Requests recorded so far.
    pub fn ended(&self) -> u64 {
        self.ended
    }

    /// Records a request that ended (a request llmprobe cancelled is not
    /// recorded: it has no outcome of its own).
    pub fn record(&mut self, s: &Sample) {
        self.ended += 1;
        if s.outcome.is_shed() {
            self.shed += 1;
        } else if s.outcome != crate::stats::sample::Outcome::Ok {
            self.failed += 1;
        }
        if let Some(v) = level::decision_seconds(s) {
            let at = self.decision.partition_point(|x| x.total_cmp(&v).is_lt());
            self.decision.insert(at, v);
        }
    }

    /// Whether the full level is already certain to break `slo`, with
    /// `in_flight` requests not yet ended: each with the decision latency,
    /// in seconds, it is certain to reach at least (0 where nothing is
    /// certain, see the module doc). The other requests not ended are unsent.
    pub fn certain_break(&self, slo: &Slo, in_flight: &[f64]) -> Option<Breach> {
        if level::ratio(self.shed, self.planned) > slo.max_shed_ratio {
            return Some(Breach::Shed);
        }
        if level::ratio(self.failed, self.planned) > slo.max_error_ratio {
            return Some(Breach::Errors);
        }
        let limit = slo.p95_latency.as_secs_f64();
        let lowest = self.lowest_p95(in_flight)?;
        (lowest > limit * (1.0 + LATENCY_MARGIN)).then_some(Breach::Latency)
    }

    /// The lowest p95 the full level can still reach (None when no request
    /// is left to end and none has a latency: the level has no p95).
    fn lowest_p95(&self, in_flight: &[f64]) -> Option<f64> {
        let pending = self.planned.saturating_sub(self.ended);
        let floors: Vec<f64> = in_flight
            .iter()
            .take(pending as usize)
            .map(|f| f.max(0.0))
            .filter(|f| *f > 0.0)
            .collect();
        // Zeros first (never stored), then the known latencies and floors.
        let zeros = pending as usize - floors.len();
        let known = if floors.is_empty() {
            std::borrow::Cow::Borrowed(&self.decision)
        } else {
            let mut merged = self.decision.clone();
            merged.extend(floors);
            merged.sort_unstable_by(f64::total_cmp);
            std::borrow::Cow::Owned(merged)
        };
        level::quantile_of(zeros + known.len(), DECISION_QUANTILE, |i| {
            if i < zeros {
                0.0
            } else {
                known[i - zeros]
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::level::summarize_level;
    use crate::stats::sample::Outcome;
    use proptest::prelude::*;
    use std::time::Duration;

    fn slo(p95_ms: u64, shed: f64, errors: f64) -> Slo {
        Slo {
            p95_latency: Duration::from_millis(p95_ms),
            max_shed_ratio: shed,
            max_error_ratio: errors,
        }
    }

    fn ok(ms: u64) -> Sample {
        let mut s = Sample::failed(Outcome::Ok, Some(200), "");
        s.error = None;
        s.ttft = Some(Duration::from_millis(ms / 4));
        s.latency = Some(Duration::from_millis(ms));
        s.output_tokens = 8;
        s.finish_reason_seen = true;
        s
    }

    fn tally(planned: u64, samples: &[Sample]) -> Tally {
        let mut t = Tally::new(planned);
        samples.iter().for_each(|s| t.record(s));
        t
    }

    #[test]
    fn shed_over_the_budget_of_the_planned_count_is_certain() {
        // 32 planned at 5%: 1.6 allowed, so the second shed breaks it.
        let shed = Sample::failed(Outcome::Shed, Some(503), "busy");
        let slo = slo(1000, 0.05, 0.05);
        assert_eq!(
            tally(32, &[shed.clone(), ok(10)]).certain_break(&slo, &[]),
            None
        );
        assert_eq!(
            tally(32, &[shed.clone(), ok(10), shed.clone()]).certain_break(&slo, &[]),
            Some(Breach::Shed)
        );
        let limited = Sample::failed(Outcome::RateLimited, Some(429), "slow down");
        assert_eq!(
            tally(32, &[shed, limited]).certain_break(&slo, &[]),
            Some(Breach::Shed),
            "429 counts against the shed ratio"
        );
    }

    #[test]
    fn errors_over_the_budget_are_certain() {
        let err = Sample::failed(Outcome::ProtocolError, Some(200), "bad");
        let slo = slo(1000, 0.05, 0.05);
        assert_eq!(
            tally(20, std::slice::from_ref(&err)).certain_break(&slo, &[]),
            None,
            "1/20 = 5% is allowed"
        );
        assert_eq!(
            tally(20, &[err.clone(), err]).certain_break(&slo, &[]),
            Some(Breach::Errors)
        );
    }

    #[test]
    fn latency_needs_enough_slow_requests_for_the_interpolated_p95() {
        // 8 planned: rank h = 7 * 0.95 = 6.65; p95 = x6 + 0.65 (x7 - x6).
        let slo = slo(1000, 1.0, 1.0);
        // One slow request of 8: with 7 zeros, x6 = 0, x7 = 10 s -> 6.5 s > 1 s.
        assert_eq!(
            tally(8, &[ok(10_000)]).certain_break(&slo, &[]),
            Some(Breach::Latency)
        );
        // One at 1.5 s: 0.65 * 1.5 = 0.975 s, not certain (the rest may be fast).
        assert_eq!(tally(8, &[ok(1500)]).certain_break(&slo, &[]), None);
        // One at 1.54 s: 1.001 s, certain.
        assert_eq!(
            tally(8, &[ok(1540)]).certain_break(&slo, &[]),
            Some(Breach::Latency)
        );
        // 20 planned: h = 18.05: x18 + 0.05 (x19 - x18): one slow one needs
        // to be over 20x the limit, two over it.
        let slo20 = slo;
        assert_eq!(tally(20, &[ok(19_000)]).certain_break(&slo20, &[]), None);
        assert_eq!(
            tally(20, &[ok(21_000)]).certain_break(&slo20, &[]),
            Some(Breach::Latency)
        );
        assert_eq!(
            tally(20, &[ok(1100), ok(1100)]).certain_break(&slo20, &[]),
            Some(Breach::Latency)
        );
    }

    #[test]
    fn failures_and_shed_requests_leave_the_latency_set() {
        // A shed request may not count as a fast one: it leaves the set.
        let slo = slo(1000, 1.0, 1.0);
        let shed = Sample::failed(Outcome::Shed, Some(503), "busy");
        let full: Vec<Sample> = vec![ok(1500), shed.clone(), shed.clone(), shed.clone()];
        // Full level: only 1.5 s in the set, p95 = 1.5 s: a break.
        assert!(!summarize_level(4, &full, Duration::from_secs(1), &slo).within_slo);
        // With three zeros instead: 0.85 * 1.5 = 1.275 s, certain already.
        assert_eq!(
            tally(4, &full[..1]).certain_break(&slo, &[]),
            Some(Breach::Latency)
        );
    }

    #[test]
    fn in_flight_floors_count_and_never_exceed_what_is_pending() {
        let slo = slo(1000, 1.0, 1.0);
        // 20 planned, nothing ended; two in flight certain to take 2 s.
        let t = Tally::new(20);
        assert_eq!(t.certain_break(&slo, &[]), None);
        assert_eq!(t.certain_break(&slo, &[2.0]), None);
        assert_eq!(t.certain_break(&slo, &[2.0, 2.0]), Some(Breach::Latency));
        // More floors than requests pending are ignored beyond the count.
        let t = tally(20, &vec![ok(10); 19]);
        assert_eq!(t.certain_break(&slo, &[5.0, 5.0]), None);
    }

    /// A failure after `ms`: it counts in the decision with that time.
    fn failed(outcome: Outcome, ms: u64) -> Sample {
        let mut s = Sample::failed(outcome, Some(200), "bad");
        s.elapsed = Duration::from_millis(ms);
        s
    }

    #[test]
    fn failures_count_in_the_latency_with_the_time_they_took() {
        // 8 planned: a protocol error after 10 s is as slow as a success
        // after 10 s (the errors allowed, the latency is certain).
        let slo = slo(1000, 1.0, 1.0);
        let err = failed(Outcome::ProtocolError, 10_000);
        assert_eq!(
            tally(8, &[err]).certain_break(&slo, &[]),
            Some(Breach::Latency)
        );
        // A fast failure is a fast sample: nothing certain yet.
        let quick = failed(Outcome::HttpError, 5);
        assert_eq!(
            tally(8, std::slice::from_ref(&quick)).certain_break(&slo, &[]),
            None
        );
        // Caught by the error ratio instead.
        assert_eq!(
            tally(8, &[quick]).certain_break(&self::slo(1000, 1.0, 0.1), &[]),
            Some(Breach::Errors)
        );
    }

    #[test]
    fn a_finished_level_without_any_latency_is_left_to_the_full_verdict() {
        let shed = Sample::failed(Outcome::Shed, Some(503), "busy");
        let t = tally(1, &[shed]);
        // Caught by the shed ratio; the p95 alone would be None.
        assert_eq!(
            t.certain_break(&slo(1000, 0.5, 1.0), &[]),
            Some(Breach::Shed)
        );
        assert_eq!(t.lowest_p95(&[]), None);
        assert_eq!(t.certain_break(&slo(1000, 1.0, 1.0), &[]), None);
    }

    #[test]
    fn cancelled_requests_count_in_no_ratio() {
        let mut samples = vec![ok(10); 7];
        samples.push(Sample::failed(Outcome::Cancelled, None, "cancelled"));
        let l = summarize_level(8, &samples, Duration::from_secs(1), &slo(1000, 0.0, 0.0));
        assert_eq!(l.error_ratio, 0.0);
        assert!(l.within_slo);
        assert_eq!(l.outcomes["cancelled"], 1);
    }

    /// A request of a recorded level: its outcome and latency.
    fn sample_from(kind: u8, ms: u64) -> Sample {
        match kind {
            0..=5 => ok(ms),
            6 => Sample::failed(Outcome::Shed, Some(503), "busy"),
            7 => Sample::failed(Outcome::RateLimited, Some(429), "slow"),
            8 => failed(Outcome::Timeout, ms),
            _ => failed(Outcome::ProtocolError, ms),
        }
    }

    /// Levels as they are recorded: mostly fast requests, with bursts of
    /// slow ones, sheds and failures; latencies often exactly at the limit
    /// (1000 ms) so the boundary of the interpolation is hit.
    fn level_strategy() -> impl Strategy<Value = Vec<(u8, u64)>> {
        let latency = prop_oneof![
            4 => 1u64..1000,
            2 => Just(1000u64),
            2 => 999u64..1003,
            2 => 1000u64..2500,
            1 => 2500u64..30_000,
        ];
        let kind = prop_oneof![12 => 0u8..6, 1 => 6u8..8, 1 => 8u8..10];
        prop::collection::vec((kind, latency), 1..60)
    }

    fn slo_strategy() -> impl Strategy<Value = Slo> {
        (
            prop_oneof![Just(1000u64), 500u64..2000],
            prop_oneof![Just(0.0), Just(0.05), 0.0f64..0.3],
            prop_oneof![Just(0.0), Just(0.05), 0.0f64..0.3],
        )
            .prop_map(|(p, s, e)| slo(p, s, e))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1500))]

        /// Whenever the early verdict fires at some prefix, with any of the
        /// requests after it in flight at a floor it is certain to reach,
        /// the full level breaks the SLO.
        #[test]
        fn early_verdict_is_the_full_verdict(
            level in level_strategy(),
            slo in slo_strategy(),
            in_flight in 0usize..8,
            floor_share in 0.0f64..=1.0,
        ) {
            let samples: Vec<Sample> = level.iter().map(|&(k, ms)| sample_from(k, ms)).collect();
            let n = samples.len() as u64;
            let full = summarize_level(4, &samples, Duration::from_secs(1), &slo).within_slo;
            let mut t = Tally::new(n);
            for k in 0..=samples.len() {
                // The next `in_flight` requests are in flight: a floor below
                // the latency each will reach where it stays in the set.
                let floors: Vec<f64> = samples[k..]
                    .iter()
                    .take(in_flight)
                    .map(|s| level::decision_seconds(s).map_or(0.0, |v| v * floor_share))
                    .collect();
                if let Some(why) = t.certain_break(&slo, &floors) {
                    prop_assert!(!full, "early {why:?} at {k} of {n}, but the full level passed");
                }
                if let Some(s) = samples.get(k) {
                    t.record(s);
                }
            }
            // At the end, the early verdict is the full one for the ratios
            // and the latency (a level without any latency, or without any
            // success, aside: only its end can tell).
            let end = t.certain_break(&slo, &[]);
            let any_ok = samples.iter().any(|s| s.outcome == Outcome::Ok);
            if t.lowest_p95(&[]).is_some() && any_ok {
                let limit = slo.p95_latency.as_secs_f64();
                let p = t.lowest_p95(&[]).unwrap_or(0.0);
                let at_boundary = p > limit && p <= limit * (1.0 + LATENCY_MARGIN);
                if !at_boundary {
                    prop_assert_eq!(end.is_some(), !full);
                }
            }
        }
    }

    #[test]
    fn small_levels_match_the_full_verdict_exhaustively() {
        // Every level of 6 to 8 requests, in every order, built from a fast
        // request, one exactly at the limit, a slow one (that one of them
        // alone, among fast ones, does not break the p95 of 6 to 8) and a
        // shed: the interpolation between ranks 4 and 7 is where an
        // off-by-one would show.
        let slo = slo(1000, 0.2, 0.2);
        let kinds = [
            ok(100),
            ok(1000),
            ok(1200),
            Sample::failed(Outcome::Shed, Some(503), "busy"),
        ];
        let mut fired = 0;
        for n in 6..=8u32 {
            for code in 0..(kinds.len() as u64).pow(n) {
                let mut c = code;
                let samples: Vec<Sample> = (0..n)
                    .map(|_| {
                        let s = kinds[(c % kinds.len() as u64) as usize].clone();
                        c /= kinds.len() as u64;
                        s
                    })
                    .collect();
                let full = summarize_level(4, &samples, Duration::from_secs(1), &slo).within_slo;
                let mut t = Tally::new(n as u64);
                for s in &samples {
                    if t.certain_break(&slo, &[]).is_some() {
                        assert!(
                            !full,
                            "fired early on a passing level: {n} requests, code {code}"
                        );
                        fired += 1;
                        break;
                    }
                    t.record(s);
                }
            }
        }
        assert!(fired > 1000, "the verdict fired early {fired} times");
    }
}
