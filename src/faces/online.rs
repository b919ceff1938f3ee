//! What `check-config --online` prints: one line per target, saying whether
//! a sweep can measure it as configured and what one sweep will send.

use std::time::Duration;

use crate::config::Target;
use crate::stats::server::MetricsSource;
use crate::sweep::online::{Load, Online};

/// One line for `target`: `NAME: ok: ...`, or `NAME: ` and what is wrong;
/// a sweep is cut at `sweep_timeout`.
pub fn line(target: &Target, online: &Online, sweep_timeout: Duration) -> String {
    let latency = match &online.request {
        Ok(l) => l,
        Err(what) if online.setup_error.is_some() => return format!("{}: {what}", target.name),
        Err(what) => {
            return format!(
                "{}: not ready: the one request sent failed ({what}); a sweep would measure this failure",
                target.name
            )
        }
    };
    let model = match online.setup.model_listed {
        Some(true) => format!("model {} listed", target.model),
        Some(false) => format!(
            "model {} NOT among those listed ({})",
            target.model,
            online.setup.models.join(", ")
        ),
        None => format!("model {} (no model list)", target.model),
    };
    let sm = &online.server_metrics;
    let metrics = match (sm.source, &sm.url) {
        (MetricsSource::Off, _) => "engine metrics: off".to_string(),
        (_, Some(url)) => format!(
            "engine metrics: {} at {url}",
            sm.engine.as_deref().unwrap_or("unknown engine")
        ),
        _ => "engine metrics: none found".to_string(),
    };
    let gate = match &target.idle_gate {
        Some(g) => format!(
            "idle gate applies (sweeps wait while {} > {})",
            g.metric, g.max_value
        ),
        None => "no idle gate".to_string(),
    };
    let accepted = if target.api_key.is_some() {
        "key, model and path accepted"
    } else {
        "model and path accepted (no key sent)"
    };
    format!(
        "{}: ok: {accepted} (one request of 1 output token, {:.0} ms); {model}; {metrics}; {}, cut at {}; {gate}",
        target.name,
        latency.as_secs_f64() * 1000.0,
        load_words(&online.load),
        humantime::format_duration(sweep_timeout)
    )
}

/// The load of one sweep, in words.
fn load_words(load: &Load) -> String {
    let duration = match load.seconds_at_least {
        // The request sent asked for one token: longer answers take longer.
        Some(s) => format!(", levels taking at least {s:.1}s at that request's latency"),
        None => String::new(),
    };
    format!(
        "one sweep sends up to {} requests asking up to {} output tokens{duration}",
        load.requests, load.output_tokens
    )
}
