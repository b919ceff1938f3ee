//! The sustained rate's families: the open-loop search's result per
//! workload, and each step of the last search.

use super::spec::Spec;

const WORKLOAD: &[&str] = &["target", "model", "workload"];
const STEP: &[&str] = &["target", "model", "workload", "step"];
const STEP_PERCENTILE: &[&str] = &["target", "model", "workload", "step", "percentile"];

/// The sustained (open-loop) rate per workload.
pub const SUSTAINED_RATE: Spec = Spec {
    name: "llmprobe_capacity_sustained_requests_per_second",
    help: "Highest Poisson (or constant, see llmprobe_capacity_sustained_info) arrival rate at which the SLO held, from the open-loop search: the rate to size replicas on (absent when not measured; 0 when even the lowest rate tried broke the SLO).",
    labels: WORKLOAD,
};
/// How the sustained rate was decided.
pub const SUSTAINED_INFO: Spec = Spec {
    name: "llmprobe_capacity_sustained_info",
    help: "How the sustained rate was decided (status: measured, lower_bound, zero, not_measured; arrivals: poisson, constant); always 1.",
    labels: &["target", "model", "workload", "status", "arrivals"],
};
/// When the sustained rate was measured.
pub const SUSTAINED_MEASURED: Spec = Spec {
    name: "llmprobe_capacity_sustained_measured_timestamp_seconds",
    help: "Unix time at which the search behind llmprobe_capacity_sustained_requests_per_second ended (sweeps between searches carry it).",
    labels: WORKLOAD,
};
/// Sweeps since the sustained rate was measured.
pub const SUSTAINED_AGE: Spec = Spec {
    name: "llmprobe_capacity_sustained_sweeps_since_measured",
    help: "Sweeps since the search behind llmprobe_capacity_sustained_requests_per_second ran (0: the last sweep ran it).",
    labels: WORKLOAD,
};
/// The confidence of the search's verdicts.
pub const SUSTAINED_CONFIDENCE: Spec = Spec {
    name: "llmprobe_capacity_sustained_confidence",
    help: "Confidence of the verdict of each step of the search (verdict_confidence): a step broke only when its shed, error or slow share was over its limit at this confidence.",
    labels: WORKLOAD,
};
/// Offered rate of a search step.
pub const STEP_OFFERED: Spec = Spec {
    name: "llmprobe_sustained_step_offered_requests_per_second",
    help: "Arrival rate a step of the last open-loop search offered (step: 1, 2, ... in the order run).",
    labels: STEP,
};
/// Achieved rate of a search step.
pub const STEP_ACHIEVED: Spec = Spec {
    name: "llmprobe_sustained_step_achieved_requests_per_second",
    help: "Requests of the step that ended (any outcome) per second of the step.",
    labels: STEP,
};
/// Goodput of a search step.
pub const STEP_GOODPUT: Spec = Spec {
    name: "llmprobe_sustained_step_goodput_requests_per_second",
    help: "Requests of the step that succeeded within the p95 latency limit (scheduled latency), per second of the step.",
    labels: STEP,
};
/// Shed ratio of a search step.
pub const STEP_SHED: Spec = Spec {
    name: "llmprobe_sustained_step_shed_ratio",
    help: "Fraction of the step's requests the server declined for load (503 or 429).",
    labels: STEP,
};
/// Error ratio of a search step.
pub const STEP_ERROR: Spec = Spec {
    name: "llmprobe_sustained_step_error_ratio",
    help: "Fraction of the step's requests that failed for any other reason.",
    labels: STEP,
};
/// Scheduled latency of a search step.
pub const STEP_SCHEDULED_LATENCY: Spec = Spec {
    name: "llmprobe_sustained_step_scheduled_latency_seconds",
    help: "End minus scheduled send of the step's requests (percentile 50, 95, 99): the latency a user arriving at that moment saw; its p95 is what the SLO judges.",
    labels: STEP_PERCENTILE,
};
/// Dispatch lag of a search step.
pub const STEP_DISPATCH_LAG: Spec = Spec {
    name: "llmprobe_sustained_step_dispatch_lag_seconds",
    help: "Actual send minus scheduled send of the step's requests (percentile 50, 95, 99); a p99 over its bound makes the step not measured.",
    labels: STEP_PERCENTILE,
};
/// Requests in flight during a search step.
pub const STEP_IN_FLIGHT: Spec = Spec {
    name: "llmprobe_sustained_step_in_flight",
    help: "Requests in flight from llmprobe at each send of the step (stat: p99, max).",
    labels: &["target", "model", "workload", "step", "stat"],
};
/// Arrivals of a search step not sent.
pub const STEP_NOT_SENT: Spec = Spec {
    name: "llmprobe_sustained_step_not_sent",
    help: "Counted arrivals of the step not sent because the client's ceiling on requests in flight (sustained.max_in_flight) was reached; never queued or sent later.",
    labels: STEP,
};
/// How a search step ended.
pub const STEP_RESULT: Spec = Spec {
    name: "llmprobe_sustained_step_info",
    help: "How a step of the last search ended (result: pass, break, undecided, not_measured); always 1.",
    labels: &["target", "model", "workload", "step", "result"],
};
