//! The real `llmprobe` binary, as cargo built it for these tests: one-shot
//! commands, and `llmprobe run` as a child process.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, ExitStatus, Output};
use std::time::Duration;

use super::ports::free_port;
use super::process::Process;
use super::{paths, wait};

/// `llmprobe`, run from the repository root (where `config/llmprobe.yaml`,
/// the default config, is).
pub fn llmprobe() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_llmprobe"));
    c.current_dir(paths::repo());
    c
}

/// Runs a command to its end on a blocking thread, off the runtime's
/// workers (a test's servers keep answering meanwhile).
pub async fn output(mut command: Command) -> Output {
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

/// `llmprobe run` in a child process; stopped when dropped.
pub struct Running {
    /// Where it serves /metrics.
    pub addr: SocketAddr,
    /// The child process and its logs.
    pub process: Process,
}

impl Running {
    /// Starts `llmprobe run --config CONFIG` with `env` added (probes off in
    /// `defaults` unless `env` turns them on), listening on
    /// a free loopback port (`LLMPROBE__LISTEN` overrides the config's
    /// `listen`); its logs go next to the config.
    pub fn start(config: &Path, env: &[(&str, &str)]) -> Running {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut command = llmprobe();
        command
            .args(["run", "--config"])
            .arg(config)
            .env("LLMPROBE__LISTEN", addr.to_string())
            // Probes between sweeps are on by default; a test that is not
            // about them must not see their requests (a test sets this
            // again, or a target's own `probe`, to have them).
            .env("LLMPROBE__DEFAULTS__PROBE__INTERVAL", "0s")
            .envs(env.iter().copied());
        let logs = config.parent().unwrap();
        let process = Process::spawn("llmprobe", &mut command, logs);
        Running { addr, process }
    }

    /// `http://ADDR/PATH`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The body of a GET, or None when there is no answer.
    pub async fn get(&self, path: &str) -> Option<String> {
        let response = reqwest::get(self.url(path)).await.ok()?;
        response.text().await.ok()
    }

    /// Waits until /healthz answers 200; panics, with the logs, when the
    /// process exits first or `limit` passes.
    pub async fn ready(&self, limit: Duration) {
        wait::poll("llmprobe's /healthz", limit, || async {
            self.process.assert_running();
            match reqwest::get(self.url("/healthz")).await {
                Ok(r) if r.status().is_success() => Ok(()),
                _ => Err(self.process.tail()),
            }
        })
        .await
    }

    /// Sends SIGTERM and waits at most `limit` for the exit status.
    pub fn stop(&self, limit: Duration) -> ExitStatus {
        self.process.terminate();
        self.process.wait_exit(limit).unwrap_or_else(|| {
            panic!(
                "did not exit within {limit:?} of SIGTERM\n{}",
                self.process.tail()
            )
        })
    }
}
