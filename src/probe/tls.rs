//! Private TLS towards targets: a target's `ca_file`, `cert_file` and
//! `key_file` (paths in config) read into a rustls client configuration, and
//! the HTTP clients of a configuration: one shared by every target without
//! such settings, one per distinct setting, built when the configuration is
//! loaded, never per request (a thousand targets share a handful). Each
//! comes in two: direct, and (only when the environment sets a proxy
//! variable) one that follows those variables, for the targets whose
//! `proxy` is `environment`.

use std::collections::hash_map::DefaultHasher;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::proxy::{ProxyMode, ProxyVariables};
use crate::config::{ClientTls, Config, Endpoint, Target, TlsKey};
use crate::probe::client::Client;

/// Whether `tls`'s files are readable and usable (for config checks).
pub fn check(tls: &ClientTls) -> Result<(), (TlsKey, String)> {
    Files::read(tls)?.client_config().map(|_| ())
}

/// Largest PEM file read (a CA bundle of a few hundred certificates).
const MAX_PEM_BYTES: u64 = 4 << 20;

/// A file's path as shown in messages, and its contents.
type Read = (String, Vec<u8>);

/// The contents of a [`ClientTls`]'s files.
struct Files {
    ca: Option<Read>,
    /// Client certificate and key.
    identity: Option<(Read, Read)>,
}

impl Files {
    fn read(tls: &ClientTls) -> Result<Files, (TlsKey, String)> {
        let read = |key: TlsKey, path: &Path| {
            let shown = path.display().to_string();
            // Opened, then the handle checked: a FIFO is refused, never
            // waited on (crate::config::env::read_limited).
            match crate::config::env::read_limited(path, MAX_PEM_BYTES) {
                Ok(Some(bytes)) => Ok((shown, bytes)),
                Ok(None) => Err((
                    key,
                    format!("`{shown}` is larger than {MAX_PEM_BYTES} bytes"),
                )),
                Err(e) => Err((key, format!("cannot read `{shown}`: {e}"))),
            }
        };
        let ca = match &tls.ca_file {
            Some(p) => Some(read(TlsKey::CaFile, p)?),
            None => None,
        };
        let identity = match &tls.identity {
            Some(f) => Some((
                read(TlsKey::CertFile, &f.cert_file)?,
                read(TlsKey::KeyFile, &f.key_file)?,
            )),
            None => None,
        };
        Ok(Files { ca, identity })
    }

    /// Tells one version of the files from another.
    fn fingerprint(&self) -> u64 {
        let mut h = DefaultHasher::new();
        self.ca.hash(&mut h);
        self.identity.hash(&mut h);
        h.finish()
    }

    /// The client configuration: `ca_file`'s roots instead of the built-in
    /// ones, and the client certificate when set.
    fn client_config(&self) -> Result<rustls::ClientConfig, (TlsKey, String)> {
        let roots = match &self.ca {
            Some((shown, pem)) => {
                let certs = certificates(shown, pem).map_err(|e| (TlsKey::CaFile, e))?;
                let mut roots = rustls::RootCertStore::empty();
                for (i, cert) in certs.into_iter().enumerate() {
                    roots.add(cert).map_err(|e| {
                        let n = i + 1;
                        let msg = format!("certificate {n} of `{shown}` is not a usable CA: {e}");
                        (TlsKey::CaFile, msg)
                    })?;
                }
                roots
            }
            None => rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            },
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| (TlsKey::CaFile, e.to_string()))?
            .with_root_certificates(roots);
        let mut config = match &self.identity {
            None => builder.with_no_client_auth(),
            Some(((cert_shown, cert_pem), (key_shown, key_pem))) => {
                let certs =
                    certificates(cert_shown, cert_pem).map_err(|e| (TlsKey::CertFile, e))?;
                let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| {
                    let msg = format!("`{key_shown}` holds no usable PEM private key: {e}");
                    (TlsKey::KeyFile, msg)
                })?;
                builder.with_client_auth_cert(certs, key).map_err(|e| {
                    let msg = format!("`{key_shown}` is not the key of `{cert_shown}`: {e}");
                    (TlsKey::KeyFile, msg)
                })?
            }
        };
        // As the shared client offers: HTTP/2 where the server takes it.
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// The certificates of a PEM file; at least one.
fn certificates(shown: &str, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("`{shown}` is not PEM: {e}"))?;
    if certs.is_empty() {
        return Err(format!("`{shown}` holds no PEM certificate"));
    }
    Ok(certs)
}

/// Time limit on opening a connection to a target.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The HTTP clients of a configuration: a shared one, and one per distinct
/// TLS setting of its targets; each with its proxied twin when the
/// environment sets a proxy variable. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Clients {
    connect_timeout: Duration,
    shared: Client,
    /// The proxy variables of the environment, read once at the start.
    proxies: Arc<ProxyVariables>,
    /// The shared client's twin that follows them (None: none is set).
    shared_proxied: Option<Client>,
    /// Per setting: its clients.
    custom: Arc<BTreeMap<ClientTls, Built>>,
}

/// The clients of one TLS setting.
#[derive(Clone, Debug)]
struct Built {
    /// The files' fingerprint: a renewed certificate makes new clients.
    fingerprint: u64,
    direct: Client,
    /// The twin that follows the proxy variables (None: none is set).
    proxied: Option<Client>,
}

impl Clients {
    /// Only the shared client (and its proxied twin), the proxy variables
    /// read from the environment now.
    pub fn new(connect_timeout: Duration) -> Result<Clients, String> {
        Clients::with_proxies(connect_timeout, ProxyVariables::from_env())
    }

    /// [`Clients::new`] with the given proxy variables.
    pub fn with_proxies(
        connect_timeout: Duration,
        proxies: ProxyVariables,
    ) -> Result<Clients, String> {
        let proxies = Arc::new(proxies);
        Ok(Clients {
            connect_timeout,
            shared: Client::new(connect_timeout)?,
            shared_proxied: Self::proxied(connect_timeout, None, &proxies)?,
            proxies,
            custom: Arc::default(),
        })
    }

    /// The proxied twin of a client with `tls`, when a variable is set.
    fn proxied(
        connect_timeout: Duration,
        tls: Option<rustls::ClientConfig>,
        proxies: &Arc<ProxyVariables>,
    ) -> Result<Option<Client>, String> {
        if !proxies.any() {
            return Ok(None);
        }
        Client::with_tls(connect_timeout, tls, Some(proxies.clone())).map(Some)
    }

    /// The clients of `config` from scratch, connecting within
    /// [`CONNECT_TIMEOUT`]: the daemon's start and a one-shot sweep.
    pub fn of(config: &Config) -> Result<Clients, String> {
        Clients::new(CONNECT_TIMEOUT)?.for_config(config)
    }

    /// The clients `config` needs (its targets' TLS settings and the one
    /// discovered targets share), reading their files now. The shared
    /// client is kept, and so is a custom one whose files are unchanged (its
    /// pooled connections with it).
    pub fn for_config(&self, config: &Config) -> Result<Clients, String> {
        let discovered = config.fleet.file_sd.as_ref().and_then(|f| f.tls.as_ref());
        let wanted = config
            .targets
            .iter()
            .filter_map(|t| t.tls.as_ref())
            .chain(discovered);
        let mut custom = BTreeMap::new();
        for tls in wanted {
            if custom.contains_key(tls) {
                continue;
            }
            let failed = |(key, e): (TlsKey, String)| format!("{}: {e}", key.name());
            let files = Files::read(tls).map_err(failed)?;
            let fingerprint = files.fingerprint();
            let built = match self.custom.get(tls) {
                Some(built) if built.fingerprint == fingerprint => built.clone(),
                _ => {
                    let config = files.client_config().map_err(failed)?;
                    Built {
                        fingerprint,
                        direct: Client::with_tls(self.connect_timeout, Some(config.clone()), None)?,
                        proxied: Self::proxied(self.connect_timeout, Some(config), &self.proxies)?,
                    }
                }
            };
            custom.insert(tls.clone(), built);
        }
        Ok(Clients {
            connect_timeout: self.connect_timeout,
            shared: self.shared.clone(),
            proxies: self.proxies.clone(),
            shared_proxied: self.shared_proxied.clone(),
            custom: Arc::new(custom),
        })
    }

    /// The client for `target`. One whose TLS setting was not built (not in
    /// the configuration these clients were made for) gets the shared one,
    /// which fails its handshakes rather than trusting anything more. The
    /// proxied twin only for `proxy: environment`, never for the built-in
    /// engine.
    pub fn for_target(&self, target: &Target) -> &Client {
        let proxied =
            target.proxy == ProxyMode::Environment && matches!(target.endpoint, Endpoint::Url(_));
        let (direct, twin) = match &target.tls {
            None => (&self.shared, self.shared_proxied.as_ref()),
            Some(tls) => match self.custom.get(tls) {
                Some(built) => (&built.direct, built.proxied.as_ref()),
                None => {
                    tracing::error!(target_name = %target.name, "no HTTP client built for this target's TLS files; using the shared one");
                    (&self.shared, self.shared_proxied.as_ref())
                }
            },
        };
        match twin {
            Some(twin) if proxied => twin,
            _ => direct,
        }
    }

    /// Whether `target` gets another client from `other` than from `self`
    /// (its TLS files changed on disk): its loop must restart to use it.
    pub fn changed_for(&self, other: &Clients, target: &Target) -> bool {
        let Some(tls) = &target.tls else {
            return false;
        };
        let fingerprint = |c: &Clients| c.custom.get(tls).map(|b| b.fingerprint);
        fingerprint(self) != fingerprint(other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TlsFiles;

    fn tls(ca: Option<&str>, identity: Option<(&str, &str)>) -> ClientTls {
        ClientTls {
            ca_file: ca.map(Into::into),
            identity: identity.map(|(c, k)| TlsFiles {
                cert_file: c.into(),
                key_file: k.into(),
            }),
        }
    }

    #[test]
    fn problems_name_the_key_and_the_file() {
        let dir = std::env::temp_dir().join(format!("llmprobe-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let not_pem = dir.join("not.pem");
        std::fs::write(&not_pem, "hello\n").unwrap();
        let missing = dir.join("missing.pem");
        let s = |p: &Path| p.to_str().unwrap().to_string();

        let (key, e) = check(&tls(Some(&s(&missing)), None)).unwrap_err();
        assert_eq!(key, TlsKey::CaFile);
        assert!(
            e.starts_with(&format!("cannot read `{}`: ", missing.display())),
            "{e}"
        );

        let (key, e) = check(&tls(Some(&s(&not_pem)), None)).unwrap_err();
        assert_eq!(key, TlsKey::CaFile);
        assert_eq!(
            e,
            format!("`{}` holds no PEM certificate", not_pem.display())
        );

        let (key, e) = check(&tls(None, Some((&s(&not_pem), &s(&missing))))).unwrap_err();
        assert_eq!(key, TlsKey::KeyFile, "{e}");

        let (key, _) = check(&tls(None, Some((&s(&not_pem), &s(&not_pem))))).unwrap_err();
        assert_eq!(key, TlsKey::CertFile);
        std::fs::remove_dir_all(&dir).ok();
    }
}
