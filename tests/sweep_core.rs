//! The measuring core against a local test server with controlled delays.

mod support;

use std::time::Duration;

use support::config::Yaml;
use support::ports::refusing_base_url;
use support::server::{start, Behavior};
use support::sweep::sweep_one;

/// One target `t1` at `base_url`, at `levels`, two rounds per level.
fn url_config(base_url: &str, levels: &str) -> String {
    Yaml {
        levels,
        requests_per_level: "2x",
        min_requests_per_level: 8,
        request_timeout: "5s",
        slo: Some("{ p95_latency: 5s, max_shed_ratio: 0.05, max_error_ratio: 0.05 }"),
        // Whole levels: these tests count every request of a failing level
        // (the early verdict has its own tests, in gentle_sweeps.rs).
        more_defaults: "  early_stop: false",
        max_completion_tokens: 16,
        prompts: r#"["hello there"]"#,
        rest: &format!("targets:\n  - name: t1\n    base_url: {base_url}\n    model: test-model"),
        ..Yaml::default()
    }
    .render()
}

/// Injected TTFT 60 ms and 20 ms between chunks. The client's clock starts
/// before the request is written and the server only starts its timer once
/// the request is parsed, so the measurement can only be later than what
/// the server itself timed (its timers late by this run's scheduling, never
/// early). Above, each bound is what the server timed plus a fixed allowance
/// for loopback and tokio's 1 ms timer granularity (15 ms for a delay from
/// the send, 10 ms for a gap), plus as much again as the server's own timers
/// ran late in this run (the client's wake-ups wait for a core as the
/// server's do): that still fails if parsing or queueing were counted (tens
/// of ms), and does not fail because the machine is loaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttft_and_inter_token_latency_match_injected_delays() {
    let (ttft_injected, gap_injected) = (0.060, 0.020);
    let server = start(Behavior {
        ttft: Duration::from_secs_f64(ttft_injected),
        gap: Duration::from_secs_f64(gap_injected),
        tokens: 10,
        ..Default::default()
    })
    .await;
    let r = sweep_one(&url_config(&server.base_url(), "[1]")).await;
    assert!(r.success, "{:?}", r.error);
    let l = &r.workloads[0].levels[0];
    assert_eq!(l.outcomes["ok"], 8);
    let timed = server.streams();
    let p50 = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[(v.len() - 1) / 2]
    };
    let served = |f: fn(&support::server::Timed) -> Duration| {
        p50(timed.iter().map(|t| f(t).as_secs_f64()).collect())
    };
    // The server's p50s, and the upper bound each allows (see above).
    let within = |what: &str, measured: f64, served: f64, injected: f64, allowance: f64| {
        let late = (served - injected).max(0.0);
        let (low, high) = (served - 0.001, served + allowance + late);
        eprintln!(
            "{what}: measured {measured:.4} s, served {served:.4} s, bounds {low:.4}..{high:.4}"
        );
        assert!(
            (low..high).contains(&measured),
            "{what} p50 {measured}, served {served}"
        );
    };
    let ttft = l.ttft_seconds.p50.unwrap();
    within("ttft", ttft, served(|t| t.ttft), ttft_injected, 0.015);
    let gaps: Vec<f64> = timed
        .iter()
        .flat_map(|t| t.gaps.iter().map(Duration::as_secs_f64))
        .collect();
    let gap = p50(gaps);
    let itl = l.inter_token_latency_seconds.p50.unwrap();
    // A gap the client sees can be shorter than the server's when the chunk
    // before it reached the client late: 3 ms below, as much again as late.
    let late_gap = (gap - gap_injected).max(0.0);
    assert!(
        itl >= gap_injected - 0.003 - late_gap,
        "itl p50 {itl}, served {gap}"
    );
    assert!(itl < gap + 0.010 + late_gap, "itl p50 {itl}, served {gap}");
    assert_eq!(l.inter_token_latency_seconds.count, 8 * 9);
    // Latency is send -> last content chunk: 60 + 9 x 20 = 240 ms.
    let lat = l.latency_seconds.p50.unwrap();
    let lat_injected = ttft_injected + 9.0 * gap_injected;
    within("latency", lat, served(|t| t.latency), lat_injected, 0.015);
    // Generation speed: 9 tokens over 180 ms = 50 tok/s, as the server
    // timed them, within 20% (one late chunk at either end of the 9 gaps).
    let speed = l.generation_tokens_per_second.p50.unwrap();
    let served_speed = 9.0 / (served(|t| t.latency) - served(|t| t.ttft));
    assert!(
        (speed / served_speed - 1.0).abs() < 0.2,
        "speed {speed}, served {served_speed}"
    );
    assert_eq!(l.token_source, "usage");
    assert_eq!(l.output_tokens, 80);
    assert_eq!(l.streams_without_finish_reason, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shedding_above_four_in_flight_gives_knee_four() {
    let server = start(Behavior {
        ttft: Duration::from_millis(20),
        gap: Duration::from_millis(5),
        tokens: 6,
        shed_above: Some(4),
        ..Default::default()
    })
    .await;
    let r = sweep_one(&url_config(&server.base_url(), "[1, 2, 4, 8]")).await;
    let w = &r.workloads[0];
    let conc: Vec<u32> = w.levels.iter().map(|l| l.concurrency).collect();
    assert_eq!(conc, vec![1, 2, 4, 8]);
    for l in &w.levels[..3] {
        assert_eq!(l.outcomes["shed"], 0, "level {} shed", l.concurrency);
    }
    let top = &w.levels[3];
    assert!(top.outcomes["shed"] > 0, "level 8 must be shed");
    assert!(top.shed_ratio > 0.05);
    assert_eq!(w.capacity.knee_concurrency, 4);
    assert_eq!(w.capacity.recommended_max_in_flight, 3);
    assert!(w
        .capacity
        .stopped_because
        .as_deref()
        .unwrap()
        .contains("shed ratio"));
    assert!(r.success, "503s are counted, they do not fail the sweep");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_is_a_protocol_error_and_the_sweep_finishes() {
    let server = start(Behavior {
        garbage: true,
        ..Default::default()
    })
    .await;
    let r = sweep_one(&url_config(&server.base_url(), "[1, 2]")).await;
    let w = &r.workloads[0];
    assert_eq!(w.levels.len(), 1, "level 1 breaks the SLO, climbing stops");
    assert_eq!(w.levels[0].outcomes["protocol_error"], 8);
    assert_eq!(w.capacity.knee_concurrency, 0);
    assert!(r.success);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_usage_tokens_are_counted_from_chunks() {
    let server = start(Behavior {
        usage: false,
        tokens: 5,
        ..Default::default()
    })
    .await;
    let r = sweep_one(&url_config(&server.base_url(), "[1]")).await;
    let l = &r.workloads[0].levels[0];
    assert_eq!(l.token_source, "chunks");
    assert_eq!(l.output_tokens, 8 * 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_loop_keeps_exactly_concurrency_in_flight_and_global_cap_holds() {
    let server = start(Behavior {
        ttft: Duration::from_millis(20),
        gap: Duration::from_millis(2),
        tokens: 4,
        ..Default::default()
    })
    .await;
    let r = sweep_one(&url_config(&server.base_url(), "[6]")).await;
    assert_eq!(r.workloads[0].levels[0].requests, 12);
    let max = server.max_in_flight();
    assert_eq!(max, 6, "the level keeps exactly its concurrency in flight");

    let capped = start(Behavior {
        ttft: Duration::from_millis(20),
        tokens: 4,
        ..Default::default()
    })
    .await;
    // A level above the global cap could only run throttled, measuring a
    // smaller concurrency than it says: the configuration is refused (issue
    // 17; it used to run level 8 with 3 in flight). A level within it holds.
    let capped_yaml = |levels: &str| {
        url_config(&capped.base_url(), levels)
            .replace("max_in_flight_total: 64", "max_in_flight_total: 3")
    };
    let refused =
        llmprobe::config::load(&support::config::write_config(&capped_yaml("[8]"))).unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("defaults.levels: level 8 is above schedule.max_in_flight_total (3)"),
        "{refused}"
    );
    let r = sweep_one(&capped_yaml("[1, 3]")).await;
    assert_eq!(r.workloads[0].levels[1].outcomes["ok"], 8);
    let max = capped.max_in_flight();
    assert!(max <= 3, "global cap exceeded: {max}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_server_is_a_connect_error_and_a_failed_sweep() {
    let r = sweep_one(&url_config(&refusing_base_url(), "[1, 2]")).await;
    assert_eq!(r.workloads[0].levels[0].outcomes["connect_error"], 8);
    assert!(!r.success);
}
