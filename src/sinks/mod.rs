//! Where the results of a finished round go: each export sink in a file of
//! its own, listed once in [`Sinks::standard`]. The schedule hands every
//! sink the same plain results (targets, sweep and pair reports) and knows
//! nothing of what a sink does with them; adding a sink is its file and one
//! line in that list.

pub mod index_page;
pub mod log;
pub mod prometheus;
mod sink;

pub use sink::Sink;

use std::sync::Arc;

use crate::config::{Schedule, Target};
use crate::metrics::Metrics;
use crate::stats::report::{PairReport, SweepReport};

/// Every sink, called in order.
#[derive(Clone)]
pub struct Sinks(Arc<[Arc<dyn Sink>]>);

impl Sinks {
    /// The daemon's sinks: log lines, `/metrics`, and the index page.
    pub fn standard(metrics: &Arc<Metrics>, statuses: &index_page::Statuses) -> Self {
        Sinks::of(vec![
            Arc::new(log::Log),
            Arc::new(prometheus::Prometheus(metrics.clone())),
            Arc::new(index_page::IndexPage(statuses.clone())),
        ])
    }

    /// These sinks, in this order.
    pub fn of(sinks: Vec<Arc<dyn Sink>>) -> Self {
        Sinks(sinks.into())
    }

    fn each(&self, f: impl Fn(&dyn Sink)) {
        for s in self.0.iter() {
            f(s.as_ref());
        }
    }

    /// See [`Sink::target_configured`].
    pub fn target_configured(&self, target: &Arc<Target>, schedule: &Schedule) {
        self.each(|s| s.target_configured(target, schedule));
    }

    /// See [`Sink::target_announced`].
    pub fn target_announced(&self, target: &Target) {
        self.each(|s| s.target_announced(target));
    }

    /// See [`Sink::target_started`].
    pub fn target_started(&self, target: &Target) {
        self.each(|s| s.target_started(target));
    }

    /// See [`Sink::sweep`].
    pub fn sweep(&self, target: &Target, report: &Arc<SweepReport>) {
        self.each(|s| s.sweep(target, report));
    }

    /// See [`Sink::pair`].
    pub fn pair(&self, report: &PairReport) {
        self.each(|s| s.pair(report));
    }

    /// See [`Sink::forget_target`].
    pub fn forget_target(&self, name: &str) {
        self.each(|s| s.forget_target(name));
    }

    /// See [`Sink::forget_pair`].
    pub fn forget_pair(&self, name: &str) {
        self.each(|s| s.forget_pair(name));
    }
}
