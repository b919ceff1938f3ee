//! Setup discovery against fake servers that imitate each kind's endpoints.

mod support;

use axum::http::header::SERVER;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use llmprobe::probe::client::Client;
use llmprobe::probe::setup::{discover, Setup};
use support::ports::refusing_base_url;
use support::server::serve;

fn models(ids: &'static [&'static str]) -> Router {
    Router::new().route(
        "/v1/models",
        get(move || async move {
            Json(json!({"object": "list", "data": ids.iter().map(|i| json!({"id": i, "object": "model"})).collect::<Vec<_>>()}))
        }),
    )
}

async fn setup_of(app: Router, model: &str) -> Setup {
    let server = serve(app).await;
    discover(
        &Client::new(std::time::Duration::from_secs(2)).unwrap(),
        &server.base_url(),
        None,
        model,
    )
    .await
}

#[tokio::test]
async fn vllm() {
    let app = models(&["Qwen/Qwen2.5-7B-Instruct"]).route(
        "/version",
        get(|| async {
            (
                [(SERVER, "uvicorn")],
                Json(json!({"version": "0.6.3.post1"})),
            )
                .into_response()
        }),
    );
    let s = setup_of(app, "Qwen/Qwen2.5-7B-Instruct").await;
    assert_eq!(
        (s.server.as_str(), s.server_version.as_str()),
        ("vllm", "0.6.3.post1")
    );
    assert_eq!(s.model_listed, Some(true));
}

#[tokio::test]
async fn tgi() {
    let app = models(&["tgi"]).route(
        "/info",
        get(|| async { Json(json!({"model_id": "mistralai/Mistral-7B", "version": "2.4.1", "max_concurrent_requests": 128})) }),
    );
    let s = setup_of(app, "mistral").await;
    assert_eq!(
        (s.server.as_str(), s.server_version.as_str()),
        ("tgi", "2.4.1")
    );
    assert_eq!(
        s.model_listed,
        Some(false),
        "a configured model the server does not list is flagged"
    );
    assert_eq!(s.models, vec!["tgi".to_string()]);
}

#[tokio::test]
async fn llama_cpp() {
    let app = models(&["model.gguf"]).route(
        "/props",
        get(|| async {
            ([(SERVER, "llama.cpp")], Json(json!({"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1, "build_info": "b4567-1a2b3c"})))
                .into_response()
        }),
    );
    let s = setup_of(app, "model.gguf").await;
    assert_eq!(
        (s.server.as_str(), s.server_version.as_str()),
        ("llama.cpp", "b4567-1a2b3c")
    );
}

#[tokio::test]
async fn ollama() {
    let app = models(&["qwen2.5:7b"]).route(
        "/api/version",
        get(|| async { Json(json!({"version": "0.5.7"})) }),
    );
    let s = setup_of(app, "qwen2.5:7b").await;
    assert_eq!(
        (s.server.as_str(), s.server_version.as_str()),
        ("ollama", "0.5.7")
    );
    assert_eq!(s.model_listed, Some(true));
}

#[tokio::test]
async fn a_server_that_tells_nothing() {
    let s = setup_of(Router::new(), "m").await;
    assert_eq!(s, Setup::default());
}

#[tokio::test]
async fn an_unreachable_server_does_not_fail() {
    let s = discover(
        &Client::new(std::time::Duration::from_secs(1)).unwrap(),
        &refusing_base_url(),
        None,
        "m",
    )
    .await;
    assert_eq!(s, Setup::default());
}
