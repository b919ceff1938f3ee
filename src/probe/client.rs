//! The only user of reqwest: sends requests to targets and hands back the
//! status and the body as it arrives, and whether the request had to open a
//! new connection (and how long that took). Knows nothing of metrics.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use std::sync::Arc;

use bytes::Bytes;

use crate::config::proxy::{ProxyMode, ProxyVariables};
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
    /// The proxy variables this client's requests follow (None: always
    /// direct, whatever the environment says).
    proxies: Option<Arc<ProxyVariables>>,
}

/// Why a request got no response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// The connection could not be opened (refused, DNS, TLS).
    Connect(String),
    /// The request was to go through a proxy, and no connection came of it:
    /// the proxy could not be reached, or it refused the tunnel. The server
    /// was not reached; this is not the server's failure.
    Proxy(String),
    /// Timed out at the HTTP layer.
    Timeout,
    /// Anything else (the request was sent but no response came back).
    Other(String),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Connect(e) => write!(f, "cannot connect: {e}"),
            SendError::Proxy(e) => f.write_str(e),
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
        Self::with_tls(connect_timeout, None, None)
    }

    /// [`Client::new`] with its own TLS configuration (roots, client
    /// certificate: see [`super::tls`]) instead of the built-in one, and
    /// with `proxies` the proxy variables its requests follow (None: never
    /// a proxy, the environment's variables ignored).
    pub fn with_tls(
        connect_timeout: Duration,
        tls: Option<rustls::ClientConfig>,
        proxies: Option<Arc<ProxyVariables>>,
    ) -> Result<Self, String> {
        let builder = || {
            // reqwest follows the environment's proxy variables unless told
            // not to: only what `proxies` says applies.
            let mut b = reqwest::Client::builder()
                .no_proxy()
                .redirect(reqwest::redirect::Policy::none())
                .connect_timeout(connect_timeout)
                .tcp_nodelay(true)
                .pool_idle_timeout(POOL_IDLE_TIMEOUT)
                .user_agent(concat!("llmprobe/", env!("CARGO_PKG_VERSION")));
            if let Some(vars) = proxies.clone() {
                b = b.proxy(reqwest::Proxy::custom(move |url| {
                    vars.route(ProxyMode::Environment, url.as_str())
                        .map(|r| r.url)
                }));
            }
            b
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
            proxies,
        })
    }

    /// The proxy a request to `url` goes through, as shown (None: direct).
    pub fn proxy_for(&self, url: &str) -> Option<String> {
        let vars = self.proxies.as_ref()?;
        vars.route(ProxyMode::Environment, url).map(|r| r.shown)
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
        let mut resp = self.finish(url, result)?;
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
        self.finish(url, req.send().await)
    }

    /// GETs a URL without a key on the side pool, with its own time limit.
    pub async fn get_aside(&self, url: &str, timeout: Duration) -> Result<Response, SendError> {
        self.finish(url, self.aside.get(url).timeout(timeout).send().await)
    }

    fn finish(
        &self,
        url: &str,
        result: reqwest::Result<reqwest::Response>,
    ) -> Result<Response, SendError> {
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
            Err(e) if e.is_connect() || refused_by_tls_peer(&e) || closed_before_sent(&e) => {
                // Through a proxy, a failure that is not the server's TLS
                // is the proxy's: it could not be reached, or refused.
                match self.proxy_for(url) {
                    Some(proxy) if !tls_failed(&e) => Err(SendError::Proxy(format!(
                        "cannot connect through the proxy {proxy}: {}",
                        describe(e)
                    ))),
                    _ => Err(SendError::Connect(describe(e))),
                }
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

/// Whether the server ended the TLS session with an alert about the
/// handshake: a TLS 1.3 server checks the client's certificate after the
/// client's side of the handshake is over, so its refusal arrives with the
/// first request rather than at connect, yet it is a connection that could
/// not be set up, not a server speaking nonsense.
fn refused_by_tls_peer(e: &(dyn std::error::Error + 'static)) -> bool {
    use rustls::AlertDescription as A;
    let alert = causes(e).find_map(|c| match tls_error(c) {
        Some(rustls::Error::AlertReceived(alert)) => Some(*alert),
        _ => None,
    });
    matches!(
        alert,
        Some(
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
        )
    )
}

/// Whether hyper gave up the request before writing any of it because its
/// connection closed first (hyper's "canceled": "connection was not
/// ready", "connection closed"): the server closed a connection it had just
/// accepted (a TLS 1.3 server refusing the client's certificate does so),
/// so the request never reached it. A connection that failed, not a server
/// that spoke nonsense: as a protocol error it read as a broken stream.
fn closed_before_sent(e: &(dyn std::error::Error + 'static)) -> bool {
    causes(e).any(|c| {
        c.downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_canceled)
    })
}

/// Whether a TLS error (with the server, at the end of a tunnel) is among
/// the error's causes.
fn tls_failed(e: &(dyn std::error::Error + 'static)) -> bool {
    causes(e).any(|c| tls_error(c).is_some())
}

/// The error and the chain of its sources.
fn causes<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(e), |c| c.source())
}

/// `err` as a TLS error, itself or wrapped in an I/O error (whose
/// `source()` skips the error it wraps).
fn tls_error<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    err.downcast_ref::<rustls::Error>().or_else(|| {
        err.downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    })
}

/// The error and its causes on one line, without the URL.
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

    /// Proxy variables pointing at a loopback port nothing listens on.
    fn dead_proxy() -> std::sync::Arc<crate::config::proxy::ProxyVariables> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap();
        let url = format!("http://127.0.0.1:{port}");
        std::sync::Arc::new(crate::config::proxy::ProxyVariables::from_lookup(|name| {
            (name == "ALL_PROXY").then(|| url.clone())
        }))
    }

    #[tokio::test]
    async fn a_dead_proxy_is_the_proxys_error_not_the_servers() {
        use super::{Client, SendError};
        use std::time::Duration;
        let client = Client::with_tls(Duration::from_secs(2), None, Some(dead_proxy())).unwrap();
        // A documentation address: never reached, the proxy is asked first.
        let url = "http://192.0.2.1:8000/v1/chat/completions";
        assert!(client.proxy_for(url).is_some());
        let err = client
            .get(url, None, Duration::from_secs(5))
            .await
            .expect_err("the proxy is dead");
        match err {
            SendError::Proxy(m) => assert!(
                m.starts_with("cannot connect through the proxy http://127.0.0.1:"),
                "{m}"
            ),
            other => panic!("expected a proxy error, got {other:?}"),
        }
    }
}
