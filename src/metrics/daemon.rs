//! The daemon's own state: sweeps finished and postponed per target,
//! requests in flight, configuration reloads, the OTLP exporter's drops,
//! and the build.

use prometheus::{Gauge, IntCounterVec, IntGauge, Opts, Registry};

use crate::metrics::names;
use crate::metrics::register::counter;

/// The daemon-state families.
pub(super) struct DaemonState {
    sweeps: IntCounterVec,
    sweeps_postponed: IntCounterVec,
    in_flight: IntGauge,
    reload_successful: IntGauge,
    reload_timestamp: Gauge,
    /// No labels: its one series exists once the OTLP sink is built.
    otlp_dropped: IntCounterVec,
}

/// Counts one request in `llmprobe_in_flight_requests` until dropped, so a
/// cancelled request cannot leave the gauge too high.
#[derive(Debug)]
pub struct InFlightGuard(IntGauge);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

fn gauge(registry: &Registry, spec: &names::Spec) -> Result<IntGauge, prometheus::Error> {
    let g = IntGauge::new(spec.name, spec.help)?;
    registry.register(Box::new(g.clone()))?;
    Ok(g)
}

impl DaemonState {
    /// Creates the families and registers them; the configuration counts as
    /// loaded successfully at `now_unix`.
    pub(super) fn new(registry: &Registry, now_unix: f64) -> Result<Self, prometheus::Error> {
        let build = &names::BUILD_INFO;
        let build_info = IntGauge::with_opts(
            Opts::new(build.name, build.help)
                .const_label(build.labels[0], env!("CARGO_PKG_VERSION")),
        )?;
        build_info.set(1);
        registry.register(Box::new(build_info))?;

        let reload_timestamp =
            Gauge::new(names::RELOAD_TIMESTAMP.name, names::RELOAD_TIMESTAMP.help)?;
        let state = DaemonState {
            sweeps: counter(registry, &names::SWEEPS)?,
            sweeps_postponed: counter(registry, &names::SWEEPS_POSTPONED)?,
            in_flight: gauge(registry, &names::IN_FLIGHT)?,
            reload_successful: gauge(registry, &names::RELOAD_SUCCESSFUL)?,
            reload_timestamp,
            otlp_dropped: counter(registry, &names::OTLP_DROPPED)?,
        };
        registry.register(Box::new(state.reload_timestamp.clone()))?;
        state.reload_successful.set(1);
        state.reload_timestamp.set(now_unix);
        Ok(state)
    }

    /// Counts a finished sweep of `target` under its result and kind.
    /// Every result and kind of the target is exported, at zero until counted.
    pub(super) fn sweep_finished(&self, target: &str, result: &str, kind: &str) {
        for r in names::SWEEP_RESULTS {
            for k in names::SWEEP_KINDS {
                if let Ok(c) = self.sweeps.get_metric_with_label_values(&[target, r, k]) {
                    if r == result && k == kind {
                        c.inc();
                    }
                }
            }
        }
    }

    /// Creates the per-target counters at zero.
    pub(super) fn target_started(&self, target: &str) {
        for result in names::SWEEP_RESULTS {
            for kind in names::SWEEP_KINDS {
                let _ = self
                    .sweeps
                    .get_metric_with_label_values(&[target, result, kind]);
            }
        }
        let _ = self
            .sweeps_postponed
            .get_metric_with_label_values(&[target]);
    }

    /// Counts a postponed sweep of `target`.
    pub(super) fn sweep_postponed(&self, target: &str) {
        if let Ok(c) = self
            .sweeps_postponed
            .get_metric_with_label_values(&[target])
        {
            c.inc();
        }
    }

    /// Counts one request in flight until the guard is dropped.
    pub(super) fn request_in_flight(&self) -> InFlightGuard {
        self.in_flight.inc();
        InFlightGuard(self.in_flight.clone())
    }

    /// Records the outcome of a configuration (re)load at `now_unix`.
    pub(super) fn config_reloaded(&self, ok: bool, now_unix: f64) {
        self.reload_successful.set(i64::from(ok));
        if ok {
            self.reload_timestamp.set(now_unix);
        }
    }

    /// Creates the OTLP drop counter at zero (the sink is on).
    pub(super) fn otlp_started(&self) {
        let _ = self.otlp_dropped.get_metric_with_label_values::<&str>(&[]);
    }

    /// Counts `points` OTLP data points dropped.
    pub(super) fn otlp_dropped(&self, points: u64) {
        if let Ok(c) = self.otlp_dropped.get_metric_with_label_values::<&str>(&[]) {
            c.inc_by(points);
        }
    }

    /// Removes the per-target counters of `target`.
    pub(super) fn forget(&self, target: &str) {
        for result in names::SWEEP_RESULTS {
            for kind in names::SWEEP_KINDS {
                let _ = self.sweeps.remove_label_values(&[target, result, kind]);
            }
        }
        let _ = self.sweeps_postponed.remove_label_values(&[target]);
    }
}
