//! Refinement between two levels: bisection from a level that passed to the
//! next one that broke, until the gap is within the resolution or the fixed
//! number of probes is spent. Pure: the sweep runs each probe as a full
//! level and reports its verdict back.

use crate::config::gentle::Resolution;

/// Most refinement probes in one workload of one sweep: the `concurrency`
/// label of a sweep's results holds at most the configured levels plus
/// this many. Four halvings narrow a doubling (8 -> 16) to a sixteenth of
/// it, finer than a 10% resolution at any level.
pub const MAX_PROBES: usize = 4;

/// The bisection between a passed and a broken level.
#[derive(Debug, Clone)]
pub struct Bisection {
    passed: u32,
    broken: u32,
    resolution: Resolution,
    probes: usize,
    /// Levels to try first where they lie inside the gap (the knee and the
    /// broken level found by the last sweep), so that a steady server is
    /// confirmed in two probes.
    seeds: Vec<u32>,
}

impl Bisection {
    /// Bisection between `passed` and `broken` (above it), trying `seeds`
    /// first where they lie strictly between them.
    pub fn new(passed: u32, broken: u32, resolution: Resolution, seeds: &[u32]) -> Self {
        Bisection {
            passed,
            broken,
            resolution,
            probes: 0,
            seeds: seeds.to_vec(),
        }
    }

    /// The highest level known to pass and the lowest known to break.
    pub fn bracket(&self) -> (u32, u32) {
        (self.passed, self.broken)
    }

    /// Whether the gap is already within the resolution (always, when off).
    pub fn resolved(&self) -> bool {
        match self.resolution.allowed_gap(self.passed) {
            None => true,
            Some(gap) => self.broken.saturating_sub(self.passed) <= gap,
        }
    }

    /// The next level to probe, or None when done.
    pub fn next(&self) -> Option<u32> {
        if self.probes >= MAX_PROBES || self.resolved() {
            return None;
        }
        let inside = |c: &u32| *c > self.passed && *c < self.broken;
        // Not resolved means a gap of at least 2, so the midpoint is inside.
        Some(
            self.seeds
                .iter()
                .copied()
                .find(inside)
                .unwrap_or(self.passed + (self.broken - self.passed) / 2),
        )
    }

    /// The verdict of a probe at `level`.
    pub fn record(&mut self, level: u32, passed: bool) {
        self.probes += 1;
        self.seeds.retain(|s| *s != level);
        if level <= self.passed || level >= self.broken {
            return;
        }
        if passed {
            self.passed = level;
        } else {
            self.broken = level;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a bisection against a server whose true knee is `knee` (every
    /// level up to it passes); returns the probes and the final bracket.
    fn run(
        passed: u32,
        broken: u32,
        r: Resolution,
        seeds: &[u32],
        knee: u32,
    ) -> (Vec<u32>, (u32, u32)) {
        let mut b = Bisection::new(passed, broken, r, seeds);
        let mut probes = Vec::new();
        while let Some(c) = b.next() {
            probes.push(c);
            b.record(c, c <= knee);
        }
        (probes, b.bracket())
    }

    #[test]
    fn halves_the_gap_down_to_one() {
        // 8 passed, 16 broke, true knee 13: 12 passes, 14 breaks, 13 passes.
        let (probes, bracket) = run(8, 16, Resolution::Count(1), &[], 13);
        assert_eq!(probes, vec![12, 14, 13]);
        assert_eq!(bracket, (13, 14));
        // True knee 9: 12, 10 break, 9 passes.
        assert_eq!(run(8, 16, Resolution::Count(1), &[], 9).1, (9, 10));
    }

    #[test]
    fn a_share_stops_sooner_on_large_levels() {
        // 96 passes, 112 breaks (gap 16 over 10% of 96), 104 breaks: a gap
        // of 8 is within 9 (10% of 96), so the knee is known as 96.
        let (probes, bracket) = run(64, 128, Resolution::Share(0.1), &[], 100);
        assert_eq!(probes, vec![96, 112, 104]);
        assert_eq!(bracket, (96, 104));
        // The same server with a count of 1 goes on to the exact knee.
        let (probes, bracket) = run(64, 128, Resolution::Count(1), &[], 100);
        assert_eq!(probes, vec![96, 112, 104, 100]);
        assert_eq!(bracket, (100, 104), "the fixed number of probes ends it");
    }

    #[test]
    fn never_more_than_the_fixed_number_of_probes() {
        let (probes, bracket) = run(512, 1024, Resolution::Count(1), &[], 700);
        assert_eq!(probes.len(), MAX_PROBES);
        assert!(bracket.0 <= 700 && bracket.1 > 700, "{bracket:?}");
        for r in [Resolution::Count(1), Resolution::Share(0.01)] {
            for knee in 1..200 {
                let (probes, (lo, hi)) = run(1, 256, r, &[], knee);
                assert!(probes.len() <= MAX_PROBES);
                assert!(probes.iter().all(|p| *p > 1 && *p < 256));
                assert!(
                    lo <= knee.min(255) && hi > knee.min(255),
                    "{knee}: {lo}..{hi}"
                );
            }
        }
    }

    #[test]
    fn off_and_adjacent_levels_probe_nothing() {
        assert!(run(8, 16, Resolution::Off, &[], 12).0.is_empty());
        assert!(run(8, 9, Resolution::Count(1), &[], 8).0.is_empty());
        assert!(run(16, 20, Resolution::Share(0.25), &[], 18).0.is_empty());
    }

    #[test]
    fn seeds_confirm_a_steady_knee_in_two_probes() {
        // Last sweep: knee 13, 14 broke. Same server: 13 passes, 14 breaks.
        let (probes, bracket) = run(8, 16, Resolution::Count(1), &[13, 14], 13);
        assert_eq!(probes, vec![13, 14]);
        assert_eq!(bracket, (13, 14));
        // The server got slower: 13 breaks, then bisection goes on below it.
        let (probes, bracket) = run(8, 16, Resolution::Count(1), &[13, 14], 10);
        assert_eq!(probes, vec![13, 10, 11]);
        assert_eq!(bracket, (10, 11));
        // Seeds outside the gap are ignored.
        assert_eq!(
            run(8, 16, Resolution::Count(1), &[4, 32], 13).0,
            vec![12, 14, 13]
        );
    }

    #[test]
    fn the_same_verdicts_give_the_same_probes() {
        // Levels repeat from sweep to sweep, so the label's values do too.
        let a = run(16, 32, Resolution::Share(0.1), &[], 21).0;
        let b = run(16, 32, Resolution::Share(0.1), &[], 21).0;
        assert_eq!(a, b);
        // 24 breaks, 20 passes (gap 4 over 2), 22 breaks: gap 2 is 10% of 20.
        assert_eq!(a, vec![24, 20, 22]);
    }
}
