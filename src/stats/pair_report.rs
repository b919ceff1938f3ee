//! What a gateway pair's measurement reports: each side's figures and the
//! overhead the gateway adds.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::stats::report::{count, labels, Percentiles};
use crate::stats::sample::Outcome;

/// What one side of a gateway pair measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideSummary {
    /// Target name.
    pub target: String,
    /// Counted requests sent (warm-up excluded).
    pub requests: u64,
    /// Requests per outcome, keyed by the outcome label.
    #[serde(deserialize_with = "labels::outcome_map")]
    pub outcomes: BTreeMap<&'static str, u64>,
    /// End-to-end latency of the successful requests, seconds.
    pub latency_seconds: Percentiles,
    /// Time to first token of the successful requests, seconds.
    pub ttft_seconds: Percentiles,
    /// The first failure, when there was one (for the operator, not a label).
    pub first_error: Option<String>,
}

impl SideSummary {
    /// Requests of the side that ended with `outcome`.
    pub fn count(&self, outcome: Outcome) -> u64 {
        count(&self.outcomes, outcome)
    }
}

/// Result of one interleaved measurement of a gateway pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairReport {
    /// Pair name (the `pair` label).
    pub pair: String,
    /// Workload sent to both sides.
    pub workload: String,
    /// Requests in flight on a side during one batch.
    pub concurrency: u32,
    /// Whether both sides were measured to the end with at least one success each.
    pub success: bool,
    /// Why the measurement failed, when it did.
    pub error: Option<String>,
    /// The stub engine reached directly.
    pub direct: SideSummary,
    /// The stub engine reached through the gateway.
    pub through: SideSummary,
    /// Through minus direct, per latency percentile; `count` is the smaller
    /// of the two sides' successful requests.
    pub latency_overhead_seconds: Percentiles,
    /// Through minus direct, per TTFT percentile; `count` as above.
    pub ttft_overhead_seconds: Percentiles,
    /// Wall time of the measurement, warm-up included, seconds.
    pub duration_seconds: f64,
    /// Unix time at which it finished, seconds.
    pub finished_at_unix_seconds: f64,
}
