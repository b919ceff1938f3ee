//! The configuration file as written: every section decoded strictly
//! (unknown keys are errors), with nothing applied yet.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::values::{MaxTokensField, Percent, RequestsPerLevel};

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
