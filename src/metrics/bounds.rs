//! The daemon's own bounds at work: basic auth refusals, refused reloads
//! and abandoned discovery reads, every series created at zero so that
//! `rate()` and alerts see a flood from its first request.

use prometheus::{IntCounter, IntCounterVec, Registry};

use crate::metrics::names;
use crate::metrics::register::counter;

/// The bound families.
pub(super) struct Bounds {
    auth_failures: IntCounterVec,
    reload_refused: IntCounterVec,
    file_sd_timeouts: IntCounter,
}

impl Bounds {
    /// Creates the families, every reason at zero, and registers them.
    pub(super) fn new(registry: &Registry) -> Result<Bounds, prometheus::Error> {
        let auth_failures = counter(registry, &names::HTTP_AUTH_FAILURES)?;
        for reason in names::AUTH_FAILURE_REASONS {
            auth_failures.get_metric_with_label_values(&[reason])?;
        }
        let reload_refused = counter(registry, &names::RELOAD_REFUSED)?;
        for reason in names::RELOAD_REFUSED_REASONS {
            reload_refused.get_metric_with_label_values(&[reason])?;
        }
        let spec = &names::FILE_SD_READ_TIMEOUTS;
        let file_sd_timeouts = IntCounter::new(spec.name, spec.help)?;
        registry.register(Box::new(file_sd_timeouts.clone()))?;
        Ok(Bounds {
            auth_failures,
            reload_refused,
            file_sd_timeouts,
        })
    }

    /// Counts a request refused by basic auth for `reason` (one of
    /// [`names::AUTH_FAILURE_REASONS`]; any other is not counted).
    pub(super) fn auth_failed(&self, reason: &str) {
        if names::AUTH_FAILURE_REASONS.contains(&reason) {
            if let Ok(c) = self.auth_failures.get_metric_with_label_values(&[reason]) {
                c.inc();
            }
        }
    }

    /// Counts a refused `POST /-/reload` for `reason` (one of
    /// [`names::RELOAD_REFUSED_REASONS`]).
    pub(super) fn reload_refused(&self, reason: &str) {
        if names::RELOAD_REFUSED_REASONS.contains(&reason) {
            if let Ok(c) = self.reload_refused.get_metric_with_label_values(&[reason]) {
                c.inc();
            }
        }
    }

    /// Counts an abandoned discovery read.
    pub(super) fn discovery_read_abandoned(&self) {
        self.file_sd_timeouts.inc();
    }
}
