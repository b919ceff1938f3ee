//! Reading the file: the YAML plus `LLMPROBE__` environment overrides,
//! decoded strictly, then resolved; errors name the file and the key.

use std::fmt;
use std::path::Path;

use super::file::FileConfig;
use super::resolve::resolve_with;
use super::resolved::{ClientTls, Config};
use super::target::TlsKey;

/// Every problem found in a configuration, each naming file and key.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    /// One line per problem: `FILE: KEY: what is wrong`.
    pub problems: Vec<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.problems.join("\n"))
    }
}

impl std::error::Error for ConfigError {}

/// Source of environment variables, so tests need not touch the process's.
pub trait Env {
    /// The value of `name`, if set.
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment.
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
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

/// Reads, decodes and validates the configuration at `path`, with
/// `LLMPROBE__` overrides from the process environment (the TLS files are
/// not read: see [`load_with`]).
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    load_with(path, &Checks::NONE)
}

/// [`load`], running `checks` too.
pub fn load_with(path: &Path, checks: &Checks) -> Result<Config, ConfigError> {
    let file = decode(path, true)?;
    resolve_with(path, file, &ProcessEnv, checks)
}

/// Decodes the file (and, when `with_env`, `LLMPROBE__*` variables) strictly.
pub fn decode(path: &Path, with_env: bool) -> Result<FileConfig, ConfigError> {
    let shown = path.display().to_string();
    let fail = |msg: String| ConfigError {
        problems: vec![format!("{shown}: {msg}")],
    };
    if !path.exists() {
        return Err(fail("file not found".into()));
    }
    let mut builder = ::config::Config::builder().add_source(
        ::config::File::from(path)
            .format(::config::FileFormat::Yaml)
            .required(true),
    );
    if with_env {
        builder = builder.add_source(
            ::config::Environment::with_prefix("LLMPROBE")
                .prefix_separator("__")
                .separator("__")
                .try_parsing(true),
        );
    }
    let raw = builder.build().map_err(|e| fail(e.to_string()))?;
    serde_path_to_error::deserialize::<_, FileConfig>(raw).map_err(|e| {
        let key = e.path().to_string();
        let mut inner = e.into_inner().to_string();
        // The config crate appends the key itself; it is already in front.
        if let Some(at) = inner.find(" for key `") {
            inner.truncate(at);
        }
        if key == "." || key.is_empty() {
            fail(inner)
        } else {
            fail(format!("{key}: {inner}"))
        }
    })
}
