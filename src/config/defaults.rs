//! Every built-in default in one table: the value a key takes when the file
//! does not set it. For a per-target setting ([`super::settings`]): when
//! neither the target (nor its template) nor `defaults:` sets it. The
//! simulator's profiles are its own table, in [`super::simulator`].

use std::time::Duration;

use super::gentle::Resolution;
use super::labels::DECLARED_LABELS;
use super::values::{MaxTokensField, RequestsPerLevel};

// `listen:`, `schedule:`, `web:`.

/// Address of /metrics, /healthz, /readyz.
pub const LISTEN: &str = "0.0.0.0:9775";
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

// Per-target settings (`max_concurrency` has none: every level is sent).

/// Requests sent first and not counted.
pub const WARMUP_REQUESTS: u32 = 2;
/// Concurrency levels.
pub const LEVELS: &[u32] = &[1, 2, 4, 8, 16];
/// Requests per level.
pub const REQUESTS_PER_LEVEL: RequestsPerLevel = RequestsPerLevel::PerConcurrency(3.0);
/// Lower bound on requests per level.
pub const MIN_REQUESTS_PER_LEVEL: u32 = 8;
/// Limit on one request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// `slo.p95_latency`.
pub const SLO_P95_LATENCY: Duration = Duration::from_secs(30);
/// `slo.max_shed_ratio`.
pub const SLO_MAX_SHED_RATIO: f64 = 0.05;
/// `slo.max_error_ratio`.
pub const SLO_MAX_ERROR_RATIO: f64 = 0.05;
/// recommended max_in_flight = floor(knee x headroom).
pub const HEADROOM: f64 = 0.9;
/// Request field that carries the output limit.
/// (When not configured it is checked at warm-up: `max_tokens`, then both,
/// are tried when the server does not honour it.)
pub const MAX_TOKENS_FIELD: MaxTokensField = MaxTokensField::MaxCompletionTokens;
/// Stop a level once it is certain to break the SLO: the verdict is the one
/// the full level would reach (see docs/measuring.md), with fewer requests
/// and less time above the knee.
pub const EARLY_STOP: bool = true;
/// No refinement unless asked: probing between two configured levels costs
/// requests above the last passed level on every sweep (about as many as
/// early stop and warm start save, in the benchmark); where the sizing
/// matters, `refine_resolution: 25%` locates the knee within a quarter.
pub const REFINE_RESOLUTION: Resolution = Resolution::Off;
/// One sweep in six climbs from the lowest level; the others start near
/// the last knee.
pub const FULL_SWEEP_EVERY: u32 = 6;

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
