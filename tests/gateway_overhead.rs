//! Gateway overhead end to end: a real reverse proxy (nginx) and a test proxy
//! with a known delay, each in front of the built-in stub engine, measured
//! interleaved against the same stub reached directly; and the daemon
//! publishing the result.

mod support;

use std::net::SocketAddr;
use std::ops::Range;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, Response, StatusCode};
use axum::serve::ListenerExt;
use tokio_util::sync::CancellationToken;

use llmprobe::stats::report::PairReport;
use support::binary::{self, llmprobe};
use support::config::{self, write_config, Yaml};
use support::daemon::Daemon;
use support::exposition::metric;
use support::nginx::Nginx;
use support::sim::{self as engine, SimServer};

/// Stops a server started by the test when dropped, even on panic.
struct Stop(CancellationToken);

impl Drop for Stop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// The built-in stub engine on a loopback port chosen by the system.
async fn start_stub() -> (SocketAddr, SimServer) {
    let stub = SimServer::start(engine::profile("stub")).await;
    (stub.addr, stub)
}

// ---------------------------------------------------------------------------
// A test proxy that waits a known time before forwarding.
// ---------------------------------------------------------------------------

#[derive(Clone)]
struct Proxy {
    client: reqwest::Client,
    upstream: SocketAddr,
    delay: Duration,
}

async fn forward(State(p): State<Proxy>, req: Request) -> Response<Body> {
    let path = req
        .uri()
        .path_and_query()
        .map_or("/".to_string(), |pq| pq.to_string());
    let body = match axum::body::to_bytes(req.into_body(), 1 << 20).await {
        Ok(b) => b,
        Err(_) => return status(StatusCode::BAD_REQUEST),
    };
    // The known cost of this gateway: the request is held before it is sent on.
    tokio::time::sleep(p.delay).await;
    let upstream = p
        .client
        .post(format!("http://{}{path}", p.upstream))
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await;
    let Ok(upstream) = upstream else {
        return status(StatusCode::BAD_GATEWAY);
    };
    let mut resp = Response::builder().status(upstream.status().as_u16());
    if let Some(ct) = upstream.headers().get(header::CONTENT_TYPE) {
        resp = resp.header(header::CONTENT_TYPE, ct.as_bytes());
    }
    // Streamed through as it arrives, like a gateway with buffering off.
    resp.body(Body::from_stream(upstream.bytes_stream()))
        .unwrap_or_else(|_| status(StatusCode::BAD_GATEWAY))
}

fn status(code: StatusCode) -> Response<Body> {
    let mut r = Response::new(Body::from(Bytes::new()));
    *r.status_mut() = code;
    r
}

/// A proxy to `upstream` that holds each request `delay` before forwarding it.
/// It runs on a thread and runtime of its own, as a gateway runs in a
/// process of its own: its work must not hold up the measuring client's
/// runtime threads, which would add to both sides' noise.
fn start_delay_proxy(upstream: SocketAddr, delay: Duration) -> (SocketAddr, Stop) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let token = stop.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let client = reqwest::Client::builder()
                .no_proxy()
                .tcp_nodelay(true)
                .build()
                .unwrap();
            let app = axum::Router::new().fallback(forward).with_state(Proxy {
                client,
                upstream,
                delay,
            });
            // Small writes must leave at once, as from the stub and from nginx.
            let listener = tokio::net::TcpListener::from_std(listener)
                .unwrap()
                .tap_io(|tcp| {
                    let _ = tcp.set_nodelay(true);
                });
            axum::serve(listener, app)
                .with_graceful_shutdown(token.cancelled_owned())
                .await
        })
    });
    (addr, Stop(stop))
}

// ---------------------------------------------------------------------------
// Configurations and measurement.
// ---------------------------------------------------------------------------

/// A config with `direct` (the stub) and `through` (the gateway) and one pair.
fn pair_config(direct: SocketAddr, through: SocketAddr, pair: &str) -> String {
    Yaml {
        jitter: "10%",
        warmup_requests: 2,
        levels: "[1, 2]",
        requests_per_level: "2x",
        max_completion_tokens: 16,
        prompts: r#"["hello there", "a second prompt, a little longer than the first"]"#,
        rest: &format!(
            r#"
targets:
  - name: direct
    base_url: http://{direct}/v1
    model: sim-stub
  - name: through
    base_url: http://{through}/v1
    model: sim-stub
gateway_pairs:
  - {{ name: gw, direct: direct, through: through, {pair} }}
"#
        ),
        ..Yaml::default()
    }
    .render()
}

async fn measure(direct: SocketAddr, through: SocketAddr, pair: &str) -> PairReport {
    let cfg = config::load(&pair_config(direct, through, pair));
    let mut reports = llmprobe::schedule::once::measure_pairs(
        &cfg,
        &[],
        std::sync::Arc::new(llmprobe::sweep::NoObserver),
    )
    .await
    .unwrap();
    assert_eq!(reports.len(), 1);
    let r = reports.remove(0);
    eprintln!(
        "{}",
        llmprobe::faces::text::pairs_table(std::slice::from_ref(&r))
    );
    assert!(r.success, "{:?}", r.error);
    r
}

fn ms(v: Option<f64>) -> f64 {
    v.expect("a percentile") * 1000.0
}

/// The p50 latency and TTFT overheads, in ms, both within `bounds`.
fn assert_p50_overheads_within(what: &str, r: &PairReport, bounds: Range<f64>) {
    let lat = ms(r.latency_overhead_seconds.p50);
    let ttft = ms(r.ttft_overhead_seconds.p50);
    let lat95 = ms(r.latency_overhead_seconds.p95);
    eprintln!(
        "{what}: latency overhead p50 {lat:.3} ms p95 {lat95:.3} ms, ttft overhead p50 {ttft:.3} ms"
    );
    assert!(bounds.contains(&lat), "latency overhead p50 {lat:.3} ms");
    assert!(bounds.contains(&ttft), "ttft overhead p50 {ttft:.3} ms");
}

/// nginx (one worker, keepalive upstream, no buffering) in front of the stub
/// on loopback. Every request through it crosses two more loopback sockets
/// and nginx's parsing and forwarding: about 0.06 ms here at concurrency 1,
/// never less than nothing. The p50 difference of 200 interleaved requests
/// per side is far steadier than single requests, but on two loaded cores
/// scheduling noise still moves each median by some tens of microseconds, so
/// the lower bound allows -0.1 ms rather than demanding a strictly positive
/// value; the upper bound of 3 ms is well above what nginx costs on loopback
/// and well below what a misconfiguration (buffering, a new upstream
/// connection per request, Nagle's 40 ms) would add.
///
/// At concurrency 4 the single worker handles the four requests of a batch
/// one after the other while competing for two shared cores with the test's
/// runtime and the stub: 0.3 ms typically, 2 ms seen under load. Its bounds
/// are wider (-0.5 ms, 10 ms) and still catch the misconfigurations above.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_overhead_is_positive_and_small() {
    let (stub, _stub) = start_stub().await;
    let nginx = Nginx::start(stub);
    for (pair, bounds) in [
        ("requests: 200", -0.1..3.0),
        ("requests: 200, concurrency: 4", -0.5..10.0),
    ] {
        let r = measure(stub, nginx.addr, pair).await;
        assert_eq!(r.direct.outcomes["ok"], 200);
        assert_eq!(r.through.outcomes["ok"], 200);
        assert_eq!(r.latency_overhead_seconds.count, 200);
        assert_p50_overheads_within(&format!("nginx ({pair})"), &r, bounds);
    }
    drop(nginx);
}

/// A proxy that holds every request 25 ms. tokio's timers never fire early
/// (they round up to the next millisecond), so the added time is at least
/// 25 ms and the lower bound only allows -1 ms for the two medians' own
/// noise. Above it come the proxy's own work (a debug build of axum, hyper
/// and reqwest: 1.5 to 2.2 ms measured with no delay at all), up to 1 ms of
/// timer rounding, and scheduling on two loaded cores (26.8 to 30.9 ms
/// measured at concurrency 1): +8 ms covers them and still fails on a doubled
/// delay, a missed interleaving or a measurement that counted connection
/// set-up.
///
/// At concurrency 4 the four requests of a batch also queue for the proxy's
/// debug-build work on its one thread (about 2 ms each, so up to 6 ms before
/// the median request is through), and the two shared cores serve four
/// times the work at once: 28.1 to 35.1 ms measured with the other tests
/// running; +20 ms there, which still fails on a missing or doubled delay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn known_delay_is_measured_within_tolerance() {
    let (stub, _stub) = start_stub().await;
    let delay = Duration::from_millis(25);
    let (proxy, _proxy) = start_delay_proxy(stub, delay);
    for (pair, bounds) in [
        ("requests: 40", 24.0..33.0),
        ("requests: 80, concurrency: 4", 24.0..45.0),
    ] {
        let r = measure(stub, proxy, pair).await;
        assert_eq!(r.latency_overhead_seconds.count, r.direct.requests as usize);
        assert_p50_overheads_within(&format!("delay proxy ({pair})"), &r, bounds);
    }
}

/// Two identical stub engines, one as `direct` and one as `through`: no
/// gateway, so the overhead must come out near zero, whichever side goes
/// first; a bias of the method itself (one side always measured on warmer
/// connections or later in a batch) would show here. ±0.25 ms leaves room
/// for the medians' scheduling noise on two loaded cores (0.000 ms seen).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_sides_measure_no_overhead() {
    let (a, _a) = start_stub().await;
    let (b, _b) = start_stub().await;
    let r = measure(a, b, "requests: 200").await;
    let lat = ms(r.latency_overhead_seconds.p50);
    eprintln!("identical stubs: latency overhead p50 {lat:.3} ms");
    assert!(
        (-0.25..0.25).contains(&lat),
        "latency overhead p50 {lat:.3} ms"
    );
}

/// The daemon measures the pair on its schedule, publishes both quantities
/// with their sample count, and forgets the pair when a reload removes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_publishes_gateway_overhead() {
    let (stub, _stub) = start_stub().await;
    let (proxy, _proxy) = start_delay_proxy(stub, Duration::from_millis(10));
    let yaml = pair_config(stub, proxy, "requests: 12, concurrency: 2");
    let d = Daemon::start(write_config(&yaml)).await;
    let samples = |t: &str, quantity: &str| {
        metric(
            t,
            "llmprobe_gateway_overhead_samples",
            &[("pair", "gw"), ("quantity", quantity)],
        )
    };
    let text = d
        .wait_for(Duration::from_secs(30), "gateway overhead", |t| {
            samples(t, "latency").is_some() && samples(t, "ttft").is_some()
        })
        .await;
    assert_eq!(samples(&text, "latency"), Some(12.0));
    assert_eq!(samples(&text, "ttft"), Some(12.0));
    for quantity in ["latency", "ttft"] {
        for percentile in ["50", "95", "99"] {
            let v = metric(
                &text,
                "llmprobe_gateway_overhead_seconds",
                &[
                    ("pair", "gw"),
                    ("quantity", quantity),
                    ("percentile", percentile),
                ],
            );
            assert!(v.is_some(), "{quantity} p{percentile} missing:\n{text}");
        }
    }
    let p50 = metric(
        &text,
        "llmprobe_gateway_overhead_seconds",
        &[
            ("pair", "gw"),
            ("quantity", "latency"),
            ("percentile", "50"),
        ],
    )
    .unwrap();
    // 10 ms held by the proxy; the bounds as in the known-delay test.
    assert!((0.009..0.025).contains(&p50), "latency overhead p50 {p50}");
    // Pair requests are real requests to the targets: they count there too.
    assert!(
        metric(
            &text,
            "llmprobe_requests_total",
            &[("target", "through"), ("outcome", "ok")]
        )
        .unwrap_or(0.0)
            >= 12.0
    );

    // A reload without the pair drops its series; the targets stay.
    let without = yaml.split("gateway_pairs:").next().unwrap().to_string();
    std::fs::write(&d.path, without).unwrap();
    d.signal_reload().await;
    d.wait_for(Duration::from_secs(30), "pair forgotten", |t| {
        !t.contains("llmprobe_gateway_overhead_seconds{")
            && !t.contains("llmprobe_gateway_overhead_samples{")
            && metric(t, "llmprobe_config_last_reload_successful", &[]) == Some(1.0)
    })
    .await;
    d.stop().await;
}

/// `llmprobe sweep` measures the pair after the targets, prints the overhead
/// table, adds `gateway_pairs` to the JSON document, and leaves out pairs
/// whose targets were not both selected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_command_reports_pairs() {
    let (stub, _stub) = start_stub().await;
    let (proxy, _proxy) = start_delay_proxy(stub, Duration::from_millis(5));
    let path = write_config(&pair_config(stub, proxy, "requests: 8"));
    let run = |args: &[&str]| {
        let mut command = llmprobe();
        command.args(args);
        binary::output(command)
    };
    let p = path.display().to_string();
    let out = run(&["sweep", "--config", &p, "--format", "json"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["format_version"], 1);
    assert_eq!(doc["targets"].as_array().unwrap().len(), 2);
    let pair = &doc["gateway_pairs"][0];
    assert_eq!(pair["pair"], "gw");
    assert_eq!(pair["success"], true);
    assert_eq!(pair["direct"]["target"], "direct");
    assert_eq!(pair["through"]["target"], "through");
    assert_eq!(pair["latency_overhead_seconds"]["count"], 8);
    assert_eq!(pair["ttft_overhead_seconds"]["count"], 8);
    let p50 = pair["latency_overhead_seconds"]["p50"].as_f64().unwrap();
    assert!((0.004..0.02).contains(&p50), "latency overhead p50 {p50}");
    assert!(pair["direct"]["latency_seconds"]["p95"].as_f64().is_some());

    let out = run(&["sweep", "--config", &p]).await;
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{table}");
    assert!(table.contains("gateway overhead"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.trim_start().starts_with("gw ") && l.contains("latency")),
        "{table}"
    );

    let out = run(&[
        "sweep", "--config", &p, "--target", "direct", "--format", "json",
    ])
    .await;
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["gateway_pairs"], serde_json::json!([]));
}
