//! Probes between sweeps, against real local servers: an outage shows at
//! the first probe after it and clears at the first one after the server
//! is back; a reasoning model with a small budget is `reasoning_budget`,
//! not an error; a server slow only after idling is labelled cold and kept
//! out of the warm histogram; probes pause while the target is swept; a
//! stalled probe is not followed by a burst; a probe slowed by llmprobe's
//! own stall is kept out of the TTFT histogram.

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::routing::post;
use axum::Router;
use llmprobe::sim::SimParams;
use support::config::{write_config, Yaml};
use support::daemon::Daemon;
use support::exposition::{metric, metric_sum};
use support::raw::good_stream;
use support::server::serve;
use support::sim::profile;
use support::wait::poll;

const LIMIT: Duration = Duration::from_secs(60);

/// A daemon measuring `rest`'s targets, sweeping once an hour (its first
/// sweep at the start), one level of four requests of 8 tokens.
fn config(probe: &str, rest: &str) -> std::path::PathBuf {
    write_config(
        &Yaml {
            interval: "1h",
            probe,
            rest,
            ..Yaml::default()
        }
        .render(),
    )
}

async fn probe_metric(d: &Daemon, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let text = d.get("/metrics").await;
    metric(&text, name, labels)
}

async fn outcome_count(d: &Daemon, outcome: &str) -> f64 {
    probe_metric(
        d,
        "llmprobe_probe_requests_total",
        &[("target", "t"), ("outcome", outcome)],
    )
    .await
    .unwrap_or(0.0)
}

/// A streamed answer of `tokens` tokens, its finish and usage.
fn answer(tokens: u32) -> axum::response::Response {
    axum::response::Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from(good_stream(tokens)))
        .unwrap()
}

/// Serves `app` and gives the `targets:` block of one target `t` on it,
/// its key lines `more` appended.
async fn target_on(app: Router, more: &str) -> (support::server::Served, String) {
    let served = serve(app).await;
    let rest = format!(
        "targets:\n  - name: t\n    base_url: {}\n    model: m\n    server_metrics_url: \"off\"\n{more}",
        served.base_url()
    );
    (served, rest)
}

/// The built-in engine on a port that a test can stop and serve again.
struct Restartable {
    addr: std::net::SocketAddr,
    stop: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Restartable {
    async fn on(addr: &str, params: SimParams) -> Restartable {
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = tokio_util::sync::CancellationToken::new();
        let task = tokio::spawn(llmprobe::sim::serve(listener, params, stop.clone()));
        Restartable { addr, stop, task }
    }

    async fn stop(self) -> std::net::SocketAddr {
        self.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.task).await;
        self.addr
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_shows_at_the_first_probe_after_it_and_clears_when_the_server_is_back() {
    let sim = Restartable::on("127.0.0.1:0", profile("stub")).await;
    let rest = format!(
        "targets:\n  - name: t\n    base_url: http://{}/v1\n    model: m\n",
        sim.addr
    );
    let d = Daemon::start(config("{ interval: 200ms, seed: 7 }", &rest)).await;
    poll("two served probes", LIMIT, || async {
        let ok = outcome_count(&d, "ok").await;
        let up = probe_metric(&d, "llmprobe_probe_success", &[("target", "t")]).await;
        (ok >= 2.0 && up == Some(1.0))
            .then_some(())
            .ok_or(format!("ok {ok}, success {up:?}"))
    })
    .await;
    let addr = sim.stop().await;
    let ok_at_stop = outcome_count(&d, "ok").await;
    poll("success 0 after the stop", LIMIT, || async {
        let up = probe_metric(&d, "llmprobe_probe_success", &[("target", "t")]).await;
        (up == Some(0.0)).then_some(()).ok_or(format!("{up:?}"))
    })
    .await;
    // The first probe after the outage reported it: none was served since.
    assert!(outcome_count(&d, "ok").await <= ok_at_stop + 1.0);
    assert!(outcome_count(&d, "connect_error").await >= 1.0);
    let last_ok = probe_metric(
        &d,
        "llmprobe_probe_last_success_timestamp_seconds",
        &[("target", "t")],
    )
    .await
    .unwrap();
    assert!(last_ok > 1.7e9, "{last_ok}");

    let sim = Restartable::on(&addr.to_string(), profile("stub")).await;
    let failed = outcome_count(&d, "connect_error").await;
    poll("success 1 once the server is back", LIMIT, || async {
        let up = probe_metric(&d, "llmprobe_probe_success", &[("target", "t")]).await;
        (up == Some(1.0)).then_some(()).ok_or(format!("{up:?}"))
    })
    .await;
    assert!(outcome_count(&d, "ok").await > ok_at_stop);
    assert!(outcome_count(&d, "connect_error").await >= failed);
    d.shutdown.cancel();
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reasoning_model_whose_budget_goes_on_thinking_is_served_not_failed() {
    let rest = "targets:\n  - name: t\n    simulator: { profile: stub, reasoning_tokens: 32 }\n    model: m\n";
    let d = Daemon::start(config(
        "{ interval: 200ms, max_completion_tokens: 16, seed: 3 }",
        rest,
    ))
    .await;
    poll("three reasoning_budget probes", LIMIT, || async {
        let n = outcome_count(&d, "reasoning_budget").await;
        (n >= 3.0).then_some(()).ok_or(format!("{n}"))
    })
    .await;
    let text = d.get("/metrics").await;
    let t = [("target", "t")];
    assert_eq!(metric(&text, "llmprobe_probe_success", &t), Some(1.0));
    for bad in ["ok", "http_error", "protocol_error", "timeout"] {
        let n = metric(
            &text,
            "llmprobe_probe_requests_total",
            &[("target", "t"), ("outcome", bad)],
        );
        assert_eq!(n, Some(0.0), "{bad}");
    }
    // Every output token was thinking, and the budget was the probe's.
    let tokens = |kind| {
        metric(
            &text,
            "llmprobe_probe_tokens_total",
            &[("target", "t"), ("kind", kind)],
        )
        .unwrap()
    };
    let probes = metric(
        &text,
        "llmprobe_probe_requests_total",
        &[("target", "t"), ("outcome", "reasoning_budget")],
    )
    .unwrap();
    assert_eq!(tokens("output"), 16.0 * probes);
    assert_eq!(tokens("reasoning"), tokens("output"));
    d.shutdown.cancel();
}

/// What the idle-sensitive server saw.
#[derive(Default)]
struct Idle {
    last_end: Mutex<Option<Instant>>,
    slow: AtomicUsize,
    fast: AtomicUsize,
}

/// Answers 8 tokens; the first token takes 1.5 s after more than 1.3 s
/// without a request (a model loaded again), 10 ms otherwise.
async fn idle_sensitive(State(seen): State<Arc<Idle>>) -> axum::response::Response {
    let idle = seen
        .last_end
        .lock()
        .unwrap()
        .map_or(true, |t| t.elapsed() > Duration::from_millis(1300));
    let delay = if idle {
        seen.slow.fetch_add(1, Ordering::SeqCst);
        Duration::from_millis(1500)
    } else {
        seen.fast.fetch_add(1, Ordering::SeqCst);
        Duration::from_millis(10)
    };
    *seen.last_end.lock().unwrap() = Some(Instant::now() + Duration::from_secs(3600));
    tokio::time::sleep(delay).await;
    *seen.last_end.lock().unwrap() = Some(Instant::now());
    answer(8)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_slow_only_after_idling_is_cold_and_kept_out_of_the_warm_histogram() {
    let seen = Arc::new(Idle::default());
    let app = Router::new()
        .route("/v1/chat/completions", post(idle_sensitive))
        .with_state(seen.clone());
    let (_served, rest) = target_on(app, "").await;
    let d = Daemon::start(config("{ interval: 1s, cold_after: 1s, seed: 11 }", &rest)).await;
    let t = [("target", "t")];
    poll(
        "two cold and three warm probes",
        Duration::from_secs(90),
        || async {
            let text = d.get("/metrics").await;
            let cold = metric(&text, "llmprobe_probe_cold_ttft_seconds_count", &t).unwrap_or(0.0);
            let warm = metric(&text, "llmprobe_probe_ttft_seconds_count", &t).unwrap_or(0.0);
            (cold >= 2.0 && warm >= 3.0)
                .then_some(())
                .ok_or(format!("cold {cold}, warm {warm}"))
        },
    )
    .await;
    let text = d.get("/metrics").await;
    let warm = metric(&text, "llmprobe_probe_ttft_seconds_count", &t).unwrap();
    let warm_fast = metric(
        &text,
        "llmprobe_probe_ttft_seconds_bucket",
        &[("target", "t"), ("le", "1")],
    )
    .unwrap();
    assert_eq!(
        warm_fast, warm,
        "a slow (cold) TTFT reached the warm histogram"
    );
    let cold = metric(&text, "llmprobe_probe_cold_ttft_seconds_count", &t).unwrap();
    let cold_fast = metric(
        &text,
        "llmprobe_probe_cold_ttft_seconds_bucket",
        &[("target", "t"), ("le", "1")],
    )
    .unwrap();
    assert!(cold - cold_fast >= 1.0, "no slow cold start seen: {cold}");
    assert!(seen.slow.load(Ordering::SeqCst) >= 1);
    d.shutdown.cancel();
}

/// What the pause-checking server saw.
#[derive(Default)]
struct Lanes {
    /// Sweep requests in flight (any budget but the probe's 16 tokens).
    sweeping: AtomicUsize,
    probes: AtomicUsize,
    probes_in_flight: AtomicUsize,
    /// A probe arrived while a sweep request was in flight, or beside
    /// another probe.
    clash: AtomicBool,
}

async fn lanes(State(seen): State<Arc<Lanes>>, body: String) -> axum::response::Response {
    let probe = body.contains("\"max_completion_tokens\":16");
    if probe {
        seen.probes.fetch_add(1, Ordering::SeqCst);
        if seen.sweeping.load(Ordering::SeqCst) > 0
            || seen.probes_in_flight.fetch_add(1, Ordering::SeqCst) > 0
        {
            seen.clash.store(true, Ordering::SeqCst);
        }
    } else {
        seen.sweeping.fetch_add(1, Ordering::SeqCst);
    }
    tokio::time::sleep(Duration::from_millis(30)).await;
    if probe {
        seen.probes_in_flight.fetch_sub(1, Ordering::SeqCst);
    } else {
        seen.sweeping.fetch_sub(1, Ordering::SeqCst);
    }
    answer(4)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_pause_while_the_target_is_swept() {
    let seen = Arc::new(Lanes::default());
    let app = Router::new()
        .route("/v1/chat/completions", post(lanes))
        .with_state(seen.clone());
    let (_served, rest) = target_on(app, "    max_tokens_field: max_completion_tokens\n").await;
    let path = write_config(
        &Yaml {
            interval: "300ms",
            levels: "[1, 2, 4]",
            requests_per_level: "3x",
            probe: "{ interval: 100ms, seed: 5 }",
            rest: &rest,
            ..Yaml::default()
        }
        .render(),
    );
    let d = Daemon::start(path).await;
    let t = [("target", "t"), ("reason", "sweeping")];
    poll(
        "probes skipped for sweeps, and some sent",
        LIMIT,
        || async {
            let skipped = probe_metric(&d, "llmprobe_probe_skipped_total", &t)
                .await
                .unwrap_or(0.0);
            let text = d.get("/metrics").await;
            let sweeps = metric_sum(&text, "llmprobe_sweeps_total", &[("target", "t")]);
            let probes = seen.probes.load(Ordering::SeqCst);
            (skipped >= 3.0 && probes >= 5 && sweeps >= 3.0)
                .then_some(())
                .ok_or(format!(
                    "skipped {skipped}, probes {probes}, sweeps {sweeps}"
                ))
        },
    )
    .await;
    assert!(
        !seen.clash.load(Ordering::SeqCst),
        "a probe ran beside a sweep's request or another probe"
    );
    d.shutdown.cancel();
}

/// Answers at once, except the third probe, which hangs 2 s; counts the
/// probes' arrivals.
#[derive(Default)]
struct Stall {
    arrivals: Mutex<Vec<Instant>>,
}

async fn stall(State(seen): State<Arc<Stall>>, body: String) -> axum::response::Response {
    let probe = body.contains("\"max_completion_tokens\":16");
    let n = if probe {
        let mut a = seen.arrivals.lock().unwrap();
        a.push(Instant::now());
        a.len()
    } else {
        0
    };
    if n == 3 {
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    answer(1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_stalled_probe_the_missed_ones_are_skipped_not_sent_in_a_burst() {
    let seen = Arc::new(Stall::default());
    let app = Router::new()
        .route("/v1/chat/completions", post(stall))
        .with_state(seen.clone());
    // One sweep at the start (then one an hour), then only probes.
    let (_served, rest) = target_on(
        app,
        "    max_tokens_field: max_completion_tokens\n    warmup_requests: 0\n",
    )
    .await;
    let d = Daemon::start(config("{ interval: 100ms, seed: 9 }", &rest)).await;
    poll(
        "overlapping probes skipped, and probes after the stall",
        LIMIT,
        || async {
            let overlap = probe_metric(
                &d,
                "llmprobe_probe_skipped_total",
                &[("target", "t"), ("reason", "overlap")],
            )
            .await
            .unwrap_or(0.0);
            let n = seen.arrivals.lock().unwrap().len();
            (overlap >= 3.0 && n >= 20)
                .then_some(())
                .ok_or(format!("overlap {overlap}, arrivals {n}"))
        },
    )
    .await;
    d.shutdown.cancel();
    let arrivals = seen.arrivals.lock().unwrap().clone();
    // The probes that followed the 2 s stall came one by one, as
    // scheduled after it: no three within 5 ms (the catch-up burst a
    // queue of missed arrivals would send).
    let stalled = arrivals
        .windows(2)
        .position(|w| w[1] - w[0] >= Duration::from_millis(1900))
        .expect("a 2 s gap at the stall");
    let after = &arrivals[stalled + 1..];
    assert!(after.len() >= 10, "{}", after.len());
    let burst = after
        .windows(3)
        .filter(|w| w[2] - w[0] < Duration::from_millis(5))
        .count();
    assert_eq!(burst, 0, "three probes within 5 ms after the stall");
}

/// Answers at once; the handler of the third probe blocks its thread for
/// 1.5 s before answering.
#[derive(Default)]
struct Block {
    probes: AtomicUsize,
}

async fn block(State(seen): State<Arc<Block>>, body: String) -> axum::response::Response {
    let probe = body.contains("\"max_completion_tokens\":16");
    if probe && seen.probes.fetch_add(1, Ordering::SeqCst) + 1 == 3 {
        // On a one-thread runtime this stalls the daemon beside it too: the
        // host stalls while the probe waits for its first token.
        std::thread::sleep(Duration::from_millis(1500));
    }
    answer(1)
}

#[tokio::test(flavor = "current_thread")]
async fn a_probe_slowed_by_llmprobes_own_stall_stays_out_of_the_ttft_histogram() {
    let seen = Arc::new(Block::default());
    let app = Router::new()
        .route("/v1/chat/completions", post(block))
        .with_state(seen.clone());
    let (_served, rest) = target_on(
        app,
        "    max_tokens_field: max_completion_tokens\n    warmup_requests: 0\n",
    )
    .await;
    let d = Daemon::start(config("{ interval: 200ms, seed: 9 }", &rest)).await;
    let t = [("target", "t")];
    poll("the stalled probe, and probes after it", LIMIT, || async {
        let stalled = probe_metric(&d, "llmprobe_probe_client_stalled_total", &t).await;
        let ok = outcome_count(&d, "ok").await;
        (stalled == Some(1.0) && ok >= 6.0)
            .then_some(())
            .ok_or(format!("stalled {stalled:?}, ok {ok}"))
    })
    .await;
    let text = d.get("/metrics").await;
    d.shutdown.cancel();
    let ok = metric(
        &text,
        "llmprobe_probe_requests_total",
        &[("target", "t"), ("outcome", "ok")],
    );
    let warm = metric(&text, "llmprobe_probe_ttft_seconds_count", &t);
    let fast = metric(
        &text,
        "llmprobe_probe_ttft_seconds_bucket",
        &[("target", "t"), ("le", "1")],
    );
    // Served, so counted as such; its 1.5 s TTFT is not the server's.
    assert_eq!(warm, ok.map(|n| n - 1.0), "{text}");
    assert_eq!(fast, warm, "a TTFT over 1 s was observed:\n{text}");
}

#[test]
fn check_config_states_the_probes_cost_and_warns_when_a_reasoning_model_budget_is_small() {
    let check = |probe: &str, simulator: &str| {
        let rest = format!("targets:\n  - name: t\n    simulator: {simulator}\n    model: m\n");
        let path = write_config(
            &Yaml {
                probe,
                rest: &rest,
                ..Yaml::default()
            }
            .render(),
        );
        let out = support::binary::llmprobe()
            .args(["check-config", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let thinking = "{ profile: stub, reasoning_tokens: 64 }";
    let text = check("{ interval: 30s }", thinking);
    assert!(
        text.contains("one every 30s on average (Poisson), workload chat, at most 16 output tokens each (about 2880 probes, 46080 output tokens a day)"),
        "{text}"
    );
    assert!(
        text.contains("warning: m reasons before it answers"),
        "{text}"
    );
    let text = check("{ interval: 30s, max_completion_tokens: 2048 }", thinking);
    assert!(!text.contains("warning"), "{text}");
    let text = check("{ interval: 30s }", "{ profile: stub }");
    assert!(!text.contains("warning"), "{text}");
    let text = check("{ interval: 0s }", "{ profile: stub }");
    assert!(text.contains("probes between sweeps: off"), "{text}");
}
