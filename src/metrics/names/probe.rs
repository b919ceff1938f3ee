//! The probe families: the light requests between sweeps, as service-level
//! indicators (availability, TTFT) and their cost.

use super::spec::Spec;

const PROBE: &[&str] = &["target", "model"];

/// Histogram buckets of probe TTFT and latency: from a fast TTFT of 10 ms
/// to a minute, dense enough that an SLO threshold (a bucket bound: 0.25,
/// 0.5, 1, 2, 5 s...) can be chosen, and a burn rate computed over any window.
pub const PROBE_BUCKETS: [f64; 14] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0,
];
/// Buckets of a cold start's TTFT: loading a model takes seconds to minutes.
pub const PROBE_COLD_BUCKETS: [f64; 10] =
    [0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0];

/// Counter of probes by outcome.
pub const PROBE_REQUESTS: Spec = Spec {
    name: "llmprobe_probe_requests_total",
    help: "Probes sent between sweeps, by outcome (the request outcomes, and reasoning_budget: the stream completed but the output budget went on thinking before any answer token; cancelled probes are not counted).",
    labels: &["target", "model", "outcome"],
};
/// Whether the last probe was served.
pub const PROBE_SUCCESS: Spec = Spec {
    name: "llmprobe_probe_success",
    help: "1 when the last probe was served (outcome ok or reasoning_budget), else 0.",
    labels: PROBE,
};
/// Histogram of warm probes' TTFT.
pub const PROBE_TTFT: Spec = Spec {
    name: "llmprobe_probe_ttft_seconds",
    help: "Time to first token (thinking or answer) of served probes that were not cold starts.",
    labels: PROBE,
};
/// Histogram of warm probes' latency.
pub const PROBE_LATENCY: Spec = Spec {
    name: "llmprobe_probe_latency_seconds",
    help: "Send to last token of served probes that were not cold starts.",
    labels: PROBE,
};
/// Histogram of cold starts' TTFT.
pub const PROBE_COLD_TTFT: Spec = Spec {
    name: "llmprobe_probe_cold_ttft_seconds",
    help: "Time to first token of served probes that were cold starts (after probe.cold_after without a request from llmprobe, or a first far outlier; see docs/measuring.md); kept out of llmprobe_probe_ttft_seconds.",
    labels: PROBE,
};
/// When a probe was last served.
pub const PROBE_LAST_SUCCESS: Spec = Spec {
    name: "llmprobe_probe_last_success_timestamp_seconds",
    help: "Unix time at which the last served probe ended.",
    labels: PROBE,
};
/// Dispatch lag of the last probe.
pub const PROBE_DISPATCH_LAG: Spec = Spec {
    name: "llmprobe_probe_dispatch_lag_seconds",
    help: "Actual minus scheduled send of the last probe (waiting for a place in schedule.max_in_flight_total included).",
    labels: PROBE,
};
/// Counter of tokens probes spent.
pub const PROBE_TOKENS: Spec = Spec {
    name: "llmprobe_probe_tokens_total",
    help: "Tokens probes spent (kind: prompt, as the server reported; output, thinking included; reasoning, the part of output spent thinking).",
    labels: &["target", "model", "kind"],
};
/// Counter of scheduled probes not sent.
pub const PROBE_SKIPPED: Spec = Spec {
    name: "llmprobe_probe_skipped_total",
    help: "Scheduled probes not sent (reason: sweeping, while llmprobe swept the target; overlap, the probe before was still in flight; late, the client reached the time over 1 s late); never sent later.",
    labels: &["target", "model", "reason"],
};
/// Counter of served probes whose TTFT was the client's stall.
pub const PROBE_CLIENT_STALLED: Spec = Spec {
    name: "llmprobe_probe_client_stalled_total",
    help: "Served probes whose TTFT and latency are kept out of llmprobe_probe_ttft_seconds and llmprobe_probe_latency_seconds: llmprobe's own runtime woke at least 50 ms and a quarter of the TTFT late while the probe ran (a stalled or throttled host, not the server).",
    labels: PROBE,
};
/// Whether probes are paused for a sweep.
pub const PROBE_PAUSED: Spec = Spec {
    name: "llmprobe_probe_paused",
    help: "1 while probes of the target are paused because llmprobe sweeps it, else 0.",
    labels: PROBE,
};
/// The mean interval between probes.
pub const PROBE_INTERVAL: Spec = Spec {
    name: "llmprobe_probe_interval_seconds",
    help: "Configured mean time between probes of the target (probe.interval); absent when probes are off.",
    labels: PROBE,
};

/// `kind` label values of [`PROBE_TOKENS`].
pub const PROBE_TOKEN_KINDS: [&str; 3] = ["prompt", "output", "reasoning"];
