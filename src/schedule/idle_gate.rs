//! The idle gate: a sweep waits while the server is busy with real traffic,
//! read from the server's own Prometheus metrics (for example vLLM's
//! `vllm:num_requests_running`).

use std::time::Duration;

pub use crate::config::IdleGate;
use crate::probe::client::Client;
use crate::probe::exposition;

/// Reads the gate's metric now.
pub async fn read(client: &Client, gate: &IdleGate) -> Result<f64, String> {
    let resp = client
        .get(&gate.metrics_url, None, Duration::from_secs(5))
        .await
        .map_err(|e| format!("cannot read the idle gate's metrics: {e}"))?;
    if resp.status != 200 {
        return Err(format!("metrics endpoint answered HTTP {}", resp.status));
    }
    let text = resp.text_prefix(4 << 20).await;
    exposition::sum(&text, &gate.metric)
        .ok_or_else(|| format!("metric `{}` not found", gate.metric))
}
