//! The results of a sweep, as the terminal output, the JSON document and the
//! metrics read them. Plain data: produced by `stats`, `knee` and `sweep`.

use serde::Serialize;

/// Percentiles of one quantity in one level, with the sample count they rest on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct Percentiles {
    /// Number of samples the percentiles were computed from.
    pub count: usize,
    /// 50th percentile (None when there are no samples).
    pub p50: Option<f64>,
    /// 95th percentile.
    pub p95: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
}

impl Percentiles {
    /// The exported percentiles as (label value, value) pairs.
    pub fn labelled(&self) -> [(&'static str, Option<f64>); 3] {
        [("50", self.p50), ("95", self.p95), ("99", self.p99)]
    }
}

/// Summary of one concurrency level.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelSummary {
    /// Requests kept in flight.
    pub concurrency: u32,
    /// Requests sent in the level.
    pub requests: u64,
    /// Requests per outcome, keyed by the outcome label.
    pub outcomes: std::collections::BTreeMap<&'static str, u64>,
    /// Fraction of requests shed (503) or rate limited (429).
    pub shed_ratio: f64,
    /// Fraction failed for any other reason.
    pub error_ratio: f64,
    /// Time to first token, seconds.
    pub ttft_seconds: Percentiles,
    /// End-to-end latency, seconds.
    pub latency_seconds: Percentiles,
    /// Gaps between content chunks, seconds.
    pub inter_token_latency_seconds: Percentiles,
    /// Per-request generation speed, tokens per second.
    pub generation_tokens_per_second: Percentiles,
    /// Output tokens of all completed requests / wall time of the level.
    pub throughput_tokens_per_second: f64,
    /// Output tokens of completed requests.
    pub output_tokens: u64,
    /// Prompt tokens reported by the server (0 when none reported).
    pub prompt_tokens: u64,
    /// Of those, the tokens the server said it served from its prefix cache
    /// (`usage.prompt_tokens_details.cached_tokens`; 0 when none reported).
    pub cached_prompt_tokens: u64,
    /// Wall time of the level, seconds.
    pub wall_seconds: f64,
    /// How output tokens were counted: "usage", "chunks" or "mixed".
    pub token_source: &'static str,
    /// Output tokens per content chunk, where usage was reported (above 1:
    /// chunks carry several tokens and inter-token latency is per chunk).
    pub tokens_per_content_chunk: Option<f64>,
    /// Completed streams that ended without a `finish_reason`.
    pub streams_without_finish_reason: u64,
    /// The first error message of each failed outcome in the level, so that a
    /// sweep can say what went wrong without one log line per request.
    pub error_examples: std::collections::BTreeMap<&'static str, String>,
    /// Latency of every request that counts in the decision (all but shed,
    /// rate-limited and cancelled ones; a failure counts the time it took, a
    /// timeout at least its limit), seconds: its p95 is what the SLO judges.
    pub decision_latency_seconds: Percentiles,
    /// Mean number of requests in flight while the level kept its loop full
    /// (from its start until the first request that was not replaced ended),
    /// weighted by time.
    pub achieved_concurrency: f64,
    /// The same figure by Little's law: requests completed per second of the
    /// level x their mean latency (a failure: the time it took).
    pub littles_law_concurrency: f64,
    /// Whether the level kept at least 90% of its concurrency in flight; a
    /// level that did not is not counted toward the knee.
    pub kept_concurrency: bool,
    /// Requests that had to open a new connection.
    pub new_connections: u64,
    /// Time those requests spent opening it (DNS, TCP, TLS), seconds.
    pub connect_seconds: Percentiles,
    /// Completed streams whose `usage.completion_tokens` was 0 although they
    /// carried content: chunks were counted instead.
    pub usage_disagreements: u64,
    /// Whether the level stayed within the SLO.
    pub within_slo: bool,
}

/// Capacity verdict for one workload of one target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Capacity {
    /// Highest level within the SLO with every lower level within it too (0 if none).
    pub knee_concurrency: u32,
    /// Throughput at the knee, tokens per second (0 when there is no knee).
    pub throughput_tokens_per_second: f64,
    /// floor(knee x headroom), at least 1 when the knee is at least 1.
    pub recommended_max_in_flight: u32,
    /// First level whose throughput gain over the previous level is under 10%.
    pub saturation_concurrency: Option<u32>,
    /// Whether throughput saturated at or before the knee.
    pub saturated_before_knee: bool,
    /// Why climbing stopped, when it stopped below the last configured level.
    pub stopped_because: Option<String>,
    /// True when no measured level broke the SLO: the capacity is at least
    /// the knee, and was not measured higher.
    pub knee_is_lower_bound: bool,
}

/// Which request field carried the output limit, and how it was chosen.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct OutputLimit {
    /// `max_completion_tokens`, `max_tokens` or `both`.
    pub field: &'static str,
    /// `configured`, `default` (checked at warm-up and found to work) or
    /// `detected` (the default did not bound the output).
    pub source: &'static str,
    /// What warm-up saw, when the field was detected.
    pub note: Option<String>,
}

/// Results of one workload on one target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadReport {
    /// Workload name.
    pub workload: String,
    /// Levels measured, in order.
    pub levels: Vec<LevelSummary>,
    /// Knee and recommendation.
    pub capacity: Capacity,
}

/// Results of one sweep of one target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepReport {
    /// Target name.
    pub target: String,
    /// Model id requested.
    pub model: String,
    /// Whether every workload was measured to the end.
    pub success: bool,
    /// Why the sweep failed, when it did.
    pub error: Option<String>,
    /// Wall time of the whole sweep, seconds.
    pub duration_seconds: f64,
    /// Unix time at which it finished, seconds.
    pub finished_at_unix_seconds: f64,
    /// What the server told about itself.
    pub setup: crate::probe::setup::Setup,
    /// The request field that bounded the output.
    pub output_limit: OutputLimit,
    /// Per-workload results.
    pub workloads: Vec<WorkloadReport>,
}
