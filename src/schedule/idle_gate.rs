//! The idle gate: a sweep waits while the server is busy with real traffic,
//! read from the server's own Prometheus metrics (for example vLLM's
//! `vllm:num_requests_running`). The daemon's loops wait at it before each
//! sweep, and so does `llmprobe sweep` (unless `--force`).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

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

/// Waits while the server reports more work than `gate` allows, less
/// `own()` requests in flight that are llmprobe's own (its probes); `busy`
/// is told each busy reading. False when `cancel` fires meanwhile. A gate
/// that cannot be read does not block the sweep (a server without metrics
/// must still be measured), but says so. The daemon's loops and the
/// one-shot `sweep` both wait here.
pub async fn wait_until_idle(
    client: &Client,
    target_name: &str,
    gate: &IdleGate,
    cancel: &CancellationToken,
    own: impl Fn() -> u32,
    mut busy: impl FnMut(f64),
) -> bool {
    loop {
        match read(client, gate).await.map(|v| v - f64::from(own())) {
            Ok(v) if v <= gate.max_value => return true,
            Ok(v) => busy(v),
            Err(e) => {
                tracing::warn!(target_name = %target_name, error = %e, "idle gate unreadable: sweeping anyway");
                return true;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(gate.retry_every) => {}
            _ = cancel.cancelled() => return false,
        }
    }
}
