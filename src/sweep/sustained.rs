//! The sustained-rate search of one workload, after its closed-loop ladder:
//! open-loop steps at rates chosen by [`crate::stats::rate_search`], each
//! judged as a level is ([`crate::stats::sustained::judge_step`]), within
//! the search's budget in requests and time. Run on every `every`-th sweep;
//! the sweeps between carry the last result with its age.

use std::time::{Duration, Instant};

use crate::config::{SustainedSearch, Target};
use crate::stats::arrivals;
use crate::stats::decision::Counts;
use crate::stats::rate_search::{self, Found, Search};
use crate::stats::report::{Capacity, LevelSummary, Limit};
use crate::stats::sustained::{
    judge_step, RateStep, StepPlan, StepResult, Sustained, SustainedStatus,
};
use crate::stats::verdict::Tally;
use crate::sweep::closed_loop::Run;
use crate::sweep::open_loop::{self, Step};
use crate::sweep::timing::{unix_now, SETTLE_AFTER_EARLY_STOP};

/// Counted requests a step sends at least while the search brackets the
/// rate: enough to steer it; the rate it finds is then confirmed by a step
/// [`CONFIRM_FACTOR`] times as long.
pub const MIN_STEP_REQUESTS: u64 = 30;
/// How many times a normal step's requests the confirmation sends: a
/// 30-request step at a rate that sheds 8% passes one time in three; the
/// confirmation's 90 or more pass it about one time in twelve.
pub const CONFIRM_FACTOR: u64 = 3;
/// A step lasts at least this many times the knee's p95 latency, so that
/// queues have time to form and drain many times over.
pub const STEP_LATENCIES: f64 = 8.0;
/// Default budget: this many times the requests the workload's closed-loop
/// levels sent in the same sweep, and at least what one step and its
/// confirmation at the start take (less could report no rate at all; more
/// than this multiple only when the ladder stopped early on a few requests).
pub const BUDGET_OVER_LADDER: u64 = 3;
/// Default client ceiling: this many times the knee...
pub const CEILING_OVER_KNEE: u32 = 4;
/// ...and at least this many requests in flight.
pub const MIN_CEILING: u32 = 16;

/// What the search needs from the ladder that ran before it.
pub(crate) struct Ladder<'a> {
    /// The workload's capacity, knee and limit decided.
    pub capacity: &'a Capacity,
    /// Levels measured and carried: the knee level's latency sizes steps.
    pub levels: &'a [&'a LevelSummary],
    /// Counted requests the ladder sent in this sweep.
    pub requests: u64,
}

/// What to do this sweep, from the last result the loop holds.
pub(crate) enum Plan {
    /// Nothing: searches are off, or there is no knee to start from.
    None,
    /// Keep the last result, one sweep older.
    Carry(Sustained),
    /// Search, from the last result when there is one.
    Search(Option<Sustained>),
}

/// Whether this sweep searches, carries the last result, or neither.
pub(crate) fn plan(settings: &SustainedSearch, last: Option<&Sustained>, knee: u32) -> Plan {
    if !settings.enabled() || knee == 0 {
        return Plan::None;
    }
    match last {
        // A search that measured nothing is tried again at the next sweep.
        Some(s)
            if s.status != SustainedStatus::NotMeasured
                && s.sweeps_since_measured + 1 < settings.every =>
        {
            let mut carried = s.clone();
            carried.sweeps_since_measured += 1;
            Plan::Carry(carried)
        }
        last => Plan::Search(last.cloned()),
    }
}

/// Runs the search for the workload of `run`; None when it cannot start
/// (no knee, no closed-loop rate).
pub(crate) async fn search(
    run: &Run,
    target: &Target,
    ladder: Ladder<'_>,
    last: Option<&Sustained>,
) -> Option<Sustained> {
    let settings = &target.sustained;
    let cap = ladder.capacity;
    let closed = cap.requests_per_second;
    let knee = cap.knee_concurrency;
    if knee == 0 || closed.is_nan() || closed <= 0.0 {
        return None;
    }
    let knee_level = ladder.levels.iter().find(|l| l.concurrency == knee)?;
    let hold = knee_level
        .decision_latency_seconds
        .p95
        .or(knee_level.latency_seconds.p95)
        .unwrap_or(1.0)
        .max(1e-3);
    let sheds = matches!(cap.limit, Some(Limit::Shed | Limit::RateLimited));
    let warm = last
        .and_then(|s| s.requests_per_second)
        .filter(|r| *r > 0.0);
    let alone = ladder
        .levels
        .iter()
        .filter(|l| l.concurrency > 0)
        .min_by_key(|l| l.concurrency)
        .and_then(|l| Some((l.latency_seconds.p50?, l.latency_seconds.p95?)));
    let model = rate_search::Model {
        closed_loop_rate: closed,
        knee,
        sheds,
        max_shed_ratio: target.slo.max_shed_ratio,
        p95_limit: target.slo.p95_latency.as_secs_f64(),
        alone,
    };
    let (start, from) = match warm {
        Some(r) => (r, "warm"),
        None => rate_search::predict(&model),
    };
    let ceiling = settings
        .max_in_flight
        .unwrap_or((knee.saturating_mul(CEILING_OVER_KNEE)).max(MIN_CEILING))
        .min(target.max_concurrency.unwrap_or(u32::MAX))
        .min(run.env.in_flight_total)
        .max(1);
    let mut steps = Steps {
        hold,
        budget: 0,
        max_duration: settings.max_duration,
        began: Instant::now(),
    };
    let mut out = Sustained {
        requests_per_second: None,
        status: SustainedStatus::NotMeasured,
        why: String::new(),
        confidence: target.verdict_confidence,
        resolution: settings.resolution,
        arrivals: settings.arrivals,
        start_requests_per_second: start,
        start_from: from.to_string(),
        closed_loop_requests_per_second: closed,
        requests: 0,
        measured_at_unix_seconds: 0.0,
        sweeps_since_measured: 0,
        steps: Vec::new(),
    };
    let places = match run.hold_places(ceiling, target.request_timeout).await {
        Ok(p) => p,
        Err(why) => {
            out.why = format!("not measured: {why}");
            out.measured_at_unix_seconds = unix_now();
            return Some(out);
        }
    };
    // Near the closed-loop rate a queue only grows (or sheds), faster than
    // a step can show: the search goes there only when the ladder never
    // found the knee.
    let max = if cap.knee_is_lower_bound {
        closed * rate_search::MAX_OVER_CLOSED_LOOP
    } else {
        let most = closed * rate_search::MAX_OF_CLOSED_LOOP;
        rate_search::ceiling(&model).map_or(most, |c| c.min(most))
    };
    // A model's prediction is trusted as the last rate is: one resolution
    // above it first, not a widening.
    let near = from != "queue";
    let mut search = Search::new(start, closed, max, settings.resolution, near);
    steps.budget = settings.max_requests.map_or_else(
        || (ladder.requests * BUDGET_OVER_LADDER).max(steps.least(search.next().unwrap_or(start))),
        u64::from,
    );
    let (stopped, unconfirmed) = walk(run, target, ceiling, &steps, &mut search, &mut out).await;
    drop(places);
    out.measured_at_unix_seconds = unix_now();
    conclude(&mut out, &search, stopped);
    if let Some(why) = unconfirmed {
        mark_unconfirmed(&mut out, &why);
    }
    Some(out)
}

/// A rate found but not confirmed (its confirmation did not fit the
/// budget) is reported as such: a step's pass alone overstates the rate
/// often enough that a fleet is never sized on it.
fn mark_unconfirmed(out: &mut Sustained, why: &str) {
    if out.requests_per_second.is_some()
        && matches!(
            out.status,
            SustainedStatus::Measured | SustainedStatus::LowerBound
        )
    {
        out.status = SustainedStatus::Unconfirmed;
        out.why = format!("{} ({why})", out.why);
    }
}

/// The size of the search's steps and what it may spend on them.
struct Steps {
    /// The knee level's p95 latency, seconds: how long a request holds a place.
    hold: f64,
    /// Requests the whole search may send.
    budget: u64,
    /// Time the whole search may take.
    max_duration: Duration,
    /// When the search began.
    began: Instant,
}

impl Steps {
    /// Counted and uncounted (warm-up) requests of a step at `rate`; a
    /// confirmation sends what its earlier steps at the rate (`pooled`
    /// counted requests) leave to [`CONFIRM_FACTOR`] times a step, and at
    /// least one step.
    fn size(&self, rate: f64, confirming: bool, pooled: u64) -> (u64, u64) {
        let base = MIN_STEP_REQUESTS.max((rate * STEP_LATENCIES * self.hold).ceil() as u64);
        let counted = if confirming {
            (base * CONFIRM_FACTOR).saturating_sub(pooled).max(base)
        } else {
            base
        };
        (counted, (rate * self.hold).ceil().max(1.0) as u64)
    }

    /// Requests and time a step at `rate` takes.
    fn cost(&self, rate: f64, confirming: bool, pooled: u64) -> (u64, Duration) {
        let (n, u) = self.size(rate, confirming, pooled);
        (
            n + u,
            Duration::from_secs_f64((n + u) as f64 / rate + self.hold),
        )
    }

    /// Whether `requests` more, taking `time`, fit after `spent`.
    fn fits(&self, spent: u64, requests: u64, time: Duration) -> bool {
        spent + requests <= self.budget && self.began.elapsed() + time <= self.max_duration
    }

    /// Requests and time of an exploring step at `rate` and of a
    /// confirmation at the same rate, pooled with it.
    fn with_confirmation(&self, rate: f64) -> (u64, Duration) {
        let (n, t) = self.cost(rate, false, 0);
        let (counted, _) = self.size(rate, false, 0);
        let (c, ct) = self.cost(rate, true, counted);
        (n + c, t + ct)
    }

    /// Whether an exploring step at `rate` fits with room left for a
    /// confirmation at the same rate, pooled with it, and for `pending`
    /// (requests and time of the confirmation of the pass below, when that
    /// is yet to run): a confirmation above that fails leaves the pass
    /// below to confirm, and when that did not fit, the search ended
    /// unconfirmed (BENCHMARKS.md, seed 8 at 9d8b31d).
    fn explore(&self, rate: f64, spent: u64, (more, longer): (u64, Duration)) -> bool {
        let (n, t) = self.with_confirmation(rate);
        self.fits(spent, n + more, t + longer)
    }

    /// The fewest requests that can report a rate from `start`: its step
    /// and that step's confirmation.
    fn least(&self, start: f64) -> u64 {
        self.with_confirmation(start).0
    }

    /// The budget, as the reasons for stopping name it.
    fn limits(&self) -> String {
        format!(
            "({} requests, sustained.max_duration {})",
            self.budget,
            humantime::format_duration(self.max_duration)
        )
    }
}

/// Steps the search until it ends: bracket and bisect, then confirm the
/// rate found with a longer step, and search on below it when that does
/// not hold. Returns why the search stopped early, and why the rate found
/// was not confirmed, when either happened.
async fn walk(
    run: &Run,
    target: &Target,
    ceiling: u32,
    steps: &Steps,
    search: &mut Search,
    out: &mut Sustained,
) -> (Option<String>, Option<String>) {
    let mut stopped = None;
    let mut settle = false;
    // The rate whose confirmation passed.
    let mut confirmed = None;
    // A rate whose step was undecided: it goes on, to a confirmation's size.
    let mut extend = None;
    loop {
        let next = match extend.take() {
            Some(rate) => Some((rate, true)),
            None => next_step(
                search,
                steps,
                (&out.steps, out.requests),
                &mut stopped,
                confirmed,
            ),
        };
        let Some((rate, confirming)) = next else {
            return (stopped, None);
        };
        // A confirmation pools the steps at its rate that did not break.
        let (prior, planned) = if confirming {
            pooled_at(&out.steps, rate)
        } else {
            (Counts::default(), 0)
        };
        let (counted, uncounted) = steps.size(rate, confirming, planned);
        let (total, time) = steps.cost(rate, confirming, planned);
        let extending = confirming && search.highest_pass() != Some(rate);
        if extending
            && !extension_fits(
                steps,
                search,
                &out.steps,
                out.requests,
                (total, time),
                confirmed,
            )
        {
            // An exploring step keeps room for one confirmation: when its
            // extension would leave none for the pass below it, it counts
            // as a break and that pass is confirmed (so, too, when the time
            // has run out).
            search.record(rate, false);
            continue;
        }
        if confirming && !steps.fits(out.requests, total, time) {
            let why = format!(
                "not confirmed: a {total}-request confirmation would exceed the budget {}",
                steps.limits()
            );
            return (stopped, Some(why));
        }
        if settle {
            tokio::select! {
                _ = tokio::time::sleep(SETTLE_AFTER_EARLY_STOP) => {}
                _ = run.cancel.cancelled() => {}
            }
        }
        let step = send_step(
            run,
            target,
            ceiling,
            rate,
            (counted, uncounted),
            confirming.then_some(prior),
            out.steps.len(),
        )
        .await;
        out.requests += step.sent + uncounted.min(step.scheduled);
        settle = step.stopped_early;
        let result = step.result;
        let note = step.note.clone();
        out.steps.push(step);
        match result {
            StepResult::Pass if confirming => {
                confirmed = Some(rate);
                if extending {
                    search.record(rate, true);
                }
            }
            StepResult::Pass => search.record(rate, true),
            StepResult::Break | StepResult::Undecided if confirming => {
                refuted(search, rate, &mut stopped);
            }
            StepResult::Break => search.record(rate, false),
            // Over a limit, but not beyond chance: more requests at the
            // rate, judged with these by the confirmation's rule, decide it
            // (a break read into 2 sheds of 33 sent the search far below).
            StepResult::Undecided => extend = Some(rate),
            StepResult::NotMeasured => {
                let why = format!(
                    "the step at {rate:.2} req/s was not measured: {}",
                    note.unwrap_or_default()
                );
                return (Some(why), None);
            }
        }
    }
}

/// A confirmation at `rate` did not hold: the search goes on below it. A
/// stop for want of budget to go higher no longer applies: it had left
/// searches whose start passed its step and failed its confirmation with
/// no rate at all (`not_measured`, 2 of 24 searches of the shedding engine),
/// where a step and a confirmation below still fit.
fn refuted(search: &mut Search, rate: f64, stopped: &mut Option<String>) {
    search.refute(rate);
    *stopped = None;
}

/// The next step: a rate to explore, or a rate found to confirm; None when
/// the search is over. Each exploring step leaves room in the budget for the
/// confirmation; when it cannot, the highest pass so far is confirmed.
fn next_step(
    search: &Search,
    steps: &Steps,
    (done, spent): (&[RateStep], u64),
    stopped: &mut Option<String>,
    confirmed: Option<f64>,
) -> Option<(f64, bool)> {
    let pending = |r: f64| pending_confirmation(steps, search, done, confirmed, r);
    match (search.next(), search.found()) {
        (Some(r), _) if stopped.is_none() && steps.explore(r, spent, pending(r)) => {
            Some((r, false))
        }
        (Some(r), _) => {
            stopped.get_or_insert_with(|| {
                format!(
                    "the next step (at {r:.2} req/s) and a confirmation would exceed its budget {}",
                    steps.limits()
                )
            });
            match search.highest_pass() {
                Some(p) if confirmed != Some(p) => Some((p, true)),
                _ => None,
            }
        }
        (None, Some(Found::Rate(r) | Found::AtLeast(r))) if confirmed != Some(r) => Some((r, true)),
        _ => None,
    }
}

/// Requests and time of the confirmation of the highest pass below `rate`,
/// when that is yet to run; nothing otherwise.
fn pending_confirmation(
    steps: &Steps,
    search: &Search,
    done: &[RateStep],
    confirmed: Option<f64>,
    rate: f64,
) -> (u64, Duration) {
    search
        .highest_pass()
        .filter(|p| confirmed != Some(*p) && *p < rate)
        .map_or((0, Duration::ZERO), |p| {
            steps.cost(p, true, pooled_at(done, p).1)
        })
}

/// Whether an undecided step's extension (`cost`) fits with the
/// confirmation of the highest pass below it, when that is yet to run: an
/// extension that breaks leaves that pass to confirm, and a search that
/// then cannot confirm it reports nothing confirmed.
fn extension_fits(
    steps: &Steps,
    search: &Search,
    done: &[RateStep],
    spent: u64,
    (requests, time): (u64, Duration),
    confirmed: Option<f64>,
) -> bool {
    let (more, longer) = pending_confirmation(steps, search, done, confirmed, f64::INFINITY);
    steps.fits(spent, requests + more, time + longer)
}

/// The counts of the steps at `rate` that steered the search without a
/// break (a pass, or an undecided step that a confirmation extends), and
/// the counted requests they planned (the confirmation's size is counted
/// from those, as the room kept for it was).
fn pooled_at(steps: &[RateStep], rate: f64) -> (Counts, u64) {
    steps
        .iter()
        .filter(|s| {
            s.offered_requests_per_second == rate
                && !s.confirmation
                && matches!(s.result, StepResult::Pass | StepResult::Undecided)
        })
        .fold((Counts::default(), 0), |(c, n), s| {
            (
                c + s.verdict.counts,
                n + s.scheduled.saturating_sub(s.uncounted),
            )
        })
}

/// Sends one open-loop step at `rate` (`size`: counted and uncounted
/// requests) and judges it; `confirming` with the counts it pools, when it
/// confirms the rate; `index` numbers the step for its seed.
async fn send_step(
    run: &Run,
    target: &Target,
    ceiling: u32,
    rate: f64,
    (counted, uncounted): (u64, u64),
    confirming: Option<Counts>,
    index: usize,
) -> RateStep {
    let settings = &target.sustained;
    let total = counted + uncounted;
    let seed = settings
        .seed
        .map_or_else(|| fastrand::u64(..), |s| s.wrapping_add(index as u64));
    let times = arrivals::schedule(settings.arrivals, rate, total as usize, seed);
    run.env
        .observer
        .step_started(target, &run.requests.workload, rate, total);
    let tally = target.early_stop.then(|| {
        Tally::new(
            counted,
            &target.slo,
            target.verdict_confidence,
            Default::default(),
            &[],
        )
    });
    let measured = open_loop::run_step(
        run,
        Step {
            times: &times,
            uncounted: uncounted as usize,
            ceiling,
            lag_bound: settings.lag_bound(rate),
            tally,
        },
    )
    .await;
    let plan = StepPlan {
        rate,
        seed,
        scheduled: total,
        uncounted,
        confirming: confirming.is_some(),
        prior: confirming.unwrap_or_default(),
    };
    judge_step(plan, &measured, &target.slo, target.verdict_confidence)
}

/// The rate and status the steps support, and why the search ended.
fn conclude(out: &mut Sustained, search: &Search, stopped: Option<String>) {
    let (rate, status, why) = match (search.found(), stopped) {
        (Some(Found::Rate(r)), _) => (
            Some(r),
            SustainedStatus::Measured,
            format!(
                "held at {r:.2} req/s and broke within {:.0}% above it",
                out.resolution * 100.0
            ),
        ),
        (Some(Found::AtLeast(r)), _) => (
            Some(r),
            SustainedStatus::LowerBound,
            format!("still held at {r:.2} req/s, the highest rate the search tries"),
        ),
        (Some(Found::Zero), _) => (
            Some(0.0),
            SustainedStatus::Zero,
            "broke even at the lowest rate tried".to_string(),
        ),
        (None, Some(why)) => match search.highest_pass() {
            Some(r) => (
                Some(r),
                SustainedStatus::LowerBound,
                format!("held at {r:.2} req/s; the search stopped: {why}"),
            ),
            None => (
                None,
                SustainedStatus::NotMeasured,
                format!("not measured: {why}"),
            ),
        },
        (None, None) => (
            None,
            SustainedStatus::NotMeasured,
            "not measured: the search ended without a step".to_string(),
        ),
    };
    out.requests_per_second = rate;
    out.status = status;
    out.why = why;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Arrivals;

    fn last(age: u32) -> Sustained {
        Sustained {
            requests_per_second: Some(5.0),
            status: SustainedStatus::Measured,
            why: String::new(),
            confidence: 0.95,
            resolution: 0.1,
            arrivals: Arrivals::Poisson,
            start_requests_per_second: 5.0,
            start_from: "warm".into(),
            closed_loop_requests_per_second: 8.0,
            requests: 100,
            measured_at_unix_seconds: 1.0,
            sweeps_since_measured: age,
            steps: Vec::new(),
        }
    }

    fn steps(budget: u64) -> Steps {
        Steps {
            hold: 0.26,
            budget,
            max_duration: Duration::from_secs(180),
            began: Instant::now(),
        }
    }

    #[test]
    fn the_least_budget_holds_one_step_and_its_confirmation() {
        // At 16.6 req/s a step is 8 x 0.26 s of arrivals, 35 counted and 5
        // warm-up; its confirmation sends 70 more counted and 5 warm-up.
        let s = steps(0);
        assert_eq!(s.size(16.6, false, 0), (35, 5));
        assert_eq!(s.size(16.6, true, 35), (70, 5));
        assert_eq!(s.least(16.6), 115);
        let nothing = (0, Duration::ZERO);
        assert!(steps(115).explore(16.6, 0, nothing));
        assert!(!steps(114).explore(16.6, 0, nothing));
    }

    #[test]
    fn a_step_above_a_pass_keeps_room_to_confirm_that_pass() {
        // 16.66 passed its step (40 sent). A step at 17.67 takes 42 and its
        // confirmation 79; should that fail, 16.66's confirmation (here
        // with no step to pool: 105 counted and 5 warm-up) takes 110.
        let mut search = Search::new(16.66, 31.0, 17.67, 0.1, true);
        search.record(16.66, true);
        assert_eq!(search.next(), Some(17.67));
        let next =
            |budget, confirmed| next_step(&search, &steps(budget), (&[], 40), &mut None, confirmed);
        assert_eq!(next(271, None), Some((17.67, false)));
        // One request short: 16.66 is confirmed instead of going higher.
        assert_eq!(next(270, None), Some((16.66, true)));
        // Once 16.66 is confirmed, the step needs only its own room.
        assert_eq!(next(161, Some(16.66)), Some((17.67, false)));
        assert_eq!(next(160, Some(16.66)), None);
    }

    #[test]
    fn a_refuted_start_goes_on_below_though_going_higher_did_not_fit() {
        // The start 16.64 passed its step (40 sent); a step above and its
        // confirmation do not fit 219 requests, so 16.64 is confirmed.
        let mut search = Search::new(16.64, 31.0, 17.65, 0.1, true);
        search.record(16.64, true);
        let mut stopped = None;
        let budget = steps(219);
        assert_eq!(
            next_step(&search, &budget, (&[], 40), &mut stopped, None),
            Some((16.64, true))
        );
        assert!(stopped.is_some());
        // Its confirmation (75 sent) did not hold: a step below and its
        // confirmation, 104 requests, fit the 104 left.
        refuted(&mut search, 16.64, &mut stopped);
        let Some((rate, false)) = next_step(&search, &budget, (&[], 115), &mut stopped, None)
        else {
            panic!("no step below the refuted start: {stopped:?}");
        };
        assert!((rate - 16.64 / 1.1).abs() < 1e-9, "{rate}");
        // With one request less, nothing is measured, and the reason says so.
        let mut stopped = None;
        assert_eq!(
            next_step(&search, &steps(218), (&[], 115), &mut stopped, None),
            None
        );
        assert!(stopped.unwrap().contains("15.13 req/s"));
    }

    #[test]
    fn an_extension_runs_only_with_room_to_confirm_the_pass_below() {
        // 16.6 passed its step (40 sent), 17.6 was undecided (42 sent).
        let mut search = Search::new(16.6, 31.0, 17.6, 0.1, true);
        search.record(16.6, true);
        assert_eq!(steps(0).size(17.6, false, 0), (37, 5));
        let extension = steps(0).cost(17.6, true, 37);
        assert_eq!(extension.0, 79);
        // With the extension, a confirmation of 16.6 (here with no step to
        // pool: 105 counted and 5 warm-up) after 82 sent: 271.
        let fits = |budget, confirmed| {
            extension_fits(&steps(budget), &search, &[], 82, extension, confirmed)
        };
        assert!(fits(271, None));
        assert!(!fits(270, None));
        // Once 16.6 is confirmed, the extension needs only its own room.
        assert!(fits(161, Some(16.6)));
        assert!(!fits(160, Some(16.6)));
    }

    #[test]
    fn a_rate_whose_confirmation_did_not_fit_is_reported_unconfirmed() {
        let why = "not confirmed: a 120-request confirmation would exceed the budget";
        for status in [SustainedStatus::Measured, SustainedStatus::LowerBound] {
            let mut out = last(0);
            out.status = status;
            out.why = "held at 5.00 req/s".into();
            mark_unconfirmed(&mut out, why);
            assert_eq!(out.status, SustainedStatus::Unconfirmed);
            assert_eq!(out.status.as_str(), "unconfirmed");
            assert_eq!(out.requests_per_second, Some(5.0));
            assert_eq!(out.why, format!("held at 5.00 req/s ({why})"));
        }
        // Nothing found, or nothing sustained: that stands.
        for status in [SustainedStatus::Zero, SustainedStatus::NotMeasured] {
            let mut out = last(0);
            out.status = status;
            mark_unconfirmed(&mut out, why);
            assert_eq!(out.status, status);
        }
        let mut none = last(0);
        none.requests_per_second = None;
        mark_unconfirmed(&mut none, why);
        assert_eq!(none.status, SustainedStatus::Measured);
    }

    #[test]
    fn searches_every_nth_sweep_and_carries_the_result_between() {
        let every4 = SustainedSearch::default();
        assert!(matches!(plan(&every4, None, 8), Plan::Search(None)));
        // Measured by this loop's last sweep: carried, one sweep older, three times.
        for age in 0..3 {
            match plan(&every4, Some(&last(age)), 8) {
                Plan::Carry(s) => assert_eq!(s.sweeps_since_measured, age + 1),
                _ => panic!("sweep {age} after a search should carry"),
            }
        }
        // The fourth sweep searches again, warm from the last rate.
        match plan(&every4, Some(&last(3)), 8) {
            Plan::Search(Some(s)) => assert_eq!(s.requests_per_second, Some(5.0)),
            _ => panic!("the fourth sweep should search"),
        }
        let mut failed = last(0);
        failed.status = SustainedStatus::NotMeasured;
        assert!(matches!(
            plan(&every4, Some(&failed), 8),
            Plan::Search(Some(_))
        ));
        let off = SustainedSearch { every: 0, ..every4 };
        assert!(matches!(plan(&off, None, 8), Plan::None));
        assert!(matches!(plan(&every4, Some(&last(0)), 0), Plan::None));
    }
}
