//! The closed-form predictions of the performance model over the resolved
//! parameters ([`SimParams`], plain data of the configuration). The
//! scheduler computes its step durations with the same functions, so a
//! prediction and the implementation cannot drift apart.

use std::time::Duration;

pub use crate::config::simulator::{Engine, SimParams};

impl SimParams {
    /// Duration of one decode step with `batch` sequences, before prefill.
    pub fn step_duration(&self, batch: u32) -> Duration {
        self.step_base
            .saturating_add(scale(self.step_per_sequence, u64::from(batch)))
    }

    /// Time to prefill `prompt_tokens` prompt tokens (added to the step they join).
    pub fn prefill_duration(&self, prompt_tokens: u64) -> Duration {
        if prompt_tokens == 0 || self.engine == Engine::Stub {
            return Duration::ZERO;
        }
        let secs = prompt_tokens as f64 / self.prefill_tokens_per_second;
        Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
    }

    /// KV-cache tokens a running sequence holds: its prompt plus all it may generate.
    pub fn reservation(prompt_tokens: u64, max_tokens: u64) -> u64 {
        prompt_tokens.saturating_add(max_tokens)
    }

    /// Batch cap after the memory limit, for requests of this size (0: one does not fit).
    pub fn effective_batch(&self, prompt_tokens: u64, max_tokens: u64) -> u32 {
        let Some(kv) = self.kv_cache_tokens else {
            return self.max_batch;
        };
        let per_sequence = Self::reservation(prompt_tokens, max_tokens).max(1);
        let fit = u32::try_from(kv / per_sequence).unwrap_or(u32::MAX);
        fit.min(self.max_batch)
    }

    /// Predicted time from sending a request to its first token, in the closed-loop
    /// steady state with `concurrency` requests of the same size moving together
    /// (concurrency <= effective batch): an empty step waiting to join, then the
    /// join step carrying every sequence's prefill.
    pub fn predicted_ttft(&self, concurrency: u32, prompt_tokens: u64) -> Duration {
        if self.engine == Engine::Stub {
            return Duration::ZERO;
        }
        let c = u64::from(concurrency);
        self.step_base
            .saturating_add(self.step_duration(concurrency))
            .saturating_add(self.prefill_duration(prompt_tokens.saturating_mul(c)))
    }

    /// Model-predicted end-to-end latency of one request (send to last token) when
    /// `concurrency` requests are kept in flight closed-loop and concurrency <= effective
    /// batch cap: `(N+1) x step_base + N x c x step_per_sequence + prefill(c x prompt)`.
    pub fn predicted_latency(
        &self,
        concurrency: u32,
        prompt_tokens: u64,
        output_tokens: u64,
    ) -> Duration {
        if self.engine == Engine::Stub {
            return Duration::ZERO;
        }
        let c = u64::from(concurrency);
        scale(self.step_base, output_tokens.saturating_add(1))
            .saturating_add(scale(
                self.step_per_sequence,
                output_tokens.saturating_mul(c),
            ))
            .saturating_add(self.prefill_duration(prompt_tokens.saturating_mul(c)))
    }
}

/// `d x n` without the panic of `Duration * u32` on overflow.
fn scale(d: Duration, n: u64) -> Duration {
    let nanos = d.as_nanos().saturating_mul(u128::from(n));
    let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
    // The remainder is below 1e9, so it always fits in u32.
    let sub = (nanos % 1_000_000_000) as u32;
    Duration::new(secs, 0).saturating_add(Duration::from_nanos(u64::from(sub)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> SimParams {
        SimParams {
            engine: Engine::Model,
            model_name: "m".into(),
            prefill_tokens_per_second: 1000.0,
            step_base: Duration::from_millis(10),
            step_per_sequence: Duration::from_millis(1),
            max_batch: 8,
            max_in_flight: 16,
            kv_cache_tokens: None,
            max_model_len: 4096,
            default_max_tokens: 16,
            seed: 0,
            fail_ratio: 0.0,
            fail_status: 500,
            reset_ratio: 0.0,
            slow_ratio: 0.0,
            slow_delay: Duration::ZERO,
            prefix_cache_tokens: 0,
            reasoning_tokens: 0,
            reasoning_field: crate::config::simulator::ReasoningField::Reasoning,
        }
    }

    #[test]
    fn latency_is_steps_plus_prefill() {
        let p = params();
        // (4+1) x 10ms + 4 x 2 x 1ms + 2 x 100 / 1000 s
        assert_eq!(
            p.predicted_latency(2, 100, 4),
            Duration::from_millis(50 + 8 + 200)
        );
        // 10ms waiting + (10 + 2) ms step + 200ms prefill
        assert_eq!(p.predicted_ttft(2, 100), Duration::from_millis(222));
    }

    #[test]
    fn ttft_plus_remaining_steps_is_latency() {
        let p = params();
        for c in [1, 3, 8] {
            let rest = p.step_duration(c) * 9;
            assert_eq!(
                p.predicted_ttft(c, 50) + rest,
                p.predicted_latency(c, 50, 10)
            );
        }
    }

    #[test]
    fn memory_caps_the_batch() {
        let mut p = params();
        assert_eq!(p.effective_batch(100, 100), 8);
        p.kv_cache_tokens = Some(1000);
        assert_eq!(p.effective_batch(100, 100), 5);
        assert_eq!(p.effective_batch(600, 600), 0);
    }

    #[test]
    fn huge_values_saturate() {
        let mut p = params();
        p.step_base = Duration::from_secs(3600);
        assert_eq!(
            p.predicted_latency(u32::MAX, u64::MAX, u64::MAX),
            Duration::MAX
        );
    }

    #[test]
    fn small_gpu_matches_its_description() {
        let p = crate::config::simulator::SimConfig::default()
            .resolve()
            .unwrap();
        let single = 1.0 / p.step_duration(1).as_secs_f64();
        assert!((40.0..45.0).contains(&single), "{single}");
        assert_eq!(p.effective_batch(20, 256), 16);
    }
}
