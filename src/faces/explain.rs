//! What `llmprobe check-config` prints: a valid configuration's account of
//! what the daemon will do with it, in words.

use std::fmt::Write;

use crate::config::proxy::{ProxyMode, ProxyVariables};
use crate::config::{self, Config, Target};

/// Which proxy `target`'s requests go through, in words.
pub fn proxy_line(target: &Target, proxies: &ProxyVariables) -> String {
    match (&target.endpoint, target.proxy) {
        (config::Endpoint::Simulator(_), _) => "none (the built-in engine is never proxied)".into(),
        (_, ProxyMode::Off) if proxies.any() => {
            "none (proxy variables in the environment ignored: `proxy: off`)".into()
        }
        (_, ProxyMode::Off) => "none".into(),
        (config::Endpoint::Url(url), mode) => match proxies.route(mode, url) {
            Some(route) => route.shown,
            None if proxies.any() => "none (NO_PROXY or a loopback host)".into(),
            None => "none (`proxy: environment`, but no proxy variable is set)".into(),
        },
    }
}

/// A human-readable account of what a valid configuration will do.
pub fn explain(config: &Config) -> String {
    let mut out = String::new();
    let s = &config.schedule;
    let _ = writeln!(out, "configuration {} is valid", config.path.display());
    let _ = writeln!(
        out,
        "listen: {} (reload endpoint {})",
        config.listen,
        if config.web.enable_reload {
            "on"
        } else {
            "off"
        }
    );
    let _ = writeln!(
        out,
        "web: {}, {}",
        if config.web.tls.is_some() {
            "HTTPS"
        } else {
            "plain HTTP"
        },
        if !config.web.basic_auth_users.is_empty() {
            "basic auth required (except /healthz, /readyz)"
        } else {
            "no authentication"
        }
    );
    let _ = writeln!(
        out,
        "schedule: every {} + up to {:.0}% jitter, at most {} requests in flight in all, sweeps limited to {}",
        humantime::format_duration(s.interval),
        s.jitter * 100.0,
        s.max_in_flight_total,
        humantime::format_duration(s.sweep_timeout)
    );
    let _ = writeln!(
        out,
        "sinks: /metrics, the index page, {}",
        if config.sinks.log.rounds {
            "a log line per finished round"
        } else {
            "no log line per round (sinks.log.rounds: false)"
        }
    );
    if let Some(otlp) = &config.sinks.otlp {
        // Header names only: their values may be secrets.
        let headers: Vec<&str> = otlp.headers.iter().map(|(n, _)| n.as_str()).collect();
        let _ = writeln!(
            out,
            "otlp: GenAI client histograms and llmprobe gauges to {} every {} ({} temporality, timeout {}{}{})",
            otlp.endpoint,
            humantime::format_duration(otlp.interval),
            otlp.temporality.as_str(),
            humantime::format_duration(otlp.timeout),
            if headers.is_empty() { "" } else { ", headers " },
            headers.join(", ")
        );
    }
    let _ = match &config.state_dir {
        Some(dir) => writeln!(
            out,
            "state: each target's pooled evidence, plan and last sweeps kept in {} across restarts",
            dir.display()
        ),
        None => writeln!(
            out,
            "state: kept in memory only (no state_dir): a restart starts every target from nothing"
        ),
    };
    let _ = writeln!(out, "{}", super::prompt_memory::line(config));
    out.push_str(&crate::fleet::explain(config));
    let proxies = ProxyVariables::from_env();
    for t in &config.targets {
        target(&mut out, t, &proxies);
    }
    for p in &config.gateway_pairs {
        let _ = writeln!(
            out,
            "gateway pair {}: {} (direct) vs {} (through), interleaved, {} requests per side at concurrency {}, workload {}",
            p.name, p.direct, p.through, p.requests, p.concurrency, p.workload.name
        );
    }
    out
}

/// What the daemon will do with one target.
fn target(out: &mut String, t: &Target, proxies: &ProxyVariables) {
    let endpoint = match &t.endpoint {
        config::Endpoint::Url(u) => u.clone(),
        config::Endpoint::Simulator(p) => format!("built-in simulated engine ({:?})", p.engine),
    };
    let _ = writeln!(out, "target {}: {} model {}", t.name, endpoint, t.model);
    let _ = writeln!(
        out,
        "  key: {}; levels {:?}; warm-up {}; request timeout {}",
        if t.api_key.is_some() { "set" } else { "none" },
        t.levels,
        t.warmup_requests,
        humantime::format_duration(t.request_timeout)
    );
    let _ = writeln!(out, "  proxy: {}", proxy_line(t, proxies));
    if let Some(tls) = &t.tls {
        let _ = writeln!(
            out,
            "  TLS: roots {}; client certificate {}",
            tls.ca_file
                .as_ref()
                .map_or("built-in".into(), |f| format!("from {}", f.display())),
            tls.identity
                .as_ref()
                .map_or("none".into(), |i| i.cert_file.display().to_string())
        );
    }
    let _ = writeln!(
        out,
        "  SLO: p95 latency <= {}, shed ratio <= {}, error ratio <= {}; recommended max_in_flight = floor(knee x {})",
        humantime::format_duration(t.slo.p95_latency),
        t.slo.max_shed_ratio,
        t.slo.max_error_ratio,
        t.headroom
    );
    let _ = writeln!(
        out,
        "  gentle sweeps: early stop {}; refinement between levels {}; {}",
        if t.early_stop { "on" } else { "off" },
        match t.refine_resolution {
            config::gentle::Resolution::Off => "off".to_string(),
            r => format!("to {r}"),
        },
        match t.full_sweep_every {
            0 | 1 => "every daemon sweep climbs from the lowest level".to_string(),
            n => format!(
                "the daemon climbs in full every {n} sweeps, the others start near the last knee"
            ),
        }
    );
    let _ = writeln!(
        out,
        "  output limit: {}",
        match (t.max_tokens_field, t.api) {
            (Some(f), _) => format!("sent as `{}` (configured)", f.as_str()),
            (None, config::Api::Chat) =>
                "sent as `max_completion_tokens`, checked on every answer (`max_tokens`, then both, \
                     if the server does not honour it); set max_tokens_field to skip the check"
                    .to_string(),
            (None, api) => format!(
                "sent as `{}`, checked on every answer; set max_tokens_field to skip the check",
                api.output_limit_fields()[0].as_str()
            ),
        }
    );
    if t.api != config::Api::Chat {
        let _ = writeln!(out, "  api: {}", t.api.as_str());
    }
    let options = t.request_options();
    if !options.body_keys.is_empty() || !t.extra_body.is_empty() {
        let keys: Vec<&str> = t.extra_body.keys().map(String::as_str).collect();
        let own: Vec<String> = config::BODY_KEYS
            .iter()
            .map(|k| match options.body_keys.get(k) {
                Some(v) => format!("{k} {v}"),
                None => format!("{k} not sent"),
            })
            .collect();
        let _ = writeln!(
            out,
            "  request options: {}; extra body keys: {}",
            own.join(", "),
            if keys.is_empty() {
                "none".into()
            } else {
                keys.join(", ")
            }
        );
    }
    server_metrics(out, t);
    probes(out, t);
    workloads(out, t);
}

/// The probes between sweeps, their cost, and a warning when a model that
/// reasons would spend their budget thinking.
fn probes(out: &mut String, t: &Target) {
    let p = &t.probe;
    let Some(interval) = p.interval else {
        let _ = writeln!(out, "  probes between sweeps: off (probe.interval: 0s)");
        return;
    };
    let workload = p
        .workload
        .clone()
        .or_else(|| t.workloads.first().map(|w| w.name.clone()))
        .unwrap_or_default();
    let per_day = 86_400.0 / interval.as_secs_f64();
    let _ = writeln!(
        out,
        "  probes between sweeps: one every {} on average (Poisson), workload {workload}, at most {} output tokens each (about {:.0} probes, {:.0} output tokens a day); paused while this target is swept; cold after {} without a request",
        humantime::format_duration(interval),
        p.max_completion_tokens,
        per_day,
        per_day * f64::from(p.max_completion_tokens),
        humantime::format_duration(p.cold_after),
    );
    let thinks = match &t.endpoint {
        config::Endpoint::Simulator(sim) => sim.reasoning_tokens >= p.max_completion_tokens,
        config::Endpoint::Url(_) => false,
    };
    if config::probe::known_to_reason(&t.model, thinks)
        && p.max_completion_tokens < config::probe::REASONING_BUDGET_HINT
    {
        let _ = writeln!(
            out,
            "  warning: {} reasons before it answers: {} output tokens will likely go on thinking, and probes will end `reasoning_budget` (served, but no answer seen); set probe.max_completion_tokens to {} or more to see answers",
            t.model,
            p.max_completion_tokens,
            config::probe::REASONING_BUDGET_HINT
        );
    }
}

/// Where the target's server metrics are read, if anywhere.
fn server_metrics(out: &mut String, t: &Target) {
    let _ = writeln!(
        out,
        "  server metrics: {}",
        match &t.server_metrics_url {
            config::ServerMetricsUrl::Off => "off".to_string(),
            config::ServerMetricsUrl::At(url) => format!(
                "read at {url} (server_metrics_url) every {} during each level",
                humantime::format_duration(t.server_metrics_period)
            ),
            config::ServerMetricsUrl::Find => format!(
                "looked for at warm-up beside /v1 (`/metrics`), then read every {} during each level; \
                 none if it holds no known engine's figures",
                humantime::format_duration(t.server_metrics_period)
            ),
        }
    );
}

/// The target's workloads, one line each.
fn workloads(out: &mut String, t: &Target) {
    for w in &t.workloads {
        let _ = writeln!(
            out,
            "  workload {}: {} prompts, max {} output tokens, temperature {}, prefix cache: {}",
            w.name,
            w.prompts.len(),
            w.max_completion_tokens,
            w.temperature,
            match w.prefix_cache {
                config::PrefixCache::Unique => "unique (a new marker starts every prompt)",
                config::PrefixCache::Shared => "shared (prompts sent as written)",
                config::PrefixCache::SharedSystemPrompt =>
                    "shared system prompt (a new marker starts the first message after it)",
            }
        );
    }
}
