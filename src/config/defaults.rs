//! The built-in defaults of the daemon-wide keys: the value a key takes
//! when the file does not set it. A per-target key's default is in its
//! entry of [`super::keys`]; the simulator's profiles are its own table, in
//! [`super::simulator`].

use std::time::Duration;

use super::labels::DECLARED_LABELS;

// `listen:`, `schedule:`, `web:`, `sinks:`.

/// Address of /metrics, /healthz, /readyz.
pub const LISTEN: &str = "0.0.0.0:9775";
/// `max_prompt_memory_mib`: what the shipped unit's `MemoryMax=1G` holds by
/// docs/operating.md's sizing (256 MiB for the daemon, plus twice the
/// prompt memory).
pub const MAX_PROMPT_MEMORY_MIB: u32 = 384;
/// Between two sweeps of one target.
pub const INTERVAL: Duration = Duration::from_secs(15 * 60);
/// Random spread added to each interval, as a fraction of it.
pub const JITTER: f64 = 0.10;
/// Requests in flight across all targets at once.
pub const MAX_IN_FLIGHT_TOTAL: u32 = 64;
/// Limit on the wall time of one sweep of one target.
pub const SWEEP_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// Whether `POST /-/reload` is served.
pub const ENABLE_RELOAD: bool = true;

// `sinks:`.

/// Whether the log sink writes a line per finished round.
pub const LOG_ROUNDS: bool = true;
/// `sinks.otlp.protocol`: the only transport built.
pub const OTLP_PROTOCOL: &str = "http/protobuf";
/// `sinks.otlp.interval`: between two exports (the OpenTelemetry SDKs' default).
pub const OTLP_INTERVAL: Duration = Duration::from_secs(60);
/// `sinks.otlp.timeout`: limit on one export request (the SDKs' default).
pub const OTLP_TIMEOUT: Duration = Duration::from_secs(10);

// `state_dir:`.

/// The variable systemd sets to the unit's `StateDirectory=`: the default
/// `state_dir` when set (its first path, when it holds several).
pub const STATE_DIR_ENV: &str = "STATE_DIRECTORY";
/// The default `state_dir` without `$STATE_DIRECTORY`, used only when it
/// already is a directory (the unit and the package make it): a test or a
/// run from a checkout keeps no state unless it asks for it.
pub const STATE_DIR: &str = "/var/lib/llmprobe";

// A target's `idle_gate:` (its `max_value` defaults to 0).

/// Wait between two looks at a busy server.
pub const IDLE_GATE_RETRY_EVERY: Duration = Duration::from_secs(30);
/// Shortest wait accepted (a smaller one is raised to it).
pub const IDLE_GATE_MIN_RETRY_EVERY: Duration = Duration::from_millis(100);

// `workloads:`.

/// Output limit sent with every request.
pub const MAX_COMPLETION_TOKENS: u32 = 256;
/// Sampling temperature.
pub const TEMPERATURE: f64 = 0.0;
/// Instruction sent before each document of `prompts_dir`.
pub const INSTRUCTION: &str = "Summarise this document.";

// `gateway_pairs:`.

/// Requests in flight on each side during one batch.
pub const PAIR_CONCURRENCY: u32 = 1;
/// Counted requests per side.
pub const PAIR_REQUESTS: u32 = 40;

// `file_sd:`, `target_template:`, `shard:`.

/// How often the discovery files are checked for changes.
pub const FILE_SD_REFRESH_INTERVAL: Duration = Duration::from_secs(30);
/// Scheme of a discovered target's URL.
pub const TEMPLATE_SCHEME: &str = "http";
/// Path of the OpenAI-compatible API on a discovered server.
pub const TEMPLATE_PATH_PREFIX: &str = "/v1";
/// Label holding a discovered target's model id.
pub const TEMPLATE_MODEL_LABEL: &str = "model";
/// Path of a discovered server's own metrics, for its idle gate.
pub const TEMPLATE_METRICS_PATH: &str = "/metrics";
/// Labels copied from a discovery file into `llmprobe_target_info`.
pub const TEMPLATE_LABELS: &[&str] = DECLARED_LABELS;
/// Number of instances sharing the targets.
pub const SHARD_COUNT: u32 = 1;
