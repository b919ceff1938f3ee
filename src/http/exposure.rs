//! Exposure of the HTTP endpoints, as Prometheus exporters do it: optional
//! TLS and basic auth with bcrypt-hashed passwords (the `web:` section).
//! `/healthz` and `/readyz` stay open so that systemd or Kubernetes probes
//! need no credentials; everything else, `/metrics` included, is protected.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::config::secret::Secret;

/// Whether `cert` and `key` make a usable TLS pair: the check that
/// configuration loading runs ([`crate::config::Checks`]).
pub fn check_tls(cert: &Path, key: &Path) -> Result<(), String> {
    load_tls(cert, key).map(|_| ())
}

/// Loads a TLS server configuration from PEM files.
pub fn load_tls(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, String> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("cannot read `{}`: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("`{}` is not a PEM certificate chain: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!("`{}` holds no certificate", cert.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("cannot read a private key from `{}`: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("certificate and key do not form a usable pair: {e}"))?;
    Ok(Arc::new(config))
}

/// A listener that completes a TLS handshake before handing a connection to
/// axum; failed handshakes are dropped without stopping the server.
pub struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl TlsListener {
    /// Wraps a bound TCP listener.
    pub fn new(tcp: TcpListener, config: Arc<rustls::ServerConfig>) -> Self {
        TlsListener {
            tcp,
            acceptor: TlsAcceptor::from(config),
        }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((stream, addr)) = self.tcp.accept().await else {
                // Out of file descriptors and the like: back off briefly.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            };
            let handshake = tokio::time::timeout(
                std::time::Duration::from_secs(10),
                self.acceptor.accept(stream),
            );
            if let Ok(Ok(tls)) = handshake.await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

/// Users allowed in, with their bcrypt hashes.
#[derive(Clone, Default)]
pub struct BasicAuth {
    users: Arc<BTreeMap<String, String>>,
    // bcrypt is slow on purpose; a scrape every few seconds must not pay it
    // each time. Holds "user:password" pairs that verified, bounded in size.
    verified: Arc<Mutex<HashSet<String>>>,
}

impl std::fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BasicAuth")
            .field("users", &self.users.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl BasicAuth {
    /// Checks that every hash is a bcrypt hash.
    pub fn new(users: BTreeMap<String, String>) -> Result<Self, String> {
        crate::config::check_password_hashes(&users)?;
        Ok(BasicAuth {
            users: Arc::new(users),
            verified: Default::default(),
        })
    }

    /// The users of a resolved `web:` section.
    pub fn of(users: &BTreeMap<String, Secret>) -> Result<Self, String> {
        Self::new(
            users
                .iter()
                .map(|(user, hash)| (user.clone(), hash.expose().to_string()))
                .collect(),
        )
    }

    /// Whether any user is configured (otherwise everything is open).
    pub fn enabled(&self) -> bool {
        !self.users.is_empty()
    }

    /// Whether an `Authorization` header value grants access.
    pub fn allows(&self, authorization: Option<&str>) -> bool {
        use base64::Engine;
        let Some(encoded) = authorization.and_then(|a| a.strip_prefix("Basic ")) else {
            return false;
        };
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded.trim()) else {
            return false;
        };
        let Ok(pair) = String::from_utf8(decoded) else {
            return false;
        };
        let Some((user, password)) = pair.split_once(':') else {
            return false;
        };
        let Some(hash) = self.users.get(user) else {
            return false;
        };
        let mut verified = self.verified.lock().unwrap_or_else(|e| e.into_inner());
        if verified.contains(&pair) {
            return true;
        }
        let ok = bcrypt::verify(password, hash).unwrap_or(false);
        if ok {
            if verified.len() > 64 {
                verified.clear();
            }
            verified.insert(pair);
        }
        ok
    }
}

/// Middleware: 401 with a `WWW-Authenticate` challenge unless the request
/// carries valid credentials or asks for a probe endpoint.
pub async fn require_auth(auth: BasicAuth, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if !auth.enabled() || path == "/healthz" || path == "/readyz" {
        return next.run(req).await;
    }
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if auth.allows(header) {
        next.run(req).await
    } else {
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Basic realm=\"llmprobe\"")],
            "unauthorized\n",
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    fn header(user: &str, password: &str) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        )
    }

    #[test]
    fn bcrypt_users_are_checked_and_cached() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let auth = BasicAuth::new([("prom".to_string(), hash)].into()).unwrap();
        assert!(auth.enabled());
        assert!(auth.allows(Some(&header("prom", "s3cret"))));
        assert!(auth.allows(Some(&header("prom", "s3cret"))), "cached");
        assert!(!auth.allows(Some(&header("prom", "wrong"))));
        assert!(!auth.allows(Some(&header("other", "s3cret"))));
        assert!(!auth.allows(Some("Basic !!!")));
        assert!(!auth.allows(Some("Bearer x")));
        assert!(!auth.allows(None));
        assert!(
            !format!("{auth:?}").contains("$2"),
            "hashes stay out of Debug"
        );
    }

    #[test]
    fn plain_passwords_are_refused() {
        let e = BasicAuth::new([("prom".to_string(), "s3cret".to_string())].into()).unwrap_err();
        assert!(e.contains("bcrypt"), "{e}");
    }
}
