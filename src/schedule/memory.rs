//! What a target's loop carries from one sweep to the next: where the next
//! sweep starts (full or warm, [`warm_start`]), the latest sweep (its
//! output-limit field), the latest completed one (the levels a sweep does
//! not run), and the evidence its levels' verdicts pool ([`Evidence`]). A
//! new loop (first start, restart, or a reload that restarted it) starts
//! from what the loop it replaces left (`schedule::handoff`) or the target's
//! saved state ([`Saved`], kept on disk by [`super::state`]), else with an
//! empty memory. The daemon's loop, and benchmarks and tests that drive
//! sweeps the way it does, go through it.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::Target;
use crate::schedule::warm_start::{self, Kind, Plan, Planner};
use crate::stats::evidence::Evidence;
use crate::stats::report::SweepReport;
use crate::sweep::{self, Prior, SweepEnv};

/// The memory of one target's loop.
#[derive(Debug, Clone)]
pub struct Memory {
    planner: Planner,
    /// The plan of the sweep under way (what [`Memory::prior`] lends).
    plan: Option<Plan>,
    latest: Option<Arc<SweepReport>>,
    /// The latest sweep that completed: its levels stand in for those a
    /// sweep does not run.
    good: Option<Arc<SweepReport>>,
    evidence: Evidence,
}

/// What a memory holds between sweeps, as saved. The sweep reports carry
/// everything a later finding adds (a sustained rate, when measured, is a
/// field of the workloads' capacity): saved with them, it survives too.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Saved {
    /// The warm-start planner's counters and last findings.
    pub planner: warm_start::Saved,
    /// The pooled verdict evidence.
    pub evidence: Evidence,
    /// The latest sweep (output-limit field).
    pub latest: Option<SweepReport>,
    /// The latest completed sweep, when it is not `latest` (carried levels).
    pub good: Option<SweepReport>,
}

impl Saved {
    /// Whether what was read from a file is something a loop could have
    /// saved; the state is ignored otherwise.
    pub fn plausible(&self) -> bool {
        let report_ok = |r: &Option<SweepReport>| {
            r.as_ref()
                .map_or(true, |r| r.output_limit.kept_sweeps <= 1 << 20)
        };
        Planner::plausible(&self.planner)
            && self.evidence.plausible()
            && report_ok(&self.latest)
            && report_ok(&self.good)
    }
}

impl Memory {
    /// What the memory holds, to be saved.
    pub fn saved(&self) -> Saved {
        let same = match (&self.latest, &self.good) {
            (Some(l), Some(g)) => Arc::ptr_eq(l, g),
            _ => false,
        };
        Saved {
            planner: self.planner.saved(),
            evidence: self.evidence.clone(),
            latest: self.latest.as_deref().cloned(),
            good: if same {
                None
            } else {
                self.good.as_deref().cloned()
            },
        }
    }

    /// A memory for `target`'s loop that takes up where `saved` stopped.
    pub fn restored(target: &Target, saved: Saved) -> Self {
        let mut m = Memory::new(target);
        m.planner.restore(saved.planner);
        m.evidence = saved.evidence;
        let latest = saved.latest.map(Arc::new);
        m.good = match saved.good {
            Some(g) => Some(Arc::new(g)),
            None => latest.clone().filter(|l| l.success),
        };
        m.latest = latest;
        m
    }

    /// Earlier sweeps pooled at any level: 0 for a new memory.
    pub fn pooled_sweeps(&self) -> usize {
        self.evidence.pooled_sweeps()
    }

    /// An empty memory for `target`'s loop.
    pub fn new(target: &Target) -> Self {
        Memory {
            planner: Planner::new(target.full_sweep_every, target.refine_resolution),
            plan: None,
            latest: None,
            good: None,
            evidence: Evidence::default(),
        }
    }

    /// What the next sweep starts from: its plan (full or warm), the latest
    /// sweep, the pooled evidence.
    pub fn prior(&mut self) -> Prior<'_> {
        let plan = self.plan.insert(self.planner.plan());
        Prior {
            warm: (plan.kind == Kind::Warm).then_some(&plan.warm),
            latest: self.latest.as_deref(),
            good: self.good.as_deref(),
            evidence: Some(&self.evidence),
        }
    }

    /// Takes in the sweep that [`Memory::prior`] started.
    pub fn record(&mut self, report: Arc<SweepReport>) {
        self.plan = None;
        // A sweep a setup mistake stopped measured nothing, and its server
        // answered as no configured one would (a model list refused, say):
        // once fixed, the loop goes on from what it knew before.
        if report.setup_error.is_some() {
            return;
        }
        self.planner
            .record(report.kind, warm_start::found_in(&report));
        self.evidence.record(&report);
        if report.success {
            self.good = Some(report.clone());
        }
        self.latest = Some(report);
    }

    /// The next sweep of `target` at `base_url`, as the daemon's loop runs
    /// it (without the wait between sweeps), remembered.
    pub async fn sweep(
        &mut self,
        env: &SweepEnv,
        target: &Arc<Target>,
        base_url: &str,
        time_limit: Duration,
    ) -> SweepReport {
        let report = sweep::run_after(env, target, base_url, time_limit, self.prior()).await;
        let report = Arc::new(report);
        self.record(report.clone());
        Arc::unwrap_or_clone(report)
    }
}
