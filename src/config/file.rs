//! The configuration file as written: every section decoded strictly
//! (unknown keys are errors), with nothing applied yet. The per-target
//! keys each struct shares are declared in [`super::keys`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::defaults;
use super::keys::per_target_keys;
use super::simulator::SimConfig;
use super::sinks::SinksFile;
use super::values::{Percent, PrefixCache};

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
    /// Each export sink's own settings.
    #[serde(default)]
    pub sinks: SinksFile,
    /// Targets discovered from Prometheus `file_sd` files.
    #[serde(default)]
    pub file_sd: Option<FileSdFile>,
    /// How a discovered entry becomes a target.
    #[serde(default)]
    pub target_template: Option<TemplateFile>,
    /// This instance's share of the targets, when several share a fleet.
    #[serde(default)]
    pub shard: Option<ShardFile>,
    /// Accept a file with no `targets` and no `file_sd`: without it such a
    /// file is refused, since an empty or cut-short file would otherwise
    /// stop every measurement on a reload.
    #[serde(default)]
    pub allow_empty: bool,
    /// The most prompt memory the targets may need, MiB (see
    /// `config::prompt_memory`): more is refused at load.
    #[serde(default = "default_max_prompt_memory_mib")]
    pub max_prompt_memory_mib: u32,
    /// Where each target's loop keeps what it learnt between sweeps, so a
    /// restart starts from it ("" keeps nothing; unset: see
    /// [`defaults::STATE_DIR`]).
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
}

fn default_listen() -> String {
    defaults::LISTEN.into()
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
            interval: defaults::INTERVAL,
            jitter: Percent(defaults::JITTER),
            max_in_flight_total: defaults::MAX_IN_FLIGHT_TOTAL,
            sweep_timeout: defaults::SWEEP_TIMEOUT,
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
            enable_reload: defaults::ENABLE_RELOAD,
            basic_auth_users: BTreeMap::new(),
            tls_cert_file: None,
            tls_key_file: None,
        }
    }
}

/// Declares a file struct whose keys are its own plus the per-target
/// keys, gathered in its `settings` field, and decodes it strictly
/// through a flat twin of the same name (so that messages read `expected
/// struct TargetFile` and list every key in order). Attributes on a field:
/// doc comments first, then at most one `#[serde(...)]`, which only the twin
/// gets.
macro_rules! file_struct_with_settings {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[doc = $doc:literal])* $(#[serde $serde:tt])? pub $field:ident : $ty:ty, )*
        }
    ) => {
        per_target_keys!(file_struct_with_settings! { @expand
            $(#[$meta])*
            pub struct $name {
                $( $(#[doc = $doc])* $(#[serde $serde])? pub $field: $ty, )*
            }
        });
    };
    (
        @expand
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[doc = $doc:literal])* $(#[serde $serde:tt])? pub $field:ident : $ty:ty, )*
        }
        [ $( $(#[doc = $sdoc:literal])* $(#[serde $sserde:tt])?
             $sfield:ident : $sty:ty => $rty:ty = $rule:expr, )* ]
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( $(#[doc = $doc])* pub $field: $ty, )*
            /// The per-target keys written here.
            pub settings: $crate::config::keys::Settings,
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                // The flat twin; its name shadows the outer type in here.
                #[derive(serde::Deserialize)]
                #[serde(deny_unknown_fields)]
                struct $name {
                    $( $(#[serde $serde])? $field: $ty, )*
                    $( $(#[serde $sserde])? $sfield: Option<$sty>, )*
                }
                let flat = <$name as serde::Deserialize>::deserialize(d)?;
                Ok(Self {
                    $( $field: flat.$field, )*
                    settings: $crate::config::keys::Settings {
                        $( $sfield: flat.$sfield, )*
                    },
                })
            }
        }
    };
}

file_struct_with_settings! {
    /// `defaults:`: what every target inherits and may override.
    #[derive(Debug, Clone, Default)]
    pub struct DefaultsFile {
        /// Workload used when a target names none.
        pub workload: Option<String>,
    }
}

file_struct_with_settings! {
    /// One target as written.
    #[derive(Debug, Clone)]
    pub struct TargetFile {
        /// Unique name (the `target` label).
        pub name: String,
        /// OpenAI-compatible base URL, ending in `/v1` usually.
        pub base_url: Option<String>,
        /// Run the built-in simulated engine in-process and measure it.
        pub simulator: Option<SimConfig>,
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
        pub idle_gate: Option<IdleGateFile<MetricsUrl>>,
    }
}

/// `idle_gate:` as written: `at` is where the server's metrics are (a
/// target's `metrics_url`, or the template's `metrics_path` on the
/// discovered host), the rest is shared.
#[derive(Debug, Clone)]
pub struct IdleGateFile<At> {
    /// Where the server's own Prometheus metrics are.
    pub at: At,
    /// Metric measuring busyness, e.g. `vllm:num_requests_running`.
    pub metric: String,
    /// Sweep only while the value is at most this (default 0).
    pub max_value: f64,
    /// Wait between two looks (default 30s).
    pub retry_every: Option<Duration>,
}

/// A target's `idle_gate.metrics_url`: URL of the server's metrics.
#[derive(Debug, Clone)]
pub struct MetricsUrl(pub String);

/// `target_template.idle_gate.metrics_path`: path of the server's metrics
/// on the discovered host (default `/metrics`).
#[derive(Debug, Clone)]
pub struct MetricsPath(pub Option<String>);

/// Decodes `IdleGateFile<$at>` strictly through a flat twin named `$twin`
/// (the name messages show; it shadows the outer type in there), with
/// `$field` first.
macro_rules! decode_idle_gate {
    ($at:ident, $twin:ident, $(#[serde $serde:tt])? $field:ident : $ty:ty) => {
        impl<'de> Deserialize<'de> for IdleGateFile<$at> {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct $twin {
                    $(#[serde $serde])?
                    $field: $ty,
                    metric: String,
                    #[serde(default)]
                    max_value: f64,
                    #[serde(default, with = "humantime_serde")]
                    retry_every: Option<Duration>,
                }
                let flat = $twin::deserialize(d)?;
                Ok(Self {
                    at: $at(flat.$field),
                    metric: flat.metric,
                    max_value: flat.max_value,
                    retry_every: flat.retry_every,
                })
            }
        }
    };
}

decode_idle_gate!(MetricsUrl, IdleGateFile, metrics_url: String);
decode_idle_gate!(MetricsPath, TemplateIdleGateFile, metrics_path: Option<String>);

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

/// `file_sd:`: targets discovered from Prometheus `file_sd` files.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSdFile {
    /// Files to read: paths, or patterns with `*` / `?` in the file name
    /// (`/etc/llmprobe/targets/*.json`); relative to the config file.
    pub files: Vec<String>,
    /// How often the files are checked for changes (default 30s).
    #[serde(default, with = "humantime_serde")]
    pub refresh_interval: Option<Duration>,
}

file_struct_with_settings! {
    /// `target_template:`: how a discovered `host:port` becomes a target.
    #[derive(Debug, Clone, Default)]
    pub struct TemplateFile {
        /// `http` (default) or `https`.
        pub scheme: Option<String>,
        /// Path of the OpenAI-compatible API on the server (default `/v1`).
        pub path_prefix: Option<String>,
        /// Label holding the model id (default `model`).
        pub model_label: Option<String>,
        /// Model id of entries without that label.
        pub model: Option<String>,
        /// Label holding the target's name (default: the `host:port` itself).
        pub name_label: Option<String>,
        /// Labels copied into `llmprobe_target_info` (default gpu, driver,
        /// gpu_memory, os, via_gateway); only these, so the files cannot raise
        /// the number of label names.
        pub labels: Option<Vec<String>>,
        /// Label holding a per-target `max_concurrency` (for example the
        /// gateway's max_in_flight for that worker).
        pub max_concurrency_label: Option<String>,
        /// Workloads to measure, by name.
        pub workloads: Option<Vec<String>>,
        /// Environment variable holding the API key of every discovered target.
        pub api_key_env: Option<String>,
        /// File holding that key.
        pub api_key_file: Option<String>,
        /// Idle gate on the server's own metrics, at `metrics_path` of the same host.
        pub idle_gate: Option<IdleGateFile<MetricsPath>>,
    }
}

impl TemplateFile {
    /// `scheme`, or its default.
    pub fn scheme(&self) -> &str {
        self.scheme.as_deref().unwrap_or(defaults::TEMPLATE_SCHEME)
    }

    /// `path_prefix`, or its default.
    pub fn path_prefix(&self) -> &str {
        self.path_prefix
            .as_deref()
            .unwrap_or(defaults::TEMPLATE_PATH_PREFIX)
    }

    /// `model_label`, or its default.
    pub fn model_label(&self) -> &str {
        self.model_label
            .as_deref()
            .unwrap_or(defaults::TEMPLATE_MODEL_LABEL)
    }

    /// `labels`, or the default ones.
    pub fn copied_labels(&self) -> Vec<&str> {
        match &self.labels {
            Some(ls) => ls.iter().map(String::as_str).collect(),
            None => defaults::TEMPLATE_LABELS.to_vec(),
        }
    }
}

/// `shard:`: this instance's share of the targets.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardFile {
    /// This instance's shard, from 0 to `count - 1`.
    pub index: Option<u32>,
    /// Number of instances sharing the targets (default 1).
    pub count: Option<u32>,
    /// Take the index from the trailing `-N` of the host name (a
    /// StatefulSet pod `llmprobe-2` is shard 2).
    #[serde(default)]
    pub index_from_hostname: bool,
}

fn default_max_prompt_memory_mib() -> u32 {
    defaults::MAX_PROMPT_MEMORY_MIB
}
