//! A level's verdict, a statistical decision with a stated confidence, and
//! its early form: whether, from the requests that ended so far, the level
//! is already certain to break, whatever the rest do.
//!
//! The SLO is the hypothesis a level keeps until the evidence is against it.
//! Three shares are tested, each with the exact one-sided binomial test
//! ([`binomial::over_limit`], the Clopper-Pearson lower bound over the
//! limit) at the target's `verdict_confidence`: the shed ratio against
//! `max_shed_ratio`, the error ratio against `max_error_ratio`, and the share
//! of decision latencies over `p95_latency` against 5%. The last is the
//! order-statistic bound on the p95: the k-th smallest of n latencies is a
//! lower confidence bound on the true p95 ([`binomial::quantile_lower_rank`]),
//! and it is over the limit exactly when n - k + 1 latencies are.
//! - **break**: one of the tests says its true share is over its limit (or,
//!   at the end, no request succeeded);
//! - **undecided**: no test says so, but an observed share is over its
//!   limit: the level sends more requests (up to its ceiling);
//! - **pass**: every observed share is within its limit.
//!
//! With earlier sweeps pooled, a break also needs the share shown over its
//! limit, at the weak [`REST_ALPHA`], without the sweep that holds the
//! most of it ([`not_one_sweep`]): one burst does not break a level for as
//! long as the pool holds it. Nor does one earlier sweep hold undecided a
//! level whose own requests are within the limit, once they are as many
//! as that sweep's: its pooled share is over only while it is so without
//! the earlier sweep furthest over it ([`over_without_worst_earlier`]).
//!
//! Evidence may be pooled from earlier sweeps ([`decide`]'s `window`); it is
//! left out when this sweep's counts differ from it beyond chance
//! ([`CHANGE_ALPHA`], Fisher's exact test on each share).
//!
//! Why the early verdict is exact. It claims a break at the planned count
//! only when both readings the full verdict can take (the pool left out, or
//! kept) already break: every count it tests only grows as requests end, the
//! ratios' denominator is the planned count, the latency share's is at most
//! the requests in it so far plus those pending, and the binomial tail
//! P(X >= k) rises with the number of trials and falls with k. A request in
//! flight may count as slow only when it is certain to end in the decision
//! set over the limit (the caller's promise). A level without any success
//! breaks too; that is certain only at its end, and the early verdict does
//! not claim it.

use crate::config::Slo;
use crate::stats::binomial;
use crate::stats::decision::{Basis, Counts, Decision, LowerBounds, Verdict};
use crate::stats::sample::{Outcome, Sample};

pub use crate::stats::decision::Breach;

/// The quantile of the latency that decides a level (its p95).
pub const DECISION_QUANTILE: f64 = 0.95;

/// Significance below which this sweep's counts are taken to differ from the
/// pooled ones (a server that changed): strict, so that noise rarely drops
/// the pool (at 2% of errors, 3 of 8 after 0 of 64 is 0.0009: kept), while a
/// capacity drop (most requests shed where none were) is far below it at
/// once.
pub const CHANGE_ALPHA: f64 = 1e-4;

/// The share of decision latencies allowed over the p95 limit.
pub const SLOW_SHARE: f64 = 1.0 - DECISION_QUANTILE;

/// Significance at which a pool without its worst sweep must still show a
/// share over its limit for a pooled break ([`not_one_sweep`]): weak, as
/// it only withholds a break the test at the stated confidence gives, but
/// not met by one error of 8 at a 5% limit (0.34). "Over the limit" alone
/// let a burst of 4 of 32 beside a later 1 of 8 break level 2 of a server
/// failing 2%, for three sweeps in a row (a CI run of `tests/verdicts.rs`).
pub const REST_ALPHA: f64 = 0.25;

impl Counts {
    /// Share `i` of [`Counts::shares`] as (count, of).
    fn share(&self, slo: &Slo, i: usize) -> (u64, u64) {
        let (_, k, n, _) = self.shares(slo)[i];
        (k, n)
    }

    /// Adds a request that ended (a request llmprobe cancelled has no
    /// outcome of its own and is not added), judged against `p95_limit` seconds.
    pub fn record(&mut self, s: &Sample, p95_limit: f64) {
        if s.outcome == Outcome::Cancelled {
            return;
        }
        self.ended += 1;
        if s.outcome == Outcome::Ok {
            self.ok += 1;
        } else if s.outcome.is_shed() {
            self.shed += 1;
        } else {
            self.failed += 1;
        }
        if let Some(v) = s.decision_seconds() {
            self.timed += 1;
            if v > p95_limit {
                self.slow += 1;
            }
        }
    }

    /// The counts of `samples` against `slo`.
    pub fn of(samples: &[Sample], slo: &Slo) -> Counts {
        let mut c = Counts::default();
        let limit = slo.p95_latency.as_secs_f64();
        samples.iter().for_each(|s| c.record(s, limit));
        c
    }

    /// The three tested shares: (test, count, of, limit).
    fn shares(&self, slo: &Slo) -> [(Basis, u64, u64, f64); 3] {
        [
            (Basis::Shed, self.shed, self.ended, slo.max_shed_ratio),
            (Basis::Errors, self.failed, self.ended, slo.max_error_ratio),
            (Basis::P95Latency, self.slow, self.timed, SLOW_SHARE),
        ]
    }
}

/// Whether every observed share of `c` is within its limit (a level's or
/// a step's pass, before any test).
pub fn within_observed(c: &Counts, slo: &Slo) -> bool {
    c.shares(slo)
        .iter()
        .all(|(_, k, n, limit)| binomial::ratio(*k, *n) <= *limit)
}

/// Whether `verdict` passes on earlier sweeps' requests while this sweep's
/// own (`own`) observe a share over its limit: a change may have begun, and
/// the level spends more requests, as an undecided one does. The change
/// split of the health test (`stats::limit`) finds a rise from the
/// requests of the sweeps since it. The caller leaves out the lowest level
/// (`sweep::level_run`): the daemon's loop read a rise from 2% to 10% of
/// errors within 3 sweeps in 11 of 12 loops, 7 without (BENCHMARKS.md).
pub fn pass_in_doubt(verdict: &Verdict, own: &Counts, slo: &Slo) -> bool {
    verdict.decision == Decision::Pass && !within_observed(own, slo)
}

/// The part of the error limit over which a level's first pass puts its
/// errors in doubt ([`errors_in_doubt`]), when the pass is [`fine`]. After
/// a rise from 2% to 10% of errors, level 8's first 24 requests draw one
/// error (4%) or none in 29% of sweeps (binomial); sent on only over the limit,
/// those sweeps added nothing to the change split, and the rise took 4 or
/// 5 sweeps to read knee 0 in 5 to 10 of 48 loops (BENCHMARKS.md).
pub const FIRST_PASS_DOUBT: f64 = 0.5;

/// How many times a level's `verdict_ceiling` it may send while its errors
/// are in doubt ([`errors_in_doubt`]): the requests of the sweeps since a
/// rise are what the change split of the health test weighs, and a level
/// in doubt is where they are sent (BENCHMARKS.md).
pub const DOUBT_CEILING: u64 = 2;

/// Whether a pass of `n` requests observes its errors within the limit
/// with one failure in it (1 of 24 at a 5% limit does; 1 of 12 does not).
/// A coarser pass is in doubt on any one failure, and sending it on as far
/// as a fine one drew false breaks at a server steady at 4% of errors
/// (level 2 broke on 4 errors of 40, and its pool held the break for 2
/// more sweeps).
pub fn fine(n: u64, slo: &Slo) -> bool {
    n > 0 && 1.0 / n as f64 <= slo.max_error_ratio
}

/// Whether a level that `verdict` does not break has its errors in doubt
/// after this sweep's own requests (`own`): they observe an error ratio
/// over the limit, or, after a first pass that is [`fine`] (`first_fine`),
/// over [`FIRST_PASS_DOUBT`] of it. A rise of the error ratio may have
/// begun, and the level spends more requests: its pool still holds the
/// ratio from before, and the change split of the health test
/// (`stats::limit`) finds the rise from the requests of the sweeps since
/// it. On errors only: sent so far on slow requests, a server holding 10%
/// of its requests at any load read knee 1 `compute` (`tests/verdicts.rs`).
pub fn errors_in_doubt(verdict: &Verdict, own: &Counts, slo: &Slo, first_fine: bool) -> bool {
    let part = if first_fine { FIRST_PASS_DOUBT } else { 1.0 };
    verdict.decision != Decision::Break
        && binomial::ratio(own.failed, own.ended) > slo.max_error_ratio * part
}

/// What an undecided level counts as, from the level's `last_decided`
/// verdict on this server and this sweep's own counts (`own`): that
/// verdict, but a break only while this sweep's own requests still observe
/// a share over its limit. A pool's break otherwise stood in for sweeps
/// after newer requests stopped showing it (at 4% of errors, knee 1 for 5
/// sweeps and 0 for 8 on levels measuring 0 to 2 errors of 32); such a
/// level neither raises nor lowers the knee.
pub fn stand_in(last_decided: Option<Decision>, own: &Counts, slo: &Slo) -> Decision {
    match last_decided {
        Some(Decision::Break) if within_observed(own, slo) => Decision::Undecided,
        last => last.unwrap_or(Decision::Undecided),
    }
}

/// Whether `current` differs from `prior` beyond chance on any share.
fn changed(prior: &Counts, current: &Counts, slo: &Slo) -> bool {
    prior
        .shares(slo)
        .iter()
        .zip(current.shares(slo))
        .any(|((_, kp, np, _), (_, kc, nc, _))| {
            let (lower, higher) = binomial::fisher(kc, nc, *kp, *np);
            lower.min(higher) < CHANGE_ALPHA
        })
}

/// The verdict of a level from this sweep's `current` counts and the counts
/// of earlier sweeps at the same level (`window`, pooled unless `current`
/// differs from them), at `confidence`.
pub fn decide(window: &[Counts], current: &Counts, slo: &Slo, confidence: f64) -> Verdict {
    let alpha = 1.0 - confidence;
    let d = decision(window, current, slo, alpha);
    let e = d.evidence;
    Verdict {
        decision: d.decision,
        decided_by: d.decided_by,
        requests: e.ended,
        pooled_sweeps: d.pooled_sweeps,
        change_seen: d.change_seen,
        confidence,
        // The caller may count an undecided level as it was last decided.
        counted_as: d.decision,
        lower_bounds: LowerBounds {
            shed_ratio: binomial::lower_bound(e.shed, e.ended, alpha),
            error_ratio: binomial::lower_bound(e.failed, e.ended, alpha),
            slow_ratio: binomial::lower_bound(e.slow, e.timed, alpha),
        },
        counts: *current,
    }
}

/// Whether pooled `sweeps` (empty: this sweep's alone) still show share
/// `i` over its limit without the sweep with the most of it, at
/// [`REST_ALPHA`]: no single sweep makes a pooled break. A burst (6 errors
/// of 34 at a server failing 4%) otherwise breaks the level for as long as
/// the pool holds it, 8 sweeps; errors spread over the sweeps (15% at
/// every load) keep the break. The test at the stated confidence still
/// decides: this only withholds a break it would give.
fn not_one_sweep(sweeps: &[Counts], i: usize, slo: &Slo) -> bool {
    let Some(worst) = sweeps
        .iter()
        .map(|c| c.share(slo, i))
        .max_by_key(|(k, _)| *k)
    else {
        return true;
    };
    let (k, n) = share_total(sweeps, i, slo);
    shown_without_worst(k - worst.0, n - worst.1, slo_limit(slo, i))
}

/// Share `i` of `sweeps`, summed, as (count, of).
fn share_total<'a>(
    sweeps: impl IntoIterator<Item = &'a Counts>,
    i: usize,
    slo: &Slo,
) -> (u64, u64) {
    sweeps
        .into_iter()
        .map(|c| c.share(slo, i))
        .fold((0, 0), |(a, b), (k, n)| (a + k, b + n))
}

/// Whether `k` of `n`, a pool without its worst sweep, shows a share over
/// `limit` ([`REST_ALPHA`]).
fn shown_without_worst(k: u64, n: u64, limit: f64) -> bool {
    binomial::over_limit(k, n, limit, REST_ALPHA)
}

/// Whether earlier sweeps (`window`) pooled with `current` observe share
/// `i` over its limit without the earlier sweep furthest over it (the most
/// requests beyond the limit's share: sweeps differ in size, and a level
/// stopped early on 4 errors of 20 is worse than 4 of 96), once this
/// sweep's own requests in the share are at least as many as that sweep's
/// (before, the pool stands, and the level sends more). One unlucky
/// sweep otherwise held a level undecided for as long as the pool kept it
/// over: at 4% of errors, a fresh loop's first sweep broke level 8 on 4 of
/// 20, and the next two, at 4 of 96 and 6 of 120 of their own, read knee 4
/// undecided (BENCHMARKS.md). Asked only when this sweep's own requests
/// observe the share within its limit: one that they observe over it
/// keeps the level undecided, and sending more, as before. A pass there
/// would stop the lowest level after one pass (the doubt rules leave it
/// out). After a rise, the sweep furthest over the limit is the first
/// after it (17 errors of 168 at level 8, its pool restarted by the
/// change), and the change split needs the requests of the sweeps after
/// it: 0 of 24 of this sweep's own outweighed it, and the rise took 5
/// sweeps to read knee 0.
fn over_without_worst_earlier(window: &[Counts], current: &Counts, i: usize, slo: &Slo) -> bool {
    let limit = slo_limit(slo, i);
    let beyond = |(k, n): (u64, u64)| k as f64 - limit * n as f64;
    let worst = window
        .iter()
        .map(|c| c.share(slo, i))
        .max_by(|a, b| beyond(*a).total_cmp(&beyond(*b)))
        .unwrap_or((0, 0));
    if current.share(slo, i).1 < worst.1 {
        return true;
    }
    let (k, n) = share_total(window.iter().chain([current]), i, slo);
    binomial::ratio(k - worst.0, n - worst.1) > limit
}

/// Whether this sweep's own requests observe a share over its limit
/// (`own`, an entry of [`Counts::shares`]): a pooled break stands only
/// while they do. The pool decides what one sweep's few requests cannot,
/// but it also held one unlucky sweep's ratio for the 8 sweeps it keeps
/// (at 4% of errors, knee 4 for 8 sweeps while level 8 measured 1 error of
/// 24 each time); a level whose own requests no longer show the break is
/// undecided, and is sent more of them.
fn still_shown(own: &(Basis, u64, u64, f64)) -> bool {
    let (_, k, n, limit) = *own;
    binomial::ratio(k, n) > limit
}

/// The limit of share `i` of [`Counts::shares`].
fn slo_limit(slo: &Slo, i: usize) -> f64 {
    Counts::default().shares(slo)[i].3
}

/// The decision of [`decide`], without the bounds it reports.
struct Decided {
    decision: Decision,
    decided_by: Option<Basis>,
    evidence: Counts,
    pooled_sweeps: u32,
    change_seen: bool,
}

fn decision(window: &[Counts], current: &Counts, slo: &Slo, alpha: f64) -> Decided {
    let prior = window.iter().fold(Counts::default(), |a, c| a + *c);
    let change_seen = prior.ended > 0 && changed(&prior, current, slo);
    let (pooled, pooled_sweeps) = if change_seen || prior.ended == 0 {
        (Counts::default(), 0)
    } else {
        (prior, window.iter().filter(|c| c.ended > 0).count() as u32)
    };
    let evidence = pooled + *current;
    let shares = evidence.shares(slo);
    let sweeps: Vec<Counts> = if pooled_sweeps == 0 {
        Vec::new()
    } else {
        window.iter().chain([current]).copied().collect()
    };
    let own = current.shares(slo);
    let broke = shares
        .iter()
        .enumerate()
        .find(|(i, (_, k, n, limit))| {
            binomial::over_limit(*k, *n, *limit, alpha)
                && not_one_sweep(&sweeps, *i, slo)
                && still_shown(&own[*i])
        })
        .map(|(_, s)| (Decision::Break, Some(s.0)));
    let no_success = (current.ok == 0).then_some((Decision::Break, Some(Basis::NoSuccess)));
    let over = shares
        .iter()
        .enumerate()
        .find(|(i, (_, k, n, limit))| {
            binomial::ratio(*k, *n) > *limit
                && (pooled_sweeps == 0
                    || still_shown(&own[*i])
                    || over_without_worst_earlier(window, current, *i, slo))
        })
        .map(|(_, s)| (Decision::Undecided, Some(s.0)));
    let (decision, decided_by) = broke
        .or(no_success)
        .or(over)
        .unwrap_or((Decision::Pass, None));
    Decided {
        decision,
        decided_by,
        evidence,
        pooled_sweeps,
        change_seen,
    }
}

/// What the early verdict of one pass over a level rests on, as its requests end.
#[derive(Debug, Clone)]
pub struct Tally {
    slo: Slo,
    alpha: f64,
    /// The earlier sweeps' counts at this level, summed (the pool).
    pooled: Counts,
    /// Per tested share, (count, of) of the earlier sweep with the most of
    /// it ([`not_one_sweep`]).
    worst: [(u64, u64); 3],
    /// Earlier passes over the level in this sweep (an undecided level's
    /// first requests).
    before: Counts,
    /// Requests this pass is to send.
    planned: u64,
    /// This pass's counts so far.
    now: Counts,
}

impl Tally {
    /// An empty tally of a pass that will send `planned` requests, judged
    /// against `slo` at `confidence`, after `before` in this sweep and with
    /// `window` from earlier ones.
    pub fn new(
        planned: u64,
        slo: &Slo,
        confidence: f64,
        before: Counts,
        window: &[Counts],
    ) -> Self {
        let worst = std::array::from_fn(|i| {
            window
                .iter()
                .map(|c| c.share(slo, i))
                .max_by_key(|(k, _)| *k)
                .unwrap_or((0, 0))
        });
        Tally {
            slo: *slo,
            alpha: 1.0 - confidence,
            pooled: window.iter().fold(Counts::default(), |a, c| a + *c),
            worst,
            before,
            planned,
            now: Counts::default(),
        }
    }

    /// Requests recorded so far in this pass.
    pub fn ended(&self) -> u64 {
        self.now.ended
    }

    /// Records a request that ended (one llmprobe cancelled is left out).
    pub fn record(&mut self, s: &Sample) {
        self.now.record(s, self.slo.p95_latency.as_secs_f64());
    }

    /// Whether the full pass is already certain to give a break, with
    /// `in_flight` requests not yet ended: each with the decision latency,
    /// in seconds, it is certain to reach at least (0 where nothing is
    /// certain, see the module doc). The other requests not ended are unsent.
    pub fn certain_break(&self, in_flight: &[f64]) -> Option<Breach> {
        let pending = self.planned.saturating_sub(self.now.ended);
        let limit = self.slo.p95_latency.as_secs_f64();
        let certain_slow = in_flight
            .iter()
            .take(pending as usize)
            .filter(|f| **f > limit)
            .count() as u64;
        let sweep = self.before + self.now;
        // Every count at its lowest, every denominator at its highest.
        let ended = self.before.ended + self.planned;
        let tests = [
            (
                Breach::Shed,
                sweep.shed,
                ended,
                self.slo.max_shed_ratio,
                self.pooled.shed,
                self.pooled.ended,
            ),
            (
                Breach::Errors,
                sweep.failed,
                ended,
                self.slo.max_error_ratio,
                self.pooled.failed,
                self.pooled.ended,
            ),
            (
                Breach::Latency,
                sweep.slow + certain_slow,
                sweep.timed + pending,
                SLOW_SHARE,
                self.pooled.slow,
                self.pooled.timed,
            ),
        ];
        let pooling = self.pooled.ended > 0;
        tests
            .into_iter()
            .zip(self.worst)
            .find(|&((_, k, n, limit, pk, pn), (wk, wn))| {
                // Pooled, no single sweep may make the break: it must hold
                // without this sweep, and without the earlier one with most.
                // The full verdict pools (and applies this) whenever the
                // window ended any request, even with none in this share.
                let one_sweep = pooling
                    && (!shown_without_worst(pk, pn, limit)
                        || !shown_without_worst(pk - wk + k, pn - wn + n, limit));
                binomial::over_limit(k, n, limit, self.alpha)
                    && binomial::over_limit(k + pk, n + pn, limit, self.alpha)
                    && !one_sweep
            })
            .map(|t| t.0 .0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    fn shed() -> Sample {
        Sample::failed(Outcome::Shed, Some(503), "busy")
    }

    /// A failure after `ms`: it counts in the decision with that time.
    fn failed(outcome: Outcome, ms: u64) -> Sample {
        let mut s = Sample::failed(outcome, Some(200), "bad");
        s.elapsed = Duration::from_millis(ms);
        s
    }

    fn tally(planned: u64, slo: &Slo, samples: &[Sample]) -> Tally {
        let mut t = Tally::new(planned, slo, 0.95, Counts::default(), &[]);
        samples.iter().for_each(|s| t.record(s));
        t
    }

    #[test]
    fn a_break_on_a_ratio_needs_evidence_not_one_request() {
        // 8 planned at 5%: P(>= 2 of 8 | 5%) = 0.057, P(>= 3) = 0.006.
        let slo = slo(1000, 0.05, 0.05);
        assert_eq!(tally(8, &slo, &[shed(), shed()]).certain_break(&[]), None);
        assert_eq!(
            tally(8, &slo, &[shed(), ok(10), shed(), shed()]).certain_break(&[]),
            Some(Breach::Shed)
        );
        let limited = Sample::failed(Outcome::RateLimited, Some(429), "slow down");
        assert_eq!(
            tally(8, &slo, &[shed(), limited, shed()]).certain_break(&[]),
            Some(Breach::Shed),
            "429 counts against the shed ratio"
        );
        let err = failed(Outcome::ProtocolError, 5);
        // 20 planned: 3 errors are within chance of 5%, 4 are not.
        assert_eq!(
            tally(20, &slo, &vec![err.clone(); 3]).certain_break(&[]),
            None
        );
        assert_eq!(
            tally(20, &slo, &vec![err; 4]).certain_break(&[]),
            Some(Breach::Errors)
        );
    }

    #[test]
    fn no_single_sweep_makes_a_pooled_break() {
        let slo = slo(1000, 0.05, 0.05);
        let c = Counts::errors;
        // A burst of 6 of 34 beside 0 of 12: 6 of 46 is over 5% at 95%,
        // but without the burst nothing is over the limit.
        let v = decide(&[c(12, 0)], &c(34, 6), &slo, 0.95);
        assert_eq!(v.decision, Decision::Undecided);
        assert_eq!(v.decided_by, Some(Basis::Errors));
        // Alone (nothing pooled), the same sweep breaks.
        assert_eq!(decide(&[], &c(34, 6), &slo, 0.95).decision, Decision::Break);
        // A burst of 4 of 32 and a later 1 of 8 (a CI run at 2% of errors):
        // 5 of 40 is over 5% at 95%, but 1 of 8 is no evidence of it.
        let v = decide(&[c(32, 4)], &c(8, 1), &slo, 0.95);
        assert_eq!(v.decision, Decision::Undecided);
        let mut t = Tally::new(8, &slo, 0.95, Counts::default(), &[c(32, 4)]);
        t.record(&failed(Outcome::HttpError, 10));
        assert_eq!(t.certain_break(&[]), None);
        // Spread over the sweeps, the same share breaks.
        let v = decide(&[c(12, 2), c(12, 2)], &c(12, 2), &slo, 0.95);
        assert_eq!(v.decision, Decision::Break);
        // The early verdict agrees: not certain with the burst's sweep
        // the one with the most.
        let mut t = Tally::new(34, &slo, 0.95, Counts::default(), &[c(12, 0)]);
        let failed = || failed(Outcome::HttpError, 10);
        (0..6).for_each(|_| t.record(&failed()));
        assert_eq!(t.certain_break(&[]), None);
        let mut t = Tally::new(12, &slo, 0.95, Counts::default(), &[c(12, 2), c(12, 2)]);
        (0..2).for_each(|_| t.record(&failed()));
        assert_eq!(t.certain_break(&[]), None, "2 of 12 alone is not certain");
        (0..2).for_each(|_| t.record(&failed()));
        assert_eq!(t.certain_break(&[]), Some(Breach::Errors));
    }

    #[test]
    fn no_single_earlier_sweep_holds_a_level_undecided() {
        let slo = slo(1000, 0.05, 0.05);
        let c = Counts::errors;
        // A first sweep stopped early on 4 errors of 20 at a server
        // failing 4%: 8 of 116 is over 5%, but 4 of 96 is not.
        let v = decide(&[c(20, 4)], &c(96, 4), &slo, 0.95);
        assert_eq!((v.decision, v.pooled_sweeps), (Decision::Pass, 1));
        // Left out by what it holds beyond the limit, not by its count:
        // 4 of 96 has as many errors as 4 of 20.
        let v = decide(&[c(20, 4), c(96, 4)], &c(120, 6), &slo, 0.95);
        assert_eq!(v.decision, Decision::Pass);
        // Spread over the sweeps, the share stays over without any one.
        let v = decide(&[c(48, 3), c(48, 3)], &c(48, 3), &slo, 0.95);
        assert_eq!(
            (v.decision, v.decided_by),
            (Decision::Undecided, Some(Basis::Errors))
        );
        // This sweep's own share is never left out.
        let v = decide(&[c(48, 1)], &c(48, 6), &slo, 0.95);
        assert_eq!(v.decision, Decision::Undecided);
        // The earlier sweep stays in while this sweep's own requests are
        // fewer than its: after a rise, 17 of 168 just after it, then 0 of
        // 24 (the level is undecided, and sends more); 6 of 168 leave it out.
        let v = decide(&[c(168, 17)], &c(24, 0), &slo, 0.95);
        assert_eq!(v.decision, Decision::Undecided);
        let v = decide(&[c(168, 17)], &c(168, 6), &slo, 0.95);
        assert_eq!(v.decision, Decision::Pass);
        // And while this sweep's own requests observe the share over the
        // limit (2 of 24): 2 of 84 without 6 of 20 would pass, 8 of 104
        // with it is over.
        let v = decide(&[c(20, 6), c(60, 0)], &c(24, 2), &slo, 0.95);
        assert_eq!(v.decision, Decision::Undecided);
    }

    #[test]
    fn one_error_of_eight_is_undecided_and_more_requests_decide() {
        let slo = slo(1000, 0.05, 0.05);
        let mut samples = vec![ok(10); 7];
        samples.push(failed(Outcome::HttpError, 5));
        let v = decide(&[], &Counts::of(&samples, &slo), &slo, 0.95);
        assert_eq!(v.decision, Decision::Undecided);
        assert_eq!(v.decided_by, Some(Basis::Errors));
        assert_eq!(v.requests, 8);
        // 8 more, clean: 1 of 16 is still over 5%; 1 of 24 is not.
        samples.extend(vec![ok(10); 8]);
        let v = decide(&[], &Counts::of(&samples, &slo), &slo, 0.95);
        assert_eq!(v.decision, Decision::Undecided);
        samples.extend(vec![ok(10); 8]);
        let v = decide(&[], &Counts::of(&samples, &slo), &slo, 0.95);
        assert_eq!(
            (v.decision, v.decided_by, v.requests),
            (Decision::Pass, None, 24)
        );
        // A clean level passes on its planned count, as before.
        let v = decide(&[], &Counts::of(&vec![ok(10); 8], &slo), &slo, 0.95);
        assert_eq!(v.decision, Decision::Pass);
        // Three errors of eight: a break.
        let mut bad = vec![ok(10); 5];
        bad.extend(vec![failed(Outcome::Timeout, 5); 3]);
        let v = decide(&[], &Counts::of(&bad, &slo), &slo, 0.95);
        assert_eq!(
            (v.decision, v.decided_by),
            (Decision::Break, Some(Basis::Errors))
        );
        assert!(v.lower_bounds.error_ratio > 0.05);
    }

    #[test]
    fn one_slow_request_of_eight_does_not_break_the_p95_but_a_rise_does() {
        let slo = slo(1000, 0.05, 0.05);
        let mut one_slow = vec![ok(100); 7];
        one_slow.push(ok(10_000));
        let v = decide(&[], &Counts::of(&one_slow, &slo), &slo, 0.95);
        assert_eq!(
            (v.decision, v.decided_by),
            (Decision::Undecided, Some(Basis::P95Latency))
        );
        assert_eq!(tally(8, &slo, &one_slow).certain_break(&[]), None);
        // 16 more fast ones (the ceiling's next passes): it passes.
        one_slow.extend(vec![ok(100); 16]);
        let v = decide(&[], &Counts::of(&one_slow, &slo), &slo, 0.95);
        assert_eq!(v.decision, Decision::Pass);
        // Every request slower than the limit: a break, certain after 3 of 8
        // (x(6) of 8 is the lower bound of the p95).
        let slow = vec![ok(1500); 8];
        let v = decide(&[], &Counts::of(&slow, &slo), &slo, 0.95);
        assert_eq!(
            (v.decision, v.decided_by),
            (Decision::Break, Some(Basis::P95Latency))
        );
        assert_eq!(tally(8, &slo, &slow[..2]).certain_break(&[]), None);
        assert_eq!(
            tally(8, &slo, &slow[..3]).certain_break(&[]),
            Some(Breach::Latency)
        );
    }

    #[test]
    fn in_flight_floors_over_the_limit_count_and_never_exceed_what_is_pending() {
        let slo = slo(1000, 1.0, 1.0);
        let t = tally(8, &slo, &[]);
        assert_eq!(t.certain_break(&[2.0, 2.0]), None);
        assert_eq!(t.certain_break(&[2.0, 2.0, 2.0]), Some(Breach::Latency));
        assert_eq!(t.certain_break(&[0.9, 0.9, 0.9]), None, "under the limit");
        // Floors beyond the requests pending are ignored.
        let t = tally(8, &slo, &vec![ok(10); 7]);
        assert_eq!(t.certain_break(&[5.0, 5.0, 5.0]), None);
    }

    #[test]
    fn failures_count_in_the_latency_with_the_time_they_took() {
        let slo = slo(1000, 1.0, 1.0);
        let slow_errors = vec![failed(Outcome::ProtocolError, 10_000); 3];
        assert_eq!(
            tally(8, &slo, &slow_errors).certain_break(&[]),
            Some(Breach::Latency)
        );
        let quick = vec![failed(Outcome::HttpError, 5); 3];
        assert_eq!(tally(8, &slo, &quick).certain_break(&[]), None);
        assert_eq!(
            tally(8, &self::slo(1000, 1.0, 0.1), &quick).certain_break(&[]),
            Some(Breach::Errors)
        );
    }

    #[test]
    fn shed_and_cancelled_requests_leave_the_latency_set() {
        let slo = slo(1000, 1.0, 1.0);
        let c = Counts::of(
            &[
                ok(1500),
                shed(),
                Sample::failed(Outcome::Cancelled, None, "cancelled"),
            ],
            &slo,
        );
        assert_eq!((c.ended, c.timed, c.slow, c.shed), (2, 1, 1, 1));
        // A level where nothing succeeded breaks at its end.
        let v = decide(&[], &Counts::of(&[shed()], &slo), &slo, 0.95);
        assert_eq!(
            (v.decision, v.decided_by),
            (Decision::Break, Some(Basis::NoSuccess))
        );
    }

    /// `n` counts of one earlier sweep: `bad` of them failed.
    #[test]
    fn a_break_stands_in_only_while_this_sweeps_requests_show_it() {
        let slo = slo(500, 0.05, 0.05);
        let own = |failed| Counts::errors(32, failed);
        // 1 error of 32 (3%) no longer shows the break its pool decided.
        assert_eq!(
            stand_in(Some(Decision::Break), &own(1), &slo),
            Decision::Undecided
        );
        // 2 of 32 (6%) still does.
        assert_eq!(
            stand_in(Some(Decision::Break), &own(2), &slo),
            Decision::Break
        );
        // A pass stands in as before; nothing decided is undecided.
        assert_eq!(
            stand_in(Some(Decision::Pass), &own(2), &slo),
            Decision::Pass
        );
        assert_eq!(stand_in(None, &own(2), &slo), Decision::Undecided);
    }

    #[test]
    fn a_pass_on_the_pool_is_in_doubt_while_this_sweeps_requests_break_it() {
        let slo = slo(500, 0.05, 0.05);
        // Seven sweeps of 8 at 2% errors, then this one's 1 of 8 (12.5%).
        let window = vec![Counts::errors(56, 1)];
        let v = decide(&window, &Counts::errors(8, 1), &slo, 0.95);
        assert_eq!(v.decision, Decision::Pass, "{v:?}");
        assert!(pass_in_doubt(&v, &Counts::errors(8, 1), &slo));
        // 0 of 8 this sweep: a pass without doubt.
        let v = decide(&window, &Counts::errors(8, 0), &slo, 0.95);
        assert_eq!(v.decision, Decision::Pass, "{v:?}");
        assert!(!pass_in_doubt(&v, &Counts::errors(8, 0), &slo));
        // 1 of 24 (4.2%) is within the limit again.
        let v = decide(&window, &Counts::errors(24, 1), &slo, 0.95);
        assert_eq!(v.decision, Decision::Pass, "{v:?}");
        assert!(!pass_in_doubt(&v, &Counts::errors(24, 1), &slo));
    }

    #[test]
    fn errors_are_in_doubt_near_the_limit_after_a_fine_first_pass() {
        let slo = slo(500, 0.05, 0.05);
        let window = vec![Counts::errors(56, 1)];
        // 1 of 24 (4.2%) is over half the limit: in doubt after a fine
        // first pass, not after more.
        let v = decide(&window, &Counts::errors(24, 1), &slo, 0.95);
        assert_eq!(v.decision, Decision::Pass, "{v:?}");
        assert!(errors_in_doubt(&v, &Counts::errors(24, 1), &slo, true));
        assert!(!errors_in_doubt(&v, &Counts::errors(24, 1), &slo, false));
        // 1 of 48 (2.1%) is not over half the limit; 3 of 48 is over it.
        assert!(!errors_in_doubt(&v, &Counts::errors(48, 1), &slo, true));
        assert!(errors_in_doubt(&v, &Counts::errors(48, 3), &slo, false));
        // One failure observes 4.2% of 24, 8.3% of 12.
        assert!(fine(24, &slo) && !fine(12, &slo) && !fine(0, &slo));
        // An undecided level is in doubt as a pass is; a break is not.
        let mut u = v.clone();
        u.decision = Decision::Undecided;
        assert!(errors_in_doubt(&u, &Counts::errors(24, 2), &slo, false));
        u.decision = Decision::Break;
        assert!(!errors_in_doubt(&u, &Counts::errors(24, 2), &slo, false));
        // Slow requests alone put no level's errors in doubt.
        let mut slow = Counts::errors(24, 0);
        slow.slow = 6;
        assert!(!errors_in_doubt(&v, &slow, &slo, true));
    }

    #[test]
    fn pooled_evidence_decides_what_one_sweep_cannot() {
        let slo = slo(1000, 0.05, 0.05);
        // 15% errors, 9 in the 56 requests of seven earlier sweeps.
        let window = vec![
            Counts::errors(8, 1),
            Counts::errors(8, 2),
            Counts::errors(8, 1),
            Counts::errors(8, 0),
            Counts::errors(8, 2),
            Counts::errors(8, 1),
            Counts::errors(8, 2),
        ];
        // One error in this sweep's 8 is no break alone; pooled with seven
        // earlier sweeps (10 errors in 64) it breaks.
        let one = Counts::errors(8, 1);
        assert_eq!(decide(&[], &one, &slo, 0.95).decision, Decision::Undecided);
        let v = decide(&window, &one, &slo, 0.95);
        assert_eq!(
            (v.decision, v.decided_by),
            (Decision::Break, Some(Basis::Errors))
        );
        assert_eq!((v.requests, v.pooled_sweeps, v.change_seen), (64, 7, false));
        // A clean sweep passes alone; pooled, it does not show the break
        // its pool holds: undecided (it is sent more requests), neither a
        // pass nor a break.
        let clean = Counts::errors(8, 0);
        assert_eq!(decide(&[], &clean, &slo, 0.95).decision, Decision::Pass);
        let v = decide(&window, &clean, &slo, 0.95);
        assert_eq!(
            (v.decision, v.decided_by),
            (Decision::Undecided, Some(Basis::Errors))
        );
        // 2%: one error in this sweep's 8 is undecided alone, a pass pooled.
        let window = vec![Counts::errors(8, 0); 7];
        let one = Counts::errors(8, 1);
        assert_eq!(decide(&[], &one, &slo, 0.95).decision, Decision::Undecided);
        assert_eq!(decide(&window, &one, &slo, 0.95).decision, Decision::Pass);
    }

    #[test]
    fn a_change_drops_the_pool_both_ways() {
        let slo = slo(1000, 0.05, 0.05);
        // Capacity dropped: 18 of 20 shed where 168 requests were clean.
        let window = vec![Counts::errors(24, 0); 7];
        let mut dropped = Counts::errors(20, 0);
        dropped.shed = 18;
        dropped.ok = 2;
        dropped.timed = 2;
        let v = decide(&window, &dropped, &slo, 0.95);
        assert_eq!(
            (v.decision, v.decided_by),
            (Decision::Break, Some(Basis::Shed))
        );
        assert!(v.change_seen);
        assert_eq!((v.requests, v.pooled_sweeps), (20, 0));
        // Capacity came back: a clean sweep after sweeps that shed 18 of 20.
        let window = vec![dropped; 7];
        let v = decide(&window, &Counts::errors(24, 0), &slo, 0.95);
        assert_eq!((v.decision, v.change_seen), (Decision::Pass, true));
    }

    /// A request of a recorded level: its outcome and latency.
    fn sample_from(kind: u8, ms: u64) -> Sample {
        match kind {
            0..=5 => ok(ms),
            6 => shed(),
            7 => Sample::failed(Outcome::RateLimited, Some(429), "slow"),
            8 => failed(Outcome::Timeout, ms),
            _ => failed(Outcome::ProtocolError, ms),
        }
    }

    /// Levels as they are recorded: mostly fast requests, with bursts of
    /// slow ones, sheds and failures; latencies often exactly at the limit
    /// (1000 ms) so the boundary is hit.
    fn level_strategy(max: usize) -> impl Strategy<Value = Vec<(u8, u64)>> {
        let latency = prop_oneof![
            4 => 1u64..1000,
            2 => Just(1000u64),
            2 => 999u64..1003,
            2 => 1000u64..2500,
            1 => 2500u64..30_000,
        ];
        let kind = prop_oneof![8 => 0u8..6, 1 => 6u8..8, 1 => 8u8..10];
        prop::collection::vec((kind, latency), 1..max)
    }

    fn slo_strategy() -> impl Strategy<Value = Slo> {
        (
            prop_oneof![Just(1000u64), 500u64..2000],
            prop_oneof![Just(0.0), Just(0.05), 0.0f64..0.3],
            prop_oneof![Just(0.0), Just(0.05), 0.0f64..0.3],
        )
            .prop_map(|(p, s, e)| slo(p, s, e))
    }

    /// An early verdict under test: from the tally and the floors in flight.
    type Early = fn(&Tally, &[f64]) -> Option<Breach>;

    /// One pass of `samples` after `before` (this sweep) and `window`
    /// (earlier sweeps), judged against `slo` at `confidence`.
    struct Case<'a> {
        samples: &'a [Sample],
        before: &'a [Sample],
        window: &'a [Counts],
        slo: Slo,
        confidence: f64,
    }

    /// Err when `early` fires at some prefix of the case, with the next
    /// `in_flight` requests in flight at a floor below what each reaches
    /// (`floor_share` of it), although the full verdict is no break.
    /// Ok(fired) otherwise.
    fn check(
        early: Early,
        case: &Case,
        in_flight: usize,
        floor_share: f64,
    ) -> Result<bool, String> {
        let Case {
            samples,
            before,
            window,
            slo,
            confidence,
        } = *case;
        let b = Counts::of(before, &slo);
        let full = decision(
            window,
            &(b + Counts::of(samples, &slo)),
            &slo,
            1.0 - confidence,
        );
        let mut t = Tally::new(samples.len() as u64, &slo, confidence, b, window);
        for k in 0..=samples.len() {
            let floors: Vec<f64> = samples[k..]
                .iter()
                .take(in_flight)
                .map(|s| s.decision_seconds().map_or(0.0, |v| v * floor_share))
                .collect();
            if let Some(why) = early(&t, &floors) {
                if full.decision != Decision::Break {
                    return Err(format!(
                        "early {why:?} at {k} of {}, but the full verdict is {:?}",
                        samples.len(),
                        full.decision
                    ));
                }
                return Ok(true);
            }
            if let Some(s) = samples.get(k) {
                t.record(s);
            }
        }
        Ok(false)
    }

    fn right(t: &Tally, floors: &[f64]) -> Option<Breach> {
        t.certain_break(floors)
    }

    /// A plausible mistake: testing the counts so far over the requests
    /// ended so far, as if no request were pending.
    fn wrong(t: &Tally, _: &[f64]) -> Option<Breach> {
        let now = t.before + t.now;
        (binomial::over_limit(now.shed, now.ended, t.slo.max_shed_ratio, t.alpha)
            || binomial::over_limit(now.failed, now.ended, t.slo.max_error_ratio, t.alpha))
        .then_some(Breach::Shed)
    }

    fn samples_of(level: &[(u8, u64)]) -> Vec<Sample> {
        level.iter().map(|&(k, ms)| sample_from(k, ms)).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// Whenever the early verdict fires, the full verdict of the pass
        /// is a break: with or without earlier passes and a pool, at any
        /// confidence, whatever the full verdict makes of the pool.
        #[test]
        fn early_verdict_is_the_full_verdict(
            level in level_strategy(60),
            before in prop_oneof![Just(vec![]), level_strategy(20)],
            window in prop::collection::vec(level_strategy(30), 0..4),
            slo in slo_strategy(),
            confidence in prop_oneof![Just(0.95), Just(0.9), Just(0.99)],
            in_flight in 0usize..8,
            floor_share in 0.0f64..=1.0,
        ) {
            let samples = samples_of(&level);
            let before = samples_of(&before);
            let window: Vec<Counts> = window.iter().map(|w| Counts::of(&samples_of(w), &slo)).collect();
            let case = Case { samples: &samples, before: &before, window: &window, slo, confidence };
            let r = check(right, &case, in_flight, floor_share);
            prop_assert!(r.is_ok(), "{}", r.unwrap_err());
            // Alone, at the end, the early verdict is the full one on the
            // three tests (no success aside: only the end can tell).
            if window.is_empty() && before.is_empty() {
                let mut t = Tally::new(samples.len() as u64, &slo, confidence, Counts::default(), &[]);
                samples.iter().for_each(|s| t.record(s));
                let full = decide(&[], &Counts::of(&samples, &slo), &slo, confidence);
                let by_test = full.decision == Decision::Break
                    && full.decided_by != Some(Basis::NoSuccess);
                prop_assert_eq!(t.certain_break(&[]).is_some(), by_test);
            }
        }
    }

    #[test]
    fn small_levels_match_the_full_verdict_exhaustively_and_the_check_can_fail() {
        // Every level of 6 or 7 requests, in every order, built from a fast
        // request, one exactly at the limit, a slow one and a shed, alone
        // and after a pool of 16 clean requests: the early verdict fires
        // often and never on a level that does not break, while a verdict
        // that forgets the pending requests is caught.
        let slo = slo(1000, 0.2, 0.2);
        let kinds = [ok(100), ok(1000), ok(1200), shed()];
        let pools = [vec![], vec![Counts::errors(16, 0)]];
        let (mut fired, mut caught) = (0, 0);
        for window in &pools {
            for n in 6..=7u32 {
                for code in 0..(kinds.len() as u64).pow(n) {
                    let mut c = code;
                    let samples: Vec<Sample> = (0..n)
                        .map(|_| {
                            let s = kinds[(c % kinds.len() as u64) as usize].clone();
                            c /= kinds.len() as u64;
                            s
                        })
                        .collect();
                    let case = Case {
                        samples: &samples,
                        before: &[],
                        window,
                        slo,
                        confidence: 0.95,
                    };
                    match check(right, &case, 0, 0.0) {
                        Ok(true) => fired += 1,
                        Ok(false) => {}
                        Err(e) => panic!("{n} requests, code {code}: {e}"),
                    }
                    if check(wrong, &case, 0, 0.0).is_err() {
                        caught += 1;
                    }
                }
            }
        }
        assert!(fired > 5000, "the verdict fired early {fired} times");
        assert!(caught > 1000, "the wrong verdict was caught {caught} times");
    }
}
