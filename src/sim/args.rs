//! The CLI form of a simulated server: `llmprobe simulate` flags.

use std::net::SocketAddr;
use std::time::Duration;

use clap::builder::PossibleValue;

use super::params::Engine;
use super::{SimConfig, DEFAULT_PROFILE};
use crate::config::simulator::ReasoningField;

/// The CLI form: `llmprobe simulate --listen ADDR --profile NAME ...`, with the
/// same overrides as the YAML form.
#[derive(Debug, Clone, clap::Args)]
pub struct SimArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8000")]
    pub listen: SocketAddr,
    /// Profile to start from: tiny, small-gpu, large-gpu, stub.
    #[arg(long, default_value = DEFAULT_PROFILE)]
    pub profile: String,
    /// Engine: model (performance model) or stub (no model time).
    #[arg(long, value_enum)]
    pub engine: Option<Engine>,
    /// Model id listed by /v1/models.
    #[arg(long = "model", alias = "model-name")]
    pub model_name: Option<String>,
    /// Prompt tokens processed per second by prefill.
    #[arg(long)]
    pub prefill_tokens_per_second: Option<f64>,
    /// Fixed cost of one decode step (e.g. 20ms).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub step_base: Option<Duration>,
    /// Extra cost of one decode step per sequence in the batch (e.g. 1500us).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub step_per_sequence: Option<Duration>,
    /// Most sequences decoded together.
    #[arg(long)]
    pub max_batch: Option<u32>,
    /// Requests running + queued beyond which new ones get 503 (0: no limit).
    #[arg(long)]
    pub max_in_flight: Option<u32>,
    /// KV-cache capacity in tokens (0: no memory limit).
    #[arg(long)]
    pub kv_cache_tokens: Option<u64>,
    /// Context window in tokens (prompt + max tokens).
    #[arg(long)]
    pub max_model_len: Option<u64>,
    /// Output tokens of a request that sets no limit.
    #[arg(long)]
    pub default_max_tokens: Option<u32>,
    /// Seed of the generated text and of fault injection.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Fraction (0-1) of requests answered at once with --fail-status.
    #[arg(long)]
    pub fail_ratio: Option<f64>,
    /// HTTP status of injected failures.
    #[arg(long)]
    pub fail_status: Option<u16>,
    /// Fraction (0-1) of the other requests whose connection is cut mid-stream.
    #[arg(long)]
    pub reset_ratio: Option<f64>,
    /// Fraction (0-1) of the admitted requests held `--slow-delay` before answering.
    #[arg(long)]
    pub slow_ratio: Option<f64>,
    /// How long those requests are held, e.g. 2s.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub slow_delay: Option<std::time::Duration>,
    /// Prompt tokens the prefix cache holds (0: no prefix cache).
    #[arg(long)]
    pub prefix_cache_tokens: Option<u64>,
    /// Tokens of thinking streamed before the answer, within the output limit (0: none).
    #[arg(long)]
    pub reasoning_tokens: Option<u32>,
    /// Delta field of the thinking: reasoning (current vLLM) or reasoning_content (older vLLM, SGLang).
    #[arg(long, value_enum)]
    pub reasoning_field: Option<ReasoningField>,
}

impl SimArgs {
    /// Splits the flags into the listen address and the YAML-equivalent config.
    pub fn into_config(self) -> (SocketAddr, SimConfig) {
        let config = SimConfig {
            profile: self.profile,
            engine: self.engine,
            model_name: self.model_name,
            prefill_tokens_per_second: self.prefill_tokens_per_second,
            step_base: self.step_base,
            step_per_sequence: self.step_per_sequence,
            max_batch: self.max_batch,
            max_in_flight: self.max_in_flight,
            kv_cache_tokens: self.kv_cache_tokens,
            max_model_len: self.max_model_len,
            default_max_tokens: self.default_max_tokens,
            seed: self.seed,
            fail_ratio: self.fail_ratio,
            fail_status: self.fail_status,
            reset_ratio: self.reset_ratio,
            slow_ratio: self.slow_ratio,
            slow_delay: self.slow_delay,
            prefix_cache_tokens: self.prefix_cache_tokens,
            reasoning_tokens: self.reasoning_tokens,
            reasoning_field: self.reasoning_field,
        };
        (self.listen, config)
    }
}

/// `--engine`: the engine is plain data of the configuration, so its
/// command-line form is written here rather than derived there.
impl clap::ValueEnum for Engine {
    fn value_variants<'a>() -> &'a [Self] {
        &[Engine::Model, Engine::Stub]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            Engine::Model => PossibleValue::new("model").help(
                "Continuous-batching performance model: queue, prefill, decode steps, memory",
            ),
            Engine::Stub => PossibleValue::new("stub")
                .help("No model time: each answer is built at once, to measure only the HTTP path"),
        })
    }
}

/// `--reasoning-field`, written here for the same reason as `--engine`'s.
impl clap::ValueEnum for ReasoningField {
    fn value_variants<'a>() -> &'a [Self] {
        &[ReasoningField::Reasoning, ReasoningField::ReasoningContent]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            ReasoningField::Reasoning => {
                PossibleValue::new("reasoning").help("delta.reasoning, as current vLLM")
            }
            ReasoningField::ReasoningContent => PossibleValue::new("reasoning_content")
                .help("delta.reasoning_content, as older vLLM, SGLang and DeepSeek"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        sim: SimArgs,
    }

    #[test]
    fn flags_become_the_same_config() {
        let cli = Cli::parse_from([
            "x",
            "--profile",
            "tiny",
            "--engine",
            "stub",
            "--max-batch",
            "3",
            "--step-base",
            "7ms",
            "--model",
            "qwen",
            "--reasoning-tokens",
            "6",
            "--reasoning-field",
            "reasoning_content",
        ]);
        let (addr, config) = cli.sim.into_config();
        assert_eq!(addr, "127.0.0.1:8000".parse().unwrap());
        assert_eq!(config.engine, Some(Engine::Stub));
        assert_eq!(config.max_batch, Some(3));
        assert_eq!(config.step_base, Some(Duration::from_millis(7)));
        assert_eq!(config.model_name.as_deref(), Some("qwen"));
        assert_eq!(config.reasoning_tokens, Some(6));
        assert_eq!(
            config.reasoning_field,
            Some(ReasoningField::ReasoningContent)
        );
    }
}
