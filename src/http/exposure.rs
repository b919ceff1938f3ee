//! Exposure of the HTTP endpoints, as Prometheus exporters do it: optional
//! TLS and basic auth with bcrypt-hashed passwords (the `web:` section).
//! `/healthz` and `/readyz` stay open so that systemd or Kubernetes probes
//! need no credentials; everything else, `/metrics` included, is protected.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;
use tokio_rustls::rustls;

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

/// Users allowed in, with their bcrypt hashes.
#[derive(Clone, Default)]
pub struct BasicAuth {
    users: Arc<BTreeMap<String, String>>,
    // bcrypt is slow on purpose; a scrape every few seconds must not pay it
    // each time. Holds "user:password" pairs that verified, bounded in size.
    verified: Arc<Mutex<HashSet<String>>>,
    checks: Checks,
}

/// Where bcrypt runs: on the blocking pool, one check at a time, with a
/// short queue. Run on the runtime's workers, eight clients looping a wrong
/// password took the measured TTFT from 20 ms to 456 ms (issue 23); one
/// check at a time holds at most one core, whatever the clients do.
#[derive(Clone)]
struct Checks {
    running: Arc<Semaphore>,
    waiting: Arc<AtomicUsize>,
    /// A hash of the configured cost, checked for unknown users so that the
    /// time taken does not tell which names exist.
    dummy: Arc<OnceLock<String>>,
    cost: u32,
}

impl Default for Checks {
    fn default() -> Self {
        Checks {
            running: Arc::new(Semaphore::new(1)),
            waiting: Arc::default(),
            dummy: Arc::default(),
            cost: bcrypt::DEFAULT_COST,
        }
    }
}

/// Checks waiting beyond this are refused at once (401): a flood cannot
/// queue work without end.
const MAX_WAITING_CHECKS: usize = 16;

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
        // `$2b$12$...`: the cost is the second field.
        let cost = users
            .values()
            .filter_map(|h| h.split('$').nth(2)?.parse::<u32>().ok())
            .max()
            .unwrap_or(bcrypt::DEFAULT_COST);
        Ok(BasicAuth {
            users: Arc::new(users),
            verified: Default::default(),
            checks: Checks {
                cost,
                ..Checks::default()
            },
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

    /// Whether an `Authorization` header value grants access. The bcrypt
    /// check runs off the runtime's workers (see [`Checks`]).
    pub async fn allows(&self, authorization: Option<&str>) -> bool {
        let Some((user, password)) = authorization.and_then(credentials) else {
            return false;
        };
        let pair = format!("{user}:{password}");
        if self
            .verified
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&pair)
        {
            return true;
        }
        let known = self.users.get(&user).cloned();
        let checks = self.checks.clone();
        let ok = checks.verify(password, known).await;
        if ok {
            let mut verified = self.verified.lock().unwrap_or_else(|e| e.into_inner());
            if verified.len() > 64 {
                verified.clear();
            }
            verified.insert(pair);
        }
        ok
    }
}

impl Checks {
    /// Whether `password` matches `hash`; an unknown user (None) costs the
    /// same and fails.
    async fn verify(self, password: String, hash: Option<String>) -> bool {
        if self.waiting.fetch_add(1, Ordering::SeqCst) >= MAX_WAITING_CHECKS {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        let permit = self.running.clone().acquire_owned().await;
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        let Ok(permit) = permit else { return false };
        let checked = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            match hash {
                Some(hash) => bcrypt::verify(&password, &hash).unwrap_or(false),
                None => {
                    let dummy = self.dummy.get_or_init(|| {
                        bcrypt::hash("llmprobe: not a user", self.cost).unwrap_or_default()
                    });
                    let _ = bcrypt::verify(&password, dummy);
                    false
                }
            }
        });
        checked.await.unwrap_or(false)
    }
}

/// The user and password of a `Basic` Authorization header (the scheme's
/// case does not matter, RFC 9110 section 11.1).
fn credentials(authorization: &str) -> Option<(String, String)> {
    use base64::Engine;
    let (scheme, encoded) = authorization.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let pair = String::from_utf8(decoded).ok()?;
    let (user, password) = pair.split_once(':')?;
    Some((user.to_string(), password.to_string()))
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
    if auth.allows(header).await {
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

    #[tokio::test]
    async fn bcrypt_users_are_checked_and_cached() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let auth = BasicAuth::new([("prom".to_string(), hash)].into()).unwrap();
        assert!(auth.enabled());
        assert!(auth.allows(Some(&header("prom", "s3cret"))).await);
        assert!(auth.allows(Some(&header("prom", "s3cret"))).await, "cached");
        assert!(!auth.allows(Some(&header("prom", "wrong"))).await);
        assert!(!auth.allows(Some(&header("other", "s3cret"))).await);
        assert!(!auth.allows(Some("Basic !!!")).await);
        assert!(!auth.allows(Some("Bearer x")).await);
        assert!(!auth.allows(None).await);
        assert!(
            !format!("{auth:?}").contains("$2"),
            "hashes stay out of Debug"
        );
    }

    #[tokio::test]
    async fn the_scheme_is_case_insensitive() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let auth = BasicAuth::new([("prom".to_string(), hash)].into()).unwrap();
        let encoded = header("prom", "s3cret").replace("Basic ", "");
        for scheme in ["basic", "BASIC", "bAsIc"] {
            assert!(
                auth.allows(Some(&format!("{scheme} {encoded}"))).await,
                "{scheme}"
            );
        }
        assert!(!auth.allows(Some(&format!("Basicx {encoded}"))).await);
    }

    #[tokio::test]
    async fn an_unknown_user_pays_a_check_of_the_configured_cost() {
        let hash = bcrypt::hash("s3cret", 5).unwrap();
        let auth = BasicAuth::new([("prom".to_string(), hash)].into()).unwrap();
        assert!(!auth.allows(Some(&header("nobody", "x"))).await);
        let dummy = auth.checks.dummy.get().expect("the dummy hash was checked");
        assert!(dummy.starts_with("$2b$05$"), "{dummy}");
    }

    #[tokio::test]
    async fn a_flood_of_checks_is_refused_beyond_the_queue() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let auth = BasicAuth::new([("prom".to_string(), hash)].into()).unwrap();
        // Hold the one check slot: every check now waits or is refused.
        let held = auth.checks.running.clone().acquire_owned().await.unwrap();
        let mut waiting = Vec::new();
        for _ in 0..MAX_WAITING_CHECKS {
            let auth = auth.clone();
            waiting.push(tokio::spawn(async move {
                auth.allows(Some(&header("prom", "s3cret"))).await
            }));
        }
        while auth.checks.waiting.load(Ordering::SeqCst) < MAX_WAITING_CHECKS {
            tokio::task::yield_now().await;
        }
        assert!(
            !auth.allows(Some(&header("prom", "s3cret"))).await,
            "queue full"
        );
        drop(held);
        for w in waiting {
            assert!(
                w.await.unwrap(),
                "the queued checks run once the slot is free"
            );
        }
    }

    #[test]
    fn plain_passwords_are_refused() {
        let e = BasicAuth::new([("prom".to_string(), "s3cret".to_string())].into()).unwrap_err();
        assert!(e.contains("bcrypt"), "{e}");
    }
}
