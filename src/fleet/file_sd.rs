//! Targets discovered from files in Prometheus's `file_sd` format: a JSON or
//! YAML list of `{targets: ["host:port", ...], labels: {...}}` groups, written
//! by whatever the operator already has (Consul templates, a CMDB export,
//! Kubernetes tooling). `target_template` says how each `host:port` becomes a
//! target; the result goes through the same validation as a static target.
//!
//! Files are re-read when they change (mtime, size or inode) and on reload.
//! A file that cannot be read or parsed keeps the targets it gave last time:
//! a half-written file or a broken export must not stop the measurement of a
//! fleet. A file that disappears (or no longer matches) takes its targets away,
//! as in Prometheus.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Deserialize;
use serde_json::Value;

use crate::config::{self, DefaultsFile, Env, MaxTokensField, RequestsPerLevel, SloFile};
use crate::config::{Target, TargetFile, Workload};

/// Largest discovery file read; a bigger one is surely not a target list.
const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;

/// Deepest nesting a discovery file needs (list, group, labels) plus slack;
/// deeper input is refused before it can exhaust the stack.
const MAX_DEPTH: usize = 8;

/// Labels copied into `llmprobe_target_info` when the template names none.
pub const DEFAULT_COPIED_LABELS: [&str; 5] = crate::metrics::names::TARGET_INFO_FROM_CONFIG;

// ---------------------------------------------------------------------------
// Configuration as written.
// ---------------------------------------------------------------------------

/// `file_sd:` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSdFile {
    /// Files to read: paths, or patterns with `*` / `?` in the file name
    /// (`/etc/llmprobe/targets/*.json`); relative to the config file.
    pub files: Vec<String>,
    /// How often the files are checked for changes (default 30s).
    #[serde(default, with = "humantime_serde")]
    pub refresh_interval: Option<Duration>,
}

/// `target_template:` as written: how a discovered `host:port` becomes a target.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemplateFile {
    /// `http` (default) or `https`.
    pub scheme: Option<String>,
    /// Path of the OpenAI-compatible API on the server (default `/v1`).
    pub path_prefix: Option<String>,
    /// Label holding the model id (default `model`).
    pub model_label: Option<String>,
    /// Model id of entries without that label.
    pub model: Option<String>,
    /// Label holding the target's name (default: the `host:port` itself).
    pub name_label: Option<String>,
    /// Labels copied into `llmprobe_target_info` (default gpu, driver,
    /// gpu_memory, os, via_gateway); only these, so the files cannot raise
    /// the number of label names.
    pub labels: Option<Vec<String>>,
    /// Label holding a per-target `max_concurrency` (for example the
    /// gateway's max_in_flight for that worker).
    pub max_concurrency_label: Option<String>,
    /// Workloads to measure, by name.
    pub workloads: Option<Vec<String>>,
    /// Environment variable holding the API key of every discovered target.
    pub api_key_env: Option<String>,
    /// File holding that key.
    pub api_key_file: Option<String>,
    /// Idle gate on the server's own metrics, at `metrics_path` of the same host.
    pub idle_gate: Option<TemplateIdleGateFile>,
    /// See [`DefaultsFile::warmup_requests`].
    pub warmup_requests: Option<u32>,
    /// See [`DefaultsFile::levels`].
    pub levels: Option<Vec<u32>>,
    /// See [`DefaultsFile::requests_per_level`].
    pub requests_per_level: Option<RequestsPerLevel>,
    /// See [`DefaultsFile::min_requests_per_level`].
    pub min_requests_per_level: Option<u32>,
    /// See [`DefaultsFile::request_timeout`].
    #[serde(default, with = "humantime_serde")]
    pub request_timeout: Option<Duration>,
    /// See [`DefaultsFile::slo`].
    pub slo: Option<SloFile>,
    /// See [`DefaultsFile::headroom`].
    pub headroom: Option<f64>,
    /// See [`DefaultsFile::max_concurrency`].
    pub max_concurrency: Option<u32>,
    /// See [`DefaultsFile::max_tokens_field`].
    pub max_tokens_field: Option<MaxTokensField>,
}

/// `target_template.idle_gate:`: the server's metrics on the discovered host.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemplateIdleGateFile {
    /// Path of the server's Prometheus metrics (default `/metrics`).
    pub metrics_path: Option<String>,
    /// Metric measuring busyness, e.g. `vllm:num_requests_running`.
    pub metric: String,
    /// Sweep only while the value is at most this (default 0).
    #[serde(default)]
    pub max_value: f64,
    /// Wait between two looks (default 30s).
    #[serde(default, with = "humantime_serde")]
    pub retry_every: Option<Duration>,
}

// ---------------------------------------------------------------------------
// Resolved configuration.
// ---------------------------------------------------------------------------

/// Which files a pattern matches: a literal directory and a file name that
/// may hold `*` and `?` (as in Prometheus, wildcards only in the file name).
#[derive(Debug, Clone, PartialEq)]
pub struct Pattern {
    /// As written, for messages.
    pub shown: String,
    /// Directory searched.
    pub dir: PathBuf,
    /// File name pattern.
    pub name: String,
}

impl Pattern {
    fn has_wildcard(&self) -> bool {
        self.name.contains(['*', '?'])
    }
}

/// Validated `file_sd:` and `target_template:`, with what a discovered target
/// inherits (the config's defaults and workloads).
#[derive(Debug, Clone)]
pub struct FileSdConfig {
    /// Files read.
    pub patterns: Vec<Pattern>,
    /// Between two checks for changes.
    pub refresh_interval: Duration,
    /// How an entry becomes a target.
    pub template: TemplateFile,
    /// `defaults:` of the config.
    pub defaults: DefaultsFile,
    /// Workloads of the config, resolved.
    pub workloads: BTreeMap<String, Arc<Workload>>,
    /// `schedule.max_in_flight_total`: no level may be above it.
    pub max_in_flight_total: u32,
}

/// Validates `file_sd:` and `target_template:`, reporting through `bad`.
/// The template is tried on a placeholder entry, so that a missing workload
/// or an unset key variable is found at load time, not on every entry.
pub fn resolve(
    file: &config::FileConfig,
    base_dir: &Path,
    workloads: &BTreeMap<String, Arc<Workload>>,
    env: &dyn Env,
    bad: &mut dyn FnMut(&str, String),
) -> Option<FileSdConfig> {
    let (file_sd, template) = (file.file_sd.as_ref(), file.target_template.as_ref());
    let defaults = &file.defaults;
    let max_in_flight_total = file.schedule.max_in_flight_total;
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
        match pattern(f, base_dir) {
            Ok(p) => patterns.push(p),
            Err(e) => {
                bad(&format!("file_sd.files[{i}]"), e);
                ok = false;
            }
        }
    }
    let refresh_interval = fs.refresh_interval.unwrap_or(Duration::from_secs(30));
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
            let resolved = config::resolve_target(
                &t,
                "target_template",
                defaults,
                workloads,
                env,
                &mut report,
            );
            if let Some(resolved) = resolved {
                config::check_levels_within_cap(
                    &t,
                    &resolved,
                    "target_template",
                    max_in_flight_total,
                    &mut report,
                );
            }
            ok &= !found;
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
        defaults: defaults.clone(),
        workloads: workloads.clone(),
        max_in_flight_total,
    })
}

fn pattern(written: &str, base_dir: &Path) -> Result<Pattern, String> {
    let path = Path::new(written);
    let full = if path.is_relative() {
        base_dir.join(path)
    } else {
        path.to_path_buf()
    };
    let name = full
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("`{written}` does not name a file"))?
        .to_string();
    let dir = full.parent().unwrap_or(Path::new(".")).to_path_buf();
    if dir.to_string_lossy().contains(['*', '?', '[']) {
        return Err(format!(
            "`{written}`: wildcards are only allowed in the file name, not in directories"
        ));
    }
    if name.contains('[') {
        return Err(format!(
            "`{written}`: only `*` and `?` are supported as wildcards"
        ));
    }
    if Format::of(Path::new(&name)).is_none() {
        return Err(format!(
            "`{written}` must end in .json, .yml or .yaml (the format is taken from the extension)"
        ));
    }
    Ok(Pattern {
        shown: written.to_string(),
        dir,
        name,
    })
}

/// A Prometheus label name (`__`-prefixed meta labels allowed: file_sd
/// writers use them for values that are not meant to be labels).
fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
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
        if !is_label_name(l) || l.starts_with("__") || l == "target" || l == "model" {
            return Err(("labels", format!("`{l}` is not a usable label name")));
        }
    }
    if let Some(g) = &t.idle_gate {
        if let Some(p) = &g.metrics_path {
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

// ---------------------------------------------------------------------------
// Parsing.
// ---------------------------------------------------------------------------

/// Format of a discovery file, from its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `.json`
    Json,
    /// `.yml`, `.yaml`
    Yaml,
}

impl Format {
    /// The format a file's extension says, if any.
    pub fn of(path: &Path) -> Option<Format> {
        match path.extension()?.to_str()? {
            "json" => Some(Format::Json),
            "yml" | "yaml" => Some(Format::Yaml),
            _ => None,
        }
    }
}

/// One `{targets, labels}` group of a discovery file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Group {
    /// `host:port` addresses.
    pub targets: Vec<String>,
    /// Labels common to them.
    pub labels: BTreeMap<String, String>,
}

/// Parses a discovery file's text.
pub fn parse(text: &str, format: Format) -> Result<Vec<Group>, String> {
    let value = match format {
        // serde_json limits nesting itself (128 levels).
        Format::Json => serde_json::from_str::<Value>(text).map_err(|e| e.to_string())?,
        Format::Yaml => yaml_value(text)?,
    };
    groups(value)
}

/// YAML to a JSON value, built from parser events so that nesting is bounded
/// and aliases (which can expand exponentially) are refused. Every scalar is
/// a string: a `file_sd` file holds nothing else, and Prometheus reads an
/// unquoted `80` as the label value "80" too.
fn yaml_value(text: &str) -> Result<Value, String> {
    use yaml_rust2::parser::{Event, Parser};
    use yaml_rust2::scanner::TScalarStyle;

    enum Frame {
        Seq(Vec<Value>),
        Map(serde_json::Map<String, Value>, Option<String>),
    }
    let mut parser = Parser::new_from_str(text);
    let mut stack: Vec<Frame> = Vec::new();
    let mut docs: Vec<Value> = Vec::new();
    loop {
        let (event, mark) = parser.next_token().map_err(|e| e.to_string())?;
        let at = |msg: &str| format!("line {}: {msg}", mark.line());
        let value = match event {
            Event::StreamEnd => break,
            Event::Nothing | Event::StreamStart | Event::DocumentStart | Event::DocumentEnd => {
                continue
            }
            Event::Alias(_) => return Err(at("YAML aliases are not supported")),
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(at("nested too deeply for a target list"));
                }
                stack.push(if matches!(event, Event::SequenceStart(..)) {
                    Frame::Seq(Vec::new())
                } else {
                    Frame::Map(serde_json::Map::new(), None)
                });
                continue;
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq(items)) => Value::Array(items),
                _ => return Err(at("unbalanced sequence")),
            },
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Map(map, None)) => Value::Object(map),
                _ => return Err(at("unbalanced mapping")),
            },
            Event::Scalar(s, style, _, _) => {
                let null = style == TScalarStyle::Plain
                    && matches!(s.as_str(), "" | "~" | "null" | "Null" | "NULL");
                if null {
                    Value::Null
                } else {
                    Value::String(s)
                }
            }
        };
        match stack.last_mut() {
            None => docs.push(value),
            Some(Frame::Seq(items)) => items.push(value),
            Some(Frame::Map(map, key)) => match key.take() {
                None => match value {
                    Value::String(k) => *key = Some(k),
                    _ => return Err(at("mapping keys must be plain strings")),
                },
                Some(k) => {
                    if map.contains_key(&k) {
                        return Err(at(&format!("duplicate key `{k}`")));
                    }
                    map.insert(k, value);
                }
            },
        }
    }
    match docs.len() {
        // An empty YAML file is an empty list, as in Prometheus.
        0 => Ok(Value::Array(Vec::new())),
        1 => Ok(docs.pop().unwrap_or(Value::Null)),
        n => Err(format!("holds {n} YAML documents; write one list")),
    }
}

/// The groups of a parsed file, strictly: unknown keys and non-string values
/// make the whole file invalid (as Prometheus does), since a typo would
/// otherwise silently drop labels.
fn groups(value: Value) -> Result<Vec<Group>, String> {
    let items = match value {
        Value::Array(items) => items,
        Value::Null => Vec::new(),
        _ => return Err("must be a list of `{targets: [...], labels: {...}}` groups".into()),
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let Value::Object(map) = item else {
            return Err(format!(
                "[{i}]: must be a mapping with `targets` and `labels`"
            ));
        };
        let mut group = Group::default();
        for (key, v) in map {
            match (key.as_str(), v) {
                ("targets", Value::Null) | ("labels", Value::Null) => {}
                ("targets", Value::Array(ts)) => {
                    for (j, t) in ts.into_iter().enumerate() {
                        match t {
                            Value::String(s) => group.targets.push(s),
                            _ => return Err(format!("[{i}].targets[{j}]: must be a string")),
                        }
                    }
                }
                ("targets", _) => return Err(format!("[{i}].targets: must be a list")),
                ("labels", Value::Object(ls)) => {
                    for (name, v) in ls {
                        if !is_label_name(&name) {
                            return Err(format!("[{i}].labels: `{name}` is not a label name"));
                        }
                        match v {
                            Value::String(s) => {
                                group.labels.insert(name, s);
                            }
                            _ => return Err(format!("[{i}].labels.{name}: must be a string")),
                        }
                    }
                }
                ("labels", _) => return Err(format!("[{i}].labels: must be a mapping")),
                (other, _) => {
                    return Err(format!(
                        "[{i}]: unknown key `{other}` (a group has `targets` and `labels`)"
                    ))
                }
            }
        }
        out.push(group);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// Entries to targets.
// ---------------------------------------------------------------------------

/// Checks a `host:port` from a discovery file: no scheme, path, credentials
/// or spaces (those belong in the template, or nowhere).
fn check_address(address: &str) -> Result<(), String> {
    if address.is_empty() {
        return Err("empty address".into());
    }
    if address.contains("://") {
        return Err("must be `host:port`, without a scheme (set `target_template.scheme`)".into());
    }
    if address.contains(['/', '?', '#']) {
        return Err(
            "must be `host:port`, without a path (set `target_template.path_prefix`)".into(),
        );
    }
    if address.contains('@') {
        return Err("must not hold credentials".into());
    }
    if address.contains(char::is_whitespace) || address.contains(char::is_control) {
        return Err("must not contain spaces".into());
    }
    Ok(())
}

/// The target an entry describes, as if written under `targets:`.
pub fn target_file(
    t: &TemplateFile,
    address: &str,
    labels: &BTreeMap<String, String>,
) -> Result<TargetFile, String> {
    check_address(address)?;
    let scheme = t.scheme.as_deref().unwrap_or("http");
    let prefix = t.path_prefix.as_deref().unwrap_or("/v1");
    let name = t
        .name_label
        .as_ref()
        .and_then(|l| labels.get(l))
        .filter(|n| !n.trim().is_empty())
        .cloned()
        .unwrap_or_else(|| address.to_string());
    let model_label = t.model_label.as_deref().unwrap_or("model");
    let model = labels
        .get(model_label)
        .filter(|m| !m.trim().is_empty())
        .or(t.model.as_ref())
        .cloned();
    let copied: Vec<&str> = match &t.labels {
        Some(ls) => ls.iter().map(String::as_str).collect(),
        None => DEFAULT_COPIED_LABELS.to_vec(),
    };
    let target_labels = copied
        .into_iter()
        .filter_map(|l| labels.get(l).map(|v| (l.to_string(), v.clone())))
        .collect();
    let max_concurrency =
        match t
            .max_concurrency_label
            .as_ref()
            .and_then(|l| labels.get(l).map(|v| (l, v)))
        {
            Some((l, v)) => Some(v.trim().parse::<u32>().map_err(|_| {
                format!("label `{l}` (max_concurrency) is `{v}`, not a whole number")
            })?),
            None => t.max_concurrency,
        };
    let idle_gate = t.idle_gate.as_ref().map(|g| config::IdleGateFile {
        metrics_url: format!(
            "{scheme}://{address}{}",
            g.metrics_path.as_deref().unwrap_or("/metrics")
        ),
        metric: g.metric.clone(),
        max_value: g.max_value,
        retry_every: g.retry_every,
    });
    Ok(TargetFile {
        name,
        base_url: Some(format!("{scheme}://{address}{prefix}")),
        simulator: None,
        model,
        api_key_env: t.api_key_env.clone(),
        api_key_file: t.api_key_file.clone(),
        labels: target_labels,
        workloads: t.workloads.clone(),
        idle_gate,
        warmup_requests: t.warmup_requests,
        levels: t.levels.clone(),
        requests_per_level: t.requests_per_level,
        min_requests_per_level: t.min_requests_per_level,
        request_timeout: t.request_timeout,
        slo: t.slo.clone(),
        headroom: t.headroom,
        max_concurrency,
        max_tokens_field: t.max_tokens_field,
    })
}

/// The targets of a file's groups: valid ones, and one line per skipped
/// entry saying why.
pub fn targets(
    groups: &[Group],
    config: &FileSdConfig,
    env: &dyn Env,
) -> (Vec<Arc<Target>>, Vec<String>) {
    let mut good: Vec<Arc<Target>> = Vec::new();
    let mut invalid = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        for (j, address) in group.targets.iter().enumerate() {
            let key = format!("[{g}].targets[{j}] ({address})");
            let tf = match target_file(&config.template, address, &group.labels) {
                Ok(tf) => tf,
                Err(e) => {
                    invalid.push(format!("{key}: {e}"));
                    continue;
                }
            };
            if tf.model.is_none() {
                let label = config.template.model_label.as_deref().unwrap_or("model");
                invalid.push(format!(
                    "{key}: no `{label}` label, and `target_template.model` is not set"
                ));
                continue;
            }
            if good.iter().any(|t| t.name == tf.name) {
                invalid.push(format!(
                    "{key}: duplicate target name `{}` (with `name_label`, give each group one target)",
                    tf.name
                ));
                continue;
            }
            let mut problems = Vec::new();
            let mut report = |k: &str, m: String| problems.push(format!("{k}: {m}"));
            let target = config::resolve_target(
                &tf,
                &key,
                &config.defaults,
                &config.workloads,
                env,
                &mut report,
            );
            if let Some(t) = &target {
                config::check_levels_within_cap(
                    &tf,
                    t,
                    &key,
                    config.max_in_flight_total,
                    &mut report,
                );
            }
            match target {
                Some(t) if problems.is_empty() => good.push(Arc::new(t)),
                _ => invalid.push(problems.join("; ")),
            }
        }
    }
    (good, invalid)
}

// ---------------------------------------------------------------------------
// Watching.
// ---------------------------------------------------------------------------

/// What identifies a version of a file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(meta);
        #[cfg(not(unix))]
        let inode = 0;
        Stamp {
            modified: meta.modified().ok(),
            len: meta.len(),
            inode,
        }
    }
}

/// What is known of one discovery file.
#[derive(Debug, Default)]
struct FileState {
    stamp: Option<Stamp>,
    /// Targets of the last successful read.
    targets: Vec<Arc<Target>>,
    /// Entries of the last successful read that were skipped, and why.
    invalid: Vec<String>,
    /// Why the latest read failed, while it keeps failing.
    failing: Option<String>,
}

/// One discovery file, as the last refresh left it.
#[derive(Debug, Clone)]
pub struct FileSummary<'a> {
    /// Path read.
    pub path: &'a Path,
    /// Targets it gives (from its last successful read).
    pub targets: &'a [Arc<Target>],
    /// Entries skipped at its last successful read, with the reason.
    pub invalid: &'a [String],
    /// Why it cannot be read now, if it cannot.
    pub error: Option<&'a str>,
}

/// What a refresh did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Refresh {
    /// Whether the set of discovered targets (or any of their settings) changed.
    pub changed: bool,
    /// Files whose read failed this time.
    pub failed: Vec<PathBuf>,
}

/// Reads the discovery files and keeps what each one gave.
#[derive(Debug)]
pub struct Watcher {
    config: Arc<FileSdConfig>,
    files: BTreeMap<PathBuf, FileState>,
    /// Patterns whose directory could not be listed, so it is logged once.
    unlistable: BTreeMap<String, String>,
}

impl Watcher {
    /// A watcher that has read nothing yet.
    pub fn new(config: Arc<FileSdConfig>) -> Watcher {
        Watcher {
            config,
            files: BTreeMap::new(),
            unlistable: BTreeMap::new(),
        }
    }

    /// Takes new settings (a reload), keeping what each file gave so far:
    /// a file broken at the time of the reload keeps its targets.
    pub fn set_config(&mut self, config: Arc<FileSdConfig>) {
        self.config = config;
    }

    /// The settings in use.
    pub fn config(&self) -> &Arc<FileSdConfig> {
        &self.config
    }

    /// Every file the patterns match now.
    fn matching_files(&mut self) -> Vec<PathBuf> {
        let mut found = Vec::new();
        for p in &self.config.patterns {
            if !p.has_wildcard() {
                let path = p.dir.join(&p.name);
                // A named file that is absent gives no targets, like a
                // pattern that matches nothing; it is not an error.
                if path.is_file() {
                    found.push(path);
                }
                continue;
            }
            match std::fs::read_dir(&p.dir) {
                Ok(entries) => {
                    self.unlistable.remove(&p.shown);
                    for e in entries.flatten() {
                        let name = e.file_name();
                        let Some(name) = name.to_str() else { continue };
                        let path = e.path();
                        if wildcard_match(&p.name, name) && path.is_file() {
                            found.push(path);
                        }
                    }
                }
                Err(e) => {
                    let e = e.to_string();
                    if self.unlistable.insert(p.shown.clone(), e.clone()).is_none() {
                        tracing::warn!(pattern = %p.shown, error = %e, "file_sd: cannot list the directory of a pattern");
                    }
                }
            }
        }
        found.sort();
        found.dedup();
        found
    }

    /// Reads the files that changed since the last refresh (every file when
    /// `force`, and failing ones each time). Logs a file that starts failing
    /// once, not at every refresh.
    pub fn refresh(&mut self, force: bool, env: &dyn Env) -> Refresh {
        let mut out = Refresh::default();
        let paths = self.matching_files();
        let gone: Vec<PathBuf> = self
            .files
            .keys()
            .filter(|p| !paths.contains(p))
            .cloned()
            .collect();
        for p in gone {
            if let Some(st) = self.files.remove(&p) {
                tracing::info!(file = %p.display(), targets = st.targets.len(), "file_sd: file gone or no longer matched; its targets are removed");
                out.changed |= !st.targets.is_empty();
            }
        }
        for path in paths {
            let config = self.config.clone();
            let st = self.files.entry(path.clone()).or_default();
            let stamp = std::fs::metadata(&path).map(|m| Stamp::of(&m));
            let unchanged = matches!(&stamp, Ok(s) if st.stamp == Some(*s));
            if unchanged && !force && st.failing.is_none() {
                continue;
            }
            let read = stamp
                .map_err(|e| format!("cannot read: {e}"))
                .and_then(|s| read_groups(&path).map(|g| (s, g)));
            match read {
                Ok((stamp, groups)) => {
                    let (targets, invalid) = targets(&groups, &config, env);
                    if !same_targets(&st.targets, &targets) {
                        out.changed = true;
                    }
                    if st.failing.take().is_some() {
                        tracing::info!(file = %path.display(), targets = targets.len(), "file_sd: file readable again");
                    }
                    if !invalid.is_empty() {
                        tracing::warn!(
                            file = %path.display(),
                            skipped = invalid.len(),
                            valid = targets.len(),
                            first = %invalid.iter().take(3).cloned().collect::<Vec<_>>().join(" | "),
                            "file_sd: entries skipped (`llmprobe check-config` lists them all)"
                        );
                    }
                    st.stamp = Some(stamp);
                    st.targets = targets;
                    st.invalid = invalid;
                }
                Err(e) => {
                    out.failed.push(path.clone());
                    if st.failing.is_none() {
                        tracing::error!(
                            file = %path.display(),
                            error = %e,
                            kept_targets = st.targets.len(),
                            "file_sd: cannot use the file; keeping the targets it gave last time"
                        );
                    }
                    st.failing = Some(e);
                }
            }
        }
        out
    }

    /// Every discovered target with the file it came from, in path order.
    pub fn targets(&self) -> impl Iterator<Item = (&Path, &Arc<Target>)> {
        self.files
            .iter()
            .flat_map(|(p, st)| st.targets.iter().map(move |t| (p.as_path(), t)))
    }

    /// The state of every file read.
    pub fn files(&self) -> Vec<FileSummary<'_>> {
        self.files
            .iter()
            .map(|(p, st)| FileSummary {
                path: p,
                targets: &st.targets,
                invalid: &st.invalid,
                error: st.failing.as_deref(),
            })
            .collect()
    }
}

fn same_targets(a: &[Arc<Target>], b: &[Arc<Target>]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

fn read_groups(path: &Path) -> Result<Vec<Group>, String> {
    let format = Format::of(path).ok_or("unknown extension")?;
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read: {e}"))?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!(
            "is {} bytes, more than the {MAX_FILE_BYTES} accepted",
            meta.len()
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|_| "is not UTF-8 text".to_string())?;
    parse(&text, format)
}

/// Whether `name` matches `pattern`, where `*` is any run of characters
/// and `?` any one character.
pub fn wildcard_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Iterative matcher with one backtrack point (the last `*`): linear
    // enough for file names, and no recursion.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        assert!(wildcard_match("*.json", "a.json"));
        assert!(wildcard_match("tg_*.json", "tg_.json"));
        assert!(wildcard_match("tg_?.yml", "tg_1.yml"));
        assert!(!wildcard_match("tg_?.yml", "tg_12.yml"));
        assert!(!wildcard_match("*.json", "a.json.tmp"));
        assert!(wildcard_match("a*b*c.json", "aXbYbZc.json"));
        assert!(wildcard_match("exact.yaml", "exact.yaml"));
        assert!(!wildcard_match("exact.yaml", "exact.yam"));
    }

    #[test]
    fn patterns_are_checked() {
        let base = Path::new("/etc/llmprobe");
        let p = pattern("targets/*.json", base).unwrap();
        assert_eq!(p.dir, Path::new("/etc/llmprobe/targets"));
        assert_eq!(p.name, "*.json");
        assert!(pattern("/x/*/a.json", base)
            .unwrap_err()
            .contains("only allowed in the file name"));
        assert!(pattern("/x/a.txt", base)
            .unwrap_err()
            .contains(".json, .yml or .yaml"));
        assert!(pattern("/x/[ab].json", base).is_err());
    }

    const JSON: &str = r#"[
      {"targets": ["10.0.0.1:8000", "10.0.0.2:8000"], "labels": {"model": "qwen", "gpu": "L40S", "rack": "r1"}},
      {"targets": ["10.0.0.3:8000"]},
      {"labels": {"model": "x"}}
    ]"#;

    const YAML: &str = r#"
# written by consul-template
- targets: ["10.0.0.1:8000", '10.0.0.2:8000']
  labels:
    model: qwen
    gpu: L40S
    rack: r1
- targets:
    - 10.0.0.3:8000
- labels: {model: x}
"#;

    #[test]
    fn json_and_yaml_give_the_same_groups() {
        let j = parse(JSON, Format::Json).unwrap();
        let y = parse(YAML, Format::Yaml).unwrap();
        assert_eq!(j, y);
        assert_eq!(j.len(), 3);
        assert_eq!(j[0].targets, ["10.0.0.1:8000", "10.0.0.2:8000"]);
        assert_eq!(j[0].labels["gpu"], "L40S");
        assert!(j[1].labels.is_empty());
        assert!(j[2].targets.is_empty());
    }

    #[test]
    fn yaml_scalars_are_strings_and_empty_is_no_targets() {
        let g = parse(
            "- targets: [h:1]\n  labels: {gpu_memory: 80, ok: true, f: 1.5}\n",
            Format::Yaml,
        )
        .unwrap();
        assert_eq!(g[0].labels["gpu_memory"], "80");
        assert_eq!(g[0].labels["ok"], "true");
        assert_eq!(g[0].labels["f"], "1.5");
        assert_eq!(parse("", Format::Yaml).unwrap(), vec![]);
        assert_eq!(parse("# nothing yet\n", Format::Yaml).unwrap(), vec![]);
        assert_eq!(parse("[]", Format::Json).unwrap(), vec![]);
    }

    #[test]
    fn bad_files_are_errors_not_panics() {
        for (text, format, want) in [
            ("{\"targets\": []}", Format::Json, "must be a list"),
            (
                "[{\"target\": [\"a:1\"]}]",
                Format::Json,
                "unknown key `target`",
            ),
            (
                "[{\"targets\": \"a:1\"}]",
                Format::Json,
                "[0].targets: must be a list",
            ),
            (
                "[{\"targets\": [1]}]",
                Format::Json,
                "[0].targets[0]: must be a string",
            ),
            (
                "[{\"labels\": {\"a\": 1}}]",
                Format::Json,
                "[0].labels.a: must be a string",
            ),
            (
                "[{\"labels\": {\"a-b\": \"1\"}}]",
                Format::Json,
                "not a label name",
            ),
            ("[{\"targets\": [\"a:1\"]", Format::Json, "EOF"),
            ("", Format::Json, "EOF"),
            ("- targets: [a:1\n", Format::Yaml, "line"),
            (
                "- &x {targets: [a:1]}\n- *x\n",
                Format::Yaml,
                "aliases are not supported",
            ),
            (
                "- targets: [a:1]\n  targets: [b:1]\n",
                Format::Yaml,
                "duplicate key",
            ),
            ("---\n[]\n---\n[]\n", Format::Yaml, "2 YAML documents"),
            ("? [a]\n: b\n", Format::Yaml, "keys must be plain strings"),
            ("targets: [a:1]\n", Format::Yaml, "must be a list"),
        ] {
            let e = parse(text, format).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        let deep = "[".repeat(100_000);
        assert!(parse(&deep, Format::Yaml).is_err());
        assert!(parse(&deep, Format::Json).is_err());
        let deep_block: String = (0..10_000)
            .map(|i| format!("{}- \n", " ".repeat(i * 2)))
            .collect();
        assert!(parse(&deep_block, Format::Yaml).is_err());
    }

    /// Log lines written while `f` runs.
    fn logged(f: impl FnOnce()) -> String {
        use std::sync::{Arc, Mutex};
        #[derive(Clone)]
        struct Buf(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf(Arc::new(Mutex::new(Vec::new())));
        let writer = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        let out = buf.0.lock().unwrap().clone();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_failing_file_is_logged_once_per_failure_and_counted_every_read() {
        let dir = std::env::temp_dir().join(format!(
            "llmprobe-file-sd-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("t.json");
        let workload = Arc::new(Workload {
            name: "chat".into(),
            max_completion_tokens: 4,
            temperature: 0.0,
            prompts: vec![crate::config::prompts::Prompt::user("hi")],
            prefix_cache: Default::default(),
        });
        let config = Arc::new(FileSdConfig {
            patterns: vec![pattern("*.json", &dir).unwrap()],
            refresh_interval: Duration::from_secs(1),
            template: TemplateFile {
                model: Some("m".into()),
                ..Default::default()
            },
            defaults: DefaultsFile {
                workload: Some("chat".into()),
                ..Default::default()
            },
            workloads: [("chat".to_string(), workload)].into_iter().collect(),
            max_in_flight_total: 64,
        });
        let mut w = Watcher::new(config);
        let env = crate::config::ProcessEnv;
        std::fs::write(&file, r#"[{"targets": ["h:1"]}]"#).unwrap();
        assert!(w.refresh(false, &env).changed);

        std::fs::write(&file, "[{").unwrap();
        let mut failed = 0;
        let log = logged(|| {
            for _ in 0..5 {
                let r = w.refresh(false, &env);
                assert!(!r.changed);
                failed += r.failed.len();
            }
        });
        assert_eq!(failed, 5, "every read of a failing file counts");
        assert_eq!(log.matches("cannot use the file").count(), 1, "{log}");
        assert_eq!(
            w.targets().count(),
            1,
            "the targets of the last good read stay"
        );

        let log = logged(|| {
            std::fs::write(&file, r#"[{"targets": ["h:1", "h:2"]}]"#).unwrap();
            assert!(w.refresh(false, &env).changed);
            std::fs::write(&file, "nonsense").unwrap();
            w.refresh(false, &env);
            w.refresh(false, &env);
        });
        assert_eq!(log.matches("file readable again").count(), 1, "{log}");
        assert_eq!(log.matches("cannot use the file").count(), 1, "{log}");
        assert_eq!(w.targets().count(), 2);
        std::fs::remove_dir_all(&dir).ok();
    }

    fn template(yaml: &str) -> TemplateFile {
        serde_json::from_value(yaml_value(yaml).unwrap()).unwrap()
    }

    #[test]
    fn template_builds_the_target_file() {
        let t = template(
            "scheme: https\npath_prefix: /openai/v1\nname_label: name\nlabels: [gpu]\nmax_concurrency_label: max_in_flight\n",
        );
        let labels: BTreeMap<String, String> = [
            ("name", "worker-7"),
            ("model", "qwen"),
            ("gpu", "H100"),
            ("rack", "r1"),
            ("max_in_flight", "12"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let tf = target_file(&t, "10.0.0.7:8443", &labels).unwrap();
        assert_eq!(tf.name, "worker-7");
        assert_eq!(
            tf.base_url.as_deref(),
            Some("https://10.0.0.7:8443/openai/v1")
        );
        assert_eq!(tf.model.as_deref(), Some("qwen"));
        assert_eq!(tf.labels.len(), 1, "only the listed labels are copied");
        assert_eq!(tf.max_concurrency, Some(12));

        let plain = TemplateFile {
            model: Some("fallback".into()),
            ..Default::default()
        };
        let tf = target_file(&plain, "h:1", &BTreeMap::new()).unwrap();
        assert_eq!(tf.name, "h:1", "the address names the target by default");
        assert_eq!(tf.base_url.as_deref(), Some("http://h:1/v1"));
        assert_eq!(tf.model.as_deref(), Some("fallback"));

        for bad in ["", "http://h:1", "h:1/v1", "u:p@h:1", "h :1"] {
            assert!(target_file(&plain, bad, &BTreeMap::new()).is_err(), "{bad}");
        }
        let mut l = labels.clone();
        l.insert("max_in_flight".into(), "lots".into());
        assert!(target_file(&t, "h:1", &l)
            .unwrap_err()
            .contains("not a whole number"));
    }
}
