//! `probe:` of a target: the light requests sent between sweeps, one at a
//! time on a Poisson schedule, that give availability and TTFT as
//! service-level indicators (docs/measuring.md, "Probes between sweeps").
//! Plain data: written ([`ProbeFile`], merged key by key as `slo`) and
//! resolved ([`ProbeSettings`]).

use std::time::Duration;

use serde::Deserialize;

/// Mean time between two probes: an outage shows within a minute or two,
/// at 2,880 short requests a day per target.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(30);
/// Output budget of a probe: enough for an answer to begin, cheap enough to
/// send all day.
pub const DEFAULT_MAX_COMPLETION_TOKENS: u32 = 16;
/// A probe after this long without any request from llmprobe is a cold
/// start: Ollama unloads an idle model after 5 minutes by default.
pub const DEFAULT_COLD_AFTER: Duration = Duration::from_secs(300);
/// Shortest mean interval: probes are a trickle, not a load.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);
/// Reasoning models think for hundreds of tokens before answering: a
/// budget under this many is spent on thinking (`check-config` says so).
pub const REASONING_BUDGET_HINT: u32 = 1024;

/// `probe:` as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeFile {
    /// Mean time between probes (Poisson arrivals); `0s`: no probes.
    #[serde(default, with = "humantime_serde")]
    pub interval: Option<Duration>,
    /// The workload whose prompts probes send (default: the target's first).
    pub workload: Option<String>,
    /// The output budget of one probe.
    pub max_completion_tokens: Option<u32>,
    /// A probe after this long without a request from llmprobe is cold.
    #[serde(default, with = "humantime_serde")]
    pub cold_after: Option<Duration>,
    /// Seed of the probe schedule (default: a new one per loop).
    pub seed: Option<u64>,
}

/// The probe stream, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeSettings {
    /// Mean time between probes; None: no probes.
    pub interval: Option<Duration>,
    /// The workload probes send (None: the target's first).
    pub workload: Option<String>,
    /// The output budget of one probe.
    pub max_completion_tokens: u32,
    /// Idle time after which a probe is cold.
    pub cold_after: Duration,
    /// Seed of the schedule (None: random).
    pub seed: Option<u64>,
}

impl Default for ProbeSettings {
    fn default() -> Self {
        ProbeSettings::from_file(ProbeFile::default())
    }
}

impl ProbeSettings {
    /// `probe:` with the default of each key it does not set.
    pub fn from_file(f: ProbeFile) -> Self {
        ProbeSettings {
            interval: match f.interval {
                Some(d) if d.is_zero() => None,
                Some(d) => Some(d),
                None => Some(DEFAULT_INTERVAL),
            },
            workload: f.workload,
            max_completion_tokens: f
                .max_completion_tokens
                .unwrap_or(DEFAULT_MAX_COMPLETION_TOKENS),
            cold_after: f.cold_after.unwrap_or(DEFAULT_COLD_AFTER),
            seed: f.seed,
        }
    }

    /// Every problem with the values, as (key suffix, message).
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut bad = Vec::new();
        if self.interval.is_some_and(|d| d < MIN_INTERVAL) {
            bad.push((
                ".interval",
                "must be at least 100ms (or 0s: no probes)".into(),
            ));
        }
        if self.max_completion_tokens == 0 {
            bad.push((".max_completion_tokens", "must be at least 1".into()));
        }
        if self.cold_after.is_zero() {
            bad.push((".cold_after", "must be more than 0s".into()));
        }
        bad
    }
}

/// Model names of families known to think before they answer (matched
/// without regard to case): Qwen3 and QwQ, DeepSeek-R1, gpt-oss, OpenAI's
/// o-series, Phi-4-reasoning, Magistral.
const REASONING_FAMILIES: [&str; 8] = [
    "qwen3",
    "qwq",
    "deepseek-r1",
    "gpt-oss",
    "o1",
    "o3",
    "o4",
    "magistral",
];

/// Whether a model is known to reason before answering: by its name, or
/// (`thinks`) because the built-in engine is set to.
pub fn known_to_reason(model: &str, thinks: bool) -> bool {
    let m = model.to_ascii_lowercase();
    let name = m.rsplit('/').next().unwrap_or(&m);
    thinks
        || REASONING_FAMILIES.iter().any(|f| name.starts_with(f))
        || name.contains("reasoning")
        || name.contains("-r1")
}

/// Merged key by key, as `slo`.
pub fn merge(near: Option<&ProbeFile>, far: Option<&ProbeFile>) -> Option<ProbeFile> {
    match (near, far) {
        (Some(n), Some(f)) => Some(ProbeFile {
            interval: n.interval.or(f.interval),
            workload: n.workload.clone().or_else(|| f.workload.clone()),
            max_completion_tokens: n.max_completion_tokens.or(f.max_completion_tokens),
            cold_after: n.cold_after.or(f.cold_after),
            seed: n.seed.or(f.seed),
        }),
        (n, f) => n.or(f).cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_by_default_and_off_at_zero() {
        let d = ProbeSettings::default();
        assert_eq!(d.interval, Some(Duration::from_secs(30)));
        assert_eq!((d.max_completion_tokens, d.cold_after.as_secs()), (16, 300));
        assert!(d.problems().is_empty());
        let off = ProbeSettings::from_file(ProbeFile {
            interval: Some(Duration::ZERO),
            ..Default::default()
        });
        assert_eq!(off.interval, None);
        assert!(off.problems().is_empty());
    }

    #[test]
    fn checks_name_their_keys() {
        let bad = ProbeSettings::from_file(ProbeFile {
            interval: Some(Duration::from_millis(10)),
            max_completion_tokens: Some(0),
            cold_after: Some(Duration::ZERO),
            ..Default::default()
        });
        let keys: Vec<&str> = bad.problems().iter().map(|p| p.0).collect();
        assert_eq!(keys, [".interval", ".max_completion_tokens", ".cold_after"]);
    }

    #[test]
    fn reasoning_models_are_known_by_name() {
        for m in [
            "Qwen/Qwen3-8B",
            "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
            "openai/gpt-oss-20b",
            "o3-mini",
        ] {
            assert!(known_to_reason(m, false), "{m}");
        }
        for m in [
            "meta-llama/Llama-3.1-8B-Instruct",
            "Qwen/Qwen2.5-7B-Instruct",
            "sim",
        ] {
            assert!(!known_to_reason(m, false), "{m}");
        }
        assert!(known_to_reason("sim", true));
    }

    #[test]
    fn merges_key_by_key() {
        let near = ProbeFile {
            max_completion_tokens: Some(64),
            ..Default::default()
        };
        let far = ProbeFile {
            interval: Some(Duration::from_secs(5)),
            max_completion_tokens: Some(8),
            ..Default::default()
        };
        let m = merge(Some(&near), Some(&far)).unwrap();
        assert_eq!(m.interval, Some(Duration::from_secs(5)));
        assert_eq!(m.max_completion_tokens, Some(64));
    }
}
