//! The limit that binds at the knee: what broke at the first level above
//! it, from the client's view (shed, rate limited, errors, latency),
//! refined by what the server's own metrics said during that level
//! (queue, KV cache, compute). The rule is docs/measuring.md's.

use crate::config::Slo;
use crate::stats::report::{Basis, Breach, LevelSummary, Limit};
use crate::stats::sample::Outcome;

/// KV-cache usage at or above which the cache is full.
pub const KV_CACHE_FULL: f64 = 0.9;

/// Mean requests waiting in the engine above which requests queued there
/// (below it, a request only waits for the step it joins).
pub const QUEUED: f64 = 0.5;

/// The limit of a workload whose knee is `knee`, from its `levels` sorted
/// by concurrency: the first level above the knee that broke the SLO says it.
pub fn of(levels: &[LevelSummary], knee: u32, slo: &Slo) -> Limit {
    let Some(broken) = levels
        .iter()
        .filter(|l| l.concurrency > knee)
        .find(|l| !l.within_slo)
    else {
        return Limit::NotReached;
    };
    at(broken, slo)
}

/// Which share broke a level, from the client's view.
fn broke_on(l: &LevelSummary, slo: &Slo) -> Breach {
    // The verdict's test says what broke: an observed ratio over its limit
    // without evidence (1 error of 8 beside a latency break) did not.
    if let Some(by) = l.verdict.as_ref().and_then(|v| v.decided_by) {
        return match by {
            Basis::Shed => Breach::Shed,
            Basis::Errors | Basis::NoSuccess => Breach::Errors,
            Basis::P95Latency => Breach::Latency,
        };
    }
    let early = l.stopped_early.map(|e| e.breach);
    let none_succeeded = l.stopped_early.is_none() && l.count(Outcome::Ok) == 0;
    if l.error_ratio > slo.max_error_ratio || early == Some(Breach::Errors) || none_succeeded {
        Breach::Errors
    } else if l.shed_ratio > slo.max_shed_ratio || early == Some(Breach::Shed) {
        Breach::Shed
    } else {
        Breach::Latency
    }
}

/// What broke at one level outside the SLO.
pub fn at(l: &LevelSummary, slo: &Slo) -> Limit {
    let broke = broke_on(l, slo);
    if broke == Breach::Errors {
        return Limit::Errors;
    }
    let server = l.server.as_ref().filter(|s| s.readings > 0);
    let kv_full = server.is_some_and(|s| {
        s.kv_cache_usage_max.is_some_and(|u| u >= KV_CACHE_FULL)
            || s.preemptions.is_some_and(|p| p > 0.0)
    });
    if broke == Breach::Shed {
        let rate_limited = l.count(Outcome::RateLimited);
        return if rate_limited * 2 > l.shed() {
            Limit::RateLimited
        } else if kv_full {
            Limit::KvCache
        } else {
            Limit::Shed
        };
    }
    if kv_full {
        return Limit::KvCache;
    }
    let Some(s) = server.filter(|s| s.running.is_some() || s.waiting.is_some()) else {
        return Limit::Latency;
    };
    let queued = s.waiting.is_some_and(|w| w.mean >= QUEUED);
    // The engine ran fewer than the level kept in flight (half a request
    // of slack: a request between two of its steps is in neither count).
    let capped = s
        .running
        .map_or(true, |r| r.max + 0.5 < f64::from(l.concurrency));
    if queued && capped {
        Limit::Queue
    } else {
        Limit::Compute
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::stats::server::{GaugeStat, ServerSignals};

    fn slo() -> Slo {
        Slo {
            p95_latency: Duration::from_secs(1),
            max_shed_ratio: 0.05,
            max_error_ratio: 0.05,
        }
    }

    fn level(c: u32, within: bool, server: Option<ServerSignals>) -> LevelSummary {
        let mut outcomes = BTreeMap::new();
        outcomes.insert(Outcome::Ok.as_str(), 10);
        LevelSummary {
            concurrency: c,
            requests: 10,
            outcomes,
            within_slo: within,
            server,
            ..LevelSummary::default()
        }
    }

    fn signals(running: f64, waiting: f64, kv: Option<f64>) -> ServerSignals {
        ServerSignals {
            readings: 4,
            running: Some(GaugeStat {
                max: running,
                mean: running,
            }),
            waiting: Some(GaugeStat {
                max: waiting,
                mean: waiting,
            }),
            kv_cache_usage_max: kv,
            ..ServerSignals::default()
        }
    }

    #[test]
    fn the_server_says_why_latency_broke() {
        let judged = |s: Option<ServerSignals>| {
            of(&[level(4, true, None), level(8, false, s)], 4, &slo()).as_str()
        };
        assert_eq!(judged(Some(signals(4.0, 4.0, Some(0.3)))), "queue");
        assert_eq!(judged(Some(signals(4.0, 4.0, Some(0.95)))), "kv_cache");
        assert_eq!(judged(Some(signals(8.0, 0.1, None))), "compute");
        // Requests waited, yet the engine ran every one of them.
        assert_eq!(judged(Some(signals(8.0, 2.0, None))), "compute");
        assert_eq!(judged(None), "latency");
        assert_eq!(judged(Some(ServerSignals::default())), "latency");
        let mut preempted = signals(8.0, 0.0, None);
        preempted.preemptions = Some(3.0);
        assert_eq!(judged(Some(preempted)), "kv_cache");
    }

    #[test]
    fn the_client_ratios_come_first() {
        let mut shed = level(8, false, Some(signals(4.0, 4.0, None)));
        shed.outcomes.insert(Outcome::Shed.as_str(), 5);
        shed.shed_ratio = 0.33;
        assert_eq!(at(&shed, &slo()), Limit::Shed);
        shed.server = Some(signals(4.0, 4.0, Some(0.97)));
        assert_eq!(at(&shed, &slo()), Limit::KvCache);
        shed.outcomes.insert(Outcome::RateLimited.as_str(), 6);
        assert_eq!(at(&shed, &slo()), Limit::RateLimited);
        shed.error_ratio = 0.2;
        assert_eq!(at(&shed, &slo()), Limit::Errors);
        let mut none_ok = level(8, false, None);
        none_ok.outcomes.clear();
        assert_eq!(at(&none_ok, &slo()), Limit::Errors);
    }

    #[test]
    fn the_verdicts_test_says_what_broke_not_an_observed_ratio() {
        use crate::stats::report::Verdict;
        // Latency broke with evidence; 1 error of 8 is over 5% observed
        // but no evidence: the server's queue binds, not errors.
        let mut l = level(8, false, Some(signals(4.0, 4.0, None)));
        l.error_ratio = 0.125;
        l.verdict = Some(Verdict {
            decided_by: Some(Basis::P95Latency),
            ..Verdict::default()
        });
        assert_eq!(at(&l, &slo()), Limit::Queue);
        // Undecided on errors at the ceiling and counted as a break.
        l.verdict = Some(Verdict {
            decided_by: Some(Basis::Errors),
            ..Verdict::default()
        });
        assert_eq!(at(&l, &slo()), Limit::Errors);
        l.verdict = Some(Verdict {
            decided_by: Some(Basis::Shed),
            ..Verdict::default()
        });
        assert_eq!(at(&l, &slo()), Limit::Shed);
        // Without a verdict (an older report), the observed ratios decide.
        l.verdict = None;
        assert_eq!(at(&l, &slo()), Limit::Errors);
    }

    #[test]
    fn nothing_broke_above_the_knee() {
        assert_eq!(of(&[level(4, true, None)], 4, &slo()), Limit::NotReached);
        assert_eq!(of(&[], 0, &slo()), Limit::NotReached);
        assert_eq!(
            of(&[level(1, false, None)], 0, &slo()),
            Limit::Latency,
            "a knee of 0 is still explained"
        );
    }
}
