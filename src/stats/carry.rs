//! Levels a sweep did not run, carried from the last sweep of the same
//! server that measured them: the levels a warm start skipped (so that
//! saturation compares neighbours on every sweep, and a warm sweep exports
//! what a full one does), and the levels that could not have their places
//! in the global cap (so that contention for llmprobe's own cap reads as
//! "not measured", never as a lower knee). Each carried level keeps the
//! time it was measured.

use std::collections::BTreeMap;

use crate::stats::knee;
use crate::stats::report::{Capacity, LevelSummary, WorkloadReport};

/// The levels of `earlier` (a workload of an earlier sweep that finished at
/// `earlier_finished`, Unix seconds) that stand in for levels this sweep did
/// not run: those in `skipped`, and, when levels could not be measured from
/// `not_measured_from` on, every level from there up. Levels in `measured`
/// are never carried. Ascending by concurrency.
pub fn carried(
    earlier: &WorkloadReport,
    earlier_finished: f64,
    measured: &[LevelSummary],
    skipped: &[u32],
    not_measured_from: Option<u32>,
) -> Vec<LevelSummary> {
    let mut by_level: BTreeMap<u32, LevelSummary> = BTreeMap::new();
    for l in earlier.levels.iter().chain(&earlier.carried_levels) {
        let c = l.concurrency;
        let wanted = skipped.contains(&c) || not_measured_from.is_some_and(|from| c >= from);
        if !wanted || measured.iter().any(|m| m.concurrency == c) {
            continue;
        }
        let mut l = l.clone();
        if l.measured_at_unix_seconds <= 0.0 {
            l.measured_at_unix_seconds = earlier_finished;
        }
        // A level measured twice (now and carried) in the earlier sweep:
        // the later measurement wins.
        match by_level.get(&c) {
            Some(known) if known.measured_at_unix_seconds >= l.measured_at_unix_seconds => {}
            _ => {
                by_level.insert(c, l);
            }
        }
    }
    by_level.into_values().collect()
}

/// The capacity of a workload from the levels it `measured` and those
/// `carried` for it, with `not_measured` the levels it could not measure
/// (ascending). The knee, recommendation and saturation are judged over both
/// sets; when carried levels stand in for the ones not measured, the
/// capacity says so (`knee_carried_over`); when nothing does, the knee is
/// neither a lower bound nor a break: the levels above were not measured.
pub fn capacity(
    measured: &[LevelSummary],
    carried: &[LevelSummary],
    not_measured: &[u32],
    headroom: f64,
    stopped_because: Option<String>,
) -> Capacity {
    let mut all: Vec<LevelSummary> = measured.iter().chain(carried).cloned().collect();
    all.sort_by_key(|l| l.concurrency);
    let mut c = knee::capacity(&all, headroom, stopped_because);
    let stand_in = not_measured
        .first()
        .is_some_and(|from| carried.iter().any(|l| l.concurrency >= *from));
    c.knee_is_lower_bound &= not_measured.is_empty() || stand_in;
    c.levels_not_measured = not_measured.to_vec();
    c.knee_carried_over = stand_in;
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(concurrency: u32, within_slo: bool, at: f64, throughput: f64) -> LevelSummary {
        LevelSummary {
            concurrency,
            requests: 8,
            planned_requests: 8,
            throughput_tokens_per_second: throughput,
            kept_concurrency: true,
            within_slo,
            measured_at_unix_seconds: at,
            ..LevelSummary::default()
        }
    }

    fn workload(levels: Vec<LevelSummary>, carried: Vec<LevelSummary>) -> WorkloadReport {
        WorkloadReport {
            workload: "chat".into(),
            levels,
            skipped_levels: vec![],
            carried_levels: carried,
            capacity: Capacity::default(),
        }
    }

    #[test]
    fn skipped_levels_are_carried_with_when_they_were_measured() {
        // The full sweep at t=100 (levels written before the field: 0).
        let full = workload(
            vec![
                level(1, true, 0.0, 10.0),
                level(2, true, 0.0, 20.0),
                level(4, true, 0.0, 40.0),
                level(8, true, 0.0, 42.0),
                level(16, false, 0.0, 90.0),
            ],
            vec![],
        );
        let now = [
            level(1, true, 200.0, 10.0),
            level(8, true, 200.0, 42.0),
            level(16, false, 200.0, 90.0),
        ];
        let carried = carried(&full, 100.0, &now, &[2, 4], None);
        let got: Vec<(u32, f64)> = carried
            .iter()
            .map(|l| (l.concurrency, l.measured_at_unix_seconds))
            .collect();
        assert_eq!(got, vec![(2, 100.0), (4, 100.0)]);
        let c = capacity(&now, &carried, &[], 0.9, None);
        assert_eq!(c.knee_concurrency, 8);
        assert_eq!(c.saturation_concurrency, Some(8), "4 -> 8: under 10% more");
        assert!(!c.knee_carried_over);
        assert_eq!(c.knee_measured_at_unix_seconds, Some(200.0));
        // Without them only 1 -> 8 -> 16 is compared: no saturation seen.
        assert_eq!(
            capacity(&now, &[], &[], 0.9, None).saturation_concurrency,
            None
        );
    }

    #[test]
    fn levels_not_measured_keep_the_last_knee_and_say_so() {
        let earlier = workload(
            vec![level(1, true, 300.0, 10.0), level(8, true, 300.0, 80.0)],
            vec![
                level(2, true, 100.0, 20.0),
                level(4, true, 100.0, 40.0),
                level(16, false, 100.0, 90.0),
            ],
        );
        // Level 8 could not have its places: 8 and 16 not measured.
        let now = [level(1, true, 400.0, 10.0)];
        let carried = carried(&earlier, 300.0, &now, &[2, 4], Some(8));
        let got: Vec<u32> = carried.iter().map(|l| l.concurrency).collect();
        assert_eq!(got, vec![2, 4, 8, 16]);
        let c = capacity(&now, &carried, &[8, 16], 0.9, Some("not measured".into()));
        assert_eq!(c.knee_concurrency, 8);
        assert_eq!(c.recommended_max_in_flight, 7);
        assert!(c.knee_carried_over);
        assert_eq!(c.knee_measured_at_unix_seconds, Some(300.0));
        assert!(!c.knee_is_lower_bound, "16 broke, in the earlier sweep");
        assert_eq!(c.levels_not_measured, vec![8, 16]);
        // Nothing to carry (a loop's first sweep): the knee is what was
        // measured, and neither a lower bound nor a break.
        let c = capacity(&now, &[], &[2, 4, 8, 16], 0.9, None);
        assert_eq!(c.knee_concurrency, 1);
        assert!(!c.knee_is_lower_bound);
        assert!(!c.knee_carried_over);
        // Every level measured and none broke: a lower bound, as before.
        assert!(capacity(&now, &[], &[], 0.9, None).knee_is_lower_bound);
    }
}
