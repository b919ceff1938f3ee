//! Command-line definitions: every subcommand, flag and environment variable
//! (the man pages and shell completions are generated from them, `manual.rs`).

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// Keeps measuring the serving capacity of OpenAI-compatible LLM servers and
/// exposes it to Prometheus.
#[derive(Debug, Parser)]
#[command(name = "llmprobe", version = crate::build_info::VERSION_LINE, about)]
pub struct Cli {
    /// What to do (default: run the daemon).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Configuration file. When neither this nor $LLMPROBE_CONFIG names
    /// one, the first that exists of config/llmprobe.yaml (in the current
    /// folder: a checkout) and /etc/llmprobe/llmprobe.yaml (the package's).
    /// `report` reads one only when it is named.
    #[arg(long, global = true, env = "LLMPROBE_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Read KEY=VALUE lines from this file into the environment first, as
    /// the unit's EnvironmentFile= does (for example /etc/default/llmprobe:
    /// the targets' keys, LLMPROBE__ overrides); systemd's syntax, its
    /// values win over the environment's. Read after the command line: it
    /// cannot name the configuration file.
    #[arg(long, global = true, value_name = "PATH")]
    pub env_file: Option<PathBuf>,
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon: scheduled sweeps, /metrics for Prometheus.
    Run,
    /// Run one sweep of each target now and print the results. Each target
    /// waits for its idle gate; exit 4, sweeping nothing, while a daemon
    /// with the same state_dir is sweeping a selected target. Exit 2 when
    /// a sweep failed, 3 when a setup mistake (key, model, URL, TLS, DNS)
    /// stopped one, 130 when Ctrl-C stopped it and 143 when SIGTERM did
    /// (what was measured is printed, marked partial), 1 on a configuration
    /// error. A progress
    /// display goes to stderr when it is a terminal.
    Sweep {
        /// Only these targets (repeatable).
        #[arg(long = "target")]
        targets: Vec<String>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// Write the output to this file instead of standard output.
        #[arg(long)]
        output: Option<PathBuf>,
        /// Start each target from the daemon's saved state in this folder
        /// (its `state_dir`; read only), as its next sweep would.
        #[arg(long, value_name = "DIR")]
        state: Option<PathBuf>,
        /// Sweep now: neither wait for an idle gate nor refuse a target a
        /// daemon is sweeping (both sweeps then measure each other's load).
        #[arg(long)]
        force: bool,
    },
    /// Render a saved `sweep --format json` document as an HTML report
    /// (`--config` adds the configuration and SLO lines).
    Report {
        /// The JSON document (`-` for standard input).
        results: PathBuf,
        /// Write the report to this file instead of standard output.
        #[arg(long)]
        output: Option<PathBuf>,
    },
    /// Validate the configuration and explain what it will do; exit 1 on error.
    CheckConfig {
        /// Also ask each target's server: model list, one request of one
        /// output token (key, model, path), engine metrics, and the load one
        /// sweep sends; one line per target; exit 3 when one is not ready.
        #[arg(long)]
        online: bool,
    },
    /// Serve the built-in simulated OpenAI-compatible engine.
    Simulate(Box<crate::sim::SimArgs>),
    /// Write the man pages and shell completions into a folder (packaging).
    #[command(hide = true)]
    GenerateDocs {
        /// Folder to write `man1/` and `completions/` into (created).
        out: PathBuf,
    },
}

/// Output formats of `sweep`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Human-readable tables.
    Table,
    /// One JSON document (see docs/measuring.md).
    Json,
    /// One self-contained HTML page with charts (see docs/report.md).
    Html,
}

/// Log line formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable.
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}
