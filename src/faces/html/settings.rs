//! The configuration behind a report, as the report shows it. The JSON
//! document does not carry it, so a report rendered from JSON has it only
//! when a configuration is given; without it the charts lack the SLO lines.

use std::collections::BTreeMap;

use crate::config::simulator::Engine;
use crate::config::{Config, Endpoint, RequestsPerLevel, Target};

/// What a target's sweep was asked to do, in words and numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetSettings {
    /// The server's base URL, or which simulated engine.
    pub endpoint: String,
    /// Configured levels, capped by max_concurrency.
    pub levels: Vec<u32>,
    /// "3x concurrency, at least 8".
    pub requests_per_level: String,
    /// Requests sent first and not counted.
    pub warmup_requests: u32,
    /// Limit on one request, humanly written.
    pub request_timeout: String,
    /// SLO: p95 latency limit, seconds.
    pub slo_p95_latency_seconds: f64,
    /// SLO: highest acceptable shed ratio.
    pub max_shed_ratio: f64,
    /// SLO: highest acceptable error ratio.
    pub max_error_ratio: f64,
    /// Fraction of the knee recommended as max_in_flight.
    pub headroom: f64,
    /// Workload name -> what it sends.
    pub workloads: Vec<(String, String)>,
    /// Configured labels of target_info.
    pub labels: BTreeMap<String, String>,
}

/// Settings per target name.
pub type Settings = BTreeMap<String, TargetSettings>;

impl TargetSettings {
    /// The settings of a resolved target (never its key).
    pub fn from_target(t: &Target) -> TargetSettings {
        let per_level = match t.requests_per_level {
            RequestsPerLevel::PerConcurrency(f) => format!("{f}x concurrency"),
            RequestsPerLevel::Fixed(n) => n.to_string(),
        };
        TargetSettings {
            endpoint: match &t.endpoint {
                Endpoint::Url(u) => u.clone(),
                Endpoint::Simulator(p) => match p.engine {
                    Engine::Model => "built-in simulated engine (continuous-batching model)",
                    Engine::Stub => "built-in stub engine (no model time)",
                }
                .to_string(),
            },
            levels: t.levels.clone(),
            requests_per_level: format!("{per_level}, at least {}", t.min_requests_per_level),
            warmup_requests: t.warmup_requests,
            request_timeout: humantime::format_duration(t.request_timeout).to_string(),
            slo_p95_latency_seconds: t.slo.p95_latency.as_secs_f64(),
            max_shed_ratio: t.slo.max_shed_ratio,
            max_error_ratio: t.slo.max_error_ratio,
            headroom: t.headroom,
            workloads: t
                .workloads
                .iter()
                .map(|w| {
                    (
                        w.name.clone(),
                        format!(
                            "{} prompt{}, at most {} output tokens, temperature {}",
                            w.prompts.len(),
                            if w.prompts.len() == 1 { "" } else { "s" },
                            w.max_completion_tokens,
                            w.temperature
                        ),
                    )
                })
                .collect(),
            labels: t.labels.clone(),
        }
    }
}

/// The settings of every target of `config`.
pub fn from_config(config: &Config) -> Settings {
    config
        .targets
        .iter()
        .map(|t| (t.name.clone(), TargetSettings::from_target(t)))
        .collect()
}
