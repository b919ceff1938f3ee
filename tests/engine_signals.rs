//! The engine's own signals and the limit that binds, end to end: the
//! simulator exports vLLM's names on its `/metrics`, a sweep finds them
//! beside `/v1`, reads them during each level, and names the limit of
//! each of four profiles built to reach one (queue, KV cache, compute,
//! shed). A metrics endpoint that hangs, sends 10 MB or garbage leaves the
//! sweep as it would be without it, with a note.

mod support;

use llmprobe::sim::{count_tokens, SimConfig, SimParams};
use llmprobe::stats::report::SweepReport;

const OUTPUT_TOKENS: u64 = 32;
const PROMPT: &str = "Summarise the benefits of a private AI server.";

fn yaml(sim: &str, levels: &str, slo_ms: u64, extra: &str) -> String {
    format!(
        r#"
listen: "127.0.0.1:0"
defaults:
  workload: w
  warmup_requests: 2
  levels: {levels}
  requests_per_level: 2x
  min_requests_per_level: 8
  server_metrics_period: 100ms
  sustained: {{ every: 0 }}
  slo: {{ p95_latency: {slo_ms}ms }}
workloads:
  w:
    max_completion_tokens: {OUTPUT_TOKENS}
    prompts: ["{PROMPT}"]
targets:
  - name: sim
    simulator: {sim}
{extra}"#
    )
}

fn limit(r: &SweepReport) -> &'static str {
    let c = &r.workloads[0].capacity;
    c.limit.expect("every knee carries a limit").as_str()
}

/// A summary for a failure message.
fn levels(r: &SweepReport) -> String {
    let w = &r.workloads[0];
    let mut out = format!(
        "server metrics {:?}; knee {} ({:?})\n",
        r.server_metrics, w.capacity.knee_concurrency, w.capacity.stopped_because
    );
    for l in &w.levels {
        out.push_str(&format!(
            "  c={} within={} p95={:?} shed={:.2} server={:?}\n",
            l.concurrency, l.within_slo, l.decision_latency_seconds.p95, l.shed_ratio, l.server
        ));
    }
    out
}

#[tokio::test]
async fn a_batch_cap_that_binds_is_a_queue() {
    // One sequence at a time: at 4, three wait; latency about 4x level 1's.
    let r = support::sweep::sweep_one(&yaml(
        "{ profile: tiny, step_base: 10ms, max_batch: 1, max_in_flight: 1000 }",
        "[1, 4]",
        700,
        "",
    ))
    .await;
    assert_eq!(
        r.server_metrics.engine.as_deref(),
        Some("vllm"),
        "{}",
        levels(&r)
    );
    assert_eq!(limit(&r), "queue", "{}", levels(&r));
    let top = r.workloads[0].levels[1].server.clone().unwrap();
    assert!(
        top.readings > 0 && top.running.unwrap().max <= 1.0,
        "{}",
        levels(&r)
    );
    assert!(top.waiting.unwrap().max >= 2.0, "{}", levels(&r));
}

#[tokio::test]
async fn a_full_kv_cache_is_named() {
    // The cache holds exactly two sequences: full from level 2 on, and at 8
    // the rest wait for room, not for the batch cap.
    let params: SimParams = SimConfig {
        profile: "tiny".into(),
        ..SimConfig::default()
    }
    .resolve()
    .unwrap();
    let marker = llmprobe::probe::body::marker(0);
    let prompt = count_tokens(&format!("{marker}{PROMPT}"));
    let kv = 2 * SimParams::reservation(prompt, OUTPUT_TOKENS);
    assert!(params.max_batch > 2);
    let r = support::sweep::sweep_one(&yaml(
        &format!(
            "{{ profile: tiny, step_base: 10ms, kv_cache_tokens: {kv}, max_in_flight: 1000 }}"
        ),
        "[1, 8]",
        900,
        "",
    ))
    .await;
    assert_eq!(limit(&r), "kv_cache", "{}", levels(&r));
    let top = r.workloads[0].levels[1].server.clone().unwrap();
    assert!(top.kv_cache_usage_max.unwrap() >= 0.9, "{}", levels(&r));
}

#[tokio::test]
async fn slower_steps_with_nothing_queued_is_compute() {
    // Every request runs; each step costs 20 ms per running sequence.
    let r = support::sweep::sweep_one(&yaml(
        "{ profile: tiny, step_per_sequence: 20ms, max_batch: 64, max_in_flight: 1000 }",
        "[1, 8]",
        1200,
        "",
    ))
    .await;
    assert_eq!(limit(&r), "compute", "{}", levels(&r));
    let top = r.workloads[0].levels[1].server.clone().unwrap();
    assert!(top.running.unwrap().max >= 7.0, "{}", levels(&r));
}

#[tokio::test]
async fn shedding_at_max_in_flight_is_shed() {
    let r = support::sweep::sweep_one(&yaml(
        "{ profile: tiny, max_batch: 64, max_in_flight: 2 }",
        "[1, 4]",
        5000,
        "",
    ))
    .await;
    assert_eq!(limit(&r), "shed", "{}", levels(&r));
    assert_eq!(r.workloads[0].capacity.knee_concurrency, 1);
}

#[tokio::test]
async fn metrics_turned_off_name_latency_only() {
    let r = support::sweep::sweep_one(&yaml(
        "{ profile: tiny, step_base: 10ms, max_batch: 1, max_in_flight: 1000 }",
        "[1, 4]",
        700,
        "    server_metrics_url: off\n",
    ))
    .await;
    assert_eq!(r.server_metrics.source.as_str(), "off");
    assert!(r.workloads[0].levels.iter().all(|l| l.server.is_none()));
    assert_eq!(limit(&r), "latency", "{}", levels(&r));
}

/// A sweep of the shedding profile whose metrics are read at `url`.
async fn with_metrics_at(url: &str) -> SweepReport {
    support::sweep::sweep_one(&yaml(
        "{ profile: tiny, max_batch: 64, max_in_flight: 2 }",
        "[1, 4]",
        5000,
        &format!("    server_metrics_url: {url}\n"),
    ))
    .await
}

fn assert_sweeps_normally(r: &SweepReport, what: &str) {
    assert!(r.success, "{what}: {:?}", r.error);
    assert_eq!(r.server_metrics.source.as_str(), "configured");
    let note = r.server_metrics.note.as_deref().unwrap_or("");
    assert!(!note.is_empty(), "{what}: a note says what went wrong");
    let w = &r.workloads[0];
    assert_eq!(w.capacity.knee_concurrency, 1, "{what}: {}", levels(r));
    assert_eq!(limit(r), "shed", "{what}: {}", levels(r));
    for l in &w.levels {
        let s = l.server.as_ref().expect("a configured endpoint is read");
        assert_eq!(s.readings, 0, "{what}");
        assert!(
            s.note.is_some(),
            "{what}: each level says why it read nothing"
        );
    }
}

#[tokio::test]
async fn a_hanging_metrics_endpoint_leaves_the_sweep_alone() {
    let hang = support::raw::start(|mut c| async move {
        if c.read_request().await.is_some() {
            // Headers never come.
            tokio::time::sleep(std::time::Duration::from_secs(600)).await;
        }
    })
    .await;
    let r = with_metrics_at(&format!("http://{}/metrics", hang.addr)).await;
    assert_sweeps_normally(&r, "hang");
    assert!(
        r.server_metrics
            .note
            .as_deref()
            .unwrap()
            .contains("did not answer within"),
        "{:?}",
        r.server_metrics
    );
}

#[tokio::test]
async fn ten_megabytes_of_metrics_are_not_read() {
    let line = "vllm:num_requests_running{model_name=\"m\"} 1\n";
    let body = line.repeat((10 << 20) / line.len());
    let big = support::raw::fixed(support::raw::response(
        "200 OK",
        &[("content-type", "text/plain")],
        &body,
    ))
    .await;
    let r = with_metrics_at(&format!("http://{}/metrics", big.addr)).await;
    assert_sweeps_normally(&r, "10 MB");
    assert!(
        r.server_metrics
            .note
            .as_deref()
            .unwrap()
            .contains("more than 2 MB"),
        "{:?}",
        r.server_metrics
    );
}

#[tokio::test]
async fn garbage_metrics_are_no_engine() {
    let garbage = support::raw::fixed(support::raw::response(
        "200 OK",
        &[("content-type", "text/plain")],
        "\u{0}{{{{ vllm:num_requests_running\n<html>not metrics</html>\nnum_requests_running{{\"\n",
    ))
    .await;
    let r = with_metrics_at(&format!("http://{}/metrics", garbage.addr)).await;
    assert_sweeps_normally(&r, "garbage");
    assert!(
        r.server_metrics
            .note
            .as_deref()
            .unwrap()
            .contains("holds none of the metrics"),
        "{:?}",
        r.server_metrics
    );
}
