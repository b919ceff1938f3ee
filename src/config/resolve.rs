//! Validation of a decoded file: every section checked and resolved (each
//! by its stage: workloads, targets, gateway pairs, web, fleet), every
//! problem collected, each naming the file and the key.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::checks::{check_name, shown_name, MAX_INTERVAL, MIN_SWEEP_TIMEOUT};
use super::defaults;
use super::env::Env;
use super::error::ConfigError;
use super::file::{FileConfig, ScheduleFile, TargetFile};
use super::fleet::resolve_fleet;
use super::pairs::resolve_gateway_pairs;
use super::prompt_memory;
use super::resolved::{Config, Schedule, Target};
use super::sinks::resolve_sinks;
use super::target::{check_levels_within_cap, resolve_target, Context};
use super::tls::Checks;
use super::web::resolve_web;
use super::workloads::resolve_workloads;

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

    let schedule = resolve_schedule(&file.schedule, &mut bad);

    let workloads = resolve_workloads(&file.workloads, base_dir, &mut bad);

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

    let ctx = Context {
        defaults: d,
        workloads: &workloads,
        base_dir,
        env,
        checks,
    };
    let targets = resolve_targets(&file.targets, &ctx, schedule.max_in_flight_total, &mut bad);

    check_prompt_memory(&targets, file.max_prompt_memory_mib, &mut bad);

    let gateway_pairs = resolve_gateway_pairs(&file, &targets, &workloads, &mut bad);

    let web = resolve_web(&file.web, base_dir, checks, &mut bad);

    let fleet = resolve_fleet(&file, base_dir, &workloads, env, checks, &mut bad);

    let sinks = resolve_sinks(&file.sinks, env, &mut bad);

    let state_dir = resolve_state_dir(file.state_dir.as_deref(), base_dir, env, &mut bad);

    if file.targets.is_empty() && file.file_sd.is_none() && !file.allow_empty {
        // A truncated or emptied file on a reload removed every target with
        // one INFO line as the only sign.
        bad(
            "targets",
            "no targets and no file_sd: nothing would be measured (set `allow_empty: true` \
             to run with none)"
                .into(),
        );
    }

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
            sinks,
            fleet,
            state_dir,
            max_prompt_memory_mib: file.max_prompt_memory_mib,
        })
    } else {
        Err(ConfigError { problems })
    }
}

/// `max_prompt_memory_mib`: at least 1, and at least what the targets'
/// prompts need ([`prompt_memory::needed`]).
fn check_prompt_memory(targets: &[Arc<Target>], cap_mib: u32, bad: &mut dyn FnMut(&str, String)) {
    if cap_mib == 0 {
        bad("max_prompt_memory_mib", "must be at least 1".into());
        return;
    }
    let needed = prompt_memory::needed(targets);
    if needed > u64::from(cap_mib) << 20 {
        bad(
            "max_prompt_memory_mib",
            format!(
                "the targets' prompts need about {:.1} MiB (each workload's prompts once, their \
                 request bodies twice per distinct model and options), over {cap_mib} MiB: use \
                 fewer or smaller prompts, or raise it with the unit's MemoryMax= (docs/operating.md)",
                needed as f64 / f64::from(1 << 20)
            ),
        );
    }
}

/// `schedule`: its bounds checked.
fn resolve_schedule(s: &ScheduleFile, bad: &mut dyn FnMut(&str, String)) -> Schedule {
    if s.interval < Duration::from_millis(100) {
        bad("schedule.interval", "must be at least 100ms".into());
    } else if s.interval > MAX_INTERVAL {
        bad("schedule.interval", "must be at most 365days".into());
    }
    if s.max_in_flight_total == 0 {
        bad("schedule.max_in_flight_total", "must be at least 1".into());
    }
    // Below a second no sweep can finish (a typo for minutes: `5ms`, `1ns`);
    // above the longest interval a deadline would overflow the clock.
    if s.sweep_timeout < MIN_SWEEP_TIMEOUT {
        bad(
            "schedule.sweep_timeout",
            format!(
                "must be at least 1s (a sweep sends a warm-up and a level), got {}",
                humantime::format_duration(s.sweep_timeout)
            ),
        );
    } else if s.sweep_timeout > MAX_INTERVAL {
        bad("schedule.sweep_timeout", "must be at most 365days".into());
    }
    Schedule {
        interval: s.interval,
        jitter: s.jitter.0,
        max_in_flight_total: s.max_in_flight_total.max(1),
        sweep_timeout: s.sweep_timeout,
    }
}

/// `targets`: each resolved against the defaults and workloads, names
/// checked and unique, levels within the daemon's cap.
fn resolve_targets(
    file: &[TargetFile],
    ctx: &Context<'_>,
    max_in_flight_total: u32,
    bad: &mut dyn FnMut(&str, String),
) -> Vec<Arc<Target>> {
    let mut targets = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (i, t) in file.iter().enumerate() {
        let key = if t.name.is_empty() {
            format!("targets[{i}]")
        } else {
            format!("targets[{i}] ({})", shown_name(&t.name))
        };
        let k = |field: &str| format!("{key}.{field}");
        if t.name.trim().is_empty() {
            bad(&k("name"), "must not be empty".into());
        } else if let Err(e) = check_name(&t.name) {
            bad(&k("name"), e);
        } else if !seen.insert(t.name.clone()) {
            bad(&k("name"), format!("duplicate target name `{}`", t.name));
        }
        if let Some(target) = resolve_target(t, &key, ctx, bad) {
            check_levels_within_cap(t, &target, &key, max_in_flight_total, bad);
            targets.push(Arc::new(target));
        }
    }
    targets
}

/// `state_dir`: as written (relative to the file's folder; "" keeps
/// nothing), else systemd's `$STATE_DIRECTORY`, else [`defaults::STATE_DIR`]
/// when that is a directory already. A path that is there but is not a
/// directory is refused; a missing one is made at start.
fn resolve_state_dir(
    written: Option<&Path>,
    base_dir: &Path,
    env: &dyn Env,
    bad: &mut dyn FnMut(&str, String),
) -> Option<std::path::PathBuf> {
    let dir = match written {
        Some(p) if p.as_os_str().is_empty() => return None,
        Some(p) => base_dir.join(p),
        None => match env.var(defaults::STATE_DIR_ENV) {
            // systemd joins several StateDirectory= paths with ':'.
            Some(v) if !v.is_empty() => v.split(':').next().unwrap_or_default().into(),
            _ => {
                let fallback = Path::new(defaults::STATE_DIR);
                return fallback.is_dir().then(|| fallback.to_path_buf());
            }
        },
    };
    if dir.exists() && !dir.is_dir() {
        bad(
            "state_dir",
            format!("`{}` is there but is not a directory", dir.display()),
        );
    }
    Some(dir)
}
