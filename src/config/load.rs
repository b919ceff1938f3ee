//! The pipeline's entry: the YAML plus `LLMPROBE__` environment overrides
//! read and decoded strictly ([`super::file`]), then resolved
//! ([`super::resolve`]); errors name the file and the key.

use std::path::Path;

use super::env::{overrides, ProcessEnv};
use super::error::ConfigError;
use super::file::FileConfig;
use super::resolve::resolve_with;
use super::resolved::Config;
use super::tls::Checks;

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
        builder = builder.add_source(overrides());
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
