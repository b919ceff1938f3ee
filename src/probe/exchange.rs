//! One request -> one timestamped sample. Timestamps are taken from the
//! monotonic clock right where each piece of the body arrives, before it is
//! parsed, so parsing cost never lands in TTFT or latency.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use crate::config::redact;
use crate::config::secret::Secret;
use crate::probe::client::{Client, SendError};
use crate::stats::sample::{Outcome, ReasoningFields, Sample, Thinking, TokenSource};
use crate::stream::chunk::{self, Chunk, ChunkInfo};
use crate::stream::sse::{SseDecoder, SseEvent};

/// Longest SSE line accepted; longer ones are a protocol error, which keeps
/// memory bounded whatever a server sends.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// How long the rest of a body is read, in the background, after its stream
/// ended (`[DONE]`, or `finish_reason` and usage), so that the connection can
/// go back to the pool; a server that keeps the body open past it loses the
/// connection. The request's place is freed before this, at the stream's end.
const AFTER_DONE_GRACE: Duration = Duration::from_millis(500);

/// How many times the body's end is looked for, yielding in between, before
/// the rest is left to a background task: a well-behaved server ends the body
/// right after `[DONE]`, and reading that end here returns the connection to
/// the pool before the caller's next request looks for one.
const END_OF_BODY_POLLS: usize = 8;

/// Content chunks beyond the output limit after which a stream is abandoned:
/// a server that ignores the limit would otherwise generate until its context
/// is full. Above the limit itself, with room for servers that split a token
/// over several chunks.
fn chunk_ceiling(output_limit: u64) -> u64 {
    output_limit.saturating_mul(2).saturating_add(16)
}

/// Most tokens one content chunk is believed to carry: servers send one
/// token per chunk, or a few (speculative decoding, a stream interval). A
/// usage report above this times the chunks is not trusted (a server
/// reporting 10^12 tokens over 8 chunks showed 4.6e13 tokens/s).
const MAX_TOKENS_PER_CHUNK: u64 = 64;

/// Tokens a report may claim beyond that (special tokens, a final chunk).
const TOKEN_SLACK: u64 = 16;

/// Prompt tokens a report may claim beyond one per byte of the request
/// body (a chat template, a system prompt the server adds).
const PROMPT_TOKEN_SLACK: u64 = 4096;

/// How much of a non-2xx body is read for the error message: the message
/// shows 200 characters, after whitespace is collapsed and the key removed.
const ERROR_BODY_BYTES: usize = 4096;

/// How long to wait for that much of a non-2xx body: the status already says
/// what happened, so a body that stalls must not turn a 503 into a timeout.
const ERROR_BODY_GRACE: Duration = Duration::from_secs(1);

/// Reads the data of one event as a chunk (the endpoint kind's reader).
pub type ReadChunk = fn(&[u8]) -> Result<Chunk, chunk::ChunkError>;

/// What to send: everything but the body is shared by all requests of a workload.
#[derive(Debug, Clone)]
pub struct RequestSpec<'a> {
    /// Full URL of the endpoint.
    pub url: &'a str,
    /// How the endpoint kind reads one event's data.
    pub read_chunk: ReadChunk,
    /// Bearer key.
    pub key: Option<&'a Secret>,
    /// Limit on the whole request.
    pub timeout: Duration,
    /// Output tokens asked for: a stream that carries far more content
    /// chunks is abandoned as a protocol error (the server ignores the limit).
    pub output_limit: Option<u64>,
}

/// Sends one streaming request and measures it. Never panics, never hangs
/// past `spec.timeout`; every ending maps to one [`Outcome`].
pub async fn measure(
    client: &Client,
    spec: &RequestSpec<'_>,
    body: Bytes,
    cancel: &CancellationToken,
) -> Sample {
    let sent = Instant::now();
    let mut sample = tokio::select! {
        biased;
        _ = cancel.cancelled() => Sample::failed(Outcome::Cancelled, None, "cancelled"),
        r = tokio::time::timeout(spec.timeout, exchange(client, spec, body, sent)) => match r {
            Ok(sample) => sample,
            Err(_) => Sample::failed(
                Outcome::Timeout,
                None,
                format!("no complete response within {}", humantime::format_duration(spec.timeout)),
            ),
        },
    };
    if sample.elapsed.is_zero() {
        sample.elapsed = sent.elapsed();
    }
    if sample.outcome == Outcome::Timeout {
        // A timeout counts as at least its limit, whatever the timer's slack.
        sample.elapsed = sample.elapsed.max(spec.timeout);
    }
    // The finished message, whatever built it (the server's text was
    // redacted before its cut; this covers the client's own errors).
    if let Some(Cow::Owned(clean)) = sample.error.as_deref().map(redact::redact) {
        sample.error = Some(clean);
    }
    sample
}

async fn exchange(client: &Client, spec: &RequestSpec<'_>, body: Bytes, sent: Instant) -> Sample {
    // No tokenizer yields more tokens than the prompt's bytes.
    let body_len = u64::try_from(body.len()).unwrap_or(u64::MAX);
    let resp = match client.post_json(spec.url, spec.key, body).await {
        Ok(r) => r,
        Err(SendError::Connect(e)) => return Sample::failed(Outcome::ConnectError, None, e),
        Err(SendError::Proxy(e)) => return Sample::failed(Outcome::ProxyError, None, e),
        Err(SendError::Timeout) => return Sample::failed(Outcome::Timeout, None, "timed out"),
        Err(SendError::Other(e)) => return Sample::failed(Outcome::ProtocolError, None, e),
    };
    let connect = resp.connect;
    let mut sample = read_answer(resp, spec, sent, body_len).await;
    sample.connect = connect;
    sample
}

/// Reads the answer whose headers arrived.
async fn read_answer(
    mut resp: crate::probe::client::Response,
    spec: &RequestSpec<'_>,
    sent: Instant,
    body_len: u64,
) -> Sample {
    let status = resp.status;
    if !(200..300).contains(&status) {
        let outcome = match status {
            503 => Outcome::Shed,
            429 => Outcome::RateLimited,
            _ => Outcome::HttpError,
        };
        let detail = if (300..400).contains(&status) {
            "redirect not followed (a key is never sent to another location)".to_string()
        } else {
            error_body(resp).await
        };
        return Sample::failed(outcome, Some(status), format!("HTTP {status}: {detail}"));
    }
    match resp.content_type.as_deref() {
        None | Some("text/event-stream") => {}
        Some(other) => {
            return Sample::failed(
                Outcome::ProtocolError,
                Some(status),
                format!("expected an event stream, got content-type {other}"),
            )
        }
    }

    let mut stream = StreamState::new(sent, spec.output_limit.map(chunk_ceiling))
        .with_prompt_ceiling(body_len.saturating_add(PROMPT_TOKEN_SLACK));
    stream.read_chunk = spec.read_chunk;
    let mut decoder = SseDecoder::new(MAX_LINE_BYTES);
    loop {
        let next = resp.next_bytes().await;
        // The arrival time of these bytes, taken before any parsing.
        let arrived = Instant::now();
        match next {
            Ok(Some(bytes)) => {
                if let Err(e) = decoder.feed(&bytes, |ev| stream.on_event(ev, arrived)) {
                    return stream.fail(status, e.to_string());
                }
                if stream.failed.is_some() {
                    break;
                }
                if stream.ended() {
                    stream.end = Some(arrived);
                    release(resp).await;
                    return stream.into_sample(status);
                }
            }
            Ok(None) => {
                if let Err(e) = decoder.finish(|ev| stream.on_event(ev, arrived)) {
                    return stream.fail(status, e.to_string());
                }
                stream.end = Some(arrived);
                break;
            }
            Err(e) => {
                return stream.fail(
                    status,
                    format!(
                        "stream broken after {} content chunks: {e}",
                        stream.content_chunks
                    ),
                );
            }
        }
    }
    // The connection goes back to the pool two task hops after the body is
    // dropped (its connection task notices, then the pool's return task
    // runs). A caller sending its next request before then finds no idle
    // connection and opens another: a sweep at concurrency 512 against the
    // stub engine ended with 1,017 connections instead of 514 (BENCHMARKS.md).
    drop(resp);
    settle().await;
    stream.into_sample(status)
}

/// Lets the pool take a dropped connection back (see the end of `read_answer`).
async fn settle() {
    for _ in 0..2 {
        tokio::task::yield_now().await;
    }
}

/// Gives back a response whose stream has ended. When the body ends at once
/// (a well-behaved server), the connection returns to the pool before the
/// caller's next request; otherwise the rest is read in the background for a
/// bounded time, and the request's place is not held meanwhile.
async fn release(mut resp: crate::probe::client::Response) {
    for _ in 0..END_OF_BODY_POLLS {
        match tokio::time::timeout(Duration::ZERO, resp.next_bytes()).await {
            Ok(Ok(None)) => {
                drop(resp);
                settle().await;
                return;
            }
            // Whatever follows the end is ignored.
            Ok(Ok(Some(_))) => {}
            Ok(Err(_)) => return,
            Err(_) => tokio::task::yield_now().await,
        }
    }
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + AFTER_DONE_GRACE;
        while let Ok(Ok(Some(_))) = tokio::time::timeout_at(deadline, resp.next_bytes()).await {}
    });
}

/// What has been seen of one stream so far.
struct StreamState {
    sent: Instant,
    first: Option<Instant>,
    last: Option<Instant>,
    inter_token: Vec<Duration>,
    content_chunks: u64,
    usage_completion: Option<u64>,
    usage_prompt: Option<u64>,
    usage_cached: Option<u64>,
    usage_seen: bool,
    /// The first chunk that carried the answer (not only thinking).
    first_answer: Option<Instant>,
    /// Chunks that carried a reasoning model's thinking, and in which fields.
    reasoning_chunks: u64,
    reasoning_fields: ReasoningFields,
    usage_reasoning: Option<u64>,
    finish_reason_seen: bool,
    done: bool,
    /// Content chunks beyond which the stream is abandoned.
    chunk_ceiling: Option<u64>,
    /// Prompt tokens beyond which a usage report is not trusted.
    prompt_ceiling: u64,
    /// How one event's data is read.
    read_chunk: ReadChunk,
    /// When the stream ended (the chunk that ended it, or the body's end).
    end: Option<Instant>,
    failed: Option<String>,
}

impl StreamState {
    fn new(sent: Instant, chunk_ceiling: Option<u64>) -> Self {
        StreamState {
            sent,
            chunk_ceiling,
            prompt_ceiling: u64::MAX,
            read_chunk: chunk::interpret,
            end: None,
            usage_cached: None,
            usage_seen: false,
            first: None,
            last: None,
            inter_token: Vec::new(),
            content_chunks: 0,
            usage_completion: None,
            usage_prompt: None,
            first_answer: None,
            reasoning_chunks: 0,
            reasoning_fields: ReasoningFields::default(),
            usage_reasoning: None,
            finish_reason_seen: false,
            done: false,
            failed: None,
        }
    }

    fn with_prompt_ceiling(mut self, ceiling: u64) -> Self {
        self.prompt_ceiling = ceiling;
        self
    }

    /// Whether the stream has said all it will: `[DONE]`, or a
    /// `finish_reason` and a usage report (some servers send nothing after
    /// them and keep the body open).
    fn ended(&self) -> bool {
        self.done || (self.finish_reason_seen && self.usage_seen)
    }

    fn on_event(&mut self, ev: SseEvent<'_>, arrived: Instant) {
        if self.failed.is_some() || self.ended() {
            return;
        }
        let parsed = (self.read_chunk)(ev.data);
        if let Some(msg) = failure(ev.event, ev.data, &parsed) {
            self.failed = Some(msg);
            return;
        }
        match parsed {
            Ok(Chunk::Done) => self.done = true,
            Ok(Chunk::Data(info)) => {
                if info.generated {
                    match self.last {
                        Some(prev) => self.inter_token.push(arrived - prev),
                        None => self.first = Some(arrived),
                    }
                    self.last = Some(arrived);
                    self.content_chunks += 1;
                    // The same arrival time as the first token's: no
                    // parsing between the bytes and the answer's clock.
                    if info.answered && self.first_answer.is_none() {
                        self.first_answer = Some(arrived);
                    }
                    if info.reasoning || info.reasoning_content {
                        self.reasoning_chunks += 1;
                        self.reasoning_fields.reasoning |= info.reasoning;
                        self.reasoning_fields.reasoning_content |= info.reasoning_content;
                    }
                    if let Some(ceiling) = self.chunk_ceiling {
                        if self.content_chunks > ceiling {
                            self.failed = Some(format!(
                                "the server sent over {ceiling} content chunks, far more than the output \
                                 limit asked for: it ignores the field that carries the limit"
                            ));
                            return;
                        }
                    }
                }
                if info.finish_reason.is_some() {
                    self.finish_reason_seen = true;
                }
                if let Some(u) = info.usage {
                    self.usage_seen = true;
                    // The last report wins: gateways may replace the server's count.
                    if u.completion_tokens.is_some() {
                        self.usage_completion = u.completion_tokens;
                    }
                    if u.prompt_tokens.is_some() {
                        self.usage_prompt = u.prompt_tokens;
                    }
                    if u.cached_prompt_tokens.is_some() {
                        self.usage_cached = u.cached_prompt_tokens;
                    }
                    if u.reasoning_tokens.is_some() {
                        self.usage_reasoning = u.reasoning_tokens;
                    }
                }
            }
            // Errors were turned into `failed` above.
            Err(_) => {}
        }
    }

    /// Why a stream without generated content failed, told apart by how it
    /// ended: the operator's fix differs (a model that stops at once is a
    /// chat template or prompt question; a stream cut before its answer is a
    /// server setting, llama-cpp-python's default `interrupt_requests` that
    /// ends a stream with `[DONE]` whenever another request waits).
    fn why_no_content(&self) -> &'static str {
        if self.finish_reason_seen {
            "stream carried no generated content: an empty answer (a finish_reason before any content; \
             the model stopped at once: its chat template or the prompt?)"
        } else if self.done {
            "stream carried no generated content: [DONE] came before any content and without a \
             finish_reason, so the server cut the answer (llama-cpp-python does this to a stream \
             whenever another request waits, unless started with `--interrupt_requests False`)"
        } else {
            "stream carried no generated content"
        }
    }

    fn fail(&self, status: u16, msg: String) -> Sample {
        let mut s = Sample::failed(Outcome::ProtocolError, Some(status), msg);
        s.content_chunks = self.content_chunks;
        s
    }

    fn into_sample(self, status: u16) -> Sample {
        if let Some(msg) = &self.failed {
            return self.fail(status, msg.clone());
        }
        let (Some(first), Some(last)) = (self.first, self.last) else {
            return self.fail(status, self.why_no_content().into());
        };
        if !self.done && !self.finish_reason_seen {
            return self.fail(
                status,
                format!(
                    "stream cut off after {} content chunks: it ended without [DONE] or finish_reason",
                    self.content_chunks
                ),
            );
        }
        // A report of 0 tokens for a stream that carried content is wrong
        // (some servers send a placeholder usage), and so is one above what
        // the chunks could carry: count the chunks instead. Decided once per
        // request, nothing per chunk.
        let most = self
            .content_chunks
            .saturating_mul(MAX_TOKENS_PER_CHUNK)
            .saturating_add(TOKEN_SLACK);
        let output_disagreed = match self.usage_completion {
            Some(0) => self.content_chunks > 0,
            Some(n) => n > most,
            None => false,
        };
        let (output_tokens, token_source) = match self.usage_completion {
            Some(n) if !output_disagreed => (n, TokenSource::Usage),
            _ => (self.content_chunks, TokenSource::Chunks),
        };
        // Prompt counts above what the request could hold are dropped, and
        // cached tokens above the prompt with them.
        let prompt_tokens = self.usage_prompt.filter(|&p| p <= self.prompt_ceiling);
        let cached_prompt_tokens = self
            .usage_cached
            .filter(|&c| prompt_tokens.is_some_and(|p| c <= p));
        // Reasoning is part of the output: a report of more is not trusted.
        let reasoning_tokens = self.usage_reasoning.filter(|&r| r <= output_tokens);
        let usage_disagreed = output_disagreed
            || prompt_tokens != self.usage_prompt
            || cached_prompt_tokens != self.usage_cached
            || reasoning_tokens != self.usage_reasoning;
        let end = self.end.unwrap_or(last).max(last);
        Sample {
            outcome: Outcome::Ok,
            status: Some(status),
            ttft: Some(first - self.sent),
            latency: Some(last - self.sent),
            inter_token: self.inter_token,
            output_tokens,
            token_source,
            prompt_tokens,
            cached_prompt_tokens,
            content_chunks: self.content_chunks,
            finish_reason_seen: self.finish_reason_seen,
            error: None,
            elapsed: end - self.sent,
            connect: None,
            usage_disagreed,
            thinking: Thinking {
                answer_ttft: self.first_answer.map(|a| a - self.sent),
                chunks: self.reasoning_chunks,
                usage_tokens: reasoning_tokens,
                fields: self.reasoning_fields,
            },
        }
    }
}

/// Why this event fails the request, if it does: an `error` field, an
/// `event: error` (whatever its data says), or data that is not a chunk.
/// The server's text arrives whole (bounded, a cut marked) and goes through
/// [`redact::message`], which removes every key before it cuts.
fn failure(
    event: Option<&[u8]>,
    data: &[u8],
    parsed: &Result<Chunk, chunk::ChunkError>,
) -> Option<String> {
    let said = match parsed {
        Ok(Chunk::Data(ChunkInfo {
            error: Some(err), ..
        })) => format!("error event in stream: {err}"),
        _ if event == Some(b"error") => format!(
            "error event in stream: {}",
            chunk::bounded(&String::from_utf8_lossy(
                &data[..data.len().min(chunk::MAX_KEPT_BYTES + 1)]
            ))
        ),
        Err(e) => format!("bad chunk: {e}"),
        Ok(_) => return None,
    };
    Some(redact::message(&said, MESSAGE_CHARS))
}

/// Longest message a failed request carries, in characters.
const MESSAGE_CHARS: usize = 200;

/// The start of a non-2xx body, on one line, without the key.
async fn error_body(mut resp: crate::probe::client::Response) -> String {
    let deadline = tokio::time::Instant::now() + ERROR_BODY_GRACE;
    let mut body = Vec::new();
    let mut whole = false;
    while body.len() < ERROR_BODY_BYTES {
        match tokio::time::timeout_at(deadline, resp.next_bytes()).await {
            Ok(Ok(Some(b))) => {
                body.extend_from_slice(&b[..b.len().min(ERROR_BODY_BYTES - body.len())]);
            }
            Ok(Ok(None)) => {
                whole = true;
                break;
            }
            _ => break,
        }
    }
    if whole {
        return redact::message(&String::from_utf8_lossy(&body), MESSAGE_CHARS);
    }
    // Only the start was read: a character cut in two goes, and the cut is
    // marked, so that a key cut there is redacted from what is left.
    let valid = match std::str::from_utf8(&body) {
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        _ => body.len(),
    };
    let mut text = String::from_utf8_lossy(&body[..valid]).into_owned();
    text.push(chunk::CUT_MARK);
    redact::message(&text, MESSAGE_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_keeps_server_text_off_the_terminal() {
        assert_eq!(redact::message("a\n b\r\n\tc", 10), "a b c");
        assert_eq!(
            redact::message("red \x1b[31mtext", 50),
            "red \u{FFFD}[31mtext"
        );
        assert_eq!(redact::message("abcdef", 3), "abc...");
        let data = br#"{"error":{"message":"line one\nline two \u001b[2J"}}"#;
        let msg = failure(None, data, &chunk::interpret(data)).unwrap();
        assert_eq!(msg, "error event in stream: line one line two \u{FFFD}[2J");
    }

    #[test]
    fn event_error_fails_whatever_its_data() {
        let data = br#"{"message":"upstream gone"}"#;
        let msg = failure(Some(b"error"), data, &chunk::interpret(data)).unwrap();
        assert!(msg.contains("upstream gone"), "{msg}");
        assert_eq!(failure(None, data, &chunk::interpret(data)), None);
        let data = br#"{"error":{"message":"overloaded"}}"#;
        let msg = failure(None, data, &chunk::interpret(data)).unwrap();
        assert_eq!(msg, "error event in stream: overloaded");
        assert!(failure(None, b"{nope", &chunk::interpret(b"{nope"))
            .unwrap()
            .starts_with("bad chunk"));
    }

    /// A stream of `chunks` content chunks, then a usage report.
    fn stream_with_usage(chunks: u64, usage: &str, prompt_ceiling: u64) -> Sample {
        let mut s = StreamState::new(Instant::now(), None).with_prompt_ceiling(prompt_ceiling);
        let now = Instant::now();
        for _ in 0..chunks {
            let data = br#"{"choices":[{"index":0,"delta":{"content":"a"}}]}"#;
            s.on_event(SseEvent { event: None, data }, now);
        }
        let data = format!(
            r#"{{"choices":[{{"index":0,"delta":{{}},"finish_reason":"stop"}}],"usage":{usage}}}"#
        );
        s.on_event(
            SseEvent {
                event: None,
                data: data.as_bytes(),
            },
            now,
        );
        s.into_sample(200)
    }

    #[test]
    fn the_answer_clock_stops_at_the_first_answer_chunk_after_the_thinking() {
        let sent = Instant::now();
        let at = |ms: u64| sent + Duration::from_millis(ms);
        let mut s = StreamState::new(sent, None);
        let events: [(&[u8], u64); 6] = [
            (br#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#, 5),
            (br#"{"choices":[{"index":0,"delta":{"reasoning":"Let"}}]}"#, 40),
            (br#"{"choices":[{"index":0,"delta":{"reasoning":" me"}}]}"#, 60),
            (br#"{"choices":[{"index":0,"delta":{"content":"Yes"}}]}"#, 900),
            (br#"{"choices":[{"index":0,"delta":{"content":"."},"finish_reason":"stop"}]}"#, 920),
            (br#"{"choices":[],"usage":{"completion_tokens":4,"completion_tokens_details":{"reasoning_tokens":2}}}"#, 925),
        ];
        for (data, ms) in events {
            s.on_event(SseEvent { event: None, data }, at(ms));
        }
        let sample = s.into_sample(200);
        assert_eq!(sample.outcome, Outcome::Ok);
        assert_eq!(
            sample.ttft,
            Some(Duration::from_millis(40)),
            "the first thinking token"
        );
        assert_eq!(sample.answer_ttft(), Some(Duration::from_millis(900)));
        assert_eq!(sample.thinking.chunks, 2);
        assert!(sample.thinking.fields.reasoning && !sample.thinking.fields.reasoning_content);
        assert_eq!(sample.reasoning_tokens(), (2, TokenSource::Usage));
        assert_eq!(sample.output_tokens, 4, "thinking is output");
        assert!(!sample.usage_disagreed);
    }

    #[test]
    fn reasoning_reported_above_the_output_is_not_trusted() {
        let s = stream_with_usage(
            8,
            r#"{"completion_tokens":8,"completion_tokens_details":{"reasoning_tokens":5000}}"#,
            u64::MAX,
        );
        assert_eq!(s.thinking.usage_tokens, None);
        assert!(s.usage_disagreed);
        assert_eq!(s.reasoning_tokens(), (0, TokenSource::Chunks));
    }

    #[test]
    fn usage_above_what_the_chunks_could_carry_is_not_trusted() {
        // (usage, tokens, source, prompt, cached, disagreed)
        type Row = (
            &'static str,
            u64,
            TokenSource,
            Option<u64>,
            Option<u64>,
            bool,
        );
        let table: &[Row] = &[
            // (usage, tokens, source, prompt, cached, disagreed)
            (
                r#"{"completion_tokens":8,"prompt_tokens":50}"#,
                8,
                TokenSource::Usage,
                Some(50),
                None,
                false,
            ),
            (
                r#"{"completion_tokens":40}"#,
                40,
                TokenSource::Usage,
                None,
                None,
                false,
            ),
            (
                r#"{"completion_tokens":0}"#,
                8,
                TokenSource::Chunks,
                None,
                None,
                true,
            ),
            (
                r#"{"completion_tokens":1000000000000}"#,
                8,
                TokenSource::Chunks,
                None,
                None,
                true,
            ),
            (
                r#"{"completion_tokens":18446744073709551615}"#,
                8,
                TokenSource::Chunks,
                None,
                None,
                true,
            ),
            (
                r#"{"completion_tokens":8,"prompt_tokens":1000000000000000000}"#,
                8,
                TokenSource::Usage,
                None,
                None,
                true,
            ),
            (
                r#"{"completion_tokens":8,"prompt_tokens":50,"prompt_tokens_details":{"cached_tokens":60}}"#,
                8,
                TokenSource::Usage,
                Some(50),
                None,
                true,
            ),
            (
                r#"{"completion_tokens":8,"prompt_tokens":50,"prompt_tokens_details":{"cached_tokens":40}}"#,
                8,
                TokenSource::Usage,
                Some(50),
                Some(40),
                false,
            ),
        ];
        for (usage, tokens, source, prompt, cached, disagreed) in table {
            let s = stream_with_usage(8, usage, 10_000);
            assert_eq!(s.outcome, Outcome::Ok, "{usage}");
            assert_eq!(
                (
                    s.output_tokens,
                    s.token_source,
                    s.prompt_tokens,
                    s.cached_prompt_tokens,
                    s.usage_disagreed
                ),
                (*tokens, *source, *prompt, *cached, *disagreed),
                "{usage}"
            );
        }
    }

    #[test]
    fn an_error_event_quoting_the_key_is_reported_without_it() {
        // Redacted while it is alive, as a loaded configuration's keys.
        let _key = Secret::new("sk-PLANTED".into());
        let mut s = StreamState::new(Instant::now(), None);
        let data = br#"{"error":{"message":"bad key Bearer sk-PLANTED"}}"#;
        s.on_event(SseEvent { event: None, data }, Instant::now());
        let msg = s.failed.unwrap();
        assert_eq!(msg, "error event in stream: bad key Bearer [redacted]");
    }

    /// An OpenAI-style project key: 164 characters.
    const LONG_KEY: &str = "sk-proj-Zq8vN3xR7tLm2KpW9sYc4HbJ6dFg1QaE5uVo0TiXyB3nM8kC7rL2wP4zS6jD9fG1hA5eU0qO3tI7vR2yN8bK6mX4cZ1sW9pL3dF7gJ5hQ2aE8uT0oY6iV4nB1kM9rC3xS7zW5pD2fG8jH4lA6eQ0uT9vW3xY";

    /// The failure message of one error event carrying `text` as its message.
    fn reported(text: &str) -> String {
        let data = serde_json::json!({ "error": { "message": text } }).to_string();
        let mut s = StreamState::new(Instant::now(), None);
        s.on_event(
            SseEvent {
                event: None,
                data: data.as_bytes(),
            },
            Instant::now(),
        );
        s.failed.expect("an error event fails the request")
    }

    /// A run of 5 of `key`'s characters found in `text`, if any: what a
    /// message may show of a key is at most 3 characters (`redact::MIN_TAIL`).
    fn leaked(text: &str, key: &str) -> Option<String> {
        key.as_bytes()
            .windows(5)
            .map(|w| std::str::from_utf8(w).unwrap_or_default())
            .find(|w| text.contains(w))
            .map(str::to_owned)
    }

    #[test]
    fn a_long_key_in_a_stream_error_never_leaks_at_any_offset() {
        assert_eq!(LONG_KEY.len(), 164);
        let _key = Secret::new(LONG_KEY.into());
        for offset in 0..=300 {
            let lead = "x".repeat(offset);
            let split = format!("{}\n{}", &LONG_KEY[..70], &LONG_KEY[70..]);
            for key in [LONG_KEY.to_string(), split] {
                let text = format!(
                    "Authentication error: {lead} Authorization: Bearer {key} was rejected by the upstream"
                );
                let msg = reported(&text);
                // Whitespace is collapsed in a message: look with it gone too.
                let joined: String = msg.split_whitespace().collect();
                for shown in [&msg, &joined] {
                    assert_eq!(leaked(shown, LONG_KEY), None, "offset {offset}: {msg}");
                }
                assert!(msg.starts_with("error event in stream: Authentication error:"));
            }
        }
    }

    #[test]
    fn a_key_in_an_error_event_data_or_a_bad_chunk_never_leaks() {
        let _key = Secret::new(LONG_KEY.into());
        for offset in [0, 50, 150, 190, 250, 5000] {
            let lead = "y".repeat(offset);
            let raw = format!("upstream said {lead} Bearer {LONG_KEY} no");
            let event = failure(
                Some(b"error"),
                raw.as_bytes(),
                &chunk::interpret(raw.as_bytes()),
            );
            // serde's message quotes the string of a wrong-typed field.
            let bad = format!(r#"{{"choices":[{{"delta":{{"content":"{lead} {LONG_KEY}"}}}}]}}"#)
                .replace(r#""content":""#, r#""content":{"t":""#)
                .replace(r#"}]}"#, r#"}}]}"#);
            let shape = failure(None, bad.as_bytes(), &chunk::interpret(bad.as_bytes()));
            for msg in [event.unwrap(), shape.unwrap()] {
                assert_eq!(leaked(&msg, LONG_KEY), None, "offset {offset}: {msg}");
            }
        }
    }

    #[test]
    fn the_stream_layer_marks_its_cuts_as_redaction_expects() {
        assert_eq!(chunk::CUT_MARK, redact::CUT_MARK);
    }
}
