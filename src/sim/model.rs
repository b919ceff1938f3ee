//! Answers of the model engine: the request joins the scheduler's queue and
//! each token is written as the scheduler releases it.

use std::io;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;

use super::chunks::ChunkWriter;
use super::faults::Fault;
use super::request::{ApiError, ChatRequest};
use super::responses::{cut_response, error, event_stream, reset_error};
use super::scheduler::Seq;
use super::state::{InFlight, Sim};
use super::text::TextGen;

/// Queues the request and answers it, streamed or whole.
pub(crate) async fn respond(
    sim: &Sim,
    request: ChatRequest,
    writer: ChunkWriter,
    fault: Fault,
    guard: InFlight,
) -> Response {
    let (tokens, rx) = mpsc::unbounded_channel();
    let seq = Seq {
        prompt_tokens: request.prompt_tokens,
        prefill_tokens: request.prompt_tokens - request.cached_tokens,
        max_tokens: request.max_tokens,
        tokens,
    };
    if !sim.submit(seq) {
        return engine_stopped();
    }
    let cut = match fault {
        Fault::Reset { after_tokens } => Some(after_tokens),
        _ => None,
    };
    if request.stream {
        let events = Events {
            text: TextGen::new(request.text_seed),
            rx,
            writer,
            request,
            sent: 0,
            cut,
            guard: Some(guard),
            started: false,
            finished: false,
        };
        return event_stream(Body::from_stream(futures_util::stream::unfold(
            events, next,
        )));
    }
    // Non-streaming: the answer leaves after the last token (or the cut).
    let mut rx = rx;
    for _ in 0..cut.unwrap_or(request.max_tokens) {
        if rx.recv().await.is_none() {
            return engine_stopped();
        }
    }
    drop(guard);
    if cut.is_some() {
        return cut_response();
    }
    let body = writer.completion(&request, &mut TextGen::new(request.text_seed), "length");
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

/// The state of one event stream between two writes.
struct Events {
    rx: mpsc::UnboundedReceiver<()>,
    writer: ChunkWriter,
    request: ChatRequest,
    text: TextGen,
    sent: u32,
    cut: Option<u32>,
    guard: Option<InFlight>,
    started: bool,
    finished: bool,
}

/// The next write of the stream: the role chunk at once, then every token the
/// scheduler has released since the last write (one chunk each).
async fn next(mut ev: Events) -> Option<(io::Result<Bytes>, Events)> {
    if ev.finished {
        return None;
    }
    let mut out = Vec::new();
    if !ev.started {
        // Headers and the role chunk leave before the first token, as on real
        // servers: time to first byte is not TTFT.
        ev.started = true;
        ev.writer.role(&mut out);
        return Some((Ok(out.into()), ev));
    }
    if ev.cut == Some(ev.sent) {
        // Pending once, so that the server flushes what came before the cut.
        tokio::task::yield_now().await;
        ev.finished = true;
        return Some((Err(reset_error()), ev));
    }
    if ev.rx.recv().await.is_none() {
        // The scheduler stopped (shutdown): end like a crashed server.
        ev.finished = true;
        return Some((Err(io::Error::other("simulated engine stopped")), ev));
    }
    let total = ev.request.max_tokens;
    loop {
        ev.sent += 1;
        let last = ev.sent >= total;
        let token = ev.text.next_token();
        ev.writer
            .token(&mut out, ev.sent, token, last.then_some("length"));
        if last {
            // Out of flight before the closing events leave, so a closed-loop
            // client that sends its next request at once is not shed.
            ev.guard = None;
            ev.writer.end(&mut out, &ev.request, total);
            ev.finished = true;
            break;
        }
        if ev.cut == Some(ev.sent) || ev.rx.try_recv().is_err() {
            break;
        }
    }
    Some((Ok(out.into()), ev))
}

fn engine_stopped() -> Response {
    error(&ApiError {
        status: StatusCode::SERVICE_UNAVAILABLE,
        message: "simulated engine stopped".into(),
        kind: "server_error",
        param: None,
        code: None,
    })
}
