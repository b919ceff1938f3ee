//! Which rate the open-loop search tries next: bracket from a start (a
//! prediction, or the last sustained rate), then bisect geometrically until
//! the highest passing and the lowest breaking rate are within the
//! resolution. Pure: the sweep runs each step and records how it went.

use crate::stats::erlang;

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
/// shedding) binds: queueing delay grows steeply near saturation, so the
/// p95 usually holds up to about this share.
pub const QUEUE_START: f64 = 0.7;

/// Where the search starts, from the closed-loop ladder: the Erlang B rate
/// for `places` (the knee) and the service time at the knee when shedding
/// binds, else a share of the closed-loop rate. (rate, how it was chosen).
pub fn predict(
    closed_loop_rate: f64,
    knee: u32,
    sheds: bool,
    max_shed_ratio: f64,
) -> (f64, &'static str) {
    if sheds && knee > 0 && closed_loop_rate > 0.0 {
        // Little's law at the knee: the mean time a request holds a place.
        let hold = f64::from(knee) / closed_loop_rate;
        let load = erlang::load_for(knee, max_shed_ratio.max(1e-3));
        (load / hold, "erlang_b")
    } else {
        (closed_loop_rate * QUEUE_START, "queue")
    }
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
    /// A warm start's first step up is one resolution, not a full widening.
    warm: bool,
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
    /// `max` (the highest rate worth trying); `warm`
    /// when `start` is the last sustained rate (checked with one step above
    /// it before widening).
    pub fn new(start: f64, closed_loop_rate: f64, max: f64, resolution: f64, warm: bool) -> Self {
        let min = closed_loop_rate * MIN_OF_CLOSED_LOOP;
        Search {
            resolution,
            min,
            max,
            passes: Vec::new(),
            lo: None,
            hi: None,
            next: Some(start.clamp(min, max)),
            warm,
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
    /// pass at or above it count as breaks, and the search goes on below.
    pub fn refute(&mut self, rate: f64) {
        self.passes.retain(|p| *p < rate);
        self.lo = self.passes.iter().copied().reduce(f64::max);
        self.hi = Some(self.hi.map_or(rate, |h| h.min(rate)));
        self.plan_next();
    }

    fn plan_next(&mut self) {
        let up = if self.warm {
            1.0 + self.resolution
        } else {
            WIDEN
        };
        self.warm = false;
        self.next = match (self.lo, self.hi) {
            (Some(lo), Some(hi)) if hi <= lo * (1.0 + self.resolution) => None,
            (Some(lo), Some(hi)) => Some((lo * hi).sqrt()),
            (Some(lo), None) if lo >= self.max => None,
            (Some(lo), None) => Some((lo * up).min(self.max)),
            (None, Some(hi)) if hi <= self.min => None,
            (None, Some(hi)) => Some((hi / WIDEN).max(self.min)),
            (None, None) => self.next,
        };
    }

    /// What the steps so far found.
    pub fn found(&self) -> Option<Found> {
        match (self.lo, self.hi) {
            (Some(lo), Some(hi)) if hi <= lo * (1.0 + self.resolution) => Some(Found::Rate(lo)),
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
    fn a_warm_start_that_still_holds_costs_two_steps() {
        let (found, tried) = run(6.0, 6.3, true);
        assert_eq!(tried.len(), 2, "{tried:?}");
        assert_eq!(found, Some(Found::Rate(6.0)));
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

    #[test]
    fn the_prediction_for_a_shedding_server_is_erlang_b() {
        // 8 places, 0.5 s each: 16 req/s closed loop, 5% blocking at 9.1.
        let (rate, how) = predict(16.0, 8, true, 0.05);
        assert_eq!(how, "erlang_b");
        assert!((rate - 9.08).abs() < 0.05, "{rate}");
        let (rate, how) = predict(10.0, 4, false, 0.05);
        assert_eq!((rate, how), (7.0, "queue"));
    }
}
