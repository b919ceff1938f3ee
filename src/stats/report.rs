//! The results llmprobe produces, as the terminal output, the JSON document,
//! the metrics and the index page read them: a sweep of a target, the
//! interleaved measurement of a gateway pair, and a target's status. Plain
//! data: produced by `stats`, `knee`, `sweep` and `schedule`.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use crate::config::Arrivals;
use crate::stats::decision::{Breach, Decision, Verdict};
use crate::stats::sample::{Outcome, ReasoningFields};
use crate::stats::server::{ServerMetrics, ServerSignals};
use crate::stats::setup_error::SetupError;

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

fn no_source() -> Label {
    "none"
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

/// Why a level was run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum LevelRole {
    /// One of the configured levels.
    #[default]
    Configured,
    /// A refinement probe between a passed and a broken level.
    Refinement,
}

impl LevelRole {
    /// The value used in JSON and tables.
    pub fn as_str(self) -> &'static str {
        match self {
            LevelRole::Configured => "configured",
            LevelRole::Refinement => "refinement",
        }
    }
}

/// What binds at the knee (decided by `stats::limit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// Latency broke while requests waited in the engine, which ran fewer
    /// than were in flight: its batch or sequence cap binds.
    Queue,
    /// Latency or shedding broke with the KV cache full, or with preemptions.
    KvCache,
    /// Latency broke with every request running: each step got slower.
    Compute,
    /// The shed ratio (503 and the like) broke.
    Shed,
    /// The shed ratio broke, mostly with 429.
    RateLimited,
    /// The error ratio broke (or no request succeeded).
    Errors,
    /// Requests fail whatever the load: the error ratio broke at the lowest
    /// level, or, pooled over the levels that did not break on errors
    /// themselves, it is over the limit at the verdict's confidence. Health,
    /// not capacity: the knee is 0.
    ErrorsAtEveryLoad,
    /// Latency broke and the server's metrics do not tell why.
    Latency,
    /// Requests run over the p95 limit whatever the load: the lowest level
    /// broke on latency, or, pooled over the levels whose share of slow
    /// requests does not grow with load, that share is over the p95's 5%
    /// at the verdict's confidence (outliers at any load). Health, not
    /// capacity: the knee is 0.
    LatencyAtEveryLoad,
    /// No level broke: the knee is a lower bound.
    NotReached,
}

impl Limit {
    /// Every limit, in the order of the docs.
    pub const ALL: [Limit; 10] = [
        Limit::Queue,
        Limit::KvCache,
        Limit::Compute,
        Limit::Shed,
        Limit::RateLimited,
        Limit::Errors,
        Limit::ErrorsAtEveryLoad,
        Limit::Latency,
        Limit::LatencyAtEveryLoad,
        Limit::NotReached,
    ];

    /// The value in JSON, tables and the `limit` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Queue => "queue",
            Limit::KvCache => "kv_cache",
            Limit::Compute => "compute",
            Limit::Shed => "shed",
            Limit::RateLimited => "rate_limited",
            Limit::Errors => "errors",
            Limit::ErrorsAtEveryLoad => "errors_at_every_load",
            Limit::Latency => "latency",
            Limit::LatencyAtEveryLoad => "latency_at_every_load",
            Limit::NotReached => "not_reached",
        }
    }
}

/// A level stopped as soon as its verdict was certain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EarlyStop {
    /// The limit the full level was certain to break.
    pub breach: Breach,
    /// Requests of the planned count never sent.
    pub saved_requests: u64,
}

/// Summary of one concurrency level (Default: an empty level, for tests).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct LevelSummary {
    /// Requests kept in flight.
    pub concurrency: u32,
    /// Configured level or refinement probe.
    // The three fields below are absent from documents written before them.
    #[serde(default)]
    pub role: LevelRole,
    /// Requests sent in the level (those cancelled in flight included).
    pub requests: u64,
    /// Requests the level was to send (0 in documents written before it).
    #[serde(default)]
    pub planned_requests: u64,
    /// Set when the level stopped before sending all of them, its verdict
    /// (a break) already certain; its requests in flight were cancelled.
    #[serde(default)]
    pub stopped_early: Option<EarlyStop>,
    /// Requests per outcome, keyed by the outcome label.
    #[serde(deserialize_with = "labels::outcome_map")]
    pub outcomes: BTreeMap<&'static str, u64>,
    /// Fraction of requests shed (503) or rate limited (429).
    pub shed_ratio: f64,
    /// Fraction failed for any other reason.
    pub error_ratio: f64,
    /// Time to first token, seconds.
    pub ttft_seconds: Percentiles,
    /// Time to the first answer token (content or a tool call, after any
    /// thinking), seconds; equal to `ttft_seconds` for a model that does not
    /// reason. Its count leaves out completed requests that never answered.
    // The four fields below are absent from documents written before them.
    #[serde(default)]
    pub answer_ttft_seconds: Percentiles,
    /// Reasoning tokens of the completed requests (see `reasoning_token_source`).
    #[serde(default)]
    pub reasoning_tokens: u64,
    /// How they were counted: "usage" (`completion_tokens_details.reasoning_tokens`),
    /// "chunks" (chunks that carried thinking), "mixed" or "none".
    #[serde(default = "no_source", deserialize_with = "labels::token_source")]
    pub reasoning_token_source: Label,
    /// Completed requests whose stream thought and never answered (the output
    /// limit spent on thinking).
    #[serde(default)]
    pub requests_without_answer: u64,
    /// The delta fields the level's thinking came in; the sweep reports
    /// them once, in `setup.reasoning_field`, so they are not written here.
    #[serde(skip)]
    pub reasoning_fields: ReasoningFields,
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
    /// Completed streams whose usage report was not trusted (see
    /// `Sample::usage_disagreed`): chunks were counted instead.
    #[serde(default)]
    pub usage_disagreements: u64,
    /// Unix time at which the level ended, seconds (0 in documents written
    /// before it: the sweep's end then stands for it).
    #[serde(default)]
    pub measured_at_unix_seconds: f64,
    /// The statistical verdict (None in documents written before it).
    #[serde(default)]
    pub verdict: Option<Verdict>,
    /// What the server's own metrics said during the level (None: not read).
    #[serde(default)]
    pub server: Option<ServerSignals>,
    /// How late llmprobe's own runtime woke while the level ran (None: not
    /// watched, or in documents written before it).
    #[serde(default)]
    pub client_lag: Option<crate::stats::lag::ClientLag>,
    /// Whether the level counts toward the knee: its verdict passed (a
    /// break or an undecided level does not).
    pub within_slo: bool,
}

impl LevelSummary {
    /// Whether the knee counts the level as undecided: over a limit without
    /// evidence, never decided before on this server. Such a level (when it
    /// kept its concurrency) neither raises nor lowers the knee.
    pub fn undecided(&self) -> bool {
        self.kept_concurrency
            && self
                .verdict
                .as_ref()
                .is_some_and(|v| v.counted_as == Decision::Undecided)
    }

    /// Whether the level ends the run of levels the knee rests on: over the
    /// SLO (decided, or counted as it was last decided), or short of its
    /// concurrency.
    pub fn stops_knee(&self) -> bool {
        !self.kept_concurrency || (!self.within_slo && !self.undecided())
    }

    /// Requests of the level that ended with `outcome`.
    pub fn count(&self, outcome: Outcome) -> u64 {
        count(&self.outcomes, outcome)
    }

    /// Requests the server declined for load (every outcome that
    /// [`Outcome::is_shed`]).
    pub fn shed(&self) -> u64 {
        Outcome::ALL
            .into_iter()
            .filter(|o| o.is_shed())
            .map(|o| self.count(o))
            .sum()
    }
}

/// The count of `outcome` in a map keyed by outcome label (0 when absent).
pub(crate) fn count(outcomes: &BTreeMap<&'static str, u64>, outcome: Outcome) -> u64 {
    outcomes.get(outcome.as_str()).copied().unwrap_or(0)
}

/// Capacity verdict for one workload of one target (Default: no knee, for tests).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Capacity {
    /// Highest level within the SLO with every lower level within it too (0 if none).
    pub knee_concurrency: u32,
    /// Throughput at the knee, tokens per second (0 when there is no knee).
    pub throughput_tokens_per_second: f64,
    /// Completed requests per second of the knee level (0 when there is no
    /// knee): the sustainable request rate, in the unit autoscalers use.
    // The two fields below are absent from documents written before them.
    #[serde(default)]
    pub requests_per_second: f64,
    /// Completed requests of the knee level that rate rests on.
    #[serde(default)]
    pub requests_per_second_samples: u64,
    /// floor(knee x headroom), at least 1 when the knee is at least 1.
    pub recommended_max_in_flight: u32,
    /// First level whose throughput gain over the previous level is under 10%.
    pub saturation_concurrency: Option<u32>,
    /// Whether throughput saturated at or before the knee.
    pub saturated_before_knee: bool,
    /// Why climbing stopped, when it stopped below the last configured level.
    pub stopped_because: Option<String>,
    /// True when no level broke the SLO and every level the climb was to
    /// run was measured (or known from an earlier sweep): the capacity is at
    /// least the knee, and was not measured higher. False when levels above
    /// the knee were not measured (`levels_not_measured`) and nothing stood
    /// in for them.
    #[serde(default)]
    pub knee_is_lower_bound: bool,
    /// Levels this sweep was to run but could not measure: their places in
    /// the global cap were not free within the wait (other targets held
    /// them), or the client could not keep up (`not_measured_client`).
    #[serde(default)]
    pub levels_not_measured: Vec<u32>,
    /// Set when the `levels_not_measured` are so because the client could
    /// not keep up (`stats::client`): the first of them broke on the
    /// client's account, again on each retry; else they waited in vain for
    /// places in the global cap.
    #[serde(default)]
    pub not_measured_client: Option<String>,
    /// Whether the knee and recommendation rest on levels measured by an
    /// earlier sweep in place of the `levels_not_measured` (see
    /// `WorkloadReport::carried_levels`).
    #[serde(default)]
    pub knee_carried_over: bool,
    /// When the level the knee rests on was measured, Unix seconds (None
    /// without a knee).
    #[serde(default)]
    pub knee_measured_at_unix_seconds: Option<f64>,
    /// What binds at the knee (None only in documents written before it).
    #[serde(default)]
    pub limit: Option<Limit>,
    /// The highest open-loop arrival rate within the SLO (None: not
    /// searched, in this sweep or a recent one).
    #[serde(default)]
    pub sustained: Option<Sustained>,
    /// True when a level the knee depends on (below the first level that
    /// broke) was undecided with no earlier verdict to count: the knee
    /// skipped it, and could be lower than it says.
    #[serde(default)]
    pub knee_undecided: bool,
    /// Sweeps, this one included, since the workload's error ratio or share
    /// of slow requests changed beyond chance
    /// (`stats::limit::health_changed`); None when neither did. The loop's
    /// evidence keeps only those sweeps at every level. Not in documents:
    /// it steers the next sweep, and says nothing the knee and limit do not.
    #[serde(skip)]
    pub health_changed_sweeps: Option<u32>,
}

/// Which request field carried the output limit, and how it was chosen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct OutputLimit {
    /// `max_completion_tokens`, `max_tokens` or `both`.
    pub field: String,
    /// `configured`, `default` (the default, checked on every answer),
    /// `detected` (the default did not bound the output) or `unbounded`
    /// (no field did: the sweep failed saying so).
    pub source: String,
    /// What the answers said of the fields left behind (or that none was
    /// checked).
    pub note: Option<String>,
    /// Sweeps of the same server a detected field has been kept since it
    /// was found (0: found by this sweep); the default is tried again after
    /// `sweep::output_limit::RECHECK_EVERY_SWEEPS`.
    #[serde(default)]
    pub kept_sweeps: u32,
    /// Which answers showed the field left behind unbounded, for a
    /// `detected` field (None otherwise, and in documents written before
    /// it); kept with the field by the sweeps that keep it.
    #[serde(default)]
    pub found_in: Option<FoundIn>,
}

/// Which answers an output-limit field was found unbounded in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FoundIn {
    /// The warm-up before the first level.
    WarmUp,
    /// The requests that open a level's connections before it is counted.
    Pool,
    /// A level's counted requests.
    Counted,
}

/// Results of one workload on one target.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkloadReport {
    /// Workload name.
    pub workload: String,
    /// Levels measured, by concurrency.
    pub levels: Vec<LevelSummary>,
    /// Configured levels a warm start did not run (up to half the last knee).
    #[serde(default)]
    pub skipped_levels: Vec<u32>,
    /// Levels this sweep did not run (skipped by a warm start, or not
    /// measured for lack of places) as the target's loop last measured them,
    /// each with its `measured_at_unix_seconds`; the knee and saturation are
    /// judged over them and `levels` together.
    #[serde(default)]
    pub carried_levels: Vec<LevelSummary>,
    /// Knee and recommendation.
    pub capacity: Capacity,
}

/// Whether a sweep climbed every level from the lowest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SweepKind {
    /// Every configured level from the lowest.
    #[default]
    Full,
    /// The baseline, then the levels above half the last knee.
    Warm,
}

impl SweepKind {
    /// The value of the `kind` label.
    pub fn as_str(self) -> &'static str {
        match self {
            SweepKind::Full => "full",
            SweepKind::Warm => "warm",
        }
    }
}

/// Results of one sweep of one target.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepReport {
    /// Target name.
    pub target: String,
    /// Full climb or warm start.
    #[serde(default)]
    pub kind: SweepKind,
    /// Model id requested.
    pub model: String,
    /// Whether every workload was measured to the end.
    pub success: bool,
    /// Why the sweep failed, when it did.
    pub error: Option<String>,
    /// The setup mistake that stopped it, when one did (then `error` is its line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_error: Option<SetupError>,
    /// Wall time of the whole sweep, seconds.
    pub duration_seconds: f64,
    /// Unix time at which it finished, seconds.
    pub finished_at_unix_seconds: f64,
    /// What the server told about itself.
    #[serde(default)]
    pub setup: Setup,
    /// The request field that bounded the output.
    #[serde(default)]
    pub output_limit: OutputLimit,
    /// Where the server's own metrics were read, if anywhere.
    #[serde(default)]
    pub server_metrics: ServerMetrics,
    /// Per-workload results.
    pub workloads: Vec<WorkloadReport>,
}

/// What a server told about itself (see `probe::setup`, which asks).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Setup {
    /// Server kind (`vllm`, `tgi`, `llama.cpp`, `ollama`, or the `server` header's product), "" if unknown.
    pub server: String,
    /// Server version, "" if unknown.
    pub server_version: String,
    /// Model ids listed by `GET /models` (empty when not served).
    pub models: Vec<String>,
    /// Whether the configured model is among them (None when the list is unavailable).
    pub model_listed: Option<bool>,
    /// The delta field(s) a reasoning model streamed its thinking in:
    /// "reasoning" (current vLLM), "reasoning_content" (older vLLM, SGLang,
    /// DeepSeek), both, or "" when no thinking was seen.
    #[serde(default)]
    pub reasoning_field: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::pair_report::SideSummary;
    use crate::stats::status::TargetStatus;

    fn sweep(success: bool, at: f64) -> SweepReport {
        SweepReport {
            setup_error: None,
            target: "w1".to_string(),
            kind: SweepKind::Full,
            model: "qwen".to_string(),
            success,
            error: (!success).then(|| "HTTP 503".to_string()),
            duration_seconds: 1.0,
            finished_at_unix_seconds: at,
            setup: Setup::default(),
            output_limit: Default::default(),
            server_metrics: Default::default(),
            workloads: Vec::new(),
        }
    }

    #[test]
    fn status_keeps_the_last_success_through_failures() {
        let mut s = TargetStatus::new("w1", "qwen");
        assert_eq!((s.last_success_unix, s.last_error.as_deref()), (None, None));
        s.record(&sweep(true, 10.0));
        s.record(&sweep(false, 20.0));
        assert_eq!(s.last_success_unix, Some(10.0));
        assert_eq!(s.last_error.as_deref(), Some("HTTP 503"));
        s.record(&sweep(true, 30.0));
        assert_eq!((s.last_success_unix, s.last_error), (Some(30.0), None));
    }

    #[test]
    fn counts_read_the_outcome_map() {
        let mut outcomes = BTreeMap::new();
        outcomes.insert(Outcome::Ok.as_str(), 5);
        outcomes.insert(Outcome::Shed.as_str(), 2);
        outcomes.insert(Outcome::RateLimited.as_str(), 1);
        let side = SideSummary {
            target: "gw".to_string(),
            requests: 8,
            outcomes,
            latency_seconds: Percentiles::default(),
            ttft_seconds: Percentiles::default(),
            first_error: None,
        };
        assert_eq!(side.count(Outcome::Ok), 5);
        assert_eq!(side.count(Outcome::Timeout), 0, "absent counts 0");
    }
}

// The sustained rate (open loop): what `stats::sustained` judges and
// `sweep::sustained` searches.

/// How a step of the search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepResult {
    /// The SLO held at this rate.
    Pass,
    /// The SLO broke at this rate (with the step's confidence).
    Break,
    /// A share was over its limit, or not clearly within it
    /// ([`PASS_CONFIDENCE`]), but not over it at the step's confidence:
    /// counted as a break by the search (a rate is claimed only where it
    /// clearly held).
    Undecided,
    /// The client could not offer the traffic (dispatch lag, its ceiling on
    /// requests in flight, or the sweep's end): nothing said of the server.
    NotMeasured,
}

impl StepResult {
    /// The name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            StepResult::Pass => "pass",
            StepResult::Break => "break",
            StepResult::Undecided => "undecided",
            StepResult::NotMeasured => "not_measured",
        }
    }
}

/// One step of the search: a fixed arrival rate for a while.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateStep {
    /// The arrival rate asked for, requests per second.
    pub offered_requests_per_second: f64,
    /// Seed of the step's arrival schedule.
    pub seed: u64,
    /// Arrivals scheduled, the uncounted first ones included.
    pub scheduled: u64,
    /// First arrivals sent but not counted (the server starts empty).
    pub uncounted: u64,
    /// Counted arrivals whose request was sent.
    pub sent: u64,
    /// Counted arrivals not sent because the client's ceiling on requests
    /// in flight was reached (never queued, never sent later).
    pub not_sent_client_ceiling: u64,
    /// Counted requests that ended (neither unsent nor cancelled), per
    /// second of the counted window.
    pub achieved_requests_per_second: f64,
    /// Counted requests that succeeded within the p95 latency limit
    /// (scheduled latency), per second of the counted window.
    pub goodput_requests_per_second: f64,
    /// Shed (503, 429) requests over counted requests that ended.
    pub shed_ratio: f64,
    /// Other failures over counted requests that ended.
    pub error_ratio: f64,
    /// End minus scheduled send of each counted request (a failure: when
    /// it failed): the latency a user arriving at that moment saw.
    pub scheduled_latency_seconds: Percentiles,
    /// End minus actual send, as the closed-loop levels report it.
    pub latency_seconds: Percentiles,
    /// Time to first token from the actual send.
    pub ttft_seconds: Percentiles,
    /// Actual send minus scheduled send, of every arrival sent.
    pub dispatch_lag_seconds: Percentiles,
    /// Requests in flight at each send: p99.
    pub in_flight_p99: f64,
    /// Requests in flight at each send: the most.
    pub in_flight_max: u32,
    /// From the first scheduled arrival to the last end.
    pub duration_seconds: f64,
    /// Whether the step stopped as soon as it was certain to break.
    pub stopped_early: bool,
    /// The verdict on the counted requests (scheduled latency as latency).
    pub verdict: Verdict,
    /// Whether the step was the longer one that confirms the rate the
    /// search found (its verdict decides whether the rate stands).
    #[serde(default)]
    pub confirmation: bool,
    /// How the step ended.
    pub result: StepResult,
    /// Why a step was not measured.
    pub note: Option<String>,
}

/// Whether the sustained rate was found, bounded or not measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SustainedStatus {
    /// A passing and a breaking rate within the resolution: the rate is found.
    Measured,
    /// The highest rate tried held, or the budget ended before a break
    /// bracketed it: the server sustains at least this much.
    LowerBound,
    /// A rate held its exploring step, but its confirmation did not fit
    /// the budget: reported, not decided (consumers that size on decided
    /// rates leave it out).
    Unconfirmed,
    /// No rate could be established (the client could not offer the
    /// traffic, or the budget ran out first): never a rate of 0.
    NotMeasured,
    /// Even the lowest rate tried broke the SLO: the server sustains none.
    Zero,
}

impl SustainedStatus {
    /// The label value used in metrics and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            SustainedStatus::Measured => "measured",
            SustainedStatus::LowerBound => "lower_bound",
            SustainedStatus::Unconfirmed => "unconfirmed",
            SustainedStatus::NotMeasured => "not_measured",
            SustainedStatus::Zero => "zero",
        }
    }
}

/// What the search found for one workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sustained {
    /// The highest arrival rate at which the SLO held, requests per second
    /// (None: not measured).
    pub requests_per_second: Option<f64>,
    /// Measured, a lower bound, zero, or not measured.
    pub status: SustainedStatus,
    /// Why the search ended where it did.
    pub why: String,
    /// The confidence of each step's verdict.
    pub confidence: f64,
    /// The search's resolution (relative gap between pass and break).
    pub resolution: f64,
    /// How arrivals came.
    pub arrivals: Arrivals,
    /// The rate the search started from (its prediction, or the last
    /// sustained rate for a warm start).
    pub start_requests_per_second: f64,
    /// How the start was chosen: `erlang_b`, `erlang_c`, `queue` or `warm`.
    pub start_from: String,
    /// The closed-loop rate at the knee, for comparison.
    pub closed_loop_requests_per_second: f64,
    /// Requests the search sent (every step, uncounted ones included).
    pub requests: u64,
    /// When the search ended, Unix seconds.
    pub measured_at_unix_seconds: f64,
    /// Sweeps since the search ran: 0 when this sweep ran it, else the
    /// figure is carried from an earlier sweep (`every`).
    #[serde(default)]
    pub sweeps_since_measured: u32,
    /// Each step, in the order run.
    pub steps: Vec<RateStep>,
}

impl Sustained {
    /// The rate over the closed-loop rate at the knee (None without both).
    pub fn share_of_closed_loop(&self) -> Option<f64> {
        let r = self.requests_per_second?;
        (self.closed_loop_requests_per_second > 0.0)
            .then(|| r / self.closed_loop_requests_per_second)
    }

    /// Whether this sweep measured it (not carried from an earlier one).
    pub fn is_fresh(&self) -> bool {
        self.sweeps_since_measured == 0
    }
}
