//! Level summaries -> capacity: the knee, the recommended `max_in_flight`,
//! and where throughput stopped growing.

use crate::stats::report::{Capacity, LevelRole, LevelSummary};
use crate::stats::sample::Outcome;

/// Gain below which a level is said to add no throughput.
pub const SATURATION_GAIN: f64 = 0.10;

/// Capacity of a workload from its levels, measured in increasing order.
/// The knee is the highest level within the SLO, and that kept its
/// concurrency, with every lower level the same; it is a lower bound when no
/// level broke the SLO (climbing ended for another reason, or at the top); the recommendation is floor(knee x headroom), at least 1
/// when there is a knee at all (recommending 0 would stop all traffic).
pub fn capacity(
    levels: &[LevelSummary],
    headroom: f64,
    stopped_because: Option<String>,
) -> Capacity {
    // A level that did not keep its concurrency measured a smaller one: it
    // neither counts nor lets a later level count. An undecided level (no
    // evidence either way, nothing decided before) is stepped over: it
    // neither is the knee nor ends the run, and the knee says so.
    let run: Vec<&LevelSummary> = levels.iter().take_while(|l| !l.stops_knee()).collect();
    let knee_level = run.iter().rev().find(|l| !l.undecided()).copied();
    let knee = knee_level.map_or(0, |l| l.concurrency);
    let knee_undecided = run.iter().any(|l| l.undecided());
    // Throughput is compared between configured levels that ran in full: a
    // level stopped early has a partial throughput, and a refinement probe
    // adds too little concurrency for a 10% gain to be expected.
    let comparable: Vec<&LevelSummary> = levels
        .iter()
        .filter(|l| l.role == LevelRole::Configured && l.stopped_early.is_none())
        .collect();
    let saturation = comparable
        .windows(2)
        .find(|w| {
            w[1].throughput_tokens_per_second
                < w[0].throughput_tokens_per_second * (1.0 + SATURATION_GAIN)
        })
        .map(|w| w[1].concurrency);
    let recommended = if knee == 0 {
        0
    } else {
        ((knee as f64 * headroom).floor() as u32).max(1)
    };
    // Completed requests over the same wall time as the throughput.
    let completed = knee_level.map_or(0, |l| l.count(Outcome::Ok));
    let requests_per_second = match knee_level {
        Some(l) if l.wall_seconds > 0.0 => completed as f64 / l.wall_seconds,
        _ => 0.0,
    };
    Capacity {
        limit: None,
        sustained: None,
        knee_concurrency: knee,
        throughput_tokens_per_second: knee_level.map_or(0.0, |l| l.throughput_tokens_per_second),
        requests_per_second,
        requests_per_second_samples: completed,
        recommended_max_in_flight: recommended,
        saturation_concurrency: saturation,
        saturated_before_knee: saturation.is_some_and(|s| knee > 0 && s <= knee),
        stopped_because,
        knee_is_lower_bound: levels.iter().all(|l| l.within_slo || l.undecided()),
        knee_undecided,
        levels_not_measured: Vec::new(),
        not_measured_client: None,
        knee_carried_over: false,
        knee_measured_at_unix_seconds: knee_level.map(|l| l.measured_at_unix_seconds),
        health_changed_sweeps: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::decision::Decision;
    use std::collections::BTreeMap;

    fn level(concurrency: u32, throughput: f64, within_slo: bool) -> LevelSummary {
        LevelSummary {
            server: None,
            client_lag: None,
            concurrency,
            role: Default::default(),
            requests: 8,
            planned_requests: 8,
            stopped_early: None,
            outcomes: BTreeMap::new(),
            shed_ratio: 0.0,
            error_ratio: 0.0,
            ttft_seconds: Default::default(),
            answer_ttft_seconds: Default::default(),
            reasoning_tokens: 0,
            reasoning_token_source: "chunks",
            requests_without_answer: 0,
            reasoning_fields: Default::default(),
            latency_seconds: Default::default(),
            inter_token_latency_seconds: Default::default(),
            generation_tokens_per_second: Default::default(),
            throughput_tokens_per_second: throughput,
            output_tokens: 0,
            prompt_tokens: 0,
            cached_prompt_tokens: 0,
            wall_seconds: 1.0,
            token_source: "usage",
            tokens_per_content_chunk: None,
            streams_without_finish_reason: 0,
            error_examples: Default::default(),
            decision_latency_seconds: Default::default(),
            achieved_concurrency: f64::from(concurrency),
            littles_law_concurrency: f64::from(concurrency),
            kept_concurrency: true,
            new_connections: 0,
            connect_seconds: Default::default(),
            usage_disagreements: 0,
            measured_at_unix_seconds: 0.0,
            verdict: None,
            within_slo,
        }
    }

    /// `l` judged undecided, never decided before (nothing pooled).
    fn undecided(mut l: LevelSummary) -> LevelSummary {
        l.within_slo = false;
        l.verdict = Some(crate::stats::decision::Verdict {
            decision: Decision::Undecided,
            counted_as: Decision::Undecided,
            ..Default::default()
        });
        l
    }

    #[test]
    fn an_undecided_level_neither_lowers_nor_raises_the_knee() {
        // Level 1 undecided (2 errors of 32 at 2%, nothing pooled): the
        // knee is not 0, it steps over level 1, and says so.
        let l = [
            undecided(level(1, 10.0, true)),
            level(2, 20.0, true),
            level(4, 40.0, true),
            level(8, 80.0, true),
            level(16, 82.0, false),
        ];
        let c = capacity(&l, 0.9, None);
        assert_eq!(c.knee_concurrency, 8);
        assert!(c.knee_undecided);
        assert!(!c.knee_is_lower_bound, "16 broke");
        // Undecided just below the break: the knee is the last level that
        // passed, not the undecided one.
        let l = [
            level(1, 10.0, true),
            level(2, 20.0, true),
            undecided(level(4, 40.0, true)),
            level(8, 80.0, false),
        ];
        let c = capacity(&l, 0.9, None);
        assert_eq!((c.knee_concurrency, c.knee_undecided), (2, true));
        // Above the break it does not matter: the knee is decided.
        let l = [
            level(1, 10.0, true),
            level(2, 20.0, false),
            undecided(level(4, 40.0, true)),
        ];
        let c = capacity(&l, 0.9, None);
        assert_eq!((c.knee_concurrency, c.knee_undecided), (1, false));
        // A level counted as it was last decided is decided.
        let mut last = undecided(level(2, 20.0, true));
        if let Some(v) = &mut last.verdict {
            v.counted_as = Decision::Break;
        }
        let c = capacity(&[level(1, 10.0, true), last], 0.9, None);
        assert_eq!((c.knee_concurrency, c.knee_undecided), (1, false));
    }

    #[test]
    fn knee_is_last_level_of_the_unbroken_run() {
        let l = [
            level(1, 40.0, true),
            level(2, 78.0, true),
            level(4, 150.0, true),
            level(8, 160.0, false),
        ];
        let c = capacity(&l, 0.9, None);
        assert_eq!(c.knee_concurrency, 4);
        assert_eq!(c.throughput_tokens_per_second, 150.0);
        assert_eq!(c.recommended_max_in_flight, 3);
        assert_eq!(
            c.saturation_concurrency,
            Some(8),
            "160 / 150 is under a 10% gain"
        );
        assert!(!c.saturated_before_knee);
    }

    #[test]
    fn request_rate_at_the_knee_counts_completed_requests_over_its_wall_time() {
        let mut l = [
            level(1, 40.0, true),
            level(2, 78.0, true),
            level(4, 150.0, false),
        ];
        l[1].outcomes.insert(Outcome::Ok.as_str(), 6);
        l[1].outcomes.insert(Outcome::Shed.as_str(), 2);
        l[1].wall_seconds = 4.0;
        l[2].outcomes.insert(Outcome::Ok.as_str(), 20);
        let c = capacity(&l, 0.9, None);
        assert_eq!(c.knee_concurrency, 2);
        assert_eq!(
            c.requests_per_second, 1.5,
            "6 completed in 4 s; shed ones do not count"
        );
        assert_eq!(c.requests_per_second_samples, 6);
        let none = capacity(&[level(1, 40.0, false)], 0.9, None);
        assert_eq!(
            (none.requests_per_second, none.requests_per_second_samples),
            (0.0, 0)
        );
    }

    #[test]
    fn a_good_level_after_a_bad_one_does_not_count() {
        let l = [
            level(1, 40.0, true),
            level(2, 80.0, false),
            level(4, 150.0, true),
        ];
        assert_eq!(capacity(&l, 0.9, None).knee_concurrency, 1);
    }

    #[test]
    fn no_knee_when_level_one_fails() {
        let c = capacity(&[level(1, 40.0, false)], 0.9, Some("p95".into()));
        assert_eq!(c.knee_concurrency, 0);
        assert_eq!(c.recommended_max_in_flight, 0);
        assert_eq!(c.throughput_tokens_per_second, 0.0);
        assert_eq!(c.stopped_because.as_deref(), Some("p95"));
    }

    #[test]
    fn recommendation_floors_but_keeps_one() {
        assert_eq!(
            capacity(&[level(1, 1.0, true)], 0.9, None).recommended_max_in_flight,
            1
        );
        let l = [
            level(1, 10.0, true),
            level(2, 20.0, true),
            level(4, 40.0, true),
            level(8, 80.0, true),
            level(16, 160.0, true),
        ];
        assert_eq!(capacity(&l, 0.9, None).recommended_max_in_flight, 14);
        assert_eq!(capacity(&l, 0.9, None).saturation_concurrency, None);
        assert!(capacity(&l, 0.9, None).knee_is_lower_bound);
    }

    #[test]
    fn a_level_that_did_not_keep_its_concurrency_does_not_count() {
        let mut l = [
            level(1, 40.0, true),
            level(2, 80.0, true),
            level(4, 150.0, true),
        ];
        l[2].kept_concurrency = false;
        let c = capacity(&l, 0.9, Some("concurrency 4: achieved 2.0".into()));
        assert_eq!(c.knee_concurrency, 2);
        assert!(c.knee_is_lower_bound, "nothing broke the SLO");
        l[2].within_slo = false;
        assert!(!capacity(&l, 0.9, None).knee_is_lower_bound);
    }

    #[test]
    fn saturation_ignores_refinement_probes_and_levels_stopped_early() {
        let mut probe = level(12, 165.0, true);
        probe.role = LevelRole::Refinement;
        let mut stopped = level(16, 20.0, false);
        stopped.stopped_early = Some(crate::stats::report::EarlyStop {
            breach: crate::stats::decision::Breach::Shed,
            saved_requests: 30,
        });
        let l = [level(4, 80.0, true), level(8, 160.0, true), probe, stopped];
        let c = capacity(&l, 0.9, None);
        assert_eq!(c.knee_concurrency, 12, "a refinement probe is a knee");
        assert_eq!(c.recommended_max_in_flight, 10);
        assert_eq!(c.throughput_tokens_per_second, 165.0);
        assert_eq!(
            c.saturation_concurrency, None,
            "8 -> 12 is no doubling, 16 partial"
        );
    }

    #[test]
    fn saturation_before_knee_is_reported() {
        let l = [
            level(1, 40.0, true),
            level(2, 42.0, true),
            level(4, 43.0, true),
        ];
        let c = capacity(&l, 0.9, None);
        assert_eq!(c.saturation_concurrency, Some(2));
        assert!(c.saturated_before_knee);
    }
}
