//! The sweeps' observer in the daemon's loops: every measured request and
//! finished level forwarded to the sinks (the sweep layer knows no sinks),
//! and the places requests take in the global cap counted in the daemon's
//! own state.

use std::sync::Arc;

use crate::config::{Target, Workload};
use crate::metrics::Metrics;
use crate::schedule::job::Outputs;
use crate::sinks::Sinks;
use crate::stats::report::LevelSummary;
use crate::stats::sample::Sample;
use crate::sweep::Observer;

/// Forwards a sweep's events to the sinks.
pub(crate) struct ToSinks {
    sinks: Sinks,
    /// For `llmprobe_in_flight_requests`: daemon state, not a result.
    metrics: Arc<Metrics>,
}

impl ToSinks {
    /// The observer of the loops that publish to `out`.
    pub(crate) fn of(out: &Outputs) -> Self {
        ToSinks {
            sinks: out.sinks.clone(),
            metrics: out.metrics.clone(),
        }
    }
}

impl Observer for ToSinks {
    fn request(
        &self,
        target: &Target,
        workload: &Workload,
        sample: &Sample,
        concurrency: Option<u32>,
    ) {
        self.sinks.request(target, workload, sample, concurrency);
    }

    fn level_finished(&self, target: &Target, workload: &Workload, level: &LevelSummary) {
        self.sinks.level(target, workload, level);
    }

    fn in_flight(&self) -> Option<Box<dyn Send>> {
        Some(Box::new(self.metrics.request_in_flight()))
    }
}
