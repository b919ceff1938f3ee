//! The `simulator:` section of a target: the simulated server's settings as
//! written ([`SimConfig`], also the `llmprobe simulate` flags) and resolved
//! ([`SimParams`]: a profile, then overrides, then checks). Plain data; the
//! simulated engine that runs on them is `sim`.

mod params;
mod profiles;

use std::time::Duration;

pub use params::{Engine, ReasoningField, SimParams};
use profiles::profile;
pub use profiles::{profiles, DEFAULT_PROFILE};

/// Longest step duration accepted; beyond it a value is surely a typo.
const MAX_STEP: Duration = Duration::from_secs(3600);
/// Largest context window accepted (keeps every token count far from overflow).
const MAX_MODEL_LEN: u64 = 10_000_000;

/// The YAML form, used as `simulator:` inside a target of the llmprobe config.
/// Every field but `profile` overrides the profile's value when set.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimConfig {
    /// Named set of parameters to start from (see [`profiles`]).
    #[serde(default = "default_profile")]
    pub profile: String,
    /// `model` (performance model) or `stub` (no model time).
    #[serde(default)]
    pub engine: Option<Engine>,
    /// Model id listed by `/v1/models`.
    #[serde(default)]
    pub model_name: Option<String>,
    /// Prompt tokens processed per second by prefill.
    #[serde(default)]
    pub prefill_tokens_per_second: Option<f64>,
    /// Fixed cost of one decode step ("20ms").
    #[serde(default, with = "humantime_serde")]
    pub step_base: Option<Duration>,
    /// Extra cost of one decode step per sequence in the batch ("1500us").
    #[serde(default, with = "humantime_serde")]
    pub step_per_sequence: Option<Duration>,
    /// Most sequences decoded together.
    #[serde(default)]
    pub max_batch: Option<u32>,
    /// Requests running + queued beyond which new ones get 503 (0: no limit).
    #[serde(default)]
    pub max_in_flight: Option<u32>,
    /// KV-cache capacity in tokens (0: no memory limit).
    #[serde(default)]
    pub kv_cache_tokens: Option<u64>,
    /// Context window in tokens (prompt + max tokens).
    #[serde(default)]
    pub max_model_len: Option<u64>,
    /// Output tokens of a request that sets no limit.
    #[serde(default)]
    pub default_max_tokens: Option<u32>,
    /// Seed of the generated text and of fault injection.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Fraction (0-1) of requests answered at once with `fail_status`.
    #[serde(default)]
    pub fail_ratio: Option<f64>,
    /// HTTP status of injected failures (400-599).
    #[serde(default)]
    pub fail_status: Option<u16>,
    /// Fraction (0-1) of the other requests whose connection is cut mid-stream.
    #[serde(default)]
    pub reset_ratio: Option<f64>,
    /// Fraction (0-1) of the admitted requests held `slow_delay` before answering.
    #[serde(default)]
    pub slow_ratio: Option<f64>,
    /// How long those requests are held (default 0s).
    #[serde(default, with = "humantime_serde")]
    pub slow_delay: Option<Duration>,
    /// Prompt tokens the prefix cache holds (0: no prefix cache).
    #[serde(default)]
    pub prefix_cache_tokens: Option<u64>,
    /// Tokens of thinking streamed before the answer (within the output
    /// limit; 0: no reasoning).
    #[serde(default)]
    pub reasoning_tokens: Option<u32>,
    /// `reasoning` (current vLLM) or `reasoning_content` (older vLLM, SGLang).
    #[serde(default)]
    pub reasoning_field: Option<ReasoningField>,
}

fn default_profile() -> String {
    DEFAULT_PROFILE.to_string()
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            profile: default_profile(),
            engine: None,
            model_name: None,
            prefill_tokens_per_second: None,
            step_base: None,
            step_per_sequence: None,
            max_batch: None,
            max_in_flight: None,
            kv_cache_tokens: None,
            max_model_len: None,
            default_max_tokens: None,
            seed: None,
            fail_ratio: None,
            fail_status: None,
            reset_ratio: None,
            slow_ratio: None,
            slow_delay: None,
            prefix_cache_tokens: None,
            reasoning_tokens: None,
            reasoning_field: None,
        }
    }
}

impl SimConfig {
    /// Applies the overrides to the profile and checks the result; the error names
    /// every bad field (`field: problem`, joined with "; ").
    pub fn resolve(&self) -> Result<SimParams, String> {
        let Some(mut p) = profile(&self.profile) else {
            let known: Vec<&str> = profiles().iter().map(|(name, _)| *name).collect();
            return Err(format!(
                "profile: unknown profile {:?} (known: {})",
                self.profile,
                known.join(", ")
            ));
        };
        macro_rules! set {
            ($($field:ident),*) => { $( if let Some(v) = self.$field.clone() { p.$field = v; } )* };
        }
        set!(
            engine,
            model_name,
            prefill_tokens_per_second,
            step_base,
            step_per_sequence,
            max_batch,
            max_model_len,
            default_max_tokens,
            seed,
            fail_ratio,
            fail_status,
            reset_ratio,
            slow_ratio,
            slow_delay,
            prefix_cache_tokens,
            reasoning_tokens,
            reasoning_field
        );
        // 0 would shed or refuse everything, so it spells "no limit" instead.
        match self.max_in_flight {
            Some(0) => p.max_in_flight = u32::MAX,
            Some(n) => p.max_in_flight = n,
            None => {}
        }
        // The stub has no model time, so a model profile's capacity does not
        // apply to it: it sheds only when told to.
        if p.engine == Engine::Stub && self.max_in_flight.is_none() {
            p.max_in_flight = u32::MAX;
        }
        match self.kv_cache_tokens {
            Some(0) => p.kv_cache_tokens = None,
            Some(n) => p.kv_cache_tokens = Some(n),
            None => {}
        }
        let problems = check(&p);
        if problems.is_empty() {
            Ok(p)
        } else {
            Err(problems.join("; "))
        }
    }
}

/// Every problem of a resolved parameter set, each naming its field.
fn check(p: &SimParams) -> Vec<String> {
    let mut problems = Vec::new();
    let mut bad = |field: &str, why: String| problems.push(format!("{field}: {why}"));
    if p.model_name.trim().is_empty() {
        bad("model_name", "must not be empty".into());
    }
    let rate = p.prefill_tokens_per_second;
    if rate.is_nan() || rate < 1.0 {
        bad(
            "prefill_tokens_per_second",
            format!("must be at least 1 (got {rate})"),
        );
    }
    for (field, d) in [
        ("step_base", p.step_base),
        ("step_per_sequence", p.step_per_sequence),
    ] {
        if d > MAX_STEP {
            bad(field, format!("must be at most 1h (got {d:?})"));
        }
    }
    // A model engine with free steps would spin; the stub engine is the way to
    // ask for no model time.
    if p.engine == Engine::Model && p.step_base.is_zero() && p.step_per_sequence.is_zero() {
        bad(
            "step_base",
            "step_base and step_per_sequence cannot both be 0 with engine model (use engine stub)"
                .into(),
        );
    }
    if p.max_batch == 0 {
        bad("max_batch", "must be at least 1".into());
    }
    if p.max_model_len == 0 || p.max_model_len > MAX_MODEL_LEN {
        bad(
            "max_model_len",
            format!(
                "must be between 1 and {MAX_MODEL_LEN} (got {})",
                p.max_model_len
            ),
        );
    }
    if p.default_max_tokens == 0 {
        bad("default_max_tokens", "must be at least 1".into());
    }
    for (field, r) in [
        ("fail_ratio", p.fail_ratio),
        ("reset_ratio", p.reset_ratio),
        ("slow_ratio", p.slow_ratio),
    ] {
        if !(0.0..=1.0).contains(&r) {
            bad(field, format!("must be between 0 and 1 (got {r})"));
        }
    }
    if !(400..=599).contains(&p.fail_status) {
        bad(
            "fail_status",
            format!("must be an error status 400-599 (got {})", p.fail_status),
        );
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_resolves() {
        for (name, _) in profiles() {
            let config = SimConfig {
                profile: (*name).to_string(),
                ..SimConfig::default()
            };
            assert!(config.resolve().is_ok(), "{name}");
        }
    }

    #[test]
    fn unknown_profile_is_named() {
        let config = SimConfig {
            profile: "h100".into(),
            ..SimConfig::default()
        };
        let err = config.resolve().unwrap_err();
        assert!(
            err.starts_with("profile: unknown profile \"h100\""),
            "{err}"
        );
    }

    #[test]
    fn every_bad_field_is_named() {
        let config = SimConfig {
            max_batch: Some(0),
            fail_ratio: Some(1.5),
            fail_status: Some(200),
            prefill_tokens_per_second: Some(f64::NAN),
            ..SimConfig::default()
        };
        let err = config.resolve().unwrap_err();
        for field in [
            "max_batch:",
            "fail_ratio:",
            "fail_status:",
            "prefill_tokens_per_second:",
        ] {
            assert!(err.contains(field), "{field} missing in {err}");
        }
    }

    #[test]
    fn zero_means_no_limit() {
        let config = SimConfig {
            max_in_flight: Some(0),
            kv_cache_tokens: Some(0),
            ..SimConfig::default()
        };
        let p = config.resolve().unwrap();
        assert_eq!(p.max_in_flight, u32::MAX);
        assert_eq!(p.kv_cache_tokens, None);
    }

    #[test]
    fn stub_sheds_only_when_told() {
        let stub = |max_in_flight| SimConfig {
            engine: Some(Engine::Stub),
            max_in_flight,
            ..SimConfig::default()
        };
        assert_eq!(stub(None).resolve().unwrap().max_in_flight, u32::MAX);
        assert_eq!(stub(Some(5)).resolve().unwrap().max_in_flight, 5);
    }

    #[test]
    fn yaml_form_parses_durations_and_rejects_unknown_keys() {
        let config: SimConfig =
            serde_json::from_str(r#"{"profile":"tiny","step_base":"20ms","engine":"stub"}"#)
                .unwrap();
        assert_eq!(config.step_base, Some(Duration::from_millis(20)));
        assert_eq!(config.engine, Some(Engine::Stub));
        let empty: SimConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(empty, SimConfig::default());
        assert!(serde_json::from_str::<SimConfig>(r#"{"max_bach":4}"#).is_err());
    }

    #[test]
    fn reasoning_is_off_unless_asked_and_names_its_field() {
        let p = SimConfig::default().resolve().unwrap();
        assert_eq!(p.reasoning_tokens, 0);
        assert_eq!(p.reasoning_field, ReasoningField::Reasoning);
        let config: SimConfig =
            serde_json::from_str(r#"{"reasoning_tokens":6,"reasoning_field":"reasoning_content"}"#)
                .unwrap();
        let p = config.resolve().unwrap();
        assert_eq!(p.reasoning_tokens, 6);
        assert_eq!(p.reasoning_field.as_str(), "reasoning_content");
        assert!(serde_json::from_str::<SimConfig>(r#"{"reasoning_field":"thinking"}"#).is_err());
    }

    #[test]
    fn loads_through_the_config_crate() {
        let yaml = "profile: tiny\nstep_base: 20ms\nfail_ratio: 1\nmax_batch: 3\nengine: model\n";
        let loaded: SimConfig = config::Config::builder()
            .add_source(config::File::from_str(yaml, config::FileFormat::Yaml))
            .build()
            .unwrap()
            .try_deserialize()
            .unwrap();
        let p = loaded.resolve().unwrap();
        assert_eq!(p.step_base, Duration::from_millis(20));
        assert_eq!((p.fail_ratio, p.max_batch), (1.0, 3));
    }
}
