//! Servers that misbehave on purpose, the cases of issue 5 as one table
//! driven by one runner: each request ends in the outcome class of the
//! design, the class is counted in `llmprobe_requests_total`, the sweep ends
//! in bounded time without a panic, and the next sweep (same client, same
//! connection pool) measures normally; then each case's own checks.
//!
//! The cases run a few at a time; a failure names its case and every
//! failing case is reported. `MISBEHAVING_CASE=word` runs only the cases
//! whose name contains `word`.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use llmprobe::metrics::Metrics;
use llmprobe::probe::tls;
use llmprobe::schedule::endpoint;
use llmprobe::stats::report::SweepReport;
use llmprobe::sweep::{Observer, SweepEnv};
use llmprobe::{config, sweep};
use support::config::{write_config, Yaml};
use support::daemon::Daemon;
use support::exposition::{metric, metric_sum};
use support::ports::refusing_base_url;
use support::raw::{self, content, finish, good_stream, response, usage, DONE, SSE_HEAD};
use support::server::{start, Behavior};
use tokio_util::sync::CancellationToken;

/// Requests per level; two levels (2 and 4 in flight) when the first holds.
const PER_LEVEL: u64 = 4;

/// A sweep that takes longer than this is hung, whatever the server does.
const SWEEP_BOUND: Duration = Duration::from_secs(30);

/// How many cases run at once.
const AT_ONCE: usize = 4;

// --- The table --------------------------------------------------------------

/// One misbehaviour and what llmprobe must make of it.
struct Case {
    name: &'static str,
    server: Server,
    /// `request_timeout` of the sweep.
    request_timeout: &'static str,
    /// The outcome class of every request.
    outcome: &'static str,
    /// What else must hold.
    checks: Vec<Check>,
}

/// How the server of a case answers.
enum Server {
    /// Nothing listens: the connection is refused.
    Refused,
    /// A base URL that nothing serves.
    Url(&'static str),
    /// `https://` spoken to a server that answers in plain HTTP: the
    /// handshake gets an HTTP answer instead of a ServerHello.
    PlainHttpAsTls,
    /// Every request answered with these bytes, then the connection closed.
    Fixed(Vec<u8>),
    /// Each request, once read, answered by a script.
    Script(Script),
    /// A redirect to a second server, which must see nothing: the key must
    /// never go to another location.
    RedirectElsewhere,
}

/// What a scripted server does on a connection after reading a request.
type Script = fn(raw::Conn) -> BoxFuture<'static, ()>;

fn fixed(bytes: impl Into<Vec<u8>>) -> Server {
    Server::Fixed(bytes.into())
}

/// Checks beyond the outcome class; "the example" is the first level's
/// error example of the case's outcome.
#[derive(Debug)]
enum Check {
    /// The sweep's `success`, and why.
    Success(bool, &'static str),
    ExampleContains(&'static str),
    ExampleStartsWith(&'static str),
    ExampleIs(String),
    /// The server received exactly this many chat requests.
    ChatRequests(u64),
    /// Every stream of every level is counted as without finish_reason.
    EveryStreamWithoutFinishReason,
    /// The first level's token source.
    TokenSource(&'static str),
    /// The first level's output tokens.
    OutputTokens(u64),
    /// The first level's shed ratio.
    ShedRatio(f64),
    /// The redirect's target received nothing.
    RedirectNotFollowed,
    /// Both sweeps together took less than this.
    Within(Duration),
    /// The first level's requests all failed alike before reaching a server
    /// (stats::setup_error): the sweep stopped there with this cause.
    SetupError(&'static str),
}

/// A chat stream that a misbehaving server starts: headers, then two chunks.
fn two_chunks() -> String {
    format!("{SSE_HEAD}{}{}", content("a"), content("b"))
}

fn cases() -> Vec<Case> {
    use Check::*;
    let case = |name, server, request_timeout, outcome, checks| Case {
        name,
        server,
        request_timeout,
        outcome,
        checks,
    };
    let empty = "data: {\"choices\":[]}\n\n";
    let role = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"},\"finish_reason\":null}]}\n\n";
    vec![
        // --- Connections that never carry a response ---
        case(
            "connection refused is a connect error",
            Server::Refused,
            "2s",
            "connect_error",
            vec![Success(false, "no request reached a server")],
        ),
        case(
            "unresolvable name is a connect error",
            // `.invalid` never resolves (RFC 6761).
            Server::Url("http://llmprobe-test.invalid/v1"),
            "5s",
            "connect_error",
            vec![Success(false, ""), SetupError("dns")],
        ),
        case(
            "TLS handshake failure is a connect error",
            Server::PlainHttpAsTls,
            "2s",
            "connect_error",
            vec![Success(false, ""), SetupError("tls")],
        ),
        case(
            "not HTTP at all is a protocol error",
            fixed("SSH-2.0-OpenSSH_9.6\r\n\r\n"),
            "2s",
            "protocol_error",
            vec![],
        ),
        // --- Stalls and trickles ---
        case(
            "stall before headers is a timeout",
            Server::Script(|mut c| async move { c.wait_closed().await }.boxed()),
            "1s",
            "timeout",
            vec![
                Success(true, "a timeout is a measurement, not a failed sweep"),
                // Each request sent once: the level's, and the uncounted ones
                // before it (one per place to open the level's connections;
                // the output limit is checked on the answers themselves).
                ChatRequests(2 + PER_LEVEL),
            ],
        ),
        case(
            "stall mid-stream past the request timeout is a timeout",
            Server::Script(|mut c| {
                async move {
                    c.write(two_chunks()).await;
                    c.wait_closed().await;
                }
                .boxed()
            }),
            "1s",
            "timeout",
            vec![],
        ),
        case(
            "trickle of one byte per second is a timeout",
            // The limit is on the whole request, not on the gap between
            // reads: a server that keeps sending slowly cannot hold a
            // request forever.
            Server::Script(|mut c| {
                async move {
                    c.write(SSE_HEAD).await;
                    for b in good_stream(4).as_bytes() {
                        if !c.write([*b]).await {
                            return;
                        }
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
                .boxed()
            }),
            "2s",
            "timeout",
            vec![],
        ),
        // --- Broken streams ---
        case(
            "reset mid-stream is a protocol error",
            Server::Script(|mut c| {
                async move {
                    c.write(two_chunks()).await;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    c.reset();
                }
                .boxed()
            }),
            "2s",
            "protocol_error",
            vec![ExampleContains("stream broken")],
        ),
        case(
            "no [DONE] and no finish_reason is a protocol error",
            fixed(two_chunks()),
            "2s",
            "protocol_error",
            vec![ExampleContains("without [DONE] or finish_reason")],
        ),
        case(
            "no [DONE] but a finish_reason is ok",
            fixed(format!("{SSE_HEAD}{}{}", content("a"), finish())),
            "2s",
            "ok",
            vec![],
        ),
        case(
            "[DONE] without finish_reason is ok but flagged",
            fixed(format!("{}{DONE}", two_chunks())),
            "2s",
            "ok",
            vec![EveryStreamWithoutFinishReason],
        ),
        case(
            "no usage chunk: tokens are counted from chunks",
            fixed(format!("{}{}{DONE}", two_chunks(), finish())),
            "2s",
            "ok",
            vec![TokenSource("chunks"), OutputTokens(2 * PER_LEVEL)],
        ),
        case(
            "only empty choices is a protocol error",
            fixed(format!("{SSE_HEAD}{empty}{empty}{}{DONE}", usage(0))),
            "2s",
            "protocol_error",
            vec![ExampleContains("no generated content")],
        ),
        case(
            // llama-cpp-python's default `interrupt_requests`: a stream
            // whose request has another waiting behind it ends with [DONE]
            // after its role chunk, before any content.
            "[DONE] after the role chunk is a cut answer, named as such",
            fixed(format!("{SSE_HEAD}{role}{DONE}")),
            "2s",
            "protocol_error",
            vec![ExampleContains(
                "[DONE] came before any content and without a finish_reason",
            )],
        ),
        case(
            // A model whose chat template it does not know stops at once.
            "a finish_reason before any content is an empty answer",
            fixed(format!("{SSE_HEAD}{role}{}{DONE}", finish())),
            "2s",
            "protocol_error",
            vec![ExampleContains("an empty answer")],
        ),
        case(
            "empty choices between content chunks are ignored",
            fixed(format!(
                "{SSE_HEAD}{empty}{}{empty}{}{}{DONE}",
                content("a"),
                content("b"),
                finish()
            )),
            "2s",
            "ok",
            vec![],
        ),
        case(
            "error field mid-stream is a protocol error",
            fixed(format!(
                "{SSE_HEAD}{}data: {{\"error\":{{\"message\":\"upstream failed\",\"code\":500}}}}\n\n{DONE}",
                content("a")
            )),
            "2s",
            "protocol_error",
            vec![ExampleIs("error event in stream: upstream failed".into())],
        ),
        case(
            "error event type mid-stream is a protocol error",
            // `event: error` with data that is not an OpenAI error object:
            // the event type alone says the stream failed.
            fixed(format!(
                "{SSE_HEAD}{}event: error\ndata: {{\"message\":\"engine died\"}}\n\n{}{DONE}",
                content("a"),
                finish()
            )),
            "2s",
            "protocol_error",
            vec![ExampleContains("engine died")],
        ),
        case(
            "malformed SSE lines among good ones are skipped",
            // Lines without a colon, unknown fields and comments are ignored
            // by the SSE rules; the chunks around them still count.
            {
                let junk = "garbage without colon\nretry: soon\nid\n: comment\nfoo: bar\n";
                fixed(format!(
                    "{SSE_HEAD}{junk}{}{junk}{}{}{DONE}",
                    content("a"),
                    content("b"),
                    finish()
                ))
            },
            "2s",
            "ok",
            vec![],
        ),
        case(
            "only malformed SSE lines is a protocol error",
            fixed(format!(
                "{SSE_HEAD}dta: {{\"choices\":[]}}\n\ndata{{\"choices\":[{{\"delta\":{{\"content\":\"x\"}}}}]}}\n\n"
            )),
            "2s",
            "protocol_error",
            vec![],
        ),
        case(
            "invalid JSON in a data line is a protocol error",
            fixed(format!(
                "{SSE_HEAD}{}data: {{\"choices\": [{{\"delta\": \n\n{DONE}",
                content("a")
            )),
            "2s",
            "protocol_error",
            vec![ExampleContains("not valid JSON")],
        ),
        case(
            "invalid UTF-8 is a protocol error",
            {
                let mut body = format!("{SSE_HEAD}{}", content("a")).into_bytes();
                body.extend_from_slice(
                    b"data: {\"choices\":[{\"delta\":{\"content\":\"\xff\xfe\"}}]}\n\n",
                );
                body.extend_from_slice(DONE.as_bytes());
                Server::Fixed(body)
            },
            "2s",
            "protocol_error",
            vec![ExampleContains("UTF-8")],
        ),
        case(
            "ten-megabyte line is cut off at the line limit",
            // Memory stays bounded: the decoder gives up at MAX_LINE_BYTES
            // instead of buffering the line, and the request is dropped.
            Server::Script(|mut c| {
                async move {
                    c.write(format!("{SSE_HEAD}{}data: {{\"x\":\"", content("a")))
                        .await;
                    let block = vec![b'a'; 64 * 1024];
                    for _ in 0..160 {
                        if !c.write(&block).await {
                            return;
                        }
                    }
                }
                .boxed()
            }),
            "5s",
            "protocol_error",
            vec![ExampleIs(format!(
                "SSE line longer than {} bytes",
                llmprobe::probe::exchange::MAX_LINE_BYTES
            ))],
        ),
        case(
            "HTTP/1.0 with connection-close framing is ok",
            fixed(format!(
                "HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n{}",
                good_stream(3)
            )),
            "2s",
            "ok",
            vec![TokenSource("usage")],
        ),
        case(
            "a server that keeps sending after [DONE] does not hold the request",
            // Keep-alive comments after [DONE], faster than the after-[DONE]
            // grace: the request still ends (ok) soon after [DONE], not at
            // its time limit.
            Server::Script(|mut c| {
                async move {
                    c.write(format!("{SSE_HEAD}{}", good_stream(2))).await;
                    for _ in 0..100 {
                        if !c.write(": ping\n").await {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
                .boxed()
            }),
            "4s",
            "ok",
            // Two rounds per level: requests held to their 4 s limit would
            // take at least 2 x 4 s however fast the machine (even were the
            // climb to stop at the first level); ended within the 0.5 s
            // after-[DONE] grace, the sweeps take about 2 s.
            vec![Within(Duration::from_secs(8))],
        ),
        // --- Answers that are not a stream ---
        case(
            "HTML page with 200 is a protocol error",
            fixed(response(
                "200 OK",
                &[("content-type", "text/html; charset=utf-8")],
                "<html><body>Welcome to nginx!</body></html>",
            )),
            "2s",
            "protocol_error",
            vec![ExampleContains("text/html")],
        ),
        case(
            "JSON instead of a stream is a protocol error",
            fixed(response(
                "200 OK",
                &[("content-type", "application/json")],
                r#"{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}"#,
            )),
            "2s",
            "protocol_error",
            vec![ExampleContains("application/json")],
        ),
        case(
            "status 500 with a JSON error is an HTTP error",
            fixed(response(
                "500 Internal Server Error",
                &[("content-type", "application/json")],
                r#"{"error":{"message":"CUDA out of memory","type":"server_error"}}"#,
            )),
            "2s",
            "http_error",
            vec![
                ExampleStartsWith("HTTP 500: "),
                ExampleContains("CUDA out of memory"),
            ],
        ),
        case(
            "status 503 with retry-after is shed",
            fixed(response(
                "503 Service Unavailable",
                &[("retry-after", "2")],
                "overloaded",
            )),
            "2s",
            "shed",
            vec![
                Success(true, "503s are counted, they do not fail the sweep"),
                ShedRatio(1.0),
            ],
        ),
        case(
            "status 503 without retry-after is shed",
            fixed(response("503 Service Unavailable", &[], "")),
            "2s",
            "shed",
            vec![],
        ),
        case(
            "status 503 whose body stalls is still shed",
            // The status says it all: waiting for the rest of the body would
            // turn a shed request into a timeout.
            Server::Script(|mut c| {
                async move {
                    c.write("HTTP/1.1 503 Service Unavailable\r\ncontent-length: 100\r\n\r\nbusy")
                        .await;
                    c.wait_closed().await;
                }
                .boxed()
            }),
            "3s",
            "shed",
            // `…`: the body was not read whole (the message says so).
            vec![ExampleIs("HTTP 503: busy\u{2026}".into())],
        ),
        case(
            "status 429 is rate limited",
            fixed(response(
                "429 Too Many Requests",
                &[
                    ("retry-after-ms", "250"),
                    ("x-ratelimit-remaining-requests", "0"),
                ],
                r#"{"error":{"message":"rate limit reached"}}"#,
            )),
            "2s",
            "rate_limited",
            vec![ShedRatio(1.0)],
        ),
        case(
            "a redirect is not followed and is an HTTP error",
            Server::RedirectElsewhere,
            "2s",
            "http_error",
            vec![
                ExampleContains("redirect not followed"),
                RedirectNotFollowed,
            ],
        ),
    ]
}

// --- The runner -------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn misbehaving_servers() {
    let only = std::env::var("MISBEHAVING_CASE").unwrap_or_default();
    let selected: Vec<Case> = cases()
        .into_iter()
        .filter(|c| c.name.contains(only.as_str()))
        .collect();
    assert!(!selected.is_empty(), "no case named like {only:?}");
    let total = selected.len();
    let results: Vec<(&str, Result<(), String>)> = futures_util::stream::iter(selected)
        .map(|case| async move {
            let name = case.name;
            let started = Instant::now();
            // A task of its own: a failed assertion ends this case only.
            let result = tokio::spawn(run(case)).await.map_err(panic_message);
            eprintln!(
                "{} {name} ({:.1?})",
                if result.is_ok() { "ok    " } else { "FAILED" },
                started.elapsed()
            );
            (name, result)
        })
        .buffer_unordered(AT_ONCE)
        .collect()
        .await;
    let failed: Vec<String> = results
        .into_iter()
        .filter_map(|(name, r)| r.err().map(|e| format!("{name}: {e}")))
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {total} cases failed:\n\n{}",
        failed.len(),
        failed.join("\n\n")
    );
}

/// What a case's task panicked with.
fn panic_message(e: tokio::task::JoinError) -> String {
    match e.try_into_panic() {
        Ok(payload) => payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panicked".into()),
        Err(e) => e.to_string(),
    }
}

/// The servers of a case, kept until its checks are done.
struct Serving {
    base_url: String,
    server: Option<raw::RawServer>,
    elsewhere: Option<raw::RawServer>,
}

async fn serve(server: &Server) -> Serving {
    let (base_url, server, elsewhere) = match server {
        Server::Refused => (refusing_base_url(), None, None),
        Server::Url(url) => (url.to_string(), None, None),
        Server::PlainHttpAsTls => {
            let plain = raw::start(|mut c| async move {
                c.write(response("400 Bad Request", &[], "not TLS")).await;
            })
            .await;
            (format!("https://{}/v1", plain.addr), Some(plain), None)
        }
        Server::Fixed(bytes) => {
            let s = raw::fixed(bytes.clone()).await;
            (s.base_url(), Some(s), None)
        }
        Server::Script(script) => {
            let script = *script;
            let s = raw::start(move |mut c| async move {
                if c.read_request().await.is_some() {
                    script(c).await;
                }
            })
            .await;
            (s.base_url(), Some(s), None)
        }
        Server::RedirectElsewhere => {
            let elsewhere = raw::fixed(format!("{SSE_HEAD}{}", good_stream(2))).await;
            let location = format!("http://{}/v1/chat/completions", elsewhere.addr);
            let s = raw::fixed(response(
                "307 Temporary Redirect",
                &[("location", &location)],
                "",
            ))
            .await;
            (s.base_url(), Some(s), Some(elsewhere))
        }
    };
    Serving {
        base_url,
        server,
        elsewhere,
    }
}

/// Runs one case; panics on the first check that fails.
async fn run(case: Case) {
    let serving = serve(&case.server).await;
    let h = Harness::new();
    let started = Instant::now();
    let r = h
        .expect(&serving.base_url, case.request_timeout, case.outcome)
        .await;
    let took = started.elapsed();
    let first = || &r.workloads[0].levels[0];
    let example = || first().error_examples[case.outcome].as_str();
    for check in &case.checks {
        match check {
            Check::Success(want, why) => assert_eq!(r.success, *want, "{why} {:?}", r.error),
            Check::ExampleContains(part) => {
                assert!(example().contains(part), "{check:?}: {r:?}")
            }
            Check::ExampleStartsWith(part) => {
                assert!(example().starts_with(part), "{check:?}: {r:?}")
            }
            Check::ExampleIs(text) => assert_eq!(example(), text, "{check:?}"),
            Check::ChatRequests(n) => {
                let server = serving.server.as_ref().expect("a server");
                assert_eq!(server.chat_requests().len() as u64, *n, "{check:?}");
            }
            Check::EveryStreamWithoutFinishReason => {
                for l in &r.workloads[0].levels {
                    assert_eq!(l.streams_without_finish_reason, l.requests, "{check:?}");
                }
            }
            Check::TokenSource(source) => {
                assert_eq!(first().token_source, *source, "{check:?}")
            }
            Check::OutputTokens(n) => assert_eq!(first().output_tokens, *n, "{check:?}"),
            Check::ShedRatio(ratio) => assert_eq!(first().shed_ratio, *ratio, "{check:?}"),
            Check::RedirectNotFollowed => {
                let elsewhere = serving.elsewhere.as_ref().expect("a redirect target");
                assert!(elsewhere.requests().is_empty(), "the redirect was followed");
            }
            Check::Within(limit) => assert!(took < *limit, "{check:?}: took {took:?}"),
            Check::SetupError(cause) => {
                let found = r.setup_error.as_ref().map(|e| e.cause.as_str());
                assert_eq!(found, Some(*cause), "{check:?}: {:?}", r.error);
            }
        }
    }
}

// --- The harness ------------------------------------------------------------

/// Feeds every counted request into the metrics, as the daemon does.
struct Feed(Arc<Metrics>);

impl Observer for Feed {
    fn request(
        &self,
        target: &config::Target,
        workload: &config::Workload,
        sample: &llmprobe::stats::sample::Sample,
        _concurrency: Option<u32>,
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
            tls::Clients::new(llmprobe::probe::tls::CONNECT_TIMEOUT).unwrap(),
            16,
            CancellationToken::new(),
            Arc::new(Feed(metrics.clone())),
        );
        Harness { env, metrics }
    }

    /// One sweep of target `t1` at `base_url`, bounded in time.
    async fn sweep(&self, base_url: &str, request_timeout: &str) -> SweepReport {
        let cfg = support::config::load(&yaml(base_url, request_timeout));
        let target = &cfg.targets[0];
        let reachable = endpoint::reach(target).await.unwrap();
        let run = sweep::run(
            &self.env,
            target,
            &reachable.base_url,
            cfg.schedule.sweep_timeout,
            None,
        );
        let report = tokio::time::timeout(SWEEP_BOUND, run)
            .await
            .expect("the sweep must end in bounded time");
        self.metrics.publish_sweep(&report);
        report
    }

    /// `llmprobe_requests_total{target="t1", outcome}` as exposed.
    fn counted(&self, outcome: &str) -> u64 {
        let labels = [("target", "t1"), ("outcome", outcome)];
        metric_sum(&self.metrics.encode(), "llmprobe_requests_total", &labels) as u64
    }

    /// Sweeps the misbehaving server and checks that every request ended in
    /// `outcome`, that the metrics counted them, and that a healthy server
    /// is measured normally afterwards.
    async fn expect(&self, base_url: &str, request_timeout: &str, outcome: &str) -> SweepReport {
        let r = self.sweep(base_url, request_timeout).await;
        if r.setup_error.is_some() {
            // Stopped after the first level: its requests were counted,
            // and no level is reported.
            assert!(r.workloads.is_empty(), "{:?}", r.workloads);
            assert!(self.counted(outcome) >= 1, "counted in /metrics");
            self.next_sweep_is_normal().await;
            return r;
        }
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
                levels_expected(w),
                "both levels within the SLO: {:?}",
                w.capacity.stopped_because
            );
        } else {
            assert_eq!(w.levels.len(), 1, "climbing stops at the first level");
            assert_eq!(w.capacity.knee_concurrency, 0);
            assert!(w.levels[0].error_examples.contains_key(outcome));
        }
        assert_eq!(total, PER_LEVEL * w.levels.len() as u64);
        // A level the client could not keep up with runs again: its runs
        // are counted too, each in full.
        let counted = self.counted(outcome);
        assert!(
            counted >= total && (counted - total) % PER_LEVEL == 0,
            "counted in /metrics: {counted}, in the report {total}"
        );
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
        let w = &r.workloads[0];
        let levels = &w.levels;
        assert_eq!(
            levels.len(),
            levels_expected(w),
            "{:?}",
            w.capacity.stopped_because
        );
        assert!(levels.iter().all(|l| l.outcomes["ok"] == PER_LEVEL));
        assert_eq!(self.counted("ok"), before + levels.len() as u64 * PER_LEVEL);
    }
}

/// How many of the two levels a sweep of a server that answers well must
/// have run: both, each within the SLO; or those before a level the client
/// could not keep up with, run three times (`stats::client`). These servers
/// answer in microseconds, so a turnaround of a few ms (a loaded machine's
/// scheduling, not the server) is most of a level's time, and the sweep
/// rightly does not count the level: it is not measured (client), never a
/// break (tests/real_servers.rs checks that with servers that take long
/// enough for the client to keep up).
fn levels_expected(w: &llmprobe::stats::report::WorkloadReport) -> usize {
    for l in &w.levels {
        assert!(
            l.within_slo && l.kept_concurrency,
            "level {} within the SLO: {:?}",
            l.concurrency,
            w.capacity.stopped_because
        );
    }
    match &w.capacity.not_measured_client {
        Some(_) => {
            assert!(!w.capacity.levels_not_measured.is_empty());
            w.levels.len()
        }
        None => 2,
    }
}

/// Levels 2 and 4, four requests each, no warm-up (it would hide nothing
/// but cost time).
fn yaml(base_url: &str, request_timeout: &str) -> String {
    Yaml {
        max_in_flight_total: 16,
        sweep_timeout: "25s",
        warmup_requests: 0,
        levels: "[2, 4]",
        requests_per_level: &PER_LEVEL.to_string(),
        min_requests_per_level: 1,
        request_timeout,
        slo: Some("{ p95_latency: 5s, max_shed_ratio: 0.05, max_error_ratio: 0.05 }"),
        // Every request of a level runs, whatever its outcome: each case
        // counts them all (an early verdict would stop a failing level).
        more_defaults: "  early_stop: false",
        max_completion_tokens: 16,
        prompts: r#"["hello there"]"#,
        rest: &format!("targets:\n  - name: t1\n    base_url: {base_url}\n    model: m"),
        ..Yaml::default()
    }
    .render()
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
    let targets = format!(
        "targets:\n  - name: daemon-bad\n    base_url: {}\n    model: m\n  - name: daemon-good\n    base_url: {}\n    model: m",
        bad.base_url(),
        good.base_url()
    );
    let yaml = Yaml {
        max_in_flight_total: 16,
        sweep_timeout: "20s",
        warmup_requests: 0,
        levels: "[2, 4]",
        requests_per_level: "4",
        min_requests_per_level: 1,
        request_timeout: "2s",
        // Each level runs in full: the counts below are whole levels.
        more_defaults: "  early_stop: false",
        prompts: r#"["hi"]"#,
        rest: &targets,
        ..Yaml::default()
    }
    .render();
    let d = Daemon::start(write_config(&yaml)).await;
    // Every result and kind (full or warm) of the target.
    let sweeps = |text: &str, t: &str| metric_sum(text, "llmprobe_sweeps_total", &[("target", t)]);
    let text = d
        .wait_for(
            Duration::from_secs(60),
            "three sweeps of each target",
            |t| sweeps(t, "daemon-bad") >= 3.0 && sweeps(t, "daemon-good") >= 3.0,
        )
        .await;
    d.stop().await;

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
