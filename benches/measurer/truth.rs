//! The timing-truth server: an OpenAI-compatible streaming endpoint written
//! straight on TCP (HTTP/1.1, chunked), so that the instants it records are
//! the instants its bytes were handed to the kernel, with no framework
//! between. It runs in a child process (`measurer serve-truth ...`) so that
//! its CPU never lands in the client's accounting.
//!
//! For each request it records, on its own monotonic clock, when the request
//! had been read in full and when each content chunk's write returned (on
//! loopback the bytes are then already in the client's receive queue).
//! `GET /truth` returns and forgets those records, keyed by the request's
//! `user` field, which the client sets to a unique id: that is how the
//! client's samples are paired with the server's truth.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How content chunks are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// First content chunk `ttft` after the request, then one every `gap`,
    /// on absolute deadlines so that a late timer delays one chunk only.
    Paced { ttft: Duration, gap: Duration },
    /// No delay: one write per chunk, yielding between chunks so that every
    /// stream gets its turn, as a batching server writes one chunk per
    /// stream per step.
    Saturate,
}

/// The server's own view of one request: content chunk write instants,
/// measured from when the request had been read.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Truth {
    /// Offset of each content chunk's write, in nanoseconds.
    pub writes_ns: Vec<u64>,
}

impl Truth {
    /// Request read to first content chunk written.
    pub fn ttft(&self) -> Option<Duration> {
        self.writes_ns.first().map(|&n| Duration::from_nanos(n))
    }

    /// Gaps between consecutive content chunk writes.
    pub fn gaps(&self) -> impl Iterator<Item = Duration> + '_ {
        self.writes_ns
            .windows(2)
            .map(|w| Duration::from_nanos(w[1] - w[0]))
    }
}

type Records = Arc<Mutex<HashMap<String, Truth>>>;

/// Serves until killed; prints `listening ADDR` on stdout once bound.
pub async fn serve(pace: Pace) -> std::io::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    println!("listening {}", listener.local_addr()?);
    let records: Records = Arc::default();
    loop {
        let (sock, _) = listener.accept().await?;
        let records = records.clone();
        tokio::spawn(async move {
            let _ = connection(sock, pace, records).await;
        });
    }
}

async fn connection(mut sock: TcpStream, pace: Pace, records: Records) -> std::io::Result<()> {
    sock.set_nodelay(true)?;
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    loop {
        let head_end = loop {
            if let Some(p) = find(&buf, b"\r\n\r\n") {
                break p + 4;
            }
            buf.reserve(4096);
            if sock.read_buf(&mut buf).await? == 0 {
                return Ok(());
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let length = head
            .lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        while buf.len() < head_end + length {
            buf.reserve(head_end + length - buf.len());
            if sock.read_buf(&mut buf).await? == 0 {
                return Ok(());
            }
        }
        // The request is complete: this is the server's zero for the request.
        let received = Instant::now();
        let body = buf[head_end..head_end + length].to_vec();
        buf.drain(..head_end + length);
        let path = head.split_whitespace().nth(1).unwrap_or("");
        if head.starts_with("GET") && path == "/truth" {
            let all = std::mem::take(&mut *records.lock().unwrap());
            let json = serde_json::to_vec(&all).unwrap_or_default();
            let mut out = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                json.len()
            )
            .into_bytes();
            out.extend_from_slice(&json);
            sock.write_all(&out).await?;
        } else if head.starts_with("POST") && path.ends_with("/chat/completions") {
            let (id, truth) = stream(&mut sock, &body, pace, received).await?;
            records.lock().unwrap().insert(id, truth);
        } else {
            sock.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                .await?;
        }
    }
}

/// Streams one chat completion and returns the request id and its truth.
async fn stream(
    sock: &mut TcpStream,
    body: &[u8],
    pace: Pace,
    received: Instant,
) -> std::io::Result<(String, Truth)> {
    let request: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let id = request["user"].as_str().unwrap_or("anonymous").to_string();
    let tokens = request["max_completion_tokens"]
        .as_u64()
        .or_else(|| request["max_tokens"].as_u64())
        .unwrap_or(16)
        .max(1);
    let usage = request["stream_options"]["include_usage"] == true;
    let model = request["model"].as_str().unwrap_or("m");
    let tail = if usage { ",\"usage\":null}" } else { "}" };
    // The chunk id carries the request id too, which helps when reading a capture.
    let head = format!(
        "{{\"id\":{},\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":{},\"choices\":[",
        serde_json::json!(id),
        serde_json::json!(model)
    );

    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n",
    );
    frame(&mut out, &format!("{head}{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":\"\"}},\"logprobs\":null,\"finish_reason\":null}}]{tail}"));
    sock.write_all(&out).await?;

    let mut truth = Truth {
        writes_ns: Vec::with_capacity(tokens as usize),
    };
    for i in 0..tokens {
        match pace {
            Pace::Paced { ttft, gap } => {
                let deadline = received + ttft + gap * i as u32;
                tokio::time::sleep_until(deadline.into()).await;
            }
            Pace::Saturate => tokio::task::yield_now().await,
        }
        let finish = if i + 1 == tokens { "\"length\"" } else { "null" };
        out.clear();
        frame(
            &mut out,
            &format!("{head}{{\"index\":0,\"delta\":{{\"content\":\" tok\"}},\"logprobs\":null,\"finish_reason\":{finish}}}]{tail}"),
        );
        sock.write_all(&out).await?;
        truth
            .writes_ns
            .push(received.elapsed().as_nanos() as u64);
    }
    out.clear();
    if usage {
        frame(
            &mut out,
            &format!("{head}],\"usage\":{{\"prompt_tokens\":8,\"completion_tokens\":{tokens},\"total_tokens\":{}}}}}", tokens + 8),
        );
    }
    out.extend_from_slice(b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n");
    sock.write_all(&out).await?;
    Ok((id, truth))
}

/// Appends one SSE event as one HTTP chunk.
fn frame(out: &mut Vec<u8>, data: &str) {
    let event_len = "data: ".len() + data.len() + 2;
    out.extend_from_slice(format!("{event_len:x}\r\ndata: ").as_bytes());
    out.extend_from_slice(data.as_bytes());
    out.extend_from_slice(b"\n\n\r\n");
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
