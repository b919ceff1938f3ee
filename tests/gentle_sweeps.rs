//! Gentle sweeps on the simulated engine: a level certain to break the SLO
//! stops early (its requests in flight cancelled, the knee unchanged),
//! refinement finds a knee between two configured levels, and the daemon's
//! warm start skips the low levels and says so in `llmprobe_sweeps_total`.

mod support;

use std::time::Duration;

use llmprobe::stats::decision::Breach;
use llmprobe::stats::report::{LevelRole, WorkloadReport};
use support::config::{write_config, Yaml};
use support::daemon::Daemon;
use support::exposition::{metric, metric_sum};
use support::sweep::sweep_one;

/// One simulated target and the settings a test varies, swept once.
async fn sweep(simulator: &str, more_defaults: &str) -> WorkloadReport {
    let yaml = Yaml {
        warmup_requests: 1,
        levels: "[1, 2, 4, 8, 16]",
        requests_per_level: "3x",
        min_requests_per_level: 8,
        slo: Some("{ p95_latency: 5s, max_shed_ratio: 0.05, max_error_ratio: 0.05 }"),
        more_defaults,
        max_completion_tokens: 16,
        rest: &format!("targets:\n  - name: sim\n    simulator: {simulator}"),
        ..Yaml::default()
    }
    .render();
    let mut report = sweep_one(&yaml).await;
    assert!(report.success, "{:?}", report.error);
    report.workloads.remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_breaking_level_stops_early_with_the_same_knee() {
    // The tiny engine sheds above 8 in flight: at 16, half of the first 16
    // requests are shed at once while the other 8 generate for 16 steps.
    let sim = "{ profile: tiny }";
    let full = sweep(sim, "  early_stop: false\n  refine_resolution: off").await;
    let early = sweep(sim, "  early_stop: true\n  refine_resolution: off").await;

    assert_eq!(full.capacity.knee_concurrency, 8);
    assert_eq!(early.capacity.knee_concurrency, 8, "the same knee");
    let full16 = full.levels.last().unwrap();
    assert_eq!((full16.concurrency, full16.requests), (16, 48));
    assert_eq!(full16.stopped_early, None);

    let l = early.levels.last().unwrap();
    assert_eq!(l.concurrency, 16);
    assert!(!l.within_slo);
    let stop = l.stopped_early.expect("level 16 stopped early");
    assert_eq!(stop.breach, Breach::Shed);
    assert_eq!(l.planned_requests, 48);
    assert!(l.requests < 48, "{} sent", l.requests);
    assert_eq!(stop.saved_requests, 48 - l.requests);
    // The 8 admitted requests were still generating when the third 503
    // (over 5% of 48) came back: cancelled, and counted as no error.
    assert!(l.outcomes["cancelled"] >= 1, "{:?}", l.outcomes);
    assert_eq!(l.error_ratio, 0.0, "cancelled requests are not errors");
    assert!(l.outcomes["shed"] >= 3, "{:?}", l.outcomes);
    // The levels that passed ran in full.
    for l in &early.levels[..4] {
        assert_eq!(l.stopped_early, None);
        assert_eq!(l.requests, l.planned_requests);
    }
    let why = early.capacity.stopped_because.as_deref().unwrap_or("");
    assert!(why.contains("shed certain after"), "{why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_level_exports_its_ratios_over_the_planned_count() {
    // Level 16 of the tiny engine stops at the third 503 while its 8
    // admitted requests are cancelled in flight: over the requests that
    // ended, the shed ratio would read 1.0.
    let yaml = Yaml {
        warmup_requests: 1,
        levels: "[1, 2, 4, 8, 16]",
        requests_per_level: "3x",
        min_requests_per_level: 8,
        slo: Some("{ p95_latency: 5s, max_shed_ratio: 0.05, max_error_ratio: 0.05 }"),
        more_defaults: "  early_stop: true\n  refine_resolution: off",
        max_completion_tokens: 16,
        rest: "targets:\n  - name: sim\n    simulator: { profile: tiny }",
        ..Yaml::default()
    }
    .render();
    let report = sweep_one(&yaml).await;
    assert!(report.success, "{:?}", report.error);
    let w = &report.workloads[0];
    let l = w.levels.last().unwrap();
    assert_eq!(l.concurrency, 16);
    assert!(l.stopped_early.is_some());
    let shed = l.shed() as f64;
    assert_eq!(l.shed_ratio, shed / 48.0, "over the 48 planned");
    assert!(l.shed_ratio < 1.0);
    assert_eq!(l.error_ratio, 0.0);
    let why = w.capacity.stopped_because.as_deref().unwrap_or("");
    assert!(!why.contains("no request succeeded"), "{why}");

    let registry = prometheus::Registry::new();
    let metrics = llmprobe::metrics::Metrics::new(&registry).unwrap();
    metrics.publish_sweep(&report);
    let text = metrics.encode();
    let at16 = [("target", "sim"), ("concurrency", "16")];
    assert_eq!(
        metric(&text, "llmprobe_sweep_shed_ratio", &at16),
        Some(shed / 48.0)
    );
    assert_eq!(
        metric(&text, "llmprobe_sweep_error_ratio", &at16),
        Some(0.0)
    );
    assert_eq!(
        metric(&text, "llmprobe_sweep_throughput_tokens_per_second", &at16),
        None,
        "no partial throughput exported"
    );
    assert!(metric(
        &text,
        "llmprobe_sweep_throughput_tokens_per_second",
        &[("target", "sim"), ("concurrency", "8")]
    )
    .is_some_and(|t| t > 0.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refinement_finds_a_knee_between_powers_of_two() {
    // Sheds above 12 in flight: 8 passes, 16 breaks; bisection to 1 probes
    // 12 (passes), 14 (breaks), 13 (breaks).
    let sim = "{ profile: tiny, max_in_flight: 12 }";
    let w = sweep(sim, "  refine_resolution: 1").await;
    let ran: Vec<(u32, LevelRole, bool)> = w
        .levels
        .iter()
        .map(|l| (l.concurrency, l.role, l.within_slo))
        .collect();
    let r = LevelRole::Refinement;
    let c = LevelRole::Configured;
    assert_eq!(
        ran,
        vec![
            (1, c, true),
            (2, c, true),
            (4, c, true),
            (8, c, true),
            (12, r, true),
            (13, r, false),
            (14, r, false),
            (16, c, false)
        ]
    );
    assert_eq!(w.capacity.knee_concurrency, 12);
    assert_eq!(w.capacity.recommended_max_in_flight, 10, "floor(12 x 0.9)");
    // Each probe is a full level with the same rules: the passing one ran
    // in full, the broken ones stopped early.
    let probe12 = &w.levels[4];
    assert_eq!(probe12.requests, 36);
    assert!(w.levels[5].stopped_early.is_some());
    // Without refinement the same engine reports the power of two.
    let coarse = sweep(sim, "  refine_resolution: off").await;
    assert_eq!(coarse.capacity.knee_concurrency, 8);
}

/// The `tiny` engine (knee 8) with two sequences per batch, one full
/// sweep in three: a warm sweep runs 1, 8 and 16 and carries 2 and 4.
fn warm_start_yaml() -> String {
    Yaml {
        warmup_requests: 1,
        levels: "[1, 2, 4, 8, 16]",
        requests_per_level: "2x",
        min_requests_per_level: 4,
        slo: Some("{ p95_latency: 5s }"),
        more_defaults: "  full_sweep_every: 3\n  refine_resolution: off",
        max_completion_tokens: 8,
        rest: "targets:\n  - name: sim\n    simulator: { profile: tiny, max_batch: 2 }",
        ..Yaml::default()
    }
    .render()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_warm_starts_and_says_so() {
    // Knee 8: a warm sweep runs level 1, skips 2 and 4 (up to half the
    // knee), then 8 and 16. One sweep in three climbs in full. Two
    // sequences per batch: 2, 4 and 8 in flight give the same throughput,
    // twice that of 1.
    let yaml = warm_start_yaml();
    let d = Daemon::start(write_config(&yaml)).await;
    let kind = |text: &str, kind: &str| {
        metric_sum(
            text,
            "llmprobe_sweeps_total",
            &[("target", "sim"), ("kind", kind)],
        )
    };
    // After the first full sweep and before the next full one, the latest
    // published sweep is warm.
    let text = d
        .wait_for(Duration::from_secs(60), "a warm sweep", |t| {
            kind(t, "warm") >= 1.0 && kind(t, "full") == 1.0
        })
        .await;
    d.stop().await;

    assert_eq!(
        metric(
            &text,
            "llmprobe_sweeps_total",
            &[("target", "sim"), ("result", "ok"), ("kind", "full")]
        ),
        Some(1.0)
    );
    let level = |c: &str| {
        metric(
            &text,
            "llmprobe_sweep_requests",
            &[("target", "sim"), ("concurrency", c), ("outcome", "ok")],
        )
    };
    assert!(level("1").is_some(), "the baseline is always measured");
    // Skipped by the warm start, yet exported as the full sweep measured
    // them, saying when: no series disappears on a warm sweep.
    assert!(level("2").is_some(), "level 2 as last measured");
    assert!(level("4").is_some(), "level 4 as last measured");
    assert!(level("8").is_some());
    let measured_at = |c: &str| {
        metric(
            &text,
            "llmprobe_sweep_level_measured_timestamp_seconds",
            &[("target", "sim"), ("concurrency", c)],
        )
        .unwrap_or_else(|| panic!("level {c} says when it was measured"))
    };
    assert!(
        measured_at("2") < measured_at("4"),
        "in the full sweep's order"
    );
    assert!(
        measured_at("1") > measured_at("4"),
        "1 measured again, warm"
    );
    assert!(measured_at("8") > measured_at("1"));
    // Saturation is judged on the warm sweep too: alone, its levels 1 and
    // 8 are no neighbours (8 doubles 1); with the full sweep's 2 and 4, 4
    // or 8 adds nothing over the level below.
    let saturation = metric(
        &text,
        "llmprobe_capacity_saturation_concurrency",
        &[("target", "sim")],
    );
    assert!(
        matches!(saturation, Some(s) if s == 4.0 || s == 8.0),
        "{saturation:?}"
    );
    assert_eq!(
        metric(
            &text,
            "llmprobe_sweep_levels_not_measured",
            &[("target", "sim")]
        ),
        Some(0.0)
    );
    assert_eq!(
        metric(
            &text,
            "llmprobe_capacity_knee_carried_over",
            &[("target", "sim")]
        ),
        Some(0.0)
    );
    assert_eq!(
        metric(
            &text,
            "llmprobe_capacity_knee_concurrency",
            &[("target", "sim")]
        ),
        Some(8.0)
    );
    assert_eq!(
        metric(
            &text,
            "llmprobe_sweep_stopped_early",
            &[("target", "sim"), ("concurrency", "16")]
        ),
        Some(1.0)
    );
    assert!(
        metric_sum(&text, "llmprobe_requests_saved_total", &[("target", "sim")]) > 0.0,
        "early stops counted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_sweeps_page_shows_the_levels_it_carried_apart_and_dated() {
    // As above: knee 8, so a warm sweep runs 1, 8 and 16 and carries the
    // full sweep's 2 and 4.
    let yaml = warm_start_yaml();
    let d = Daemon::start(write_config(&yaml)).await;
    // The page shows the latest sweep: wait until that is a warm one.
    let page = support::wait::poll("a warm sweep's page", Duration::from_secs(90), || async {
        let page = d.get("/targets/sim").await;
        if page.contains("(warm start)") {
            Ok(page)
        } else {
            Err(page)
        }
    })
    .await;
    d.stop().await;

    // The terminal's table (in the page's <pre>): carried rows after their
    // heading, each saying so and how old it is.
    let (_, pre) = page.split_once("<pre>").expect("the table");
    let heading = pre
        .find("carried from earlier sweeps")
        .unwrap_or_else(|| panic!("no carried block:\n{pre}"));
    for c in ["2", "4"] {
        let row = pre
            .lines()
            .find(|l| l.split_whitespace().next() == Some(c))
            .unwrap_or_else(|| panic!("no row for {c}:\n{pre}"));
        assert!(pre.find(row).unwrap() > heading, "{pre}");
        assert!(
            row.contains("&lt;- carried, measured ") && row.contains(" before this sweep"),
            "{row}"
        );
    }
    for c in ["1", "8"] {
        let row = pre
            .lines()
            .find(|l| l.split_whitespace().next() == Some(c))
            .unwrap_or_else(|| panic!("no row for {c}:\n{pre}"));
        assert!(pre.find(row).unwrap() < heading, "measured now: {pre}");
        assert!(!row.contains("carried"), "{row}");
    }
    // The HTML: listed in their own table, left out of the charts.
    for c in ["2", "4"] {
        assert!(
            page.contains(&format!(
                "<tr class=\"carried\"><td>{c}</td><td>carried, measured "
            )),
            "level {c} listed as carried:\n{page}"
        );
        assert!(
            !page.contains(&format!("data-series=\"throughput\" data-x=\"{c}\"")),
            "level {c} drawn:\n{page}"
        );
    }
    assert!(page.contains("data-series=\"throughput\" data-x=\"8\""));
}
