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

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use support::binary::Running;
use support::config::Yaml;
use support::grafana::{
    builtins, describe, interpolate, panel_queries, parse_label_values, template_vars, Binding, Val,
};
use support::paths::{repo, ScratchDir};
use support::prometheus::Prometheus;
use support::promql::{annotation_queries, selectors};
use support::wait;

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
        "LlmprobeSustainedRateDropped",
        "each loop searches its sustained rate once (sustained.every 1000) and carries it: it never falls below its own 7-day p90",
    ),
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
    (
        "LlmprobeTargetMisconfigured",
        "the simulators take any key and model: no sweep stops on a setup mistake",
    ),
    (
        "LlmprobeClientBottleneck",
        "the client keeps up with the simulators (a stalled level is run again, then passes)",
    ),
    (
        "LlmprobeProbeClientStalled",
        "llmprobe's runtime keeps up with its probes here: far fewer than a quarter of them stalled",
    ),
    (
        "LlmprobeProbeFailing",
        "the simulators serve every probe (none is sent while its own target is swept)",
    ),
    (
        "LlmprobeProbeAvailabilityBurn",
        "the simulators serve every probe",
    ),
    (
        "LlmprobeProbeAvailabilityBudgetLow",
        "the simulators serve every probe",
    ),
    (
        "LlmprobeProbeTtftBurn",
        "a probe's first token comes in milliseconds, far below the 2 s threshold",
    ),
    (
        "LlmprobeProbeTtftBudgetLow",
        "a probe's first token comes in milliseconds, far below the 2 s threshold",
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

/// Metrics that exist only while something is wrong, so that a healthy
/// setup has no series of them: selectors of them may find nothing here.
const ABSENT_WHEN_HEALTHY: &[(&str, &str)] = &[(
    "llmprobe_target_setup_error",
    "set only while a target's last sweep stopped on a setup mistake",
)];

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
    // The server's figures of a level rest on the reads of its metrics
    // while it ran (every 50 ms here); a preemption count needs two, which
    // the shortest levels (8 tokens, one request at a time) may not give.
    if expr.contains("llmprobe_sweep_server_") {
        return Policy::Some;
    }
    // A sustained rate is absent where its search measured nothing: here
    // each search has 20 s, which the long-documents workload's longer
    // requests may not fit a step and its confirmation in.
    if expr.contains("llmprobe_capacity_sustained_requests_per_second") {
        return Policy::Some;
    }
    // A cold start needs probe.cold_after (5 minutes) without a request
    // from llmprobe: never, with sweeps every second.
    if expr.contains("llmprobe_probe_cold_ttft_seconds") {
        return Policy::MayBeEmpty;
    }
    // The overview's sweep status reads the setup-error gauge beside the
    // sweep's success: on its own, the gauge has no series here.
    if ABSENT_WHEN_HEALTHY.iter().any(|(m, _)| expr.contains(m)) && !expr.contains(" or ") {
        return Policy::MayBeEmpty;
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
fn llmprobe_config() -> String {
    // About 600 words: prefill makes its TTFT visibly longer than short-chat's
    // while staying well inside the tiny profile's 4096-token context.
    let long = "Capacity planning for a private AI server needs measurements. ".repeat(70);
    Yaml {
        workload: "short-chat",
        levels: "[1, 2, 4, 8]",
        slo: Some("{ p95_latency: 10s, max_shed_ratio: 0.05, max_error_ratio: 0.05 }"),
        // One search per loop, carried after: the sustained-rate panel and
        // rules have data, and a later search's noise cannot wake the drop
        // alert. The dispatch-lag bound is generous (two loaded cores), and
        // a search short (20 s a workload at most; the first sweep of each
        // target holds two), within the waits' bound.
        sustained: "{ every: 1000, max_duration: 20s, max_dispatch_lag: 250ms }",
        // Every level in full, so that every panel has data: a level stopped
        // early has no throughput, and sim-b's saturation shows only at 8.
        // The server's metrics read often: the levels last a fraction of a second.
        more_defaults: "  headroom: 0.9\n  early_stop: false\n  server_metrics_period: 50ms",
        workloads: Some(&format!(
            r#"
workloads:
  short-chat:
    max_completion_tokens: 8
    temperature: 0
    prompts: ["Write a haiku about capacity planning."]
  long-documents:
    max_completion_tokens: 8
    temperature: 0
    prompts: ["{long}"]
"#
        )),
        // Decode steps of 16 ms, four times the tiny profile's, so that a
        // request lasts about 150 ms: the client's own turnaround on two
        // loaded cores (some ms between a request and its replacement) stays
        // well under the 10% of a level's time that makes it not count
        // (docs/measuring.md), which would lower a knee and wake the knee
        // alerts that this healthy setup must keep silent.
        rest: r#"
targets:
  - name: sim-a
    simulator: { profile: tiny, step_base: 16ms, kv_cache_tokens: 16384 }
    workloads: [short-chat, long-documents]
    labels: { gpu: "none (simulated)" }
  - name: sim-b
    simulator: { profile: tiny, step_base: 16ms, max_in_flight: 4, kv_cache_tokens: 16384 }
    workloads: [short-chat, long-documents]
    labels: { gpu: "none (simulated)" }
gateway_pairs:
  - name: sim-a-to-b
    direct: sim-a
    through: sim-b
"#,
        ..Yaml::default()
    }
    .render()
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

/// The two processes of the test and their files: stopped, and the files
/// removed, when the test ends (the files are kept on failure, their
/// directory printed).
struct Setup {
    llmprobe: Running,
    prometheus: Prometheus,
    /// Logs and configs; dropped last, after the processes stopped.
    _dir: ScratchDir,
}

impl Setup {
    /// Panics with its log when either process has exited.
    fn assert_running(&self) {
        self.llmprobe.process.assert_running();
        self.prometheus.process.assert_running();
    }

    /// Polls `ready` for at most 150 s (the first sweep of each target
    /// searches its sustained rate for each workload; the bound only ends a
    /// broken run); fails with the logs of `who` ("llmprobe" or
    /// "prometheus") when time runs out, and at once when either process
    /// exits.
    async fn wait_until<F, Fut>(&self, who: &str, what: &str, mut ready: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        wait::poll(what, Duration::from_secs(150), || {
            self.assert_running();
            let ready = ready();
            async move {
                if ready.await {
                    Ok(())
                } else {
                    Err(self.tail(who))
                }
            }
        })
        .await
    }

    fn tail(&self, who: &str) -> String {
        match who {
            "llmprobe" => self.llmprobe.process.tail(),
            _ => self.prometheus.process.tail(),
        }
    }
}

/// Grafana's `label_values(...)`: the sorted values of a label, over the
/// series that match a selector (or all series) in the last hour.
async fn label_values(prom: &Prometheus, call: &str) -> Result<Vec<String>, String> {
    let (selector, label) = parse_label_values(call)?;
    prom.label_values(selector.as_deref(), &label).await
}

/// Results of a query under each variable combination.
type Runs = Vec<(Binding, Vec<Value>)>;

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
// The test

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_and_alert_expression_runs_on_real_data() {
    let started = Instant::now();
    let alerts_path = repo().join("prometheus/alerts.yml");
    let alerts_yaml = std::fs::read_to_string(&alerts_path).unwrap();
    let dashboards = support::grafana::dashboards();
    assert!(dashboards.len() >= 2, "dashboards not found");

    // llmprobe first, so that Prometheus's first scrapes find it.
    let dir = ScratchDir::new("dashboards");
    let config = dir.join("llmprobe.yaml");
    let file_sd = dir.join("targets.json");
    std::fs::write(&file_sd, "[]").unwrap();
    let file_sd = FILE_SD.replace("FILE_SD_PATH", &file_sd.display().to_string());
    std::fs::write(&config, llmprobe_config() + &file_sd).unwrap();
    // Probes between sweeps on (the runner turns them off by default), often
    // enough that their panels and rules have data within the waits.
    let llmprobe = Running::start(&config, &[("LLMPROBE__DEFAULTS__PROBE__INTERVAL", "300ms")]);
    llmprobe.ready(Duration::from_secs(60)).await;

    std::fs::write(dir.join("gateway.yml"), GATEWAY_RULES).unwrap();
    let prometheus = Prometheus::start(
        dir.path(),
        &prometheus_config(llmprobe.addr.port(), &alerts_path),
    );
    prometheus.ready(Duration::from_secs(60)).await;
    let setup = Setup {
        llmprobe,
        prometheus,
        _dir: dir,
    };
    let prom = &setup.prometheus;

    // Two completed sweeps of each target ingested (the completion timestamp
    // changed at least once in Prometheus's own data), and a probe TTFT of
    // each with a rate: probes wait while their target is swept, and a
    // first sweep with its sustained search took 25 s, after which the
    // queries ran a second later, before a probe's series had two scrapes
    // (the TTFT panels read no data for sim-a once in CI).
    let ingested = "changes(llmprobe_sweep_last_completion_timestamp_seconds[10m]) >= 1";
    let probed = "sum by (target) (rate(llmprobe_probe_ttft_seconds_count[15m])) > 0";
    setup
        .wait_until(
            "llmprobe",
            "two sweeps and a probe TTFT of each target in Prometheus",
            || async {
                let mut both = true;
                for query in [ingested, probed] {
                    let targets: BTreeSet<String> = prom
                        .query(query)
                        .await
                        .unwrap_or_default()
                        .iter()
                        .filter_map(|s| s["metric"]["target"].as_str().map(str::to_string))
                        .collect();
                    both &= targets.contains("sim-a") && targets.contains("sim-b");
                }
                both
            },
        )
        .await;
    // Every rule evaluated at least once since (health "unknown" before).
    setup
        .wait_until("prometheus", "every rule evaluated", || async {
            prom.rules()
                .await
                .is_ok_and(|rules| rules.iter().all(|r| r["health"] != "unknown"))
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
                        label_values(prom, &call).await.unwrap_or_else(|e| {
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
    let all_rules = prom.rules().await.unwrap();
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
                .any(|m| selector.contains(m) && !coming_exported.contains(m))
                || ABSENT_WHEN_HEALTHY
                    .iter()
                    .any(|(m, _)| selector.contains(m));
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
    // The lookups inside annotations, with the labels of real series: each
    // must find something for at least one of them. Not every lookup has
    // every series: a sustained-rate search that measured nothing (its
    // dispatch lagged on two loaded cores) leaves its workload without one,
    // as the dashboards' policy allows; a wrong metric or label finds none.
    let mut samples: Vec<Vec<String>> = Vec::new();
    for target in ["sim-a", "sim-b"] {
        for workload in ["short-chat", "long-documents"] {
            let labels = [
                ("target", target),
                ("model", "sim-tiny"),
                ("workload", workload),
            ];
            samples.push(annotation_queries(&alerts_yaml, &BTreeMap::from(labels)));
        }
    }
    for (i, q) in samples[0].iter().enumerate() {
        queries_run += 1;
        let mut found = false;
        for lookups in &samples {
            match prom.query(&lookups[i]).await {
                Ok(r) if r.is_empty() => {}
                Ok(_) => found = true,
                Err(e) => failures.push(format!("annotation query {}: {e}", lookups[i])),
            }
        }
        if !found {
            failures.push(format!(
                "annotation query {q} returns nothing, nor for any other target and workload"
            ));
        }
    }
    // The active alert, with its annotations expanded by Prometheus.
    let active_alerts = || async {
        prom.api("/api/v1/alerts", &[])
            .await
            .map(|d| d["alerts"].as_array().cloned().unwrap_or_default())
            .unwrap_or_default()
    };
    setup
        .wait_until("prometheus", "the gateway alert pending", || async {
            active_alerts()
                .await
                .iter()
                .any(|a| a["labels"]["alertname"] == ACTIVE_ALERTS[0])
        })
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
    let table = "Capacity by target and workload";
    let status = values(overview, table, "N");
    let errors = values(overview, table, "M");
    let limits: Vec<String> = by_title
        .get(&(overview.to_string(), table.to_string(), "L".to_string()))
        .into_iter()
        .flatten()
        .flat_map(|(_, result)| result.iter())
        .map(|s| {
            s["metric"]["limit"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    let mut value_failures = Vec::new();
    // Every target swept well: status ok (0), no errors, shedding binds.
    if status.len() != 4 || !all(&status, &|_, v| v == 0.0) {
        value_failures.push(format!(
            "sweep status should be ok (0) for every row: {status:?}"
        ));
    }
    if !all(&errors, &|_, v| v == 0.0) {
        value_failures.push(format!("no errors on the simulator: {errors:?}"));
    }
    // sim-b sheds above its knee of 4; sim-a's knee is its highest level.
    if limits.len() != 4
        || !limits.iter().all(|l| l == "shed" || l == "not_reached")
        || !limits.iter().any(|l| l == "shed")
    {
        value_failures.push(format!(
            "a limit per row, shed where the simulator sheds: {limits:?}"
        ));
    }
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

    setup.assert_running();
    eprintln!(
        "{queries_run} queries from {} dashboards and {} alert rules (+{} annotation lookups) \
         in {:.1}s; gateway overhead exported: {overhead_exported}",
        dashboards.len(),
        alerting.len(),
        samples[0].len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} problem(s):\n  {}\n{}",
        failures.len(),
        failures.join("\n  "),
        setup.tail("prometheus")
    );
}
