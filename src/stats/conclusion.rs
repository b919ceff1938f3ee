//! A workload's conclusion: from the levels its climb measured (and those
//! it could not), with what the loop's last good sweep measured standing in
//! for the levels this one did not run, to its capacity: why the climb
//! stopped, the carried levels, the knee, the recommendation and the limit
//! that binds. Pure: the climb (`sweep`) measures, this concludes.

use crate::config::Target;
use crate::stats::carry;
use crate::stats::decision::{Basis, Counts, Decision, Verdict};
use crate::stats::level;
use crate::stats::limit;
use crate::stats::report::{Capacity, LevelSummary, WorkloadReport};
use crate::stats::sample::Outcome;

/// What the last good sweep of the loop measured for one workload.
#[derive(Debug, Clone, Copy)]
pub struct Earlier<'a> {
    /// Its report of the workload.
    pub workload: &'a WorkloadReport,
    /// When that sweep finished, Unix seconds.
    pub finished_at: f64,
}

/// What a workload's climb ended with.
#[derive(Debug, Clone, Default)]
pub struct Climb {
    /// The levels it measured, in the order run.
    pub levels: Vec<LevelSummary>,
    /// Configured levels a warm start did not run.
    pub skipped: Vec<u32>,
    /// Levels it was to run but could not measure (places, or the client).
    pub not_measured: Vec<u32>,
    /// Why a level was not measured or completed, when one was not.
    pub why_not_measured: Option<String>,
    /// Set when the `not_measured` levels are the client's doing: why.
    pub client: Option<String>,
}

/// A workload's levels, carried levels and capacity.
#[derive(Debug, Clone)]
pub struct Concluded {
    /// The levels measured, by concurrency.
    pub levels: Vec<LevelSummary>,
    /// The levels an earlier sweep measured, standing in.
    pub carried_levels: Vec<LevelSummary>,
    /// The knee, recommendation and limit.
    pub capacity: Capacity,
}

/// Concludes `climb` for `target`: `earlier` is the loop's last good sweep
/// of the workload, `window` the counts earlier sweeps saw at a level
/// (each with the sweeps since it, `evidence::Prior::ages`),
/// `now` the time (Unix seconds) ages are told from.
pub fn conclude(
    climb: Climb,
    target: &Target,
    earlier: Option<Earlier<'_>>,
    window: &dyn Fn(u32) -> Vec<(u64, Counts)>,
    now: f64,
) -> Concluded {
    let Climb {
        mut levels,
        skipped,
        not_measured: starved,
        why_not_measured: not_measured,
        client: client_limited,
    } = climb;
    levels.sort_by_key(|l| l.concurrency);
    doubt_stand_ins(&mut levels);
    limit::doubt_pooled_breaks(&mut levels, window, &target.slo, target.verdict_confidence);
    // Why climbing stopped: the lowest level that broke the SLO or could not
    // keep its concurrency, else what kept a level from being measured.
    let stopped_because = levels
        .iter()
        .find(|l| l.stops_knee())
        .map(|l| {
            if !l.within_slo {
                slo_breach(l, target)
            } else {
                format!(
                    "concurrency {}: only {:.1} requests were in flight on average \
                     (under {:.0}%): the client could not keep up, so the level does not count",
                    l.concurrency,
                    l.achieved_concurrency,
                    level::KEPT_CONCURRENCY * 100.0
                )
            }
        })
        .or(not_measured);
    let stopped_because = match (stopped_because, target.capped_by_max_concurrency) {
        (None, Some(max)) => Some(format!(
            "the target's max_concurrency ({max}) was reached: higher configured levels are not sent to it"
        )),
        (why, _) => why,
    };
    // What the loop last measured stands in for the levels this sweep did
    // not run: those a warm start skipped, and those it could not have the
    // places for.
    let carried_levels = earlier.map_or_else(Vec::new, |e| {
        carry::carried(
            e.workload,
            e.finished_at,
            &levels,
            &skipped,
            starved.first().copied(),
        )
    });
    let stopped_because = match (stopped_because, starved.first()) {
        (Some(why), Some(from)) if carried_levels.iter().any(|l| l.concurrency >= *from) => {
            let oldest = carried_levels
                .iter()
                .filter(|l| l.concurrency >= *from)
                .map(|l| l.measured_at_unix_seconds)
                .fold(f64::INFINITY, f64::min);
            Some(format!(
                "{why}; the knee and recommendation keep what an earlier sweep measured from \
                 concurrency {from} up ({:.0}s ago at most)",
                (now - oldest).max(0.0)
            ))
        }
        (why, _) => why,
    };
    let mut capacity = carry::capacity(
        &levels,
        &carried_levels,
        &starved,
        target.headroom,
        stopped_because,
    );
    if !capacity.levels_not_measured.is_empty() {
        capacity.not_measured_client = client_limited;
    }
    limit::settle(
        &mut capacity,
        &levels,
        &carried_levels,
        window,
        &target.slo,
        target.verdict_confidence,
    );
    Concluded {
        levels,
        carried_levels,
        capacity,
    }
}

/// Drops the stand-in pass of an undecided level over the error limit
/// when the first level above it that broke broke on errors (`levels`
/// sorted by concurrency): errors observed over the limit there and shown
/// over it higher up are what a server failing at every load gives, and
/// an earlier pass of that level (often a lucky stretch: at 10% of errors,
/// 8 failures of 160 pass a 5% limit) is no evidence against it. The level
/// then neither raises nor lowers the knee. A break on sheds or latency
/// above keeps the stand-in: errors that stay while the server sheds are
/// no sign that it fails at every load.
pub fn doubt_stand_ins(levels: &mut [LevelSummary]) {
    let errors = |v: &Verdict| matches!(v.decided_by, Some(Basis::Errors) | Some(Basis::NoSuccess));
    let mut broke_on_errors = false;
    for l in levels.iter_mut().rev() {
        let Some(v) = l.verdict.as_mut() else {
            continue;
        };
        if l.kept_concurrency && v.counted_as == Decision::Break {
            broke_on_errors = errors(v);
        } else if broke_on_errors
            && v.decision == Decision::Undecided
            && v.counted_as == Decision::Pass
            && errors(v)
        {
            v.counted_as = Decision::Undecided;
            l.within_slo = false;
        }
    }
}

/// Why level `l` broke the SLO, in words.
pub fn slo_breach(l: &LevelSummary, target: &Target) -> String {
    let slo = &target.slo;
    let mut why = Vec::new();
    // A level stopped early cancelled requests that might have succeeded:
    // only a level that ran in full can say that none did.
    if l.stopped_early.is_none() && l.count(Outcome::Ok) == 0 {
        why.push("no request succeeded".to_string());
    }
    match l.decision_latency_seconds.p95 {
        Some(p) if p > slo.p95_latency.as_secs_f64() => why.push(format!(
            "p95 latency {:.3}s over {} (failed requests included)",
            p,
            humantime::format_duration(slo.p95_latency)
        )),
        _ => {}
    }
    if l.shed_ratio > slo.max_shed_ratio {
        why.push(format!(
            "shed ratio {:.3} over {}",
            l.shed_ratio, slo.max_shed_ratio
        ));
    }
    if l.error_ratio > slo.max_error_ratio {
        why.push(format!(
            "error ratio {:.3} over {}",
            l.error_ratio, slo.max_error_ratio
        ));
    }
    if let Some(e) = &l.stopped_early {
        why.push(format!(
            "{} certain after {} of {} requests",
            e.breach.as_str().replace('_', " "),
            l.requests,
            l.planned_requests
        ));
    }
    if let Some(v) = &l.verdict {
        why.push(evidence_text(v));
    }
    format!("concurrency {}: {}", l.concurrency, why.join(", "))
}

/// What a verdict that did not pass rests on, in words.
fn evidence_text(v: &Verdict) -> String {
    let by = v.decided_by.map_or("", |b| b.as_str()).replace('_', " ");
    let pooled = match v.pooled_sweeps {
        0 => String::new(),
        1 => " (1 earlier sweep pooled)".to_string(),
        n => format!(" ({n} earlier sweeps pooled)"),
    };
    let confidence = v.confidence * 100.0;
    match v.decision {
        Decision::Undecided => format!(
            "undecided: {by} over its limit but not at {confidence}% confidence after {} requests{pooled} \
             (verdict_ceiling reached; counted as {}: {})",
            v.requests,
            v.counted_as.as_str(),
            if v.counted_as == Decision::Undecided {
                "never decided here, it neither raises nor lowers the knee"
            } else {
                "as last decided on this server"
            }
        ),
        _ => format!("{by} decided at {confidence}% confidence on {} requests{pooled}", v.requests),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A level judged `decision` on `by`, counted as `counted_as`.
    fn level(c: u32, decision: Decision, counted_as: Decision, by: Option<Basis>) -> LevelSummary {
        LevelSummary {
            concurrency: c,
            kept_concurrency: true,
            within_slo: counted_as == Decision::Pass,
            verdict: Some(Verdict {
                decision,
                counted_as,
                decided_by: by,
                ..Verdict::default()
            }),
            ..LevelSummary::default()
        }
    }

    fn counted(levels: &[LevelSummary]) -> Vec<Decision> {
        levels
            .iter()
            .map(|l| l.verdict.as_ref().unwrap().counted_as)
            .collect()
    }

    #[test]
    fn an_errors_break_above_drops_the_stand_in_pass_of_levels_over_on_errors() {
        use Decision::{Break, Pass, Undecided};
        let errors = Some(Basis::Errors);
        // At 10% of errors: 1 and 2 over the limit on errors, passed once by
        // luck, 4 broke on errors: the knee is not 2.
        let mut levels = vec![
            level(1, Undecided, Pass, errors),
            level(2, Undecided, Pass, errors),
            level(4, Break, Break, errors),
        ];
        doubt_stand_ins(&mut levels);
        assert_eq!(counted(&levels), [Undecided, Undecided, Break]);
        assert!(!levels[0].within_slo);
        assert_eq!(
            crate::stats::knee::capacity(&levels, 0.9, None).knee_concurrency,
            0
        );
        // A decided pass stays, and so does a stand-in under a break on sheds
        // (a server within the error limit at 4%, shedding at 16), or one
        // undecided on latency.
        let mut levels = vec![
            level(1, Pass, Pass, None),
            level(2, Undecided, Pass, Some(Basis::P95Latency)),
            level(4, Undecided, Pass, errors),
            level(8, Break, Break, errors),
        ];
        doubt_stand_ins(&mut levels);
        assert_eq!(counted(&levels), [Pass, Pass, Undecided, Break]);
        let mut levels = vec![
            level(8, Undecided, Pass, errors),
            level(16, Break, Break, Some(Basis::Shed)),
        ];
        doubt_stand_ins(&mut levels);
        assert_eq!(counted(&levels), [Pass, Break]);
    }
}
