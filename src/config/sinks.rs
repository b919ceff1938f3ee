//! `sinks:`: each export sink's own settings, one section per sink that has
//! any. A reload rebuilds a sink only when its own section changed, so each
//! section is compared apart (`PartialEq`). Today's settings need no
//! resolving and are used as written; a sink whose settings name files or
//! secrets adds its resolve stage here.

use serde::Deserialize;

use super::defaults;

/// `sinks:` section: the settings of every configurable export sink.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct SinkSettings {
    /// `sinks.log`: the log lines of finished rounds.
    pub log: LogSink,
}

/// `sinks.log` section.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogSink {
    /// Whether a line is logged per finished sweep or pair measurement.
    pub rounds: bool,
}

impl Default for LogSink {
    fn default() -> Self {
        LogSink {
            rounds: defaults::LOG_ROUNDS,
        }
    }
}
