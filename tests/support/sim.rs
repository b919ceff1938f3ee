//! The built-in simulated engine served on a loopback port, as a real LLM
//! server would be.

use std::net::SocketAddr;
use std::time::Duration;

use llmprobe::sim::{SimConfig, SimParams};
use tokio_util::sync::CancellationToken;

/// The parameters of a named profile (`tiny`, `stub`, ...).
pub fn profile(name: &str) -> SimParams {
    SimConfig {
        profile: name.into(),
        ..SimConfig::default()
    }
    .resolve()
    .unwrap()
}

/// A simulated engine serving on 127.0.0.1:0; stops when dropped.
pub struct SimServer {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl SimServer {
    /// Serves an engine with `params`.
    pub async fn start(params: SimParams) -> SimServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let task = tokio::spawn(llmprobe::sim::serve(listener, params, stop.clone()));
        SimServer {
            addr,
            stop,
            task: Some(task),
        }
    }

    /// `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops serving and checks that the server ends cleanly and promptly.
    pub async fn stop(mut self) {
        self.stop.cancel();
        let task = self.task.take().expect("stopped once");
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("server stops promptly")
            .unwrap()
            .unwrap();
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
