//! Whether a target's next sweep climbs from level 1 (full) or starts near
//! the last knee (warm). Full: the first sweep of a target with no saved
//! state, every `full_sweep_every`
//! sweeps, after a sweep that did not complete, and after a sweep whose knee
//! moved. Pure: the loop tells it what each sweep found.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::gentle::Resolution;
use crate::stats::report::SweepReport;
use crate::sweep::ladder::WarmStart;

pub use crate::stats::report::SweepKind as Kind;

/// What a sweep found for one workload: its knee and the lowest level
/// that broke above it (None when every level passed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Found {
    /// The knee (0: even the baseline broke).
    pub knee: u32,
    /// The lowest level run above the knee that broke the SLO.
    pub broken: Option<u32>,
}

/// What a completed sweep found, per workload; None when it did not complete.
pub fn found_in(report: &SweepReport) -> Option<BTreeMap<String, Found>> {
    if !report.success {
        return None;
    }
    let found = report.workloads.iter().map(|w| {
        let knee = w.capacity.knee_concurrency;
        let broken = w
            .levels
            .iter()
            .filter(|l| l.concurrency > knee && !l.within_slo && !l.undecided())
            .map(|l| l.concurrency)
            .min();
        (w.workload.clone(), Found { knee, broken })
    });
    Some(found.collect())
}

/// The plan of the next sweep: its kind and, when warm, where each
/// workload starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Full or warm.
    pub kind: Kind,
    /// Per workload name; empty on a full sweep.
    pub warm: BTreeMap<String, WarmStart>,
}

/// What a planner carries from sweep to sweep (its settings come from the
/// target): saved with the loop's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Saved {
    since_full: u32,
    last: Option<BTreeMap<String, Found>>,
    force_full: bool,
}

/// The planner of one target's loop.
#[derive(Debug, Clone)]
pub struct Planner {
    full_every: u32,
    resolution: Resolution,
    /// Sweeps since the last full one that completed.
    since_full: u32,
    /// What the last completed sweep found; None forces a full sweep.
    last: Option<BTreeMap<String, Found>>,
    /// Set when the last sweep failed or its knee moved.
    force_full: bool,
}

impl Planner {
    /// A planner that climbs in full every `full_every` sweeps (0 or 1:
    /// always), judging knee moves within `resolution`.
    pub fn new(full_every: u32, resolution: Resolution) -> Self {
        Planner {
            full_every,
            resolution,
            since_full: 0,
            last: None,
            force_full: true,
        }
    }

    /// What it carries, to be saved.
    pub fn saved(&self) -> Saved {
        Saved {
            since_full: self.since_full,
            last: self.last.clone(),
            force_full: self.force_full,
        }
    }

    /// Whether a saved planner read from a file is one a loop could have
    /// written (its counter far from overflow).
    pub fn plausible(saved: &Saved) -> bool {
        saved.since_full <= 1 << 20
    }

    /// Takes up where a saved planner stopped.
    pub fn restore(&mut self, saved: Saved) {
        self.since_full = saved.since_full;
        self.last = saved.last;
        self.force_full = saved.force_full;
    }

    /// The next sweep's plan.
    pub fn plan(&self) -> Plan {
        let full = Plan {
            kind: Kind::Full,
            warm: BTreeMap::new(),
        };
        let Some(last) = &self.last else {
            return full;
        };
        if self.force_full || self.full_every <= 1 || self.since_full + 1 >= self.full_every {
            return full;
        }
        let warm = last
            .iter()
            .filter(|(_, f)| f.knee > 0)
            .map(|(w, f)| {
                let seeds = std::iter::once(f.knee).chain(f.broken).collect();
                (
                    w.clone(),
                    WarmStart {
                        skip_through: f.knee / 2,
                        seeds,
                    },
                )
            })
            .collect::<BTreeMap<_, _>>();
        // Every workload's knee was 0: each climbs from level 1, which is a
        // full sweep, and is counted as one (`kind="full"`).
        if warm.is_empty() {
            return full;
        }
        Plan {
            kind: Kind::Warm,
            warm,
        }
    }

    /// What the sweep of `kind` found (`found` is None when it did not
    /// complete: the next sweep is full).
    pub fn record(&mut self, kind: Kind, found: Option<BTreeMap<String, Found>>) {
        let Some(found) = found else {
            self.force_full = true;
            return;
        };
        self.force_full = match (&self.last, kind) {
            (Some(last), Kind::Warm) => self.moved(last, &found),
            _ => false,
        };
        self.since_full = match kind {
            Kind::Full => 0,
            Kind::Warm => self.since_full + 1,
        };
        self.last = Some(found);
    }

    /// Whether any workload's knee moved by more than the resolution (any
    /// change, without refinement), or a workload appeared or went.
    fn moved(&self, last: &BTreeMap<String, Found>, now: &BTreeMap<String, Found>) -> bool {
        if last.len() != now.len() {
            return true;
        }
        last.iter().any(|(w, before)| {
            let Some(after) = now.get(w) else {
                return true;
            };
            let (lo, hi) = (before.knee.min(after.knee), before.knee.max(after.knee));
            let tolerated = match self.resolution.allowed_gap(lo) {
                Some(gap) if lo > 0 => gap,
                _ => 0,
            };
            hi - lo > tolerated
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(knee: u32, broken: Option<u32>) -> Option<BTreeMap<String, Found>> {
        Some(BTreeMap::from([(
            "chat".to_string(),
            Found { knee, broken },
        )]))
    }

    /// The kinds of `n` sweeps on a server whose knee is `knee(i)` at sweep i.
    fn kinds(p: &mut Planner, n: usize, knee: impl Fn(usize) -> u32) -> String {
        (0..n)
            .map(|i| {
                let kind = p.plan().kind;
                p.record(kind, found(knee(i), Some(knee(i) * 2)));
                if kind == Kind::Full {
                    'F'
                } else {
                    'w'
                }
            })
            .collect()
    }

    #[test]
    fn full_every_n_sweeps_on_a_steady_server() {
        let mut p = Planner::new(4, Resolution::Off);
        assert_eq!(kinds(&mut p, 10, |_| 16), "FwwwFwwwFw");
        let mut p = Planner::new(1, Resolution::Off);
        assert_eq!(kinds(&mut p, 4, |_| 16), "FFFF");
        let mut p = Planner::new(0, Resolution::Off);
        assert_eq!(kinds(&mut p, 3, |_| 16), "FFF");
    }

    #[test]
    fn a_moved_knee_makes_the_next_sweep_full() {
        let mut p = Planner::new(10, Resolution::Off);
        // Knee 16, then 8 from sweep 3 on: sweep 3 (warm) finds it moved.
        assert_eq!(kinds(&mut p, 6, |i| if i < 3 { 16 } else { 8 }), "FwwwFw");
    }

    #[test]
    fn a_move_within_the_resolution_is_noise() {
        let mut p = Planner::new(10, Resolution::Count(1));
        assert_eq!(kinds(&mut p, 5, |i| 12 + (i as u32 % 2)), "Fwwww");
        let mut p = Planner::new(10, Resolution::Count(1));
        assert_eq!(kinds(&mut p, 4, |i| if i == 1 { 15 } else { 12 }), "FwFw");
    }

    #[test]
    fn a_failed_sweep_makes_the_next_full() {
        let mut p = Planner::new(10, Resolution::Off);
        p.record(Kind::Full, found(16, None));
        assert_eq!(p.plan().kind, Kind::Warm);
        p.record(Kind::Warm, None);
        assert_eq!(p.plan().kind, Kind::Full);
        p.record(Kind::Full, found(16, None));
        assert_eq!(p.plan().kind, Kind::Warm);
    }

    #[test]
    fn the_warm_plan_starts_from_half_the_knee_with_seeds() {
        let mut p = Planner::new(10, Resolution::Count(1));
        assert_eq!(p.plan().kind, Kind::Full, "the first sweep of a loop");
        p.record(Kind::Full, found(13, Some(14)));
        let plan = p.plan();
        assert_eq!(plan.kind, Kind::Warm);
        assert_eq!(
            plan.warm["chat"],
            WarmStart {
                skip_through: 6,
                seeds: vec![13, 14]
            }
        );
        // A workload whose baseline broke starts from level 1 anyway: with
        // no other workload, that is a full sweep, and says so.
        p.record(Kind::Full, found(0, Some(1)));
        let plan = p.plan();
        assert!(plan.warm.is_empty());
        assert_eq!(plan.kind, Kind::Full);
    }

    #[test]
    fn workloads_appearing_count_as_a_move() {
        let mut p = Planner::new(10, Resolution::Off);
        p.record(Kind::Full, found(8, None));
        let mut two = found(8, None).unwrap();
        two.insert(
            "docs".into(),
            Found {
                knee: 4,
                broken: Some(8),
            },
        );
        p.record(Kind::Warm, Some(two));
        assert_eq!(p.plan().kind, Kind::Full);
    }
}
