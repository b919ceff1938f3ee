//! One target as written, resolved against `defaults:` and the workloads:
//! shared by static targets and those discovered from files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::defaults;
use super::file::{DefaultsFile, TargetFile};
use super::labels::is_usable_label;
use super::load::{Checks, Env};
use super::prompts;
use super::resolved::{ClientTls, Endpoint, IdleGate, Slo, Target, TlsFiles, Workload};
use super::secret::Secret;
use super::settings::Settings;
use super::{MAX_KEY_FILE_BYTES, MAX_LEVEL, MAX_REQUESTS_PER_LEVEL};

/// What a target is resolved against: the config's `defaults:` and
/// workloads, the directory relative paths start from (the config's), the
/// environment, and the checks of files config cannot read itself.
#[derive(Clone, Copy)]
pub struct Context<'a> {
    /// `defaults:` of the config.
    pub defaults: &'a DefaultsFile,
    /// Workloads of the config, resolved.
    pub workloads: &'a BTreeMap<String, Arc<Workload>>,
    /// Directory of the config file.
    pub base_dir: &'a Path,
    /// Source of environment variables.
    pub env: &'a dyn Env,
    /// Checks of the TLS files.
    pub checks: &'a Checks,
}

/// Resolves one target as written (its name already checked) against
/// `ctx`; problems are reported under `key`. Shared by static targets and
/// those discovered from files (`file_sd`).
pub fn resolve_target(
    t: &TargetFile,
    key: &str,
    ctx: &Context<'_>,
    bad: &mut dyn FnMut(&str, String),
) -> Option<Target> {
    let (d, workloads, env) = (ctx.defaults, ctx.workloads, ctx.env);
    let k = |field: &str| format!("{key}.{field}");
    let default_workload = &d.workload;
    let endpoint = match (&t.base_url, &t.simulator) {
        (Some(_), Some(_)) => {
            bad(key, "set either `base_url` or `simulator`, not both".into());
            None
        }
        (None, None) => {
            bad(
                &k("base_url"),
                "missing (or set `simulator` to measure the built-in engine)".into(),
            );
            None
        }
        (Some(url), None) => match check_base_url(url) {
            Ok(u) => Some(Endpoint::Url(u)),
            Err(e) => {
                bad(&k("base_url"), e);
                None
            }
        },
        (None, Some(sim)) => match sim.resolve() {
            Ok(p) => Some(Endpoint::Simulator(p)),
            Err(e) => {
                bad(&k("simulator"), e);
                None
            }
        },
    };

    let model = match (&t.model, &endpoint) {
        (Some(m), _) if !m.trim().is_empty() => m.clone(),
        (_, Some(Endpoint::Simulator(p))) => p.model_name.clone(),
        _ => {
            bad(
                &k("model"),
                "missing: name the model id the server serves".into(),
            );
            String::new()
        }
    };

    let api_key = match (&t.api_key_env, &t.api_key_file) {
        (Some(_), Some(_)) => {
            bad(
                key,
                "set either `api_key_env` or `api_key_file`, not both".into(),
            );
            None
        }
        (Some(var), None) => match env.var(var) {
            Some(v) if !v.trim().is_empty() => Some(Secret::new(v.trim().to_string())),
            _ => {
                bad(
                    &k("api_key_env"),
                    format!("environment variable `{var}` is not set or empty"),
                );
                None
            }
        },
        (None, Some(f)) => {
            let expanded = expand_credentials_dir(f, env);
            // Bounded, and never quoted: the content is the secret.
            let read = prompts::read_limited(Path::new(&expanded), MAX_KEY_FILE_BYTES);
            match read.map(|b| b.map(String::from_utf8)) {
                Ok(Some(Ok(v))) if !v.trim().is_empty() => Some(Secret::new(v.trim().to_string())),
                Ok(Some(Ok(_))) => {
                    bad(&k("api_key_file"), format!("`{expanded}` is empty"));
                    None
                }
                Ok(Some(Err(_))) => {
                    bad(
                        &k("api_key_file"),
                        format!("`{expanded}` is not UTF-8 text"),
                    );
                    None
                }
                Ok(None) => {
                    bad(
                        &k("api_key_file"),
                        format!("`{expanded}` is larger than {MAX_KEY_FILE_BYTES} bytes"),
                    );
                    None
                }
                Err(e) => {
                    bad(&k("api_key_file"), format!("cannot read `{expanded}`: {e}"));
                    None
                }
            }
        }
        (None, None) => None,
    };

    let names: Vec<String> = match (&t.workloads, &default_workload) {
        (Some(ws), _) => ws.clone(),
        (None, Some(w)) => vec![w.clone()],
        (None, None) => {
            bad(
                &k("workloads"),
                "missing, and `defaults.workload` is not set".into(),
            );
            vec![]
        }
    };
    if t.workloads.as_ref().is_some_and(|w| w.is_empty()) {
        bad(&k("workloads"), "is empty".into());
    }
    let mut target_workloads = Vec::new();
    for w in &names {
        match workloads.get(w) {
            Some(w) => target_workloads.push(w.clone()),
            None => bad(
                &k("workloads"),
                format!("workload `{w}` is not defined under `workloads`"),
            ),
        }
    }

    // The merge; a message names the target's key, or `defaults.KEY` for
    // a value it inherits (for the keys whose check depends on the value).
    let own = &t.settings;
    let s = own.or(&d.settings);
    let at = |set_here: bool, field: &str| {
        if set_here {
            k(field)
        } else {
            format!("defaults.{field}")
        }
    };
    let tls = resolve_client_tls(own, &s, ctx, &at, bad);
    let warmup_requests = s.warmup_requests.unwrap_or(defaults::WARMUP_REQUESTS);
    if u64::from(warmup_requests) > MAX_REQUESTS_PER_LEVEL {
        bad(
            &at(own.warmup_requests.is_some(), "warmup_requests"),
            format!("must be at most {MAX_REQUESTS_PER_LEVEL}"),
        );
    }
    let mut levels = s.levels.unwrap_or_else(|| defaults::LEVELS.to_vec());
    let levels_key = at(own.levels.is_some(), "levels");
    if levels.is_empty() {
        bad(&levels_key, "is empty".into());
    } else if levels.contains(&0) {
        bad(&levels_key, "a level must be at least 1".into());
    } else if levels.iter().any(|&l| l > MAX_LEVEL) {
        bad(&levels_key, format!("a level must be at most {MAX_LEVEL}"));
    } else if levels.windows(2).any(|w| w[1] <= w[0]) {
        bad(
            &levels_key,
            format!("must be strictly increasing, got {levels:?}"),
        );
    }
    let mut capped_by_max_concurrency = None;
    if let Some(max) = s.max_concurrency {
        if max == 0 {
            bad(&k("max_concurrency"), "must be at least 1".into());
        }
        if levels.iter().any(|&l| l > max) {
            capped_by_max_concurrency = Some(max);
        }
        levels.retain(|&l| l <= max);
        if levels.is_empty() && max > 0 {
            bad(
                &k("max_concurrency"),
                format!("{max} is below every configured level"),
            );
        }
    }
    let requests_per_level = s.requests_per_level.unwrap_or(defaults::REQUESTS_PER_LEVEL);
    let min_requests_per_level = s
        .min_requests_per_level
        .unwrap_or(defaults::MIN_REQUESTS_PER_LEVEL);
    if let Some(&top) = levels.iter().filter(|&&l| l <= MAX_LEVEL).max() {
        let n = requests_per_level.count(top, min_requests_per_level);
        if n > MAX_REQUESTS_PER_LEVEL {
            let (field, set_here) = if u64::from(min_requests_per_level) > MAX_REQUESTS_PER_LEVEL {
                (
                    "min_requests_per_level",
                    own.min_requests_per_level.is_some(),
                )
            } else {
                ("requests_per_level", own.requests_per_level.is_some())
            };
            bad(
                &at(set_here, field),
                format!(
                    "gives {n} requests at concurrency {top}, more than {MAX_REQUESTS_PER_LEVEL}"
                ),
            );
        }
    }
    let request_timeout = s.request_timeout.unwrap_or(defaults::REQUEST_TIMEOUT);
    if request_timeout.is_zero() {
        bad(&k("request_timeout"), "must be more than 0s".into());
    }
    let slo = s.slo.unwrap_or_default();
    let slo = Slo {
        p95_latency: slo.p95_latency.unwrap_or(defaults::SLO_P95_LATENCY),
        max_shed_ratio: slo.max_shed_ratio.unwrap_or(defaults::SLO_MAX_SHED_RATIO),
        max_error_ratio: slo.max_error_ratio.unwrap_or(defaults::SLO_MAX_ERROR_RATIO),
    };
    if !(0.0..=1.0).contains(&slo.max_shed_ratio) {
        bad(&k("slo.max_shed_ratio"), "must be between 0 and 1".into());
    }
    if !(0.0..=1.0).contains(&slo.max_error_ratio) {
        bad(&k("slo.max_error_ratio"), "must be between 0 and 1".into());
    }
    let headroom = s.headroom.unwrap_or(defaults::HEADROOM);
    if !(headroom > 0.0 && headroom <= 1.0) {
        bad(
            &at(own.headroom.is_some(), "headroom"),
            format!("must be in (0, 1], got {headroom}"),
        );
    }
    // Not defaulted here: unset, warm-up checks the default (see Target).
    let max_tokens_field = s.max_tokens_field;
    let early_stop = s.early_stop.unwrap_or(defaults::EARLY_STOP);
    let refine_resolution = s.refine_resolution.unwrap_or(defaults::REFINE_RESOLUTION);
    let full_sweep_every = s.full_sweep_every.unwrap_or(defaults::FULL_SWEEP_EVERY);
    if full_sweep_every == 0 {
        bad(
            &at(own.full_sweep_every.is_some(), "full_sweep_every"),
            "must be at least 1 (1: every sweep climbs from the lowest level)".into(),
        );
    }

    for label in t.labels.keys() {
        if !is_usable_label(label) {
            bad(
                &k("labels"),
                format!("`{label}` is not a usable label name"),
            );
        }
    }

    let idle_gate = t.idle_gate.as_ref().and_then(|g| {
        match check_base_url(&g.metrics_url) {
            Err(e) => bad(&k("idle_gate.metrics_url"), e),
            Ok(_) if g.metric.trim().is_empty() => {
                bad(&k("idle_gate.metric"), "must not be empty".into())
            }
            Ok(url) => {
                return Some(IdleGate {
                    metrics_url: url,
                    metric: g.metric.trim().to_string(),
                    max_value: g.max_value,
                    retry_every: g
                        .retry_every
                        .unwrap_or(defaults::IDLE_GATE_RETRY_EVERY)
                        .max(defaults::IDLE_GATE_MIN_RETRY_EVERY),
                })
            }
        }
        None
    });

    endpoint.map(|endpoint| Target {
        name: t.name.clone(),
        endpoint,
        model,
        api_key,
        labels: t.labels.clone(),
        workloads: target_workloads,
        warmup_requests,
        levels,
        requests_per_level,
        min_requests_per_level,
        request_timeout,
        slo,
        headroom,
        max_tokens_field,
        idle_gate,
        tls,
        capped_by_max_concurrency,
        early_stop,
        refine_resolution,
        full_sweep_every,
    })
}

/// The merged `ca_file`, `cert_file` and `key_file` (relative to the
/// config), checked by `ctx.checks`; a problem names the key where the file
/// was set (`own`: the target's, else `defaults.`, through `at`).
fn resolve_client_tls(
    own: &Settings,
    merged: &Settings,
    ctx: &Context<'_>,
    at: &dyn Fn(bool, &str) -> String,
    bad: &mut dyn FnMut(&str, String),
) -> Option<ClientTls> {
    let rel = |p: &PathBuf| {
        if p.is_relative() {
            ctx.base_dir.join(p)
        } else {
            p.clone()
        }
    };
    let identity = match (&merged.cert_file, &merged.key_file) {
        (None, None) => None,
        (Some(cert), Some(key)) => Some(TlsFiles {
            cert_file: rel(cert),
            key_file: rel(key),
        }),
        (Some(_), None) => {
            bad(
                &at(own.cert_file.is_some(), "key_file"),
                "missing: `cert_file` is set, and mutual TLS needs its key too".into(),
            );
            return None;
        }
        (None, Some(_)) => {
            bad(
                &at(own.key_file.is_some(), "cert_file"),
                "missing: `key_file` is set, and mutual TLS needs its certificate too".into(),
            );
            return None;
        }
    };
    let tls = ClientTls {
        ca_file: merged.ca_file.as_ref().map(rel),
        identity,
    };
    if tls.ca_file.is_none() && tls.identity.is_none() {
        return None;
    }
    match (ctx.checks.client_tls)(&tls) {
        Ok(()) => Some(tls),
        Err((field, e)) => {
            let set_here = match field {
                TlsKey::CaFile => own.ca_file.is_some(),
                TlsKey::CertFile => own.cert_file.is_some(),
                TlsKey::KeyFile => own.key_file.is_some(),
            };
            bad(&at(set_here, field.name()), e);
            None
        }
    }
}

/// Which of a target's TLS keys a problem is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsKey {
    /// `ca_file`.
    CaFile,
    /// `cert_file`.
    CertFile,
    /// `key_file`.
    KeyFile,
}

impl TlsKey {
    /// The key as written in the file.
    pub fn name(self) -> &'static str {
        match self {
            TlsKey::CaFile => "ca_file",
            TlsKey::CertFile => "cert_file",
            TlsKey::KeyFile => "key_file",
        }
    }
}

/// Reports a level of `target` (resolved from `t`, problems under `key`)
/// above the global cap: such a level could never hold all its requests in
/// flight at once, so it would measure a smaller concurrency than it says.
pub fn check_levels_within_cap(
    t: &TargetFile,
    target: &Target,
    key: &str,
    cap: u32,
    bad: &mut dyn FnMut(&str, String),
) {
    if let Some(&level) = target.levels.iter().find(|&&l| l > cap) {
        let levels_key = if t.settings.levels.is_some() {
            format!("{key}.levels")
        } else {
            "defaults.levels".into()
        };
        bad(
            &levels_key,
            format!(
                "level {level} is above schedule.max_in_flight_total ({cap}): a level must hold all of its \
                 requests in flight at once (raise the cap, or set max_concurrency)"
            ),
        );
    }
}

/// A base URL checked (http or https, no credentials, no query), without
/// its trailing slash.
fn check_base_url(url: &str) -> Result<String, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err("must start with http:// or https://".into());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        // Credentials in the URL would end up in logs and labels.
        return Err("must not hold credentials: use api_key_env or api_key_file".into());
    }
    if parsed.query().is_some() {
        return Err("must not have a query string".into());
    }
    Ok(url.trim_end_matches('/').to_string())
}

/// Expands a leading `${CREDENTIALS_DIRECTORY}` (systemd's `LoadCredential=`).
fn expand_credentials_dir(path: &str, env: &dyn Env) -> String {
    match path.strip_prefix("${CREDENTIALS_DIRECTORY}") {
        Some(rest) => format!(
            "{}{rest}",
            env.var("CREDENTIALS_DIRECTORY").unwrap_or_default()
        ),
        None => path.to_string(),
    }
}
