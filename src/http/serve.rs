//! Serving the router on the daemon's listener as the `web:` section says:
//! its files (TLS certificate and key, basic auth users) read before
//! anything starts, then HTTPS or plain HTTP, until stopped.
//!
//! The HTTP side runs on a runtime of its own, on one thread at a lower
//! scheduling priority (with its own small pool for blocking work: the
//! password checks): accepting, TLS handshakes, auth, page and `/metrics`
//! rendering never run on the worker threads that send the measured
//! requests and take their timestamps, and when the CPU is short, the
//! measuring threads go first.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio_rustls::rustls;
use tokio_util::sync::CancellationToken;

use crate::config::Web;
use crate::http::connections;
use crate::http::exposure::{self, BasicAuth};
use crate::http::router::{self, AppState};
use crate::http::tally;

/// The `web:` section, read: who may come in, and the TLS setup if any.
pub struct Exposure {
    auth: BasicAuth,
    tls: Option<Arc<rustls::ServerConfig>>,
}

impl Exposure {
    /// Reads the section's files; the error names the file that failed.
    pub fn of(web: &Web) -> Result<Exposure, String> {
        let auth = BasicAuth::of(&web.basic_auth_users)?;
        let tls = match &web.tls {
            Some(f) => Some(exposure::load_tls(&f.cert_file, &f.key_file)?),
            None => None,
        };
        Ok(Exposure { auth, tls })
    }

    /// Serves `state`'s router on `listener` on the HTTP side's own thread
    /// and runtime until `stop` fires, then lets the connections in
    /// progress finish; the receiver resolves when it has stopped.
    pub fn serve(
        self,
        listener: TcpListener,
        state: AppState,
        stop: CancellationToken,
    ) -> std::io::Result<oneshot::Receiver<()>> {
        let auth = self.auth;
        let tallies = (auth.refusals().clone(), state.reloads.clone());
        let metrics = state.metrics.clone();
        let app = router::router(state).layer(axum::middleware::from_fn(move |req, next| {
            exposure::require_auth(auth.clone(), metrics.clone(), req, next)
        }));
        let tls = self.tls;
        // The listener leaves the caller's runtime: the HTTP side's own
        // reactor watches it.
        let listener = listener.into_std()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name("llmprobe-http-blocking")
            .max_blocking_threads(BLOCKING_THREADS)
            .build()?;
        let (done, stopped) = oneshot::channel();
        std::thread::Builder::new()
            .name("llmprobe-http".into())
            .spawn(move || {
                lower_priority();
                // Refusals logged at a bounded rate: what a flood left
                // counted is logged once it is due.
                let flush = runtime.spawn(async move {
                    let mut every = tokio::time::interval(tally::LOG_EVERY);
                    loop {
                        every.tick().await;
                        tallies.0.warn_pending();
                        tallies.1.refusals().warn_pending();
                    }
                });
                runtime.block_on(async move {
                    match TcpListener::from_std(listener) {
                        Ok(listener) => connections::serve(listener, tls, app, stop).await,
                        Err(e) => {
                            tracing::error!(error = %e, "the HTTP side cannot take its listener")
                        }
                    }
                });
                flush.abort();
                runtime.shutdown_timeout(STOP_GRACE);
                let _ = done.send(());
            })?;
        Ok(stopped)
    }
}

/// Threads of the HTTP side's pool for blocking work (password checks: the
/// check itself admits one at a time).
const BLOCKING_THREADS: usize = 2;

/// How long the HTTP side's blocking work may hold its stop.
const STOP_GRACE: Duration = Duration::from_secs(1);

/// How much nicer than the process the HTTP side's threads are: under CPU
/// contention the measuring threads are scheduled first.
pub const NICENESS: i32 = 10;

/// Lowers this thread's scheduling priority by [`NICENESS`] (threads it
/// starts inherit it). Linux only, where a thread has a priority of its
/// own; elsewhere (and if refused) the HTTP side keeps the process's.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid and setpriority take plain integers and touch
        // only this thread's scheduling attributes.
        let failed = unsafe {
            let tid = libc::syscall(libc::SYS_gettid);
            let current = libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t);
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, current + NICENESS)
        } != 0;
        if failed {
            tracing::debug!("the HTTP side keeps the process's scheduling priority");
        }
    }
}
