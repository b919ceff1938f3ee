//! The daemon in-process against the built-in simulated engine, with a
//! one-second interval: metrics, reload, shutdown, global cap.

mod support;

use std::time::Duration;

use support::binary::Running;
use support::config::{write_config, Yaml};
use support::daemon::Daemon;
use support::exposition::metric;
use support::server::{start, Behavior};
use support::{promtool, wait};

/// A tiny simulated target shedding above `max_in_flight`, its decode steps
/// three times the profile's (12 ms): a request lasts about 100 ms, so the
/// client's own turnaround on two loaded cores (some ms between a request and
/// its replacement) stays well under the 10% of a level's time that makes
/// the level not count and stops the climb below the knee.
fn sim_target(name: &str, max_in_flight: u32) -> String {
    format!(
        r#"
  - name: {name}
    simulator: {{ profile: tiny, step_base: 12ms, max_in_flight: {max_in_flight} }}
    labels: {{ gpu: "sim" }}"#
    )
}

fn config(targets: &str) -> String {
    Yaml {
        jitter: "10%",
        levels: "[1, 2, 4, 8]",
        slo: Some("{ p95_latency: 10s, max_shed_ratio: 0.05, max_error_ratio: 0.05 }"),
        rest: &format!("targets:{targets}"),
        ..Yaml::default()
    }
    .render()
}

const WAIT: Duration = Duration::from_secs(60);

fn knee(text: &str, target: &str) -> Option<f64> {
    metric(
        text,
        "llmprobe_capacity_knee_concurrency",
        &[("target", target)],
    )
}

/// When the latest sweep of `target` completed, as exported.
fn last_sweep(text: &str, target: &str) -> Option<f64> {
    metric(
        text,
        "llmprobe_sweep_last_completion_timestamp_seconds",
        &[("target", target)],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_families_values_and_promtool() {
    // tiny: 4 sequences per batch; shedding above 2 in flight gives knee 2.
    let d = Daemon::start(write_config(&config(&sim_target("sim-a", 2)))).await;
    let text = d
        .wait_for(WAIT, "first sweep", |t| knee(t, "sim-a").is_some())
        .await;
    assert_eq!(
        knee(&text, "sim-a"),
        Some(2.0),
        "knee must match the simulator's max_in_flight"
    );
    assert_eq!(
        metric(
            &text,
            "llmprobe_recommended_max_in_flight",
            &[("target", "sim-a")]
        ),
        Some(1.0)
    );
    assert_eq!(
        metric(&text, "llmprobe_sweep_success", &[("target", "sim-a")]),
        Some(1.0)
    );
    let level1 = [("target", "sim-a"), ("concurrency", "1")];
    assert_eq!(
        metric(&text, "llmprobe_sweep_shed_ratio", &level1),
        Some(0.0)
    );
    assert!(
        metric(
            &text,
            "llmprobe_sweep_throughput_tokens_per_second",
            &level1
        )
        .unwrap()
            > 0.0
    );
    let ttft = metric(
        &text,
        "llmprobe_sweep_ttft_seconds",
        &[("concurrency", "1"), ("percentile", "95")],
    )
    .unwrap();
    assert!(ttft > 0.0 && ttft < 1.0, "ttft {ttft}");
    assert!(
        metric(
            &text,
            "llmprobe_sweep_shed_ratio",
            &[("target", "sim-a"), ("concurrency", "4")]
        )
        .unwrap()
            > 0.05
    );
    assert!(metric(&text, "llmprobe_requests_total", &[("outcome", "ok")]).unwrap() >= 8.0);
    assert!(metric(&text, "llmprobe_requests_total", &[("outcome", "shed")]).unwrap() > 0.0);
    assert_eq!(
        metric(
            &text,
            "llmprobe_target_info",
            &[
                ("target", "sim-a"),
                ("gpu", "sim"),
                ("server", "llmprobe-sim")
            ]
        ),
        Some(1.0)
    );
    for family in [
        "llmprobe_sweep_ttft_seconds",
        "llmprobe_sweep_latency_seconds",
        "llmprobe_sweep_inter_token_latency_seconds",
        "llmprobe_sweep_generation_tokens_per_second",
        "llmprobe_sweep_throughput_tokens_per_second",
        "llmprobe_sweep_shed_ratio",
        "llmprobe_sweep_error_ratio",
        "llmprobe_sweep_requests",
        "llmprobe_capacity_knee_concurrency",
        "llmprobe_capacity_throughput_tokens_per_second",
        "llmprobe_recommended_max_in_flight",
        "llmprobe_sweep_success",
        "llmprobe_sweep_duration_seconds",
        "llmprobe_sweep_last_completion_timestamp_seconds",
        "llmprobe_request_ttft_seconds",
        "llmprobe_request_duration_seconds",
        "llmprobe_requests_total",
        "llmprobe_output_tokens_total",
        "llmprobe_prompt_tokens_total",
        "llmprobe_target_info",
        "llmprobe_build_info",
        "llmprobe_config_last_reload_successful",
        "process_resident_memory_bytes",
    ] {
        assert!(
            text.contains(&format!("# TYPE {family} ")),
            "family {family} missing"
        );
        assert!(
            text.contains(&format!("# HELP {family} ")),
            "HELP of {family} missing"
        );
    }
    // The results refresh on the schedule.
    let first = last_sweep(&text, "sim-a").unwrap();
    d.wait_for(WAIT, "a second sweep", |t| {
        last_sweep(t, "sim-a").is_some_and(|v| v > first)
    })
    .await;

    promtool::assert_metrics_clean(&d.metrics().await);

    let health = reqwest::get(d.url("/healthz")).await.unwrap();
    assert_eq!(health.status(), 200);
    let ready = reqwest::get(d.url("/readyz")).await.unwrap();
    assert_eq!(ready.status(), 200);
    let index = d.get("/").await;
    assert!(
        index.contains("sim-a") && index.contains("/metrics"),
        "{index}"
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_adds_removes_and_rejects_bad_config() {
    let d = Daemon::start(write_config(&config(&sim_target("old", 8)))).await;
    d.wait_for(WAIT, "old measured", |t| knee(t, "old").is_some())
        .await;

    // Good reload over HTTP: `new` appears, `old` and its series go.
    std::fs::write(&d.path, config(&sim_target("new", 4))).unwrap();
    let client = reqwest::Client::new();
    let r = client.post(d.url("/-/reload")).send().await.unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let text = d
        .wait_for(WAIT, "new measured", |t| {
            knee(t, "new").is_some() && !t.contains("target=\"old\"")
        })
        .await;
    assert_eq!(knee(&text, "new"), Some(4.0));
    assert_eq!(
        metric(&text, "llmprobe_config_last_reload_successful", &[]),
        Some(1.0)
    );

    // Bad reload by signal: rejected, `new` keeps being measured.
    std::fs::write(
        &d.path,
        config(&sim_target("new", 4)).replace("levels: [1, 2, 4, 8]", "levels: [4, 2]"),
    )
    .unwrap();
    d.signal_reload().await;
    let text = d
        .wait_for(WAIT, "failed reload", |t| {
            metric(t, "llmprobe_config_last_reload_successful", &[]) == Some(0.0)
        })
        .await;
    assert_eq!(knee(&text, "new"), Some(4.0));
    let before = last_sweep(&text, "new").unwrap();
    d.wait_for(WAIT, "new still swept", |t| {
        last_sweep(t, "new").is_some_and(|v| v > before)
    })
    .await;
    let r = client.post(d.url("/-/reload")).send().await.unwrap();
    assert_eq!(r.status(), 500);
    assert!(r.text().await.unwrap().contains("strictly increasing"));
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn global_in_flight_cap_holds_across_targets() {
    let server = start(Behavior {
        ttft: Duration::from_millis(30),
        tokens: 4,
        ..Default::default()
    })
    .await;
    let url = server.base_url();
    let targets = format!(
        "\n  - name: a\n    base_url: {url}\n    model: m\n  - name: b\n    base_url: {url}\n    model: m\n  - name: c\n    base_url: {url}\n    model: m"
    );
    // Levels up to 4: a level above the cap (8 here, before issue 17) is
    // refused at load, since it could only run throttled.
    let yaml = config(&targets)
        .replace("max_in_flight_total: 64", "max_in_flight_total: 5")
        .replace("levels: [1, 2, 4, 8]", "levels: [1, 2, 4]");
    let d = Daemon::start(write_config(&yaml)).await;
    d.wait_for(WAIT, "all three measured", |t| {
        ["a", "b", "c"].iter().all(|n| knee(t, n).is_some())
    })
    .await;
    let max = server.max_in_flight();
    assert!(
        max <= 5,
        "the server saw {max} requests in flight, over the cap of 5"
    );
    assert!(max >= 4, "levels of 4 should fill the cap, saw {max}");
    d.stop().await;
}

#[test]
fn sigterm_exits_zero_promptly() {
    // A slow target keeps requests in flight when the signal comes.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(start(Behavior {
        ttft: Duration::from_secs(20),
        ..Default::default()
    }));
    let yaml = config(&format!(
        "\n  - name: slow\n    base_url: {}\n    model: m",
        server.base_url()
    ))
    .replace("request_timeout: 10s", "request_timeout: 60s");
    let daemon = Running::start(&write_config(&yaml), &[]);
    wait::poll_blocking(
        "the daemon's first request",
        Duration::from_secs(20),
        || {
            daemon.process.assert_running();
            (server.requests() > 0)
                .then_some(())
                .ok_or_else(|| "the daemon never sent a request".to_string())
        },
    );
    let s = daemon.stop(Duration::from_secs(8));
    assert!(s.success(), "exit status {s}");
    // The connections were closed: the server sees its requests go away.
    wait::poll_blocking(
        "requests closed after exit",
        Duration::from_secs(3),
        || match server.in_flight() {
            0 => Ok(()),
            n => Err(format!("{n} requests still open after exit")),
        },
    );
    drop(rt);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_gate_postpones_while_the_server_is_busy() {
    let server = start(Behavior::default()).await;
    server.set_busy(3);
    let targets = format!(
        "\n  - name: gated\n    base_url: {}\n    model: m\n    idle_gate: {{ metrics_url: \"http://{}/metrics\", metric: busy_requests, max_value: 1, retry_every: 200ms }}",
        server.base_url(),
        server.addr()
    );
    let d = Daemon::start(write_config(&config(&targets))).await;
    let postponed = |t: &str| {
        metric(t, "llmprobe_sweeps_postponed_total", &[("target", "gated")]).unwrap_or(0.0)
    };
    d.wait_for(WAIT, "postponements", |t| postponed(t) >= 3.0)
        .await;
    assert_eq!(server.requests(), 0, "no request while busy");
    server.set_busy(1);
    d.wait_for(WAIT, "sweep once idle", |t| knee(t, "gated").is_some())
        .await;
    d.stop().await;
}

/// A target removed by a reload while its requests are in flight leaves no
/// series behind: its requests end as `cancelled` after the reload, and
/// observing them must not create its running totals again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_reloaded_away_mid_sweep_leaves_no_series() {
    // One decode step a second: every request stays in flight for seconds.
    let slow = "\n  - name: slow\n    simulator: { profile: tiny, step_base: 1s }";
    let yaml = config(slow)
        .replace("warmup_requests: 1", "warmup_requests: 0")
        .replace("levels: [1, 2, 4, 8]", "levels: [4]")
        .replace("request_timeout: 10s", "request_timeout: 60s");
    let d = Daemon::start(write_config(&yaml)).await;
    // No warm-up: the requests in flight are counted ones.
    d.wait_for(WAIT, "the slow sweep's requests in flight", |t| {
        metric(t, "llmprobe_in_flight_requests", &[]).is_some_and(|v| v >= 4.0)
    })
    .await;
    assert!(d.metrics().await.contains("target=\"slow\""));

    std::fs::write(&d.path, config(&sim_target("fresh", 8))).unwrap();
    let r = reqwest::Client::new()
        .post(d.url("/-/reload"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let text = d
        .wait_for(WAIT, "fresh measured and slow forgotten", |t| {
            knee(t, "fresh").is_some() && !t.contains("target=\"slow\"")
        })
        .await;
    assert_eq!(metric(&text, "llmprobe_in_flight_requests", &[]), Some(0.0));
    let text = d.metrics().await;
    let left: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("target=\"slow\""))
        .collect();
    assert!(left.is_empty(), "series of the removed target: {left:#?}");
    // The index page's sink hears the forget after /metrics's: wait for it
    // too, rather than catch the moment between the two.
    wait::poll("the index page without slow", WAIT, || async {
        let index = d.get("/").await;
        if index.contains("<a href=\"/targets/fresh\">fresh</a>")
            && !index.contains("/targets/slow")
        {
            Ok(())
        } else {
            Err(index)
        }
    })
    .await;
    d.stop().await;
}
