//! The resolved configuration: validated, every default applied; what the
//! fleet, the scheduler and the sweep read.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::prompts::Prompt;
use super::secret::Secret;
use super::values::{MaxTokensField, RequestsPerLevel};

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
    /// Request field for the output limit.
    pub max_tokens_field: MaxTokensField,
    /// Postpone sweeps while the server is busy.
    pub idle_gate: Option<crate::schedule::idle_gate::IdleGate>,
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
