//! The autoscaling manifests of `deploy/autoscaling/` and the queries of
//! docs/autoscaling.md, offline:
//!
//! - the HPA validates against the Kubernetes schemas
//!   (`deploy/kubernetes/validate.sh --files`);
//! - KEDA's ScaledObject (a CRD, no schema there) and the prometheus-adapter
//!   rule checked for structure: both scale the same Deployment with target
//!   1 per replica, never to zero, and an empty query result is not read
//!   as 0;
//! - on a real Prometheus scraping llmprobe (measuring the built-in
//!   simulator) and a stand-in for three vLLM pods' `/metrics`, with the
//!   shipped recording rules: KEDA's query, the adapter's query as the
//!   adapter renders it for the HPA, and every `promql` block of
//!   docs/autoscaling.md return data, and the replicas needed are the
//!   larger of the pods' running + waiting requests over llmprobe's
//!   recommended max_in_flight and their arrivals over its sustained rate.
//!
//! What the rules do when llmprobe's data is missing (2 hours old, a knee of
//! 0) is tested with promtool in deploy/prometheus/recording_test.yml.
//!
//! Needs kubectl or kustomize's validator setup (see validate.sh) and
//! Debian's `prometheus` package; the tests fail, saying so, when missing.

mod support;

use std::process::Command;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use support::yaml::{at, str_at, yaml};
use yaml_rust2::Yaml;

use support::config::{write_config, Yaml as ConfigYaml};
use support::daemon::Daemon;
use support::paths::{read, repo, ScratchDir};
use support::process::output_text;
use support::prometheus::Prometheus;
use support::wait;

const KEDA: &str = "deploy/autoscaling/keda-scaledobject.yaml";
const HPA: &str = "deploy/autoscaling/hpa.yaml";
const ADAPTER: &str = "deploy/autoscaling/prometheus-adapter-values.yaml";
const DOC: &str = "docs/autoscaling.md";

/// The model the manifests scale for, the namespace of its pods.
const MODEL: &str = "qwen3-8b";
const NAMESPACE: &str = "inference";

/// Running and waiting requests of the stand-in vLLM pods: 11 in all.
const PODS: [(&str, u32, u32); 3] = [
    ("vllm-qwen-0", 3, 2),
    ("vllm-qwen-1", 3, 0),
    ("vllm-qwen-2", 2, 1),
];

fn int_at(node: &Yaml, path: &[&str]) -> i64 {
    at(node, path)
        .as_i64()
        .unwrap_or_else(|| panic!("{} is not an integer", path.join(".")))
}

/// The one trigger of the ScaledObject.
fn keda_trigger(keda: &Yaml) -> &Yaml {
    let triggers = at(keda, &["spec", "triggers"]).as_vec().unwrap();
    assert_eq!(triggers.len(), 1, "one trigger");
    &triggers[0]
}

/// The one external rule of the adapter's values.
fn adapter_rule(values: &Yaml) -> &Yaml {
    let rules = at(values, &["rules", "external"]).as_vec().unwrap();
    assert_eq!(rules.len(), 1, "one external rule");
    &rules[0]
}

/// The adapter's metricsQuery as prometheus-adapter renders it for an HPA:
/// the series, and label matchers from the HPA's namespace and selector.
fn adapter_query(rule: &Yaml, hpa: &Yaml) -> String {
    let series_query = str_at(rule, &["seriesQuery"]);
    let series = &series_query[..series_query.find('{').unwrap_or(series_query.len())];
    let selector = at(
        hpa,
        &[
            "spec",
            "metrics",
            "0",
            "external",
            "metric",
            "selector",
            "matchLabels",
        ],
    );
    let mut matchers = vec![format!(
        "namespace=\"{}\"",
        str_at(hpa, &["metadata", "namespace"])
    )];
    for (k, v) in selector.as_hash().unwrap() {
        matchers.push(format!(
            "{}=\"{}\"",
            k.as_str().unwrap(),
            v.as_str().unwrap()
        ));
    }
    str_at(rule, &["metricsQuery"])
        .replace("<<.Series>>", series)
        .replace("<<.LabelMatchers>>", &matchers.join(","))
}

/// The bodies of the ```promql blocks of docs/autoscaling.md.
fn doc_queries() -> Vec<String> {
    let doc = read(DOC);
    let mut queries = Vec::new();
    let mut current: Option<String> = None;
    for line in doc.lines() {
        match (&mut current, line.trim()) {
            (None, "```promql") => current = Some(String::new()),
            (Some(q), "```") => {
                queries.push(q.trim().to_string());
                current = None;
            }
            (Some(q), _) => {
                q.push_str(line);
                q.push('\n');
            }
            (None, _) => {}
        }
    }
    queries
}

#[test]
fn hpa_validates_against_the_kubernetes_schemas() {
    let out = Command::new("sh")
        .arg(repo().join("deploy/kubernetes/validate.sh"))
        .arg("--files")
        .arg(repo().join(HPA))
        .output()
        .unwrap_or_else(|e| panic!("cannot run sh: {e}"));
    assert!(
        out.status.success(),
        "deploy/kubernetes/validate.sh --files {HPA} failed ({}); it needs python3 with pip, or \
         `pip install kubernetes-validate` beforehand\n{}",
        out.status,
        output_text(&out)
    );
}

#[test]
fn keda_scales_on_the_replicas_needed_and_holds_on_missing_data() {
    let keda = yaml(KEDA);
    assert_eq!(str_at(&keda, &["apiVersion"]), "keda.sh/v1alpha1");
    assert_eq!(str_at(&keda, &["kind"]), "ScaledObject");
    assert_eq!(str_at(&keda, &["metadata", "namespace"]), NAMESPACE);
    let spec = at(&keda, &["spec"]);
    assert_eq!(str_at(spec, &["scaleTargetRef", "kind"]), "Deployment");
    assert!(
        int_at(spec, &["minReplicaCount"]) >= 1,
        "KEDA's default minimum is 0: scale to zero"
    );
    assert!(spec["idleReplicaCount"].is_badvalue(), "no idle scale-down");
    assert!(int_at(spec, &["maxReplicaCount"]) > int_at(spec, &["minReplicaCount"]));

    let trigger = keda_trigger(&keda);
    assert_eq!(str_at(trigger, &["type"]), "prometheus");
    // Fallback works only with AverageValue; ceil(value / 1) replicas.
    assert_eq!(str_at(trigger, &["metricType"]), "AverageValue");
    let meta = at(trigger, &["metadata"]);
    assert_eq!(str_at(meta, &["threshold"]), "1");
    // KEDA's default (true) reads an empty result as 0.
    assert_eq!(str_at(meta, &["ignoreNullValues"]), "false");
    let query = str_at(meta, &["query"]);
    assert!(
        query.contains("namespace_model:llmprobe_replicas_needed:ratio")
            && query.contains(&format!("model=\"{MODEL}\""))
            && query.contains(&format!("namespace=\"{NAMESPACE}\"")),
        "{query}"
    );
    assert!(
        !query.contains("vector(") && !query.contains(" or "),
        "a default value would hide missing data: {query}"
    );
    assert!(str_at(meta, &["serverAddress"]).starts_with("http"));

    // An error (empty result) three polls running: keep the replicas.
    assert!(int_at(spec, &["fallback", "failureThreshold"]) >= 1);
    assert!(int_at(spec, &["fallback", "replicas"]) >= 1);
    assert_eq!(
        str_at(spec, &["fallback", "behavior"]),
        "currentReplicasIfHigher"
    );
}

#[test]
fn hpa_and_adapter_rule_fit_together_and_with_keda() {
    let hpa = yaml(HPA);
    let keda = yaml(KEDA);
    let values = yaml(ADAPTER);
    let rule = adapter_rule(&values);

    // The same Deployment, the same bounds, as the ScaledObject.
    assert_eq!(
        at(&hpa, &["spec", "scaleTargetRef"]),
        at(&keda, &["spec", "scaleTargetRef"])
    );
    assert_eq!(
        at(&hpa, &["metadata", "namespace"]),
        at(&keda, &["metadata", "namespace"])
    );
    assert_eq!(
        int_at(&hpa, &["spec", "minReplicas"]),
        int_at(&keda, &["spec", "minReplicaCount"])
    );
    assert_eq!(
        int_at(&hpa, &["spec", "maxReplicas"]),
        int_at(&keda, &["spec", "maxReplicaCount"])
    );

    let metric = at(&hpa, &["spec", "metrics", "0"]);
    assert_eq!(str_at(metric, &["type"]), "External");
    assert_eq!(
        str_at(metric, &["external", "metric", "name"]),
        str_at(rule, &["name", "as"]),
        "the HPA reads the metric the adapter serves"
    );
    assert_eq!(
        str_at(metric, &["external", "target", "type"]),
        "AverageValue"
    );
    assert_eq!(str_at(metric, &["external", "target", "averageValue"]), "1");
    assert_eq!(
        str_at(
            metric,
            &["external", "metric", "selector", "matchLabels", "model"]
        ),
        MODEL
    );

    // The adapter serves the recorded ratio under a name without colons,
    // selected by the HPA's namespace.
    let series_query = str_at(rule, &["seriesQuery"]);
    assert!(
        series_query.starts_with("namespace_model:llmprobe_replicas_needed:ratio{"),
        "{series_query}"
    );
    assert!(!str_at(rule, &["name", "as"]).contains(':'));
    assert_eq!(
        str_at(rule, &["resources", "overrides", "namespace", "resource"]),
        "namespace"
    );
    assert_eq!(
        adapter_query(rule, &hpa),
        format!(
            "max(namespace_model:llmprobe_replicas_needed:ratio{{namespace=\"{NAMESPACE}\",model=\"{MODEL}\"}})"
        )
    );
}

/// Requests the stand-in pods take in per second, all told: vLLM counts
/// them as they finish (`vllm:request_success_total`), while their running
/// and waiting requests stay constant.
const ARRIVALS: f64 = 200.0;

/// What three vLLM pods of the model would serve on `/metrics` (only the
/// series the rules read, with the labels vLLM gives them), `since` the
/// pods started.
fn vllm_exposition(since: std::time::Instant) -> String {
    let finished = ARRIVALS * since.elapsed().as_secs_f64() / PODS.len() as f64;
    let mut text = String::from(
        "# HELP vllm:request_success_total Count of successfully processed requests.\n\
         # TYPE vllm:request_success_total counter\n",
    );
    for (pod, _, _) in PODS {
        text.push_str(&format!(
            "vllm:request_success_total{{engine=\"0\",finished_reason=\"stop\",model_name=\"{MODEL}\",pod=\"{pod}\"}} {finished}\n"
        ));
    }
    text.push_str(
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n\
         # TYPE vllm:num_requests_running gauge\n",
    );
    for (pod, running, _) in PODS {
        text.push_str(&format!(
            "vllm:num_requests_running{{engine=\"0\",model_name=\"{MODEL}\",pod=\"{pod}\"}} {running}\n"
        ));
    }
    text.push_str(
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n\
         # TYPE vllm:num_requests_waiting gauge\n",
    );
    for (pod, _, waiting) in PODS {
        text.push_str(&format!(
            "vllm:num_requests_waiting{{engine=\"0\",model_name=\"{MODEL}\",pod=\"{pod}\"}} {waiting}\n"
        ));
    }
    text
}

/// The one series `query` returns, once it returns one (bounded).
async fn one_series(prom: &Prometheus, query: &str) -> serde_json::Value {
    wait::poll(query, Duration::from_secs(150), || async {
        prom.process.assert_running();
        match prom.query(query).await {
            Ok(r) if r.len() == 1 => Ok(r[0].clone()),
            other => Err(format!("{query}: {other:?}\n{}", prom.process.tail())),
        }
    })
    .await
}

/// One simulated replica of the model, measured by llmprobe (it sheds above
/// 4 in flight, so the knee is 4 and the recommendation 3).
fn llmprobe_config() -> String {
    ConfigYaml {
        levels: "[1, 2, 4, 8]",
        slo: Some("{ p95_latency: 10s, max_shed_ratio: 0.05, max_error_ratio: 0.05 }"),
        more_defaults: "  headroom: 0.9",
        // The sustained rate once per loop (the rate recipe's rule reads
        // it); a generous dispatch-lag bound on two loaded cores.
        sustained: "{ every: 1000, max_duration: 20s, max_dispatch_lag: 250ms }",
        rest: &format!(
            r#"
targets:
  - name: qwen-canary
    model: {MODEL}
    simulator: {{ profile: tiny, max_in_flight: 4 }}
"#
        ),
        ..ConfigYaml::default()
    }
    .render()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autoscaling_queries_return_the_replicas_needed_on_a_real_prometheus() {
    let llmprobe = Daemon::start(write_config(&llmprobe_config())).await;
    let engine = support::server::serve(Router::new().route("/metrics", {
        let since = std::time::Instant::now();
        get(move || async move { vllm_exposition(since) })
    }))
    .await;

    let dir = ScratchDir::new("autoscaling");
    // The shipped rules, their 2-minute rate windows cut to 10 s: a rate
    // over a series younger than its window reads low (Prometheus divides
    // by the window), and this Prometheus lives for seconds.
    let rules = read("deploy/prometheus/recording.yml");
    assert!(rules.contains("[2m]"), "the arrival rate's window");
    std::fs::write(dir.join("recording.yml"), rules.replace("[2m]", "[10s]")).unwrap();
    let config = format!(
        r#"
global: {{scrape_interval: 1s, evaluation_interval: 1s}}
rule_files: [recording.yml]
scrape_configs:
  - job_name: llmprobe
    scrape_timeout: 1s
    static_configs:
      - targets: ["{llmprobe}"]
  - job_name: vllm
    scrape_timeout: 1s
    static_configs:
      - targets: ["{engine}"]
        labels: {{namespace: {NAMESPACE}}}
"#,
        llmprobe = llmprobe.addr,
        engine = engine.addr,
    );
    let prom = Prometheus::start(dir.path(), &config);
    prom.ready(Duration::from_secs(60)).await;

    let keda = yaml(KEDA);
    let keda_query = str_at(keda_trigger(&keda), &["metadata", "query"]).to_string();
    let values = yaml(ADAPTER);
    let adapter = adapter_query(adapter_rule(&values), &yaml(HPA));

    // Once llmprobe's first sweep is scraped and the rules evaluated: the
    // replicas the concurrency needs.
    let selector = format!("{{namespace=\"{NAMESPACE}\", model=\"{MODEL}\"}}");
    let by_concurrency =
        format!("namespace_model:llmprobe_replicas_needed_by_concurrency:ratio{selector}");
    let concurrency_needs = one_series(&prom, &by_concurrency).await;
    let value = |s: &serde_json::Value| -> f64 { s["value"][1].as_str().unwrap().parse().unwrap() };

    let recommended = prom
        .scalar(&format!(
            "llmprobe_recommended_max_in_flight{{model=\"{MODEL}\"}}"
        ))
        .await
        .expect("llmprobe's recommendation");
    assert_eq!(recommended, 3.0, "knee 4 x headroom 0.9, floored");
    let demand: u32 = PODS.iter().map(|(_, r, w)| r + w).sum();
    assert_eq!(demand, 11);
    let expected = f64::from(demand) / recommended;
    assert!(
        (value(&concurrency_needs) - expected).abs() < 1e-9,
        "{by_concurrency}: {concurrency_needs} should be {demand} / {recommended}"
    );
    assert_eq!(concurrency_needs["metric"]["model"], MODEL);
    assert_eq!(concurrency_needs["metric"]["namespace"], NAMESPACE);

    // Once the sustained rate is measured too: the replicas the arrivals
    // need, 200 req/s over what one replica sustains.
    let by_rate = format!("namespace_model:llmprobe_replicas_needed_by_rate:ratio{selector}");
    one_series(&prom, &by_rate).await;
    let sustained = prom
        .scalar(&format!(
            "model:llmprobe_capacity_sustained_requests_per_second:min{{model=\"{MODEL}\"}}"
        ))
        .await
        .expect("the sustained rate");
    // Once the pods' counters are older than the rate's window.
    let arriving = format!("namespace_model:vllm_requests_arriving:rate2m{selector}");
    let arrivals = wait::poll(&arriving, Duration::from_secs(60), || async {
        match prom.scalar(&arriving).await {
            Some(a) if (a / ARRIVALS - 1.0).abs() < 0.05 => Ok(a),
            other => Err(format!("{other:?} req/s, the pods take {ARRIVALS}")),
        }
    })
    .await;
    let rate_needs = value(&one_series(&prom, &by_rate).await);
    assert!(
        (rate_needs * sustained / arrivals - 1.0).abs() < 0.05,
        "{by_rate}: {rate_needs} should be {arrivals} / {sustained}"
    );

    // What KEDA and the HPA read: the larger of the two (the arrival rate
    // moves a little between evaluations, hence the tolerance).
    let larger = expected.max(rate_needs);
    let needed = one_series(&prom, &keda_query).await;
    assert!(
        (value(&needed) / larger - 1.0).abs() < 0.02,
        "KEDA's query: {needed} should be the larger of {expected} and {rate_needs}"
    );
    assert_eq!(needed["metric"]["model"], MODEL);
    assert_eq!(needed["metric"]["namespace"], NAMESPACE);
    let through_adapter = prom.query(&adapter).await.unwrap();
    assert_eq!(through_adapter.len(), 1, "{adapter}: {through_adapter:?}");
    assert!(
        (value(&through_adapter[0]) / larger - 1.0).abs() < 0.02,
        "{adapter}: {through_adapter:?}"
    );

    let documented = doc_queries();
    assert!(
        documented.len() >= 3,
        "{DOC} should show its queries in ```promql blocks"
    );
    // The sustained rate comes from a search that runs after the climb whose
    // knee the replicas query reads, so its series may land a while later.
    wait::poll(
        &format!("every query of {DOC} to return data"),
        Duration::from_secs(90),
        || async {
            let mut failures = Vec::new();
            for q in &documented {
                match prom.query(q).await {
                    Ok(r) if r.is_empty() => failures.push(format!("{q}: no data")),
                    Ok(_) => {}
                    Err(e) => failures.push(format!("{q}: {e}")),
                }
            }
            if failures.is_empty() {
                Ok(())
            } else {
                Err(failures.join("\n  "))
            }
        },
    )
    .await;

    drop(prom);
    drop(engine);
    llmprobe.stop().await;
}
