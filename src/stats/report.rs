//! The results of a sweep, as the terminal output, the JSON document and the
//! metrics read them. Plain data: produced by `stats`, `knee` and `sweep`.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use crate::stats::sample::Outcome;

/// How output tokens can have been counted (`LevelSummary::token_source`).
pub const TOKEN_SOURCES: [&str; 4] = ["usage", "chunks", "mixed", "none"];

/// A label from a fixed table. Spelt through an alias on purpose: serde's
/// derive takes a field written `&'static str` for one borrowed from the
/// input, which no owned document could deserialize into.
pub type Label = &'static str;

/// Reading a JSON document back: the reports hold outcome labels and token
/// sources as `&'static str` (they come from fixed tables), so each label
/// read is mapped to its table entry; an unknown one is an error, since it
/// would mean a document of another format.
pub mod labels {
    use super::*;

    fn outcome(label: &str) -> Option<&'static str> {
        Outcome::ALL
            .iter()
            .map(|o| o.as_str())
            .find(|known| *known == label)
    }

    /// A map keyed by outcome label.
    pub fn outcome_map<'de, D, V>(d: D) -> Result<BTreeMap<&'static str, V>, D::Error>
    where
        D: Deserializer<'de>,
        V: Deserialize<'de>,
    {
        BTreeMap::<String, V>::deserialize(d)?
            .into_iter()
            .map(|(k, v)| {
                outcome(&k)
                    .map(|k| (k, v))
                    .ok_or_else(|| serde::de::Error::custom(format!("unknown outcome `{k}`")))
            })
            .collect()
    }

    /// One of [`TOKEN_SOURCES`].
    pub fn token_source<'de, D: Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
        let s = String::deserialize(d)?;
        TOKEN_SOURCES
            .iter()
            .find(|known| **known == s)
            .copied()
            .ok_or_else(|| serde::de::Error::custom(format!("unknown token_source `{s}`")))
    }
}

fn yes() -> bool {
    true
}

/// Percentiles of one quantity in one level, with the sample count they rest on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
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

/// Summary of one concurrency level (Default: an empty level, for tests).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct LevelSummary {
    /// Requests kept in flight.
    pub concurrency: u32,
    /// Requests sent in the level.
    pub requests: u64,
    /// Requests per outcome, keyed by the outcome label.
    #[serde(deserialize_with = "labels::outcome_map")]
    pub outcomes: BTreeMap<&'static str, u64>,
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
    #[serde(default)]
    pub cached_prompt_tokens: u64,
    /// Wall time of the level, seconds.
    pub wall_seconds: f64,
    /// How output tokens were counted: "usage", "chunks" or "mixed".
    #[serde(deserialize_with = "labels::token_source")]
    pub token_source: Label,
    /// Output tokens per content chunk, where usage was reported (above 1:
    /// chunks carry several tokens and inter-token latency is per chunk).
    pub tokens_per_content_chunk: Option<f64>,
    /// Completed streams that ended without a `finish_reason`.
    pub streams_without_finish_reason: u64,
    /// The first error message of each failed outcome in the level, so that a
    /// sweep can say what went wrong without one log line per request.
    // Absent from documents written before it was added.
    #[serde(default, deserialize_with = "labels::outcome_map")]
    pub error_examples: BTreeMap<&'static str, String>,
    /// Latency of every request that counts in the decision (all but shed,
    /// rate-limited and cancelled ones; a failure counts the time it took, a
    /// timeout at least its limit), seconds: its p95 is what the SLO judges.
    #[serde(default)]
    pub decision_latency_seconds: Percentiles,
    /// Mean number of requests in flight while the level kept its loop full
    /// (from its start until the first request that was not replaced ended),
    /// weighted by time.
    #[serde(default)]
    pub achieved_concurrency: f64,
    /// The same figure by Little's law: requests completed per second of the
    /// level x their mean latency (a failure: the time it took).
    #[serde(default)]
    pub littles_law_concurrency: f64,
    /// Whether the level kept at least 90% of its concurrency in flight; a
    /// level that did not is not counted toward the knee.
    #[serde(default = "yes")]
    pub kept_concurrency: bool,
    /// Requests that had to open a new connection.
    #[serde(default)]
    pub new_connections: u64,
    /// Time those requests spent opening it (DNS, TCP, TLS), seconds.
    #[serde(default)]
    pub connect_seconds: Percentiles,
    /// Completed streams whose `usage.completion_tokens` was 0 although they
    /// carried content: chunks were counted instead.
    #[serde(default)]
    pub usage_disagreements: u64,
    /// Whether the level stayed within the SLO.
    pub within_slo: bool,
}

/// Capacity verdict for one workload of one target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    #[serde(default)]
    pub knee_is_lower_bound: bool,
}

/// Which request field carried the output limit, and how it was chosen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct OutputLimit {
    /// `max_completion_tokens`, `max_tokens` or `both`.
    pub field: String,
    /// `configured`, `default` (the default, checked at warm-up) or
    /// `detected` (the default did not bound the output).
    pub source: String,
    /// What warm-up saw, when the field was detected.
    pub note: Option<String>,
}

/// Results of one workload on one target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadReport {
    /// Workload name.
    pub workload: String,
    /// Levels measured, in order.
    pub levels: Vec<LevelSummary>,
    /// Knee and recommendation.
    pub capacity: Capacity,
}

/// Results of one sweep of one target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    #[serde(default)]
    pub setup: crate::probe::setup::Setup,
    /// The request field that bounded the output.
    #[serde(default)]
    pub output_limit: OutputLimit,
    /// Per-workload results.
    pub workloads: Vec<WorkloadReport>,
}
