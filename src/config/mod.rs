//! Configuration: the YAML file (plus `LLMPROBE__` environment overrides)
//! decoded strictly, then validated and resolved into what the scheduler and
//! the sweep use. Every problem is collected, each naming the file and key.
//!
//! Plain data only: this layer imports nothing of the layers that use it.
//! Inside, a one-way pipeline (no file imports one that imports it):
//! - leaves: [`env`] (environment variables, the `LLMPROBE__` overrides,
//!   bounded reads of key and prompt files), [`env_file`] (`--env-file`:
//!   a systemd environment file's assignments), [`checks`] (shared value
//!   checks, size limits), [`error`], [`tls`] (the TLS files and the hooks
//!   that check them), [`values`], [`gentle`], [`secret`], [`labels`],
//!   [`prompts`], [`proxy`] (which proxy a URL goes through),
//!   [`search`] (which file is read when none is named), [`simulator`],
//!   [`sinks`] (each export sink's settings), [`sustained`];
//! - [`keys`]: **the per-target keys, each declared once** with its type,
//!   default and checks: a new per-target key is one entry there (see its
//!   doc); [`defaults`]: the daemon-wide defaults;
//! - [`file`]: the file as written → the merge and per-key rules
//!   ([`keys::Settings`]) → the stages of one target ([`target`], a
//!   discovered one through [`template`]), [`workloads`], [`pairs`],
//!   [`web`], the fleet sections ([`fleet`]), the whole file ([`resolve`])
//!   → [`resolved`]; [`load`] reads the file and runs them.

pub mod checks;
pub mod defaults;
pub mod env;
pub mod env_file;
pub mod error;
pub mod file;
pub mod fleet;
pub mod gentle;
pub mod keys;
pub mod labels;
pub mod load;
pub mod pairs;
pub mod probe;
pub mod prompt_memory;
pub mod prompts;
pub mod proxy;
pub mod redact;
pub mod resolve;
pub mod resolved;
pub mod search;
pub mod secret;
pub mod simulator;
pub mod sinks;
pub mod sustained;
pub mod target;
pub mod template;
pub mod tls;
pub mod values;
pub mod web;
pub mod workloads;

#[cfg(test)]
mod tests;

pub use checks::{
    check_password_hashes, MAX_INTERVAL, MAX_LEVEL, MAX_REQUESTS_PER_LEVEL, MAX_SHARDS,
};
pub use env::{Env, ProcessEnv, MAX_KEY_FILE_BYTES};
pub use error::ConfigError;
pub use file::*;
pub use keys::{Keys, Settings, Slo, SloFile};
pub use load::{decode, load, load_with};
pub use probe::ProbeSettings;
pub use resolve::{resolve, resolve_with};
pub use resolved::*;
pub use sinks::{HeaderValue, LogSink, OtlpSink, SinkSettings, Temporality};
pub use sustained::{Arrivals, SustainedSearch};
pub use target::{resolve_target, Context};
pub use template::target_file;
pub use tls::{Checks, ClientTls, TlsFiles, TlsKey};
pub use values::*;

/// Where the config is read from in a checkout (see [`search`] for the
/// whole search order).
pub const DEFAULT_PATH: &str = search::CHECKOUT_PATH;
