//! The resolved configuration: validated, every default applied; what the
//! fleet, the scheduler and the sweep read.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::defaults;
use super::file::{DefaultsFile, TemplateFile};
use super::keys::{per_target_keys, Keys};
use super::prompts::Prompt;
use super::secret::Secret;
use super::simulator::SimParams;
use super::sinks::SinkSettings;
use super::tls::{ClientTls, TlsFiles};
use super::values::{MaxTokensField, PrefixCache};

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
    /// Each export sink's own settings.
    pub sinks: SinkSettings,
    /// Discovery from files and sharding.
    pub fleet: FleetConfig,
    /// Where the loops keep their state between runs; None: nowhere.
    pub state_dir: Option<PathBuf>,
    /// The most prompt memory the targets may need, MiB.
    pub max_prompt_memory_mib: u32,
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

/// Where a target's server is.
#[derive(Debug, Clone, PartialEq)]
pub enum Endpoint {
    /// A server at this base URL.
    Url(String),
    /// The built-in simulated engine, started in-process on a loopback port.
    Simulator(SimParams),
}

/// Declares [`Target`]: the fields below, then one per per-target key (from
/// [`per_target_keys`]), and [`Target::new`] from both parts.
macro_rules! define_target {
    (
        $(#[$meta:meta])*
        pub struct Target {
            $( $(#[doc = $doc:literal])* pub $field:ident : $ty:ty, )*
        }
        [ $( $(#[doc = $kdoc:literal])* $(#[serde $serde:tt])?
             $key:ident : $kty:ty => $krty:ty = $rule:expr, )* ]
    ) => {
        $(#[$meta])*
        pub struct Target {
            $( $(#[doc = $doc])* pub $field: $ty, )*
            $( $(#[doc = $kdoc])* pub $key: $krty, )*
        }

        /// What a target has besides its per-target keys.
        pub struct TargetOwn {
            $( $(#[doc = $doc])* pub $field: $ty, )*
        }

        impl Target {
            /// The target of `own` and its resolved `keys`.
            pub fn new(own: TargetOwn, keys: Keys) -> Target {
                Target {
                    $( $field: own.$field, )*
                    $( $key: keys.$key, )*
                }
            }
        }
    };
}

per_target_keys!(define_target! {
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
        /// Postpone sweeps while the server is busy.
        pub idle_gate: Option<IdleGate>,
        /// `max_concurrency`, when it left configured levels out (the climb
        /// then stops there, and the result says so).
        pub capped_by_max_concurrency: Option<u32>,
        /// Private TLS towards the server (None: the shared client, built-in
        /// roots), from `ca_file`, `cert_file` and `key_file`.
        pub tls: Option<ClientTls>,
    }
});

impl Target {
    /// The options every request of this target carries besides the
    /// workload's prompt, limit and temperature: the one value its endpoint
    /// kind builds bodies from.
    pub fn request_options(&self) -> RequestOptions {
        RequestOptions {
            max_tokens_field: self.max_tokens_field,
            body_keys: self
                .own_body_keys()
                .into_iter()
                .filter_map(|(k, v)| Some((k, v?)))
                .collect(),
            extra_body: self.extra_body.clone(),
        }
    }
}

impl Target {
    /// The values of the keys of [`super::values::BODY_KEYS`], one entry
    /// per name, in its order (None: not set, not sent).
    pub(crate) fn own_body_keys(&self) -> Vec<(&'static str, Option<serde_json::Value>)> {
        vec![("top_p", self.top_p.map(serde_json::Value::from))]
    }
}

/// The request options of a target, handed as one value to its endpoint
/// kind (with the workload's prompts, output limit and temperature).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RequestOptions {
    /// Request field for the output limit; None: not configured, so
    /// warm-up checks that the kind's first field bounds the output, and
    /// tries its other fields when it does not.
    pub max_tokens_field: Option<MaxTokensField>,
    /// The keys of their own that are set ([`super::values::BODY_KEYS`]),
    /// sent under their names (an unset one is not sent).
    pub body_keys: BTreeMap<&'static str, serde_json::Value>,
    /// Engine-specific keys added to every body verbatim; none of them is a
    /// key llmprobe sets itself or one of `body_keys`
    /// ([`super::values::is_reserved_body_key`]).
    pub extra_body: BTreeMap<String, serde_json::Value>,
}

/// A resolved idle gate of a target: sweeps wait while the server is busy.
#[derive(Debug, Clone, PartialEq)]
pub struct IdleGate {
    /// URL of the server's Prometheus metrics.
    pub metrics_url: String,
    /// Metric whose value (summed over its series) measures busyness.
    pub metric: String,
    /// The sweep runs only while the value is at most this.
    pub max_value: f64,
    /// How long to wait before looking again.
    pub retry_every: Duration,
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
    /// Where the first prompt that is a chat (more than one user text) was
    /// written, e.g. "`prompts.jsonl` line 3": an endpoint kind that sends
    /// one text per prompt cannot send it.
    pub chat_at: Option<String>,
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

/// Resolved `web:` section: plain data; the HTTP layer builds the TLS
/// server and the auth check from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Web {
    /// Whether `POST /-/reload` is served.
    pub enable_reload: bool,
    /// Users allowed in, with their bcrypt hashes (empty: no auth).
    pub basic_auth_users: BTreeMap<String, Secret>,
    /// Certificate and key, when HTTPS is on.
    pub tls: Option<TlsFiles>,
}

/// Resolved `file_sd:`, `target_template:` and `shard:`.
#[derive(Debug, Clone, Default)]
pub struct FleetConfig {
    /// Discovery from files, when configured.
    pub file_sd: Option<Arc<FileSdConfig>>,
    /// This instance's shard.
    pub shard: Shard,
}

/// Validated `file_sd:` and `target_template:`, with what a discovered target
/// inherits (the config's defaults and workloads).
#[derive(Debug, Clone)]
pub struct FileSdConfig {
    /// Files read.
    pub patterns: Vec<Pattern>,
    /// Between two checks for changes.
    pub refresh_interval: Duration,
    /// How an entry becomes a target.
    pub template: TemplateFile,
    /// `defaults:` of the config.
    pub defaults: DefaultsFile,
    /// Workloads of the config, resolved.
    pub workloads: BTreeMap<String, Arc<Workload>>,
    /// Directory of the config file (relative paths start there).
    pub base_dir: PathBuf,
    /// The TLS files every discovered target shares (from
    /// `target_template:` and `defaults:`), checked at load.
    pub tls: Option<ClientTls>,
    /// `schedule.max_in_flight_total`: no level may be above it.
    pub max_in_flight_total: u32,
}

/// Which files a pattern matches: a literal directory and a file name that
/// may hold `*` and `?` (as in Prometheus, wildcards only in the file name).
#[derive(Debug, Clone, PartialEq)]
pub struct Pattern {
    /// As written, for messages.
    pub shown: String,
    /// Directory searched.
    pub dir: PathBuf,
    /// File name pattern.
    pub name: String,
}

impl Pattern {
    /// The pattern `written` in the config (relative to `base_dir`), checked.
    pub fn new(written: &str, base_dir: &Path) -> Result<Pattern, String> {
        let path = Path::new(written);
        let full = if path.is_relative() {
            base_dir.join(path)
        } else {
            path.to_path_buf()
        };
        let name = full
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| format!("`{written}` does not name a file"))?
            .to_string();
        let dir = full.parent().unwrap_or(Path::new(".")).to_path_buf();
        if dir.to_string_lossy().contains(['*', '?', '[']) {
            return Err(format!(
                "`{written}`: wildcards are only allowed in the file name, not in directories"
            ));
        }
        if name.contains('[') {
            return Err(format!(
                "`{written}`: only `*` and `?` are supported as wildcards"
            ));
        }
        if Format::of(Path::new(&name)).is_none() {
            return Err(format!(
                "`{written}` must end in .json, .yml or .yaml (the format is taken from the extension)"
            ));
        }
        Ok(Pattern {
            shown: written.to_string(),
            dir,
            name,
        })
    }

    /// Whether the file name holds a wildcard (else it names one file).
    pub fn has_wildcard(&self) -> bool {
        self.name.contains(['*', '?'])
    }
}

/// Format of a discovery file, from its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `.json`
    Json,
    /// `.yml`, `.yaml`
    Yaml,
}

impl Format {
    /// The format a file's extension says, if any.
    pub fn of(path: &Path) -> Option<Format> {
        match path.extension()?.to_str()? {
            "json" => Some(Format::Json),
            "yml" | "yaml" => Some(Format::Yaml),
            _ => None,
        }
    }
}

/// Which share of the targets this instance measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This instance's shard.
    pub index: u32,
    /// Number of shards.
    pub count: u32,
}

impl Default for Shard {
    fn default() -> Self {
        Shard {
            index: 0,
            count: defaults::SHARD_COUNT,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_checked() {
        let base = Path::new("/etc/llmprobe");
        let p = Pattern::new("targets/*.json", base).unwrap();
        assert_eq!(p.dir, Path::new("/etc/llmprobe/targets"));
        assert_eq!(p.name, "*.json");
        assert!(Pattern::new("/x/*/a.json", base)
            .unwrap_err()
            .contains("only allowed in the file name"));
        assert!(Pattern::new("/x/a.txt", base)
            .unwrap_err()
            .contains(".json, .yml or .yaml"));
        assert!(Pattern::new("/x/[ab].json", base).is_err());
    }
}
