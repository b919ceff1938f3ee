//! Pins what operators and scripts read, byte for byte: the `/metrics` text
//! (through `Metrics` and the registry's encoding) and the `sweep` command's
//! table and JSON, for fixed hand-built results. A refactor that changes a
//! byte fails here; a deliberate change rewrites the golden files with
//! `PIN_UPDATE=1 cargo test --test pinned_output` and shows up in review as
//! a diff of `testdata/pinned/`.
//!
//! Left out of the pin: the `process_*` families and the reload timestamp
//! (they depend on the machine and the clock), and the crate version
//! (replaced by `<version>`, so that a release does not touch the goldens).

mod support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use llmprobe::metrics::Metrics;
use llmprobe::probe::setup::Setup;
use llmprobe::stats::decision::{Basis, Breach, Counts, Decision, LowerBounds, Verdict};
use llmprobe::stats::pair_report::{PairReport, SideSummary};
use llmprobe::stats::report::{
    Capacity, EarlyStop, FoundIn, LevelRole, LevelSummary, Limit, OutputLimit, Percentiles,
    SweepKind, SweepReport, WorkloadReport,
};
use llmprobe::stats::sample::{Outcome, Sample, TokenSource};
use llmprobe::stats::server::{GaugeStat, MetricsSource, ServerMetrics, ServerSignals};

/// Families whose value depends on the clock or the machine.
const UNPINNED_FAMILIES: [&str; 2] = [
    "process_",
    "llmprobe_config_last_reload_success_timestamp_seconds",
];

use support::reports::pct;

/// A level with `ok` successes and the given failures; latencies grow with
/// concurrency.
fn level(concurrency: u32, ok: u64, failures: &[(Outcome, u64, &str)]) -> LevelSummary {
    let c = f64::from(concurrency);
    let mut outcomes: BTreeMap<&'static str, u64> =
        Outcome::ALL.iter().map(|o| (o.as_str(), 0)).collect();
    outcomes.insert(Outcome::Ok.as_str(), ok);
    let mut error_examples = BTreeMap::new();
    let (mut shed, mut errors) = (0, 0);
    for (outcome, n, example) in failures {
        outcomes.insert(outcome.as_str(), *n);
        error_examples.insert(outcome.as_str(), example.to_string());
        if outcome.is_shed() {
            shed += n;
        } else {
            errors += n;
        }
    }
    let requests = ok + shed + errors;
    let n = ok as usize;
    let some = |v: f64| if n == 0 { None } else { Some(v) };
    let p = |base: f64| Percentiles {
        count: n,
        p50: some(base),
        p95: some(base * 1.75),
        p99: some(base * 2.5),
    };
    LevelSummary {
        client_lag: Some(llmprobe::stats::client::ClientLag {
            p99_seconds: 0.002,
            max_seconds: 0.004,
            ticks: 200,
        }),
        // The server's own figures: level 8 queued with its KV cache
        // nearly full; level 1 read nothing.
        server: Some(if concurrency == 1 {
            ServerSignals {
                readings: 0,
                note: Some("no read completed during the level (it ended first)".to_string()),
                ..ServerSignals::default()
            }
        } else {
            ServerSignals {
                readings: 4 * concurrency,
                running: Some(GaugeStat {
                    max: c.min(4.0),
                    mean: c.min(4.0) * 0.75,
                }),
                waiting: Some(GaugeStat {
                    max: (c - 4.0).max(0.0),
                    mean: (c - 4.0).max(0.0) * 0.5,
                }),
                kv_cache_usage_max: Some(0.125 * c),
                preemptions: Some(if concurrency == 8 { 3.0 } else { 0.0 }),
                prefix_cache_hits: Some(0.0),
                prefix_cache_queries: Some(120.0 * c),
                note: None,
            }
        }),
        concurrency,
        role: LevelRole::Configured,
        requests,
        // Level 8 stopped early: 6 of its 24 requests were never sent.
        planned_requests: requests + if concurrency == 8 { 6 } else { 0 },
        stopped_early: (concurrency == 8).then_some(EarlyStop {
            breach: Breach::Shed,
            saved_requests: 6,
        }),
        outcomes,
        shed_ratio: shed as f64 / requests as f64,
        error_ratio: errors as f64 / requests as f64,
        ttft_seconds: p(0.045 * c),
        answer_ttft_seconds: p(0.045 * c),
        reasoning_tokens: 0,
        reasoning_token_source: if ok == 0 { "none" } else { "chunks" },
        requests_without_answer: 0,
        reasoning_fields: Default::default(),
        latency_seconds: p(1.25 * c.sqrt()),
        inter_token_latency_seconds: Percentiles {
            count: n * 63,
            ..p(0.0125 * c.sqrt())
        },
        generation_tokens_per_second: p(80.0 / c.sqrt()),
        throughput_tokens_per_second: if ok == 0 { 0.0 } else { 51.2 * c.sqrt() },
        output_tokens: ok * 64,
        prompt_tokens: ok * 12,
        cached_prompt_tokens: 0,
        wall_seconds: 2.5 * c.sqrt(),
        token_source: if concurrency == 4 { "chunks" } else { "usage" },
        tokens_per_content_chunk: (concurrency != 4).then_some(1.0 + c / 10.0),
        streams_without_finish_reason: u64::from(concurrency == 2),
        error_examples,
        decision_latency_seconds: Percentiles {
            count: (ok + errors) as usize,
            ..p(1.25 * c.sqrt())
        },
        achieved_concurrency: c * 0.96,
        littles_law_concurrency: c * 0.9,
        kept_concurrency: true,
        new_connections: u64::from(concurrency == 1),
        connect_seconds: if concurrency == 1 {
            pct(1, 0.0015, 0.0015, 0.0015)
        } else {
            Percentiles::default()
        },
        usage_disagreements: u64::from(concurrency == 4),
        measured_at_unix_seconds: 0.0,
        verdict: Some(verdict(concurrency, ok, shed, errors)),
        within_slo: shed + errors == 0,
    }
}

/// A level's verdict from its counts: a pass when clean, else a break by
/// the shed or error ratio; level 4 pooled 8 earlier sweeps.
fn verdict(concurrency: u32, ok: u64, shed: u64, errors: u64) -> Verdict {
    let decision = if shed + errors == 0 {
        Decision::Pass
    } else {
        Decision::Break
    };
    let pooled = concurrency == 4;
    let requests = ok + shed + errors;
    Verdict {
        decision,
        decided_by: if shed > 0 {
            Some(Basis::Shed)
        } else if errors > 0 {
            Some(Basis::Errors)
        } else {
            None
        },
        requests: requests * if pooled { 9 } else { 1 },
        pooled_sweeps: if pooled { 8 } else { 0 },
        change_seen: false,
        confidence: 0.95,
        counted_as: decision,
        lower_bounds: LowerBounds {
            shed_ratio: if shed > 0 { 0.125 } else { 0.0 },
            error_ratio: if errors > 0 { 0.0625 } else { 0.0 },
            slow_ratio: 0.0,
        },
        counts: Counts {
            ended: requests,
            ok,
            shed,
            failed: errors,
            timed: ok + errors,
            slow: 0,
        },
    }
}

/// Two workloads on one target: one climbs to a shedding level, the other
/// stops at timeouts and errors.
fn good_report() -> SweepReport {
    SweepReport {
setup_error: None,
        server_metrics: ServerMetrics {
            source: MetricsSource::Found,
            url: Some("http://10.0.0.5:8000/metrics".to_string()),
            engine: Some("vllm".to_string()),
            note: None,
        },
        target: "worker-1".to_string(),
        kind: SweepKind::Full,
        model: "qwen2.5:7b".to_string(),
        success: true,
        error: None,
        duration_seconds: 42.125,
        finished_at_unix_seconds: 1_717_000_000.5,
        setup: Setup {
            server: "vllm".to_string(),
            server_version: "0.6.3".to_string(),
            models: vec!["qwen2.5:7b".to_string(), "llama3.1:8b".to_string()],
            model_listed: Some(true),
            reasoning_field: String::new(),
        },
        output_limit: OutputLimit {
            field: "max_tokens".to_string(),
            source: "detected".to_string(),
            note: Some(
                "with `max_completion_tokens`, the server sent 48 content chunks for a limit of 16 tokens"
                    .to_string(),
            ),
            kept_sweeps: 0,
            found_in: Some(FoundIn::WarmUp),
        },
        workloads: vec![
            WorkloadReport {
                workload: "short-chat".to_string(),
                skipped_levels: Vec::new(),
                carried_levels: Vec::new(),
                levels: vec![
                    level(1, 8, &[]),
                    level(2, 8, &[]),
                    level(4, 12, &[]),
                    level(
                        8,
                        18,
                        &[
                            (Outcome::Shed, 4, "HTTP 503: overloaded"),
                            (Outcome::RateLimited, 2, "HTTP 429: slow down"),
                        ],
                    ),
                ],
                capacity: Capacity {
                    limit: Some(Limit::KvCache),
                    knee_concurrency: 4,
                    throughput_tokens_per_second: 102.4,
                    requests_per_second: 2.4,
                    requests_per_second_samples: 12,
                    recommended_max_in_flight: 3,
                    saturation_concurrency: Some(4),
                    saturated_before_knee: true,
                    stopped_because: Some("concurrency 8: shed ratio 0.250 over 0.05".to_string()),
                    knee_is_lower_bound: false,
                    levels_not_measured: Vec::new(),
                    not_measured_client: None,
                    knee_carried_over: false,
                    knee_measured_at_unix_seconds: None,
                    sustained: Some(support::reports::sustained()),
                    knee_undecided: false,
                    health_changed_sweeps: None,
                },
            },
            WorkloadReport {
                workload: "long-documents".to_string(),
                skipped_levels: Vec::new(),
                carried_levels: Vec::new(),
                levels: vec![
                    level(1, 25, &[]),
                    level(
                        2,
                        20,
                        &[
                            (Outcome::Timeout, 3, "no answer within 120s"),
                            (Outcome::HttpError, 1, "HTTP 500: internal error"),
                            (
                                Outcome::ProtocolError,
                                1,
                                "stream ended without [DONE] after 12 content chunks",
                            ),
                        ],
                    ),
                ],
                capacity: Capacity {
                    limit: Some(Limit::Errors),
                    knee_concurrency: 1,
                    throughput_tokens_per_second: 51.2,
                    requests_per_second: 10.0,
                    requests_per_second_samples: 25,
                    recommended_max_in_flight: 1,
                    saturation_concurrency: None,
                    saturated_before_knee: false,
                    stopped_because: Some(
                        "concurrency 2: p95 latency 3.094s over 3s, error ratio 0.200 over 0.05"
                            .to_string(),
                    ),
                    knee_is_lower_bound: false,
                    levels_not_measured: Vec::new(),
                    not_measured_client: None,
                    knee_carried_over: false,
                    knee_measured_at_unix_seconds: None,
                    sustained: None,
                    knee_undecided: false,
                    health_changed_sweeps: None,
                },
            },
        ],
    }
}

/// A target whose sweep failed: the model is not listed, every request of
/// the only level failed to connect.
fn failed_report() -> SweepReport {
    SweepReport {
        setup_error: None,
        server_metrics: ServerMetrics {
            note: Some(
                "no server metrics: http://gw.example/metrics answered HTTP 404".to_string(),
            ),
            ..ServerMetrics::default()
        },
        target: "gateway \"eu\"".to_string(),
        kind: SweepKind::Full,
        model: "llama3.1:8b".to_string(),
        success: false,
        error: Some("no request could connect to the server".to_string()),
        duration_seconds: 3.0,
        finished_at_unix_seconds: 1_717_000_100.0,
        setup: Setup {
            server: String::new(),
            server_version: String::new(),
            models: vec!["other-model".to_string()],
            model_listed: Some(false),
            reasoning_field: String::new(),
        },
        output_limit: Default::default(),
        workloads: vec![WorkloadReport {
            workload: "short-chat".to_string(),
            skipped_levels: Vec::new(),
            carried_levels: Vec::new(),
            levels: vec![level(
                1,
                0,
                &[(Outcome::ConnectError, 8, "connection refused")],
            )],
            capacity: Capacity {
                limit: Some(Limit::Errors),
                knee_concurrency: 0,
                throughput_tokens_per_second: 0.0,
                requests_per_second: 0.0,
                requests_per_second_samples: 0,
                recommended_max_in_flight: 0,
                saturation_concurrency: None,
                saturated_before_knee: false,
                stopped_because: Some("concurrency 1: no request succeeded".to_string()),
                knee_is_lower_bound: false,
                levels_not_measured: Vec::new(),
                not_measured_client: None,
                knee_carried_over: false,
                knee_measured_at_unix_seconds: None,
                sustained: None,
                knee_undecided: false,
                health_changed_sweeps: None,
            },
        }],
    }
}

fn side(target: &str, ok: u64, failures: &[(Outcome, u64)], base: f64) -> SideSummary {
    let mut outcomes: BTreeMap<&'static str, u64> =
        Outcome::ALL.iter().map(|o| (o.as_str(), 0)).collect();
    outcomes.insert(Outcome::Ok.as_str(), ok);
    for (o, n) in failures {
        outcomes.insert(o.as_str(), *n);
    }
    let n = ok as usize;
    let (latency, ttft) = if n == 0 {
        (Percentiles::default(), Percentiles::default())
    } else {
        (
            pct(n, base, base * 1.5, base * 2.0),
            pct(n, base / 2.0, base * 0.75, base),
        )
    };
    SideSummary {
        target: target.to_string(),
        requests: ok + failures.iter().map(|(_, n)| n).sum::<u64>(),
        outcomes,
        latency_seconds: latency,
        ttft_seconds: ttft,
        first_error: failures
            .first()
            .map(|(o, _)| format!("{}: HTTP 502: bad gateway", o.as_str())),
    }
}

/// One measured pair, one that failed on its gateway side.
fn pair_reports() -> Vec<PairReport> {
    vec![
        PairReport {
            pair: "nginx".to_string(),
            workload: "short-chat".to_string(),
            concurrency: 2,
            success: true,
            error: None,
            direct: side("stub-direct", 40, &[], 0.00125),
            through: side("stub-nginx", 39, &[(Outcome::HttpError, 1)], 0.0013125),
            latency_overhead_seconds: pct(39, 0.0000625, 0.00009375, -0.000125),
            ttft_overhead_seconds: pct(39, 0.00003125, 0.000046875, 0.0000625),
            duration_seconds: 1.5,
            finished_at_unix_seconds: 1_717_000_200.0,
        },
        PairReport {
            pair: "litellm".to_string(),
            workload: "short-chat".to_string(),
            concurrency: 1,
            success: false,
            error: Some(
                "no request to `stub-litellm` succeeded (first failure: http_error: HTTP 502: bad gateway)"
                    .to_string(),
            ),
            direct: side("stub-direct", 20, &[], 0.00125),
            through: side("stub-litellm", 0, &[(Outcome::HttpError, 20)], 0.0),
            latency_overhead_seconds: Percentiles::default(),
            ttft_overhead_seconds: Percentiles::default(),
            duration_seconds: 0.75,
            finished_at_unix_seconds: 1_717_000_300.0,
        },
    ]
}

fn sample(outcome: Outcome, ttft_ms: u64, latency_ms: u64) -> Sample {
    if outcome != Outcome::Ok {
        return Sample::failed(outcome, Some(503), "failed");
    }
    Sample {
        outcome,
        status: Some(200),
        ttft: Some(Duration::from_millis(ttft_ms)),
        latency: Some(Duration::from_millis(latency_ms)),
        inter_token: vec![Duration::from_millis(12); 3],
        output_tokens: 64,
        token_source: TokenSource::Usage,
        prompt_tokens: Some(12),
        cached_prompt_tokens: None,
        content_chunks: 64,
        finish_reason_seen: true,
        error: None,
        elapsed: Duration::from_millis(latency_ms),
        connect: None,
        usage_disagreed: false,
        thinking: Default::default(),
    }
}

/// Everything `/metrics` shows after these results, minus the unpinned families.
fn metrics_text() -> String {
    let registry = prometheus::Registry::new();
    let metrics = Metrics::new(&registry).expect("metrics");
    let s = |a: &str, b: &str| (a.to_string(), b.to_string());

    let good = good_report();
    let failed = failed_report();
    for r in [&good, &failed] {
        metrics.target_started(&r.target);
        metrics.set_target_info(
            &r.target,
            &[
                s("model", &r.model),
                s("server", &r.setup.server),
                s("server_version", &r.setup.server_version),
                s("gpu", "L40S"),
                s("rack-id", "r12"),
            ],
        );
    }
    for (workload, ms) in [("short-chat", 40), ("long-documents", 900)] {
        for k in 1..=3 {
            metrics.observe_request(
                &good.target,
                &good.model,
                workload,
                &sample(Outcome::Ok, ms * k, ms * k * 20),
            );
        }
        for outcome in [Outcome::Shed, Outcome::Timeout, Outcome::Cancelled] {
            metrics.observe_request(&good.target, &good.model, workload, &sample(outcome, 0, 0));
        }
    }
    metrics.observe_request(
        &failed.target,
        &failed.model,
        "short-chat",
        &sample(Outcome::ConnectError, 0, 0),
    );
    metrics.sweep_postponed(&good.target);
    // The failed target had a good sweep before: its results stay exported.
    let mut earlier = good.clone();
    earlier.target = failed.target.clone();
    earlier.model = failed.model.clone();
    earlier.workloads.truncate(1);
    metrics.publish_sweep(&earlier);
    metrics.publish_sweep(&good);
    metrics.publish_sweep(&failed);
    for pair in pair_reports() {
        publish_pair(&metrics, &pair);
    }
    let _in_flight = metrics.request_in_flight();
    metrics.set_discovery_files(&[("/etc/llmprobe/targets/a.yaml".to_string(), 2, 1)]);
    metrics.discovery_read_failed("/etc/llmprobe/targets/a.yaml");
    metrics.set_discovery_refused(1);
    metrics.set_fleet(
        &[("worker-1", "static", 0), ("gateway \"eu\"", "file_sd", 1)],
        0,
        2,
        1,
    );

    let text = metrics.encode();
    let mut out = String::new();
    for line in text.lines() {
        let name = line
            .strip_prefix("# HELP ")
            .or_else(|| line.strip_prefix("# TYPE "))
            .unwrap_or(line);
        if UNPINNED_FAMILIES.iter().any(|f| name.starts_with(f)) {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    unversioned(&out)
}

/// The gateway pair's overhead, published as the daemon publishes it.
fn publish_pair(metrics: &Metrics, report: &PairReport) {
    metrics.publish_pair(report);
}

/// The crate version replaced by a placeholder.
fn unversioned(text: &str) -> String {
    let v = env!("CARGO_PKG_VERSION");
    text.replace(&format!("version=\"{v}\""), "version=\"<version>\"")
        .replace(
            &format!("\"llmprobe_version\": \"{v}\""),
            "\"llmprobe_version\": \"<version>\"",
        )
}

/// What `llmprobe sweep --format table` prints for these results.
fn sweep_table() -> String {
    let reports = [good_report(), failed_report()];
    format!(
        "{}{}",
        llmprobe::faces::text::table(&reports),
        llmprobe::faces::pairs::pairs_table(&pair_reports())
    )
}

/// What `llmprobe sweep --format json` prints for these results.
fn sweep_json() -> String {
    let reports = [good_report(), failed_report()];
    let json = llmprobe::faces::json::json_with_pairs(&reports, &pair_reports());
    unversioned(&format!("{json}\n"))
}

/// Compares `actual` with the golden file `name`, or rewrites it under
/// `PIN_UPDATE=1`.
fn pinned(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/pinned")
        .join(name);
    if std::env::var_os("PIN_UPDATE").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("create testdata/pinned");
        std::fs::write(&path, actual).expect("write golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run `PIN_UPDATE=1 cargo test --test pinned_output` to create it",
            path.display()
        )
    });
    if expected != actual {
        let first = expected
            .lines()
            .zip(actual.lines())
            .position(|(e, a)| e != a)
            .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
        panic!(
            "{} differs from the output, first at line {}:\n  pinned: {:?}\n  now:    {:?}\n\
             (a deliberate change: PIN_UPDATE=1 cargo test --test pinned_output)",
            path.display(),
            first + 1,
            expected.lines().nth(first),
            actual.lines().nth(first)
        );
    }
}

#[test]
fn metrics_text_is_pinned() {
    let text = metrics_text();
    // The fixture exercises what it means to pin.
    for needle in [
        "llmprobe_sweep_requests{",
        "outcome=\"timeout\"",
        "outcome=\"rate_limited\"",
        "llmprobe_gateway_overhead_seconds{",
        "llmprobe_gateway_overhead_samples{",
        "llmprobe_requests_total{",
        "llmprobe_request_ttft_seconds_bucket{",
        "llmprobe_target_info{",
        "llmprobe_fleet_target{",
        "llmprobe_sweep_success{target=\"gateway \\\"eu\\\"\"} 0",
    ] {
        assert!(text.contains(needle), "{needle} missing:\n{text}");
    }
    assert!(!text.contains("process_"), "unpinned families are left out");
    pinned("metrics.txt", &text);
}

#[test]
fn sweep_table_is_pinned() {
    let table = sweep_table();
    for needle in [
        "workload long-documents",
        "<- over SLO",
        "timeout, e.g.: no answer within 120s",
        "sweep failed: no request could connect",
        "WARNING: model not among those the server lists",
        "gateway overhead (through minus direct",
        "measurement failed: no request to `stub-litellm`",
    ] {
        assert!(table.contains(needle), "{needle} missing:\n{table}");
    }
    pinned("sweep_table.txt", &table);
}

#[test]
fn sweep_json_is_pinned() {
    let json = sweep_json();
    let doc: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(doc["targets"].as_array().map(Vec::len), Some(2));
    assert_eq!(doc["gateway_pairs"].as_array().map(Vec::len), Some(2));
    pinned("sweep.json", &json);
}
