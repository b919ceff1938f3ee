//! The daemon running in-process (`llmprobe::run`) on 127.0.0.1:0.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::wait;

/// The daemon running in-process; its reload channel stands in for SIGHUP.
pub struct Daemon {
    /// Where it serves /metrics.
    pub addr: SocketAddr,
    /// Its configuration file.
    pub path: PathBuf,
    /// Cancelled to shut it down.
    pub shutdown: CancellationToken,
    /// Its task.
    pub handle: tokio::task::JoinHandle<anyhow::Result<()>>,
    /// Sends what a signal would.
    pub reload: tokio::sync::mpsc::Sender<llmprobe::signals::Signal>,
}

impl Daemon {
    /// Starts the daemon on the config at `path`.
    pub async fn start(path: PathBuf) -> Daemon {
        let config = llmprobe::config::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let (reload, rx) = tokio::sync::mpsc::channel(4);
        let p = path.clone();
        let stop = shutdown.clone();
        let handle =
            tokio::spawn(async move { llmprobe::run(&p, config, listener, stop, rx).await });
        Daemon {
            addr,
            path,
            shutdown,
            handle,
            reload,
        }
    }

    /// `http://ADDR/PATH`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The body of a GET of `path`.
    pub async fn get(&self, path: &str) -> String {
        reqwest::get(self.url(path))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// The /metrics page.
    pub async fn metrics(&self) -> String {
        self.get("/metrics").await
    }

    /// Reloads the configuration as SIGHUP would.
    pub async fn signal_reload(&self) {
        self.reload
            .send(llmprobe::signals::Signal::Reload)
            .await
            .unwrap();
    }

    /// Polls /metrics until `pred` holds, for at most `limit`.
    pub async fn wait_for(
        &self,
        limit: Duration,
        what: &str,
        pred: impl Fn(&str) -> bool,
    ) -> String {
        wait::poll(what, limit, || async {
            let text = self.metrics().await;
            if pred(&text) {
                Ok(text)
            } else {
                Err(format!("/metrics:\n{text}"))
            }
        })
        .await
    }

    /// Shuts it down; it must end cleanly within 10 s.
    pub async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.handle)
            .await
            .expect("daemon stops within 10 s")
            .unwrap()
            .unwrap();
    }
}
