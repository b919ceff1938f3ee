//! `sustained:` of a target: how the open-loop search for the highest
//! arrival rate within the SLO runs (docs/measuring.md, "The sustained
//! rate"). Plain data: written ([`SustainedFile`], merged key by key as
//! `slo`) and resolved ([`SustainedSearch`]).

use std::time::Duration;

use serde::Deserialize;

/// How arrivals of an open-loop step are spread in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arrivals {
    /// Exponential gaps (a Poisson process): how independent users arrive.
    #[default]
    Poisson,
    /// Equal gaps: the kindest traffic a rate can come as.
    Constant,
}

impl Arrivals {
    /// The name used in configuration and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Arrivals::Poisson => "poisson",
            Arrivals::Constant => "constant",
        }
    }
}

/// The daemon searches the sustained rate on every this many sweeps of a
/// target, the first included: gentle on production (a search costs up to
/// three ladders), while a figure is never older than a few intervals.
pub const DEFAULT_EVERY: u32 = 4;
/// The search stops when the passing and breaking rates are this close.
pub const DEFAULT_RESOLUTION: f64 = 0.1;
/// Longest a search may run in one sweep.
pub const DEFAULT_MAX_DURATION: Duration = Duration::from_secs(180);

/// `sustained:` as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SustainedFile {
    /// Search on every this many sweeps of the daemon (the first included);
    /// 0: never, `llmprobe sweep` included.
    pub every: Option<u32>,
    /// `poisson` (default) or `constant`.
    pub arrivals: Option<Arrivals>,
    /// Relative gap between the highest passing and the lowest breaking
    /// rate at which the search stops (0.1: 10%).
    pub resolution: Option<f64>,
    /// Most requests one search sends (default: 3 times the requests the
    /// workload's closed-loop levels sent in the same sweep, and at least
    /// what its first step and that step's confirmation take).
    pub max_requests: Option<u32>,
    /// Longest one search runs.
    #[serde(default, with = "humantime_serde")]
    pub max_duration: Option<Duration>,
    /// Most requests the client keeps in flight during a step; an arrival
    /// that finds them all taken is not sent (default: 4 times the knee, at
    /// least 16).
    pub max_in_flight: Option<u32>,
    /// Seed of the arrival schedules (default: a new one per step).
    pub seed: Option<u64>,
    /// The dispatch lag (actual minus scheduled send) whose p99 a step may
    /// reach, at least (a quarter of the mean gap between arrivals when
    /// that is longer); beyond it the step is not measured (client).
    #[serde(default, with = "humantime_serde")]
    pub max_dispatch_lag: Option<Duration>,
}

/// Default floor of the dispatch-lag bound: a few scheduler ticks of a
/// busy machine, small beside any LLM latency an SLO holds.
pub const DEFAULT_MAX_DISPATCH_LAG: Duration = Duration::from_millis(25);

/// The open-loop search, resolved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SustainedSearch {
    /// Search on every this many sweeps (0: never).
    pub every: u32,
    /// How arrivals are spread.
    pub arrivals: Arrivals,
    /// Stop when the highest passing rate is within this share of the lowest breaking one.
    pub resolution: f64,
    /// Most requests per search (None: from the ladder's).
    pub max_requests: Option<u32>,
    /// Longest one search runs.
    pub max_duration: Duration,
    /// The client's ceiling on requests in flight (None: from the knee).
    pub max_in_flight: Option<u32>,
    /// Seed of the arrival schedules (None: random).
    pub seed: Option<u64>,
    /// Floor of the dispatch-lag bound.
    pub max_dispatch_lag: Duration,
}

impl Default for SustainedSearch {
    fn default() -> Self {
        SustainedSearch::from_file(SustainedFile::default())
    }
}

impl SustainedSearch {
    /// `sustained:` with the default of each key it does not set.
    pub fn from_file(f: SustainedFile) -> Self {
        SustainedSearch {
            every: f.every.unwrap_or(DEFAULT_EVERY),
            arrivals: f.arrivals.unwrap_or_default(),
            resolution: f.resolution.unwrap_or(DEFAULT_RESOLUTION),
            max_requests: f.max_requests,
            max_duration: f.max_duration.unwrap_or(DEFAULT_MAX_DURATION),
            max_in_flight: f.max_in_flight,
            seed: f.seed,
            max_dispatch_lag: f.max_dispatch_lag.unwrap_or(DEFAULT_MAX_DISPATCH_LAG),
        }
    }

    /// The p99 dispatch lag, seconds, a step at `rate` may reach.
    pub fn lag_bound(&self, rate: f64) -> f64 {
        (0.25 / rate.max(1e-9)).max(self.max_dispatch_lag.as_secs_f64())
    }

    /// Whether searches run at all.
    pub fn enabled(&self) -> bool {
        self.every > 0
    }

    /// Every problem with the values, as (key suffix, message).
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut bad = Vec::new();
        if !(self.resolution > 0.0 && self.resolution <= 1.0) {
            bad.push((
                ".resolution",
                format!("must be in (0, 1], got {}", self.resolution),
            ));
        }
        if self.max_requests == Some(0) {
            bad.push((".max_requests", "must be at least 1".to_string()));
        }
        if self.max_in_flight == Some(0) {
            bad.push((".max_in_flight", "must be at least 1".to_string()));
        }
        if self.max_duration < Duration::from_secs(1) {
            bad.push((".max_duration", "must be at least 1s".to_string()));
        }
        bad
    }
}

/// Merged key by key, as `slo`.
pub fn merge(near: Option<&SustainedFile>, far: Option<&SustainedFile>) -> Option<SustainedFile> {
    match (near, far) {
        (Some(n), Some(f)) => Some(SustainedFile {
            every: n.every.or(f.every),
            arrivals: n.arrivals.or(f.arrivals),
            resolution: n.resolution.or(f.resolution),
            max_requests: n.max_requests.or(f.max_requests),
            max_duration: n.max_duration.or(f.max_duration),
            max_in_flight: n.max_in_flight.or(f.max_in_flight),
            seed: n.seed.or(f.seed),
            max_dispatch_lag: n.max_dispatch_lag.or(f.max_dispatch_lag),
        }),
        (n, f) => n.or(f).cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_checks() {
        let d = SustainedSearch::default();
        assert_eq!(d.every, 4);
        assert!(d.enabled());
        assert_eq!(d.arrivals, Arrivals::Poisson);
        assert!(d.problems().is_empty());
        let bad = SustainedSearch {
            resolution: 0.0,
            max_requests: Some(0),
            max_duration: Duration::from_millis(10),
            ..d
        };
        let keys: Vec<&str> = bad.problems().iter().map(|p| p.0).collect();
        assert_eq!(keys, [".resolution", ".max_requests", ".max_duration"]);
    }

    #[test]
    fn merges_key_by_key() {
        let near = SustainedFile {
            every: Some(0),
            ..Default::default()
        };
        let far = SustainedFile {
            every: Some(2),
            seed: Some(5),
            ..Default::default()
        };
        let m = merge(Some(&near), Some(&far)).unwrap();
        assert_eq!((m.every, m.seed), (Some(0), Some(5)));
    }
}
