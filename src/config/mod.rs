//! Configuration: the YAML file (plus `LLMPROBE__` environment overrides)
//! decoded strictly, then validated and resolved into what the scheduler and
//! the sweep use. Every problem is collected, each naming the file and key.

pub mod prompts;
pub mod secret;

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use crate::config::secret::Secret;
use prompts::Prompt;

/// Where the config is read from when no `--config` is given.
pub const DEFAULT_PATH: &str = "config/llmprobe.yaml";

// Upper bounds, so that a typo is an error at load rather than a panic or an
// exhausted memory later: a level runs one task per request in flight and
// keeps one sample per request, and the interval is added to clock times.
/// Highest concurrency level.
pub const MAX_LEVEL: u32 = 10_000;
/// Most requests in one level (or warm-up).
pub const MAX_REQUESTS_PER_LEVEL: u64 = 1_000_000;
/// Longest interval between two sweeps.
pub const MAX_INTERVAL: Duration = Duration::from_secs(365 * 24 * 3600);
/// Largest API key file read.
pub const MAX_KEY_FILE_BYTES: u64 = 64 << 10;

// ---------------------------------------------------------------------------
// The file as written (strict: unknown keys are errors).
// ---------------------------------------------------------------------------

/// The configuration file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Address of /metrics, /healthz, /readyz.
    #[serde(default = "default_listen")]
    pub listen: String,
    /// When sweeps run.
    #[serde(default)]
    pub schedule: ScheduleFile,
    /// Settings every target inherits.
    #[serde(default)]
    pub defaults: DefaultsFile,
    /// Named workloads.
    #[serde(default)]
    pub workloads: BTreeMap<String, WorkloadFile>,
    /// Endpoints to measure.
    #[serde(default)]
    pub targets: Vec<TargetFile>,
    /// Pairs of targets compared to measure a gateway's own cost.
    #[serde(default)]
    pub gateway_pairs: Vec<GatewayPairFile>,
    /// Exposure of the HTTP endpoints.
    #[serde(default)]
    pub web: WebFile,
    /// Targets discovered from Prometheus `file_sd` files.
    #[serde(default)]
    pub file_sd: Option<crate::fleet::file_sd::FileSdFile>,
    /// How a discovered entry becomes a target.
    #[serde(default)]
    pub target_template: Option<crate::fleet::file_sd::TemplateFile>,
    /// This instance's share of the targets, when several share a fleet.
    #[serde(default)]
    pub shard: Option<crate::fleet::shard::ShardFile>,
}

fn default_listen() -> String {
    "0.0.0.0:9775".into()
}

/// `schedule:` section.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScheduleFile {
    /// Between two sweeps of one target.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Random spread added to each interval, as a percentage of it.
    pub jitter: Percent,
    /// Requests in flight across all targets at once.
    pub max_in_flight_total: u32,
    /// Limit on the wall time of one sweep of one target.
    #[serde(with = "humantime_serde")]
    pub sweep_timeout: Duration,
}

impl Default for ScheduleFile {
    fn default() -> Self {
        ScheduleFile {
            interval: Duration::from_secs(15 * 60),
            jitter: Percent(0.10),
            max_in_flight_total: 64,
            sweep_timeout: Duration::from_secs(10 * 60),
        }
    }
}

/// `web:` section.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebFile {
    /// Whether `POST /-/reload` is served.
    pub enable_reload: bool,
    /// Users allowed in, with bcrypt-hashed passwords (empty: no auth).
    pub basic_auth_users: BTreeMap<String, String>,
    /// PEM certificate chain; with `tls_key_file`, serve HTTPS.
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key.
    pub tls_key_file: Option<PathBuf>,
}

impl Default for WebFile {
    fn default() -> Self {
        WebFile {
            enable_reload: true,
            basic_auth_users: BTreeMap::new(),
            tls_cert_file: None,
            tls_key_file: None,
        }
    }
}

/// Resolved `web:` section.
#[derive(Debug, Clone)]
pub struct Web {
    /// Whether `POST /-/reload` is served.
    pub enable_reload: bool,
    /// Basic auth (disabled when no user is configured).
    pub auth: crate::http::exposure::BasicAuth,
    /// TLS server configuration, when HTTPS is on.
    pub tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
}

/// Latency and failure limits that decide whether a level is acceptable.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SloFile {
    /// p95 end-to-end latency limit.
    #[serde(default, with = "humantime_serde")]
    pub p95_latency: Option<Duration>,
    /// Highest acceptable fraction of shed (503/429) requests.
    pub max_shed_ratio: Option<f64>,
    /// Highest acceptable fraction of other failures.
    pub max_error_ratio: Option<f64>,
}

/// Settings a target inherits from `defaults:` and may override.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DefaultsFile {
    /// Workload used when a target names none.
    pub workload: Option<String>,
    /// Requests sent first and not counted.
    pub warmup_requests: Option<u32>,
    /// Concurrency levels, increasing.
    pub levels: Option<Vec<u32>>,
    /// Requests per level: `Nx` (N times the concurrency) or a number.
    pub requests_per_level: Option<RequestsPerLevel>,
    /// Lower bound on requests per level.
    pub min_requests_per_level: Option<u32>,
    /// Limit on one request.
    #[serde(default, with = "humantime_serde")]
    pub request_timeout: Option<Duration>,
    /// Acceptance limits of a level.
    #[serde(default)]
    pub slo: SloFile,
    /// recommended max_in_flight = floor(knee x headroom).
    pub headroom: Option<f64>,
    /// Highest level sent to the target.
    pub max_concurrency: Option<u32>,
    /// Request field that carries the output limit.
    pub max_tokens_field: Option<MaxTokensField>,
}

/// One target as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetFile {
    /// Unique name (the `target` label).
    pub name: String,
    /// OpenAI-compatible base URL, ending in `/v1` usually.
    pub base_url: Option<String>,
    /// Run the built-in simulated engine in-process and measure it.
    pub simulator: Option<crate::sim::SimConfig>,
    /// Model id sent in requests.
    pub model: Option<String>,
    /// Environment variable holding the API key.
    pub api_key_env: Option<String>,
    /// File holding the API key (systemd credentials).
    pub api_key_file: Option<String>,
    /// Extra labels for `llmprobe_target_info` (gpu, driver, ...).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Workloads to measure, by name.
    pub workloads: Option<Vec<String>>,
    /// Postpone sweeps while the server is busy.
    pub idle_gate: Option<IdleGateFile>,
    /// See [`DefaultsFile::warmup_requests`].
    pub warmup_requests: Option<u32>,
    /// See [`DefaultsFile::levels`].
    pub levels: Option<Vec<u32>>,
    /// See [`DefaultsFile::requests_per_level`].
    pub requests_per_level: Option<RequestsPerLevel>,
    /// See [`DefaultsFile::min_requests_per_level`].
    pub min_requests_per_level: Option<u32>,
    /// See [`DefaultsFile::request_timeout`].
    #[serde(default, with = "humantime_serde")]
    pub request_timeout: Option<Duration>,
    /// See [`DefaultsFile::slo`].
    pub slo: Option<SloFile>,
    /// See [`DefaultsFile::headroom`].
    pub headroom: Option<f64>,
    /// See [`DefaultsFile::max_concurrency`].
    pub max_concurrency: Option<u32>,
    /// See [`DefaultsFile::max_tokens_field`].
    pub max_tokens_field: Option<MaxTokensField>,
}

/// `idle_gate:` of a target.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdleGateFile {
    /// URL of the server's own Prometheus metrics.
    pub metrics_url: String,
    /// Metric measuring busyness, e.g. `vllm:num_requests_running`.
    pub metric: String,
    /// Sweep only while the value is at most this (default 0).
    #[serde(default)]
    pub max_value: f64,
    /// Wait between two looks (default 30s).
    #[serde(default, with = "humantime_serde")]
    pub retry_every: Option<Duration>,
}

/// One workload as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadFile {
    /// Output limit sent with every request.
    pub max_completion_tokens: Option<u32>,
    /// Sampling temperature (0 for reproducible runs).
    pub temperature: Option<f64>,
    /// Inline prompts, one user message each.
    pub prompts: Option<Vec<String>>,
    /// JSONL file: one `{"messages": [...]}` chat, or one plain prompt, per line.
    pub prompts_file: Option<PathBuf>,
    /// Folder of documents, each sent after `instruction`.
    pub prompts_dir: Option<PathBuf>,
    /// Instruction sent before each document of `prompts_dir`.
    pub instruction: Option<String>,
    /// Generated prompts of a given size, for document-size tiers.
    pub synthetic: Option<SyntheticFile>,
    /// A system message sent before every prompt.
    pub system_prompt: Option<String>,
    /// What the server's prefix cache may reuse (default `unique`: nothing).
    pub prefix_cache: Option<PrefixCache>,
}

/// What a request may share with earlier ones, for a server's prefix cache
/// (vLLM, SGLang and llama.cpp skip the prefill of a prefix they saw).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
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

/// `synthetic:` prompts of a workload.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyntheticFile {
    /// About this many tokens per prompt (four characters per token).
    pub prompt_tokens: u32,
    /// Number of distinct prompts.
    pub count: u32,
}

/// A pair of targets whose latency difference is a gateway's cost.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayPairFile {
    /// The `pair` label.
    pub name: String,
    /// Target reaching the stub engine directly.
    pub direct: String,
    /// Target reaching the same stub engine through the gateway.
    pub through: String,
    /// Requests in flight on each side during one batch (default 1).
    pub concurrency: Option<u32>,
    /// Counted requests per side (default 40).
    pub requests: Option<u32>,
    /// Workload sent to both sides (default: the direct target's first workload).
    pub workload: Option<String>,
}

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

// ---------------------------------------------------------------------------
// The resolved configuration.
// ---------------------------------------------------------------------------

/// A validated configuration, every default applied.
#[derive(Debug, Clone)]
pub struct Config {
    /// File it was read from.
    pub path: PathBuf,
    /// Address of the HTTP endpoints.
    pub listen: SocketAddr,
    /// Scheduling.
    pub schedule: Schedule,
    /// Targets in file order.
    pub targets: Vec<Arc<Target>>,
    /// Gateway pairs.
    pub gateway_pairs: Vec<GatewayPair>,
    /// Exposure of the HTTP endpoints.
    pub web: Web,
    /// Discovery from files and sharding.
    pub fleet: crate::fleet::FleetConfig,
}

/// Resolved `schedule:`.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// Between two sweeps of one target.
    pub interval: Duration,
    /// Fraction of the interval added at random.
    pub jitter: f64,
    /// Global cap on requests in flight.
    pub max_in_flight_total: u32,
    /// Limit on one sweep.
    pub sweep_timeout: Duration,
}

/// Acceptance limits of a level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slo {
    /// p95 latency limit.
    pub p95_latency: Duration,
    /// Highest acceptable shed ratio.
    pub max_shed_ratio: f64,
    /// Highest acceptable error ratio.
    pub max_error_ratio: f64,
}

/// Where a target's server is.
#[derive(Debug, Clone, PartialEq)]
pub enum Endpoint {
    /// A server at this base URL.
    Url(String),
    /// The built-in simulated engine, started in-process on a loopback port.
    Simulator(crate::sim::SimParams),
}

/// A fully resolved target. Equality covers every setting, the key
/// included: a reload restarts a target whose settings differ.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// Unique name.
    pub name: String,
    /// Where the server is.
    pub endpoint: Endpoint,
    /// Model id.
    pub model: String,
    /// Bearer key, if any.
    pub api_key: Option<Secret>,
    /// Configured labels for target_info.
    pub labels: BTreeMap<String, String>,
    /// Workloads measured, in order.
    pub workloads: Vec<Arc<Workload>>,
    /// Requests sent first and not counted.
    pub warmup_requests: u32,
    /// Levels, capped by max_concurrency.
    pub levels: Vec<u32>,
    /// Requests per level.
    pub requests_per_level: RequestsPerLevel,
    /// Lower bound on requests per level.
    pub min_requests_per_level: u32,
    /// Limit on one request.
    pub request_timeout: Duration,
    /// Acceptance limits.
    pub slo: Slo,
    /// Knee fraction recommended as max_in_flight.
    pub headroom: f64,
    /// Request field for the output limit; None: not configured, so
    /// warm-up checks that `max_completion_tokens` bounds the output, and
    /// tries `max_tokens`, then both, when it does not.
    pub max_tokens_field: Option<MaxTokensField>,
    /// Postpone sweeps while the server is busy.
    pub idle_gate: Option<crate::schedule::idle_gate::IdleGate>,
    /// `max_concurrency`, when it left configured levels out (the climb
    /// then stops there, and the result says so).
    pub capped_by_max_concurrency: Option<u32>,
}

/// A fully resolved workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Name (the `workload` label).
    pub name: String,
    /// Output limit.
    pub max_completion_tokens: u32,
    /// Temperature.
    pub temperature: f64,
    /// Prompts, used round-robin.
    pub prompts: Vec<Prompt>,
    /// What requests may share for a server's prefix cache.
    pub prefix_cache: PrefixCache,
}

/// A resolved gateway pair.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewayPair {
    /// The `pair` label.
    pub name: String,
    /// Direct target name.
    pub direct: String,
    /// Through-the-gateway target name.
    pub through: String,
    /// Requests in flight on each side during one batch.
    pub concurrency: u32,
    /// Counted requests per side.
    pub requests: u32,
    /// Workload sent to both sides.
    pub workload: Arc<Workload>,
}

/// Every problem found in a configuration, each naming file and key.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    /// One line per problem: `FILE: KEY: what is wrong`.
    pub problems: Vec<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.problems.join("\n"))
    }
}

impl std::error::Error for ConfigError {}

/// Source of environment variables, so tests need not touch the process's.
pub trait Env {
    /// The value of `name`, if set.
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment.
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

/// Reads, decodes and validates the configuration at `path`, with
/// `LLMPROBE__` overrides from the process environment.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let file = decode(path, true)?;
    resolve(path, file, &ProcessEnv)
}

/// Decodes the file (and, when `with_env`, `LLMPROBE__*` variables) strictly.
pub fn decode(path: &Path, with_env: bool) -> Result<FileConfig, ConfigError> {
    let shown = path.display().to_string();
    let fail = |msg: String| ConfigError {
        problems: vec![format!("{shown}: {msg}")],
    };
    if !path.exists() {
        return Err(fail("file not found".into()));
    }
    let mut builder = ::config::Config::builder().add_source(
        ::config::File::from(path)
            .format(::config::FileFormat::Yaml)
            .required(true),
    );
    if with_env {
        builder = builder.add_source(
            ::config::Environment::with_prefix("LLMPROBE")
                .prefix_separator("__")
                .separator("__")
                .try_parsing(true),
        );
    }
    let raw = builder.build().map_err(|e| fail(e.to_string()))?;
    serde_path_to_error::deserialize::<_, FileConfig>(raw).map_err(|e| {
        let key = e.path().to_string();
        let mut inner = e.into_inner().to_string();
        // The config crate appends the key itself; it is already in front.
        if let Some(at) = inner.find(" for key `") {
            inner.truncate(at);
        }
        if key == "." || key.is_empty() {
            fail(inner)
        } else {
            fail(format!("{key}: {inner}"))
        }
    })
}

/// Validates a decoded file and applies defaults, collecting every problem.
pub fn resolve(path: &Path, file: FileConfig, env: &dyn Env) -> Result<Config, ConfigError> {
    let shown = path.display().to_string();
    let base_dir = path.parent().unwrap_or(Path::new("."));
    let mut problems = Vec::new();
    let mut bad = |key: &str, msg: String| problems.push(format!("{shown}: {key}: {msg}"));

    let listen = match file.listen.parse::<SocketAddr>() {
        Ok(a) => a,
        Err(_) => {
            bad(
                "listen",
                format!("`{}` is not an address like 0.0.0.0:9775", file.listen),
            );
            "0.0.0.0:9775".parse().expect("constant address parses")
        }
    };

    let s = &file.schedule;
    if s.interval < Duration::from_millis(100) {
        bad("schedule.interval", "must be at least 100ms".into());
    } else if s.interval > MAX_INTERVAL {
        bad("schedule.interval", "must be at most 365days".into());
    }
    if s.max_in_flight_total == 0 {
        bad("schedule.max_in_flight_total", "must be at least 1".into());
    }
    if s.sweep_timeout.is_zero() {
        bad("schedule.sweep_timeout", "must be more than 0s".into());
    }
    let schedule = Schedule {
        interval: s.interval,
        jitter: s.jitter.0,
        max_in_flight_total: s.max_in_flight_total.max(1),
        sweep_timeout: s.sweep_timeout,
    };

    let mut workloads: BTreeMap<String, Arc<Workload>> = BTreeMap::new();
    for (name, w) in &file.workloads {
        let key = format!("workloads.{name}");
        let mut prompts = Vec::new();
        if let Some(inline) = &w.prompts {
            if inline.is_empty() {
                bad(&format!("{key}.prompts"), "is empty".into());
            }
            prompts.extend(inline.iter().map(|p| Prompt::user(p)));
        }
        if let Some(pf) = &w.prompts_file {
            let full = if pf.is_relative() {
                base_dir.join(pf)
            } else {
                pf.clone()
            };
            match prompts::load_jsonl(&full) {
                Ok(p) => prompts.extend(p),
                Err(e) => bad(&format!("{key}.prompts_file"), e),
            }
        }
        if let Some(dir) = &w.prompts_dir {
            let full = if dir.is_relative() {
                base_dir.join(dir)
            } else {
                dir.clone()
            };
            let instruction = w
                .instruction
                .as_deref()
                .unwrap_or(prompts::DEFAULT_INSTRUCTION);
            match prompts::load_dir(&full, instruction) {
                Ok(p) => prompts.extend(p),
                Err(e) => bad(&format!("{key}.prompts_dir"), e),
            }
        } else if w.instruction.is_some() {
            bad(
                &format!("{key}.instruction"),
                "only applies to `prompts_dir`".into(),
            );
        }
        if let Some(syn) = &w.synthetic {
            if syn.prompt_tokens == 0 || syn.prompt_tokens > 1_000_000 {
                bad(
                    &format!("{key}.synthetic.prompt_tokens"),
                    "must be between 1 and 1000000".into(),
                );
            } else if syn.count == 0 || syn.count > 1000 {
                bad(
                    &format!("{key}.synthetic.count"),
                    "must be between 1 and 1000".into(),
                );
            } else {
                prompts.extend(prompts::synthetic(syn.prompt_tokens, syn.count));
            }
        }
        if w.prompts.is_none()
            && w.prompts_file.is_none()
            && w.prompts_dir.is_none()
            && w.synthetic.is_none()
        {
            bad(
                &key,
                "has no prompts: set `prompts`, `prompts_file`, `prompts_dir` or `synthetic`"
                    .into(),
            );
        }
        if let Some(system) = &w.system_prompt {
            if system.trim().is_empty() {
                bad(&format!("{key}.system_prompt"), "is empty".into());
            }
            for p in &mut prompts {
                p.prepend_system(system);
            }
        }
        let prefix_cache = w.prefix_cache.unwrap_or_default();
        if prefix_cache == PrefixCache::SharedSystemPrompt
            && w.system_prompt.is_none()
            && !prompts.iter().all(Prompt::starts_with_system)
        {
            bad(
                &format!("{key}.prefix_cache"),
                "`shared_system_prompt` needs a system message first in every prompt: set `system_prompt`".into(),
            );
        }
        let max_completion_tokens = w.max_completion_tokens.unwrap_or(256);
        if max_completion_tokens == 0 {
            bad(
                &format!("{key}.max_completion_tokens"),
                "must be at least 1".into(),
            );
        }
        let temperature = w.temperature.unwrap_or(0.0);
        if !(0.0..=2.0).contains(&temperature) {
            bad(
                &format!("{key}.temperature"),
                "must be between 0 and 2".into(),
            );
        }
        workloads.insert(
            name.clone(),
            Arc::new(Workload {
                name: name.clone(),
                max_completion_tokens,
                temperature,
                prompts,
                prefix_cache,
            }),
        );
    }

    let d = &file.defaults;
    let default_workload = d.workload.clone();
    if let Some(w) = &default_workload {
        if !workloads.contains_key(w) {
            bad(
                "defaults.workload",
                format!("workload `{w}` is not defined under `workloads`"),
            );
        }
    }

    let mut targets = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (i, t) in file.targets.iter().enumerate() {
        let key = if t.name.is_empty() {
            format!("targets[{i}]")
        } else {
            format!("targets[{i}] ({})", t.name)
        };
        let k = |field: &str| format!("{key}.{field}");
        if t.name.trim().is_empty() {
            bad(&k("name"), "must not be empty".into());
        } else if !seen.insert(t.name.clone()) {
            bad(&k("name"), format!("duplicate target name `{}`", t.name));
        }

        if let Some(target) = resolve_target(t, &key, d, &workloads, env, &mut bad) {
            check_levels_within_cap(t, &target, &key, schedule.max_in_flight_total, &mut bad);
            targets.push(Arc::new(target));
        }
    }

    let gateway_pairs = resolve_gateway_pairs(&file, &targets, &workloads, &mut bad);

    let auth = crate::http::exposure::BasicAuth::new(file.web.basic_auth_users.clone())
        .unwrap_or_else(|e| {
            bad("web.basic_auth_users", e);
            Default::default()
        });
    let rel = |p: &PathBuf| {
        if p.is_relative() {
            base_dir.join(p)
        } else {
            p.clone()
        }
    };
    let tls = match (&file.web.tls_cert_file, &file.web.tls_key_file) {
        (None, None) => None,
        (Some(cert), Some(key)) => match crate::http::exposure::load_tls(&rel(cert), &rel(key)) {
            Ok(t) => Some(t),
            Err(e) => {
                bad("web.tls_cert_file", e);
                None
            }
        },
        _ => {
            bad(
                "web",
                "set both `tls_cert_file` and `tls_key_file`, or neither".into(),
            );
            None
        }
    };

    let fleet = crate::fleet::resolve(&file, base_dir, &workloads, env, &mut bad);

    // Targets inheriting the same default say the same thing once.
    let mut said = std::collections::BTreeSet::new();
    problems.retain(|p| said.insert(p.clone()));
    if problems.is_empty() {
        Ok(Config {
            path: path.to_path_buf(),
            listen,
            schedule,
            targets,
            gateway_pairs,
            web: Web {
                enable_reload: file.web.enable_reload,
                auth,
                tls,
            },
            fleet,
        })
    } else {
        Err(ConfigError { problems })
    }
}

/// Validates `gateway_pairs` against the targets and workloads already
/// resolved (a target whose own problems kept it out is only named once).
fn resolve_gateway_pairs(
    file: &FileConfig,
    targets: &[Arc<Target>],
    workloads: &BTreeMap<String, Arc<Workload>>,
    bad: &mut dyn FnMut(&str, String),
) -> Vec<GatewayPair> {
    let mut pairs = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (i, p) in file.gateway_pairs.iter().enumerate() {
        let key = if p.name.is_empty() {
            format!("gateway_pairs[{i}]")
        } else {
            format!("gateway_pairs[{i}] ({})", p.name)
        };
        let k = |field: &str| format!("{key}.{field}");
        let mut ok = true;
        if p.name.trim().is_empty() {
            bad(&k("name"), "must not be empty".into());
            ok = false;
        } else if !seen.insert(p.name.clone()) {
            bad(&k("name"), format!("duplicate pair name `{}`", p.name));
            ok = false;
        }
        for (field, name) in [("direct", &p.direct), ("through", &p.through)] {
            if !file.targets.iter().any(|t| &t.name == name) {
                bad(&k(field), format!("target `{name}` is not defined"));
                ok = false;
            }
        }
        if p.direct == p.through {
            bad(
                &k("through"),
                format!(
                    "must differ from `direct` (both are `{}`): the pair compares two paths to the stub engine",
                    p.through
                ),
            );
            ok = false;
        }
        let concurrency = p.concurrency.unwrap_or(1);
        if concurrency == 0 {
            bad(&k("concurrency"), "must be at least 1".into());
            ok = false;
        }
        let requests = p.requests.unwrap_or(40);
        if requests == 0 {
            bad(&k("requests"), "must be at least 1".into());
            ok = false;
        }
        let direct = targets.iter().find(|t| t.name == p.direct);
        let workload = match &p.workload {
            Some(w) => match workloads.get(w) {
                Some(w) => Some(w.clone()),
                None => {
                    bad(
                        &k("workload"),
                        format!("workload `{w}` is not defined under `workloads`"),
                    );
                    None
                }
            },
            // An invalid direct target was reported already; its workloads are unknown.
            None => direct.and_then(|t| t.workloads.first().cloned()),
        };
        if let (true, Some(workload)) = (ok, workload) {
            pairs.push(GatewayPair {
                name: p.name.clone(),
                direct: p.direct.clone(),
                through: p.through.clone(),
                concurrency,
                requests,
                workload,
            });
        }
    }
    pairs
}

fn check_base_url(url: &str) -> Result<String, String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err("must start with http:// or https://".into());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        // Credentials in the URL would end up in logs and labels.
        return Err("must not hold credentials: use api_key_env or api_key_file".into());
    }
    if parsed.query().is_some() {
        return Err("must not have a query string".into());
    }
    Ok(url.trim_end_matches('/').to_string())
}

/// Expands a leading `${CREDENTIALS_DIRECTORY}` (systemd's `LoadCredential=`).
fn expand_credentials_dir(path: &str, env: &dyn Env) -> String {
    match path.strip_prefix("${CREDENTIALS_DIRECTORY}") {
        Some(rest) => format!(
            "{}{rest}",
            env.var("CREDENTIALS_DIRECTORY").unwrap_or_default()
        ),
        None => path.to_string(),
    }
}

fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.starts_with("__")
}

/// Reports a level of `target` (resolved from `t`, problems under `key`)
/// above the global cap: such a level could never hold all its requests in
/// flight at once, so it would measure a smaller concurrency than it says.
pub(crate) fn check_levels_within_cap(
    t: &TargetFile,
    target: &Target,
    key: &str,
    cap: u32,
    bad: &mut dyn FnMut(&str, String),
) {
    if let Some(&level) = target.levels.iter().find(|&&l| l > cap) {
        let levels_key = if t.levels.is_some() {
            format!("{key}.levels")
        } else {
            "defaults.levels".into()
        };
        bad(
            &levels_key,
            format!(
                "level {level} is above schedule.max_in_flight_total ({cap}): a level must hold all of its \
                 requests in flight at once (raise the cap, or set max_concurrency)"
            ),
        );
    }
}

/// Resolves one target as written (its name already checked) against the
/// defaults and workloads; problems are reported under `key`. Shared by
/// static targets and those discovered from files (`file_sd`).
pub(crate) fn resolve_target(
    t: &TargetFile,
    key: &str,
    d: &DefaultsFile,
    workloads: &BTreeMap<String, Arc<Workload>>,
    env: &dyn Env,
    bad: &mut dyn FnMut(&str, String),
) -> Option<Target> {
    let k = |field: &str| format!("{key}.{field}");
    let default_workload = &d.workload;
    let endpoint = match (&t.base_url, &t.simulator) {
        (Some(_), Some(_)) => {
            bad(key, "set either `base_url` or `simulator`, not both".into());
            None
        }
        (None, None) => {
            bad(
                &k("base_url"),
                "missing (or set `simulator` to measure the built-in engine)".into(),
            );
            None
        }
        (Some(url), None) => match check_base_url(url) {
            Ok(u) => Some(Endpoint::Url(u)),
            Err(e) => {
                bad(&k("base_url"), e);
                None
            }
        },
        (None, Some(sim)) => match sim.resolve() {
            Ok(p) => Some(Endpoint::Simulator(p)),
            Err(e) => {
                bad(&k("simulator"), e);
                None
            }
        },
    };

    let model = match (&t.model, &endpoint) {
        (Some(m), _) if !m.trim().is_empty() => m.clone(),
        (_, Some(Endpoint::Simulator(p))) => p.model_name.clone(),
        _ => {
            bad(
                &k("model"),
                "missing: name the model id the server serves".into(),
            );
            String::new()
        }
    };

    let api_key = match (&t.api_key_env, &t.api_key_file) {
        (Some(_), Some(_)) => {
            bad(
                key,
                "set either `api_key_env` or `api_key_file`, not both".into(),
            );
            None
        }
        (Some(var), None) => match env.var(var) {
            Some(v) if !v.trim().is_empty() => Some(Secret::new(v.trim().to_string())),
            _ => {
                bad(
                    &k("api_key_env"),
                    format!("environment variable `{var}` is not set or empty"),
                );
                None
            }
        },
        (None, Some(f)) => {
            let expanded = expand_credentials_dir(f, env);
            // Bounded, and never quoted: the content is the secret.
            let read = prompts::read_limited(Path::new(&expanded), MAX_KEY_FILE_BYTES);
            match read.map(|b| b.map(String::from_utf8)) {
                Ok(Some(Ok(v))) if !v.trim().is_empty() => Some(Secret::new(v.trim().to_string())),
                Ok(Some(Ok(_))) => {
                    bad(&k("api_key_file"), format!("`{expanded}` is empty"));
                    None
                }
                Ok(Some(Err(_))) => {
                    bad(
                        &k("api_key_file"),
                        format!("`{expanded}` is not UTF-8 text"),
                    );
                    None
                }
                Ok(None) => {
                    bad(
                        &k("api_key_file"),
                        format!("`{expanded}` is larger than {MAX_KEY_FILE_BYTES} bytes"),
                    );
                    None
                }
                Err(e) => {
                    bad(&k("api_key_file"), format!("cannot read `{expanded}`: {e}"));
                    None
                }
            }
        }
        (None, None) => None,
    };

    let names: Vec<String> = match (&t.workloads, &default_workload) {
        (Some(ws), _) => ws.clone(),
        (None, Some(w)) => vec![w.clone()],
        (None, None) => {
            bad(
                &k("workloads"),
                "missing, and `defaults.workload` is not set".into(),
            );
            vec![]
        }
    };
    if t.workloads.as_ref().is_some_and(|w| w.is_empty()) {
        bad(&k("workloads"), "is empty".into());
    }
    let mut target_workloads = Vec::new();
    for w in &names {
        match workloads.get(w) {
            Some(w) => target_workloads.push(w.clone()),
            None => bad(
                &k("workloads"),
                format!("workload `{w}` is not defined under `workloads`"),
            ),
        }
    }

    let o = t;
    let warmup_requests = o.warmup_requests.or(d.warmup_requests).unwrap_or(2);
    if u64::from(warmup_requests) > MAX_REQUESTS_PER_LEVEL {
        let wk = if o.warmup_requests.is_some() {
            k("warmup_requests")
        } else {
            "defaults.warmup_requests".into()
        };
        bad(&wk, format!("must be at most {MAX_REQUESTS_PER_LEVEL}"));
    }
    let mut levels = o
        .levels
        .clone()
        .or_else(|| d.levels.clone())
        .unwrap_or_else(|| vec![1, 2, 4, 8, 16]);
    let levels_key = if o.levels.is_some() {
        k("levels")
    } else {
        "defaults.levels".into()
    };
    if levels.is_empty() {
        bad(&levels_key, "is empty".into());
    } else if levels.contains(&0) {
        bad(&levels_key, "a level must be at least 1".into());
    } else if levels.iter().any(|&l| l > MAX_LEVEL) {
        bad(&levels_key, format!("a level must be at most {MAX_LEVEL}"));
    } else if levels.windows(2).any(|w| w[1] <= w[0]) {
        bad(
            &levels_key,
            format!("must be strictly increasing, got {levels:?}"),
        );
    }
    let max_concurrency = o.max_concurrency.or(d.max_concurrency);
    let mut capped_by_max_concurrency = None;
    if let Some(max) = max_concurrency {
        if max == 0 {
            bad(&k("max_concurrency"), "must be at least 1".into());
        }
        if levels.iter().any(|&l| l > max) {
            capped_by_max_concurrency = Some(max);
        }
        levels.retain(|&l| l <= max);
        if levels.is_empty() && max > 0 {
            bad(
                &k("max_concurrency"),
                format!("{max} is below every configured level"),
            );
        }
    }
    let requests_per_level = o
        .requests_per_level
        .or(d.requests_per_level)
        .unwrap_or(RequestsPerLevel::PerConcurrency(3.0));
    let min_requests_per_level = o
        .min_requests_per_level
        .or(d.min_requests_per_level)
        .unwrap_or(8);
    if let Some(&top) = levels.iter().filter(|&&l| l <= MAX_LEVEL).max() {
        let n = requests_per_level.count(top, min_requests_per_level);
        if n > MAX_REQUESTS_PER_LEVEL {
            let (field, set_here) = if u64::from(min_requests_per_level) > MAX_REQUESTS_PER_LEVEL {
                ("min_requests_per_level", o.min_requests_per_level.is_some())
            } else {
                ("requests_per_level", o.requests_per_level.is_some())
            };
            let rk = if set_here {
                k(field)
            } else {
                format!("defaults.{field}")
            };
            bad(
                &rk,
                format!(
                    "gives {n} requests at concurrency {top}, more than {MAX_REQUESTS_PER_LEVEL}"
                ),
            );
        }
    }
    let request_timeout = o
        .request_timeout
        .or(d.request_timeout)
        .unwrap_or(Duration::from_secs(120));
    if request_timeout.is_zero() {
        bad(&k("request_timeout"), "must be more than 0s".into());
    }
    let tslo = o.slo.clone().unwrap_or_default();
    let slo = Slo {
        p95_latency: tslo
            .p95_latency
            .or(d.slo.p95_latency)
            .unwrap_or(Duration::from_secs(30)),
        max_shed_ratio: tslo.max_shed_ratio.or(d.slo.max_shed_ratio).unwrap_or(0.05),
        max_error_ratio: tslo
            .max_error_ratio
            .or(d.slo.max_error_ratio)
            .unwrap_or(0.05),
    };
    if !(0.0..=1.0).contains(&slo.max_shed_ratio) {
        bad(&k("slo.max_shed_ratio"), "must be between 0 and 1".into());
    }
    if !(0.0..=1.0).contains(&slo.max_error_ratio) {
        bad(&k("slo.max_error_ratio"), "must be between 0 and 1".into());
    }
    let headroom = o.headroom.or(d.headroom).unwrap_or(0.9);
    if !(headroom > 0.0 && headroom <= 1.0) {
        let hk = if o.headroom.is_some() {
            k("headroom")
        } else {
            "defaults.headroom".into()
        };
        bad(&hk, format!("must be in (0, 1], got {headroom}"));
    }
    let max_tokens_field = o.max_tokens_field.or(d.max_tokens_field);

    for label in t.labels.keys() {
        if !is_label_name(label) || label == "target" || label == "model" {
            bad(
                &k("labels"),
                format!("`{label}` is not a usable label name"),
            );
        }
    }

    let idle_gate = t.idle_gate.as_ref().and_then(|g| {
        match check_base_url(&g.metrics_url) {
            Err(e) => bad(&k("idle_gate.metrics_url"), e),
            Ok(_) if g.metric.trim().is_empty() => {
                bad(&k("idle_gate.metric"), "must not be empty".into())
            }
            Ok(url) => {
                return Some(crate::schedule::idle_gate::IdleGate {
                    metrics_url: url,
                    metric: g.metric.trim().to_string(),
                    max_value: g.max_value,
                    retry_every: g
                        .retry_every
                        .unwrap_or(Duration::from_secs(30))
                        .max(Duration::from_millis(100)),
                })
            }
        }
        None
    });

    endpoint.map(|endpoint| Target {
        name: t.name.clone(),
        endpoint,
        model,
        api_key,
        labels: t.labels.clone(),
        workloads: target_workloads,
        warmup_requests,
        levels,
        requests_per_level,
        min_requests_per_level,
        request_timeout,
        slo,
        headroom,
        max_tokens_field,
        idle_gate,
        capped_by_max_concurrency,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct FakeEnv(HashMap<String, String>);
    impl Env for FakeEnv {
        fn var(&self, name: &str) -> Option<String> {
            self.0.get(name).cloned()
        }
    }

    fn load_str(yaml: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let dir = std::env::temp_dir().join(format!(
            "llmprobe-config-test-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("llmprobe.yaml");
        std::fs::write(&path, yaml).unwrap();
        let env = FakeEnv(
            env.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        let result = decode(&path, false).and_then(|f| resolve(&path, f, &env));
        std::fs::remove_dir_all(&dir).ok();
        result
    }

    const GOOD: &str = r#"
listen: "127.0.0.1:9775"
schedule: { interval: 30s, jitter: 5%, max_in_flight_total: 16 }
defaults:
  workload: chat
  levels: [1, 2, 4]
  requests_per_level: 2x
  slo: { p95_latency: 10s }
workloads:
  chat:
    max_completion_tokens: 64
    prompts: ["hello"]
targets:
  - name: w1
    base_url: http://127.0.0.1:8000/v1/
    model: m
    api_key_env: KEY
    max_concurrency: 2
    labels: { gpu: L40S }
"#;

    #[test]
    fn good_config_resolves_with_defaults_and_overrides() {
        let c = load_str(GOOD, &[("KEY", "sk-test")]).unwrap();
        assert_eq!(c.schedule.interval, Duration::from_secs(30));
        assert!((c.schedule.jitter - 0.05).abs() < 1e-12);
        let t = &c.targets[0];
        assert_eq!(t.endpoint, Endpoint::Url("http://127.0.0.1:8000/v1".into()));
        assert_eq!(t.levels, vec![1, 2], "capped by max_concurrency");
        assert_eq!(t.requests_per_level, RequestsPerLevel::PerConcurrency(2.0));
        assert_eq!(t.slo.p95_latency, Duration::from_secs(10));
        assert_eq!(t.slo.max_shed_ratio, 0.05);
        assert_eq!(t.headroom, 0.9);
        assert_eq!(t.workloads[0].max_completion_tokens, 64);
        assert_eq!(t.api_key.as_ref().unwrap().expose(), "sk-test");
        assert!(
            !format!("{t:?}").contains("sk-test"),
            "Debug must not show the key"
        );
    }

    #[test]
    fn requests_per_level_counts() {
        let r = RequestsPerLevel::PerConcurrency(3.0);
        assert_eq!(r.count(1, 8), 8);
        assert_eq!(r.count(4, 8), 12);
        assert_eq!(RequestsPerLevel::Fixed(5).count(16, 1), 16);
    }

    fn problems(yaml: &str, env: &[(&str, &str)]) -> String {
        load_str(yaml, env).unwrap_err().to_string()
    }

    #[test]
    fn unknown_key_is_named() {
        let e = problems(
            &GOOD.replace("max_concurrency: 2", "max_concurency: 2"),
            &[("KEY", "k")],
        );
        assert!(e.contains("llmprobe.yaml"), "{e}");
        assert!(e.contains("max_concurency"), "{e}");
    }

    #[test]
    fn sizes_that_would_exhaust_memory_or_overflow_are_rejected() {
        let y = GOOD
            .replace("interval: 30s", "interval: 580000000000y")
            .replace("levels: [1, 2, 4]", "levels: [1, 2, 40000]")
            .replace("max_concurrency: 2", "requests_per_level: 1e300x")
            .replace("requests_per_level: 2x", "warmup_requests: 4000000");
        let e = problems(&y, &[("KEY", "k")]);
        assert!(
            e.contains("schedule.interval: must be at most 365days"),
            "{e}"
        );
        assert!(
            e.contains("defaults.levels: a level must be at most 10000"),
            "{e}"
        );
        assert!(
            e.contains("defaults.warmup_requests: must be at most 1000000"),
            "{e}"
        );
        assert!(
            e.contains("targets[0] (w1).requests_per_level: gives 18446744073709551615 requests at concurrency 2"),
            "{e}"
        );
    }

    #[test]
    fn bad_duration_is_named() {
        let e = problems(
            &GOOD.replace("interval: 30s", "interval: 30 parsecs"),
            &[("KEY", "k")],
        );
        assert!(e.contains("schedule.interval"), "{e}");
    }

    #[test]
    fn unset_key_variable_and_missing_model_are_both_reported() {
        let e = problems(&GOOD.replace("model: m", ""), &[]);
        assert!(e.contains("targets[0] (w1).model: missing"), "{e}");
        assert!(e.contains("`KEY` is not set"), "{e}");
        assert_eq!(e.lines().count(), 2, "{e}");
    }

    #[test]
    fn level_and_headroom_and_workload_problems() {
        let y = GOOD
            .replace("levels: [1, 2, 4]", "levels: [1, 4, 2]")
            .replace("workload: chat", "workload: nope")
            .replace("slo:", "headroom: 1.5\n  slo:");
        let e = problems(&y, &[("KEY", "k")]);
        assert!(
            e.contains("defaults.levels: must be strictly increasing"),
            "{e}"
        );
        assert!(e.contains("defaults.headroom"), "{e}");
        assert!(
            e.contains("defaults.workload: workload `nope` is not defined"),
            "{e}"
        );
    }

    #[test]
    fn duplicate_targets_and_credentials_in_url() {
        let y =
            format!("{GOOD}  - name: w1\n    base_url: http://u:p@127.0.0.1:1/v1\n    model: m\n");
        let e = problems(&y, &[("KEY", "k")]);
        assert!(e.contains("duplicate target name `w1`"), "{e}");
        assert!(e.contains("must not hold credentials"), "{e}");
        assert!(
            !e.contains("u:p@"),
            "the URL's secret must not be echoed: {e}"
        );
    }

    #[test]
    fn bad_percent_and_requests_per_level() {
        let e = problems(&GOOD.replace("jitter: 5%", "jitter: lots"), &[("KEY", "k")]);
        assert!(
            e.ends_with("schedule.jitter: `lots` is not a percentage like `10%`"),
            "{e}"
        );
        let e = problems(&GOOD.replace("2x", "twice"), &[("KEY", "k")]);
        assert!(
            e.ends_with(
                "defaults.requests_per_level: expected `Nx` (N times the concurrency) or a count"
            ),
            "{e}"
        );
    }

    const PAIRS: &str = r#"
  - name: gw
    base_url: http://127.0.0.1:8001/v1
    model: m
gateway_pairs:
"#;

    #[test]
    fn gateway_pair_defaults_and_overrides() {
        let y = format!(
            "{GOOD}{PAIRS}  - {{ name: a, direct: w1, through: gw }}\n  - {{ name: b, direct: w1, through: gw, concurrency: 4, requests: 100, workload: chat }}\n"
        );
        let c = load_str(&y, &[("KEY", "k")]).unwrap();
        let a = &c.gateway_pairs[0];
        assert_eq!((a.concurrency, a.requests), (1, 40));
        assert_eq!(
            a.workload.name, "chat",
            "the direct target's first workload"
        );
        let b = &c.gateway_pairs[1];
        assert_eq!((b.concurrency, b.requests), (4, 100));
    }

    #[test]
    fn gateway_pair_problems_are_named() {
        let y = format!(
            "{GOOD}{PAIRS}  - {{ name: a, direct: w1, through: w1, concurrency: 0 }}\n  - {{ name: a, direct: nope, through: gw, requests: 0, workload: none }}\n"
        );
        let e = problems(&y, &[("KEY", "k")]);
        for want in [
            "llmprobe.yaml: gateway_pairs[0] (a).through: must differ from `direct` (both are `w1`)",
            "llmprobe.yaml: gateway_pairs[0] (a).concurrency: must be at least 1",
            "llmprobe.yaml: gateway_pairs[1] (a).name: duplicate pair name `a`",
            "llmprobe.yaml: gateway_pairs[1] (a).direct: target `nope` is not defined",
            "llmprobe.yaml: gateway_pairs[1] (a).requests: must be at least 1",
            "llmprobe.yaml: gateway_pairs[1] (a).workload: workload `none` is not defined under `workloads`",
        ] {
            assert!(e.contains(want), "missing `{want}` in:\n{e}");
        }
        assert_eq!(e.lines().count(), 6, "{e}");
        let e = problems(
            &format!("{GOOD}{PAIRS}  - {{ name: a, direct: w1, through: gw, conc: 2 }}\n"),
            &[("KEY", "k")],
        );
        assert!(
            e.contains("gateway_pairs[0].conc: unknown field `conc`"),
            "{e}"
        );
    }

    #[test]
    fn missing_file_is_named() {
        let e = decode(Path::new("/nonexistent/llmprobe.yaml"), false)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "/nonexistent/llmprobe.yaml: file not found");
    }
}
