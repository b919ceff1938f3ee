//! The HTTP surface: routes and load shedding. What an engine answers lives
//! in `model.rs` and `stub.rs`, built from `responses.rs`; the state every
//! request shares in `state.rs`.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::{CONTENT_TYPE, RETRY_AFTER, SERVER};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use tokio_util::sync::CancellationToken;

use super::chunks::ChunkWriter;
use super::faults::{self, Fault};
use super::params::{Engine, SimParams};
use super::prefix_cache::BLOCK_TOKENS;
use super::request::{self, ApiError};
use super::responses::error;
use super::state::Sim;
use super::{model, stub};

/// `Server` header on every response, so llmprobe's discovery can tell it apart.
const SERVER_NAME: &str = concat!("llmprobe-sim/", env!("CARGO_PKG_VERSION"));

/// The routes of the simulated server; the scheduler stops when `shutdown`
/// fires or the router is dropped.
pub(crate) fn router(params: SimParams, shutdown: CancellationToken) -> Router {
    let sim = Arc::new(Sim::new(params, shutdown, unix_now()));
    Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .route("/v1/models", get(models))
        .route("/health", get(health))
        .route("/version", get(version))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .layer(axum::middleware::map_response(server_header))
        .with_state(sim)
}

async fn chat(State(sim): State<Arc<Sim>>, body: Bytes) -> Response {
    let parsed = request::parse(&body, &sim.params);
    answer(sim, parsed).await
}

async fn completions(State(sim): State<Arc<Sim>>, body: Bytes) -> Response {
    let parsed = request::parse_completions(&body, &sim.params);
    answer(sim, parsed).await
}

/// Answers a parsed request of either endpoint, as the engine does.
async fn answer(sim: Arc<Sim>, parsed: Result<request::ChatRequest, ApiError>) -> Response {
    let request = match parsed {
        Ok(request) => request,
        Err(err) => return error(&err),
    };
    let n = sim.next_request();
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
    if faults::slow(&sim.params, n) {
        // Held in flight, as a request stuck behind a slow step would be.
        tokio::time::sleep(sim.params.slow_delay).await;
    }
    let mut request = request;
    if sim.params.engine == Engine::Model && !request.prefix_blocks.is_empty() {
        let blocks = sim.admit_prefix(&request.prefix_blocks);
        // At least the last prompt token is always computed, as in vLLM.
        request.cached_tokens =
            (blocks as u64 * BLOCK_TOKENS).min(request.prompt_tokens.saturating_sub(1));
        sim.gauges
            .prefix_lookup(request.prompt_tokens, request.cached_tokens);
    }
    let prefix = if request.completions {
        "cmpl"
    } else {
        "chatcmpl"
    };
    let writer = ChunkWriter::new(&format!("{prefix}-sim-{n:x}"), unix_now(), &request);
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

async fn models(State(sim): State<Arc<Sim>>) -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "object": "list",
        "data": [{
            "id": sim.params.model_name,
            "object": "model",
            "created": sim.started(),
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

/// The engine's figures under vLLM's names (see `gauges.rs`).
async fn metrics(State(sim): State<Arc<Sim>>) -> Response {
    let body = sim
        .gauges
        .render(&sim.params.model_name, sim.params.kv_cache_tokens);
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        body,
    )
        .into_response()
}

async fn not_found() -> Response {
    error(&ApiError {
        status: StatusCode::NOT_FOUND,
        message:
            "not found: the simulator serves /v1/chat/completions, /v1/completions, /v1/models, /health, /version and /metrics"
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
