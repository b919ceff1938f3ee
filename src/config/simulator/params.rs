//! The resolved parameters of one simulated server, which engine answers,
//! and where a reasoning model streams its thinking.

use std::time::Duration;

/// What answers the requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// Continuous-batching performance model: queue, prefill, decode steps, memory.
    Model,
    /// No model time: each answer is built at once, to measure only the HTTP path.
    Stub,
}

/// The delta field a reasoning model streams its thinking in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningField {
    /// `delta.reasoning`: current vLLM.
    Reasoning,
    /// `delta.reasoning_content`: older vLLM, SGLang, DeepSeek.
    ReasoningContent,
}

impl ReasoningField {
    /// The field's name in a chunk's `delta`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningField::Reasoning => "reasoning",
            ReasoningField::ReasoningContent => "reasoning_content",
        }
    }
}

/// Resolved parameters of one simulated server (a profile plus overrides);
/// the performance model's formulas over them are in `sim::params`.
#[derive(Debug, Clone, PartialEq)]
pub struct SimParams {
    /// Which engine answers.
    pub engine: Engine,
    /// Model id listed by `/v1/models` (any requested name is accepted).
    pub model_name: String,
    /// Prompt tokens processed per second by prefill.
    pub prefill_tokens_per_second: f64,
    /// Fixed cost of one decode step, whatever the batch size.
    pub step_base: Duration,
    /// Extra cost of one decode step for each sequence in the batch.
    pub step_per_sequence: Duration,
    /// Most sequences decoded together.
    pub max_batch: u32,
    /// Requests admitted (running + queued) beyond which a new one gets 503; `u32::MAX` means no limit.
    pub max_in_flight: u32,
    /// KV-cache capacity in tokens; a running sequence reserves prompt + max tokens of it.
    pub kv_cache_tokens: Option<u64>,
    /// Context window: a request whose prompt + max tokens exceed it gets 400.
    pub max_model_len: u64,
    /// Output tokens of a request that sets no limit (clipped to the context window).
    pub default_max_tokens: u32,
    /// Seed of the generated text and of fault injection.
    pub seed: u64,
    /// Fraction of requests answered at once with `fail_status`.
    pub fail_ratio: f64,
    /// HTTP status of the injected failures.
    pub fail_status: u16,
    /// Fraction of the remaining requests whose connection is cut mid-stream.
    pub reset_ratio: f64,
    /// Fraction of the admitted requests held `slow_delay` before their
    /// answer starts (rare latency outliers).
    pub slow_ratio: f64,
    /// How long an outlier is held.
    pub slow_delay: Duration,
    /// Prompt tokens kept in the prefix cache (0: no cache): a prompt whose
    /// leading blocks are cached skips their prefill.
    pub prefix_cache_tokens: u64,
    /// Tokens of thinking streamed before the answer, within the request's
    /// output limit, as a reasoning model does (0: the model does not reason).
    pub reasoning_tokens: u32,
    /// The delta field the thinking is streamed in.
    pub reasoning_field: ReasoningField,
}
