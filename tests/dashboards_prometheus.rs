//! The dashboards and alert rules against real data and a real Prometheus.
//!
//! The llmprobe binary measures two built-in simulated engines; a Prometheus
//! server from Debian's `prometheus` package scrapes it every second and
//! evaluates `prometheus/alerts.yml`. Then every PromQL expression of
//! `grafana/dashboards/*.json` (panel queries, template variable queries) and
//! of `prometheus/alerts.yml` (rule expressions, and the queries inside alert
//! annotations) runs through Prometheus's HTTP API, Grafana variables
//! substituted as Grafana would: each must parse, and each must return data
//! unless one of the short, commented allow-lists below says why it cannot.
//! Every vector selector inside an expression is also run on its own, so half
//! of an `or`, or a selector that a comparison filters out, cannot hide a wrong
//! metric or label name.
//!
//! Prometheus is `/usr/bin/prometheus` (or `$PROMETHEUS`); the test fails,
//! it does not skip, when it is missing.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

// ---------------------------------------------------------------------------
// What is expected to be empty here, and why

/// Alert rules that must be silent (their expression returns nothing) in this
/// healthy setup. Their selectors must still find data, so a silent alert is
/// silent because its condition is false, not because it reads nothing.
const SILENT_ALERTS: &[(&str, &str)] = &[
    (
        "LlmprobeKneeDropped",
        "the simulators give the same knee every sweep (8 and 4), never below 70% of its usual value",
    ),
    ("LlmprobeKneeZero", "the knees are 8 and 4, not 0"),
    (
        "LlmprobeModelCapacityDropped",
        "the knees, and so the model's sum, stay the same every sweep",
    ),
    (
        "LlmprobeKneeOnlyLowerBound",
        "sim-a's knee is the highest level (8) but not below its gateway's 7; sim-b's level 8 breaks the SLO",
    ),
    (
        "LlmprobeTtftP95High",
        "the tiny simulator answers a single request in milliseconds, far below half the 10 s SLO",
    ),
    (
        "LlmprobeLatencyP95AboveSlo",
        "a single request takes milliseconds, far below the 10 s SLO",
    ),
    (
        "LlmprobeShedAtConcurrencyOne",
        "nothing else loads the simulators; they shed only above max_in_flight (8 and 4)",
    ),
    (
        "LlmprobeErrorsAtConcurrencyOne",
        "the simulators inject no faults",
    ),
    (
        "LlmprobeSweepFailing",
        "every sweep of a simulator completes",
    ),
    (
        "LlmprobeSweepStale",
        "sweeps complete every few seconds, within three 1 s intervals plus sweep durations",
    ),
    (
        "LlmprobeFileSdReadErrors",
        "the one file_sd file (FILE_SD) is valid and never changes",
    ),
    (
        "LlmprobeConfigReloadFailed",
        "the configuration loaded at start and is never reloaded",
    ),
    ("LlmprobeDown", "Prometheus scrapes llmprobe successfully"),
    ("LlmprobeAbsent", "Prometheus has job llmprobe"),
    (
        "LlmprobeTargetUnmeasured",
        "the one instance owns and sweeps every target it knows, every few seconds",
    ),
    (
        "LlmprobeTargetMeasuredTwice",
        "a single instance: each target is measured by exactly one",
    ),
];

/// Alert rules whose expression must return data here: the test feeds the
/// operator-provided `llmprobe_gateway_configured_max_in_flight` (see
/// `GATEWAY_RULES`) with 12 for sim-b, whose recommendation is 3.
const ACTIVE_ALERTS: &[&str] = &["LlmprobeRecommendedMaxInFlightBelowGateway"];

/// How much data a dashboard query must return, decided by the metrics it
/// reads (see `dashboard_policy`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Policy {
    /// Data under every variable combination.
    Every,
    /// Data under at least one combination.
    Some,
    /// Must parse; may be empty.
    MayBeEmpty,
}

/// Metrics another change is adding to llmprobe, which rules and panels may
/// read before it lands: while no series of one exists, selectors of it may
/// find nothing. The allowance ends by itself once llmprobe exports it.
const COMING_METRICS: &[&str] = &["llmprobe_capacity_knee_lower_bound"];

/// An empty file_sd file, so that the file_sd series exist (see
/// `LlmprobeFileSdReadErrors`); appended to the config of `llmprobe_config`.
const FILE_SD: &str = "\nfile_sd:\n  files: [\"FILE_SD_PATH\"]\n";

/// The policy of a dashboard query (or of one selector in it).
fn dashboard_policy(expr: &str, overhead_exported: bool) -> Policy {
    // Gateway overhead: the config names a pair, but llmprobe does not
    // compute the overhead yet, so no `llmprobe_gateway_overhead_seconds`
    // series exists. The allowance ends by itself once any such series is
    // exported: then these panels must show data for the configured pair.
    if expr.contains("llmprobe_gateway_overhead_seconds") && !overhead_exported {
        return Policy::MayBeEmpty;
    }
    // Saturation exists only where throughput stopped growing between two
    // levels; sim-b's short-chat may keep growing up to its last level (its
    // level 8 sheds half the requests but the rest still add throughput).
    if expr.contains("llmprobe_capacity_saturation_concurrency") {
        return Policy::Some;
    }
    Policy::Every
}

// ---------------------------------------------------------------------------
// The setup

/// The operator-provided input of `LlmprobeRecommendedMaxInFlightBelowGateway`,
/// fed the way prometheus/README.md documents (a recording rule per target):
/// sim-a's gateway admits its recommendation exactly (7, silent), sim-b's
/// admits 12 against a recommendation of 3 (the alert goes pending).
const GATEWAY_RULES: &str = r#"
groups:
  - name: llmprobe-gateway-config
    rules:
      - record: llmprobe_gateway_configured_max_in_flight
        expr: vector(7)
        labels: {target: sim-a}
      - record: llmprobe_gateway_configured_max_in_flight
        expr: vector(12)
        labels: {target: sim-b}
"#;

/// Two targets on the built-in simulator (the tiny profile sheds above 8 in
/// flight by default, sim-b above 4, so the knees are 8 and 4), two workloads
/// so that the workload variable has several values, a gateway pair.
fn llmprobe_config(port: u16) -> String {
    // About 600 words: prefill makes its TTFT visibly longer than short-chat's
    // while staying well inside the tiny profile's 4096-token context.
    let long = "Capacity planning for a private AI server needs measurements. ".repeat(70);
    format!(
        r#"
listen: "127.0.0.1:{port}"
schedule: {{ interval: 1s, jitter: 0%, max_in_flight_total: 64, sweep_timeout: 60s }}
defaults:
  workload: short-chat
  warmup_requests: 1
  levels: [1, 2, 4, 8]
  requests_per_level: 1x
  min_requests_per_level: 4
  request_timeout: 10s
  slo: {{ p95_latency: 10s, max_shed_ratio: 0.05, max_error_ratio: 0.05 }}
  headroom: 0.9
workloads:
  short-chat:
    max_completion_tokens: 8
    temperature: 0
    prompts: ["Write a haiku about capacity planning."]
  long-documents:
    max_completion_tokens: 8
    temperature: 0
    prompts: ["{long}"]
targets:
  - name: sim-a
    simulator: {{ profile: tiny }}
    workloads: [short-chat, long-documents]
    labels: {{ gpu: "none (simulated)" }}
  - name: sim-b
    simulator: {{ profile: tiny, max_in_flight: 4 }}
    workloads: [short-chat, long-documents]
    labels: {{ gpu: "none (simulated)" }}
gateway_pairs:
  - name: sim-a-to-b
    direct: sim-a
    through: sim-b
"#
    )
}

fn prometheus_config(llmprobe_port: u16, alerts: &Path) -> String {
    format!(
        r#"
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - "{alerts}"
  - gateway.yml
scrape_configs:
  - job_name: llmprobe
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: ["127.0.0.1:{llmprobe_port}"]
"#,
        alerts = alerts.display()
    )
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn prometheus_binary() -> PathBuf {
    let path = std::env::var_os("PROMETHEUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/prometheus"));
    assert!(
        path.is_file(),
        "the Prometheus server is required at {}: install Debian's `prometheus` package \
         (apt-get install -y prometheus; scripts/test does) or set PROMETHEUS to a prometheus binary",
        path.display()
    );
    path
}

/// A loopback port nobody listens on right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The child processes and their scratch directory: killed and removed when
/// the test ends, panics included (the directory, with the logs, is kept on
/// panic and its path printed).
struct Processes {
    dir: PathBuf,
    children: Vec<(&'static str, Child)>,
}

impl Processes {
    fn spawn(&mut self, name: &'static str, command: &mut Command) {
        let log = std::fs::File::create(self.log(name)).unwrap();
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name} ({command:?}): {e}"));
        self.children.push((name, child));
    }

    fn log(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.log"))
    }

    /// The end of a child's log, for failure messages.
    fn tail(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.log(name)).unwrap_or_default();
        let start = text.len().saturating_sub(4000);
        let start = (start..text.len())
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(start);
        format!("--- end of {name}'s log\n{}", &text[start..])
    }

    /// Panics with the log when a child has exited.
    fn assert_running(&mut self) {
        let exited = self
            .children
            .iter_mut()
            .find_map(|(name, child)| child.try_wait().ok().flatten().map(|s| (*name, s)));
        if let Some((name, status)) = exited {
            panic!("{name} exited with {status}\n{}", self.tail(name));
        }
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("logs and configs kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

// ---------------------------------------------------------------------------
// Prometheus's HTTP API

struct Prom {
    http: reqwest::Client,
    base: String,
}

impl Prom {
    /// GET an API path; the `data` of a successful answer, or the error text.
    async fn api(&self, path: &str, params: &[(&str, &str)]) -> Result<Value, String> {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .query(params)
            .send()
            .await
            .map_err(|e| format!("request failed: {e}"))?;
        // Errors come as JSON with status 400/422/503, so read the body anyway.
        let text = response.text().await.map_err(|e| e.to_string())?;
        let body: Value =
            serde_json::from_str(&text).map_err(|e| format!("not JSON ({e}): {text}"))?;
        if body["status"] == "success" {
            Ok(body["data"].clone())
        } else {
            Err(format!("{}: {}", body["errorType"], body["error"]))
        }
    }

    /// An instant query: its result elements (a scalar counts as one).
    async fn query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let data = self.api("/api/v1/query", &[("query", expr)]).await?;
        Ok(match &data["result"] {
            Value::Array(items) => items.clone(),
            other => vec![other.clone()],
        })
    }

    /// What Grafana's `label_values(...)` gives: the sorted values of a
    /// label, over the series that match a selector in the last hour.
    async fn label_values(&self, call: &str) -> Result<Vec<String>, String> {
        let (selector, label) = parse_label_values(call)?;
        let end = now_unix();
        let start = (end - 3600.0).to_string();
        let end = end.to_string();
        let mut values = BTreeSet::new();
        match selector {
            Some(selector) => {
                let series = self
                    .api(
                        "/api/v1/series",
                        &[("match[]", &selector), ("start", &start), ("end", &end)],
                    )
                    .await?;
                for s in series.as_array().into_iter().flatten() {
                    if let Some(v) = s[&label].as_str() {
                        values.insert(v.to_string());
                    }
                }
            }
            None => {
                let data = self
                    .api(&format!("/api/v1/label/{label}/values"), &[])
                    .await?;
                for v in data.as_array().into_iter().flatten() {
                    values.extend(v.as_str().map(str::to_string));
                }
            }
        }
        Ok(values.into_iter().collect())
    }
}

fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// `label_values(selector, label)` or `label_values(label)`.
fn parse_label_values(call: &str) -> Result<(Option<String>, String), String> {
    let inner = call
        .trim()
        .strip_prefix("label_values(")
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| {
            format!("unsupported variable query {call:?} (only label_values(...) is understood)")
        })?;
    // The label follows the last comma outside braces and strings.
    let b = inner.as_bytes();
    let (mut i, mut depth, mut split) = (0, 0i32, None);
    while i < b.len() {
        match b[i] {
            b'"' | b'\'' | b'`' => i = end_of_string(b, i) - 1,
            b'{' | b'(' | b'[' => depth += 1,
            b'}' | b')' | b']' => depth -= 1,
            b',' if depth == 0 => split = Some(i),
            _ => {}
        }
        i += 1;
    }
    Ok(match split {
        Some(at) => (
            Some(inner[..at].trim().to_string()),
            inner[at + 1..].trim().to_string(),
        ),
        None => (None, inner.trim().to_string()),
    })
}

// ---------------------------------------------------------------------------
// PromQL scanning

/// Index just past the string literal that starts at `start`.
fn end_of_string(b: &[u8], start: usize) -> usize {
    let quote = b[start];
    let mut i = start + 1;
    while i < b.len() {
        if b[i] == b'\\' && quote != b'`' {
            i += 2;
            continue;
        }
        if b[i] == quote {
            return i + 1;
        }
        i += 1;
    }
    b.len()
}

/// Index just past the bracket that closes the one at `start`, skipping
/// string literals.
fn end_of_group(b: &[u8], start: usize) -> usize {
    let (open, close) = (b[start], matching_bracket(b[start]));
    let (mut i, mut depth) = (start, 0);
    while i < b.len() {
        match b[i] {
            b'"' | b'\'' | b'`' => {
                i = end_of_string(b, i);
                continue;
            }
            c if c == open => depth += 1,
            c if c == close => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    b.len()
}

fn matching_bracket(c: u8) -> u8 {
    match c {
        b'(' => b')',
        b'[' => b']',
        _ => b'}',
    }
}

/// Words followed by a parenthesised label list, not by an expression.
const GROUPING: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Words that are neither metric names nor functions called with `(`:
/// operators, modifiers, aggregations written `sum by (l) (x)`, literals.
const NOT_METRICS: &[&str] = &[
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "atan2",
    "inf",
    "nan",
    "sum",
    "avg",
    "count",
    "min",
    "max",
    "group",
    "stddev",
    "stdvar",
    "topk",
    "bottomk",
    "quantile",
    "count_values",
    "limitk",
    "limit_ratio",
];

/// The vector selectors of a PromQL expression as written (`name{...}`,
/// `name`, or `{...}`). A scanner, not a parser, but enough for PromQL as
/// shipped here; every selector it returns is itself run through Prometheus,
/// so a scanning mistake shows up as a failed query, not as a pass.
fn selectors(expr: &str) -> Vec<String> {
    let b = expr.as_bytes();
    let next_non_space = |mut j: usize| {
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        j
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if matches!(c, b'"' | b'\'' | b'`') {
            i = end_of_string(b, i);
        } else if c == b'[' {
            // A range or subquery: durations and variables like $__interval.
            i = end_of_group(b, i);
        } else if c == b'{' {
            let end = end_of_group(b, i);
            out.push(expr[i..end].to_string());
            i = end;
        } else if c.is_ascii_alphabetic() || c == b'_' || c == b':' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b':') {
                i += 1;
            }
            let word = &expr[start..i];
            let lower = word.to_ascii_lowercase();
            let next = next_non_space(i);
            let followed_by = |c: u8| next < b.len() && b[next] == c;
            if GROUPING.contains(&lower.as_str()) {
                if followed_by(b'(') {
                    i = end_of_group(b, next);
                }
            } else if NOT_METRICS.contains(&lower.as_str()) || followed_by(b'(') {
                // An operator, or a function or aggregation call.
            } else if followed_by(b'{') {
                let end = end_of_group(b, next);
                out.push(format!("{word}{}", &expr[next..end]));
                i = end;
            } else {
                out.push(word.to_string());
            }
        } else if c.is_ascii_digit() || c == b'.' {
            // Numbers and durations (`offset 5m`, `1e3`, `0x1f`).
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Grafana: queries, variables, interpolation

/// A variable's current value: one option, or several (multi-value or "All").
#[derive(Clone, Debug)]
enum Val {
    One(String),
    Many(Vec<String>),
}

type Binding = BTreeMap<String, Val>;

/// Results of a query under each variable combination.
type Runs = Vec<(Binding, Vec<Value>)>;

fn describe(binding: &Binding) -> String {
    let parts: Vec<String> = binding
        .iter()
        .map(|(k, v)| match v {
            Val::One(s) => format!("{k}={s}"),
            Val::Many(vs) => format!("{k}=All{vs:?}"),
        })
        .collect();
    if parts.is_empty() {
        "no variables".into()
    } else {
        parts.join(" ")
    }
}

/// Grafana's escaping of a value used inside a Prometheus regex matcher
/// (`prometheusSpecialRegexEscape`): the regex escape is itself escaped for
/// the PromQL string, so `a.1` becomes `a\\.1` in the query text.
fn regex_escape(value: &str) -> String {
    let mut out = String::new();
    for c in value.chars() {
        if c == '\\' {
            out.push_str("\\\\\\\\");
        } else {
            if "^$*+?.()|{}[]'".contains(c) {
                out.push_str("\\\\");
            }
            out.push(c);
        }
    }
    out
}

/// Substitutes `$name` and `${name}` as Grafana's Prometheus data source does:
/// a single value as is, several values as `(a|b)` of regex-escaped values;
/// built-in `$__...` variables from `builtins`. An unknown variable, a
/// `${name:format}`, or the `[[name]]` syntax is an error: extend the test
/// rather than let a query run half-substituted.
fn interpolate(
    expr: &str,
    vars: &Binding,
    builtins: &BTreeMap<&str, String>,
) -> Result<String, String> {
    if expr.contains("[[") {
        return Err(format!("[[var]] syntax is not supported here: {expr}"));
    }
    let mut out = String::new();
    let mut rest = expr;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, consumed) = if let Some(braced) = after.strip_prefix('{') {
            let end = braced
                .find('}')
                .ok_or_else(|| format!("unclosed ${{ in {expr}"))?;
            (&braced[..end], end + 2)
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], end)
        };
        if name.is_empty() {
            // A literal `$` (end of a regex), which Grafana leaves alone too.
            out.push('$');
            rest = after;
            continue;
        }
        if name.contains(':') {
            return Err(format!("${{{name}}}: formats are not supported here"));
        }
        let value = if let Some(v) = builtins.get(name) {
            v.clone()
        } else {
            match vars.get(name) {
                Some(Val::One(v)) => v.clone(),
                Some(Val::Many(vs)) if vs.len() == 1 => regex_escape(&vs[0]),
                Some(Val::Many(vs)) => {
                    let escaped: Vec<String> = vs.iter().map(|v| regex_escape(v)).collect();
                    format!("({})", escaped.join("|"))
                }
                None => return Err(format!("unknown variable ${name} in {expr}")),
            }
        };
        out.push_str(&value);
        rest = &after[consumed..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Grafana's built-in variables for a panel: `$__interval` is the panel's
/// minimum interval where it sets one (it wins on short time ranges), else a
/// minute; `$__range` the dashboard's time range.
fn builtins(panel_interval: Option<&str>, range: &str) -> BTreeMap<&'static str, String> {
    let interval = panel_interval.unwrap_or("1m").to_string();
    let range_s = humantime::parse_duration(range)
        .map(|d| d.as_secs())
        .unwrap_or(3600);
    BTreeMap::from([
        ("__interval", interval.clone()),
        (
            "__interval_ms",
            humantime::parse_duration(&interval)
                .map(|d| d.as_millis().to_string())
                .unwrap_or_else(|_| "60000".into()),
        ),
        ("__rate_interval", interval),
        ("__range", format!("{range_s}s")),
        ("__range_s", range_s.to_string()),
        ("__range_ms", (range_s * 1000).to_string()),
    ])
}

/// A template variable backed by a Prometheus query.
struct TemplateVar {
    name: String,
    query: String,
    /// Multi-value or with "All": substituted with every option at once.
    many: bool,
}

fn template_vars(dashboard: &Value, file: &str) -> Vec<TemplateVar> {
    let mut vars = Vec::new();
    for v in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = v["name"].as_str().unwrap_or_default().to_string();
        match v["type"].as_str() {
            // Chooses the data source; never part of an expression.
            Some("datasource") => {}
            Some("query") => {
                let query = match &v["query"] {
                    Value::String(s) => s.clone(),
                    q => q["query"].as_str().unwrap_or_default().to_string(),
                };
                let many = v["multi"] == true || v["includeAll"] == true;
                vars.push(TemplateVar { name, query, many });
            }
            other => panic!(
                "{file}: variable {name} has type {other:?}, which this test does not \
                 substitute yet: extend tests/dashboards_prometheus.rs"
            ),
        }
    }
    vars
}

/// One query of a dashboard.
struct PanelQuery {
    /// "file › panel title › refId".
    origin: String,
    title: String,
    ref_id: String,
    expr: String,
    interval: Option<String>,
}

/// Every query of every panel, rows and collapsed rows included.
fn panel_queries(dashboard: &Value, file: &str) -> Vec<PanelQuery> {
    fn walk(panels: &Value, file: &str, out: &mut Vec<PanelQuery>) {
        for panel in panels.as_array().into_iter().flatten() {
            let title = panel["title"].as_str().unwrap_or("(untitled)").to_string();
            for target in panel["targets"].as_array().into_iter().flatten() {
                if let Some(expr) = target["expr"].as_str() {
                    let ref_id = target["refId"].as_str().unwrap_or("?").to_string();
                    out.push(PanelQuery {
                        origin: format!("{file} › {title} › {ref_id}"),
                        title: title.clone(),
                        ref_id,
                        expr: expr.to_string(),
                        interval: panel["interval"].as_str().map(str::to_string),
                    });
                }
            }
            walk(&panel["panels"], file, out);
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], file, &mut out);
    // Prometheus annotations run queries too.
    for a in dashboard["annotations"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        // Saved by older Grafana at the top, by newer in `target`.
        if let Some(expr) = a["expr"].as_str().or(a["target"]["expr"].as_str()) {
            out.push(PanelQuery {
                origin: format!("{file} › annotation {}", a["name"]),
                title: String::new(),
                ref_id: String::new(),
                expr: expr.to_string(),
                interval: None,
            });
        }
    }
    out
}

/// Results of one query under every variable combination.
#[derive(Default)]
struct Tally {
    runs: usize,
    with_data: usize,
    /// Raw selector -> (runs, runs with data).
    selectors: BTreeMap<String, (usize, usize)>,
    /// The results, by combination.
    results: Runs,
}

fn check_policy(
    what: &str,
    policy: Policy,
    runs: usize,
    with_data: usize,
    failures: &mut Vec<String>,
) {
    let ok = match policy {
        Policy::Every => with_data == runs,
        Policy::Some => with_data > 0,
        Policy::MayBeEmpty => true,
    };
    if !ok {
        failures.push(format!(
            "{what}: data under {with_data} of {runs} variable combinations, expected {policy:?}"
        ));
    }
}

// ---------------------------------------------------------------------------
// Alert rules

/// The PromQL inside alert annotations: `printf "fmt" $labels.a ... | query`,
/// with each `%q` given a quoted label value of a real series.
fn annotation_queries(rules_yaml: &str, labels: &BTreeMap<&str, &str>) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = rules_yaml;
    while let Some(at) = rest.find("printf \"") {
        let b = rest.as_bytes();
        let start = at + "printf ".len();
        let end = end_of_string(b, start);
        let format = rest[start + 1..end - 1].replace("\\\"", "\"");
        let args_end = rest[end..].find('|').map_or(rest.len(), |p| end + p);
        let args: Vec<&str> = rest[end..args_end]
            .split_whitespace()
            .map(|a| {
                let name = a.strip_prefix("$labels.").unwrap_or_else(|| {
                    panic!("annotation printf argument {a:?} is not $labels.NAME: extend the test")
                });
                *labels
                    .get(name)
                    .unwrap_or_else(|| panic!("no sample value for label {name}"))
            })
            .collect();
        let mut query = String::new();
        let mut pieces = format.split("%q");
        query.push_str(pieces.next().unwrap_or_default());
        for (piece, arg) in pieces.zip(args.iter().chain(std::iter::repeat(&"MISSING"))) {
            let _ = write!(query, "{arg:?}{piece}");
        }
        assert!(
            !query.contains('%'),
            "only %q is understood in annotation printf formats: {format}"
        );
        out.push(query);
        rest = &rest[args_end..];
    }
    out
}

// ---------------------------------------------------------------------------
// The test

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_and_alert_expression_runs_on_real_data() {
    let started = Instant::now();
    let prometheus = prometheus_binary();
    let alerts_path = repo().join("prometheus/alerts.yml");
    let alerts_yaml = std::fs::read_to_string(&alerts_path).unwrap();
    let mut dashboards: Vec<(String, Value)> = std::fs::read_dir(repo().join("grafana/dashboards"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let json =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name} is not JSON: {e}"));
            (name, json)
        })
        .collect();
    dashboards.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(dashboards.len() >= 2, "dashboards not found");

    let dir = std::env::temp_dir().join(format!(
        "llmprobe-dashboards-{}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    std::fs::create_dir_all(dir.join("tsdb")).unwrap();
    let mut procs = Processes {
        dir: dir.clone(),
        children: Vec::new(),
    };

    // llmprobe first, so that Prometheus's first scrapes find it.
    let llmprobe_port = free_port();
    let config = dir.join("llmprobe.yaml");
    let file_sd = dir.join("targets.json");
    std::fs::write(&file_sd, "[]").unwrap();
    let file_sd = FILE_SD.replace("FILE_SD_PATH", &file_sd.display().to_string());
    std::fs::write(&config, llmprobe_config(llmprobe_port) + &file_sd).unwrap();
    procs.spawn(
        "llmprobe",
        Command::new(env!("CARGO_BIN_EXE_llmprobe"))
            .arg("run")
            .arg("--config")
            .arg(&config),
    );
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    wait_until(&mut procs, "llmprobe", "llmprobe's /healthz", || async {
        http.get(format!("http://127.0.0.1:{llmprobe_port}/healthz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
    })
    .await;

    let prom_port = free_port();
    std::fs::write(dir.join("gateway.yml"), GATEWAY_RULES).unwrap();
    let prom_config = dir.join("prometheus.yml");
    std::fs::write(&prom_config, prometheus_config(llmprobe_port, &alerts_path)).unwrap();
    procs.spawn(
        "prometheus",
        Command::new(&prometheus)
            .arg(format!("--config.file={}", prom_config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{prom_port}")),
    );
    let prom = Prom {
        http: http.clone(),
        base: format!("http://127.0.0.1:{prom_port}"),
    };
    wait_until(&mut procs, "prometheus", "Prometheus /-/ready", || async {
        http.get(format!("{}/-/ready", prom.base))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
    })
    .await;

    // Two completed sweeps of each target ingested: the completion timestamp
    // changed at least once in Prometheus's own data.
    let ingested = "changes(llmprobe_sweep_last_completion_timestamp_seconds[10m]) >= 1";
    wait_until(
        &mut procs,
        "llmprobe",
        "two sweeps of each target in Prometheus",
        || async {
            let targets: BTreeSet<String> = prom
                .query(ingested)
                .await
                .unwrap_or_default()
                .iter()
                .filter_map(|s| s["metric"]["target"].as_str().map(str::to_string))
                .collect();
            targets.contains("sim-a") && targets.contains("sim-b")
        },
    )
    .await;
    // Every rule evaluated at least once since (health "unknown" before).
    wait_until(&mut procs, "prometheus", "every rule evaluated", || async {
        prom.api("/api/v1/rules", &[])
            .await
            .is_ok_and(|d| rules(&d).iter().all(|r| r["health"] != "unknown"))
    })
    .await;

    let mut failures: Vec<String> = Vec::new();
    let overhead_exported = !prom
        .query("llmprobe_gateway_overhead_seconds")
        .await
        .unwrap()
        .is_empty();
    let mut queries_run = 0usize;

    // --- dashboards --------------------------------------------------------
    let mut by_title: BTreeMap<(String, String, String), Runs> = BTreeMap::new();
    for (file, dashboard) in &dashboards {
        let range = dashboard["time"]["from"]
            .as_str()
            .and_then(|f| f.strip_prefix("now-"))
            .unwrap_or("6h")
            .to_string();
        let no_builtins = builtins(None, &range);

        // Variables resolve in order, each seeing the ones before it, as in
        // Grafana. A single-value variable branches over all its options, so
        // every target, model and workload is queried; a multi-value one
        // takes "All".
        let mut combos: Vec<Binding> = vec![Binding::new()];
        for var in template_vars(dashboard, file) {
            let mut next = Vec::new();
            for binding in combos {
                let origin = format!("{file} › variable {} [{}]", var.name, describe(&binding));
                let values = match interpolate(&var.query, &binding, &no_builtins) {
                    Err(e) => {
                        failures.push(format!("{origin}: {e}"));
                        Vec::new()
                    }
                    Ok(call) => {
                        queries_run += 1;
                        prom.label_values(&call).await.unwrap_or_else(|e| {
                            failures.push(format!("{origin}: {call}: {e}"));
                            Vec::new()
                        })
                    }
                };
                if values.is_empty()
                    && dashboard_policy(&var.query, overhead_exported) != Policy::MayBeEmpty
                {
                    failures.push(format!("{origin}: {} has no values", var.query));
                }
                if var.many {
                    let mut b = binding.clone();
                    b.insert(var.name.clone(), Val::Many(values));
                    next.push(b);
                } else if values.is_empty() {
                    // Keep checking that the panels parse.
                    let mut b = binding.clone();
                    b.insert(var.name.clone(), Val::One(String::new()));
                    next.push(b);
                } else {
                    for v in values {
                        let mut b = binding.clone();
                        b.insert(var.name.clone(), Val::One(v));
                        next.push(b);
                    }
                }
            }
            combos = next;
        }

        for q in panel_queries(dashboard, file) {
            let builtins = builtins(q.interval.as_deref(), &range);
            let raw_selectors = selectors(&q.expr);
            if raw_selectors.is_empty() {
                failures.push(format!("{}: no selector found in {}", q.origin, q.expr));
            }
            let mut tally = Tally::default();
            for binding in &combos {
                let at = format!("{} [{}]", q.origin, describe(binding));
                let expr = match interpolate(&q.expr, binding, &builtins) {
                    Ok(e) => e,
                    Err(e) => {
                        failures.push(format!("{at}: {e}"));
                        continue;
                    }
                };
                queries_run += 1;
                tally.runs += 1;
                match prom.query(&expr).await {
                    Ok(result) => {
                        tally.with_data += usize::from(!result.is_empty());
                        tally.results.push((binding.clone(), result));
                    }
                    Err(e) => failures.push(format!("{at}: {expr}: {e}")),
                }
                for raw in &raw_selectors {
                    let selector = interpolate(raw, binding, &builtins).unwrap_or_default();
                    queries_run += 1;
                    let entry = tally.selectors.entry(raw.clone()).or_default();
                    entry.0 += 1;
                    match prom.query(&selector).await {
                        Ok(r) => entry.1 += usize::from(!r.is_empty()),
                        Err(e) => failures.push(format!("{at}: selector {selector}: {e}")),
                    }
                }
            }
            // An annotation marks events (a reload, a failed sweep): empty
            // in this quiet setup; its selectors must still find data.
            let policy = if q.origin.contains(" › annotation ") {
                Policy::MayBeEmpty
            } else {
                dashboard_policy(&q.expr, overhead_exported)
            };
            check_policy(
                &format!("{}: {}", q.origin, q.expr),
                policy,
                tally.runs,
                tally.with_data,
                &mut failures,
            );
            for (raw, (runs, with_data)) in &tally.selectors {
                check_policy(
                    &format!("{}: selector {raw}", q.origin),
                    dashboard_policy(raw, overhead_exported),
                    *runs,
                    *with_data,
                    &mut failures,
                );
            }
            by_title
                .entry((file.clone(), q.title.clone(), q.ref_id.clone()))
                .or_default()
                .extend(tally.results);
        }
    }

    // --- alert rules -------------------------------------------------------
    let mut coming_exported = Vec::new();
    for m in COMING_METRICS {
        if !prom.query(m).await.unwrap_or_default().is_empty() {
            coming_exported.push(*m);
        }
    }
    let rules_data = prom.api("/api/v1/rules", &[]).await.unwrap();
    let all_rules = rules(&rules_data);
    for r in &all_rules {
        if r["health"] != "ok" {
            failures.push(format!(
                "rule {} is unhealthy: {} {}",
                r["name"], r["health"], r["lastError"]
            ));
        }
    }
    // Prometheus parsed alerts.yml itself; its rules API gives each
    // expression exactly as evaluated. Counting `alert:` lines makes sure
    // none went missing on the way.
    let alerting: Vec<&Value> = all_rules
        .iter()
        .filter(|r| r["type"] == "alerting")
        .collect();
    let in_file = alerts_yaml
        .lines()
        .filter(|l| l.trim_start().starts_with("- alert:"))
        .count();
    assert_eq!(
        alerting.len(),
        in_file,
        "Prometheus loaded {} alerting rules, alerts.yml has {in_file}",
        alerting.len()
    );
    for rule in &alerting {
        let name = rule["name"].as_str().unwrap();
        let expr = rule["query"].as_str().unwrap();
        let silent = SILENT_ALERTS.iter().any(|(n, _)| *n == name);
        let active = ACTIVE_ALERTS.contains(&name);
        if !silent && !active {
            failures.push(format!(
                "alert {name} is new: add it to SILENT_ALERTS or ACTIVE_ALERTS, with why"
            ));
        }
        queries_run += 1;
        match prom.query(expr).await {
            Ok(r) if silent && !r.is_empty() => failures.push(format!(
                "alert {name} should be silent in this healthy setup but {expr} returns {r:?}"
            )),
            Ok(r) if active && r.is_empty() => {
                failures.push(format!("alert {name}: {expr} returns nothing"))
            }
            Ok(_) => {}
            Err(e) => failures.push(format!("alert {name}: {expr}: {e}")),
        }
        let found = selectors(expr);
        if found.is_empty() {
            failures.push(format!("alert {name}: no selector found in {expr}"));
        }
        for selector in found {
            queries_run += 1;
            let coming = COMING_METRICS
                .iter()
                .any(|m| selector.contains(m) && !coming_exported.contains(m));
            match prom.query(&selector).await {
                Ok(r) if r.is_empty() && !coming => failures.push(format!(
                    "alert {name}: selector {selector} selects nothing (wrong metric or label?)"
                )),
                Ok(_) => {}
                Err(e) => failures.push(format!("alert {name}: selector {selector}: {e}")),
            }
        }
    }
    for (name, _) in SILENT_ALERTS {
        if !alerting.iter().any(|r| r["name"] == *name) {
            failures.push(format!("SILENT_ALERTS names {name}, not in alerts.yml"));
        }
    }
    // The lookups inside annotations, with the labels of a real series.
    let sample = BTreeMap::from([
        ("target", "sim-a"),
        ("model", "sim-tiny"),
        ("workload", "short-chat"),
    ]);
    let lookups = annotation_queries(&alerts_yaml, &sample);
    for q in &lookups {
        queries_run += 1;
        match prom.query(q).await {
            Ok(r) if r.is_empty() => failures.push(format!("annotation query {q} returns nothing")),
            Ok(_) => {}
            Err(e) => failures.push(format!("annotation query {q}: {e}")),
        }
    }
    // The active alert, with its annotations expanded by Prometheus.
    let active_alerts = || async {
        prom.api("/api/v1/alerts", &[])
            .await
            .map(|d| d["alerts"].as_array().cloned().unwrap_or_default())
            .unwrap_or_default()
    };
    wait_until(
        &mut procs,
        "prometheus",
        "the gateway alert pending",
        || async {
            active_alerts()
                .await
                .iter()
                .any(|a| a["labels"]["alertname"] == ACTIVE_ALERTS[0])
        },
    )
    .await;
    let pending = active_alerts().await;
    for alert in &pending {
        let name = alert["labels"]["alertname"].as_str().unwrap_or_default();
        let target = alert["labels"]["target"].as_str().unwrap_or_default();
        let text = alert["annotations"].to_string();
        if name != ACTIVE_ALERTS[0] || target != "sim-b" {
            failures.push(format!("unexpected alert: {alert}"));
        }
        if text.contains("error") || text.contains("<no value>") {
            failures.push(format!("alert {name}: annotations did not expand: {text}"));
        }
        if !alert["annotations"]["description"]
            .as_str()
            .unwrap_or_default()
            .contains("configured with 12")
        {
            failures.push(format!(
                "alert {name}: the description should quote the gateway's 12: {text}"
            ));
        }
    }

    // --- values of key panels ----------------------------------------------
    let overview = "llmprobe-capacity-overview.json";
    let detail = "llmprobe-target-detail.json";
    let mut values = |file: &str, title: &str, ref_id: &str| -> Vec<(String, f64)> {
        let key = (file.to_string(), title.to_string(), ref_id.to_string());
        let Some(runs) = by_title.get(&key) else {
            failures.push(format!("{file} › {title} › {ref_id}: panel not found"));
            return Vec::new();
        };
        runs.iter()
            .flat_map(|(_, result)| result.iter())
            .map(|s| {
                let target = s["metric"]["target"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let value = s["value"][1]
                    .as_str()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(f64::NAN);
                (target, value)
            })
            .collect()
    };
    // Every series of a panel satisfies `want`, and there is at least one.
    let all = |got: &[(String, f64)], want: &dyn Fn(&str, f64) -> bool| {
        !got.is_empty() && got.iter().all(|(t, v)| want(t, *v))
    };
    let per_target = |a: f64, b: f64| {
        move |t: &str, v: f64| match t {
            "sim-a" => v == a,
            "sim-b" => v == b,
            _ => false,
        }
    };
    let knee = values(overview, "Knee", "A");
    let recommended = values(overview, "Recommended max_in_flight", "A");
    let at_knee = values(overview, "Throughput at the knee", "A");
    let by_level = values(detail, "Aggregate throughput", "A");
    let mut value_failures = Vec::new();
    // One series per target and workload; tiny sheds above 8 in flight,
    // sim-b above 4, so those are the knees.
    if knee.len() != 4 || !all(&knee, &per_target(8.0, 4.0)) {
        value_failures.push(format!(
            "knee should be 8 for sim-a and 4 for sim-b, per workload: {knee:?}"
        ));
    }
    // floor(knee x headroom 0.9)
    if !all(&recommended, &per_target(7.0, 3.0)) {
        value_failures.push(format!(
            "recommended max_in_flight should be 7 for sim-a and 3 for sim-b: {recommended:?}"
        ));
    }
    for (what, got) in [
        ("throughput at the knee", &at_knee),
        ("throughput per level", &by_level),
    ] {
        if !all(got, &|_, v| v > 0.0) {
            value_failures.push(format!("{what} should be > 0: {got:?}"));
        }
    }
    failures.extend(value_failures);

    procs.assert_running();
    eprintln!(
        "{queries_run} queries from {} dashboards and {} alert rules (+{} annotation lookups) \
         in {:.1}s; gateway overhead exported: {overhead_exported}",
        dashboards.len(),
        alerting.len(),
        lookups.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} problem(s):\n  {}\n{}",
        failures.len(),
        failures.join("\n  "),
        procs.tail("prometheus")
    );
}

/// Every rule of every group of a /api/v1/rules answer.
fn rules(data: &Value) -> Vec<Value> {
    data["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// Polls `ready` every 250 ms for at most 60 s; fails with the log of `who`
/// when time runs out or a child process exits.
async fn wait_until<F, Fut>(procs: &mut Processes, who: &str, what: &str, mut ready: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        procs.assert_running();
        if ready().await {
            return;
        }
        if Instant::now() > deadline {
            panic!(
                "timed out after 60 s waiting for {what}\n{}",
                procs.tail(who)
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[test]
fn selectors_are_found_in_promql() {
    let found = selectors(
        r#"max by (target) (increase(a_total{x="}", y=~"$t"}[$__interval])) / on(target) group_left() b
           or label_replace(c{d="1"}, "l", "v", "", "") > 0.7 * max_over_time(e[7d]) and {job="j"}
           unless sum without (le) (f offset 5m) == bool 1e3"#,
    );
    assert_eq!(
        found,
        [
            r#"a_total{x="}", y=~"$t"}"#,
            "b",
            r#"c{d="1"}"#,
            "e",
            r#"{job="j"}"#,
            "f"
        ]
    );
}

#[test]
fn grafana_variables_are_substituted_like_grafana() {
    let vars = Binding::from([
        (
            "target".to_string(),
            Val::Many(vec!["a.1".into(), "b".into()]),
        ),
        ("one".to_string(), Val::Many(vec!["x+y".into()])),
        ("model".to_string(), Val::One("m".into())),
    ]);
    let b = builtins(Some("15m"), "7d");
    assert_eq!(
        interpolate(
            r#"x{target=~"$target",o=~"${one}",model="$model",r=~"a$"}[$__interval]"#,
            &vars,
            &b
        )
        .unwrap(),
        r#"x{target=~"(a\\.1|b)",o=~"x\\+y",model="m",r=~"a$"}[15m]"#
    );
    assert_eq!(b["__range"], "604800s");
    assert!(interpolate("$nope", &vars, &b).is_err());
    assert!(interpolate("${model:csv}", &vars, &b).is_err());
    assert_eq!(
        parse_label_values(r#"label_values(k{t="a,b"}, model)"#).unwrap(),
        (Some(r#"k{t="a,b"}"#.to_string()), "model".to_string())
    );
}

#[test]
fn annotation_lookups_get_real_label_values() {
    let yaml = r#"description: >-
  max {{ with printf "max_over_time(k{target=%q,model=%q}[7d])" $labels.target $labels.model | query }}{{ . | first | value }}{{ end }}"#;
    let labels = BTreeMap::from([("target", "t"), ("model", "m")]);
    assert_eq!(
        annotation_queries(yaml, &labels),
        [r#"max_over_time(k{target="t",model="m"}[7d])"#]
    );
}
