//! Configurations for tests: written to fresh files, loaded, and rendered
//! from the few settings a test varies.

use std::path::PathBuf;

use super::paths;

/// Writes `yaml` to `llmprobe.yaml` in a fresh directory and returns its path.
pub fn write_config(yaml: &str) -> PathBuf {
    let path = paths::fresh_dir("test").join("llmprobe.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

/// Writes and loads `yaml` (environment overrides included); panics with
/// the problems when it is not valid.
pub fn load(yaml: &str) -> llmprobe::config::Config {
    llmprobe::config::load(&write_config(yaml)).unwrap_or_else(|e| panic!("{e}"))
}

/// A configuration as a user would write it, for a quick sweep: one
/// workload, the schedule and the defaults every target shares, then
/// whatever `rest` holds (targets, file_sd, gateway pairs...). Tests set the
/// fields they vary and take the others from `Default`.
pub struct Yaml<'a> {
    /// `schedule.interval`.
    pub interval: &'a str,
    /// `schedule.jitter`.
    pub jitter: &'a str,
    /// `schedule.max_in_flight_total`.
    pub max_in_flight_total: u32,
    /// `schedule.sweep_timeout`.
    pub sweep_timeout: &'a str,
    /// `defaults.workload`.
    pub workload: &'a str,
    /// `defaults.warmup_requests`.
    pub warmup_requests: u32,
    /// `defaults.levels`, as YAML.
    pub levels: &'a str,
    /// `defaults.requests_per_level`.
    pub requests_per_level: &'a str,
    /// `defaults.min_requests_per_level`.
    pub min_requests_per_level: u32,
    /// `defaults.request_timeout`.
    pub request_timeout: &'a str,
    /// `defaults.slo`, as YAML; left out when None.
    pub slo: Option<&'a str>,
    /// `defaults.sustained`, as YAML: off unless a test is about the
    /// sustained rate (a search costs a few seconds per sweep).
    pub sustained: &'a str,
    /// `defaults.probe`, as YAML: off unless a test is about probes (a
    /// probe beside a test's sweeps would change what it counts).
    pub probe: &'a str,
    /// More lines of `defaults` (indented two spaces), or "".
    pub more_defaults: &'a str,
    /// The whole `workloads:` block; None gives one workload named by
    /// `workload` with `max_completion_tokens` and `prompts`.
    pub workloads: Option<&'a str>,
    /// The default workload's `max_completion_tokens`.
    pub max_completion_tokens: u32,
    /// The default workload's `prompts`, as YAML.
    pub prompts: &'a str,
    /// Everything after the workloads (`targets:`, `file_sd:`, ...).
    pub rest: &'a str,
}

impl Default for Yaml<'_> {
    fn default() -> Self {
        Yaml {
            interval: "1s",
            jitter: "0%",
            max_in_flight_total: 64,
            sweep_timeout: "60s",
            workload: "chat",
            warmup_requests: 1,
            levels: "[1]",
            requests_per_level: "1x",
            min_requests_per_level: 4,
            request_timeout: "10s",
            slo: None,
            sustained: "{ every: 0 }",
            probe: "{ interval: 0s }",
            more_defaults: "",
            workloads: None,
            max_completion_tokens: 8,
            prompts: r#"["hello"]"#,
            rest: "",
        }
    }
}

impl Yaml<'_> {
    /// The YAML text; `listen` is always 127.0.0.1:0 (a binary run through
    /// `binary::Running` gets its port from the environment).
    pub fn render(&self) -> String {
        let slo = self
            .slo
            .map(|slo| format!("  slo: {slo}\n"))
            .unwrap_or_default();
        let more_defaults = match self.more_defaults {
            "" => String::new(),
            more => format!("{}\n", more.trim_end()),
        };
        let workloads = match self.workloads {
            Some(block) => block.trim().to_string(),
            None => format!(
                "workloads:\n  {}:\n    max_completion_tokens: {}\n    prompts: {}",
                self.workload, self.max_completion_tokens, self.prompts
            ),
        };
        format!(
            r#"
listen: "127.0.0.1:0"
schedule: {{ interval: {interval}, jitter: {jitter}, max_in_flight_total: {max_in_flight_total}, sweep_timeout: {sweep_timeout} }}
defaults:
  workload: {workload}
  warmup_requests: {warmup_requests}
  levels: {levels}
  requests_per_level: {requests_per_level}
  min_requests_per_level: {min_requests_per_level}
  request_timeout: {request_timeout}
  sustained: {sustained}
  probe: {probe}
{slo}{more_defaults}{workloads}
{rest}
"#,
            interval = self.interval,
            jitter = self.jitter,
            max_in_flight_total = self.max_in_flight_total,
            sweep_timeout = self.sweep_timeout,
            workload = self.workload,
            warmup_requests = self.warmup_requests,
            levels = self.levels,
            requests_per_level = self.requests_per_level,
            min_requests_per_level = self.min_requests_per_level,
            request_timeout = self.request_timeout,
            sustained = self.sustained,
            probe = self.probe,
            rest = self.rest.trim(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_yaml_holds_every_setting() {
        let yaml = Yaml {
            levels: "[2, 4]",
            slo: Some("{ p95_latency: 5s }"),
            more_defaults: "  headroom: 0.9",
            rest: "targets: []",
            ..Yaml::default()
        }
        .render();
        for line in [
            "schedule: { interval: 1s, jitter: 0%, max_in_flight_total: 64, sweep_timeout: 60s }",
            "  levels: [2, 4]",
            "  slo: { p95_latency: 5s }",
            "  headroom: 0.9",
            "workloads:\n  chat:\n    max_completion_tokens: 8\n    prompts: [\"hello\"]",
            "targets: []",
        ] {
            assert!(yaml.contains(line), "{line:?} not in\n{yaml}");
        }
    }
}
