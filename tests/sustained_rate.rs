//! The sustained (open-loop) rate against the built-in engine, in-process
//! as `llmprobe sweep` runs it: a shedding engine sustains less than its
//! closed-loop rate, near the Erlang B value of its model; a queueing
//! engine's sustained rate holds its p95 on scheduled latency; the client's
//! own ceiling gives "not measured", never a rate of 0. Bounds are wide
//! (seeded schedules, but a loaded machine's timing varies): they fail on a
//! search that reports the closed-loop rate, or none.

mod support;

use llmprobe::stats::erlang;
use llmprobe::stats::report::SweepReport;
use llmprobe::stats::sustained::{StepResult, Sustained, SustainedStatus};
use support::config::Yaml;
use support::sweep::sweep_one;

fn yaml(sim: &str, slo: &str, sustained: &str) -> String {
    Yaml {
        levels: "[1, 2, 4, 8, 16]",
        requests_per_level: "3x",
        min_requests_per_level: 8,
        warmup_requests: 2,
        slo: Some(slo),
        sustained,
        sweep_timeout: "120s",
        rest: &format!("targets:\n  - name: sim\n    simulator: {sim}"),
        ..Yaml::default()
    }
    .render()
}

fn sustained(r: &SweepReport) -> &Sustained {
    let w = &r.workloads[0];
    w.capacity
        .sustained
        .as_ref()
        .unwrap_or_else(|| panic!("no sustained rate; capacity {:?}", w.capacity))
}

/// 8 sequences at 12 ms a token whatever the batch, 503 above 8 in flight:
/// 8 tokens take about 0.1 s, an 8-place loss system (Erlang B).
const SHEDDING: &str =
    "{ profile: tiny, max_batch: 8, max_in_flight: 8, step_base: 12ms, step_per_sequence: 0us }";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shedding_engine_sustains_less_than_its_closed_loop_rate_near_erlang_b() {
    let r = sweep_one(&yaml(
        SHEDDING,
        "{ p95_latency: 5s }",
        "{ seed: 11, max_dispatch_lag: 250ms }",
    ))
    .await;
    let w = &r.workloads[0];
    assert_eq!(w.capacity.knee_concurrency, 8, "{:?}", w.capacity);
    let s = sustained(&r);
    let rate = s.requests_per_second.expect("a rate");
    assert!(
        matches!(
            s.status,
            SustainedStatus::Measured | SustainedStatus::LowerBound
        ),
        "{s:?}"
    );
    // Below the closed-loop rate, by a margin a search that reported it
    // could not meet.
    let closed = w.capacity.requests_per_second;
    assert!(
        rate < 0.9 * closed,
        "sustained {rate} vs closed loop {closed}"
    );
    // Erlang B for 8 places held as long as a request at concurrency 1
    // takes (no queue: the time in service).
    let hold = w.levels[0].latency_seconds.p50.unwrap();
    let reference = erlang::load_for(8, 0.05) / hold;
    assert!(
        rate > 0.6 * reference && rate < 1.3 * reference,
        "sustained {rate} vs Erlang B {reference} (hold {hold}s); steps {:?}",
        s.steps
            .iter()
            .map(|s| (s.offered_requests_per_second, s.result, s.shed_ratio))
            .collect::<Vec<_>>()
    );
    // A step that broke did so by shedding, and the last passing step is the rate.
    assert!(s.steps.iter().any(|st| st.result == StepResult::Pass));
    // An undecided step is not read as a break: it goes on at its rate,
    // unless that would leave no room to confirm the pass below it, which is
    // then confirmed.
    for pair in s.steps.windows(2) {
        if pair[0].result == StepResult::Undecided && !pair[0].confirmation {
            let (at, next) = (
                pair[0].offered_requests_per_second,
                pair[1].offered_requests_per_second,
            );
            assert!(pair[1].confirmation && next <= at, "{pair:?}");
        }
    }
    for st in &s.steps {
        assert_eq!(st.not_sent_client_ceiling, 0, "{st:?}");
        assert!(st.in_flight_max <= 32, "{st:?}");
        assert!(st.sent + st.uncounted <= st.scheduled, "{st:?}");
    }
    let json = serde_json::to_value(&r).unwrap();
    let from_json = &json["workloads"][0]["capacity"]["sustained"];
    assert_eq!(from_json["requests_per_second"].as_f64(), Some(rate));
    assert_eq!(from_json["arrivals"], "poisson");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queueing_engine_sustains_a_rate_whose_scheduled_p95_holds() {
    // 4 at once at 10 ms a token, no admission limit: the rest queue; the
    // p95 limit binds.
    let sim = "{ profile: tiny, max_batch: 4, max_in_flight: 0, step_base: 10ms, step_per_sequence: 0us }";
    let r = sweep_one(&yaml(
        sim,
        "{ p95_latency: 300ms }",
        "{ seed: 5, max_dispatch_lag: 250ms }",
    ))
    .await;
    let s = sustained(&r);
    let rate = s.requests_per_second.expect("a rate");
    let closed = r.workloads[0].capacity.requests_per_second;
    assert!(
        rate > 0.0 && rate < closed,
        "sustained {rate} vs closed {closed}"
    );
    let at_rate = s
        .steps
        .iter()
        .find(|st| st.offered_requests_per_second == rate)
        .expect("the step the rate comes from");
    assert_eq!(at_rate.result, StepResult::Pass);
    assert!(
        at_rate.scheduled_latency_seconds.p95.unwrap() <= 0.3,
        "{at_rate:?}"
    );
    // Above it, a step broke (or was undecided) on latency, not shedding.
    if s.status == SustainedStatus::Measured {
        let above = s
            .steps
            .iter()
            .filter(|st| st.offered_requests_per_second > rate)
            .min_by(|a, b| {
                a.offered_requests_per_second
                    .total_cmp(&b.offered_requests_per_second)
            })
            .expect("a step above the rate");
        assert_ne!(above.result, StepResult::Pass);
        assert_eq!(above.shed_ratio, 0.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_ceiling_counts_arrivals_not_sent_and_never_gives_a_rate_of_0() {
    // A ceiling of 2 in flight against an engine whose requests take 0.1 s:
    // every step's arrivals find it full at times.
    let r = sweep_one(&yaml(
        SHEDDING,
        "{ p95_latency: 5s }",
        "{ seed: 3, max_in_flight: 2, max_dispatch_lag: 250ms }",
    ))
    .await;
    let s = sustained(&r);
    let first = &s.steps[0];
    assert_eq!(first.result, StepResult::NotMeasured, "{first:?}");
    assert!(first.not_sent_client_ceiling > 0, "{first:?}");
    assert!(first.in_flight_max <= 2, "{first:?}");
    // No catch-up burst: what was sent went at its scheduled time (what
    // found the ceiling full was dropped, not sent late).
    let lag = first.dispatch_lag_seconds.p99.unwrap();
    assert!(
        lag < 0.25,
        "dispatch lag p99 {lag}s: arrivals were held and sent late"
    );
    assert_eq!(
        first.sent + first.not_sent_client_ceiling + first.uncounted,
        first.scheduled
    );
    assert!(
        first.note.as_deref().unwrap_or("").contains("ceiling"),
        "{first:?}"
    );
    assert_eq!(s.status, SustainedStatus::NotMeasured);
    assert_eq!(s.requests_per_second, None);
    assert!(s.why.starts_with("not measured"), "{}", s.why);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sustained_every_0_means_no_search() {
    let r = sweep_one(&yaml(SHEDDING, "{ p95_latency: 5s }", "{ every: 0 }")).await;
    assert!(r.workloads[0].capacity.sustained.is_none());
}
