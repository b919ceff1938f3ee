//! Servers that misbehave on purpose, one test per case of issue 5: each
//! request ends in the outcome class of the design, the class is counted in
//! `llmprobe_requests_total`, the sweep ends in bounded time without a panic,
//! and the next sweep (same client, same connection pool) measures normally.

mod support;

use std::sync::Arc;
use std::time::Duration;

use llmprobe::metrics::Metrics;
use llmprobe::probe::client;
use llmprobe::schedule::endpoint;
use llmprobe::stats::report::SweepReport;
use llmprobe::sweep::{Observer, SweepEnv};
use llmprobe::{config, sweep};
use support::raw::{self, content, finish, good_stream, response, usage, DONE, SSE_HEAD};
use support::{metric, start, write_config, Behavior};
use tokio_util::sync::CancellationToken;

/// Requests per level; two levels (2 and 4 in flight) when the first holds.
const PER_LEVEL: u64 = 4;

/// A sweep that takes longer than this is hung, whatever the server does.
const SWEEP_BOUND: Duration = Duration::from_secs(30);

/// Feeds every counted request into the metrics, as the daemon does.
struct Feed(Arc<Metrics>);

impl Observer for Feed {
    fn request(
        &self,
        target: &config::Target,
        workload: &config::Workload,
        sample: &llmprobe::stats::sample::Sample,
    ) {
        self.0
            .observe_request(&target.name, &target.model, &workload.name, sample);
    }
}

/// One client and one set of metrics, kept across the sweeps of a test.
struct Harness {
    env: SweepEnv,
    metrics: Arc<Metrics>,
}

impl Harness {
    fn new() -> Self {
        let registry = prometheus::Registry::new();
        let metrics = Arc::new(Metrics::new(&registry).unwrap());
        let env = SweepEnv::new(
            client::Client::new(llmprobe::CONNECT_TIMEOUT).unwrap(),
            16,
            CancellationToken::new(),
            Arc::new(Feed(metrics.clone())),
        );
        Harness { env, metrics }
    }

    /// One sweep of target `t1` at `base_url`, bounded in time.
    async fn sweep(&self, base_url: &str, request_timeout: &str) -> SweepReport {
        let path = write_config(&yaml(base_url, request_timeout));
        let cfg = config::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let target = &cfg.targets[0];
        let reachable = endpoint::reach(target).await.unwrap();
        let run = sweep::run(
            &self.env,
            target,
            &reachable.base_url,
            cfg.schedule.sweep_timeout,
        );
        let report = tokio::time::timeout(SWEEP_BOUND, run)
            .await
            .expect("the sweep must end in bounded time");
        self.metrics.publish_sweep(&report);
        report
    }

    /// `llmprobe_requests_total{target="t1", outcome}` as exposed.
    fn counted(&self, outcome: &str) -> u64 {
        let text = self.metrics.encode();
        let want = format!("outcome=\"{outcome}\"");
        text.lines()
            .filter(|l| l.starts_with("llmprobe_requests_total{"))
            .filter(|l| l.contains(&want) && l.contains("target=\"t1\""))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum()
    }

    /// Sweeps the misbehaving server and checks that every request ended in
    /// `outcome`, that the metrics counted them, and that a healthy server
    /// is measured normally afterwards.
    async fn expect(&self, base_url: &str, request_timeout: &str, outcome: &str) -> SweepReport {
        let r = self.sweep(base_url, request_timeout).await;
        let w = &r.workloads[0];
        let total: u64 = w.levels.iter().map(|l| l.requests).sum();
        for l in &w.levels {
            assert_eq!(
                l.outcomes[outcome], l.requests,
                "level {}: {:?} {:?}",
                l.concurrency, l.outcomes, l.error_examples
            );
        }
        if outcome == "ok" {
            assert_eq!(
                w.levels.len(),
                2,
                "both levels within the SLO: {:?}",
                w.capacity.stopped_because
            );
        } else {
            assert_eq!(w.levels.len(), 1, "climbing stops at the first level");
            assert_eq!(w.capacity.knee_concurrency, 0);
            assert!(w.levels[0].error_examples.contains_key(outcome));
        }
        assert_eq!(total, PER_LEVEL * w.levels.len() as u64);
        assert_eq!(self.counted(outcome), total, "counted in /metrics");
        self.next_sweep_is_normal().await;
        r
    }

    /// A healthy server right after: every request ok, the sweep a success.
    async fn next_sweep_is_normal(&self) {
        let before = self.counted("ok");
        let healthy = start(Behavior {
            tokens: 4,
            ..Default::default()
        })
        .await;
        let r = self.sweep(&healthy.base_url(), "5s").await;
        assert!(r.success, "{:?}", r.error);
        let levels = &r.workloads[0].levels;
        assert_eq!(levels.len(), 2);
        assert!(levels.iter().all(|l| l.outcomes["ok"] == PER_LEVEL));
        assert_eq!(self.counted("ok"), before + 2 * PER_LEVEL);
    }
}

/// Levels 2 and 4, four requests each, no warm-up (it would hide nothing
/// but cost time).
fn yaml(base_url: &str, request_timeout: &str) -> String {
    format!(
        r#"
listen: "127.0.0.1:0"
schedule: {{ interval: 1s, jitter: 0%, max_in_flight_total: 16, sweep_timeout: 25s }}
defaults:
  workload: chat
  warmup_requests: 0
  levels: [2, 4]
  requests_per_level: {PER_LEVEL}
  min_requests_per_level: 1
  request_timeout: {request_timeout}
  slo: {{ p95_latency: 5s, max_shed_ratio: 0.05, max_error_ratio: 0.05 }}
workloads:
  chat:
    max_completion_tokens: 16
    prompts: ["hello there"]
targets:
  - name: t1
    base_url: {base_url}
    model: m
"#
    )
}

fn example<'a>(r: &'a SweepReport, outcome: &str) -> &'a str {
    &r.workloads[0].levels[0].error_examples[outcome]
}

// --- Connections that never carry a response -------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_refused_is_a_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    let h = Harness::new();
    let r = h.expect(&url, "2s", "connect_error").await;
    assert!(!r.success, "no request reached a server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unresolvable_name_is_a_connect_error() {
    // `.invalid` never resolves (RFC 6761).
    let h = Harness::new();
    let r = h
        .expect("http://llmprobe-test.invalid/v1", "5s", "connect_error")
        .await;
    assert!(!r.success);
    assert!(example(&r, "connect_error").contains("dns"), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_handshake_failure_is_a_connect_error() {
    // A plain HTTP server spoken to with https://: the handshake gets an
    // HTTP answer instead of a ServerHello.
    let plain = raw::start(|mut c| async move {
        c.write(response("400 Bad Request", &[], "not TLS")).await;
    })
    .await;
    let url = format!("https://{}/v1", plain.addr);
    let h = Harness::new();
    let r = h.expect(&url, "2s", "connect_error").await;
    assert!(!r.success);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_http_at_all_is_a_protocol_error() {
    let s = raw::fixed("SSH-2.0-OpenSSH_9.6\r\n\r\n").await;
    let h = Harness::new();
    h.expect(&s.base_url(), "2s", "protocol_error").await;
}

// --- Stalls and trickles ----------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stall_before_headers_is_a_timeout() {
    let s = raw::start(|mut c| async move {
        if c.read_request().await.is_some() {
            c.wait_closed().await;
        }
    })
    .await;
    let h = Harness::new();
    let r = h.expect(&s.base_url(), "1s", "timeout").await;
    assert!(r.success, "a timeout is a measurement, not a failed sweep");
    // Each request sent once: the level's, plus the uncounted ones before it
    // (the output-limit check, and one per place to open the connections).
    let uncounted = 1 + 2;
    assert_eq!(s.chat_requests().len() as u64, uncounted + PER_LEVEL);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stall_mid_stream_past_the_request_timeout_is_a_timeout() {
    let s = raw::start(|mut c| async move {
        if c.read_request().await.is_some() {
            c.write(format!("{SSE_HEAD}{}{}", content("a"), content("b")))
                .await;
            c.wait_closed().await;
        }
    })
    .await;
    let h = Harness::new();
    h.expect(&s.base_url(), "1s", "timeout").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trickle_of_one_byte_per_second_is_a_timeout() {
    // The limit is on the whole request, not on the gap between reads:
    // a server that keeps sending slowly cannot hold a request forever.
    let s = raw::start(|mut c| async move {
        if c.read_request().await.is_none() {
            return;
        }
        c.write(SSE_HEAD).await;
        for b in good_stream(4).as_bytes() {
            if !c.write([*b]).await {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
    .await;
    let h = Harness::new();
    h.expect(&s.base_url(), "2s", "timeout").await;
}

// --- Broken streams ---------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_mid_stream_is_a_protocol_error() {
    let s = raw::start(|mut c| async move {
        if c.read_request().await.is_some() {
            c.write(format!("{SSE_HEAD}{}{}", content("a"), content("b")))
                .await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            c.reset();
        }
    })
    .await;
    let h = Harness::new();
    let r = h.expect(&s.base_url(), "2s", "protocol_error").await;
    assert!(
        example(&r, "protocol_error").contains("stream broken"),
        "{r:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_done_and_no_finish_reason_is_a_protocol_error() {
    let s = raw::fixed(format!("{SSE_HEAD}{}{}", content("a"), content("b"))).await;
    let h = Harness::new();
    let r = h.expect(&s.base_url(), "2s", "protocol_error").await;
    assert!(example(&r, "protocol_error").contains("without [DONE] or finish_reason"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_done_but_a_finish_reason_is_ok() {
    let s = raw::fixed(format!("{SSE_HEAD}{}{}", content("a"), finish())).await;
    let h = Harness::new();
    h.expect(&s.base_url(), "2s", "ok").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn done_without_finish_reason_is_ok_but_flagged() {
    let s = raw::fixed(format!("{SSE_HEAD}{}{}{DONE}", content("a"), content("b"))).await;
    let h = Harness::new();
    let r = h.expect(&s.base_url(), "2s", "ok").await;
    for l in &r.workloads[0].levels {
        assert_eq!(l.streams_without_finish_reason, l.requests);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_usage_chunk_counts_tokens_from_chunks() {
    let s = raw::fixed(format!(
        "{SSE_HEAD}{}{}{}{DONE}",
        content("a"),
        content("b"),
        finish()
    ))
    .await;
    let h = Harness::new();
    let r = h.expect(&s.base_url(), "2s", "ok").await;
    let l = &r.workloads[0].levels[0];
    assert_eq!(l.token_source, "chunks");
    assert_eq!(l.output_tokens, 2 * PER_LEVEL);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_empty_choices_is_a_protocol_error() {
    let empty = "data: {\"choices\":[]}\n\n";
    let s = raw::fixed(format!("{SSE_HEAD}{empty}{empty}{}{DONE}", usage(0))).await;
    let h = Harness::new();
    let r = h.expect(&s.base_url(), "2s", "protocol_error").await;
    assert!(example(&r, "protocol_error").contains("no generated content"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_choices_between_content_chunks_are_ignored() {
    let empty = "data: {\"choices\":[]}\n\n";
    let s = raw::fixed(format!(
        "{SSE_HEAD}{empty}{}{empty}{}{}{DONE}",
        content("a"),
        content("b"),
        finish()
    ))
    .await;
    let h = Harness::new();
    h.expect(&s.base_url(), "2s", "ok").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_field_mid_stream_is_a_protocol_error() {
    let s = raw::fixed(format!(
        "{SSE_HEAD}{}data: {{\"error\":{{\"message\":\"upstream failed\",\"code\":500}}}}\n\n{DONE}",
        content("a")
    ))
    .await;
    let h = Harness::new();
    let r = h.expect(&s.base_url(), "2s", "protocol_error").await;
    assert_eq!(
        example(&r, "protocol_error"),
        "error event in stream: upstream failed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_event_type_mid_stream_is_a_protocol_error() {
    // `event: error` with data that is not an OpenAI error object: the
    // event type alone says the stream failed.
    let s = raw::fixed(format!(
        "{SSE_HEAD}{}event: error\ndata: {{\"message\":\"engine died\"}}\n\n{}{DONE}",
        content("a"),
        finish()
    ))
    .await;
    let h = Harness::new();
    let r = h.expect(&s.base_url(), "2s", "protocol_error").await;
    assert!(
        example(&r, "protocol_error").contains("engine died"),
        "{r:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_sse_lines_among_good_ones_are_skipped() {
    // Lines without a colon, unknown fields and comments are ignored by the
    // SSE rules; the chunks around them still count.
    let junk = "garbage without colon\nretry: soon\nid\n: comment\nfoo: bar\n";
    let s = raw::fixed(format!(
        "{SSE_HEAD}{junk}{}{junk}{}{}{DONE}",
        content("a"),
        content("b"),
        finish()
    ))
    .await;
    let h = Harness::new();
    h.expect(&s.base_url(), "2s", "ok").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_malformed_sse_lines_is_a_protocol_error() {
    let s = raw::fixed(format!(
        "{SSE_HEAD}dta: {{\"choices\":[]}}\n\ndata{{\"choices\":[{{\"delta\":{{\"content\":\"x\"}}}}]}}\n\n"
    ))
    .await;
    let h = Harness::new();
    h.expect(&s.base_url(), "2s", "protocol_error").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_json_in_a_data_line_is_a_protocol_error() {
    let s = raw::fixed(format!(
        "{SSE_HEAD}{}data: {{\"choices\": [{{\"delta\": \n\n{DONE}",
        content("a")
    ))
    .await;
    let h = Harness::new();
    let r = h.expect(&s.base_url(), "2s", "protocol_error").await;
    assert!(example(&r, "protocol_error").contains("not valid JSON"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_utf8_is_a_protocol_error() {
    let mut body = format!("{SSE_HEAD}{}", content("a")).into_bytes();
    body.extend_from_slice(b"data: {\"choices\":[{\"delta\":{\"content\":\"\xff\xfe\"}}]}\n\n");
    body.extend_from_slice(DONE.as_bytes());
    let s = raw::fixed(body).await;
    let h = Harness::new();
    let r = h.expect(&s.base_url(), "2s", "protocol_error").await;
    assert!(example(&r, "protocol_error").contains("UTF-8"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_megabyte_line_is_cut_off_at_the_line_limit() {
    // Memory stays bounded: the decoder gives up at probe::MAX_LINE_BYTES
    // instead of buffering the line, and the request is dropped.
    let s = raw::start(|mut c| async move {
        if c.read_request().await.is_none() {
            return;
        }
        c.write(format!("{SSE_HEAD}{}data: {{\"x\":\"", content("a")))
            .await;
        let block = vec![b'a'; 64 * 1024];
        for _ in 0..160 {
            if !c.write(&block).await {
                return;
            }
        }
    })
    .await;
    let h = Harness::new();
    let r = h.expect(&s.base_url(), "5s", "protocol_error").await;
    assert_eq!(
        example(&r, "protocol_error"),
        format!(
            "SSE line longer than {} bytes",
            llmprobe::probe::exchange::MAX_LINE_BYTES
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_1_0_with_connection_close_framing_is_ok() {
    let s = raw::fixed(format!(
        "HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n{}",
        good_stream(3)
    ))
    .await;
    let h = Harness::new();
    let r = h.expect(&s.base_url(), "2s", "ok").await;
    assert_eq!(r.workloads[0].levels[0].token_source, "usage");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_keeps_sending_after_done_does_not_hold_the_request() {
    // Keep-alive comments after [DONE], faster than the after-[DONE] grace:
    // the request still ends (ok) soon after [DONE], not at its time limit.
    let s = raw::start(|mut c| async move {
        if c.read_request().await.is_none() {
            return;
        }
        c.write(format!("{SSE_HEAD}{}", good_stream(2))).await;
        for _ in 0..100 {
            if !c.write(": ping\n").await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let h = Harness::new();
    let started = std::time::Instant::now();
    h.expect(&s.base_url(), "4s", "ok").await;
    // Two levels of two rounds each; a request held to its limit would
    // take 4 x 4 s.
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
}

// --- Answers that are not a stream ------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn html_page_with_200_is_a_protocol_error() {
    let s = raw::fixed(response(
        "200 OK",
        &[("content-type", "text/html; charset=utf-8")],
        "<html><body>Welcome to nginx!</body></html>",
    ))
    .await;
    let h = Harness::new();
    let r = h.expect(&s.base_url(), "2s", "protocol_error").await;
    assert!(example(&r, "protocol_error").contains("text/html"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_instead_of_a_stream_is_a_protocol_error() {
    let s = raw::fixed(response(
        "200 OK",
        &[("content-type", "application/json")],
        r#"{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}"#,
    ))
    .await;
    let h = Harness::new();
    let r = h.expect(&s.base_url(), "2s", "protocol_error").await;
    assert!(example(&r, "protocol_error").contains("application/json"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_500_with_a_json_error_is_an_http_error() {
    let s = raw::fixed(response(
        "500 Internal Server Error",
        &[("content-type", "application/json")],
        r#"{"error":{"message":"CUDA out of memory","type":"server_error"}}"#,
    ))
    .await;
    let h = Harness::new();
    let r = h.expect(&s.base_url(), "2s", "http_error").await;
    assert!(example(&r, "http_error").starts_with("HTTP 500: "));
    assert!(example(&r, "http_error").contains("CUDA out of memory"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_503_with_retry_after_is_shed() {
    let s = raw::fixed(response(
        "503 Service Unavailable",
        &[("retry-after", "2")],
        "overloaded",
    ))
    .await;
    let h = Harness::new();
    let r = h.expect(&s.base_url(), "2s", "shed").await;
    assert!(r.success, "503s are counted, they do not fail the sweep");
    assert_eq!(r.workloads[0].levels[0].shed_ratio, 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_503_without_retry_after_is_shed() {
    let s = raw::fixed(response("503 Service Unavailable", &[], "")).await;
    let h = Harness::new();
    h.expect(&s.base_url(), "2s", "shed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_503_whose_body_stalls_is_still_shed() {
    // The status says it all: waiting for the rest of the body would turn
    // a shed request into a timeout.
    let s = raw::start(|mut c| async move {
        if c.read_request().await.is_some() {
            c.write("HTTP/1.1 503 Service Unavailable\r\ncontent-length: 100\r\n\r\nbusy")
                .await;
            c.wait_closed().await;
        }
    })
    .await;
    let h = Harness::new();
    let r = h.expect(&s.base_url(), "3s", "shed").await;
    assert_eq!(example(&r, "shed"), "HTTP 503: busy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_429_is_rate_limited() {
    let s = raw::fixed(response(
        "429 Too Many Requests",
        &[
            ("retry-after-ms", "250"),
            ("x-ratelimit-remaining-requests", "0"),
        ],
        r#"{"error":{"message":"rate limit reached"}}"#,
    ))
    .await;
    let h = Harness::new();
    let r = h.expect(&s.base_url(), "2s", "rate_limited").await;
    assert_eq!(r.workloads[0].levels[0].shed_ratio, 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirect_is_not_followed_and_is_an_http_error() {
    // The key must never go to another location: the other server must
    // see nothing.
    let elsewhere = raw::fixed(format!("{SSE_HEAD}{}", good_stream(2))).await;
    let location = format!("http://{}/v1/chat/completions", elsewhere.addr);
    let s = raw::fixed(response(
        "307 Temporary Redirect",
        &[("location", &location)],
        "",
    ))
    .await;
    let h = Harness::new();
    let r = h.expect(&s.base_url(), "2s", "http_error").await;
    assert!(example(&r, "http_error").contains("redirect not followed"));
    assert!(elsewhere.requests().is_empty(), "the redirect was followed");
}

// --- The daemon: counters on /metrics, one log line per sweep ---------------

/// Collects log lines written through the global subscriber.
#[derive(Clone, Default)]
struct Logs(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_keeps_measuring_counts_outcomes_and_logs_once_per_sweep() {
    // The only test in this binary that installs a subscriber (global,
    // because the daemon's tasks run on the runtime's worker threads).
    let logs = Logs::default();
    let sink = logs.clone();
    tracing_subscriber::fmt()
        .with_env_filter("llmprobe=trace")
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .init();

    let bad = raw::start(|mut c| async move {
        if c.read_request().await.is_some() {
            c.write(format!("{SSE_HEAD}{}", content("a"))).await;
            // Let the client read what came before the reset.
            tokio::time::sleep(Duration::from_millis(50)).await;
            c.reset();
        }
    })
    .await;
    let good = start(Behavior {
        tokens: 3,
        ..Default::default()
    })
    .await;
    let yaml = format!(
        r#"
listen: "127.0.0.1:0"
schedule: {{ interval: 1s, jitter: 0%, max_in_flight_total: 16, sweep_timeout: 20s }}
defaults:
  workload: chat
  warmup_requests: 0
  levels: [2, 4]
  requests_per_level: 4
  min_requests_per_level: 1
  request_timeout: 2s
workloads:
  chat:
    max_completion_tokens: 8
    prompts: ["hi"]
targets:
  - name: daemon-bad
    base_url: {}
    model: m
  - name: daemon-good
    base_url: {}
    model: m
"#,
        bad.base_url(),
        good.base_url()
    );
    let path = write_config(&yaml);
    let cfg = config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let (_reload_tx, reload_rx) = tokio::sync::mpsc::channel(1);
    let daemon = llmprobe::run(&path, cfg, listener, shutdown.clone(), reload_rx);

    let http = reqwest::Client::new();
    let sweeps = |text: &str, t: &str| {
        metric(
            text,
            "llmprobe_sweeps_total",
            &[("target", t), ("result", "ok")],
        )
        .unwrap_or(0.0)
            + metric(
                text,
                "llmprobe_sweeps_total",
                &[("target", t), ("result", "failed")],
            )
            .unwrap_or(0.0)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let observe = async {
        let text = loop {
            let text = http
                .get(format!("http://{addr}/metrics"))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            if sweeps(&text, "daemon-bad") >= 3.0 && sweeps(&text, "daemon-good") >= 3.0 {
                break text;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "three sweeps of each target within 30 s:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        shutdown.cancel();
        text
    };
    let (ran, text) = tokio::join!(daemon, observe);
    ran.unwrap();

    let bad_labels = [("target", "daemon-bad"), ("outcome", "protocol_error")];
    let bad_count = metric(&text, "llmprobe_requests_total", &bad_labels).unwrap();
    assert!(bad_count >= 3.0 * PER_LEVEL as f64, "{bad_count}");
    let good_labels = [("target", "daemon-good"), ("outcome", "ok")];
    assert!(metric(&text, "llmprobe_requests_total", &good_labels).unwrap() >= 24.0);
    assert_eq!(
        metric(
            &text,
            "llmprobe_sweep_success",
            &[("target", "daemon-good")]
        ),
        Some(1.0),
        "the misbehaving target does not disturb the healthy one"
    );
    assert_eq!(
        metric(
            &text,
            "llmprobe_sweep_requests",
            &[
                ("target", "daemon-bad"),
                ("concurrency", "2"),
                ("outcome", "protocol_error")
            ]
        ),
        Some(PER_LEVEL as f64)
    );

    // One line per sweep that says what went wrong, never one per request.
    let logs = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    let bad_lines: Vec<&str> = logs.lines().filter(|l| l.contains("daemon-bad")).collect();
    let sweep_lines = bad_lines
        .iter()
        .filter(|l| l.contains("sweep finished"))
        .count();
    assert!(sweep_lines >= 3, "{logs}");
    assert!(
        bad_lines.len() <= sweep_lines + 2,
        "more than one line per sweep:\n{}",
        bad_lines.join("\n")
    );
    let line = bad_lines
        .iter()
        .find(|l| l.contains("sweep finished"))
        .unwrap();
    assert!(line.contains("protocol_error=4"), "{line}");
    assert!(
        line.contains("stream broken"),
        "says what went wrong: {line}"
    );
    // Nothing at any level logged per request.
    assert!(
        !logs
            .lines()
            .any(|l| l.contains("daemon-good") && !l.contains("sweep")),
        "{logs}"
    );
}
