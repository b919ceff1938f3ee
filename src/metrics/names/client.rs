//! The client's own limits: how late llmprobe woke during each level, and
//! the levels not measured because it could not keep up.

use super::spec::Spec;

/// The client's wake-up lag per level.
pub const SWEEP_CLIENT_LAG: Spec = Spec {
    name: "llmprobe_sweep_client_lag_seconds",
    help: "How late llmprobe's own runtime woke against a 5 ms ticker while the level ran (stat: p99, max): the delay every read of the server's answers shared; a latency break with a p99 lag of a tenth of the SLO's p95 limit or more is not the server's (docs/measuring.md).",
    labels: &["target", "model", "workload", "concurrency", "stat"],
};
/// Levels not measured because the client could not keep up.
pub const SWEEP_LEVELS_NOT_MEASURED_CLIENT: Spec = Spec {
    name: "llmprobe_sweep_levels_not_measured_client",
    help: "Of llmprobe_sweep_levels_not_measured, the levels not measured because the client could not keep up: the first of them did not keep its requests in flight, or broke on latency while the client lagged, in each of its runs; neither a pass nor a break.",
    labels: &["target", "model", "workload"],
};
