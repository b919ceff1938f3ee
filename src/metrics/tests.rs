//! Unit tests of [`Metrics`] through its public methods and the text it encodes.

use std::collections::BTreeMap;
use std::sync::Arc;

use prometheus::Registry;

use super::results::sanitize_label_name;
use super::*;
use crate::stats::pair_report::PairReport;
use crate::stats::pair_report::SideSummary;
use crate::stats::report::{Capacity, LevelSummary, WorkloadReport};
use crate::stats::report::{Percentiles, SweepReport};
use crate::stats::sample::TokenSource;
use crate::stats::sample::{Outcome, Sample};
use std::time::Duration;

type Series = (String, BTreeMap<String, String>, f64);

/// Parses the exposition text into (name, labels, value), unescaping values.
fn parse(text: &str) -> Vec<Series> {
    let mut out = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (series, value) = line.rsplit_once(' ').expect("sample line");
        let value: f64 = value.parse().expect("value");
        let (name, mut rest) = match series.split_once('{') {
            Some((n, r)) => (n.to_string(), r),
            None => (series.to_string(), ""),
        };
        let mut labels = BTreeMap::new();
        while let Some((lname, r)) = rest.split_once("=\"") {
            let mut v = String::new();
            let mut chars = r.char_indices();
            let mut end = r.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => match chars.next() {
                        Some((_, 'n')) => v.push('\n'),
                        Some((_, c)) => v.push(c),
                        None => {}
                    },
                    '"' => {
                        end = i;
                        break;
                    }
                    c => v.push(c),
                }
            }
            labels.insert(lname.trim_start_matches(',').to_string(), v);
            rest = &r[end + 1..];
        }
        out.push((name, labels, value));
    }
    out
}

/// Value of the series with exactly these labels.
fn get(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let want: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    parse(text)
        .into_iter()
        .find(|(n, l, _)| n == name && *l == want)
        .map(|(_, _, v)| v)
}

/// Number of series of `name` whose labels include `labels`.
fn count(text: &str, name: &str, labels: &[(&str, &str)]) -> usize {
    parse(text)
        .into_iter()
        .filter(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .count()
}

fn pct(count: usize, base: f64) -> Percentiles {
    Percentiles {
        count,
        p50: Some(base),
        p95: Some(base * 2.0),
        p99: Some(base * 3.0),
    }
}

fn level(concurrency: u32) -> LevelSummary {
    let c = f64::from(concurrency);
    let mut outcomes = BTreeMap::new();
    outcomes.insert("ok", 10);
    outcomes.insert("shed", 2);
    LevelSummary {
        server: None,
        client_lag: None,
        concurrency,
        role: Default::default(),
        requests: 12,
        planned_requests: 12,
        stopped_early: None,
        outcomes,
        shed_ratio: 2.0 / 12.0,
        error_ratio: 0.0,
        ttft_seconds: pct(10, 0.1 * c),
        answer_ttft_seconds: pct(10, 0.1 * c),
        reasoning_tokens: 0,
        reasoning_token_source: "chunks",
        requests_without_answer: 0,
        reasoning_fields: Default::default(),
        latency_seconds: pct(10, 2.0 * c),
        inter_token_latency_seconds: pct(500, 0.01 * c),
        generation_tokens_per_second: pct(10, 50.0 / c),
        throughput_tokens_per_second: 40.0 * c,
        output_tokens: 2560,
        prompt_tokens: 300,
        cached_prompt_tokens: 0,
        wall_seconds: 10.0,
        token_source: "usage",
        tokens_per_content_chunk: None,
        streams_without_finish_reason: 0,
        error_examples: Default::default(),
        decision_latency_seconds: pct(12, 2.0 * c),
        achieved_concurrency: c,
        littles_law_concurrency: c,
        kept_concurrency: true,
        new_connections: 0,
        connect_seconds: Default::default(),
        usage_disagreements: 0,
        measured_at_unix_seconds: 0.0,
        verdict: None,
        within_slo: true,
    }
}

fn workload(name: &str, levels: &[u32]) -> WorkloadReport {
    WorkloadReport {
        workload: name.to_string(),
        levels: levels.iter().map(|c| level(*c)).collect(),
        skipped_levels: Vec::new(),
        carried_levels: Vec::new(),
        capacity: Capacity {
            limit: None,
            knee_concurrency: levels.last().copied().unwrap_or(0),
            throughput_tokens_per_second: 123.0,
            requests_per_second: 2.5,
            requests_per_second_samples: 10,
            recommended_max_in_flight: 3,
            saturation_concurrency: Some(4),
            saturated_before_knee: false,
            stopped_because: None,
            knee_is_lower_bound: true,
            ..Default::default()
        },
    }
}

fn report(target: &str, workloads: Vec<WorkloadReport>) -> SweepReport {
    SweepReport {
        setup_error: None,
        server_metrics: Default::default(),
        target: target.to_string(),
        kind: Default::default(),
        model: "qwen".to_string(),
        success: true,
        error: None,
        duration_seconds: 60.0,
        finished_at_unix_seconds: 1_700_000_000.0,
        setup: Default::default(),
        output_limit: Default::default(),
        workloads,
    }
}

fn pair_report(pair: &str, latency: Percentiles, ttft: Percentiles) -> PairReport {
    let side = |target: &str| SideSummary {
        target: target.to_string(),
        requests: 30,
        outcomes: BTreeMap::new(),
        latency_seconds: pct(30, 0.001),
        ttft_seconds: pct(30, 0.0005),
        first_error: None,
    };
    PairReport {
        pair: pair.to_string(),
        workload: "chat".to_string(),
        concurrency: 1,
        success: true,
        error: None,
        direct: side("direct"),
        through: side("through"),
        latency_overhead_seconds: latency,
        ttft_overhead_seconds: ttft,
        duration_seconds: 1.0,
        finished_at_unix_seconds: 1_700_000_000.0,
    }
}

fn ok_sample() -> Sample {
    Sample {
        outcome: Outcome::Ok,
        status: Some(200),
        ttft: Some(Duration::from_millis(120)),
        latency: Some(Duration::from_millis(1500)),
        inter_token: vec![Duration::from_millis(10)],
        output_tokens: 100,
        token_source: TokenSource::Usage,
        prompt_tokens: Some(40),
        cached_prompt_tokens: None,
        content_chunks: 100,
        finish_reason_seen: true,
        error: None,
        elapsed: Duration::from_millis(1500),
        connect: None,
        usage_disagreed: false,
        thinking: Default::default(),
    }
}

fn metrics() -> Metrics {
    Metrics::new(&Registry::new()).expect("metrics")
}

const W1C1: [(&str, &str); 4] = [
    ("target", "w1"),
    ("model", "qwen"),
    ("workload", "chat"),
    ("concurrency", "1"),
];

fn with<'a>(base: &[(&'a str, &'a str)], more: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    base.iter().chain(more).copied().collect()
}

#[test]
fn answer_ttft_and_reasoning_tokens_are_exported_per_level() {
    let m = metrics();
    let mut w = workload("chat", &[1]);
    w.levels[0].answer_ttft_seconds = pct(8, 0.9);
    w.levels[0].reasoning_tokens = 2400;
    m.publish_sweep(&report("w1", vec![w]));
    let text = m.encode();
    assert_eq!(
        get(
            &text,
            "llmprobe_sweep_answer_ttft_seconds",
            &with(&W1C1, &[("percentile", "50")])
        ),
        Some(0.9)
    );
    assert_eq!(
        get(
            &text,
            "llmprobe_sweep_samples",
            &with(&W1C1, &[("quantity", "answer_ttft")])
        ),
        Some(8.0)
    );
    assert_eq!(
        get(&text, "llmprobe_sweep_reasoning_tokens", &W1C1),
        Some(2400.0)
    );
    assert_eq!(
        get(
            &text,
            "llmprobe_sweep_ttft_seconds",
            &with(&W1C1, &[("percentile", "50")])
        ),
        Some(0.1),
        "TTFT stays the first token's"
    );
}

#[test]
fn sweep_values_appear_with_their_labels() {
    let m = metrics();
    m.publish_sweep(&report("w1", vec![workload("chat", &[1, 2, 4])]));
    let text = m.encode();

    let ttft = |c: &str, p: &str| {
        get(
            &text,
            "llmprobe_sweep_ttft_seconds",
            &[
                ("target", "w1"),
                ("model", "qwen"),
                ("workload", "chat"),
                ("concurrency", c),
                ("percentile", p),
            ],
        )
    };
    assert_eq!(ttft("1", "50"), Some(0.1));
    assert_eq!(ttft("2", "95"), Some(0.4));
    assert_eq!(ttft("4", "99"), Some(1.2000000000000002));
    assert_eq!(
        get(
            &text,
            "llmprobe_sweep_latency_seconds",
            &with(&W1C1, &[("percentile", "95")])
        ),
        Some(4.0)
    );
    assert_eq!(
        get(
            &text,
            "llmprobe_sweep_generation_tokens_per_second",
            &with(&W1C1, &[("percentile", "50")])
        ),
        Some(50.0)
    );
    assert_eq!(
        get(
            &text,
            "llmprobe_sweep_inter_token_latency_seconds",
            &with(&W1C1, &[("percentile", "50")])
        ),
        Some(0.01)
    );
    assert_eq!(
        get(
            &text,
            "llmprobe_sweep_samples",
            &with(&W1C1, &[("quantity", "inter_token_latency")])
        ),
        Some(500.0)
    );
    assert_eq!(
        get(
            &text,
            "llmprobe_sweep_samples",
            &with(&W1C1, &[("quantity", "generation_speed")])
        ),
        Some(10.0)
    );
    assert_eq!(
        get(&text, "llmprobe_sweep_throughput_tokens_per_second", &W1C1),
        Some(40.0)
    );
    assert_eq!(
        get(&text, "llmprobe_sweep_shed_ratio", &W1C1),
        Some(2.0 / 12.0)
    );
    assert_eq!(get(&text, "llmprobe_sweep_error_ratio", &W1C1), Some(0.0));
    assert_eq!(
        get(
            &text,
            "llmprobe_sweep_requests",
            &with(&W1C1, &[("outcome", "shed")])
        ),
        Some(2.0)
    );
    assert_eq!(
        get(
            &text,
            "llmprobe_sweep_requests",
            &with(&W1C1, &[("outcome", "timeout")])
        ),
        Some(0.0),
        "every outcome is exported, zeros included"
    );
    assert_eq!(count(&text, "llmprobe_sweep_requests", &W1C1), 9);

    let wl = [("target", "w1"), ("model", "qwen"), ("workload", "chat")];
    assert_eq!(
        get(&text, "llmprobe_capacity_knee_concurrency", &wl),
        Some(4.0)
    );
    assert_eq!(
        get(&text, "llmprobe_capacity_throughput_tokens_per_second", &wl),
        Some(123.0)
    );
    assert_eq!(
        get(&text, "llmprobe_capacity_requests_per_second", &wl),
        Some(2.5)
    );
    assert_eq!(
        get(&text, "llmprobe_capacity_requests_per_second_samples", &wl),
        Some(10.0)
    );
    assert_eq!(
        get(&text, "llmprobe_recommended_max_in_flight", &wl),
        Some(3.0)
    );
    assert_eq!(
        get(&text, "llmprobe_capacity_saturation_concurrency", &wl),
        Some(4.0)
    );
    let t = [("target", "w1")];
    assert_eq!(get(&text, "llmprobe_sweep_success", &t), Some(1.0));
    assert_eq!(
        get(&text, "llmprobe_sweep_duration_seconds", &t),
        Some(60.0)
    );
    assert_eq!(
        get(
            &text,
            "llmprobe_sweep_last_completion_timestamp_seconds",
            &t
        ),
        Some(1_700_000_000.0)
    );
    assert_eq!(
        get(
            &text,
            "llmprobe_sweeps_total",
            &[("target", "w1"), ("result", "ok"), ("kind", "full")]
        ),
        Some(1.0)
    );
    assert_eq!(
        get(
            &text,
            "llmprobe_sweeps_total",
            &[("target", "w1"), ("result", "failed"), ("kind", "full")]
        ),
        Some(0.0)
    );
    for family in [
        "llmprobe_sweep_ttft_seconds",
        "llmprobe_sweep_samples",
        "llmprobe_sweep_requests",
        "llmprobe_capacity_knee_concurrency",
        "llmprobe_sweep_success",
    ] {
        assert!(
            text.contains(&format!("# HELP {family} ")),
            "{family} has HELP"
        );
        assert!(
            text.contains(&format!("# TYPE {family} gauge")),
            "{family} is a gauge"
        );
    }
}

#[test]
fn a_new_report_replaces_the_old_one_as_a_whole() {
    let m = metrics();
    m.publish_sweep(&report(
        "w1",
        vec![workload("chat", &[1, 2, 4, 8]), workload("docs", &[1, 2])],
    ));
    m.publish_sweep(&report("w2", vec![workload("chat", &[1])]));
    let before = m.encode();
    assert_eq!(
        count(&before, "llmprobe_sweep_ttft_seconds", &[("target", "w1")]),
        18
    );

    let mut second = report("w1", vec![workload("chat", &[1, 2])]);
    second.workloads[0].capacity.saturation_concurrency = None;
    second.finished_at_unix_seconds = 1_700_000_900.0;
    m.publish_sweep(&second);
    let text = m.encode();

    let w1 = [("target", "w1")];
    assert_eq!(count(&text, "llmprobe_sweep_ttft_seconds", &w1), 6);
    assert_eq!(
        count(
            &text,
            "llmprobe_sweep_latency_seconds",
            &[("target", "w1"), ("concurrency", "8")]
        ),
        0
    );
    for family in [
        "llmprobe_sweep_requests",
        "llmprobe_sweep_samples",
        "llmprobe_sweep_throughput_tokens_per_second",
        "llmprobe_capacity_knee_concurrency",
        "llmprobe_recommended_max_in_flight",
    ] {
        assert_eq!(
            count(&text, family, &[("target", "w1"), ("workload", "docs")]),
            0,
            "{family}: workload docs is gone"
        );
    }
    assert_eq!(
        count(&text, "llmprobe_capacity_saturation_concurrency", &w1),
        0
    );
    assert_eq!(
        get(
            &text,
            "llmprobe_sweep_last_completion_timestamp_seconds",
            &w1
        ),
        Some(1_700_000_900.0)
    );
    assert_eq!(
        get(
            &text,
            "llmprobe_sweeps_total",
            &[("target", "w1"), ("result", "ok"), ("kind", "full")]
        ),
        Some(2.0)
    );
    // The other target is untouched.
    assert_eq!(
        count(&text, "llmprobe_sweep_ttft_seconds", &[("target", "w2")]),
        3
    );
}

#[test]
fn a_target_is_rendered_again_only_after_a_change_of_its_own() {
    let m = metrics();
    m.publish_sweep(&report("w1", vec![workload("chat", &[1, 2])]));
    let first = m.results.piece("w1").expect("w1 rendered");
    let text = m.results.text();
    assert_eq!(text, m.results.text(), "a scrape changes nothing");
    m.publish_sweep(&report("w2", vec![workload("chat", &[1])]));
    m.publish_pair(&pair_report("gw", pct(30, 0.002), Percentiles::default()));
    let still = m.results.piece("w1").expect("w1 kept");
    assert!(Arc::ptr_eq(&first, &still), "w1 did not change");
    let both = m.results.text();
    assert!(both.contains("llmprobe_gateway_overhead_seconds{"));
    assert_eq!(count(&both, "llmprobe_sweep_success", &[]), 2);
    m.publish_sweep(&report("w1", vec![workload("chat", &[1, 2])]));
    let again = m.results.piece("w1").expect("w1 rendered again");
    assert!(!Arc::ptr_eq(&first, &again));
    m.forget_pair("gw");
    assert!(!m.encode().contains("llmprobe_gateway_overhead_seconds{"));
}

#[test]
fn a_failed_sweep_keeps_the_last_results_and_reports_failure() {
    let m = metrics();
    m.publish_sweep(&report("w1", vec![workload("chat", &[1, 2])]));
    let mut failed = report("w1", vec![workload("chat", &[1])]);
    failed.success = false;
    failed.error = Some("connection refused".to_string());
    failed.duration_seconds = 5.0;
    failed.finished_at_unix_seconds = 1_700_009_999.0;
    failed.workloads[0].capacity.knee_concurrency = 0;
    m.publish_sweep(&failed);
    let text = m.encode();

    let t = [("target", "w1")];
    assert_eq!(get(&text, "llmprobe_sweep_success", &t), Some(0.0));
    assert_eq!(get(&text, "llmprobe_sweep_duration_seconds", &t), Some(5.0));
    assert_eq!(
        get(
            &text,
            "llmprobe_sweep_last_completion_timestamp_seconds",
            &t
        ),
        Some(1_700_000_000.0)
    );
    assert_eq!(count(&text, "llmprobe_sweep_ttft_seconds", &t), 6);
    assert_eq!(
        get(
            &text,
            "llmprobe_capacity_knee_concurrency",
            &[("target", "w1"), ("model", "qwen"), ("workload", "chat")]
        ),
        Some(2.0)
    );
    assert_eq!(
        get(
            &text,
            "llmprobe_sweeps_total",
            &[("target", "w1"), ("result", "failed"), ("kind", "full")]
        ),
        Some(1.0)
    );
    assert!(
        !text.contains("connection refused"),
        "errors never become labels"
    );
}

#[test]
fn a_setup_error_is_a_failed_sweep_with_its_cause_until_a_sweep_succeeds() {
    use crate::stats::setup_error::{Cause, SetupError};
    let m = metrics();
    m.publish_sweep(&report("w1", vec![workload("chat", &[1, 2])]));
    let mut stopped = report("w1", Vec::new());
    stopped.success = false;
    stopped.setup_error = Some(SetupError {
        cause: Cause::Key,
        message: "setup error (key): the server refused the API key".to_string(),
    });
    stopped.error = stopped.setup_error.as_ref().map(|e| e.message.clone());
    m.publish_sweep(&stopped);
    let text = m.encode();
    let t = [("target", "w1")];
    let key = [("target", "w1"), ("cause", "key")];
    assert_eq!(get(&text, "llmprobe_sweep_success", &t), Some(0.0));
    assert_eq!(get(&text, "llmprobe_target_setup_error", &key), Some(1.0));
    assert_eq!(count(&text, "llmprobe_target_setup_error", &[]), 1);
    let result = |r| [("target", "w1"), ("result", r), ("kind", "full")];
    assert_eq!(
        get(&text, "llmprobe_sweeps_total", &result("setup_error")),
        Some(1.0)
    );
    assert_eq!(
        get(&text, "llmprobe_sweeps_total", &result("failed")),
        Some(0.0)
    );
    // The last good knee stays, with its completion time (its age).
    let w = [("target", "w1"), ("model", "qwen"), ("workload", "chat")];
    assert_eq!(
        get(&text, "llmprobe_capacity_knee_concurrency", &w),
        Some(2.0)
    );

    m.publish_sweep(&report("w1", vec![workload("chat", &[1, 2])]));
    let text = m.encode();
    assert_eq!(count(&text, "llmprobe_target_setup_error", &[]), 0);
    assert_eq!(get(&text, "llmprobe_sweep_success", &t), Some(1.0));
}

#[test]
fn a_failed_first_sweep_exports_only_success_and_duration() {
    let m = metrics();
    let mut failed = report("w1", vec![workload("chat", &[1])]);
    failed.success = false;
    m.publish_sweep(&failed);
    let text = m.encode();
    assert_eq!(
        get(&text, "llmprobe_sweep_success", &[("target", "w1")]),
        Some(0.0)
    );
    assert_eq!(
        count(
            &text,
            "llmprobe_sweep_last_completion_timestamp_seconds",
            &[]
        ),
        0
    );
    assert_eq!(count(&text, "llmprobe_sweep_ttft_seconds", &[]), 0);
    assert_eq!(count(&text, "llmprobe_capacity_knee_concurrency", &[]), 0);
}

#[test]
fn forget_target_removes_every_series_of_the_target() {
    let m = metrics();
    for target in ["w1", "w2"] {
        m.publish_sweep(&report(target, vec![workload("chat", &[1, 2])]));
        m.observe_request(target, "qwen", "chat", &ok_sample());
        m.observe_request(
            target,
            "qwen",
            "chat",
            &Sample::failed(Outcome::Shed, Some(503), "busy"),
        );
        m.set_target_info(target, &[("gpu".to_string(), "L40S".to_string())]);
        m.sweep_postponed(target);
        m.set_target_limits(target, &limits());
    }
    m.forget_target("w1");
    let text = m.encode();

    let leftovers: Vec<String> = parse(&text)
        .into_iter()
        .filter(|(_, l, _)| l.get("target").map(String::as_str) == Some("w1"))
        .map(|(n, l, _)| format!("{n}{l:?}"))
        .collect();
    assert!(leftovers.is_empty(), "left over: {leftovers:?}");
    assert_eq!(
        count(&text, "llmprobe_sweep_ttft_seconds", &[("target", "w2")]),
        6
    );
    assert_eq!(
        count(&text, "llmprobe_requests_total", &[("target", "w2")]),
        9
    );
    assert_eq!(count(&text, "llmprobe_target_info", &[("target", "w2")]), 1);
    assert_eq!(
        get(
            &text,
            "llmprobe_target_slo_p95_latency_seconds",
            &[("target", "w2")]
        ),
        Some(30.0)
    );
    assert_eq!(
        count(
            &text,
            "llmprobe_sweeps_postponed_total",
            &[("target", "w2")]
        ),
        1
    );

    // A target added again starts from zero.
    m.observe_request("w1", "qwen", "chat", &ok_sample());
    let text = m.encode();
    let ok = [
        ("target", "w1"),
        ("model", "qwen"),
        ("workload", "chat"),
        ("outcome", "ok"),
    ];
    assert_eq!(get(&text, "llmprobe_requests_total", &ok), Some(1.0));
}

fn limits() -> TargetLimits {
    TargetLimits {
        p95_latency: Duration::from_secs(30),
        max_shed_ratio: 0.05,
        max_error_ratio: 0.01,
        interval: Duration::from_secs(900),
    }
}

#[test]
fn every_exported_family_is_named_in_names_rs() {
    let m = metrics();
    m.target_started("w1");
    m.publish_sweep(&report("w1", vec![workload("chat", &[1, 2])]));
    m.observe_request("w1", "qwen", "chat", &ok_sample());
    m.set_target_info("w1", &[]);
    m.set_target_limits("w1", &limits());
    m.publish_pair(&pair_report("gw", pct(4, 0.1), pct(4, 0.01)));
    m.discovery_read_failed("a.yaml");
    m.set_discovery_files(&[("a.yaml".to_string(), 1, 0)]);
    m.set_fleet(&[("w1", "static", 0)], 0, 1, 1);
    let _in_flight = m.request_in_flight();
    let text = m.encode();

    let names = [
        include_str!("names.rs"),
        include_str!("names/client.rs"),
        include_str!("names/fleet.rs"),
        include_str!("names/probe.rs"),
        include_str!("names/sustained.rs"),
        include_str!("names/bounds.rs"),
    ]
    .concat();
    let families: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .filter(|n| n.starts_with("llmprobe_"))
        .collect();
    for family in [
        "llmprobe_target_slo_p95_latency_seconds",
        "llmprobe_schedule_interval_seconds",
        "llmprobe_fleet_target",
        "llmprobe_file_sd_read_errors_total",
        "llmprobe_sweep_success",
        "llmprobe_requests_total",
    ] {
        assert!(families.contains(&family), "{family} not exported:\n{text}");
    }
    // The quantities' families are named in their list.
    let quantities = include_str!("../stats/quantity.rs");
    let unnamed: Vec<&&str> = families
        .iter()
        .filter(|f| {
            !names.contains(&format!("name: \"{f}\""))
                && !quantities.contains(&format!("metric: \"{f}\""))
        })
        .collect();
    assert!(
        unnamed.is_empty(),
        "not in names.rs nor stats/quantity.rs: {unnamed:?}"
    );
}

#[test]
fn a_percentile_without_samples_is_omitted() {
    let m = metrics();
    let mut r = report("w1", vec![workload("chat", &[1])]);
    let l = &mut r.workloads[0].levels[0];
    l.ttft_seconds = Percentiles::default();
    l.generation_tokens_per_second = Percentiles {
        count: 1,
        p50: Some(7.0),
        p95: None,
        p99: None,
    };
    m.publish_sweep(&r);
    let text = m.encode();
    assert_eq!(count(&text, "llmprobe_sweep_ttft_seconds", &[]), 0);
    assert_eq!(
        get(
            &text,
            "llmprobe_sweep_samples",
            &with(&W1C1, &[("quantity", "ttft")])
        ),
        Some(0.0)
    );
    assert_eq!(
        count(&text, "llmprobe_sweep_generation_tokens_per_second", &[]),
        1
    );
    assert_eq!(
        get(
            &text,
            "llmprobe_sweep_generation_tokens_per_second",
            &with(&W1C1, &[("percentile", "50")])
        ),
        Some(7.0)
    );
    assert_eq!(count(&text, "llmprobe_sweep_latency_seconds", &[]), 3);
}

#[test]
fn requests_count_by_outcome_and_only_ok_ones_feed_latency() {
    let m = metrics();
    m.observe_request("w1", "qwen", "chat", &ok_sample());
    m.observe_request(
        "w1",
        "qwen",
        "chat",
        &Sample::failed(Outcome::Timeout, None, "timed out"),
    );
    let mut partial = ok_sample();
    partial.outcome = Outcome::ProtocolError;
    m.observe_request("w1", "qwen", "chat", &partial);
    let text = m.encode();

    let base = [("target", "w1"), ("model", "qwen"), ("workload", "chat")];
    let outcome = |o: &'static str| {
        get(
            &text,
            "llmprobe_requests_total",
            &with(&base, &[("outcome", o)]),
        )
    };
    assert_eq!(outcome("ok"), Some(1.0));
    assert_eq!(outcome("timeout"), Some(1.0));
    assert_eq!(outcome("protocol_error"), Some(1.0));
    assert_eq!(
        outcome("cancelled"),
        Some(0.0),
        "all outcomes start at zero"
    );
    assert_eq!(
        get(&text, "llmprobe_request_duration_seconds_count", &base),
        Some(1.0)
    );
    assert_eq!(
        get(&text, "llmprobe_request_duration_seconds_sum", &base),
        Some(1.5)
    );
    assert_eq!(
        get(&text, "llmprobe_request_ttft_seconds_count", &base),
        Some(1.0)
    );
    assert_eq!(
        get(
            &text,
            "llmprobe_request_ttft_seconds_bucket",
            &with(&base, &[("le", "0.25")])
        ),
        Some(1.0)
    );
    assert_eq!(
        get(
            &text,
            "llmprobe_request_ttft_seconds_bucket",
            &with(&base, &[("le", "0.1")])
        ),
        Some(0.0)
    );
    assert_eq!(
        get(&text, "llmprobe_output_tokens_total", &base),
        Some(100.0)
    );
    assert_eq!(
        get(&text, "llmprobe_prompt_tokens_total", &base),
        Some(40.0)
    );
}

#[test]
fn target_info_is_replaced_and_its_label_names_sanitised() {
    let m = metrics();
    let s = |a: &str, b: &str| (a.to_string(), b.to_string());
    m.set_target_info("w1", &[s("gpu", "A100"), s("rack-id", "r1")]);
    m.set_target_info(
        "w1",
        &[
            s("gpu", "L40S"),
            s("gpu", "H100"),
            s("9zone", "eu"),
            s("__meta", "x"),
            s("target", "evil"),
            s("-", "dropped"),
            s("model", "qwen"),
        ],
    );
    let text = m.encode();
    assert_eq!(count(&text, "llmprobe_target_info", &[]), 1);
    assert_eq!(
        get(
            &text,
            "llmprobe_target_info",
            &[
                ("target", "w1"),
                ("model", "qwen"),
                ("server", ""),
                ("server_version", ""),
                ("gpu", "H100"),
                ("driver", ""),
                ("gpu_memory", ""),
                ("os", ""),
                ("via_gateway", ""),
                ("_9zone", "eu"),
                ("_meta", "x"),
            ]
        ),
        Some(1.0)
    );
}

#[test]
fn label_names_are_sanitised() {
    assert_eq!(sanitize_label_name("gpu").as_deref(), Some("gpu"));
    assert_eq!(
        sanitize_label_name("gpu-memory.total").as_deref(),
        Some("gpu_memory_total")
    );
    assert_eq!(sanitize_label_name("1x").as_deref(), Some("_1x"));
    assert_eq!(sanitize_label_name("__name__").as_deref(), Some("_name__"));
    assert_eq!(sanitize_label_name("zoné").as_deref(), Some("zon_"));
    assert_eq!(sanitize_label_name("").as_deref(), None);
    assert_eq!(sanitize_label_name("__").as_deref(), None);
}

#[test]
fn gateway_overhead_is_published_and_forgotten() {
    let m = metrics();
    let no_samples = Percentiles {
        count: 0,
        ..Percentiles::default()
    };
    m.publish_pair(&pair_report("gw", pct(30, 0.002), no_samples));
    m.publish_pair(&pair_report("other", pct(30, 0.001), no_samples));
    let text = m.encode();
    assert_eq!(
        get(
            &text,
            "llmprobe_gateway_overhead_seconds",
            &[
                ("pair", "gw"),
                ("quantity", "latency"),
                ("percentile", "95")
            ]
        ),
        Some(0.004)
    );
    assert_eq!(
        count(
            &text,
            "llmprobe_gateway_overhead_seconds",
            &[("quantity", "ttft")]
        ),
        0
    );
    assert_eq!(
        get(
            &text,
            "llmprobe_gateway_overhead_samples",
            &[("pair", "gw"), ("quantity", "ttft")]
        ),
        Some(0.0)
    );
    m.forget_pair("gw");
    let text = m.encode();
    assert_eq!(
        count(
            &text,
            "llmprobe_gateway_overhead_seconds",
            &[("pair", "gw")]
        ),
        0
    );
    assert_eq!(
        count(
            &text,
            "llmprobe_gateway_overhead_samples",
            &[("pair", "gw")]
        ),
        0
    );
    assert_eq!(
        count(
            &text,
            "llmprobe_gateway_overhead_seconds",
            &[("pair", "other")]
        ),
        3
    );
}

#[test]
fn self_metrics_are_exported() {
    let m = metrics();
    let a = m.request_in_flight();
    let b = m.request_in_flight();
    assert_eq!(
        get(&m.encode(), "llmprobe_in_flight_requests", &[]),
        Some(2.0)
    );
    drop(a);
    drop(b);
    m.config_reloaded(false);
    let text = m.encode();
    assert_eq!(get(&text, "llmprobe_in_flight_requests", &[]), Some(0.0));
    assert_eq!(
        get(&text, "llmprobe_config_last_reload_successful", &[]),
        Some(0.0)
    );
    assert!(
        get(
            &text,
            "llmprobe_config_last_reload_success_timestamp_seconds",
            &[]
        )
        .unwrap_or(0.0)
            > 1.6e9
    );
    assert_eq!(
        get(
            &text,
            "llmprobe_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        Some(1.0)
    );
    #[cfg(target_os = "linux")]
    assert!(text.contains("process_resident_memory_bytes"));
}

#[test]
fn sweep_counters_start_at_zero_with_the_target() {
    let m = metrics();
    m.target_started("w1");
    let text = m.encode();
    for result in ["ok", "failed"] {
        for kind in ["full", "warm"] {
            let labels = [("target", "w1"), ("result", result), ("kind", kind)];
            assert_eq!(
                get(&text, "llmprobe_sweeps_total", &labels),
                Some(0.0),
                "{labels:?}"
            );
        }
    }
    assert_eq!(
        get(
            &text,
            "llmprobe_sweeps_postponed_total",
            &[("target", "w1")]
        ),
        Some(0.0)
    );
    m.forget_target("w1");
    assert!(!m.encode().contains("target=\"w1\""));
}

#[test]
fn two_metrics_can_live_side_by_side() {
    // No global registry: tests and reloads may build several.
    let a = metrics();
    let b = metrics();
    a.sweep_postponed("w1");
    assert_eq!(
        count(&b.encode(), "llmprobe_sweeps_postponed_total", &[]),
        0
    );
}

#[test]
fn achieved_concurrency_connections_and_the_lower_bound_are_exported() {
    let m = metrics();
    let mut r = report("w1", vec![workload("chat", &[1, 2])]);
    let level = &mut r.workloads[0].levels[1];
    level.achieved_concurrency = 1.5;
    level.kept_concurrency = false;
    level.new_connections = 2;
    level.connect_seconds = pct(2, 0.004);
    m.publish_sweep(&r);
    let text = m.encode();
    let c2 = with(&W1C1[..3], &[("concurrency", "2")]);
    assert_eq!(
        get(&text, "llmprobe_sweep_achieved_concurrency", &W1C1),
        Some(1.0)
    );
    assert_eq!(
        get(&text, "llmprobe_sweep_achieved_concurrency", &c2),
        Some(1.5)
    );
    assert_eq!(get(&text, "llmprobe_sweep_new_connections", &c2), Some(2.0));
    assert_eq!(
        get(&text, "llmprobe_sweep_new_connections", &W1C1),
        Some(0.0)
    );
    assert_eq!(
        get(
            &text,
            "llmprobe_sweep_connect_seconds",
            &with(&c2, &[("percentile", "50")])
        ),
        Some(0.004)
    );
    assert_eq!(
        get(
            &text,
            "llmprobe_sweep_samples",
            &with(&c2, &[("quantity", "connect")])
        ),
        Some(2.0)
    );
    assert_eq!(
        count(&text, "llmprobe_sweep_connect_seconds", &W1C1),
        0,
        "no percentiles without samples"
    );
    let wl = &W1C1[..3];
    assert_eq!(
        get(&text, "llmprobe_capacity_knee_lower_bound", wl),
        Some(1.0)
    );
    r.workloads[0].capacity.knee_is_lower_bound = false;
    m.publish_sweep(&r);
    assert_eq!(
        get(&m.encode(), "llmprobe_capacity_knee_lower_bound", wl),
        Some(0.0)
    );
}

#[test]
fn target_info_says_which_field_carries_the_output_limit() {
    let m = metrics();
    let target = crate::config::load(std::path::Path::new("config/llmprobe.yaml"))
        .expect("shipped config")
        .targets[0]
        .clone();
    m.describe_target(&target, &Default::default(), "max_tokens");
    let text = m.encode();
    let line = text
        .lines()
        .find(|l| l.starts_with("llmprobe_target_info{"))
        .unwrap();
    assert!(line.contains("max_tokens_field=\"max_tokens\""), "{line}");
}

/// The cardinality of the exposition: what a fleet's /metrics costs grows
/// with these numbers (issue 14: 1000 targets x 2 levels is about 105,000
/// series, of which the sweep results are half).
#[test]
fn result_series_per_target_workload_and_level_are_counted() {
    let m = metrics();
    m.publish_sweep(&report(
        "w1",
        vec![workload("chat", &[1, 2]), workload("rag", &[1, 2, 4])],
    ));
    m.publish_sweep(&report("w2", vec![workload("chat", &[1])]));
    let series = parse(&m.results.text());
    // Per level: 6 quantities (TTFT, answer TTFT, latency, decision
    // latency, inter-token latency, generation speed) x (3 percentiles + a
    // sample count), the
    // connect-time sample count (its percentiles only when connections were
    // opened), throughput, reasoning tokens, shed and error ratio, achieved
    // concurrency, new connections, whether it stopped early, requests it
    // saved, whether it was a refinement probe, when it was measured, and
    // every outcome, zero or not.
    let per_level = 6 * (3 + 1) + 1 + 4 + 2 + 4 + Outcome::ALL.len();
    // Per workload: knee, whether it was decided, lower bound, throughput,
    // request rate and its sample count, recommendation, saturation, levels
    // not measured (and of them the client's), knee carried over, when the
    // knee was measured.
    let per_workload = 12;
    // Per target: success, duration, last completion.
    let per_target = 3;
    let levels = 2 + 3 + 1;
    assert_eq!(
        series.len(),
        levels * per_level + 3 * per_workload + 2 * per_target
    );
    assert_eq!(per_level, 44);
    // Forgetting a target takes every one of its series away.
    m.forget_target("w1");
    let left = parse(&m.results.text());
    assert_eq!(left.len(), per_level + per_workload + per_target);
    assert!(left.iter().all(|(_, l, _)| l["target"] == "w2"));
}
