//! A small OpenAI-compatible test server that streams with controlled delays
//! and misbehaves on purpose, plus helpers to write configs for it.
#![allow(dead_code)]

pub mod raw;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{Response, StatusCode};
use axum::routing::post;
use axum::Router;
use tokio_util::sync::CancellationToken;

/// What the test server does with each request.
#[derive(Clone, Debug)]
pub struct Behavior {
    /// Delay before the first content chunk.
    pub ttft: Duration,
    /// Delay between content chunks.
    pub gap: Duration,
    /// Content chunks per response.
    pub tokens: u32,
    /// Send a usage chunk (completion_tokens = tokens * usage_factor).
    pub usage: bool,
    /// Answer 503 when more than this many requests are in flight.
    pub shed_above: Option<usize>,
    /// Answer 200 with an HTML page instead of a stream.
    pub garbage: bool,
}

impl Default for Behavior {
    fn default() -> Self {
        Behavior {
            ttft: Duration::from_millis(5),
            gap: Duration::from_millis(2),
            tokens: 8,
            usage: true,
            shed_above: None,
            garbage: false,
        }
    }
}

/// What the server saw.
#[derive(Default, Debug)]
pub struct Seen {
    pub in_flight: AtomicUsize,
    pub max_in_flight: AtomicUsize,
    pub requests: AtomicUsize,
    pub shed: AtomicUsize,
    /// Value served on GET /metrics as `busy_requests`, for the idle gate.
    pub busy: AtomicUsize,
}

async fn own_metrics(State((_, seen)): State<(Behavior, Arc<Seen>)>) -> String {
    format!(
        "# TYPE busy_requests gauge\nbusy_requests{{engine=\"0\"}} {}\n",
        seen.busy.load(Ordering::SeqCst)
    )
}

/// A running test server; stops when dropped.
pub struct TestServer {
    pub addr: SocketAddr,
    pub seen: Arc<Seen>,
    stop: CancellationToken,
}

impl TestServer {
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

struct InFlight(Arc<Seen>);
impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

fn chunk(content: &str, finish: Option<&str>) -> Bytes {
    let finish = finish.map_or("null".to_string(), |f| format!("\"{f}\""));
    Bytes::from(format!(
        "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{content}\"}},\"finish_reason\":{finish}}}]}}\n\n"
    ))
}

async fn completions(
    State((b, seen)): State<(Behavior, Arc<Seen>)>,
    _body: Bytes,
) -> Response<Body> {
    seen.requests.fetch_add(1, Ordering::SeqCst);
    let now = seen.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    seen.max_in_flight.fetch_max(now, Ordering::SeqCst);
    let guard = InFlight(seen.clone());
    if b.shed_above.is_some_and(|n| now > n) {
        seen.shed.fetch_add(1, Ordering::SeqCst);
        drop(guard);
        return Response::builder()
            .status(StatusCode::SERVICE_UNAVAILABLE)
            .header("retry-after", "1")
            .body(Body::from("{\"error\":{\"message\":\"overloaded\"}}"))
            .unwrap();
    }
    if b.garbage {
        drop(guard);
        return Response::builder()
            .status(200)
            .header("content-type", "text/event-stream")
            .body(Body::from(
                "<html><body>Welcome to nginx!</body></html>\n\n",
            ))
            .unwrap();
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, Infallible>>(16);
    let mut guard = Some(guard);
    tokio::spawn(async move {
        let _ = tx
            .send(Ok(Bytes::from_static(
                b"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n",
            )))
            .await;
        // A client that goes away ends the response (and frees its slot) at once.
        tokio::select! {
            _ = tokio::time::sleep(b.ttft) => {}
            _ = tx.closed() => return,
        }
        for i in 0..b.tokens {
            if i > 0 {
                tokio::select! {
                    _ = tokio::time::sleep(b.gap) => {}
                    _ = tx.closed() => return,
                }
            }
            let last = i + 1 == b.tokens;
            if last {
                // Free the slot before the last bytes leave, so a closed-loop
                // client's next request is never shed by this one.
                guard.take();
            }
            if tx
                .send(Ok(chunk("tok", last.then_some("length"))))
                .await
                .is_err()
            {
                return;
            }
        }
        if b.usage {
            let u = format!(
                "data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":5,\"completion_tokens\":{}}}}}\n\n",
                b.tokens
            );
            let _ = tx.send(Ok(Bytes::from(u))).await;
        }
        let _ = tx.send(Ok(Bytes::from_static(b"data: [DONE]\n\n"))).await;
        drop(guard);
    });
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(tokio_stream_from(rx)))
        .unwrap()
}

fn tokio_stream_from(
    mut rx: tokio::sync::mpsc::Receiver<Result<Bytes, Infallible>>,
) -> impl futures_util::Stream<Item = Result<Bytes, Infallible>> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// Starts a test server with `behavior` on 127.0.0.1:0.
pub async fn start(behavior: Behavior) -> TestServer {
    let seen = Arc::new(Seen::default());
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .route("/metrics", axum::routing::get(own_metrics))
        .with_state((behavior, seen.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let token = stop.clone();
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { token.cancelled().await })
            .await
            .ok();
    });
    TestServer { addr, seen, stop }
}

/// Writes `yaml` to a fresh temporary config file and returns its path.
pub fn write_config(yaml: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "llmprobe-test-{}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("llmprobe.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

/// A config measuring one URL target with the given levels and SLO.
pub fn url_config(base_url: &str, levels: &str, extra_defaults: &str) -> String {
    format!(
        r#"
listen: "127.0.0.1:0"
schedule: {{ interval: 1s, jitter: 0%, max_in_flight_total: 64, sweep_timeout: 60s }}
defaults:
  workload: chat
  warmup_requests: 1
  levels: {levels}
  requests_per_level: 2x
  min_requests_per_level: 8
  request_timeout: 5s
  slo: {{ p95_latency: 5s, max_shed_ratio: 0.05, max_error_ratio: 0.05 }}
{extra_defaults}
workloads:
  chat:
    max_completion_tokens: 16
    prompts: ["hello there"]
targets:
  - name: t1
    base_url: {base_url}
    model: test-model
"#
    )
}

/// The daemon running in-process on 127.0.0.1:0.
pub struct Daemon {
    pub addr: SocketAddr,
    pub path: PathBuf,
    pub shutdown: CancellationToken,
    pub handle: tokio::task::JoinHandle<anyhow::Result<()>>,
    pub reload: tokio::sync::mpsc::Sender<llmprobe::signals::Signal>,
}

impl Daemon {
    /// Starts the daemon on the config at `path`.
    pub async fn start(path: PathBuf) -> Daemon {
        let config = llmprobe::config::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let (reload, rx) = tokio::sync::mpsc::channel(4);
        let p = path.clone();
        let stop = shutdown.clone();
        let handle =
            tokio::spawn(async move { llmprobe::run(&p, config, listener, stop, rx).await });
        Daemon {
            addr,
            path,
            shutdown,
            handle,
            reload,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub async fn metrics(&self) -> String {
        reqwest::get(self.url("/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// Polls /metrics until `pred` holds, for at most `limit`.
    pub async fn wait_for(
        &self,
        limit: Duration,
        what: &str,
        pred: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let text = self.metrics().await;
            if pred(&text) {
                return text;
            }
            if tokio::time::Instant::now() > deadline {
                panic!("timed out waiting for {what}; /metrics:\n{text}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.handle)
            .await
            .expect("daemon stops within 10 s")
            .unwrap()
            .unwrap();
    }
}

/// The value of the series whose line starts with `name{` and holds every
/// `labels` pair (`key="value"`), or None.
pub fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}
