//! One request -> one timestamped sample. Timestamps are taken from the
//! monotonic clock right where each piece of the body arrives, before it is
//! parsed, so parsing cost never lands in TTFT or latency.

use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use crate::chunk::{self, Chunk};
use crate::client::{Client, SendError};
use crate::sample::{Outcome, Sample, TokenSource};
use crate::secret::Secret;
use crate::sse::SseDecoder;

/// Longest SSE line accepted; longer ones are a protocol error, which keeps
/// memory bounded whatever a server sends.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// How long to keep reading after `[DONE]` for the body to end, so the
/// connection goes back to the pool; a server that keeps it open is not waited on.
const AFTER_DONE_GRACE: Duration = Duration::from_millis(500);

/// What to send: everything but the body is shared by all requests of a workload.
#[derive(Debug, Clone)]
pub struct RequestSpec<'a> {
    /// Full chat-completions URL.
    pub url: &'a str,
    /// Bearer key.
    pub key: Option<&'a Secret>,
    /// Limit on the whole request.
    pub timeout: Duration,
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
    tokio::select! {
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
    }
}

async fn exchange(client: &Client, spec: &RequestSpec<'_>, body: Bytes, sent: Instant) -> Sample {
    let mut resp = match client.post_json(spec.url, spec.key, body).await {
        Ok(r) => r,
        Err(SendError::Connect(e)) => return Sample::failed(Outcome::ConnectError, None, e),
        Err(SendError::Timeout) => return Sample::failed(Outcome::Timeout, None, "timed out"),
        Err(SendError::Other(e)) => return Sample::failed(Outcome::ProtocolError, None, e),
    };
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
            let text = resp.text_prefix(300).await;
            one_line(&text, 200)
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

    let mut stream = StreamState::new(sent);
    let mut decoder = SseDecoder::new(MAX_LINE_BYTES);
    loop {
        let next = if stream.done {
            match tokio::time::timeout(AFTER_DONE_GRACE, resp.next_bytes()).await {
                Ok(n) => n,
                Err(_) => Ok(None),
            }
        } else {
            resp.next_bytes().await
        };
        // The arrival time of these bytes, taken before any parsing.
        let arrived = Instant::now();
        match next {
            Ok(Some(bytes)) => {
                if let Err(e) = decoder.feed(&bytes, |ev| stream.on_event(ev.data, arrived)) {
                    return stream.fail(status, e.to_string());
                }
                if stream.failed.is_some() {
                    break;
                }
            }
            Ok(None) => {
                if let Err(e) = decoder.finish(|ev| stream.on_event(ev.data, arrived)) {
                    return stream.fail(status, e.to_string());
                }
                break;
            }
            Err(e) => {
                if stream.done {
                    break;
                }
                return stream.fail(status, format!("stream broken: {e}"));
            }
        }
    }
    // The connection goes back to the pool two task hops after the body is
    // dropped (its connection task notices, then the pool's return task
    // runs). A caller sending its next request before then finds no idle
    // connection and opens another: a sweep at concurrency 512 against the
    // stub engine ended with 1,017 connections instead of 514 (BENCHMARKS.md).
    drop(resp);
    for _ in 0..2 {
        tokio::task::yield_now().await;
    }
    stream.into_sample(status)
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
    finish_reason_seen: bool,
    done: bool,
    failed: Option<String>,
}

impl StreamState {
    fn new(sent: Instant) -> Self {
        StreamState {
            sent,
            first: None,
            last: None,
            inter_token: Vec::new(),
            content_chunks: 0,
            usage_completion: None,
            usage_prompt: None,
            finish_reason_seen: false,
            done: false,
            failed: None,
        }
    }

    fn on_event(&mut self, data: &[u8], arrived: Instant) {
        if self.failed.is_some() || self.done {
            return;
        }
        match chunk::interpret(data) {
            Ok(Chunk::Done) => self.done = true,
            Ok(Chunk::Data(info)) => {
                if let Some(err) = info.error {
                    self.failed = Some(format!("error event in stream: {err}"));
                    return;
                }
                if info.generated {
                    match self.last {
                        Some(prev) => self.inter_token.push(arrived - prev),
                        None => self.first = Some(arrived),
                    }
                    self.last = Some(arrived);
                    self.content_chunks += 1;
                }
                if info.finish_reason.is_some() {
                    self.finish_reason_seen = true;
                }
                if let Some(u) = info.usage {
                    // The last report wins: gateways may replace the server's count.
                    if u.completion_tokens.is_some() {
                        self.usage_completion = u.completion_tokens;
                    }
                    if u.prompt_tokens.is_some() {
                        self.usage_prompt = u.prompt_tokens;
                    }
                }
            }
            Err(e) => self.failed = Some(format!("bad chunk: {e}")),
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
            return self.fail(status, "stream carried no generated content".into());
        };
        if !self.done && !self.finish_reason_seen {
            return self.fail(
                status,
                "stream ended without [DONE] or finish_reason (cut off?)".into(),
            );
        }
        let (output_tokens, token_source) = match self.usage_completion {
            Some(n) => (n, TokenSource::Usage),
            None => (self.content_chunks, TokenSource::Chunks),
        };
        Sample {
            outcome: Outcome::Ok,
            status: Some(status),
            ttft: Some(first - self.sent),
            latency: Some(last - self.sent),
            inter_token: self.inter_token,
            output_tokens,
            token_source,
            prompt_tokens: self.usage_prompt,
            content_chunks: self.content_chunks,
            finish_reason_seen: self.finish_reason_seen,
            error: None,
        }
    }
}

/// Collapses whitespace and truncates, for log-friendly error bodies.
fn one_line(text: &str, max_chars: usize) -> String {
    let collapsed: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.chars().count() > max_chars {
        let cut: String = collapsed.chars().take(max_chars).collect();
        format!("{cut}...")
    } else {
        collapsed
    }
}
