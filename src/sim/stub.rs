//! Answers of the stub engine: no model time, the whole response is built in
//! one buffer and handed to the connection at once.

use axum::body::Body;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};

use super::chunks::ChunkWriter;
use super::faults::Fault;
use super::request::ChatRequest;
use super::responses::{cut_body, cut_response, event_stream};
use super::state::InFlight;
use super::text::TextGen;

/// Bytes of one token chunk, to size the buffer once.
const CHUNK_BYTES: usize = 200;

/// Builds the complete answer.
pub(crate) fn respond(
    request: &ChatRequest,
    writer: &ChunkWriter,
    fault: Fault,
    guard: InFlight,
) -> Response {
    // The stub holds its slot only while building: it has no model time.
    drop(guard);
    let cut = match fault {
        Fault::Reset { after_tokens } => Some(after_tokens),
        _ => None,
    };
    let total = request.max_tokens;
    let mut text = TextGen::new(request.text_seed);
    if !request.stream {
        if cut.is_some() {
            return cut_response();
        }
        let body = writer.completion(request, &mut text, "length");
        return ([(CONTENT_TYPE, "application/json")], body).into_response();
    }
    let tokens = cut.unwrap_or(total);
    let mut out = Vec::with_capacity(CHUNK_BYTES * (tokens as usize + 3));
    writer.role(&mut out);
    for i in 1..=tokens {
        writer.token(
            &mut out,
            i,
            text.next_token(),
            (i == total).then_some("length"),
        );
    }
    if cut.is_some() {
        return event_stream(cut_body(out));
    }
    writer.end(&mut out, request, total);
    event_stream(Body::from(out))
}
