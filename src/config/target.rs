//! One target as written, resolved against `defaults:` and the workloads:
//! shared by static targets and those discovered from files. Each stage is
//! a function with one job; the per-target keys resolve by the rules of
//! [`super::keys`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::checks::{check_base_url, check_key_length, MAX_LEVEL, MAX_REQUESTS_PER_LEVEL};
use super::defaults;
use super::env::{read_key_file, Env};
use super::file::{DefaultsFile, IdleGateFile, MetricsUrl, TargetFile};
use super::keys::{Keys, Names, Settings};
use super::labels::is_usable_label;
use super::resolved::{Endpoint, IdleGate, Target, TargetOwn, Workload};
use super::secret::Secret;
use super::tls::{Checks, ClientTls, TlsFiles};

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
/// those discovered from files (`file_sd`). The stages, in the order their
/// problems are reported: where the server is, the model, the API key, the
/// workloads, the TLS files, the per-target keys (each by its rule, in
/// [`super::keys`]), the levels capped by `max_concurrency`, the labels,
/// the idle gate.
pub fn resolve_target(
    t: &TargetFile,
    key: &str,
    ctx: &Context<'_>,
    bad: &mut dyn FnMut(&str, String),
) -> Option<Target> {
    let k = |field: &str| format!("{key}.{field}");
    let endpoint = resolve_endpoint(t, key, bad);
    let model = resolve_model(t, endpoint.as_ref(), &k("model"), bad);
    let api_key = resolve_api_key(t, key, ctx.env, bad);
    let workloads = resolve_workloads(t, ctx, &k("workloads"), bad);

    // The merge; a message names the target's key, or `defaults.KEY` for
    // a value it inherits (for the keys whose check depends on the value).
    let names = Names {
        target: key,
        own: &t.settings,
    };
    let merged = t.settings.or(&ctx.defaults.settings);
    let tls = resolve_client_tls(&names, &merged, ctx, bad);
    let mut keys = merged.resolve(&names, bad);
    let capped_by_max_concurrency = cap_levels(&mut keys, &names, bad);
    check_endpoint_kind(&keys, &names, &workloads, bad);
    check_probe_workload(&keys, &names, &workloads, bad);
    check_labels(&t.labels, &k("labels"), bad);
    let idle_gate = resolve_idle_gate(t.idle_gate.as_ref(), key, bad);

    let own = TargetOwn {
        name: t.name.clone(),
        endpoint: endpoint?,
        model,
        api_key,
        labels: t.labels.clone(),
        workloads,
        idle_gate,
        capped_by_max_concurrency,
        tls,
    };
    Some(Target::new(own, keys))
}

/// `base_url`, or the built-in engine of `simulator`: exactly one of them.
fn resolve_endpoint(
    t: &TargetFile,
    key: &str,
    bad: &mut dyn FnMut(&str, String),
) -> Option<Endpoint> {
    let k = |field: &str| format!("{key}.{field}");
    match (&t.base_url, &t.simulator) {
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
    }
}

/// `model`, or the simulated engine's own model name.
fn resolve_model(
    t: &TargetFile,
    endpoint: Option<&Endpoint>,
    key: &str,
    bad: &mut dyn FnMut(&str, String),
) -> String {
    match (&t.model, endpoint) {
        (Some(m), _) if !m.trim().is_empty() => m.clone(),
        (_, Some(Endpoint::Simulator(p))) => p.model_name.clone(),
        _ => {
            bad(key, "missing: name the model id the server serves".into());
            String::new()
        }
    }
}

/// The API key from `api_key_env` or `api_key_file` (at most one of them).
fn resolve_api_key(
    t: &TargetFile,
    key: &str,
    env: &dyn Env,
    bad: &mut dyn FnMut(&str, String),
) -> Option<Secret> {
    let k = |field: &str| format!("{key}.{field}");
    match (&t.api_key_env, &t.api_key_file) {
        (Some(_), Some(_)) => {
            bad(
                key,
                "set either `api_key_env` or `api_key_file`, not both".into(),
            );
            None
        }
        (Some(var), None) => match env.var(var) {
            Some(v) if !v.trim().is_empty() => match check_key_length(v.trim()) {
                Ok(()) => Some(Secret::new(v.trim().to_string())),
                Err(e) => {
                    bad(
                        &k("api_key_env"),
                        format!("environment variable `{var}`: {e}"),
                    );
                    None
                }
            },
            _ => {
                bad(
                    &k("api_key_env"),
                    format!("environment variable `{var}` is not set or empty"),
                );
                None
            }
        },
        (None, Some(f)) => match read_key_file(f, env).and_then(|v| {
            check_key_length(&v).map_err(|e| format!("`{f}`: {e}"))?;
            Ok(v)
        }) {
            Ok(v) => Some(Secret::new(v)),
            Err(e) => {
                bad(&k("api_key_file"), e);
                None
            }
        },
        (None, None) => None,
    }
}

/// The target's `workloads`, else `defaults.workload`, each one defined.
fn resolve_workloads(
    t: &TargetFile,
    ctx: &Context<'_>,
    key: &str,
    bad: &mut dyn FnMut(&str, String),
) -> Vec<Arc<Workload>> {
    let names: Vec<String> = match (&t.workloads, &ctx.defaults.workload) {
        (Some(ws), _) => ws.clone(),
        (None, Some(w)) => vec![w.clone()],
        (None, None) => {
            bad(key, "missing, and `defaults.workload` is not set".into());
            vec![]
        }
    };
    if t.workloads.as_ref().is_some_and(|w| w.is_empty()) {
        bad(key, "is empty".into());
    }
    let mut found = Vec::new();
    for w in &names {
        match ctx.workloads.get(w) {
            Some(w) => found.push(w.clone()),
            None => bad(
                key,
                format!("workload `{w}` is not defined under `workloads`"),
            ),
        }
    }
    found
}

/// `probe.workload` names one of the target's workloads.
fn check_probe_workload(
    keys: &Keys,
    names: &Names<'_>,
    workloads: &[Arc<Workload>],
    bad: &mut dyn FnMut(&str, String),
) {
    if let Some(w) = &keys.probe.workload {
        if !workloads.iter().any(|x| &x.name == w) {
            let own: Vec<String> = workloads.iter().map(|x| format!("`{}`", x.name)).collect();
            bad(
                &names.target("probe.workload"),
                format!(
                    "`{w}` is not a workload of this target (it has {})",
                    own.join(", ")
                ),
            );
        }
    }
}

/// What depends on the endpoint kind `api`: a kind that sends one text
/// per prompt cannot send a workload holding a chat (named where it was
/// written), and the output-limit field must be one of the kind's.
fn check_endpoint_kind(
    keys: &Keys,
    names: &Names<'_>,
    workloads: &[Arc<Workload>],
    bad: &mut dyn FnMut(&str, String),
) {
    let api = keys.api;
    if !api.sends_chats() {
        for w in workloads {
            if let Some(chat) = &w.chat_at {
                bad(
                    &names.at("api", names.own.is_set("api")),
                    format!(
                        "`{}` sends each prompt as one text, and workload `{}` holds a chat at {chat}: \
                         use `api: chat`, or write that prompt as one user text",
                        api.as_str(),
                        w.name
                    ),
                );
            }
        }
    }
    if let Some(f) = keys.max_tokens_field {
        let fields = api.output_limit_fields();
        if !fields.contains(&f) {
            let named: Vec<_> = fields.iter().map(|f| format!("`{}`", f.as_str())).collect();
            bad(
                &names.at("max_tokens_field", names.own.is_set("max_tokens_field")),
                format!(
                    "`{}` is not a field of `api: {}` (it has {})",
                    f.as_str(),
                    api.as_str(),
                    named.join(", ")
                ),
            );
        }
    }
}

/// Drops the levels above `max_concurrency`, returning it when it left
/// some out; a level of what remains may still not hold more than
/// [`MAX_REQUESTS_PER_LEVEL`] requests.
fn cap_levels(
    keys: &mut Keys,
    names: &Names<'_>,
    bad: &mut dyn FnMut(&str, String),
) -> Option<u32> {
    let mut capped = None;
    if let Some(max) = keys.max_concurrency {
        if keys.levels.iter().any(|&l| l > max) {
            capped = Some(max);
        }
        keys.levels.retain(|&l| l <= max);
        if keys.levels.is_empty() && max > 0 {
            bad(
                &names.target("max_concurrency"),
                format!("{max} is below every configured level"),
            );
        }
    }
    if let Some(&top) = keys.levels.iter().filter(|&&l| l <= MAX_LEVEL).max() {
        let n = keys
            .requests_per_level
            .count(top, keys.min_requests_per_level);
        if n > MAX_REQUESTS_PER_LEVEL {
            let field = if u64::from(keys.min_requests_per_level) > MAX_REQUESTS_PER_LEVEL {
                "min_requests_per_level"
            } else {
                "requests_per_level"
            };
            bad(
                &names.at(field, names.own.is_set(field)),
                format!(
                    "gives {n} requests at concurrency {top}, more than {MAX_REQUESTS_PER_LEVEL}"
                ),
            );
        }
    }
    capped
}

/// Checks that each configured label can go into `llmprobe_target_info`.
fn check_labels(labels: &BTreeMap<String, String>, key: &str, bad: &mut dyn FnMut(&str, String)) {
    for label in labels.keys() {
        if !is_usable_label(label) {
            bad(key, format!("`{label}` is not a usable label name"));
        }
    }
}

/// `idle_gate:` checked, its wait bounded below.
fn resolve_idle_gate(
    g: Option<&IdleGateFile<MetricsUrl>>,
    key: &str,
    bad: &mut dyn FnMut(&str, String),
) -> Option<IdleGate> {
    let g = g?;
    match check_base_url(&g.at.0) {
        Err(e) => bad(&format!("{key}.idle_gate.metrics_url"), e),
        Ok(_) if g.metric.trim().is_empty() => bad(
            &format!("{key}.idle_gate.metric"),
            "must not be empty".into(),
        ),
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
}

/// The merged `ca_file`, `cert_file` and `key_file` (relative to the
/// config), checked by `ctx.checks`; a problem names the key where the file
/// was set.
fn resolve_client_tls(
    names: &Names<'_>,
    merged: &Settings,
    ctx: &Context<'_>,
    bad: &mut dyn FnMut(&str, String),
) -> Option<ClientTls> {
    let at = |field: &str| names.at(field, names.own.is_set(field));
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
            // Named where `cert_file` was set: that is what asks for a key.
            bad(
                &names.at("key_file", names.own.cert_file.is_some()),
                "missing: `cert_file` is set, and mutual TLS needs its key too".into(),
            );
            return None;
        }
        (None, Some(_)) => {
            bad(
                &names.at("cert_file", names.own.key_file.is_some()),
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
            bad(&at(field.name()), e);
            None
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
        let names = Names {
            target: key,
            own: &t.settings,
        };
        bad(
            &names.at("levels", t.settings.levels.is_some()),
            format!(
                "level {level} is above schedule.max_in_flight_total ({cap}): a level must hold all of its \
                 requests in flight at once (raise the cap, or set max_concurrency)"
            ),
        );
    }
}
