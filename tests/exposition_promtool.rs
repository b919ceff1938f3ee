//! The whole exposition, with realistic content, passes the real
//! `promtool check metrics` (Debian's `prometheus` package) without a single
//! complaint. promtool missing is a failure, not a skip: CI installs it.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use llmprobe::metrics::Metrics;
use llmprobe::stats::decision::Breach;
use llmprobe::stats::pair_report::{PairReport, SideSummary};
use llmprobe::stats::probe::{Cold, ProbeEvent, ProbeOutcome, ProbeResult, Skip};
use llmprobe::stats::report::{
    Capacity, EarlyStop, LevelRole, LevelSummary, Limit, Percentiles, SweepKind, SweepReport,
    WorkloadReport,
};
use llmprobe::stats::sample::{Outcome, Sample, TokenSource};
use llmprobe::stats::server::{GaugeStat, ServerSignals};

fn pct(count: usize, base: f64) -> Percentiles {
    if count == 0 {
        return Percentiles::default();
    }
    Percentiles {
        count,
        p50: Some(base),
        p95: Some(base * 1.8),
        p99: Some(base * 2.5),
    }
}

/// A level whose latency and shedding grow with concurrency; at 16 every
/// request is shed, so it has no percentiles at all.
fn level(concurrency: u32, prompt_scale: f64) -> LevelSummary {
    let c = f64::from(concurrency);
    let requests = u64::from(concurrency * 3).max(8);
    let (shed, timeout) = match concurrency {
        16 => (requests, 0),
        8 => (4, 1),
        _ => (0, 0),
    };
    let ok = requests - shed - timeout;
    let mut outcomes = BTreeMap::new();
    outcomes.insert(Outcome::Ok.as_str(), ok);
    outcomes.insert(Outcome::Shed.as_str(), shed);
    outcomes.insert(Outcome::Timeout.as_str(), timeout);
    let n = ok as usize;
    LevelSummary {
        client_lag: Some(llmprobe::stats::client::ClientLag {
            p99_seconds: 0.002,
            max_seconds: 0.004,
            ticks: 200,
        }),
        // The engine's figures: four run, the rest wait.
        server: Some(ServerSignals {
            readings: 10,
            running: Some(GaugeStat {
                max: f64::from(concurrency.min(4)),
                mean: f64::from(concurrency.min(4)) * 0.8,
            }),
            waiting: Some(GaugeStat {
                max: f64::from(concurrency.saturating_sub(4)),
                mean: f64::from(concurrency.saturating_sub(4)) * 0.5,
            }),
            kv_cache_usage_max: Some(f64::from(concurrency.min(16)) / 16.0),
            preemptions: Some(f64::from(concurrency / 8)),
            ..ServerSignals::default()
        }),
        concurrency,
        // 12 sits between the configured 8 and 16: a refinement probe.
        role: if concurrency == 12 {
            LevelRole::Refinement
        } else {
            LevelRole::Configured
        },
        requests,
        planned_requests: requests + if concurrency == 16 { 30 } else { 0 },
        stopped_early: (concurrency == 16).then_some(EarlyStop {
            breach: Breach::Shed,
            saved_requests: 30,
        }),
        outcomes,
        shed_ratio: shed as f64 / requests as f64,
        error_ratio: timeout as f64 / requests as f64,
        ttft_seconds: pct(n, 0.08 * prompt_scale * c),
        answer_ttft_seconds: pct(n, 0.08 * prompt_scale * c),
        reasoning_tokens: 0,
        reasoning_token_source: "chunks",
        requests_without_answer: 0,
        reasoning_fields: Default::default(),
        latency_seconds: pct(n, 4.0 * c.sqrt()),
        inter_token_latency_seconds: pct(n * 255, 0.015 * c.sqrt()),
        generation_tokens_per_second: pct(n, 65.0 / c.sqrt()),
        throughput_tokens_per_second: if ok == 0 { 0.0 } else { 60.0 * c.sqrt() },
        output_tokens: ok * 256,
        prompt_tokens: ok * 40,
        cached_prompt_tokens: 0,
        wall_seconds: 12.5,
        token_source: "usage",
        tokens_per_content_chunk: None,
        streams_without_finish_reason: 0,
        error_examples: Default::default(),
        decision_latency_seconds: Default::default(),
        achieved_concurrency: f64::from(concurrency),
        littles_law_concurrency: f64::from(concurrency),
        kept_concurrency: true,
        new_connections: 0,
        connect_seconds: Default::default(),
        usage_disagreements: 0,
        measured_at_unix_seconds: 0.0,
        verdict: None,
        within_slo: concurrency < 8,
    }
}

fn report(target: &str, model: &str, success: bool) -> SweepReport {
    let workloads = [("short-chat", 1.0), ("long-documents", 12.0)]
        .into_iter()
        .map(|(name, scale)| WorkloadReport {
            workload: name.to_string(),
            levels: [1, 2, 4, 8, 12, 16]
                .iter()
                .map(|c| level(*c, scale))
                .collect(),
            skipped_levels: Vec::new(),
            carried_levels: Vec::new(),
            capacity: Capacity {
                limit: Some(Limit::Queue),
                knee_concurrency: 4,
                throughput_tokens_per_second: 120.0,
                requests_per_second: 1.6,
                requests_per_second_samples: 8,
                recommended_max_in_flight: 3,
                saturation_concurrency: (scale > 1.0).then_some(4),
                saturated_before_knee: scale > 1.0,
                stopped_because: Some("level 8: shed ratio 0.17 > 0.05".to_string()),
                knee_is_lower_bound: false,
                levels_not_measured: Vec::new(),
                not_measured_client: None,
                knee_carried_over: false,
                knee_measured_at_unix_seconds: None,
                sustained: Some(support::reports::sustained()),
                knee_undecided: false,
                health_changed_sweeps: None,
            },
        })
        .collect();
    SweepReport {
        setup_error: None,
        server_metrics: Default::default(),
        target: target.to_string(),
        kind: SweepKind::Full,
        model: model.to_string(),
        success,
        error: (!success).then(|| "sweep deadline exceeded".to_string()),
        duration_seconds: 312.5,
        finished_at_unix_seconds: 1_717_000_000.25,
        setup: Default::default(),
        output_limit: Default::default(),
        workloads,
    }
}

/// A gateway pair's measurement with these overheads.
fn pair_report(pair: &str, latency: Percentiles, ttft: Percentiles) -> PairReport {
    let side = |target: &str| SideSummary {
        target: target.to_string(),
        requests: 40,
        outcomes: BTreeMap::from([(Outcome::Ok.as_str(), 40)]),
        latency_seconds: pct(40, 0.001),
        ttft_seconds: pct(40, 0.0005),
        first_error: None,
    };
    PairReport {
        pair: pair.to_string(),
        workload: "short-chat".to_string(),
        concurrency: 1,
        success: true,
        error: None,
        direct: side("stub-direct"),
        through: side("stub-gateway"),
        latency_overhead_seconds: latency,
        ttft_overhead_seconds: ttft,
        duration_seconds: 2.0,
        finished_at_unix_seconds: 1_717_000_000.0,
    }
}

fn ok_sample(ms: u64) -> Sample {
    Sample {
        outcome: Outcome::Ok,
        status: Some(200),
        ttft: Some(Duration::from_millis(ms)),
        latency: Some(Duration::from_millis(ms * 30)),
        inter_token: vec![Duration::from_millis(15); 3],
        output_tokens: 256,
        token_source: TokenSource::Usage,
        prompt_tokens: Some(40),
        cached_prompt_tokens: None,
        content_chunks: 256,
        finish_reason_seen: true,
        error: None,
        elapsed: Duration::from_millis(ms * 30),
        connect: None,
        usage_disagreed: false,
        thinking: Default::default(),
    }
}

fn realistic_exposition() -> String {
    let metrics = Metrics::new(&Default::default()).expect("metrics");
    let s = |a: &str, b: &str| (a.to_string(), b.to_string());

    for (target, model) in [
        ("worker-1", "qwen2.5:7b"),
        ("gateway \"eu\"", "llama3.1:8b"),
    ] {
        metrics.publish_sweep(&report(target, model, true));
        metrics.set_target_info(
            target,
            &[
                s("model", model),
                s("server", "vllm"),
                s("server_version", "0.6.3"),
                s("gpu", "L40S"),
                s("rack-id", "r12"),
                s("9th floor", "yes"),
            ],
        );
        for workload in ["short-chat", "long-documents"] {
            for ms in [20, 80, 300, 1200] {
                metrics.observe_request(target, model, workload, &ok_sample(ms));
            }
            // A reasoning model's request: 200 tokens of thinking first.
            let mut thought = ok_sample(40);
            thought.thinking.chunks = 200;
            thought.thinking.answer_ttft = Some(Duration::from_millis(3040));
            thought.thinking.usage_tokens = Some(200);
            metrics.observe_request(target, model, workload, &thought);
            for outcome in [Outcome::Shed, Outcome::Timeout, Outcome::ProtocolError] {
                metrics.observe_request(
                    target,
                    model,
                    workload,
                    &Sample::failed(outcome, Some(503), "failed"),
                );
            }
        }
        metrics.sweep_postponed(target);
        // Probes between sweeps: served (one cold), one that thought
        // through its budget, one refused, one whose TTFT was the client's
        // stall, one skipped for a sweep.
        metrics.set_probe_interval(target, model, Some(30.0));
        let probe = |outcome, ttft: Option<f64>, cold| ProbeResult {
            outcome,
            ttft,
            latency: ttft.map(|t| t + 0.2),
            cold,
            client_stall: None,
            dispatch_lag: 0.001,
            prompt_tokens: 20,
            output_tokens: 16,
            reasoning_tokens: 0,
            error: None,
        };
        for event in [
            ProbeEvent::Probed(probe(ProbeOutcome::Request(Outcome::Ok), Some(0.04), None)),
            ProbeEvent::Probed(probe(
                ProbeOutcome::Request(Outcome::Ok),
                Some(71.0),
                Some(Cold::Idle),
            )),
            ProbeEvent::Probed(probe(ProbeOutcome::ReasoningBudget, Some(0.05), None)),
            ProbeEvent::Probed(probe(
                ProbeOutcome::Request(Outcome::ConnectError),
                None,
                None,
            )),
            ProbeEvent::Probed(ProbeResult {
                client_stall: Some(2.1),
                ..probe(ProbeOutcome::Request(Outcome::Ok), Some(2.4), None)
            }),
            ProbeEvent::Skipped(Skip::Sweeping),
            ProbeEvent::Paused(true),
        ] {
            metrics.observe_probe(target, model, &event);
        }
    }
    // The second target's latest sweep failed: old results stay, success 0.
    metrics.publish_sweep(&report("gateway \"eu\"", "llama3.1:8b", false));
    metrics.publish_pair(&pair_report("gateway", pct(40, 0.0021), pct(40, 0.0012)));
    metrics.config_reloaded(true);
    let _in_flight = metrics.request_in_flight();
    metrics.encode()
}

#[test]
fn promtool_check_metrics_finds_nothing_to_complain_about() {
    let text = realistic_exposition();
    // The content is what the test means to check.
    for family in [
        "llmprobe_sweep_ttft_seconds",
        "llmprobe_sweep_answer_ttft_seconds",
        "llmprobe_sweep_reasoning_tokens",
        "llmprobe_capacity_requests_per_second",
        "llmprobe_capacity_requests_per_second_samples",
        "llmprobe_request_answer_ttft_seconds_bucket",
        "llmprobe_reasoning_tokens_total",
        "quantity=\"answer_ttft\"",
        "llmprobe_sweep_samples",
        "llmprobe_sweep_requests",
        "llmprobe_capacity_saturation_concurrency",
        "llmprobe_target_info",
        "llmprobe_gateway_overhead_seconds",
        "llmprobe_request_duration_seconds_bucket",
        "llmprobe_requests_total",
        "llmprobe_build_info",
        "llmprobe_probe_requests_total",
        "llmprobe_probe_ttft_seconds_bucket",
        "llmprobe_probe_cold_ttft_seconds_bucket",
        "llmprobe_probe_tokens_total",
        "llmprobe_probe_skipped_total",
        "llmprobe_probe_client_stalled_total{model=\"qwen2.5:7b\",target=\"worker-1\"} 1",
        // The stalled one is not in the TTFT histogram: the fast ok and the
        // one that thought (the cold one is apart).
        "llmprobe_probe_ttft_seconds_count{model=\"qwen2.5:7b\",target=\"worker-1\"} 2",
        "outcome=\"reasoning_budget\"",
    ] {
        assert!(text.contains(family), "{family} missing from:\n{text}");
    }

    support::promtool::assert_metrics_clean(&text);
}
