//! Which rate the open-loop search tries next: bracket from a start (a
//! prediction, or the last sustained rate), then bisect geometrically until
//! the highest passing and the lowest breaking rate are within the
//! resolution. Pure: the sweep runs each step and records how it went.

use crate::stats::erlang;
use crate::stats::verdict::SLOW_SHARE;

/// Factor between two rates tried while no bracket is found.
pub const WIDEN: f64 = 1.4;
/// Highest rate tried, as a multiple of the closed-loop rate at the knee:
/// open-loop traffic cannot be sustained much above the saturation rate,
/// and a pass there says the search could not find the limit.
pub const MAX_OVER_CLOSED_LOOP: f64 = 2.0;
/// Highest rate tried when the knee was found, as a share of the
/// closed-loop rate at it: at 90% of saturation a queue's p95 wait is
/// several service times (and 8 places shed 18% of Poisson arrivals), while
/// a step of a few seconds at 98% can pass before the queue has formed.
pub const MAX_OF_CLOSED_LOOP: f64 = 0.9;
/// Lowest rate tried, as a share of the closed-loop rate at the knee: a
/// server that breaks even there sustains nothing worth sizing on.
pub const MIN_OF_CLOSED_LOOP: f64 = 0.05;
/// Share of the closed-loop rate the search starts from when a queue (not
/// shedding) binds and the ladder gave no latency to model it with:
/// queueing delay grows steeply near saturation, so the p95 usually holds
/// up to about this share.
pub const QUEUE_START: f64 = 0.7;
/// A queue's wait as a share of the M/M/n wait at the same load: the
/// Pollaczek-Khinchine factor (1 + cv^2) / 2 with a service time's squared
/// coefficient of variation cv^2 = 0.5, between constant service (0.5)
/// and exponential (1). Output lengths vary; and on the built-in engine,
/// whose lone latency barely varies, 1,000-request runs at the rate of the
/// constant-service factor broke the p95 one time in two.
pub const SERVICE_WAIT_FACTOR: f64 = 0.75;
/// The share of each limit a model's prediction aims at: a rate whose
/// expected shed ratio (or share of slow requests) is the limit itself
/// breaks about one check in two, so the start leaves this margin.
pub const START_MARGIN: f64 = 0.8;

/// What the closed-loop ladder says of a server, for the search's first
/// guess.
#[derive(Debug, Clone, Copy)]
pub struct Model {
    /// Completion rate at the knee, requests per second.
    pub closed_loop_rate: f64,
    /// The knee, requests in flight.
    pub knee: u32,
    /// Whether shedding (503s, 429s) decided the knee.
    pub sheds: bool,
    /// The SLO's largest shed ratio.
    pub max_shed_ratio: f64,
    /// The SLO's p95 latency limit, seconds.
    pub p95_limit: f64,
    /// Latency of a request alone (the lowest level), p50 and p95, seconds.
    pub alone: Option<(f64, f64)>,
}

/// Where the search starts, and how it was chosen:
/// - `erlang_b` when shedding binds: the rate at which the knee's places
///   turn away [`START_MARGIN`] of the largest shed ratio, as many of them
///   served at once as the closed-loop rate times a lone request's latency
///   and the rest waiting (Erlang B when all are served; see [`shed_rate`]);
/// - `erlang_c` when a queue binds: as many servers as the closed-loop rate
///   times a lone request's latency, and the highest rate at which the
///   wait that [`START_MARGIN`] of 5% of arrivals exceed fits in the p95
///   limit less a lone request's p95 (M/M/n's wait, scaled by
///   [`SERVICE_WAIT_FACTOR`]);
/// - `queue`, a share of the closed-loop rate, when there is no latency to
///   model with.
pub fn predict(m: &Model) -> (f64, &'static str) {
    if m.knee == 0 || m.closed_loop_rate <= 0.0 || m.closed_loop_rate.is_nan() {
        return (m.closed_loop_rate * QUEUE_START, "queue");
    }
    if m.sheds {
        return (shed_rate(m, m.max_shed_ratio * START_MARGIN), "erlang_b");
    }
    match queue_rate(m, SLOW_SHARE * START_MARGIN) {
        Some(rate) => (rate, "erlang_c"),
        None => (m.closed_loop_rate * QUEUE_START, "queue"),
    }
}

/// The highest rate the search tries when a model predicted its start: the
/// model's rate at the limit itself (no margin). Steps last seconds and a
/// hundred requests: they cannot tell a shed ratio of 5% from 6%, and near
/// saturation a queue takes longer than a step to build. At 90% of the
/// closed-loop rate, 60-request steps passed where 1,000-request runs
/// broke; on an 8-place loss system, confirmations passed one resolution
/// over the Erlang B rate where 1,000-request runs shed 5.1 to 5.3%
/// (BENCHMARKS.md, "The sustained rate, checked"). None without a model.
pub fn ceiling(m: &Model) -> Option<f64> {
    if m.knee == 0 || m.closed_loop_rate.is_nan() || m.closed_loop_rate <= 0.0 {
        return None;
    }
    if m.sheds {
        return Some(shed_rate(m, m.max_shed_ratio));
    }
    queue_rate(m, SLOW_SHARE)
}

/// The rate at which a server that admits the knee's requests turns away
/// `share` of Poisson arrivals: as many servers as the closed-loop rate
/// times a lone request's latency (the knee's when that is unknown), each
/// serving closed-loop rate / servers requests a second, the rest of the
/// knee's places waiting (M/M/c/K; Erlang B when every place is served).
fn shed_rate(m: &Model, share: f64) -> f64 {
    let servers = m.alone.map_or(m.knee, |(p50, _)| servers(m, p50));
    let mu = m.closed_loop_rate / f64::from(servers);
    erlang::load_with_queue_for(servers, m.knee, share.max(1e-3)) * mu
}

/// Requests served at once, by Little's law: the closed-loop rate times a
/// lone request's latency `p50`, between 1 and the knee.
fn servers(m: &Model, p50: f64) -> u32 {
    ((m.closed_loop_rate * p50).round() as u32).clamp(1, m.knee)
}

/// The rate at which `share` of arrivals wait longer than the p95 limit
/// leaves (the `erlang_c` model); None when a lone request's latency is
/// unknown or already over the limit.
fn queue_rate(m: &Model, share: f64) -> Option<f64> {
    let (p50, p95) = m.alone?;
    let allowance = m.p95_limit - p95;
    if !(p50 > 0.0 && allowance > 0.0 && allowance.is_finite()) {
        return None;
    }
    let closed = m.closed_loop_rate;
    let servers = servers(m, p50);
    let mu = closed / f64::from(servers);
    let t = allowance / SERVICE_WAIT_FACTOR;
    let (mut lo, mut hi) = (0.0f64, closed);
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if erlang::wait_over(servers, mu, mid, t) <= share {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo > 0.0).then_some(lo)
}

/// The state of one search.
#[derive(Debug, Clone)]
pub struct Search {
    resolution: f64,
    min: f64,
    max: f64,
    /// Rates that passed (and were not refuted since).
    passes: Vec<f64>,
    /// Highest rate that passed.
    lo: Option<f64>,
    /// Lowest rate that broke.
    hi: Option<f64>,
    next: Option<f64>,
    /// A start expected near the limit steps up one resolution first, not
    /// a full widening.
    near: bool,
}

/// How the search ended, once [`Search::next`] is None.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Found {
    /// The bracket closed: the highest passing rate.
    Rate(f64),
    /// The highest rate allowed still passed: at least this.
    AtLeast(f64),
    /// The lowest rate allowed still broke.
    Zero,
}

impl Search {
    /// A search from `start`, between a share of the closed-loop rate and
    /// `max` (the highest rate worth trying); `near` when `start` is
    /// expected near the limit (the last sustained rate, or a queueing
    /// model's prediction): checked with one step above it before widening.
    pub fn new(start: f64, closed_loop_rate: f64, max: f64, resolution: f64, near: bool) -> Self {
        let min = closed_loop_rate * MIN_OF_CLOSED_LOOP;
        Search {
            resolution,
            min,
            max,
            passes: Vec::new(),
            lo: None,
            hi: None,
            next: Some(start.clamp(min, max)),
            near,
        }
    }

    /// The rate of the next step; None once the search is done.
    pub fn next(&self) -> Option<f64> {
        self.next
    }

    /// Records the step at `rate`: held or not (a break or an undecided
    /// step). Every rate is tried once.
    pub fn record(&mut self, rate: f64, held: bool) {
        if held {
            self.passes.push(rate);
            self.lo = Some(self.lo.map_or(rate, |l| l.max(rate)));
        } else {
            self.hi = Some(self.hi.map_or(rate, |h| h.min(rate)));
        }
        self.plan_next();
    }

    /// A longer step at `rate` (which had passed) did not hold: it and every
    /// pass at or above it count as breaks, and the search goes on below:
    /// one resolution below when no pass is left, not a widening, since a
    /// rate that passed a step is near the limit (a confirmation refuted
    /// after a break above had sent searches to 1/1.4 of a model's start).
    pub fn refute(&mut self, rate: f64) {
        self.passes.retain(|p| *p < rate);
        self.lo = self.passes.iter().copied().reduce(f64::max);
        self.hi = Some(self.hi.map_or(rate, |h| h.min(rate)));
        self.near = true;
        self.plan_next();
    }

    fn plan_next(&mut self) {
        let factor = if self.near {
            1.0 + self.resolution
        } else {
            WIDEN
        };
        self.near = false;
        self.next = match (self.lo, self.hi) {
            (Some(lo), Some(hi)) if self.within(lo, hi) => None,
            (Some(lo), Some(hi)) => Some((lo * hi).sqrt()),
            (Some(lo), None) if lo >= self.max => None,
            (Some(lo), None) => Some((lo * factor).min(self.max)),
            (None, Some(hi)) if hi <= self.min => None,
            (None, Some(hi)) => Some((hi / factor).max(self.min)),
            (None, None) => self.next,
        };
    }

    /// Whether a pass at `lo` and a break at `hi` are within the resolution
    /// (one resolution step apart counts, whatever the rounding).
    fn within(&self, lo: f64, hi: f64) -> bool {
        hi <= lo * (1.0 + self.resolution) * (1.0 + 1e-9)
    }

    /// What the steps so far found.
    pub fn found(&self) -> Option<Found> {
        match (self.lo, self.hi) {
            (Some(lo), Some(hi)) if self.within(lo, hi) => Some(Found::Rate(lo)),
            (Some(lo), _) if self.next.is_none() => Some(Found::AtLeast(lo)),
            (None, Some(_)) if self.next.is_none() => Some(Found::Zero),
            _ => None,
        }
    }

    /// The highest rate that held so far.
    pub fn highest_pass(&self) -> Option<f64> {
        self.lo
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a search against a server that holds below `limit`.
    fn run(start: f64, limit: f64, warm: bool) -> (Option<Found>, Vec<f64>) {
        let mut s = Search::new(start, 10.0, 20.0, 0.1, warm);
        let mut tried = Vec::new();
        while let Some(r) = s.next() {
            tried.push(r);
            s.record(r, r <= limit);
            assert!(tried.len() < 30, "{tried:?}");
        }
        (s.found(), tried)
    }

    #[test]
    fn brackets_then_bisects_to_the_resolution() {
        let (found, tried) = run(5.0, 6.3, false);
        let Some(Found::Rate(r)) = found else {
            panic!("{found:?}")
        };
        assert!(r <= 6.3 && r > 6.3 / 1.1, "{r} {tried:?}");
        assert!(tried.len() <= 6, "{tried:?}");
        let (found, _) = run(9.0, 3.0, false);
        let Some(Found::Rate(r)) = found else {
            panic!("{found:?}")
        };
        assert!(r <= 3.0 && r > 3.0 / 1.1, "{r}");
    }

    #[test]
    fn a_refuted_pass_sends_the_search_below_it() {
        let mut s = Search::new(5.0, 10.0, 20.0, 0.1, false);
        s.record(5.0, true);
        s.record(7.0, true);
        s.record(9.8, false);
        s.record(8.28, false);
        s.record(7.61, false);
        assert_eq!(s.found(), Some(Found::Rate(7.0)));
        // A longer step at 7 broke: 5 is the highest pass left.
        s.refute(7.0);
        assert_eq!(s.highest_pass(), Some(5.0));
        let next = s.next().unwrap();
        assert!(next > 5.0 && next < 7.0, "{next}");
    }

    #[test]
    fn a_refuted_start_with_no_pass_below_steps_down_one_resolution() {
        // A model's start passed, one resolution above broke, and the
        // start's confirmation did not hold.
        let mut s = Search::new(6.0, 10.0, 20.0, 0.1, true);
        s.record(6.0, true);
        s.record(6.6, false);
        assert_eq!(s.found(), Some(Found::Rate(6.0)));
        s.refute(6.0);
        assert_eq!(s.highest_pass(), None);
        let next = s.next().unwrap();
        assert!((next - 6.0 / 1.1).abs() < 1e-9, "{next}");
        // A pass there closes the bracket at the resolution.
        s.record(next, true);
        assert_eq!(s.found(), Some(Found::Rate(next)));
    }

    #[test]
    fn a_warm_start_that_still_holds_costs_two_steps() {
        let (found, tried) = run(6.0, 6.3, true);
        assert_eq!(tried.len(), 2, "{tried:?}");
        assert_eq!(found, Some(Found::Rate(6.0)));
    }

    #[test]
    fn a_near_start_that_breaks_steps_down_one_resolution() {
        let (found, tried) = run(6.0, 5.5, true);
        assert_eq!(tried.len(), 2, "{tried:?}");
        assert!((tried[1] - 6.0 / 1.1).abs() < 1e-9, "{tried:?}");
        assert_eq!(found, Some(Found::Rate(6.0 / 1.1)));
    }

    #[test]
    fn bounds_say_when_the_limit_was_not_found() {
        let (found, tried) = run(5.0, 1000.0, false);
        assert_eq!(found, Some(Found::AtLeast(20.0)));
        assert_eq!(*tried.last().unwrap(), 20.0);
        let (found, tried) = run(5.0, 0.0, false);
        assert_eq!(found, Some(Found::Zero));
        assert_eq!(*tried.last().unwrap(), 0.5);
    }

    fn model(closed: f64, knee: u32, sheds: bool, alone: Option<(f64, f64)>) -> Model {
        Model {
            closed_loop_rate: closed,
            knee,
            sheds,
            max_shed_ratio: 0.05,
            p95_limit: 0.5,
            alone,
        }
    }

    #[test]
    fn the_prediction_for_a_shedding_server_is_erlang_b() {
        // 8 places, 0.5 s each: 16 req/s closed loop, 4% blocking (the
        // margin under 5%) at 8.6.
        let (rate, how) = predict(&model(16.0, 8, true, None));
        assert_eq!(how, "erlang_b");
        assert!(
            (erlang::blocking(8, rate * 0.5) - 0.04).abs() < 1e-9,
            "{rate}"
        );
        assert!((rate - 8.6).abs() < 0.1, "{rate}");
        let (rate, how) = predict(&model(10.0, 4, false, None));
        assert_eq!((rate, how), (7.0, "queue"));
    }

    #[test]
    fn a_shedding_server_with_a_queue_sheds_less_than_erlang_b_says() {
        // The built-in tiny engine: 4 decoded at once, 4 more waiting, 503
        // above 8; 20.6 req/s closed loop, 0.19 s alone. Erlang B for 8
        // places held 8 / 20.6 s each would say 11.7 req/s at 5%; with
        // 4 servers and 4 waiting places (M/M/4/8) it is near 16.
        let m = model(20.6, 8, true, Some((0.19, 0.2)));
        let top = ceiling(&m).unwrap();
        let b = erlang::blocking_with_queue(4, 8, top / (20.6 / 4.0));
        assert!((b - 0.05).abs() < 1e-6, "{b}");
        assert!(top > 15.0 && top < 17.0, "{top}");
        // Every place served (8 x 0.26 s alone at 31 req/s): Erlang B.
        let m = model(31.1, 8, true, Some((0.255, 0.26)));
        let top = ceiling(&m).unwrap();
        assert!((top - erlang::load_for(8, 0.05) * 31.1 / 8.0).abs() < 1e-6);
    }

    #[test]
    fn the_prediction_for_a_queueing_server_is_erlang_c() {
        // 4 servers of 0.163 s (24.6 req/s saturated), p95 limit 0.5 s: the
        // wait 4% exceed (the margin under 5%) may reach 0.32 s, 0.43 s of
        // M/M/4 wait (0.32 / 0.75); Erlang C puts that near 18.6 req/s
        // (C(4, 3.0) = 0.52, e^(-6.0 x 0.43)).
        let m = model(24.6, 8, false, Some((0.163, 0.18)));
        let (rate, how) = predict(&m);
        assert_eq!(how, "erlang_c");
        assert!((rate - 18.6).abs() < 0.1, "{rate}");
        let t = 0.32 / SERVICE_WAIT_FACTOR;
        let tail = erlang::wait_over(4, 24.6 / 4.0, rate, t);
        assert!((tail - 0.04).abs() < 1e-6, "{tail}");
        // A lone request already over the limit: no model, a share.
        let (rate, how) = predict(&model(24.6, 8, false, Some((0.6, 0.7))));
        assert_eq!((rate, how), (24.6 * QUEUE_START, "queue"));
        // A looser limit moves the prediction up, never past saturation.
        let loose = Model {
            p95_limit: 30.0,
            ..m
        };
        let (rate, _) = predict(&loose);
        assert!(rate > 24.0 && rate < 24.6, "{rate}");
        // The search's ceiling: the model at the limit itself, above the start.
        let top = ceiling(&m).unwrap();
        assert!((erlang::wait_over(4, 24.6 / 4.0, top, t) - 0.05).abs() < 1e-6);
        assert!((top - 19.0).abs() < 0.1, "{top}");
        // A shedding server's: Erlang B at 5%, 9.1 for 8 places of 0.5 s.
        let top = ceiling(&model(16.0, 8, true, None)).unwrap();
        assert!((top - 9.08).abs() < 0.05, "{top}");
        assert_eq!(ceiling(&model(16.0, 0, true, None)), None);
    }
}
