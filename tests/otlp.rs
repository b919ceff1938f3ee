//! The OTLP sink against a collector stand-in on a loopback port, which
//! decodes every export with prost (messages declared from the
//! OpenTelemetry protos, not the sink's own encoder): the GenAI client
//! histograms carry the conventions' attributes and count what `/metrics`
//! counts, the knee gauge equals `/metrics`'s; a collector that cannot be
//! reached costs the sweeps nothing and its drops are counted; a reload
//! that changes only `sinks.otlp` rebuilds that sink alone; a header's
//! secret is sent and never logged.

mod support;

#[path = "otlp/proto.rs"]
mod proto;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use prost::Message;

use llmprobe::sinks::otlp::gauges;
use llmprobe::stats::quantity::Quantity;
use support::binary::Running;
use support::config::{write_config, Yaml};
use support::daemon::Daemon;
use support::exposition::{metric, metric_sum};
use support::ports::free_port;
use support::sim::{profile, SimServer};
use support::wait;

const DURATION: &str = "gen_ai.client.operation.duration";
const TOKENS: &str = "gen_ai.client.token.usage";
const TTFC: &str = "gen_ai.client.operation.time_to_first_chunk";
const TPOC: &str = "gen_ai.client.operation.time_per_output_chunk";
const KNEE: &str = "llmprobe.capacity.knee_concurrency";
const DROPPED: &str = "llmprobe_otlp_dropped_data_points_total";

/// What the stand-in collector received.
#[derive(Default)]
struct Collector {
    exports: Mutex<Vec<(HeaderMap, proto::ExportMetricsServiceRequest)>>,
    /// Answer 401 quoting the Authorization header, as a careless
    /// collector would.
    refuse: AtomicBool,
}

impl Collector {
    fn count(&self) -> usize {
        self.exports.lock().unwrap().len()
    }

    fn latest(&self) -> Option<(HeaderMap, proto::ExportMetricsServiceRequest)> {
        self.exports.lock().unwrap().last().cloned()
    }
}

async fn receive(
    State(c): State<Arc<Collector>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    let Ok(request) = proto::ExportMetricsServiceRequest::decode(body.as_ref()) else {
        return (StatusCode::BAD_REQUEST, "not an export request".into());
    };
    c.exports.lock().unwrap().push((headers.clone(), request));
    if c.refuse.load(Ordering::SeqCst) {
        let auth = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        return (
            StatusCode::UNAUTHORIZED,
            format!("invalid credentials: {auth}"),
        );
    }
    (StatusCode::OK, String::new())
}

/// A collector stand-in serving `POST /v1/metrics`.
async fn collector() -> (Arc<Collector>, support::server::Served) {
    let c = Arc::new(Collector::default());
    let app = Router::new()
        .route("/v1/metrics", post(receive))
        .with_state(c.clone());
    (c, support::server::serve(app).await)
}

/// An attribute set as text.
fn attrs(kvs: &[proto::KeyValue]) -> BTreeMap<String, String> {
    kvs.iter()
        .map(|kv| {
            let v = match kv.value.as_ref().and_then(|v| v.value.clone()) {
                Some(proto::Any::String(s)) => s,
                Some(proto::Any::Int(i)) => i.to_string(),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), v)
        })
        .collect()
}

fn metrics<'a>(
    req: &'a proto::ExportMetricsServiceRequest,
    name: &'a str,
) -> impl Iterator<Item = &'a proto::Metric> + 'a {
    req.resource_metrics
        .iter()
        .flat_map(|r| &r.scope_metrics)
        .flat_map(|s| &s.metrics)
        .filter(move |m| m.name == name)
}

/// Every histogram point of `name`: its attributes and the point.
fn histogram(
    req: &proto::ExportMetricsServiceRequest,
    name: &str,
) -> Vec<(BTreeMap<String, String>, proto::HistogramDataPoint)> {
    metrics(req, name)
        .flat_map(|m| match &m.data {
            Some(proto::Data::Histogram(h)) => h.data_points.clone(),
            _ => Vec::new(),
        })
        .map(|p| (attrs(&p.attributes), p))
        .collect()
}

/// Every gauge point of `name`: its attributes and value.
fn gauge(
    req: &proto::ExportMetricsServiceRequest,
    name: &str,
) -> Vec<(BTreeMap<String, String>, f64)> {
    metrics(req, name)
        .flat_map(|m| match &m.data {
            Some(proto::Data::Gauge(g)) => g.data_points.clone(),
            _ => Vec::new(),
        })
        .map(|p| {
            let v = match p.value {
                Some(proto::NumberValue::AsDouble(v)) => v,
                Some(proto::NumberValue::AsInt(i)) => i as f64,
                None => f64::NAN,
            };
            (attrs(&p.attributes), v)
        })
        .collect()
}

fn count(points: &[(BTreeMap<String, String>, proto::HistogramDataPoint)]) -> u64 {
    points.iter().map(|(_, p)| p.count).sum()
}

/// A quick sweep's configuration with `targets` and an OTLP section.
fn config(targets: &str, otlp: &str) -> String {
    Yaml {
        levels: "[1, 2]",
        requests_per_level: "1x",
        min_requests_per_level: 4,
        rest: &format!("{targets}\nsinks:\n  otlp:\n{otlp}"),
        ..Default::default()
    }
    .render()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_genai_histograms_and_the_knee_reach_the_collector_as_metrics_counts_them() {
    let sim = SimServer::start(profile("tiny")).await;
    let (collector, served) = collector().await;
    let targets = format!(
        "targets:\n  - name: sim\n    base_url: {}/v1\n    model: m",
        sim.url()
    );
    let otlp = format!(
        "    endpoint: http://{}\n    interval: 1s\n    headers:\n      x-scope-orgid: team-a",
        served.addr
    );
    // One sweep, then none for an hour: the totals stand still.
    let yaml = config(&targets, &otlp).replace("interval: 1s, jitter", "interval: 1h, jitter");
    let daemon = Daemon::start(write_config(&yaml)).await;

    let (text, (headers, export)) = wait::poll(
        "an export that counts what /metrics counts",
        Duration::from_secs(60),
        || async {
            let text = daemon.metrics().await;
            let sweeps = metric_sum(
                &text,
                "llmprobe_sweeps_total",
                &[("target", "sim"), ("result", "ok")],
            );
            let requests = metric_sum(&text, "llmprobe_requests_total", &[("target", "sim")]);
            let latest = collector.latest().ok_or("no export yet")?;
            let counted = count(&histogram(&latest.1, DURATION));
            let knee = gauge(&latest.1, KNEE);
            if sweeps >= 1.0 && counted as f64 == requests && !knee.is_empty() {
                Ok((text, latest))
            } else {
                Err(format!(
                    "sweeps {sweeps}, requests {requests}, exported {counted}, knee {knee:?}"
                ))
            }
        },
    )
    .await;

    // The transport: protobuf, with the configured header and the pinned
    // revision's schema.
    assert_eq!(headers["content-type"], "application/x-protobuf");
    assert_eq!(headers["x-scope-orgid"], "team-a");
    let scope = &export.resource_metrics[0].scope_metrics[0];
    assert_eq!(scope.schema_url, "https://opentelemetry.io/schemas/1.41.0");
    let resource = attrs(
        &export.resource_metrics[0]
            .resource
            .as_ref()
            .unwrap()
            .attributes,
    );
    assert_eq!(resource["service.name"], "llmprobe");

    let port = sim.addr.port().to_string();
    let ok = check_durations(&export, &text, &port);
    check_chunks_and_tokens(&export, &text, ok);
    check_gauges(&export, &text);

    daemon.stop().await;
    sim.stop().await;
}

/// Every request's duration, with the required attributes; failures
/// carry their outcome class as error.type. The requests that completed.
fn check_durations(export: &proto::ExportMetricsServiceRequest, text: &str, port: &str) -> f64 {
    let durations = histogram(export, DURATION);
    for (a, p) in &durations {
        assert_eq!(a["gen_ai.operation.name"], "chat");
        assert_eq!(a["gen_ai.provider.name"], "openai");
        assert_eq!(a["gen_ai.request.model"], "m");
        assert_eq!(a["server.address"], "127.0.0.1");
        assert_eq!(a["server.port"], port);
        assert_eq!(a["llmprobe.target"], "sim");
        assert_eq!(a["llmprobe.workload"], "chat");
        assert!(
            ["1", "2"].contains(&a["llmprobe.concurrency"].as_str()),
            "{a:?}"
        );
        assert_eq!(p.explicit_bounds[0], 0.01);
        assert_eq!(p.explicit_bounds.len(), 14);
        assert_eq!(p.bucket_counts.iter().sum::<u64>(), p.count);
    }
    let ok = metric(
        text,
        "llmprobe_requests_total",
        &[("target", "sim"), ("outcome", "ok")],
    )
    .unwrap();
    let ok_durations: Vec<_> = durations
        .iter()
        .filter(|(a, _)| !a.contains_key("error.type"))
        .cloned()
        .collect();
    assert_eq!(count(&ok_durations) as f64, ok);
    for (a, p) in durations
        .iter()
        .filter(|(a, _)| a.contains_key("error.type"))
    {
        let outcome = &a["error.type"];
        let n = metric(
            text,
            "llmprobe_requests_total",
            &[("target", "sim"), ("outcome", outcome)],
        );
        assert_eq!(Some(p.count as f64), n, "{outcome}");
    }
    assert!(ok > 0.0, "{ok}");
    ok
}

/// A completed request's first chunk, its gaps and its output tokens.
fn check_chunks_and_tokens(export: &proto::ExportMetricsServiceRequest, text: &str, ok: f64) {
    let ttft = metric_sum(
        text,
        "llmprobe_request_ttft_seconds_count",
        &[("target", "sim")],
    );
    assert_eq!(count(&histogram(export, TTFC)) as f64, ttft);
    assert!(count(&histogram(export, TPOC)) > 0);
    let tokens = histogram(export, TOKENS);
    let output: Vec<_> = tokens
        .iter()
        .filter(|(a, _)| a["gen_ai.token.type"] == "output")
        .cloned()
        .collect();
    assert_eq!(count(&output) as f64, ok);
    let sum: f64 = output.iter().map(|(_, p)| p.sum.unwrap_or(0.0)).sum();
    let output_total = metric_sum(text, "llmprobe_output_tokens_total", &[("target", "sim")]);
    assert_eq!(sum, output_total);
}

/// The capacity and every quantity of every level, as /metrics has them.
fn check_gauges(export: &proto::ExportMetricsServiceRequest, text: &str) {
    let knee = gauge(export, KNEE);
    let expected = metric(
        text,
        "llmprobe_capacity_knee_concurrency",
        &[("target", "sim"), ("workload", "chat")],
    );
    assert_eq!(knee.len(), 1);
    assert_eq!(Some(knee[0].1), expected);
    assert_eq!(knee[0].0["llmprobe.workload"], "chat");
    let recommended = gauge(export, "llmprobe.capacity.recommended_max_in_flight");
    let expected = metric(
        text,
        "llmprobe_recommended_max_in_flight",
        &[("target", "sim")],
    );
    assert_eq!(Some(recommended[0].1), expected);
    assert_eq!(metric(text, DROPPED, &[]), Some(0.0));

    // Every quantity of every level, as /metrics has it (the list of
    // quantities names both).
    for q in Quantity::ALL {
        let points = gauge(export, &gauges::quantity_name(q));
        // None where /metrics has none (no new connection was timed).
        let on_metrics = metric(text, q.spec().metric, &[("target", "sim")]);
        assert_eq!(points.is_empty(), on_metrics.is_none(), "{q:?}");
        for (a, v) in points {
            let mut labels = vec![
                ("target", "sim"),
                ("concurrency", a["llmprobe.concurrency"].as_str()),
            ];
            if let Some(p) = a.get("llmprobe.percentile") {
                labels.push(("percentile", p.as_str()));
            }
            assert_eq!(
                metric(text, q.spec().metric, &labels),
                Some(v),
                "{q:?} {a:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_collector_costs_the_sweeps_nothing_and_its_drops_are_counted() {
    let nobody = free_port();
    let targets = "targets:\n  - name: sim\n    simulator: { profile: tiny }";
    let otlp = format!(
        "    endpoint: http://127.0.0.1:{nobody}/v1/metrics\n    interval: 1s\n    timeout: 500ms"
    );
    let daemon = Daemon::start(write_config(&config(targets, &otlp))).await;
    let text = daemon
        .wait_for(
            Duration::from_secs(60),
            "sweeps and counted drops",
            |text| {
                let sweeps = metric_sum(
                    text,
                    "llmprobe_sweeps_total",
                    &[("target", "sim"), ("result", "ok")],
                );
                sweeps >= 3.0 && metric(text, DROPPED, &[]).is_some_and(|d| d > 0.0)
            },
        )
        .await;
    // Every sweep completed, and /metrics has its results.
    assert_eq!(
        metric_sum(
            &text,
            "llmprobe_sweeps_total",
            &[("target", "sim"), ("result", "failed")]
        ),
        0.0
    );
    assert_eq!(
        metric(&text, "llmprobe_sweep_success", &[("target", "sim")]),
        Some(1.0)
    );
    assert!(metric(
        &text,
        "llmprobe_capacity_knee_concurrency",
        &[("target", "sim")]
    )
    .is_some());
    daemon.stop().await;
}

/// Log output of the in-process daemons, shared with the subscriber.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn lines(&self, needle: &str) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_changes_only_otlp_rebuilds_that_sink_alone() {
    // The only test in this binary that installs a subscriber (global: the
    // daemon's tasks run on the runtime's threads), and the only one that
    // reloads.
    let logs = Logs::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_env_filter("llmprobe=info")
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();
    let (first, first_served) = collector().await;
    let (second, second_served) = collector().await;
    let targets = "targets:\n  - name: sim\n    simulator: { profile: tiny }";
    let otlp = |addr| format!("    endpoint: http://{addr}/v1/metrics\n    interval: 1s");
    let path = write_config(&config(targets, &otlp(first_served.addr)));
    let daemon = Daemon::start(path.clone()).await;
    let with_durations = |c: &Collector| {
        c.latest()
            .is_some_and(|(_, e)| count(&histogram(&e, DURATION)) > 0)
    };
    wait::poll(
        "an export to the first collector",
        Duration::from_secs(60),
        || async {
            if with_durations(&first) {
                Ok(())
            } else {
                Err(format!("{} exports", first.count()))
            }
        },
    )
    .await;

    // Only the endpoint changes.
    std::fs::write(&path, config(targets, &otlp(second_served.addr))).unwrap();
    daemon.signal_reload().await;
    wait::poll(
        "an export to the second collector",
        Duration::from_secs(60),
        || async {
            if with_durations(&second) {
                Ok(())
            } else {
                Err(format!("{} exports", second.count()))
            }
        },
    )
    .await;
    // The first sink's exporter stopped with it.
    let before = first.count();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(first.count(), before, "the replaced sink still exports");

    let rebuilt = logs.lines("sink rebuilt");
    assert_eq!(rebuilt.len(), 1, "{rebuilt:?}");
    assert!(rebuilt[0].contains("otlp"), "{rebuilt:?}");
    assert_eq!(logs.lines("configuration reloaded").len(), 1);
    // Sweeps go on, measured by the loop that never restarted.
    let text = daemon.metrics().await;
    assert!(
        metric_sum(
            &text,
            "llmprobe_sweeps_total",
            &[("target", "sim"), ("result", "ok")]
        ) >= 2.0
    );
    daemon.stop().await;
}

const TOKEN: &str = "otlp-PLANTED-t0ken";
/// Unique to this binary: tests in one binary share the environment.
const TOKEN_VAR: &str = "LLMPROBE_OTLP_TEST_PLANTED_TOKEN";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_secret_is_sent_and_never_logged() {
    let (collector, served) = collector().await;
    collector.refuse.store(true, Ordering::SeqCst);
    let targets = "targets:\n  - name: sim\n    simulator: { profile: tiny }";
    let otlp = format!(
        "    endpoint: http://{}/v1/metrics\n    interval: 1s\n    headers:\n      authorization: {{ env: {TOKEN_VAR}, prefix: \"Bearer \" }}",
        served.addr
    );
    let path = write_config(&config(targets, &otlp));
    let running = Running::start(&path, &[(TOKEN_VAR, TOKEN), ("RUST_LOG", "trace")]);
    running.ready(Duration::from_secs(60)).await;
    wait::poll(
        "a refused export, logged",
        Duration::from_secs(60),
        || async {
            let refused = running.process.stderr().contains("OTLP export refused");
            if collector.count() >= 2 && refused {
                Ok(())
            } else {
                Err(running.process.tail())
            }
        },
    )
    .await;
    running.stop(Duration::from_secs(10));

    let (headers, _) = collector.latest().unwrap();
    assert_eq!(headers["authorization"], format!("Bearer {TOKEN}"));
    let (stdout, stderr) = (running.process.stdout(), running.process.stderr());
    assert!(
        !stderr.contains(TOKEN) && !stdout.contains(TOKEN),
        "the token was logged"
    );
    let refused = stderr
        .lines()
        .find(|l| l.contains("OTLP export refused"))
        .unwrap();
    assert!(
        refused.contains("HTTP 401") && refused.contains("[redacted]"),
        "{refused}"
    );
}
