//! Configuration: the YAML file (plus `LLMPROBE__` environment overrides)
//! decoded strictly, then validated and resolved into what the scheduler and
//! the sweep use. Every problem is collected, each naming the file and key.
//!
//! Plain data only: this layer imports nothing of the layers that use it.
//! - [`file`]: the file as written; [`values`]: values written and kept;
//!   [`settings`]: the per-target settings, declared once; [`defaults`]:
//!   every built-in default; [`labels`]: label names.
//! - [`load`]: reading and decoding; [`resolve`], [`target`], [`fleet`]:
//!   validation; [`template`]: a discovered entry as a target written.
//! - [`resolved`]: the resolved configuration.

pub mod defaults;
pub mod file;
pub mod fleet;
pub mod gentle;
pub mod labels;
pub mod load;
pub mod prompts;
pub mod resolve;
pub mod resolved;
pub mod secret;
pub mod settings;
pub mod simulator;
pub mod target;
pub mod template;
pub mod values;

#[cfg(test)]
mod tests;

use std::time::Duration;

pub use file::*;
pub use load::{decode, load, load_with, Checks, ConfigError, Env, ProcessEnv};
pub use resolve::{check_password_hashes, resolve, resolve_with};
pub use resolved::*;
pub use settings::Settings;
pub use target::{resolve_target, Context, TlsKey};
pub use template::target_file;
pub use values::*;

/// Where the config is read from when no `--config` is given.
pub const DEFAULT_PATH: &str = "config/llmprobe.yaml";

// Upper bounds, so that a typo is an error at load rather than a panic or an
// exhausted memory later: a level runs one task per request in flight and
// keeps one sample per request, and the interval is added to clock times.
/// Highest concurrency level.
pub const MAX_LEVEL: u32 = 10_000;
/// Most requests in one level (or warm-up).
pub const MAX_REQUESTS_PER_LEVEL: u64 = 1_000_000;
/// Longest interval between two sweeps.
pub const MAX_INTERVAL: Duration = Duration::from_secs(365 * 24 * 3600);
/// Largest API key file read.
pub const MAX_KEY_FILE_BYTES: u64 = 64 << 10;
/// Most shards.
pub const MAX_SHARDS: u32 = 10_000;
