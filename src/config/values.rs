//! Values written in the file and kept as they are once resolved: a
//! percentage, a number of requests per level, the output-limit field, the
//! endpoint kind, where a server's metrics are read.

use serde::{Deserialize, Deserializer};

/// A fraction written as `10%` or `0.1`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Percent(pub f64);

impl<'de> Deserialize<'de> for Percent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Num(f64),
            Text(String),
        }
        let value = match Raw::deserialize(d)? {
            Raw::Num(n) => n,
            Raw::Text(s) => {
                let s = s.trim();
                match s.strip_suffix('%') {
                    Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
                    None => s.parse::<f64>(),
                }
                .map_err(|_| {
                    serde::de::Error::custom(format!("`{s}` is not a percentage like `10%`"))
                })?
            }
        };
        if !(0.0..=1.0).contains(&value) {
            return Err(serde::de::Error::custom("must be between 0% and 100%"));
        }
        Ok(Percent(value))
    }
}

/// Requests in one level: a multiple of the concurrency, or a fixed number.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RequestsPerLevel {
    /// `3x`: three times the concurrency.
    PerConcurrency(f64),
    /// A fixed count.
    Fixed(u32),
}

impl RequestsPerLevel {
    /// Requests to send at `concurrency`, never fewer than `min` nor than the concurrency.
    pub fn count(self, concurrency: u32, min: u32) -> u64 {
        let n = match self {
            RequestsPerLevel::PerConcurrency(f) => (f * concurrency as f64).ceil() as u64,
            RequestsPerLevel::Fixed(n) => n as u64,
        };
        n.max(min as u64).max(concurrency as u64)
    }
}

impl<'de> Deserialize<'de> for RequestsPerLevel {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Num(u32),
            Text(String),
        }
        let bad = || serde::de::Error::custom("expected `Nx` (N times the concurrency) or a count");
        match Raw::deserialize(d)? {
            Raw::Num(n) if n > 0 => Ok(RequestsPerLevel::Fixed(n)),
            Raw::Num(_) => Err(bad()),
            Raw::Text(s) => {
                let s = s.trim();
                if let Some(f) = s.strip_suffix('x') {
                    match f.trim().parse::<f64>() {
                        Ok(f) if f > 0.0 && f.is_finite() => {
                            Ok(RequestsPerLevel::PerConcurrency(f))
                        }
                        _ => Err(bad()),
                    }
                } else {
                    match s.parse::<u32>() {
                        Ok(n) if n > 0 => Ok(RequestsPerLevel::Fixed(n)),
                        _ => Err(bad()),
                    }
                }
            }
        }
    }
}

/// Name of the request field that carries the output limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum MaxTokensField {
    /// The current OpenAI name.
    #[serde(rename = "max_completion_tokens")]
    MaxCompletionTokens,
    /// The older name, the only one some servers honour (llama-cpp-python).
    #[serde(rename = "max_tokens")]
    MaxTokens,
    /// Send both.
    #[serde(rename = "both")]
    Both,
}

impl MaxTokensField {
    /// The name used in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::Both => "both",
        }
    }
}

/// What a request may share with earlier ones, for a server's prefix cache
/// (vLLM, SGLang and llama.cpp skip the prefill of a prefix they saw).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrefixCache {
    /// Nothing: every request's first message starts with a short unique
    /// marker, so TTFT includes the prefill a new conversation pays.
    #[default]
    Unique,
    /// Prompts are sent as written: a repeated prompt is served from the cache.
    Shared,
    /// The system message(s) are shared, the marker starts the first message
    /// after them: a common system prompt followed by new user text.
    SharedSystemPrompt,
}

impl PrefixCache {
    /// The name used in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            PrefixCache::Unique => "unique",
            PrefixCache::Shared => "shared",
            PrefixCache::SharedSystemPrompt => "shared_system_prompt",
        }
    }
}

/// Which OpenAI endpoint a target's requests go to (`api:`). What the
/// configuration checks needs to know of a kind is here; how its requests
/// are built and its answers read is in `probe/api/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// `POST /chat/completions`: prompts sent as `messages`.
    #[default]
    Chat,
    /// `POST /completions` (the legacy text API, vLLM's benchmark default):
    /// each prompt sent as one `prompt` string.
    Completions,
}

/// What the configuration checks of an endpoint kind: one row per kind.
struct ApiFacts {
    /// The name used in the configuration.
    name: &'static str,
    /// Whether a prompt of several messages (a chat) can be sent as it is.
    sends_chats: bool,
    /// The request fields that can carry the output limit, warm-up's order.
    output_limit_fields: &'static [MaxTokensField],
}

impl Api {
    fn facts(self) -> ApiFacts {
        use MaxTokensField::*;
        let (name, sends_chats, output_limit_fields): (_, _, &'static [_]) = match self {
            Api::Chat => ("chat", true, &[MaxCompletionTokens, MaxTokens, Both]),
            Api::Completions => ("completions", false, &[MaxTokens]),
        };
        ApiFacts {
            name,
            sends_chats,
            output_limit_fields,
        }
    }

    /// The name used in the configuration.
    pub fn as_str(self) -> &'static str {
        self.facts().name
    }

    /// Whether a prompt of several messages (a chat) can be sent as it is;
    /// a kind that cannot takes only prompts of one user text.
    pub fn sends_chats(self) -> bool {
        self.facts().sends_chats
    }

    /// The request fields that can carry the output limit, in the order
    /// warm-up tries them; the first is the default.
    pub fn output_limit_fields(self) -> &'static [MaxTokensField] {
        self.facts().output_limit_fields
    }
}

/// Per-target keys of their own that every request body carries under the
/// same name, when set. Adding one: its entry in `config/keys.rs`, its name
/// here, its value in `Target::request_options` (`config/resolved.rs`);
/// every endpoint kind then sends it, and `extra_body` may not hold it.
pub const BODY_KEYS: &[&str] = &["top_p"];

/// Body keys llmprobe sets itself whatever the configuration: the
/// measurement depends on them (a non-streamed answer has no TTFT, another
/// limit changes what is measured).
const SET_BY_LLMPROBE: &[&str] = &[
    "model",
    "stream",
    "stream_options",
    "messages",
    "prompt",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
];

/// Whether `extra_body` may not hold `key`: llmprobe sets it itself, or it
/// has a key of its own ([`BODY_KEYS`]).
pub fn is_reserved_body_key(key: &str) -> bool {
    SET_BY_LLMPROBE.contains(&key) || BODY_KEYS.contains(&key)
}

/// Where a target's server metrics are read (`server_metrics_url`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ServerMetricsUrl {
    /// Not configured: `/metrics` beside `/v1`, if it answers with a known engine's figures.
    #[default]
    Find,
    /// This URL (http or https, no credentials), without a trailing slash.
    At(String),
    /// Never read.
    Off,
}

impl ServerMetricsUrl {
    /// The key's value as written (None: not set).
    pub fn from_file(v: Option<String>) -> Self {
        match v.as_deref().map(str::trim) {
            None => ServerMetricsUrl::Find,
            Some("off") => ServerMetricsUrl::Off,
            Some(url) => ServerMetricsUrl::At(url.trim_end_matches('/').to_string()),
        }
    }
}
