//! The idle gate: a sweep waits while the server is busy with real traffic,
//! read from the server's own Prometheus metrics (for example vLLM's
//! `vllm:num_requests_running`).

use std::time::Duration;

pub use crate::config::IdleGate;
use crate::probe::client::Client;

/// The sum of every sample of `metric` in a text exposition, or None when
/// the metric is absent.
pub fn parse_value(text: &str, metric: &str) -> Option<f64> {
    let mut total = None;
    for line in text.lines() {
        let Some(rest) = line.trim_start().strip_prefix(metric) else {
            continue;
        };
        let after_labels = if let Some(labels) = rest.strip_prefix('{') {
            match closing_brace(labels) {
                Some(end) => &labels[end + 1..],
                None => continue,
            }
        } else if rest.starts_with([' ', '\t']) {
            rest
        } else {
            // Another metric whose name merely starts with this one.
            continue;
        };
        if let Some(v) = after_labels
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
        {
            if v.is_finite() {
                *total.get_or_insert(0.0) += v;
            }
        }
    }
    total
}

/// Index of the `}` closing a label set, skipping quoted values.
fn closing_brace(s: &str) -> Option<usize> {
    let mut in_quotes = false;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_quotes => escaped = true,
            '"' => in_quotes = !in_quotes,
            '}' if !in_quotes => return Some(i),
            _ => {}
        }
    }
    None
}

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
    parse_value(&text, &gate.metric).ok_or_else(|| format!("metric `{}` not found", gate.metric))
}

#[cfg(test)]
mod tests {
    use super::*;

    const VLLM: &str = r#"# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="qwen {7b}",engine="0"} 3.0
vllm:num_requests_running{model_name="other",engine="1"} 2.0
vllm:num_requests_running_total 99
vllm:num_requests_waiting{model_name="qwen"} 1.0
"#;

    #[test]
    fn sums_series_and_ignores_longer_names() {
        assert_eq!(parse_value(VLLM, "vllm:num_requests_running"), Some(5.0));
        assert_eq!(parse_value(VLLM, "vllm:num_requests_waiting"), Some(1.0));
        assert_eq!(parse_value(VLLM, "vllm:missing"), None);
        assert_eq!(parse_value("plain 7 1700000000000\n", "plain"), Some(7.0));
        assert_eq!(parse_value("broken{a=\"x 1\n", "broken"), None);
        assert_eq!(parse_value("nan_metric NaN\n", "nan_metric"), None);
    }
}
