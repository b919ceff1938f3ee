//! What a target's loop carries from one sweep to the next: where the next
//! sweep starts (full or warm, [`warm_start`]), the latest sweep (its
//! output-limit field), the latest completed one (the levels a sweep does
//! not run), and the evidence its levels' verdicts pool ([`Evidence`]). A new loop (first start, or a reload that changed the
//! target) starts with an empty memory. The daemon's loop, and benchmarks
//! and tests that drive sweeps the way it does, go through it.

use std::sync::Arc;
use std::time::Duration;

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

impl Memory {
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
        self.planner
            .record(report.kind, warm_start::found_in(&report));
        self.evidence.record(&report);
        self.plan = None;
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
