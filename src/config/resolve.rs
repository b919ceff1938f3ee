//! Validation of a decoded file: every section checked and resolved, every
//! problem collected, each naming the file and the key.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::checks::{check_password_hashes, MAX_INTERVAL};
use super::defaults;
use super::env::Env;
use super::error::ConfigError;
use super::file::{FileConfig, WebFile};
use super::fleet::resolve_fleet;
use super::prompts::{self, Prompt};
use super::resolved::{Config, GatewayPair, Schedule, Target, Web, Workload};
use super::secret::Secret;
use super::target::{check_levels_within_cap, resolve_target, Context};
use super::tls::{Checks, TlsFiles};
use super::values::PrefixCache;

/// Validates a decoded file and applies defaults, collecting every problem
/// (the TLS files are not read: see [`resolve_with`]).
pub fn resolve(path: &Path, file: FileConfig, env: &dyn Env) -> Result<Config, ConfigError> {
    resolve_with(path, file, env, &Checks::NONE)
}

/// [`resolve`], running `checks` too.
pub fn resolve_with(
    path: &Path,
    file: FileConfig,
    env: &dyn Env,
    checks: &Checks,
) -> Result<Config, ConfigError> {
    let shown = path.display().to_string();
    let base_dir = path.parent().unwrap_or(Path::new("."));
    let mut problems = Vec::new();
    let mut bad = |key: &str, msg: String| problems.push(format!("{shown}: {key}: {msg}"));

    let listen = match file.listen.parse::<SocketAddr>() {
        Ok(a) => a,
        Err(_) => {
            bad(
                "listen",
                format!("`{}` is not an address like 0.0.0.0:9775", file.listen),
            );
            defaults::LISTEN.parse().expect("constant address parses")
        }
    };

    let s = &file.schedule;
    if s.interval < Duration::from_millis(100) {
        bad("schedule.interval", "must be at least 100ms".into());
    } else if s.interval > MAX_INTERVAL {
        bad("schedule.interval", "must be at most 365days".into());
    }
    if s.max_in_flight_total == 0 {
        bad("schedule.max_in_flight_total", "must be at least 1".into());
    }
    if s.sweep_timeout.is_zero() {
        bad("schedule.sweep_timeout", "must be more than 0s".into());
    }
    let schedule = Schedule {
        interval: s.interval,
        jitter: s.jitter.0,
        max_in_flight_total: s.max_in_flight_total.max(1),
        sweep_timeout: s.sweep_timeout,
    };

    let mut workloads: BTreeMap<String, Arc<Workload>> = BTreeMap::new();
    for (name, w) in &file.workloads {
        let key = format!("workloads.{name}");
        let mut prompts = Vec::new();
        if let Some(inline) = &w.prompts {
            if inline.is_empty() {
                bad(&format!("{key}.prompts"), "is empty".into());
            }
            prompts.extend(inline.iter().map(|p| Prompt::user(p)));
        }
        if let Some(pf) = &w.prompts_file {
            let full = if pf.is_relative() {
                base_dir.join(pf)
            } else {
                pf.clone()
            };
            match prompts::load_jsonl(&full) {
                Ok(p) => prompts.extend(p),
                Err(e) => bad(&format!("{key}.prompts_file"), e),
            }
        }
        if let Some(dir) = &w.prompts_dir {
            let full = if dir.is_relative() {
                base_dir.join(dir)
            } else {
                dir.clone()
            };
            let instruction = w.instruction.as_deref().unwrap_or(defaults::INSTRUCTION);
            match prompts::load_dir(&full, instruction) {
                Ok(p) => prompts.extend(p),
                Err(e) => bad(&format!("{key}.prompts_dir"), e),
            }
        } else if w.instruction.is_some() {
            bad(
                &format!("{key}.instruction"),
                "only applies to `prompts_dir`".into(),
            );
        }
        if let Some(syn) = &w.synthetic {
            if syn.prompt_tokens == 0 || syn.prompt_tokens > 1_000_000 {
                bad(
                    &format!("{key}.synthetic.prompt_tokens"),
                    "must be between 1 and 1000000".into(),
                );
            } else if syn.count == 0 || syn.count > 1000 {
                bad(
                    &format!("{key}.synthetic.count"),
                    "must be between 1 and 1000".into(),
                );
            } else {
                prompts.extend(prompts::synthetic(syn.prompt_tokens, syn.count));
            }
        }
        if w.prompts.is_none()
            && w.prompts_file.is_none()
            && w.prompts_dir.is_none()
            && w.synthetic.is_none()
        {
            bad(
                &key,
                "has no prompts: set `prompts`, `prompts_file`, `prompts_dir` or `synthetic`"
                    .into(),
            );
        }
        if let Some(system) = &w.system_prompt {
            if system.trim().is_empty() {
                bad(&format!("{key}.system_prompt"), "is empty".into());
            }
            for p in &mut prompts {
                p.prepend_system(system);
            }
        }
        let prefix_cache = w.prefix_cache.unwrap_or_default();
        if prefix_cache == PrefixCache::SharedSystemPrompt
            && !prompts.iter().all(Prompt::starts_with_system)
        {
            bad(
                &format!("{key}.prefix_cache"),
                "`shared_system_prompt` needs a system message first in every prompt: set `system_prompt`".into(),
            );
        }
        let max_completion_tokens = w
            .max_completion_tokens
            .unwrap_or(defaults::MAX_COMPLETION_TOKENS);
        if max_completion_tokens == 0 {
            bad(
                &format!("{key}.max_completion_tokens"),
                "must be at least 1".into(),
            );
        }
        let temperature = w.temperature.unwrap_or(defaults::TEMPERATURE);
        if !(0.0..=2.0).contains(&temperature) {
            bad(
                &format!("{key}.temperature"),
                "must be between 0 and 2".into(),
            );
        }
        workloads.insert(
            name.clone(),
            Arc::new(Workload {
                name: name.clone(),
                max_completion_tokens,
                temperature,
                prompts,
                prefix_cache,
            }),
        );
    }

    let d = &file.defaults;
    let default_workload = d.workload.clone();
    if let Some(w) = &default_workload {
        if !workloads.contains_key(w) {
            bad(
                "defaults.workload",
                format!("workload `{w}` is not defined under `workloads`"),
            );
        }
    }

    let mut targets = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (i, t) in file.targets.iter().enumerate() {
        let key = if t.name.is_empty() {
            format!("targets[{i}]")
        } else {
            format!("targets[{i}] ({})", t.name)
        };
        let k = |field: &str| format!("{key}.{field}");
        if t.name.trim().is_empty() {
            bad(&k("name"), "must not be empty".into());
        } else if !seen.insert(t.name.clone()) {
            bad(&k("name"), format!("duplicate target name `{}`", t.name));
        }

        let ctx = Context {
            defaults: d,
            workloads: &workloads,
            base_dir,
            env,
            checks,
        };
        if let Some(target) = resolve_target(t, &key, &ctx, &mut bad) {
            check_levels_within_cap(t, &target, &key, schedule.max_in_flight_total, &mut bad);
            targets.push(Arc::new(target));
        }
    }

    let gateway_pairs = resolve_gateway_pairs(&file, &targets, &workloads, &mut bad);

    let web = resolve_web(&file.web, base_dir, checks, &mut bad);

    let fleet = resolve_fleet(&file, base_dir, &workloads, env, checks, &mut bad);

    // Targets inheriting the same default say the same thing once.
    let mut said = std::collections::BTreeSet::new();
    problems.retain(|p| said.insert(p.clone()));
    if problems.is_empty() {
        Ok(Config {
            path: path.to_path_buf(),
            listen,
            schedule,
            targets,
            gateway_pairs,
            web,
            fleet,
        })
    } else {
        Err(ConfigError { problems })
    }
}

/// Resolves `web:`: the users' hashes checked, the TLS files located
/// (relative to the config) and checked by `checks`.
fn resolve_web(
    file: &WebFile,
    base_dir: &Path,
    checks: &Checks,
    bad: &mut dyn FnMut(&str, String),
) -> Web {
    let basic_auth_users = match check_password_hashes(&file.basic_auth_users) {
        Ok(()) => file
            .basic_auth_users
            .iter()
            .map(|(user, hash)| (user.clone(), Secret::new(hash.clone())))
            .collect(),
        Err(e) => {
            bad("web.basic_auth_users", e);
            BTreeMap::new()
        }
    };
    let rel = |p: &PathBuf| {
        if p.is_relative() {
            base_dir.join(p)
        } else {
            p.clone()
        }
    };
    let tls = match (&file.tls_cert_file, &file.tls_key_file) {
        (None, None) => None,
        (Some(cert), Some(key)) => {
            let files = TlsFiles {
                cert_file: rel(cert),
                key_file: rel(key),
            };
            match (checks.tls)(&files.cert_file, &files.key_file) {
                Ok(()) => Some(files),
                Err(e) => {
                    bad("web.tls_cert_file", e);
                    None
                }
            }
        }
        _ => {
            bad(
                "web",
                "set both `tls_cert_file` and `tls_key_file`, or neither".into(),
            );
            None
        }
    };
    Web {
        enable_reload: file.enable_reload,
        basic_auth_users,
        tls,
    }
}

/// Validates `gateway_pairs` against the targets and workloads already
/// resolved (a target whose own problems kept it out is only named once).
fn resolve_gateway_pairs(
    file: &FileConfig,
    targets: &[Arc<Target>],
    workloads: &BTreeMap<String, Arc<Workload>>,
    bad: &mut dyn FnMut(&str, String),
) -> Vec<GatewayPair> {
    let mut pairs = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (i, p) in file.gateway_pairs.iter().enumerate() {
        let key = if p.name.is_empty() {
            format!("gateway_pairs[{i}]")
        } else {
            format!("gateway_pairs[{i}] ({})", p.name)
        };
        let k = |field: &str| format!("{key}.{field}");
        let mut ok = true;
        if p.name.trim().is_empty() {
            bad(&k("name"), "must not be empty".into());
            ok = false;
        } else if !seen.insert(p.name.clone()) {
            bad(&k("name"), format!("duplicate pair name `{}`", p.name));
            ok = false;
        }
        for (field, name) in [("direct", &p.direct), ("through", &p.through)] {
            if !file.targets.iter().any(|t| &t.name == name) {
                bad(&k(field), format!("target `{name}` is not defined"));
                ok = false;
            }
        }
        if p.direct == p.through {
            bad(
                &k("through"),
                format!(
                    "must differ from `direct` (both are `{}`): the pair compares two paths to the stub engine",
                    p.through
                ),
            );
            ok = false;
        }
        let concurrency = p.concurrency.unwrap_or(defaults::PAIR_CONCURRENCY);
        if concurrency == 0 {
            bad(&k("concurrency"), "must be at least 1".into());
            ok = false;
        }
        let requests = p.requests.unwrap_or(defaults::PAIR_REQUESTS);
        if requests == 0 {
            bad(&k("requests"), "must be at least 1".into());
            ok = false;
        }
        let direct = targets.iter().find(|t| t.name == p.direct);
        let workload = match &p.workload {
            Some(w) => match workloads.get(w) {
                Some(w) => Some(w.clone()),
                None => {
                    bad(
                        &k("workload"),
                        format!("workload `{w}` is not defined under `workloads`"),
                    );
                    None
                }
            },
            // An invalid direct target was reported already; its workloads are unknown.
            None => direct.and_then(|t| t.workloads.first().cloned()),
        };
        if let (true, Some(workload)) = (ok, workload) {
            pairs.push(GatewayPair {
                name: p.name.clone(),
                direct: p.direct.clone(),
                through: p.through.clone(),
                concurrency,
                requests,
                workload,
            });
        }
    }
    pairs
}
