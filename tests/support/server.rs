//! A small OpenAI-compatible test server that streams with controlled
//! delays and misbehaves on purpose (at the HTTP level; `raw` misbehaves at
//! the byte level), and a helper that serves any axum app on a loopback port.

use std::convert::Infallible;
use std::net::SocketAddr;
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
    /// Content chunks per response (at most the output limit asked for).
    pub tokens: u32,
    /// Send a usage chunk (completion_tokens = tokens).
    pub usage: bool,
    /// Answer 503 when more than this many requests are in flight.
    pub shed_above: Option<usize>,
    /// Answer 200 with an HTML page instead of a stream.
    pub garbage: bool,
    /// Hold a request that finds more than this many in flight: its
    /// headers are sent, then nothing until the client goes away (a sweep
    /// stuck in a level, deterministically, for as long as a test needs).
    pub hold_above: Option<usize>,
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
            hold_above: None,
        }
    }
}

/// What the server saw.
#[derive(Default, Debug)]
pub struct Seen {
    /// Requests being answered now.
    pub in_flight: AtomicUsize,
    /// The most requests answered at once.
    pub max_in_flight: AtomicUsize,
    /// Chat requests received.
    pub requests: AtomicUsize,
    /// Requests answered 503.
    pub shed: AtomicUsize,
    /// Requests held (`Behavior::hold_above`).
    pub held: AtomicUsize,
    /// Value served on GET /metrics as `busy_requests`, for the idle gate.
    pub busy: AtomicUsize,
    /// Each answered stream as the server timed it.
    pub streams: std::sync::Mutex<Vec<Timed>>,
}

/// One stream as the server timed it, from its handler's start: when its
/// first and its last content chunk were handed to the connection, and the
/// gaps between content chunks. Its timers can only be late, so these are
/// the delays it was asked for plus this run's scheduling, which a client
/// measures on top of loopback and its own wake-ups.
#[derive(Debug, Clone, Default)]
pub struct Timed {
    /// To the first content chunk.
    pub ttft: Duration,
    /// To the last content chunk.
    pub latency: Duration,
    /// Between consecutive content chunks.
    pub gaps: Vec<Duration>,
}

async fn own_metrics(State((_, seen)): State<(Behavior, Arc<Seen>)>) -> String {
    format!(
        "# TYPE busy_requests gauge\nbusy_requests{{engine=\"0\"}} {}\n",
        seen.busy.load(Ordering::SeqCst)
    )
}

/// A running test server; stops when dropped.
pub struct TestServer {
    served: Served,
    seen: Arc<Seen>,
}

impl TestServer {
    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.served.addr
    }

    /// `http://ADDR/v1`.
    pub fn base_url(&self) -> String {
        self.served.base_url()
    }

    /// `https://ADDR/v1` (a server from [`start_tls`]).
    pub fn https_base_url(&self) -> String {
        self.served.https_base_url()
    }

    /// How many chat requests it received so far.
    pub fn requests(&self) -> usize {
        self.seen.requests.load(Ordering::SeqCst)
    }

    /// How many requests it is answering now.
    pub fn in_flight(&self) -> usize {
        self.seen.in_flight.load(Ordering::SeqCst)
    }

    /// How many requests it held so far (`Behavior::hold_above`).
    pub fn held(&self) -> usize {
        self.seen.held.load(Ordering::SeqCst)
    }

    /// The most requests it answered at once.
    pub fn max_in_flight(&self) -> usize {
        self.seen.max_in_flight.load(Ordering::SeqCst)
    }

    /// Every stream it answered in full, as it timed them.
    pub fn streams(&self) -> Vec<Timed> {
        self.seen.streams.lock().unwrap().clone()
    }

    /// Sets the `busy_requests` value its /metrics serves.
    pub fn set_busy(&self, n: usize) {
        self.seen.busy.store(n, Ordering::SeqCst);
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
    State((mut b, seen)): State<(Behavior, Arc<Seen>)>,
    body: Bytes,
) -> Response<Body> {
    // As a real server: the output stops at the limit the request asks for.
    let asked: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let limit = ["max_completion_tokens", "max_tokens"]
        .iter()
        .find_map(|f| asked[*f].as_u64());
    if let Some(limit) = limit {
        b.tokens = b.tokens.min(u32::try_from(limit).unwrap_or(u32::MAX));
    }
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
    if b.hold_above.is_some_and(|n| now > n) {
        seen.held.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, Infallible>>(1);
        tokio::spawn(async move {
            tx.closed().await;
            drop(guard);
        });
        return Response::builder()
            .status(200)
            .header("content-type", "text/event-stream")
            .body(Body::from_stream(tokio_stream_from(rx)))
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
    let entered = std::time::Instant::now();
    tokio::spawn(async move {
        let mut timed = Timed::default();
        let mut previous = None;
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
            let now = std::time::Instant::now();
            match previous {
                None => timed.ttft = now - entered,
                Some(p) => timed.gaps.push(now - p),
            }
            previous = Some(now);
            timed.latency = now - entered;
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
        seen.streams.lock().unwrap().push(timed);
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
    let (app, seen) = app(behavior);
    let served = serve(app).await;
    TestServer { served, seen }
}

/// [`start`] over HTTPS with the server configuration `tls` (see
/// `support::tls`); its URL is [`TestServer::https_base_url`].
pub async fn start_tls(behavior: Behavior, tls: Arc<rustls::ServerConfig>) -> TestServer {
    let (app, seen) = app(behavior);
    let served = serve_tls(app, tls).await;
    TestServer { served, seen }
}

fn app(behavior: Behavior) -> (Router, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .route("/metrics", axum::routing::get(own_metrics))
        .with_state((behavior, seen.clone()));
    (app, seen)
}

/// An axum app served on 127.0.0.1:0; stops when dropped.
pub struct Served {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: CancellationToken,
}

impl Served {
    /// `http://ADDR/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// `https://ADDR/v1`.
    pub fn https_base_url(&self) -> String {
        format!("https://{}/v1", self.addr)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Serves `app` on 127.0.0.1:0 until the returned handle is dropped.
pub async fn serve(app: Router) -> Served {
    serve_on(None, app).await
}

/// [`serve`] over HTTPS (llmprobe's own serving loop, which drops failed
/// handshakes, a client without a required certificate's included).
pub async fn serve_tls(app: Router, tls: Arc<rustls::ServerConfig>) -> Served {
    serve_on(Some(tls), app).await
}

/// Serves `app` with llmprobe's serving loop until the handle is dropped.
async fn serve_on(tls: Option<Arc<rustls::ServerConfig>>, app: Router) -> Served {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    tokio::spawn(llmprobe::http::connections::serve(
        listener,
        tls,
        app,
        stop.clone(),
    ));
    Served { addr, stop }
}
