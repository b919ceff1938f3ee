//! What a target's earlier sweeps saw at each level, pooled into the next
//! sweep's verdicts: a daemon that sees every level every interval need not
//! judge a level on its 8 requests of today alone.
//!
//! What is pooled: per workload and level, the counts of each of the last
//! [`WINDOW_SWEEPS`] sweeps of the target that measured it (ended, ok,
//! shed, failed, in the latency decision, over the p95 limit). What drops
//! it: a sweep whose server told another identity (server kind, version or
//! model list) drops every level's; a sweep whose counts at a level differ
//! from its window beyond chance ([`verdict::CHANGE_ALPHA`], the verdict's
//! `change_seen`) keeps only its own at that level. The pool is part of the
//! loop's saved state (`schedule::state`), so a restart or a reload keeps
//! it. Pure: the loop records each finished sweep.
//!
//! [`verdict::CHANGE_ALPHA`]: crate::stats::verdict::CHANGE_ALPHA

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::stats::decision::{Counts, Decision};
use crate::stats::report::{Setup, SweepReport};

/// Earlier sweeps whose counts a level's verdict pools: with this sweep's,
/// 9 sweeps' worth (72 requests at a level of 8, at least), enough for 2%
/// of errors to pass a 5% limit and 15% to break it in nearly every sweep,
/// while evidence older than 8 intervals is dropped.
pub const WINDOW_SWEEPS: u64 = 8;

/// What identifies the server behind a target: a change drops the pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Identity {
    server: String,
    server_version: String,
    models: Vec<String>,
}

impl Identity {
    fn of(setup: &Setup) -> Self {
        Identity {
            server: setup.server.clone(),
            server_version: setup.server_version.clone(),
            models: setup.models.clone(),
        }
    }
}

/// What earlier sweeps tell a level's verdict.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prior {
    /// Their counts, oldest first.
    pub window: Vec<Counts>,
    /// For each of `window`, how many sweeps of the loop came after it
    /// (0: the last one): what tells recent evidence from older.
    pub ages: Vec<u64>,
    /// The level's last decided verdict (pass or break) on this server, for
    /// a level undecided now; None when it was never decided.
    pub last_decided: Option<Decision>,
}

/// Whether two sweeps' setups tell the same server (kind, version, model
/// list): what the pool, and a warm start, are kept across.
pub fn same_server(a: &Setup, b: &Setup) -> bool {
    Identity::of(a) == Identity::of(b)
}

/// One level's pool.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Level {
    /// (number of the sweep, its counts).
    sweeps: VecDeque<(u64, Counts)>,
    last_decided: Option<Decision>,
}

/// The pool of one target's loop; saved with the loop's state (a map
/// keyed by (workload, level) is written as a list: JSON keys are strings).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Evidence {
    identity: Option<Identity>,
    /// Sweeps recorded so far (each entry carries the number of its sweep).
    sweeps: u64,
    #[serde(with = "as_list")]
    levels: BTreeMap<(String, u32), Level>,
}

/// A map with tuple keys, as a list of (key, value) pairs.
mod as_list {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer, K: Serialize, V: Serialize>(
        map: &BTreeMap<K, V>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(map.iter())
    }

    pub fn deserialize<
        'de,
        D: Deserializer<'de>,
        K: Deserialize<'de> + Ord,
        V: Deserialize<'de>,
    >(
        d: D,
    ) -> Result<BTreeMap<K, V>, D::Error> {
        Ok(Vec::<(K, V)>::deserialize(d)?.into_iter().collect())
    }
}

impl Evidence {
    /// Earlier sweeps pooled at any level (the largest window): 0 for a
    /// new pool.
    pub fn pooled_sweeps(&self) -> usize {
        self.levels
            .values()
            .map(|l| {
                l.sweeps
                    .iter()
                    .filter(|(n, _)| n + WINDOW_SWEEPS > self.sweeps)
                    .count()
            })
            .max()
            .unwrap_or(0)
    }

    /// Whether a pool read from a file holds what a loop could have
    /// recorded: sweep numbers within the count, counts that add up and
    /// stay far from overflow (a state file is a file: anything may be in it).
    pub fn plausible(&self) -> bool {
        const MAX_SWEEPS: u64 = 1 << 40;
        const MAX_ENDED: u64 = 1 << 24;
        let counts_ok = |c: &Counts| {
            c.ended <= MAX_ENDED
                && c.ok + c.shed + c.failed <= c.ended
                && c.timed <= c.ended
                && c.slow <= c.timed
        };
        self.sweeps <= MAX_SWEEPS
            && self.levels.values().all(|l| {
                l.sweeps.len() as u64 <= WINDOW_SWEEPS
                    && l.sweeps
                        .iter()
                        .all(|(n, c)| *n <= self.sweeps && counts_ok(c))
            })
    }

    /// What earlier sweeps saw at `level` of `workload`, for a sweep whose
    /// server told `setup` (nothing when it is another server).
    pub fn prior(&self, setup: &Setup, workload: &str, level: u32) -> Prior {
        if self.identity.as_ref() != Some(&Identity::of(setup)) {
            return Prior::default();
        }
        let Some(l) = self.levels.get(&(workload.to_string(), level)) else {
            return Prior::default();
        };
        let pooled = || {
            l.sweeps
                .iter()
                .filter(|(n, _)| n + WINDOW_SWEEPS > self.sweeps)
        };
        Prior {
            window: pooled().map(|(_, c)| *c).collect(),
            ages: pooled().map(|(n, _)| self.sweeps - n).collect(),
            last_decided: l.last_decided,
        }
    }

    /// Takes in a finished sweep: its levels' counts join their windows.
    pub fn record(&mut self, report: &SweepReport) {
        let identity = Identity::of(&report.setup);
        if self.identity.as_ref() != Some(&identity) {
            self.levels.clear();
            self.identity = Some(identity);
        }
        self.sweeps += 1;
        let now = self.sweeps;
        for w in &report.workloads {
            // The workload's error ratio (or share of slow requests)
            // changed: every level keeps only the sweeps since (this one and
            // `k - 1` before it), so that the next sweep's verdicts read the
            // server as it is now. The workload's errors show a change
            // sweeps before one level's few requests can (a pool of 8 sweeps
            // at 15% held knee 0 for 5 sweeps after the server went back to
            // 2%).
            if let Some(k) = w.capacity.health_changed_sweeps {
                for ((workload, _), level) in &mut self.levels {
                    if *workload == w.workload {
                        level.sweeps.retain(|(n, _)| n + u64::from(k) > now);
                        level.last_decided = None;
                    }
                }
            }
            for l in &w.levels {
                let Some(v) = &l.verdict else { continue };
                let level = self
                    .levels
                    .entry((w.workload.clone(), l.concurrency))
                    .or_default();
                if v.change_seen {
                    *level = Level::default();
                }
                level.sweeps.push_back((now, v.counts));
                if v.decision != Decision::Undecided {
                    level.last_decided = Some(v.decision);
                }
            }
        }
        // Evidence the next sweep would not pool any more is dropped.
        for level in self.levels.values_mut() {
            while level
                .sweeps
                .front()
                .is_some_and(|(n, _)| n + WINDOW_SWEEPS <= now)
            {
                level.sweeps.pop_front();
            }
        }
        self.levels.retain(|_, l| !l.sweeps.is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::decision::Verdict;
    use crate::stats::report::{LevelSummary, WorkloadReport};

    fn report(server: &str, levels: &[(u32, u64, bool)]) -> SweepReport {
        let levels = levels
            .iter()
            .map(|&(c, failed, change_seen)| LevelSummary {
                concurrency: c,
                verdict: Some(Verdict {
                    change_seen,
                    counts: Counts {
                        ended: 8,
                        ok: 8 - failed,
                        failed,
                        timed: 8,
                        ..Counts::default()
                    },
                    ..Verdict::default()
                }),
                ..LevelSummary::default()
            })
            .collect();
        SweepReport {
            setup_error: None,
            server_metrics: Default::default(),
            target: "w1".into(),
            kind: Default::default(),
            model: "m".into(),
            success: true,
            error: None,
            duration_seconds: 1.0,
            finished_at_unix_seconds: 1.0,
            setup: Setup {
                server: server.into(),
                ..Setup::default()
            },
            output_limit: Default::default(),
            workloads: vec![WorkloadReport {
                workload: "chat".into(),
                levels,
                skipped_levels: vec![],
                carried_levels: vec![],
                capacity: crate::stats::knee::capacity(&[], 0.9, None),
            }],
        }
    }

    fn setup(server: &str) -> Setup {
        Setup {
            server: server.into(),
            ..Setup::default()
        }
    }

    #[test]
    fn the_window_holds_the_last_sweeps_of_the_same_server() {
        let mut e = Evidence::default();
        assert!(e.prior(&setup("vllm"), "chat", 1).window.is_empty());
        for i in 0..12u64 {
            e.record(&report("vllm", &[(1, i % 3, false), (2, 0, false)]));
        }
        let w = e.prior(&setup("vllm"), "chat", 1).window;
        assert_eq!(w.len() as u64, WINDOW_SWEEPS);
        // The oldest kept is sweep 5 of 12 (0-based 4): 4 % 3 = 1 failed.
        assert_eq!(w[0].failed, 1);
        assert!(e.prior(&setup("vllm"), "docs", 1).window.is_empty());
        assert!(
            e.prior(&setup("sglang"), "chat", 1).window.is_empty(),
            "another server"
        );
        // A sweep of another server drops everything.
        e.record(&report("sglang", &[(1, 0, false)]));
        assert_eq!(e.prior(&setup("sglang"), "chat", 1).window.len(), 1);
        assert!(e.prior(&setup("sglang"), "chat", 2).window.is_empty());
    }

    #[test]
    fn a_level_not_measured_ages_out_and_a_change_keeps_only_its_sweep() {
        let mut e = Evidence::default();
        e.record(&report("vllm", &[(1, 0, false), (8, 0, false)]));
        for _ in 0..WINDOW_SWEEPS - 1 {
            e.record(&report("vllm", &[(1, 0, false)]));
        }
        assert_eq!(e.prior(&setup("vllm"), "chat", 8).window.len(), 1);
        e.record(&report("vllm", &[(1, 0, false)]));
        assert!(
            e.prior(&setup("vllm"), "chat", 8).window.is_empty(),
            "aged out"
        );
        e.record(&report("vllm", &[(1, 5, true)]));
        let w = e.prior(&setup("vllm"), "chat", 1).window;
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].failed, 5);
    }

    #[test]
    fn a_change_of_the_workloads_errors_keeps_only_the_sweeps_since_at_every_level() {
        let mut e = Evidence::default();
        for _ in 0..6 {
            e.record(&report("vllm", &[(1, 2, false), (8, 2, false)]));
        }
        // Two sweeps back at 0: the second finds the change began at the first.
        e.record(&report("vllm", &[(1, 0, false), (8, 0, false)]));
        assert_eq!(e.prior(&setup("vllm"), "chat", 8).window.len(), 7);
        let mut changed = report("vllm", &[(1, 0, false)]);
        changed.workloads[0].capacity.health_changed_sweeps = Some(2);
        e.record(&changed);
        let one = e.prior(&setup("vllm"), "chat", 1);
        assert_eq!((one.window.len(), one.ages), (2, vec![1, 0]));
        assert!(one.window.iter().all(|c| c.failed == 0));
        assert_eq!(one.last_decided, Some(Decision::Pass));
        // Level 8, not measured by the sweep that saw the change, keeps the
        // sweep since it, and no verdict from before.
        let eight = e.prior(&setup("vllm"), "chat", 8);
        assert_eq!((eight.window.len(), eight.last_decided), (1, None));
        assert_eq!(eight.window[0].failed, 0);
    }
}
