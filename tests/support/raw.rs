//! A hand-written HTTP/1 server for framing-level misbehaviour: the test
//! writes every byte of each response itself.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

/// Headers of a streaming 200 that closes the connection at its end (no
/// content-length, no chunking: the body ends when the connection does).
pub const SSE_HEAD: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";

/// `[DONE]`, the end of an OpenAI stream.
pub const DONE: &str = "data: [DONE]\n\n";

/// A chunk carrying `text` as generated content.
pub fn content(text: &str) -> String {
    format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}},\"finish_reason\":null}}]}}\n\n")
}

/// The chunk that says why generation stopped.
pub fn finish() -> String {
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n".into()
}

/// A usage chunk with empty `choices` (OpenAI, vLLM).
pub fn usage(completion_tokens: u32) -> String {
    format!("data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":3,\"completion_tokens\":{completion_tokens}}}}}\n\n")
}

/// A whole well-formed stream of `n` content chunks.
pub fn good_stream(n: u32) -> String {
    let mut s = String::new();
    for _ in 0..n {
        s.push_str(&content("tok"));
    }
    s.push_str(&finish());
    s.push_str(&usage(n));
    s.push_str(DONE);
    s
}

/// A complete response with a body of known length.
pub fn response(status_line: &str, headers: &[(&str, &str)], body: &str) -> String {
    let mut r = format!("HTTP/1.1 {status_line}\r\nconnection: close\r\n");
    for (k, v) in headers {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    r.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
    r
}

/// One accepted connection.
pub struct Conn {
    stream: TcpStream,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Conn {
    /// Reads one request (head and content-length body) and records its
    /// head; None when the client sent no complete HTTP request.
    pub async fn read_request(&mut self) -> Option<String> {
        self.read_request_and_body().await.map(|(head, _)| head)
    }

    /// As [`Conn::read_request`], with the body.
    pub async fn read_request_and_body(&mut self) -> Option<(String, Vec<u8>)> {
        let mut buf = Vec::new();
        let mut piece = [0u8; 4096];
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if buf.len() > 1 << 20 {
                return None;
            }
            let n = self.stream.read(&mut piece).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&piece[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let length = head
            .lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        let mut body = buf[head_end..].to_vec();
        while body.len() < length {
            let n = self.stream.read(&mut piece).await.ok()?;
            if n == 0 {
                return None;
            }
            body.extend_from_slice(&piece[..n]);
        }
        self.seen.lock().unwrap().push(head.clone());
        Some((head, body))
    }

    /// Writes bytes; false once the client has gone.
    pub async fn write(&mut self, bytes: impl AsRef<[u8]>) -> bool {
        self.stream.write_all(bytes.as_ref()).await.is_ok() && self.stream.flush().await.is_ok()
    }

    /// Waits until the client closes the connection (or 30 s pass).
    pub async fn wait_closed(&mut self) {
        let mut piece = [0u8; 1024];
        let _ = tokio::time::timeout(Duration::from_secs(30), async {
            while matches!(self.stream.read(&mut piece).await, Ok(n) if n > 0) {}
        })
        .await;
    }

    /// Aborts the connection with a TCP reset.
    pub fn reset(self) {
        let _ = self.stream.set_zero_linger();
        drop(self.stream);
    }
}

/// A running raw server; stops (with every connection) when dropped.
pub struct RawServer {
    /// Where it listens.
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<String>>>,
    stop: CancellationToken,
}

impl RawServer {
    /// `http://ADDR/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Heads of the complete requests received so far.
    pub fn requests(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    /// Heads of the chat-completions requests (setup discovery's GETs left out).
    pub fn chat_requests(&self) -> Vec<String> {
        let mut heads = self.requests();
        heads.retain(|h| h.starts_with("POST "));
        heads
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Starts a server on 127.0.0.1:0 that runs `handler` on each connection.
pub async fn start<F, Fut>(handler: F) -> RawServer
where
    F: Fn(Conn) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let stop = CancellationToken::new();
    let (token, log) = (stop.clone(), seen.clone());
    tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                _ = token.cancelled() => return,
                accepted = listener.accept() => match accepted {
                    Ok((s, _)) => s,
                    Err(_) => continue,
                },
            };
            let conn = Conn {
                stream,
                seen: log.clone(),
            };
            let work = handler(conn);
            let token = token.clone();
            tokio::spawn(async move {
                tokio::select! {
                    _ = token.cancelled() => {}
                    _ = work => {}
                }
            });
        }
    });
    RawServer { addr, seen, stop }
}

/// A server that answers every request with the same bytes, then closes.
pub async fn fixed(bytes: impl Into<Vec<u8>>) -> RawServer {
    let bytes: Arc<Vec<u8>> = Arc::new(bytes.into());
    start(move |mut c| {
        let bytes = bytes.clone();
        async move {
            if c.read_request().await.is_some() {
                c.write(&*bytes).await;
            }
        }
    })
    .await
}
