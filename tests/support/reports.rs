//! Report values built by hand, for tests that render reports without
//! measuring (pinned outputs, promtool checks).

use llmprobe::stats::decision::Verdict;
use llmprobe::stats::report::Percentiles;
use llmprobe::stats::sustained::{RateStep, StepResult, Sustained, SustainedStatus};

/// Percentiles of `count` samples.
pub fn pct(count: usize, p50: f64, p95: f64, p99: f64) -> Percentiles {
    Percentiles {
        count,
        p50: Some(p50),
        p95: Some(p95),
        p99: Some(p99),
    }
}

/// A search of two steps: 1.6 req/s held, 1.76 broke by shedding.
pub fn sustained() -> Sustained {
    let step = |rate: f64, shed: f64, result: StepResult| RateStep {
        offered_requests_per_second: rate,
        seed: 7,
        scheduled: 45,
        uncounted: 5,
        sent: 40,
        not_sent_client_ceiling: 0,
        achieved_requests_per_second: rate * 0.98,
        goodput_requests_per_second: rate * 0.98 * (1.0 - shed),
        shed_ratio: shed,
        error_ratio: 0.0,
        scheduled_latency_seconds: pct(40, 1.2, 2.5, 2.9),
        latency_seconds: pct(40, 1.19, 2.49, 2.88),
        ttft_seconds: pct(40, 0.1, 0.3, 0.4),
        dispatch_lag_seconds: pct(45, 0.0005, 0.002, 0.004),
        in_flight_p99: 5.0,
        in_flight_max: 6,
        duration_seconds: 28.0,
        stopped_early: result == StepResult::Break,
        verdict: Verdict::default(),
        confirmation: false,
        result,
        note: None,
    };
    Sustained {
        requests_per_second: Some(1.6),
        status: SustainedStatus::Measured,
        why: "held at 1.60 req/s and broke within 10% above it".to_string(),
        confidence: 0.95,
        resolution: 0.1,
        arrivals: llmprobe::config::Arrivals::Poisson,
        start_requests_per_second: 1.6,
        start_from: "erlang_b".to_string(),
        closed_loop_requests_per_second: 2.4,
        requests: 90,
        measured_at_unix_seconds: 1_700_000_000.0,
        sweeps_since_measured: 0,
        steps: vec![
            step(1.6, 0.0, StepResult::Pass),
            step(1.76, 0.15, StepResult::Break),
        ],
    }
}
