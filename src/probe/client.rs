//! The only user of reqwest: sends requests to targets and hands back the
//! status and the body as it arrives, and whether the request had to open a
//! new connection (and how long that took). Knows nothing of metrics.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::config::secret::Secret;

/// How long an idle connection stays in the pool: longer than any gap
/// between two levels of a sweep (levels follow each other at once, and
/// each is preceded by its own warm-up), so counted requests do not pay for
/// a connection that expired in between.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

tokio::task_local! {
    /// Where the connector writes the time it took to open a connection for
    /// the request being sent in this task (None: a pooled one was reused).
    static OPENED: Cell<Option<Duration>>;
}

/// A shared HTTP client; connections are pooled and reused across requests.
#[derive(Clone, Debug)]
pub struct Client {
    http: reqwest::Client,
    /// Its own pool, for reads beside the measured requests (a server's
    /// metrics during a level): they never take or add a connection of
    /// the measured ones.
    aside: reqwest::Client,
}

/// Why a request got no response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// The connection could not be opened (refused, DNS, TLS).
    Connect(String),
    /// Timed out at the HTTP layer.
    Timeout,
    /// Anything else (the request was sent but no response came back).
    Other(String),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Connect(e) => write!(f, "cannot connect: {e}"),
            SendError::Timeout => f.write_str("timed out"),
            SendError::Other(e) => f.write_str(e),
        }
    }
}

/// A response whose body has not been read yet.
#[derive(Debug)]
pub struct Response {
    /// HTTP status code.
    pub status: u16,
    /// `content-type` header, lowercased, parameters dropped.
    pub content_type: Option<String>,
    /// `server` header, if any.
    pub server: Option<String>,
    /// Time this request spent opening a new connection (DNS, TCP, TLS);
    /// None when it reused a pooled one.
    pub connect: Option<Duration>,
    inner: reqwest::Response,
}

impl Response {
    /// The next piece of the body as it arrived from the network; None at its end.
    pub async fn next_bytes(&mut self) -> Result<Option<Bytes>, String> {
        self.inner.chunk().await.map_err(describe)
    }

    /// Up to `limit` bytes of the body as lossy text (for error messages).
    pub async fn text_prefix(mut self, limit: usize) -> String {
        let mut out = Vec::new();
        while out.len() < limit {
            match self.inner.chunk().await {
                Ok(Some(b)) => out.extend_from_slice(&b[..b.len().min(limit - out.len())]),
                _ => break,
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

impl Client {
    /// A client that never follows redirects: a key must never be sent to
    /// another host.
    pub fn new(connect_timeout: Duration) -> Result<Self, String> {
        Self::with_tls(connect_timeout, None)
    }

    /// [`Client::new`] with its own TLS configuration (roots, client
    /// certificate: see [`super::tls`]) instead of the built-in one.
    pub fn with_tls(
        connect_timeout: Duration,
        tls: Option<rustls::ClientConfig>,
    ) -> Result<Self, String> {
        let builder = || {
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .connect_timeout(connect_timeout)
                .tcp_nodelay(true)
                .pool_idle_timeout(POOL_IDLE_TIMEOUT)
                .user_agent(concat!("llmprobe/", env!("CARGO_PKG_VERSION")))
        };
        let (mut main, mut aside) = (builder().connector_layer(TimeConnects), builder());
        if let Some(tls) = tls {
            aside = aside.use_preconfigured_tls(tls.clone());
            main = main.use_preconfigured_tls(tls);
        }
        let built = |b: reqwest::ClientBuilder| {
            b.build()
                .map_err(|e| format!("cannot build the HTTP client: {e}"))
        };
        Ok(Client {
            http: built(main)?,
            aside: built(aside.pool_max_idle_per_host(1))?,
        })
    }

    /// POSTs a JSON body and returns once the response headers arrived.
    pub async fn post_json(
        &self,
        url: &str,
        key: Option<&Secret>,
        body: Bytes,
    ) -> Result<Response, SendError> {
        let mut req = self
            .http
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .body(body);
        if let Some(key) = key {
            req = req.bearer_auth(key.expose());
        }
        let (result, connect) = OPENED
            .scope(Cell::new(None), async {
                let result = req.send().await;
                (result, OPENED.with(Cell::get))
            })
            .await;
        let mut resp = Self::finish(result)?;
        resp.connect = connect;
        Ok(resp)
    }

    /// GETs a URL (with the key when given) with its own time limit.
    pub async fn get(
        &self,
        url: &str,
        key: Option<&Secret>,
        timeout: Duration,
    ) -> Result<Response, SendError> {
        let mut req = self.http.get(url).timeout(timeout);
        if let Some(key) = key {
            req = req.bearer_auth(key.expose());
        }
        Self::finish(req.send().await)
    }

    /// GETs a URL without a key on the side pool, with its own time limit.
    pub async fn get_aside(&self, url: &str, timeout: Duration) -> Result<Response, SendError> {
        Self::finish(self.aside.get(url).timeout(timeout).send().await)
    }

    fn finish(result: reqwest::Result<reqwest::Response>) -> Result<Response, SendError> {
        match result {
            Ok(inner) => {
                let header = |name: reqwest::header::HeaderName| {
                    inner
                        .headers()
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string)
                };
                let content_type = header(reqwest::header::CONTENT_TYPE).map(|c| {
                    c.split(';')
                        .next()
                        .unwrap_or("")
                        .trim()
                        .to_ascii_lowercase()
                });
                let server = header(reqwest::header::SERVER);
                Ok(Response {
                    status: inner.status().as_u16(),
                    content_type,
                    server,
                    connect: None,
                    inner,
                })
            }
            // Before the timeout check: a connect timeout is both, and a
            // server that cannot be reached is not a slow server.
            Err(e) if e.is_connect() || refused_by_tls_peer(&e) => {
                Err(SendError::Connect(describe(e)))
            }
            Err(e) if e.is_timeout() => Err(SendError::Timeout),
            Err(e) => Err(SendError::Other(describe(e))),
        }
    }
}

/// A connector layer that times each connection it opens (DNS, TCP and TLS:
/// the whole inner connector) and tells the request that waited for it.
/// A connection finished in the background, after its request took a pooled
/// one, is told to nobody: no request waited for it.
#[derive(Clone, Copy)]
struct TimeConnects;

impl<S> tower_layer::Layer<S> for TimeConnects {
    type Service = Timed<S>;
    fn layer(&self, inner: S) -> Timed<S> {
        Timed(inner)
    }
}

/// The connector wrapped by [`TimeConnects`].
#[derive(Clone)]
struct Timed<S>(S);

impl<S, R> tower_service::Service<R> for Timed<S>
where
    S: tower_service::Service<R>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        let started = Instant::now();
        let connecting = self.0.call(req);
        Box::pin(async move {
            let result = connecting.await;
            if result.is_ok() {
                let took = started.elapsed();
                // Outside a request's task (a background connect) there is
                // nobody to tell.
                let _ = OPENED.try_with(|slot| slot.set(Some(took)));
            }
            result
        })
    }
}

/// The error and its causes on one line, without the URL.
/// Whether the server ended the TLS session with an alert about the
/// handshake: a TLS 1.3 server checks the client's certificate after the
/// client's side of the handshake is over, so its refusal arrives with the
/// first request rather than at connect, yet it is a connection that could
/// not be set up, not a server speaking nonsense.
fn refused_by_tls_peer(e: &(dyn std::error::Error + 'static)) -> bool {
    use rustls::AlertDescription as A;
    let mut next = Some(e);
    while let Some(err) = next {
        // An I/O error's source() skips the error it wraps: look inside.
        let tls = err.downcast_ref::<rustls::Error>().or_else(|| {
            err.downcast_ref::<std::io::Error>()
                .and_then(std::io::Error::get_ref)
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        });
        if let Some(rustls::Error::AlertReceived(alert)) = tls {
            return matches!(
                alert,
                A::CertificateRequired
                    | A::BadCertificate
                    | A::UnsupportedCertificate
                    | A::CertificateRevoked
                    | A::CertificateExpired
                    | A::CertificateUnknown
                    | A::UnknownCA
                    | A::AccessDenied
                    | A::HandshakeFailure
                    | A::ProtocolVersion
                    | A::InsufficientSecurity
            );
        }
        next = err.source();
    }
    false
}

fn describe(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        let text = s.to_string();
        if !msg.contains(&text) {
            msg.push_str(": ");
            msg.push_str(&text);
        }
        source = s.source();
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::refused_by_tls_peer;
    use std::fmt;

    /// An error that wraps another, as hyper and reqwest wrap an I/O error.
    #[derive(Debug)]
    struct Wrapping(std::io::Error);

    impl fmt::Display for Wrapping {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("error sending request")
        }
    }

    impl std::error::Error for Wrapping {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    fn alert(a: rustls::AlertDescription) -> Wrapping {
        Wrapping(std::io::Error::other(rustls::Error::AlertReceived(a)))
    }

    #[test]
    fn a_refused_client_certificate_is_a_refused_connection() {
        use rustls::AlertDescription as A;
        for a in [A::CertificateRequired, A::BadCertificate, A::UnknownCA] {
            assert!(refused_by_tls_peer(&alert(a)), "{a:?}");
        }
        // Alerts that are not about setting the session up, and errors
        // that are not TLS ones, stay what they were.
        assert!(!refused_by_tls_peer(&alert(A::DecodeError)));
        assert!(!refused_by_tls_peer(&Wrapping(std::io::Error::other(
            "reset"
        ))));
        let plain = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert!(!refused_by_tls_peer(&Wrapping(plain)));
    }
}
