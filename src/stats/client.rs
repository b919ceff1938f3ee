//! The client's own limits, told from the server's: how late llmprobe's
//! runtime woke during a level, and whether a level's break is the client's
//! doing. Two cases are: a level that did not keep its requests in flight
//! (the gaps between a request's end and its replacement's send are the
//! client's turnaround, whatever the server does), and a level that broke
//! on latency while the client woke late by a tenth of the SLO's p95 limit
//! or more (its lag alone could push a request over it). A pass stays a
//! pass: a late client only makes a server look slower. Shed and error
//! ratios are the server's answers, whatever the client's lag.

use crate::config::Slo;
use crate::stats::decision::{Basis, Decision};
pub use crate::stats::lag::ClientLag;
use crate::stats::report::LevelSummary;

/// A lag at or over this share of the SLO's p95 latency limit can explain
/// a latency break by itself.
pub const LAG_SHARE_OF_SLO: f64 = 0.1;
/// A level whose break was the client's is run again this many times
/// before it is not measured (a stall passes; a loaded host does not).
pub const CLIENT_RETRIES: u32 = 2;

/// Why `level`'s failure to pass is the client's, not the server's; None
/// when it passed, or broke on the server's account.
pub fn limited(level: &LevelSummary, slo: &Slo) -> Option<String> {
    if !level.kept_concurrency {
        return Some(format!(
            "only {:.1} of {} requests were in flight on average: the client could not keep up",
            level.achieved_concurrency, level.concurrency
        ));
    }
    let verdict = level.verdict.as_ref()?;
    let broke = !level.within_slo && verdict.counted_as == Decision::Break;
    let on_latency = verdict.decided_by == Some(Basis::P95Latency);
    let lag = level.client_lag?;
    let bound = LAG_SHARE_OF_SLO * slo.p95_latency.as_secs_f64();
    (broke && on_latency && lag.p99_seconds >= bound).then(|| {
        format!(
            "the client's runtime woke {:.0} ms late (p99) while it ran, {:.0}% of the p95 limit: \
             its latency break may be the client's own",
            lag.p99_seconds * 1000.0,
            100.0 * lag.p99_seconds / slo.p95_latency.as_secs_f64().max(1e-9)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::decision::Verdict;
    use std::time::Duration;

    fn slo() -> Slo {
        Slo {
            p95_latency: Duration::from_secs(1),
            max_shed_ratio: 0.05,
            max_error_ratio: 0.05,
        }
    }

    fn level(kept: bool, within: bool, by: Basis, lag: f64) -> LevelSummary {
        LevelSummary {
            concurrency: 4,
            achieved_concurrency: if kept { 3.9 } else { 2.5 },
            kept_concurrency: kept,
            within_slo: within,
            verdict: Some(Verdict {
                decision: if within {
                    Decision::Pass
                } else {
                    Decision::Break
                },
                counted_as: if within {
                    Decision::Pass
                } else {
                    Decision::Break
                },
                decided_by: (!within).then_some(by),
                ..Verdict::default()
            }),
            client_lag: Some(ClientLag {
                p99_seconds: lag,
                max_seconds: lag,
                ticks: 100,
            }),
            ..LevelSummary::default()
        }
    }

    #[test]
    fn a_level_short_of_its_concurrency_is_the_clients() {
        let why = limited(&level(false, true, Basis::P95Latency, 0.0), &slo()).unwrap();
        assert!(why.contains("2.5 of 4"), "{why}");
    }

    #[test]
    fn a_latency_break_is_the_clients_only_when_its_lag_could_explain_it() {
        assert!(limited(&level(true, false, Basis::P95Latency, 0.1), &slo()).is_some());
        assert!(limited(&level(true, false, Basis::P95Latency, 0.02), &slo()).is_none());
        // Sheds and errors are the server's answers.
        assert!(limited(&level(true, false, Basis::Shed, 0.5), &slo()).is_none());
        assert!(limited(&level(true, false, Basis::Errors, 0.5), &slo()).is_none());
        // A pass stays a pass.
        assert!(limited(&level(true, true, Basis::P95Latency, 0.5), &slo()).is_none());
    }
}
