//! Where a target is reached: its configured URL, or a built-in simulated
//! engine started for it on a loopback port chosen by the system.

use tokio_util::sync::CancellationToken;

use crate::config::{Endpoint, Target};

/// A reachable base URL; stops the target's simulator (if any) when dropped.
pub struct Reachable {
    /// Base URL, without a trailing slash (`http://host:port/v1`).
    pub base_url: String,
    simulator: Option<CancellationToken>,
}

impl Drop for Reachable {
    fn drop(&mut self) {
        if let Some(stop) = &self.simulator {
            stop.cancel();
        }
    }
}

/// Resolves the target's endpoint, starting its simulator when it has one.
pub async fn reach(target: &Target) -> Result<Reachable, String> {
    match &target.endpoint {
        Endpoint::Url(url) => Ok(Reachable {
            base_url: url.clone(),
            simulator: None,
        }),
        Endpoint::Simulator(params) => {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| format!("cannot bind a loopback port for the simulator: {e}"))?;
            let addr = listener.local_addr().map_err(|e| e.to_string())?;
            let stop = CancellationToken::new();
            let token = stop.clone();
            let params = params.clone();
            let name = target.name.clone();
            tokio::spawn(async move {
                if let Err(e) = crate::sim::serve(listener, params, token).await {
                    tracing::error!(target_name = %name, error = %e, "simulated engine stopped");
                }
            });
            tracing::info!(target_name = %target.name, %addr, "started the built-in simulated engine");
            Ok(Reachable {
                base_url: format!("http://{addr}/v1"),
                simulator: Some(stop),
            })
        }
    }
}
