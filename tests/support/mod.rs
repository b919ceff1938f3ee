//! The toolkit every integration test uses, one job per module:
//!
//! - where things are: `paths` (the repository, scratch directories),
//!   `ports` (free loopback ports);
//! - servers to measure: `server` (an OpenAI-compatible server with
//!   controlled delays and HTTP-level misbehaviour, and any axum app on a
//!   loopback port, over HTTPS too), `raw` (byte-level misbehaviour), `sim`
//!   (the built-in simulated engine), `tls` (a private CA, server and
//!   client certificates, server TLS configurations);
//! - llmprobe itself: `config` (configs written, loaded and rendered),
//!   `sweep` (one sweep in-process), `daemon` (in-process), `binary` (the
//!   real binary, one-shot or `run`), `terminal` (a command in a
//!   pseudo-terminal, as a person at a terminal runs it);
//! - the tools around it: `process` (child processes with logs), `wait`
//!   (bounded polling), `promtool`, `prometheus` (a real server and its
//!   API), `alertmanager` (a real server and amtool), `nginx` (a real
//!   reverse proxy);
//! - reading what comes out: `exposition` (/metrics text), `promql`
//!   (selectors and names in PromQL), `grafana` (dashboards, queries and
//!   variable substitution), `yaml` (manifests read as YAML);
//! - `reports`: report values built by hand (a sustained-rate search).
//!
//! Every test binary compiles all of it and uses a part.
#![allow(dead_code)]

pub mod alertmanager;
pub mod binary;
pub mod config;
pub mod daemon;
pub mod exposition;
pub mod grafana;
pub mod nginx;
pub mod paths;
pub mod ports;
pub mod process;
pub mod prometheus;
pub mod promql;
pub mod promtool;
pub mod raw;
pub mod reports;
pub mod server;
pub mod sim;
pub mod sweep;
pub mod terminal;
pub mod tls;
pub mod wait;
pub mod yaml;
