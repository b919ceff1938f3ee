//! The names table: every `llmprobe_` family [`super::Metrics`] exports
//! (the `process_` ones are the prometheus crate's own), with its help text
//! and label names, and the label values metrics own (`quantity`,
//! `percentile`, `result`, the standard `llmprobe_target_info` labels). A
//! contract with dashboards and alert rules: change a name here and there
//! only. The `outcome` label's values are [`Outcome::as_str`]'s.
//!
//! [`Outcome::as_str`]: crate::stats::sample::Outcome::as_str

mod bounds;
mod client;
mod fleet;
mod probe;
mod spec;
mod sustained;

pub use bounds::*;
pub use client::*;
pub use fleet::*;
pub use probe::*;
pub use spec::Spec;
pub use sustained::*;

use crate::stats::quantity::Quantity;
use crate::stats::report::Percentiles;

const NONE: &[&str] = &[];
const TARGET: &[&str] = &["target"];
const WORKLOAD: &[&str] = &["target", "model", "workload"];
const LEVEL: &[&str] = &["target", "model", "workload", "concurrency"];
const LEVEL_PERCENTILE: &[&str] = &["target", "model", "workload", "concurrency", "percentile"];
const LEVEL_STAT: &[&str] = &["target", "model", "workload", "concurrency", "stat"];

// ---------------------------------------------------------------------------
// Running totals over every measured request (registered; see `running`).
// ---------------------------------------------------------------------------

/// Histogram buckets for LLM latencies: a fast TTFT is tens of milliseconds,
/// a long generation under load takes minutes.
pub const LATENCY_BUCKETS: [f64; 15] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0,
];

/// Histogram of the TTFT of successful requests.
pub const REQUEST_TTFT: Spec = Spec {
    name: "llmprobe_request_ttft_seconds",
    help: "Time to first token of every request that completed (outcome ok).",
    labels: WORKLOAD,
};
/// Histogram of the answer TTFT of successful requests.
pub const REQUEST_ANSWER_TTFT: Spec = Spec {
    name: "llmprobe_request_answer_ttft_seconds",
    help: "Time to the first answer token (content or a tool call, after any reasoning) of every request that completed with an answer; equal to the TTFT for a model that does not reason.",
    labels: WORKLOAD,
};
/// Counter of reasoning tokens.
pub const REASONING_TOKENS: Spec = Spec {
    name: "llmprobe_reasoning_tokens_total",
    help: "Reasoning tokens of requests that completed (outcome ok): usage.completion_tokens_details.reasoning_tokens when reported, else chunks that carried reasoning; part of llmprobe_output_tokens_total.",
    labels: WORKLOAD,
};
/// Histogram of the latency of successful requests.
pub const REQUEST_DURATION: Spec = Spec {
    name: "llmprobe_request_duration_seconds",
    help:
        "Latency from send to the last content chunk of every request that completed (outcome ok).",
    labels: WORKLOAD,
};
/// Counter of requests by outcome.
pub const REQUESTS: Spec = Spec {
    name: "llmprobe_requests_total",
    help: "Measured requests by outcome.",
    labels: &["target", "model", "workload", "outcome"],
};
/// Counter of output tokens.
pub const OUTPUT_TOKENS: Spec = Spec {
    name: "llmprobe_output_tokens_total",
    help: "Output tokens of requests that completed (outcome ok).",
    labels: WORKLOAD,
};
/// Counter of requests an early verdict saved.
pub const REQUESTS_SAVED: Spec = Spec {
    name: "llmprobe_requests_saved_total",
    help: "Requests not sent because a level stopped as soon as it was certain to break the SLO.",
    labels: WORKLOAD,
};
/// Counter of prompt tokens.
pub const PROMPT_TOKENS: Spec = Spec {
    name: "llmprobe_prompt_tokens_total",
    help: "Prompt tokens reported by the server for requests that completed (outcome ok).",
    labels: WORKLOAD,
};

// ---------------------------------------------------------------------------
// Daemon state (registered; see `daemon`).
// ---------------------------------------------------------------------------

/// Counter of finished sweeps by [`sweep_result`] and [`SWEEP_KINDS`].
pub const SWEEPS: Spec = Spec {
    name: "llmprobe_sweeps_total",
    help: "Sweeps finished, by result (ok, failed, or setup_error: stopped by a setup mistake, see llmprobe_target_setup_error) and kind (full: every level from the lowest; warm: from half the last knee).",
    labels: &["target", "result", "kind"],
};
/// Counter of sweeps the idle gate postponed.
pub const SWEEPS_POSTPONED: Spec = Spec {
    name: "llmprobe_sweeps_postponed_total",
    help: "Sweeps postponed because the server was busy (idle gate).",
    labels: TARGET,
};
/// Gauge of requests in flight.
pub const IN_FLIGHT: Spec = Spec {
    name: "llmprobe_in_flight_requests",
    help: "Benchmark requests in flight across all targets.",
    labels: NONE,
};
/// Counter of OTLP data points never delivered.
pub const OTLP_DROPPED: Spec = Spec {
    name: "llmprobe_otlp_dropped_data_points_total",
    help: "Data points the OTLP sink did not deliver: an export the collector refused, or one left waiting for a retry when a newer one replaced it (cumulative: the newer one carries the same totals) or the queue was full (delta). Present only while sinks.otlp is configured.",
    labels: NONE,
};
/// Always 1; its one label is constant.
pub const BUILD_INFO: Spec = Spec {
    name: "llmprobe_build_info",
    help: "Version of llmprobe that is running; always 1.",
    labels: &["version"],
};
/// Whether the last (re)load succeeded.
pub const RELOAD_SUCCESSFUL: Spec = Spec {
    name: "llmprobe_config_last_reload_successful",
    help: "1 if the last configuration (re)load succeeded, else 0.",
    labels: NONE,
};
/// When the last (re)load succeeded.
pub const RELOAD_TIMESTAMP: Spec = Spec {
    name: "llmprobe_config_last_reload_success_timestamp_seconds",
    help: "Unix time of the last successful configuration (re)load.",
    labels: NONE,
};

/// `result` label values of [`SWEEPS`], every one created at zero.
pub const SWEEP_RESULTS: [&str; 3] = ["ok", "failed", "setup_error"];

/// Values of the `kind` label of `llmprobe_sweeps_total`.
pub const SWEEP_KINDS: [&str; 2] = ["full", "warm"];

/// The `result` label of a sweep that did or did not succeed, and that a
/// setup mistake stopped or not.
pub fn sweep_result(success: bool, setup_error: bool) -> &'static str {
    match (success, setup_error) {
        (true, _) => SWEEP_RESULTS[0],
        (false, false) => SWEEP_RESULTS[1],
        (false, true) => SWEEP_RESULTS[2],
    }
}

// ---------------------------------------------------------------------------
// Each measured target's configured limits (registered; see `config_info`).
// ---------------------------------------------------------------------------

/// The SLO's p95 latency limit of a target.
pub const TARGET_SLO_P95_LATENCY: Spec = Spec {
    name: "llmprobe_target_slo_p95_latency_seconds",
    help: "The target's SLO: highest acceptable p95 request latency of a level (slo.p95_latency).",
    labels: TARGET,
};
/// The SLO's shed ratio limit of a target.
pub const TARGET_SLO_MAX_SHED_RATIO: Spec = Spec {
    name: "llmprobe_target_slo_max_shed_ratio",
    help: "The target's SLO: highest acceptable fraction of shed (503/429) requests of a level (slo.max_shed_ratio).",
    labels: TARGET,
};
/// The SLO's error ratio limit of a target.
pub const TARGET_SLO_MAX_ERROR_RATIO: Spec = Spec {
    name: "llmprobe_target_slo_max_error_ratio",
    help: "The target's SLO: highest acceptable fraction of otherwise failed requests of a level (slo.max_error_ratio).",
    labels: TARGET,
};
/// The interval a target's loop runs with.
pub const SCHEDULE_INTERVAL: Spec = Spec {
    name: "llmprobe_schedule_interval_seconds",
    help: "Time between two sweeps of the target, before jitter (schedule.interval).",
    labels: TARGET,
};

// ---------------------------------------------------------------------------
// Results of the latest sweeps and pair measurements (written as text when
// a sweep ends; see `results`).
// ---------------------------------------------------------------------------

/// Reasoning tokens per level.
pub const SWEEP_REASONING_TOKENS: Spec = Spec {
    name: "llmprobe_sweep_reasoning_tokens",
    help: "Reasoning tokens of the level's completed requests in the latest completed sweep (usage.completion_tokens_details.reasoning_tokens when reported, else chunks that carried reasoning).",
    labels: LEVEL,
};
/// Sample counts behind the percentile families, by [`quantity`].
pub const SWEEP_SAMPLES: Spec = Spec {
    name: "llmprobe_sweep_samples",
    help: "Number of samples the sweep percentiles of a quantity rest on (a p95 of few samples is imprecise).",
    labels: &["target", "model", "workload", "concurrency", "quantity"],
};
/// New connections per level.
pub const SWEEP_NEW_CONNECTIONS: Spec = Spec {
    name: "llmprobe_sweep_new_connections",
    help: "Counted requests of the level that had to open a new connection (the pool is warmed before each level) in the latest completed sweep.",
    labels: LEVEL,
};
/// Shed ratio per level.
pub const SWEEP_SHED: Spec = Spec {
    name: "llmprobe_sweep_shed_ratio",
    help: "Fraction of the level's requests the server declined for load (503 or 429) in the latest completed sweep.",
    labels: LEVEL,
};
/// Error ratio per level.
pub const SWEEP_ERROR: Spec = Spec {
    name: "llmprobe_sweep_error_ratio",
    help: "Fraction of the level's requests that failed for any reason other than load shedding in the latest completed sweep.",
    labels: LEVEL,
};
/// Requests per level and outcome.
pub const SWEEP_REQUESTS: Spec = Spec {
    name: "llmprobe_sweep_requests",
    help: "Requests of the level by outcome in the latest completed sweep.",
    labels: &["target", "model", "workload", "concurrency", "outcome"],
};
/// Whether a level stopped early.
pub const SWEEP_STOPPED_EARLY: Spec = Spec {
    name: "llmprobe_sweep_stopped_early",
    help: "1 if the level stopped as soon as it was certain to break the SLO (its requests in flight cancelled), else 0, in the latest completed sweep.",
    labels: LEVEL,
};
/// Requests a level did not send.
pub const SWEEP_REQUESTS_SAVED: Spec = Spec {
    name: "llmprobe_sweep_requests_saved",
    help: "Requests of the level's planned count not sent because it stopped early, in the latest completed sweep.",
    labels: LEVEL,
};
/// A level's verdict: what decided it and what the knee counted.
pub const SWEEP_VERDICT: Spec = Spec {
    name: "llmprobe_sweep_verdict",
    help: "1 for the level's verdict at the target's verdict_confidence: decision (pass, break, undecided), the test that decided it (shed, errors, p95_latency, no_success, none) and what the knee counted (pass, break, or undecided: neither raises nor lowers the knee), in the latest completed sweep.",
    labels: &[
        "target",
        "model",
        "workload",
        "concurrency",
        "decision",
        "decided_by",
        "counted_as",
    ],
};
/// Requests a level's verdict rests on.
pub const SWEEP_VERDICT_REQUESTS: Spec = Spec {
    name: "llmprobe_sweep_verdict_requests",
    help: "Requests the level's verdict rests on: this sweep's (cancelled ones aside) and those pooled from earlier sweeps of the same server, in the latest completed sweep.",
    labels: LEVEL,
};
/// Earlier sweeps pooled into a level's verdict.
pub const SWEEP_VERDICT_POOLED: Spec = Spec {
    name: "llmprobe_sweep_verdict_pooled_sweeps",
    help: "Earlier sweeps whose requests at this level the verdict pooled (0: this sweep's alone), in the latest completed sweep.",
    labels: LEVEL,
};
/// The lower confidence bounds behind a level's verdict.
pub const SWEEP_VERDICT_BOUND: Spec = Spec {
    name: "llmprobe_sweep_verdict_lower_bound_ratio",
    help: "Clopper-Pearson lower bound, at the target's verdict_confidence, on the true share the level's verdict was decided by (quantity shed, errors, or slow: requests over the p95 limit); over its limit (slow: over 0.05) the level broke; absent on a pass.",
    labels: &["target", "model", "workload", "concurrency", "quantity"],
};
/// Whether a level was a refinement probe.
pub const SWEEP_REFINEMENT: Spec = Spec {
    name: "llmprobe_sweep_refinement_probe",
    help: "1 if the level was a refinement probe between two configured levels, 0 if configured, in the latest completed sweep.",
    labels: LEVEL,
};
/// When each level's figures were measured.
pub const SWEEP_LEVEL_MEASURED: Spec = Spec {
    name: "llmprobe_sweep_level_measured_timestamp_seconds",
    help: "Unix time at which the level's figures were measured: by the latest completed sweep, or, for a level it did not run (skipped by a warm start, or not measured for lack of places), by the earlier sweep they are carried from.",
    labels: LEVEL,
};
/// Levels a sweep could not measure for lack of places.
pub const SWEEP_LEVELS_NOT_MEASURED: Spec = Spec {
    name: "llmprobe_sweep_levels_not_measured",
    help: "Levels the latest completed sweep was to run but could not measure: their places in the global cap (schedule.max_in_flight_total) were not free within the wait, other targets held them; or the client could not keep up (llmprobe_sweep_levels_not_measured_client).",
    labels: WORKLOAD,
};
/// Whether the knee rests on levels an earlier sweep measured.
pub const CAPACITY_KNEE_CARRIED_OVER: Spec = Spec {
    name: "llmprobe_capacity_knee_carried_over",
    help: "1 when levels the latest sweep could not measure are known from an earlier sweep, and the knee and recommendation keep what it measured; 0 otherwise.",
    labels: WORKLOAD,
};
/// When the knee's level was measured.
pub const CAPACITY_KNEE_MEASURED: Spec = Spec {
    name: "llmprobe_capacity_knee_measured_timestamp_seconds",
    help: "Unix time at which the level the knee rests on was measured (absent without a knee).",
    labels: WORKLOAD,
};
/// The knee per workload.
pub const CAPACITY_KNEE: Spec = Spec {
    name: "llmprobe_capacity_knee_concurrency",
    help: "Highest concurrency within the SLO with every lower level within it too (0 when even level 1 fails).",
    labels: WORKLOAD,
};
/// Requests running in the server's engine per level, by [`stat`].
pub const SWEEP_SERVER_RUNNING: Spec = Spec {
    name: "llmprobe_sweep_server_requests_running",
    help: "Requests running in the server's engine during the level, from its own metrics (stat: max or mean of the reads).",
    labels: LEVEL_STAT,
};
/// Requests waiting in the server's engine per level, by [`stat`].
pub const SWEEP_SERVER_WAITING: Spec = Spec {
    name: "llmprobe_sweep_server_requests_waiting",
    help: "Requests waiting in the server's engine queue during the level, from its own metrics (stat: max or mean of the reads).",
    labels: LEVEL_STAT,
};
/// Largest KV-cache usage of the server per level.
pub const SWEEP_SERVER_KV_CACHE: Spec = Spec {
    name: "llmprobe_sweep_server_kv_cache_usage_ratio",
    help: "Largest KV-cache usage (0 to 1) the server's engine reported during the level.",
    labels: LEVEL,
};
/// Preemptions of the server per level.
pub const SWEEP_SERVER_PREEMPTIONS: Spec = Spec {
    name: "llmprobe_sweep_server_preemptions",
    help: "Preemptions the server's engine counted during the level.",
    labels: LEVEL,
};
/// The limit that binds at the knee, per workload.
pub const CAPACITY_LIMIT: Spec = Spec {
    name: "llmprobe_capacity_limit_info",
    help: "What binds at the knee (limit: queue, kv_cache, compute, shed, rate_limited, errors, errors_at_every_load, latency, latency_at_every_load, not_reached); always 1.",
    labels: &["target", "model", "workload", "limit"],
};
/// Whether every level the knee rests on was decided, per workload.
pub const CAPACITY_KNEE_DECIDED: Spec = Spec {
    name: "llmprobe_capacity_knee_decided",
    help: "1 when every level the knee depends on was decided (pass or break, at the verdict's confidence, or as last decided on the same server); 0 when one was undecided with nothing decided before: the knee stepped over it and could be lower. Alerts and autoscaling ignore a knee at 0 here.",
    labels: WORKLOAD,
};
/// Whether the knee is a lower bound, per workload.
pub const CAPACITY_KNEE_LOWER_BOUND: Spec = Spec {
    name: "llmprobe_capacity_knee_lower_bound",
    help: "1 when no level broke the SLO and every level the climb was to run was measured: the capacity is at least the knee, not measured higher; 0 when the level above the knee broke it, or levels above it were not measured (llmprobe_sweep_levels_not_measured).",
    labels: WORKLOAD,
};
/// Throughput at the knee per workload.
pub const CAPACITY_THROUGHPUT: Spec = Spec {
    name: "llmprobe_capacity_throughput_tokens_per_second",
    help: "Aggregate output tokens per second at the knee (0 when there is no knee).",
    labels: WORKLOAD,
};
/// Completed requests per second at the knee, per workload.
pub const CAPACITY_REQUEST_RATE: Spec = Spec {
    name: "llmprobe_capacity_requests_per_second",
    help: "Completed requests per second of the knee level: the sustainable request rate (0 when there is no knee).",
    labels: WORKLOAD,
};
/// The completed requests that rate rests on.
pub const CAPACITY_REQUEST_RATE_SAMPLES: Spec = Spec {
    name: "llmprobe_capacity_requests_per_second_samples",
    help:
        "Completed requests of the knee level that llmprobe_capacity_requests_per_second rests on.",
    labels: WORKLOAD,
};
/// Saturation level per workload.
pub const CAPACITY_SATURATION: Spec = Spec {
    name: "llmprobe_capacity_saturation_concurrency",
    help: "First level whose throughput gained under 10% over the previous level (absent when throughput kept growing).",
    labels: WORKLOAD,
};
/// Recommended `max_in_flight` per workload.
pub const RECOMMENDED: Spec = Spec {
    name: "llmprobe_recommended_max_in_flight",
    help: "Recommended max_in_flight for the worker: the knee times the configured headroom.",
    labels: WORKLOAD,
};
/// The setup mistake that stopped the last sweep, by cause.
pub const TARGET_SETUP_ERROR: Spec = Spec {
    name: "llmprobe_target_setup_error",
    help: "1 while the last sweep of the target was stopped by a setup mistake, labelled with its cause (key, model, url, tls, dns); absent otherwise.",
    labels: &["target", "cause"],
};
/// Whether the last sweep succeeded.
pub const SWEEP_SUCCESS: Spec = Spec {
    name: "llmprobe_sweep_success",
    help: "1 if the last sweep of the target completed, 0 if it failed (the results of the last completed one stay exported).",
    labels: TARGET,
};
/// Wall time of the last sweep.
pub const SWEEP_DURATION: Spec = Spec {
    name: "llmprobe_sweep_duration_seconds",
    help: "Wall time of the last sweep of the target, completed or failed.",
    labels: TARGET,
};
/// When the latest completed sweep finished.
pub const SWEEP_LAST_COMPLETION: Spec = Spec {
    name: "llmprobe_sweep_last_completion_timestamp_seconds",
    help: "Unix time at which the latest completed sweep of the target finished.",
    labels: TARGET,
};
/// A target's setup; configured labels follow [`TARGET_INFO_LABELS`].
pub const TARGET_INFO: Spec = Spec {
    name: "llmprobe_target_info",
    help: "Setup of a target: server, version, GPU, driver, memory, OS, gateway, and configured labels; always 1.",
    labels: TARGET_INFO_LABELS,
};
/// Gateway overhead percentiles by [`quantity`].
pub const GATEWAY_OVERHEAD: Spec = Spec {
    name: "llmprobe_gateway_overhead_seconds",
    help: "Time a gateway adds (through the gateway minus direct), by quantity (latency or ttft) and percentile.",
    labels: &["pair", "quantity", "percentile"],
};
/// Sample counts behind the gateway overhead.
pub const GATEWAY_SAMPLES: Spec = Spec {
    name: "llmprobe_gateway_overhead_samples",
    help: "Number of samples the gateway overhead percentiles of a quantity rest on.",
    labels: &["pair", "quantity"],
};

/// The result families other than the quantities' (see [`RESULT_FAMILIES`]).
const OTHER_RESULT_FAMILIES: [&Spec; 54] = [
    &SWEEP_SAMPLES,
    &TARGET_SETUP_ERROR,
    &SWEEP_REASONING_TOKENS,
    &SWEEP_NEW_CONNECTIONS,
    &SWEEP_SHED,
    &SWEEP_ERROR,
    &SWEEP_REQUESTS,
    &SWEEP_STOPPED_EARLY,
    &SWEEP_REQUESTS_SAVED,
    &SWEEP_REFINEMENT,
    &SWEEP_LEVEL_MEASURED,
    &SWEEP_LEVELS_NOT_MEASURED,
    &SWEEP_LEVELS_NOT_MEASURED_CLIENT,
    &CAPACITY_KNEE_CARRIED_OVER,
    &CAPACITY_KNEE_MEASURED,
    &SWEEP_VERDICT,
    &SWEEP_VERDICT_REQUESTS,
    &SWEEP_VERDICT_POOLED,
    &SWEEP_VERDICT_BOUND,
    &SWEEP_SERVER_RUNNING,
    &SWEEP_SERVER_WAITING,
    &SWEEP_SERVER_KV_CACHE,
    &SWEEP_SERVER_PREEMPTIONS,
    &SWEEP_CLIENT_LAG,
    &CAPACITY_KNEE,
    &CAPACITY_LIMIT,
    &CAPACITY_KNEE_DECIDED,
    &CAPACITY_KNEE_LOWER_BOUND,
    &CAPACITY_THROUGHPUT,
    &CAPACITY_REQUEST_RATE,
    &CAPACITY_REQUEST_RATE_SAMPLES,
    &SUSTAINED_RATE,
    &SUSTAINED_INFO,
    &SUSTAINED_MEASURED,
    &SUSTAINED_AGE,
    &SUSTAINED_CONFIDENCE,
    &STEP_OFFERED,
    &STEP_ACHIEVED,
    &STEP_GOODPUT,
    &STEP_SHED,
    &STEP_ERROR,
    &STEP_SCHEDULED_LATENCY,
    &STEP_DISPATCH_LAG,
    &STEP_IN_FLIGHT,
    &STEP_NOT_SENT,
    &STEP_RESULT,
    &CAPACITY_SATURATION,
    &RECOMMENDED,
    &SWEEP_SUCCESS,
    &SWEEP_DURATION,
    &SWEEP_LAST_COMPLETION,
    &TARGET_INFO,
    &GATEWAY_OVERHEAD,
    &GATEWAY_SAMPLES,
];

/// The family of a quantity of the list: its name and help are the
/// list's ([`Quantity::spec`]), its labels those of a level, with
/// `percentile` for a quantity read as percentiles.
const fn quantity_family(q: Quantity) -> Spec {
    let spec = q.spec();
    Spec {
        name: spec.metric,
        help: spec.help,
        labels: if q.has_percentiles() {
            LEVEL_PERCENTILE
        } else {
            LEVEL
        },
    }
}

/// Every family rendered from the results: one per quantity of
/// [`Quantity::ALL`], in its order, then the others.
pub const RESULT_FAMILIES: [Spec; Quantity::ALL.len() + OTHER_RESULT_FAMILIES.len()] = {
    let mut out = [SWEEP_SAMPLES; Quantity::ALL.len() + OTHER_RESULT_FAMILIES.len()];
    let mut i = 0;
    while i < Quantity::ALL.len() {
        out[i] = quantity_family(Quantity::ALL[i]);
        i += 1;
    }
    let mut j = 0;
    while j < OTHER_RESULT_FAMILIES.len() {
        out[i + j] = *OTHER_RESULT_FAMILIES[j];
        j += 1;
    }
    out
};

/// `quantity` label values of [`GATEWAY_OVERHEAD`]: the two quantities of
/// the list a gateway adds to, under the list's labels (those of
/// [`SWEEP_SAMPLES`] are each quantity's [`label`]).
///
/// [`label`]: crate::stats::quantity::QuantitySpec::label
pub mod quantity {
    use crate::stats::quantity::Quantity;

    /// Time to first token.
    pub const TTFT: &str = Quantity::Ttft.spec().label;
    /// End-to-end latency.
    pub const LATENCY: &str = Quantity::Latency.spec().label;
}

/// The `quantity` label of [`SWEEP_VERDICT_BOUND`].
pub mod verdict_quantity {
    /// The shed ratio.
    pub const SHED: &str = "shed";
    /// The error ratio.
    pub const ERRORS: &str = "errors";
    /// The share of decision latencies over the p95 limit.
    pub const SLOW: &str = "slow";
}

/// `stat` label values of the server's gauges per level.
pub mod stat {
    /// The largest read.
    pub const MAX: &str = "max";
    /// The 99th percentile.
    pub const P99: &str = "p99";
    /// The mean of the reads.
    pub const MEAN: &str = "mean";
}

/// The `max_tokens_field` label of `llmprobe_target_info`: the request field
/// that carries the output limit (configured, or found on an answer; empty
/// until the first sweep when not configured).
pub const TARGET_INFO_MAX_TOKENS_FIELD: &str = "max_tokens_field";

/// The exported percentiles as (`percentile` label value, value) pairs.
pub fn percentiles(p: &Percentiles) -> [(&'static str, Option<f64>); 3] {
    [("50", p.p50), ("95", p.p95), ("99", p.p99)]
}

/// Every standard label of [`TARGET_INFO`], in exposition order: `target`,
/// `model`, what the server tells, then what only configuration gives. One
/// list, in [`crate::config::labels`], which the template uses too.
pub const TARGET_INFO_LABELS: &[&str] = crate::config::labels::TARGET_INFO_LABELS;

/// `llmprobe_target_info` labels that the server tells (or the target's
/// configuration, for the model).
pub const TARGET_INFO_FROM_SERVER: [&str; 3] = ["model", "server", "server_version"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_labels_follow_target_in_target_info() {
        assert_eq!(TARGET_INFO_LABELS[1..4], TARGET_INFO_FROM_SERVER);
    }

    #[test]
    fn target_info_labels_are_target_then_server_then_config() {
        assert_eq!(
            TARGET_INFO_LABELS,
            [
                "target",
                "model",
                "server",
                "server_version",
                "gpu",
                "driver",
                "gpu_memory",
                "os",
                "via_gateway"
            ]
        );
    }

    #[test]
    fn sweep_results_name_success_and_failure() {
        assert_eq!(sweep_result(true, false), "ok");
        assert_eq!(sweep_result(false, false), "failed");
        assert_eq!(sweep_result(false, true), "setup_error");
    }
}
