//! The built-in profiles: realistic parameter sets that need no flags.

use std::time::Duration;

use super::params::{Engine, ReasoningField, SimParams};

/// The profile used when none is named.
pub const DEFAULT_PROFILE: &str = "small-gpu";

/// Names and one-line descriptions of the built-in profiles.
pub fn profiles() -> &'static [(&'static str, &'static str)] {
    &[
        (
            "tiny",
            "fast toy server for tests and the default config: 4 sequences per batch, sheds above 8 in flight",
        ),
        (
            "small-gpu",
            "7B model on a 24 GB GPU: ~43 tok/s single stream, flattens at 16 sequences, sheds above 32",
        ),
        (
            "large-gpu",
            "70B model (fp8) on an 80 GB GPU: ~31 tok/s single stream, 64 sequences, memory-bound on long prompts",
        ),
        (
            "stub",
            "no model time: answers at once, to measure the HTTP path and gateway overhead",
        ),
    ]
}

/// The parameters of a named profile.
pub(super) fn profile(name: &str) -> Option<SimParams> {
    let ms = Duration::from_millis;
    let us = Duration::from_micros;
    let base = SimParams {
        engine: Engine::Model,
        model_name: "llmprobe-sim".to_string(),
        prefill_tokens_per_second: 4000.0,
        step_base: ms(22),
        step_per_sequence: us(1500),
        max_batch: 16,
        max_in_flight: 32,
        kv_cache_tokens: Some(12_288),
        max_model_len: 8192,
        default_max_tokens: 256,
        seed: 0,
        fail_ratio: 0.0,
        fail_status: 500,
        reset_ratio: 0.0,
        slow_ratio: 0.0,
        slow_delay: Duration::ZERO,
        // As vLLM: on by default, in the memory the KV cache does not use.
        prefix_cache_tokens: 65_536,
        reasoning_tokens: 0,
        reasoning_field: ReasoningField::Reasoning,
    };
    let params = match name {
        "tiny" => SimParams {
            model_name: "sim-tiny".to_string(),
            prefill_tokens_per_second: 50_000.0,
            step_base: ms(4),
            step_per_sequence: us(500),
            max_batch: 4,
            max_in_flight: 8,
            kv_cache_tokens: None,
            max_model_len: 4096,
            default_max_tokens: 32,
            ..base
        },
        "small-gpu" => SimParams {
            model_name: "sim-7b".to_string(),
            ..base
        },
        "large-gpu" => SimParams {
            model_name: "sim-70b".to_string(),
            step_base: ms(32),
            step_per_sequence: us(400),
            max_batch: 64,
            max_in_flight: 96,
            prefill_tokens_per_second: 6000.0,
            kv_cache_tokens: Some(40_960),
            max_model_len: 32_768,
            ..base
        },
        "stub" => SimParams {
            engine: Engine::Stub,
            model_name: "sim-stub".to_string(),
            step_base: Duration::ZERO,
            step_per_sequence: Duration::ZERO,
            max_batch: u32::MAX,
            max_in_flight: u32::MAX,
            kv_cache_tokens: None,
            max_model_len: 32_768,
            default_max_tokens: 16,
            prefix_cache_tokens: 0,
            ..base
        },
        _ => return None,
    };
    Some(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_exists() {
        for (name, _) in profiles() {
            assert!(profile(name).is_some(), "{name}");
        }
        assert!(profile(DEFAULT_PROFILE).is_some());
    }
}
