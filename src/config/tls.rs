//! The TLS files config names (a target's CA bundle and client certificate,
//! the web server's certificate) and the hooks that check them: their format
//! belongs to layers above config, which pass the checks in. A leaf.

use std::path::{Path, PathBuf};

/// How llmprobe trusts a target's server and proves itself to it: paths to
/// PEM files, read by the probe layer, which keeps one HTTP client per
/// distinct value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientTls {
    /// CA certificates that replace the built-in (webpki) roots.
    pub ca_file: Option<PathBuf>,
    /// Client certificate and key, for servers that require one.
    pub identity: Option<TlsFiles>,
}

/// The TLS certificate chain and private key, as PEM files.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TlsFiles {
    /// Certificate chain.
    pub cert_file: PathBuf,
    /// Private key.
    pub key_file: PathBuf,
}

/// Which of a target's TLS keys a problem is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsKey {
    /// `ca_file`.
    CaFile,
    /// `cert_file`.
    CertFile,
    /// `key_file`.
    KeyFile,
}

impl TlsKey {
    /// The key as written in the file.
    pub fn name(self) -> &'static str {
        match self {
            TlsKey::CaFile => "ca_file",
            TlsKey::CertFile => "cert_file",
            TlsKey::KeyFile => "key_file",
        }
    }
}

/// Checks of files whose format belongs to a layer above config (which
/// imports none of them), run during resolution so that their problems
/// take their place among the others.
#[derive(Debug, Clone, Copy)]
pub struct Checks {
    /// Whether a TLS certificate chain and key make a usable pair; the error
    /// is reported under `web.tls_cert_file`.
    pub tls: fn(cert: &Path, key: &Path) -> Result<(), String>,
    /// Whether a target's CA bundle, client certificate and key are usable;
    /// the error names the key it is about.
    pub client_tls: fn(&ClientTls) -> Result<(), (TlsKey, String)>,
}

impl Checks {
    /// No outside check: the TLS files are read only when used.
    pub const NONE: Checks = Checks {
        tls: |_, _| Ok(()),
        client_tls: |_| Ok(()),
    };
}
