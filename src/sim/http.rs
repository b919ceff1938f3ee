//! The HTTP surface: routes, shared state, load shedding and the error
//! responses. What an engine answers lives in `model.rs` and `stub.rs`.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::{CONTENT_TYPE, RETRY_AFTER, SERVER};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::chunks::ChunkWriter;
use super::faults::{self, Fault};
use super::params::{Engine, SimParams};
use super::prefix_cache::{PrefixCache, BLOCK_TOKENS};
use super::request::{self, ApiError};
use super::scheduler::{self, Seq};
use super::{model, stub};

/// `Server` header on every response, so llmprobe's discovery can tell it apart.
const SERVER_NAME: &str = concat!("llmprobe-sim/", env!("CARGO_PKG_VERSION"));

/// State shared by every request of one simulated server.
pub(crate) struct Sim {
    /// The resolved parameters.
    pub params: SimParams,
    in_flight: AtomicU32,
    requests: AtomicU64,
    started: u64,
    engine: EngineHandle,
    prefix_cache: Mutex<PrefixCache>,
}

/// The submission side of the scheduler task, which starts with the first
/// request (building a router needs no runtime; serving one always has it).
struct EngineHandle {
    submit: mpsc::UnboundedSender<Seq>,
    pending: Mutex<Option<(mpsc::UnboundedReceiver<Seq>, CancellationToken)>>,
}

/// One admitted request, counted in flight until dropped.
pub(crate) struct InFlight(Arc<Sim>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Sim {
    /// Counts a request in, unless `max_in_flight` are already in.
    fn enter(self: &Arc<Self>) -> Option<InFlight> {
        let max = self.params.max_in_flight;
        self.in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| InFlight(Arc::clone(self)))
    }

    /// Hands a sequence to the scheduler; false once the engine has stopped.
    pub(crate) fn submit(&self, seq: Seq) -> bool {
        let pending = self
            .engine
            .pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some((arrivals, shutdown)) = pending {
            tokio::spawn(scheduler::run(self.params.clone(), arrivals, shutdown));
        }
        self.engine.submit.send(seq).is_ok()
    }
}

/// The routes of the simulated server; the scheduler stops when `shutdown`
/// fires or the router is dropped.
pub(crate) fn router(params: SimParams, shutdown: CancellationToken) -> Router {
    let (submit, arrivals) = mpsc::unbounded_channel();
    let sim = Arc::new(Sim {
        params: params.clone(),
        in_flight: AtomicU32::new(0),
        requests: AtomicU64::new(0),
        started: unix_now(),
        prefix_cache: Mutex::new(PrefixCache::new(params.prefix_cache_tokens)),
        engine: EngineHandle {
            submit,
            pending: Mutex::new(Some((arrivals, shutdown))),
        },
    });
    Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/models", get(models))
        .route("/health", get(health))
        .route("/version", get(version))
        .fallback(not_found)
        .layer(axum::middleware::map_response(server_header))
        .with_state(sim)
}

async fn chat(State(sim): State<Arc<Sim>>, body: Bytes) -> Response {
    let request = match request::parse(&body, &sim.params) {
        Ok(request) => request,
        Err(err) => return error(&err),
    };
    let n = sim.requests.fetch_add(1, Ordering::Relaxed);
    let fault = faults::draw(&sim.params, n, request.max_tokens);
    if fault == Fault::Fail {
        return error(&ApiError {
            status: StatusCode::from_u16(sim.params.fail_status)
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            message: "simulated failure (fail_ratio)".into(),
            kind: "server_error",
            param: None,
            code: Some("simulated_failure"),
        });
    }
    let Some(guard) = sim.enter() else {
        return shed(&sim.params);
    };
    let mut request = request;
    if sim.params.engine == Engine::Model && !request.prefix_blocks.is_empty() {
        let blocks = sim
            .prefix_cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .admit(&request.prefix_blocks);
        // At least the last prompt token is always computed, as in vLLM.
        request.cached_tokens =
            (blocks as u64 * BLOCK_TOKENS).min(request.prompt_tokens.saturating_sub(1));
    }
    let writer = ChunkWriter::new(&format!("chatcmpl-sim-{n:x}"), unix_now(), &request);
    match sim.params.engine {
        Engine::Stub => stub::respond(&request, &writer, fault, guard),
        Engine::Model => model::respond(&sim, request, writer, fault, guard).await,
    }
}

/// 503 with `Retry-After: 1`, as a gateway shedding load answers.
fn shed(params: &SimParams) -> Response {
    let err = ApiError {
        status: StatusCode::SERVICE_UNAVAILABLE,
        message: format!(
            "server overloaded: {} requests already in flight; retry later",
            params.max_in_flight
        ),
        kind: "server_error",
        param: None,
        code: Some("overloaded"),
    };
    let mut response = error(&err);
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// An OpenAI-style error response.
pub(crate) fn error(err: &ApiError) -> Response {
    (err.status, Json(err.body())).into_response()
}

/// A response whose body is an event stream.
pub(crate) fn event_stream(body: axum::body::Body) -> Response {
    (
        [
            (CONTENT_TYPE, "text/event-stream"),
            (axum::http::header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// A 200 whose connection is cut before the body completes (reset injection
/// for non-streaming requests).
pub(crate) fn cut_response() -> Response {
    let body = futures_util::stream::iter([Err::<Bytes, _>(reset_error())]);
    (
        [(CONTENT_TYPE, "application/json")],
        axum::body::Body::from_stream(body),
    )
        .into_response()
}

/// A body that sends `bytes`, then aborts the connection: a stream cut
/// mid-way, with the bytes before the cut delivered.
pub(crate) fn cut_body(bytes: Vec<u8>) -> axum::body::Body {
    use futures_util::StreamExt;
    let head = futures_util::stream::once(async move { Ok(Bytes::from(bytes)) });
    let cut = futures_util::stream::once(async {
        // Pending once, so that the server flushes what came before the cut.
        tokio::task::yield_now().await;
        Err(reset_error())
    });
    axum::body::Body::from_stream(head.chain(cut))
}

/// The body error that makes the server abort the connection.
pub(crate) fn reset_error() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::ConnectionReset,
        "simulated connection reset (reset_ratio)",
    )
}

async fn models(State(sim): State<Arc<Sim>>) -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "object": "list",
        "data": [{
            "id": sim.params.model_name,
            "object": "model",
            "created": sim.started,
            "owned_by": "llmprobe-sim",
            "max_model_len": sim.params.max_model_len,
        }],
    }))
}

async fn health() -> StatusCode {
    StatusCode::OK
}

async fn version() -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "server": "llmprobe-sim",
        "version": env!("CARGO_PKG_VERSION"),
    }))
}

async fn not_found() -> Response {
    error(&ApiError {
        status: StatusCode::NOT_FOUND,
        message:
            "not found: the simulator serves /v1/chat/completions, /v1/models, /health and /version"
                .into(),
        kind: "invalid_request_error",
        param: None,
        code: Some("not_found"),
    })
}

async fn server_header(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(SERVER, HeaderValue::from_static(SERVER_NAME));
    response
}

/// Seconds since the Unix epoch (0 if the clock is before it).
fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
