//! Gauges that export each measured target's configured limits, so that
//! alert rules and dashboards compare results with the target's own SLO and
//! schedule instead of numbers copied into them by hand:
//!
//! | metric | labels | meaning |
//! |---|---|---|
//! | `llmprobe_target_slo_p95_latency_seconds` | target | `slo.p95_latency` |
//! | `llmprobe_target_slo_max_shed_ratio` | target | `slo.max_shed_ratio` |
//! | `llmprobe_target_slo_max_error_ratio` | target | `slo.max_error_ratio` |
//! | `llmprobe_schedule_interval_seconds` | target | `schedule.interval` the target's loop runs with |
//!
//! The interval carries `target` although it is global today: a rule joins it
//! with a target's series on the same labels, and a per-target interval
//! would not change the contract. Only targets this instance measures have
//! series (a sharded instance does not export the others').

use std::time::Duration;

use prometheus::{GaugeVec, Opts, Registry};

use crate::metrics::names::{self, Spec};

/// What the rules need of one target's configuration (plain values, so that
/// this module does not depend on the configuration types).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TargetLimits {
    /// The SLO's p95 latency limit.
    pub p95_latency: Duration,
    /// The SLO's highest acceptable shed ratio.
    pub max_shed_ratio: f64,
    /// The SLO's highest acceptable error ratio.
    pub max_error_ratio: f64,
    /// Time between two sweeps of the target (before jitter).
    pub interval: Duration,
}

/// Owns the configuration gauges of every measured target.
pub(crate) struct ConfigInfo {
    p95_latency: GaugeVec,
    max_shed_ratio: GaugeVec,
    max_error_ratio: GaugeVec,
    interval: GaugeVec,
}

impl std::fmt::Debug for ConfigInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigInfo").finish_non_exhaustive()
    }
}

impl ConfigInfo {
    /// Creates the gauges and registers them with `registry` (once per
    /// registry, as [`super::Metrics`]).
    pub(crate) fn new(registry: &Registry) -> Result<ConfigInfo, prometheus::Error> {
        let gauge = |spec: &Spec| {
            let g = GaugeVec::new(Opts::new(spec.name, spec.help), spec.labels)?;
            registry.register(Box::new(g.clone()))?;
            Ok::<_, prometheus::Error>(g)
        };
        Ok(ConfigInfo {
            p95_latency: gauge(&names::TARGET_SLO_P95_LATENCY)?,
            max_shed_ratio: gauge(&names::TARGET_SLO_MAX_SHED_RATIO)?,
            max_error_ratio: gauge(&names::TARGET_SLO_MAX_ERROR_RATIO)?,
            interval: gauge(&names::SCHEDULE_INTERVAL)?,
        })
    }

    /// Sets (or replaces) the gauges of `target`.
    pub(crate) fn set_target(&self, target: &str, limits: &TargetLimits) {
        let set = |g: &GaugeVec, v: f64| g.with_label_values(&[target]).set(v);
        set(&self.p95_latency, limits.p95_latency.as_secs_f64());
        set(&self.max_shed_ratio, limits.max_shed_ratio);
        set(&self.max_error_ratio, limits.max_error_ratio);
        set(&self.interval, limits.interval.as_secs_f64());
    }

    /// Removes the gauges of a target that is no longer measured here.
    pub(crate) fn forget_target(&self, target: &str) {
        for g in [
            &self.p95_latency,
            &self.max_shed_ratio,
            &self.max_error_ratio,
            &self.interval,
        ] {
            // An error only means the series did not exist.
            let _ = g.remove_label_values(&[target]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::Encoder;

    fn text(registry: &Registry) -> String {
        let mut out = Vec::new();
        prometheus::TextEncoder::new()
            .encode(&registry.gather(), &mut out)
            .expect("encode");
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn exports_and_forgets_a_targets_limits() {
        let registry = Registry::new();
        let info = ConfigInfo::new(&registry).expect("register");
        let limits = TargetLimits {
            p95_latency: Duration::from_millis(30_500),
            max_shed_ratio: 0.05,
            max_error_ratio: 0.01,
            interval: Duration::from_secs(900),
        };
        info.set_target("w1", &limits);
        info.set_target(
            "w2",
            &TargetLimits {
                interval: Duration::from_secs(60),
                ..limits
            },
        );
        let t = text(&registry);
        for line in [
            "llmprobe_target_slo_p95_latency_seconds{target=\"w1\"} 30.5",
            "llmprobe_target_slo_max_shed_ratio{target=\"w1\"} 0.05",
            "llmprobe_target_slo_max_error_ratio{target=\"w1\"} 0.01",
            "llmprobe_schedule_interval_seconds{target=\"w1\"} 900",
            "llmprobe_schedule_interval_seconds{target=\"w2\"} 60",
        ] {
            assert!(t.lines().any(|l| l == line), "no `{line}` in\n{t}");
        }

        info.forget_target("w1");
        let t = text(&registry);
        assert!(!t.contains("target=\"w1\""), "{t}");
        assert!(t.contains("llmprobe_schedule_interval_seconds{target=\"w2\"} 60"));
        // Forgetting an unknown target is harmless.
        info.forget_target("nope");
    }

    #[test]
    fn a_second_set_replaces_the_values() {
        let registry = Registry::new();
        let info = ConfigInfo::new(&registry).expect("register");
        let mut limits = TargetLimits {
            p95_latency: Duration::from_secs(30),
            max_shed_ratio: 0.05,
            max_error_ratio: 0.05,
            interval: Duration::from_secs(900),
        };
        info.set_target("w1", &limits);
        limits.p95_latency = Duration::from_secs(10);
        info.set_target("w1", &limits);
        let t = text(&registry);
        assert!(t.contains("llmprobe_target_slo_p95_latency_seconds{target=\"w1\"} 10\n"));
        assert_eq!(
            t.matches("llmprobe_target_slo_p95_latency_seconds{")
                .count(),
            1
        );
    }
}
