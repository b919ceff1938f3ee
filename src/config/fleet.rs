//! Validation of the fleet sections: `file_sd:` (which files),
//! `target_template:` (tried on a placeholder entry, so that its problems are
//! found at load, not on every entry) and `shard:`. Reading the files and
//! placing targets on shards is the fleet's job, at run time.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::checks::MAX_SHARDS;
use super::defaults;
use super::env::Env;
use super::file::{FileConfig, FileSdFile, ShardFile, TemplateFile};
use super::labels::{is_label_name, is_usable_label};
use super::resolved::{FileSdConfig, FleetConfig, Pattern, Shard, Workload};
use super::target::{check_levels_within_cap, resolve_target, Context};
use super::template::target_file;
use super::tls::Checks;

/// Validates the fleet sections of `file`, reporting through `bad`.
pub fn resolve_fleet(
    file: &FileConfig,
    base_dir: &Path,
    workloads: &BTreeMap<String, Arc<Workload>>,
    env: &dyn Env,
    checks: &Checks,
    bad: &mut dyn FnMut(&str, String),
) -> FleetConfig {
    let ctx = Context {
        defaults: &file.defaults,
        workloads,
        base_dir,
        env,
        checks,
    };
    let file_sd = resolve_file_sd(
        file.file_sd.as_ref(),
        file.target_template.as_ref(),
        file.schedule.max_in_flight_total,
        &ctx,
        bad,
    );
    FleetConfig {
        file_sd: file_sd.map(Arc::new),
        shard: resolve_shard(file.shard.as_ref(), env, bad),
    }
}

/// Validates `file_sd:` and `target_template:`, reporting through `bad`.
/// The template is tried on a placeholder entry, so that a missing workload
/// or an unset key variable is found at load time, not on every entry (and
/// its TLS files are checked once: every entry shares them).
pub fn resolve_file_sd(
    file_sd: Option<&FileSdFile>,
    template: Option<&TemplateFile>,
    max_in_flight_total: u32,
    ctx: &Context<'_>,
    bad: &mut dyn FnMut(&str, String),
) -> Option<FileSdConfig> {
    let base_dir = ctx.base_dir;
    let Some(fs) = file_sd else {
        if template.is_some() {
            bad(
                "target_template",
                "is only used with `file_sd`, which is not set".into(),
            );
        }
        return None;
    };
    let mut ok = true;
    if fs.files.is_empty() {
        bad("file_sd.files", "is empty".into());
        ok = false;
    }
    let mut patterns = Vec::new();
    for (i, f) in fs.files.iter().enumerate() {
        match Pattern::new(f, base_dir) {
            Ok(p) => patterns.push(p),
            Err(e) => {
                bad(&format!("file_sd.files[{i}]"), e);
                ok = false;
            }
        }
    }
    let refresh_interval = fs
        .refresh_interval
        .unwrap_or(defaults::FILE_SD_REFRESH_INTERVAL);
    if refresh_interval < Duration::from_millis(100) {
        bad("file_sd.refresh_interval", "must be at least 100ms".into());
        ok = false;
    }
    let template = template.cloned().unwrap_or_default();
    if let Err((key, e)) = check_template(&template) {
        bad(&format!("target_template.{key}"), e);
        ok = false;
    }
    // A placeholder entry shows the problems every entry would have.
    let placeholder = BTreeMap::new();
    let mut tls = None;
    match target_file(&template, "template.invalid:80", &placeholder) {
        Ok(mut t) => {
            if t.model.is_none() {
                t.model = Some("placeholder".into());
            }
            let mut found = false;
            let mut report = |k: &str, m: String| {
                found = true;
                bad(k, m)
            };
            let resolved = resolve_target(&t, "target_template", ctx, &mut report);
            if let Some(resolved) = &resolved {
                check_levels_within_cap(
                    &t,
                    resolved,
                    "target_template",
                    max_in_flight_total,
                    &mut report,
                );
            }
            ok &= !found;
            tls = resolved.and_then(|t| t.tls);
        }
        Err(_) => {
            // Only entry-specific problems remain (the label checks above
            // cover the template's own); nothing more to say here.
        }
    }
    ok.then(|| FileSdConfig {
        patterns,
        refresh_interval,
        template,
        defaults: ctx.defaults.clone(),
        workloads: ctx.workloads.clone(),
        base_dir: base_dir.to_path_buf(),
        tls,
        max_in_flight_total,
    })
}

fn check_template(t: &TemplateFile) -> Result<(), (&'static str, String)> {
    if let Some(s) = &t.scheme {
        if s != "http" && s != "https" {
            return Err(("scheme", format!("must be `http` or `https`, got `{s}`")));
        }
    }
    if let Some(p) = &t.path_prefix {
        if !p.is_empty() && !p.starts_with('/') {
            return Err(("path_prefix", format!("must start with `/`, got `{p}`")));
        }
        if p.contains(['?', '#', '@']) || p.contains(char::is_whitespace) {
            return Err(("path_prefix", format!("`{p}` is not a plain URL path")));
        }
    }
    for (key, label) in [
        ("model_label", &t.model_label),
        ("name_label", &t.name_label),
        ("max_concurrency_label", &t.max_concurrency_label),
    ] {
        if let Some(l) = label {
            if !is_label_name(l) {
                return Err((key, format!("`{l}` is not a label name")));
            }
        }
    }
    for l in t.labels.iter().flatten() {
        if !is_usable_label(l) {
            return Err(("labels", format!("`{l}` is not a usable label name")));
        }
    }
    if let Some(g) = &t.idle_gate {
        if let Some(p) = &g.at.0 {
            if !p.starts_with('/') {
                return Err((
                    "idle_gate.metrics_path",
                    format!("must start with `/`, got `{p}`"),
                ));
            }
        }
    }
    Ok(())
}

/// The trailing `-N` of a host name (`llmprobe-2`, `llmprobe-2.llmprobe.ns`).
pub fn index_from_hostname(hostname: &str) -> Option<u32> {
    let short = hostname.trim().split('.').next()?;
    let (_, n) = short.rsplit_once('-')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// This machine's host name: `HOSTNAME` (set in every Kubernetes container),
/// else the kernel's.
fn hostname(env: &dyn Env) -> Option<String> {
    env.var("HOSTNAME")
        .filter(|h| !h.trim().is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
}

/// Validates `shard:`, reporting problems through `bad(key, message)`.
pub fn resolve_shard(
    file: Option<&ShardFile>,
    env: &dyn Env,
    bad: &mut dyn FnMut(&str, String),
) -> Shard {
    let Some(f) = file else {
        return Shard::default();
    };
    let count = f.count.unwrap_or(defaults::SHARD_COUNT);
    if count == 0 || count > MAX_SHARDS {
        bad("shard.count", format!("must be between 1 and {MAX_SHARDS}"));
        return Shard::default();
    }
    let index = match (f.index, f.index_from_hostname) {
        (Some(_), true) => {
            bad(
                "shard",
                "set either `index` or `index_from_hostname`, not both".into(),
            );
            return Shard::default();
        }
        (Some(i), false) => i,
        (None, false) if count == 1 => 0,
        (None, false) => {
            bad(
                "shard.index",
                format!(
                    "missing: with `count: {count}`, set `index` or `index_from_hostname: true`"
                ),
            );
            return Shard::default();
        }
        (None, true) => {
            let host = hostname(env).unwrap_or_default();
            match index_from_hostname(&host) {
                Some(i) => i,
                None => {
                    bad(
                        "shard.index_from_hostname",
                        format!(
                            "host name `{host}` does not end in `-N` (a StatefulSet pod ordinal)"
                        ),
                    );
                    return Shard::default();
                }
            }
        }
    };
    if index >= count {
        bad(
            if f.index_from_hostname {
                "shard.index_from_hostname"
            } else {
                "shard.index"
            },
            format!(
                "shard {index} does not exist with `count: {count}` (shards are 0 to {})",
                count - 1
            ),
        );
        return Shard::default();
    }
    Shard { index, count }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostname_ordinals() {
        assert_eq!(index_from_hostname("llmprobe-2"), Some(2));
        assert_eq!(
            index_from_hostname("llmprobe-12.llmprobe.monitoring.svc"),
            Some(12)
        );
        assert_eq!(index_from_hostname("my-llm-probe-0"), Some(0));
        assert_eq!(index_from_hostname("llmprobe"), None);
        assert_eq!(index_from_hostname("llmprobe-"), None);
        assert_eq!(index_from_hostname("llmprobe-x1"), None);
        assert_eq!(index_from_hostname("llmprobe-+1"), None);
    }

    struct FakeEnv(Option<&'static str>);
    impl Env for FakeEnv {
        fn var(&self, name: &str) -> Option<String> {
            (name == "HOSTNAME")
                .then_some(self.0)
                .flatten()
                .map(String::from)
        }
    }

    fn resolve_with(f: ShardFile, host: Option<&'static str>) -> Result<Shard, Vec<String>> {
        let mut problems = Vec::new();
        let s = resolve_shard(Some(&f), &FakeEnv(host), &mut |k, m| {
            problems.push(format!("{k}: {m}"))
        });
        if problems.is_empty() {
            Ok(s)
        } else {
            Err(problems)
        }
    }

    #[test]
    fn resolve_checks_every_combination() {
        let f = |index, count, from_host| ShardFile {
            index,
            count,
            index_from_hostname: from_host,
        };
        assert_eq!(
            resolve_with(f(None, None, false), None),
            Ok(Shard::default())
        );
        assert_eq!(
            resolve_with(f(Some(2), Some(3), false), None),
            Ok(Shard { index: 2, count: 3 })
        );
        assert_eq!(
            resolve_with(f(None, Some(3), true), Some("llmprobe-1")),
            Ok(Shard { index: 1, count: 3 })
        );
        assert_eq!(
            resolve_with(f(Some(3), Some(3), false), None),
            Err(vec![
                "shard.index: shard 3 does not exist with `count: 3` (shards are 0 to 2)".into()
            ])
        );
        assert_eq!(
            resolve_with(f(None, Some(3), true), Some("llmprobe-3")),
            Err(vec![
                "shard.index_from_hostname: shard 3 does not exist with `count: 3` (shards are 0 to 2)"
                    .into()
            ])
        );
        assert_eq!(
            resolve_with(f(None, Some(3), true), Some("probe")),
            Err(vec![
                "shard.index_from_hostname: host name `probe` does not end in `-N` (a StatefulSet pod ordinal)"
                    .into()
            ])
        );
        assert!(resolve_with(f(Some(0), Some(3), true), None).is_err());
        assert!(resolve_with(f(None, Some(3), false), None).is_err());
        assert!(resolve_with(f(Some(0), Some(0), false), None).is_err());
    }
}
