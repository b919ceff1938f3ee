//! What an export sink is told: the hooks of a loop's life, every measured
//! request and finished level as they happen, and each round's results.

use std::sync::Arc;

use crate::config::{Schedule, Target, Workload};
use crate::stats::pair_report::PairReport;
use crate::stats::probe::ProbeEvent;
use crate::stats::report::{LevelSummary, SweepReport};
use crate::stats::sample::Sample;

/// One place results are exported to. Every hook but the two rounds has a
/// default that does nothing, so a sink implements only what it keeps.
pub trait Sink: Send + Sync {
    /// A target's loop is (re)configured, before it reaches its server.
    fn target_configured(&self, _target: &Arc<Target>, _schedule: &Schedule) {}
    /// A target's loop is about to reach its server (before its first sweep).
    fn target_announced(&self, _target: &Target) {}
    /// A target's server was reached: what is known before the first sweep.
    fn target_started(&self, _target: &Target) {}
    /// A measured (counted) request ended, of a sweep or a gateway pair,
    /// sent with `concurrency` requests kept in flight (None: an open-loop
    /// step, whose arrivals follow a rate); called on the sweep's task, so
    /// it must not block.
    fn request(
        &self,
        _target: &Target,
        _workload: &Workload,
        _sample: &Sample,
        _concurrency: Option<u32>,
    ) {
    }
    /// A level of a target's sweep finished (before the sweep does).
    fn level(&self, _target: &Target, _workload: &Workload, _level: &LevelSummary) {}
    /// A probe between sweeps of a target finished, was skipped, or probes
    /// paused or resumed; called on the probe's task, so it must not block.
    fn probe(&self, _target: &Target, _event: &ProbeEvent) {}
    /// A target's sweep finished.
    fn sweep(&self, target: &Target, report: &Arc<SweepReport>);
    /// A gateway pair's measurement finished.
    fn pair(&self, report: &PairReport);
    /// A target left the configuration and its loop has ended.
    fn forget_target(&self, _name: &str) {}
    /// A gateway pair left the configuration and its loop has ended.
    fn forget_pair(&self, _name: &str) {}
}
