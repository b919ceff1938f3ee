//! The connections of the HTTP side, bounded whatever clients do: a request
//! head must arrive within [`HEADER_READ_TIMEOUT`] (which also ends a
//! keep-alive connection left idle), a connection that moves no byte for
//! [`IDLE_TIMEOUT`] is closed, at most [`MAX_CONNECTIONS`] are open, and the
//! TLS handshake runs in the connection's own task. At the cap the least
//! recently active connection is closed for the new one, so that clients
//! that open connections and send nothing cannot keep `/healthz`, a scrape,
//! or the descriptors the measurements need.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Longest wait for a request's head, from when the connection is ready
/// for one (its opening, or the end of the previous response).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest time a connection may move no byte either way (a client that
/// stops reading a response).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Most connections open at once: far below the unit's `LimitNOFILE`, so
/// that the targets' connections always find descriptors. Lower when the
/// process may open fewer than twice as many descriptors ([`connection_cap`]).
pub const MAX_CONNECTIONS: usize = 256;

/// How often a connection checks whether it went idle.
const IDLE_CHECK: Duration = Duration::from_secs(5);

/// Serves `app` on `listener` (TLS when `tls` is set) until `shutdown`;
/// then lets the responses under way finish.
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    app: Router,
    shutdown: CancellationToken,
) {
    serve_with(listener, tls, app, shutdown, connection_cap()).await
}

/// [`MAX_CONNECTIONS`], or a quarter of the descriptors the process may
/// open when that is less: the rest are the targets'.
pub fn connection_cap() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given, nothing else.
    let known = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    if !known || limit.rlim_cur == libc::RLIM_INFINITY {
        return MAX_CONNECTIONS;
    }
    let quarter = usize::try_from(limit.rlim_cur / 4).unwrap_or(MAX_CONNECTIONS);
    MAX_CONNECTIONS.min(quarter).max(4)
}

/// [`serve`] with another connection cap.
pub async fn serve_with(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    app: Router,
    shutdown: CancellationToken,
    max_connections: usize,
) {
    let open = Connections::new(max_connections.max(1));
    let tasks = TaskTracker::new();
    let tls = tls.map(tokio_rustls::TlsAcceptor::from);
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok((stream, peer)) => (stream, Peer(peer.ip())),
            Err(_) => {
                // Out of descriptors: give one back (the least recently
                // active connection), then try again.
                open.evict_one();
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let conn = open.admit();
        let app = with_peer(app.clone(), peer);
        let task = serve_connection(stream, tls.clone(), app, conn, shutdown.clone());
        tasks.spawn(task);
    }
    tasks.close();
    tasks.wait().await;
}

/// The address a request came from, in its extensions: basic auth shares
/// its password checks fairly between addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer(pub IpAddr);

/// A connection's router: every request it serves marked as coming from
/// its peer.
#[derive(Clone)]
struct WithPeer {
    app: Router,
    peer: Peer,
}

fn with_peer(app: Router, peer: Peer) -> WithPeer {
    WithPeer { app, peer }
}

impl<B> tower_service::Service<axum::http::Request<B>> for WithPeer
where
    Router: tower_service::Service<axum::http::Request<B>>,
{
    type Response = <Router as tower_service::Service<axum::http::Request<B>>>::Response;
    type Error = <Router as tower_service::Service<axum::http::Request<B>>>::Error;
    type Future = <Router as tower_service::Service<axum::http::Request<B>>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        tower_service::Service::<axum::http::Request<B>>::poll_ready(&mut self.app, cx)
    }

    fn call(&mut self, mut req: axum::http::Request<B>) -> Self::Future {
        req.extensions_mut().insert(self.peer);
        self.app.call(req)
    }
}

async fn serve_connection(
    stream: TcpStream,
    tls: Option<tokio_rustls::TlsAcceptor>,
    app: WithPeer,
    conn: Admitted,
    shutdown: CancellationToken,
) {
    let io = Tracked {
        inner: stream,
        activity: conn.activity.clone(),
        clock: conn.clock,
    };
    match tls {
        None => run_http(io, app, &conn, &shutdown).await,
        Some(acceptor) => {
            let handshake = tokio::select! {
                _ = conn.evicted.cancelled() => return,
                h = tokio::time::timeout(HEADER_READ_TIMEOUT, acceptor.accept(io)) => h,
            };
            if let Ok(Ok(tls)) = handshake {
                run_http(tls, app, &conn, &shutdown).await;
            }
        }
    }
}

async fn run_http<I>(io: I, app: WithPeer, conn: &Admitted, shutdown: &CancellationToken)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .keep_alive(true);
    let http = builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(app));
    tokio::pin!(http);
    let mut closing = false;
    let mut check = tokio::time::interval(IDLE_CHECK);
    loop {
        tokio::select! {
            _ = &mut http => return,
            _ = conn.evicted.cancelled() => return,
            _ = shutdown.cancelled(), if !closing => {
                closing = true;
                http.as_mut().graceful_shutdown();
            }
            _ = check.tick() => {
                if conn.idle_for() > IDLE_TIMEOUT {
                    return;
                }
            }
        }
    }
}

/// The open connections: when each last moved a byte, and how to close it.
#[derive(Clone)]
struct Connections {
    inner: Arc<Mutex<Open>>,
    clock: Instant,
}

struct Open {
    cap: usize,
    next_id: u64,
    by_id: HashMap<u64, (Arc<AtomicU64>, CancellationToken)>,
}

impl Connections {
    fn new(cap: usize) -> Self {
        Connections {
            inner: Arc::new(Mutex::new(Open {
                cap,
                next_id: 0,
                by_id: HashMap::new(),
            })),
            clock: Instant::now(),
        }
    }

    fn now_ms(&self) -> u64 {
        millis(self.clock)
    }

    /// Registers a new connection, closing the least recently active one
    /// when the cap is reached.
    fn admit(&self) -> Admitted {
        let mut open = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        while open.by_id.len() >= open.cap {
            if !evict_least_active(&mut open) {
                break;
            }
        }
        let id = open.next_id;
        open.next_id += 1;
        let activity = Arc::new(AtomicU64::new(self.now_ms()));
        let evicted = CancellationToken::new();
        open.by_id.insert(id, (activity.clone(), evicted.clone()));
        Admitted {
            id,
            activity,
            evicted,
            clock: self.clock,
            open: self.clone(),
        }
    }

    fn evict_one(&self) {
        let mut open = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        evict_least_active(&mut open);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .by_id
            .len()
    }
}

fn evict_least_active(open: &mut Open) -> bool {
    let oldest = open
        .by_id
        .iter()
        .min_by_key(|(id, (activity, _))| (activity.load(Ordering::Relaxed), **id))
        .map(|(id, _)| *id);
    match oldest.and_then(|id| open.by_id.remove(&id)) {
        Some((_, evicted)) => {
            evicted.cancel();
            true
        }
        None => false,
    }
}

fn millis(clock: Instant) -> u64 {
    u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// One open connection; leaves [`Connections`] when dropped.
struct Admitted {
    id: u64,
    activity: Arc<AtomicU64>,
    evicted: CancellationToken,
    clock: Instant,
    open: Connections,
}

impl Admitted {
    fn idle_for(&self) -> Duration {
        let last = self.activity.load(Ordering::Relaxed);
        Duration::from_millis(millis(self.clock).saturating_sub(last))
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut open = self.open.inner.lock().unwrap_or_else(|e| e.into_inner());
        open.by_id.remove(&self.id);
    }
}

/// A stream that notes when it last moved a byte.
struct Tracked<S> {
    inner: S,
    activity: Arc<AtomicU64>,
    clock: Instant,
}

impl<S> Tracked<S> {
    fn moved(&self) {
        self.activity.store(millis(self.clock), Ordering::Relaxed);
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.moved();
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.moved();
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.moved();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn app() -> Router {
        Router::new().route("/healthz", axum::routing::get(|| async { "ok" }))
    }

    async fn healthz(addr: std::net::SocketAddr) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn at_the_cap_the_least_active_connection_makes_room() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let server = tokio::spawn(serve_with(listener, None, app(), stop.clone(), 4));
        let mut idle = Vec::new();
        for _ in 0..10 {
            idle.push(TcpStream::connect(addr).await.unwrap());
        }
        let answer = healthz(addr).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("ok"), "{answer}");
        // The first idle ones were closed to make room.
        let mut buf = [0u8; 1];
        let closed = idle[0].read(&mut buf).await.unwrap();
        assert_eq!(closed, 0);
        stop.cancel();
        drop(idle);
        server.await.unwrap();
    }

    #[test]
    fn admitting_beyond_the_cap_closes_the_oldest() {
        let open = Connections::new(2);
        let a = open.admit();
        let b = open.admit();
        b.activity.store(10, Ordering::Relaxed);
        let c = open.admit();
        assert!(a.evicted.is_cancelled());
        assert!(!b.evicted.is_cancelled() && !c.evicted.is_cancelled());
        assert_eq!(open.len(), 2);
        drop((b, c));
        assert_eq!(open.len(), 0);
        drop(a);
        assert_eq!(open.len(), 0);
    }
}
