//! The responses the engines build their answers from: OpenAI-style errors,
//! event streams, and connections cut mid-way (reset injection).

use axum::body::Bytes;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::request::ApiError;

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
