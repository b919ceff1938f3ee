//! Which level a workload's sweep runs next: the configured levels climbed
//! from the lowest until one breaks the SLO (on a warm start, those between
//! the baseline and half the last knee skipped, and measured after all if
//! the first level above them breaks), then the refinement probes between
//! the highest passed and the lowest broken level. Pure: the sweep runs each
//! level and reports its verdict back.

use std::collections::BTreeMap;

use crate::config::gentle::Resolution;
use crate::sweep::refine::Bisection;

pub use crate::stats::report::LevelRole as Role;

/// Where a warm start begins, from what the last sweep found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WarmStart {
    /// Configured levels above the first and up to this one are skipped
    /// (half the last knee).
    pub skip_through: u32,
    /// Levels the refinement tries first (the last knee and the level that
    /// broke above it).
    pub seeds: Vec<u32>,
}

/// The plan of one workload's levels, driven by their verdicts.
#[derive(Debug, Clone)]
pub struct Ladder {
    /// Configured levels not yet run or skipped, ascending.
    climb: Vec<u32>,
    /// Skipped configured levels, measured after all when needed.
    skipped: Vec<u32>,
    /// Verdict of every level run so far.
    verdicts: BTreeMap<u32, bool>,
    resolution: Resolution,
    seeds: Vec<u32>,
    refine: Option<Bisection>,
    done: bool,
}

impl Ladder {
    /// A ladder over `levels` (ascending, as configured), refined to
    /// `resolution`, starting warm when `warm` is given.
    pub fn new(levels: &[u32], resolution: Resolution, warm: Option<&WarmStart>) -> Self {
        let mut levels = levels.to_vec();
        levels.sort_unstable();
        levels.dedup();
        let (mut climb, mut skipped) = (Vec::new(), Vec::new());
        for (i, &c) in levels.iter().enumerate() {
            // The first level (the single-request baseline) is a result of
            // its own: never skipped.
            match warm {
                Some(w) if i > 0 && c <= w.skip_through => skipped.push(c),
                _ => climb.push(c),
            }
        }
        climb.reverse();
        Ladder {
            climb,
            skipped,
            verdicts: BTreeMap::new(),
            resolution,
            seeds: warm.map(|w| w.seeds.clone()).unwrap_or_default(),
            refine: None,
            done: false,
        }
    }

    /// The configured levels a warm start left out (and did not need after all).
    pub fn skipped(&self) -> &[u32] {
        &self.skipped
    }

    /// The configured levels the climb has not run yet (ascending).
    pub fn climb_left(&self) -> Vec<u32> {
        self.climb.iter().rev().copied().collect()
    }

    /// The next level to run and why, or None when the workload is done.
    pub fn next(&self) -> Option<(u32, Role)> {
        if self.done {
            return None;
        }
        if let Some(b) = &self.refine {
            return b.next().map(|c| (c, Role::Refinement));
        }
        self.climb.last().map(|&c| (c, Role::Configured))
    }

    /// The verdict of the level just run (`passed`: it counts toward the knee).
    pub fn record(&mut self, level: u32, passed: bool) {
        self.verdicts.insert(level, passed);
        if let Some(b) = &mut self.refine {
            b.record(level, passed);
            return;
        }
        if self.climb.last() == Some(&level) {
            self.climb.pop();
        }
        if !passed {
            // Stop climbing. Skipped levels below the break are measured
            // after all (lowest first): the knee may lie among them.
            let floor = self.highest_passed_below(level);
            let below: Vec<u32> = self
                .skipped
                .iter()
                .copied()
                .filter(|c| *c < level && floor.map_or(true, |p| *c > p))
                .collect();
            self.skipped.retain(|c| !below.contains(c));
            self.climb = below.into_iter().rev().collect();
        }
        if self.climb.is_empty() {
            self.end_climb();
        }
    }

    fn highest_passed_below(&self, level: u32) -> Option<u32> {
        self.verdicts
            .range(..level)
            .rev()
            .find(|(_, ok)| **ok)
            .map(|(c, _)| *c)
    }

    /// The climb is over: refine between the lowest broken level and the
    /// highest passed one below it, if both exist and refinement is on.
    fn end_climb(&mut self) {
        let broken = self.verdicts.iter().find(|(_, ok)| !**ok).map(|(c, _)| *c);
        match broken.and_then(|b| Some((self.highest_passed_below(b)?, b))) {
            Some((p, b)) if self.resolution != Resolution::Off => {
                self.refine = Some(Bisection::new(p, b, self.resolution, &self.seeds));
            }
            _ => self.done = true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a ladder against a server whose true knee is `knee`; returns the
    /// levels run in order, with their role.
    fn run(levels: &[u32], r: Resolution, warm: Option<&WarmStart>, knee: u32) -> Vec<(u32, Role)> {
        let mut l = Ladder::new(levels, r, warm);
        let mut ran = Vec::new();
        while let Some((c, role)) = l.next() {
            assert!(ran.len() < 40, "the ladder does not end: {ran:?}");
            ran.push((c, role));
            l.record(c, c <= knee);
        }
        ran
    }

    fn levels(ran: &[(u32, Role)]) -> Vec<u32> {
        ran.iter().map(|(c, _)| *c).collect()
    }

    const POW2: [u32; 6] = [1, 2, 4, 8, 16, 32];

    #[test]
    fn a_full_climb_stops_at_the_first_break() {
        let ran = run(&POW2, Resolution::Off, None, 12);
        assert_eq!(levels(&ran), vec![1, 2, 4, 8, 16]);
        assert!(ran.iter().all(|(_, r)| *r == Role::Configured));
        assert_eq!(
            levels(&run(&POW2, Resolution::Off, None, 100)),
            POW2.to_vec()
        );
        assert_eq!(levels(&run(&POW2, Resolution::Count(1), None, 0)), vec![1]);
    }

    #[test]
    fn refinement_follows_the_break() {
        let ran = run(&POW2, Resolution::Count(1), None, 12);
        assert_eq!(levels(&ran), vec![1, 2, 4, 8, 16, 12, 14, 13]);
        assert_eq!(ran[5].1, Role::Refinement);
        // No refinement above the last level when every level passes.
        assert_eq!(
            levels(&run(&POW2, Resolution::Count(1), None, 100)),
            POW2.to_vec()
        );
    }

    #[test]
    fn a_warm_start_skips_up_to_half_the_last_knee() {
        let warm = WarmStart {
            skip_through: 8,
            seeds: vec![],
        };
        let ran = run(&POW2, Resolution::Off, Some(&warm), 16);
        assert_eq!(levels(&ran), vec![1, 16, 32]);
        let mut l = Ladder::new(&POW2, Resolution::Off, Some(&warm));
        assert_eq!(l.skipped(), &[2, 4, 8]);
        l.record(1, true);
        assert_eq!(l.next(), Some((16, Role::Configured)));
    }

    #[test]
    fn a_warm_start_that_breaks_early_measures_the_skipped_levels() {
        let warm = WarmStart {
            skip_through: 8,
            seeds: vec![],
        };
        // The knee fell from 16 to 4: 16 breaks, then 2, 4 pass and 8 breaks.
        let ran = run(&POW2, Resolution::Off, Some(&warm), 4);
        assert_eq!(levels(&ran), vec![1, 16, 2, 4, 8]);
        // With refinement: then between 4 and 8.
        let ran = run(&POW2, Resolution::Count(1), Some(&warm), 5);
        assert_eq!(levels(&ran), vec![1, 16, 2, 4, 8, 6, 5]);
        // Level 1 broke: nothing else runs.
        assert_eq!(
            levels(&run(&POW2, Resolution::Count(1), Some(&warm), 0)),
            vec![1]
        );
    }

    #[test]
    fn a_warm_start_confirms_a_steady_refined_knee_with_its_seeds() {
        let warm = WarmStart {
            skip_through: 6,
            seeds: vec![13, 14],
        };
        let ran = run(&POW2, Resolution::Count(1), Some(&warm), 13);
        assert_eq!(levels(&ran), vec![1, 8, 16, 13, 14]);
    }

    #[test]
    fn every_run_is_bounded_and_finds_the_knee() {
        // For every true knee, full or warm from any last knee: the levels
        // run are the configured ones plus at most MAX_PROBES refinements,
        // and the bracket holds the knee within the resolution.
        for knee in 0..40u32 {
            for last in [None, Some(1u32), Some(4), Some(13), Some(32)] {
                let warm = last.map(|k| WarmStart {
                    skip_through: k / 2,
                    seeds: vec![k, k + 1],
                });
                let ran = run(&POW2, Resolution::Count(1), warm.as_ref(), knee);
                let refinements = ran.iter().filter(|(_, r)| *r == Role::Refinement).count();
                assert!(refinements <= crate::sweep::refine::MAX_PROBES);
                let configured: Vec<u32> = ran
                    .iter()
                    .filter(|(_, r)| *r == Role::Configured)
                    .map(|(c, _)| *c)
                    .collect();
                assert!(configured.iter().all(|c| POW2.contains(c)));
                // The knee the levels show: highest passed with all below passing.
                let mut sorted = levels(&ran);
                sorted.sort_unstable();
                let found = sorted
                    .iter()
                    .take_while(|c| **c <= knee)
                    .last()
                    .copied()
                    .unwrap_or(0);
                assert_eq!(found, knee.min(32), "knee {knee}, last {last:?}: {ran:?}");
            }
        }
    }
}
