//! Where a target stands, for the index page: its latest sweep, kept whole.

use std::sync::Arc;

use crate::config::Target;
use crate::stats::report::SweepReport;

/// Where a target stands, for the index page: the latest sweep's verdict.
#[derive(Debug, Clone, Default)]
pub struct TargetStatus {
    /// Target name.
    pub name: String,
    /// Model id measured.
    pub model: String,
    /// Unix time of the last completed sweep, if any.
    pub last_success_unix: Option<f64>,
    /// Why the last sweep failed, when it did (never holds a secret).
    pub last_error: Option<String>,
    /// The latest sweep's report, successful or not (for the pages' charts).
    pub report: Option<Arc<SweepReport>>,
    /// The target as configured (for the pages' configuration facts).
    pub target: Option<Arc<Target>>,
}

impl TargetStatus {
    /// Where the target stands, in a word or two: "not measured yet", "ok",
    /// "setup error: CAUSE" or "sweep failed"; and whether that is good.
    pub fn state(&self) -> (&'static str, String) {
        match self.report.as_deref() {
            None => ("", "not measured yet".to_string()),
            Some(r) if r.success => ("ok", "ok".to_string()),
            Some(r) => match &r.setup_error {
                Some(e) => ("failed", format!("setup error: {}", e.cause.as_str())),
                None => ("failed", "sweep failed".to_string()),
            },
        }
    }

    /// The status of a target not swept yet.
    pub fn new(name: &str, model: &str) -> Self {
        TargetStatus {
            name: name.to_string(),
            model: model.to_string(),
            ..TargetStatus::default()
        }
    }

    /// Takes in a finished sweep: a success replaces the time of the last
    /// success and clears the error; a failure keeps that time.
    pub fn record(&mut self, report: &SweepReport) {
        self.record_shared(Arc::new(report.clone()));
    }

    /// [`TargetStatus::record`] of a report shared with its loop.
    pub fn record_shared(&mut self, shared: Arc<SweepReport>) {
        let report = &*shared;
        self.model = report.model.clone();
        if report.success {
            self.last_success_unix = Some(report.finished_at_unix_seconds);
            self.last_error = None;
        } else {
            self.last_error = report.error.clone();
        }
        self.report = Some(shared);
    }
}
