//! Serving the router on the daemon's listener as the `web:` section says:
//! its files (TLS certificate and key, basic auth users) read before
//! anything starts, then HTTPS or plain HTTP, until stopped.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::rustls;
use tokio_util::sync::CancellationToken;

use crate::config::Web;
use crate::http::connections;
use crate::http::exposure::{self, BasicAuth};
use crate::http::router::{self, AppState};

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

    /// Serves `state`'s router on `listener` in a task of its own until
    /// `stop` fires, then lets the connections in progress finish.
    pub fn serve(
        self,
        listener: TcpListener,
        state: AppState,
        stop: CancellationToken,
    ) -> JoinHandle<std::io::Result<()>> {
        let auth = self.auth;
        let app = router::router(state).layer(axum::middleware::from_fn(move |req, next| {
            exposure::require_auth(auth.clone(), req, next)
        }));
        let tls = self.tls;
        tokio::spawn(async move {
            connections::serve(listener, tls, app, stop).await;
            Ok(())
        })
    }
}
