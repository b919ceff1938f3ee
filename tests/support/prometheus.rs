//! A real Prometheus server (Debian package `prometheus`, or the binary
//! named by `$PROMETHEUS`) on a loopback port, and its HTTP API. A test that
//! needs it fails, saying so, when it is missing.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::ports::free_port;
use super::process::Process;
use super::wait;

/// The Prometheus server binary: `$PROMETHEUS`, or where Debian or a manual
/// install puts it.
pub fn binary() -> PathBuf {
    if let Some(p) = std::env::var_os("PROMETHEUS") {
        return PathBuf::from(p);
    }
    ["/usr/bin/prometheus", "/usr/local/bin/prometheus"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "this test needs a Prometheus server: install Debian's `prometheus` package \
                 (apt-get install -y prometheus; scripts/test does) or set PROMETHEUS to its binary"
            )
        })
}

/// A running Prometheus server; stopped when dropped.
pub struct Prometheus {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The child process and its logs.
    pub process: Process,
    http: reqwest::Client,
}

impl Prometheus {
    /// Starts Prometheus on `config` (YAML, written to `DIR/prometheus.yml`,
    /// so relative `rule_files` are found in `dir`), storing its data and
    /// logs in `dir`.
    pub fn start(dir: &Path, config: &str) -> Prometheus {
        let config_file = dir.join("prometheus.yml");
        std::fs::write(&config_file, config).unwrap();
        let port = free_port();
        let process = Process::spawn(
            "prometheus",
            Command::new(binary())
                .arg(format!("--config.file={}", config_file.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.join("data").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}")),
            dir,
        );
        Prometheus {
            url: format!("http://127.0.0.1:{port}"),
            process,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap(),
        }
    }

    /// Waits until /-/ready answers 200; panics, with the log, when the
    /// server exits first or `limit` passes.
    pub async fn ready(&self, limit: Duration) {
        wait::poll("Prometheus /-/ready", limit, || async {
            self.process.assert_running();
            match self.http.get(format!("{}/-/ready", self.url)).send().await {
                Ok(r) if r.status().is_success() => Ok(()),
                _ => Err(self.process.tail()),
            }
        })
        .await
    }

    /// GET an API path; the `data` of a successful answer, or the error text.
    pub async fn api(&self, path: &str, params: &[(&str, &str)]) -> Result<Value, String> {
        let response = self
            .http
            .get(format!("{}{path}", self.url))
            .query(params)
            .send()
            .await
            .map_err(|e| format!("request failed: {e}"))?;
        // Errors come as JSON with status 400/422/503, so read the body anyway.
        let text = response.text().await.map_err(|e| e.to_string())?;
        let body: Value =
            serde_json::from_str(&text).map_err(|e| format!("not JSON ({e}): {text}"))?;
        if body["status"] == "success" {
            Ok(body["data"].clone())
        } else {
            Err(format!("{}: {}", body["errorType"], body["error"]))
        }
    }

    /// An instant query: its result elements (a scalar counts as one).
    pub async fn query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let data = self.api("/api/v1/query", &[("query", expr)]).await?;
        Ok(match &data["result"] {
            Value::Array(items) => items.clone(),
            other => vec![other.clone()],
        })
    }

    /// An instant query that must succeed with a vector: (labels, value) of
    /// every series.
    pub async fn samples(&self, expr: &str) -> Vec<(Value, f64)> {
        let data = self
            .api("/api/v1/query", &[("query", expr)])
            .await
            .unwrap_or_else(|e| panic!("{expr}: {e}"));
        data["result"]
            .as_array()
            .unwrap_or_else(|| panic!("{expr}: not a vector: {data}"))
            .iter()
            .map(|s| {
                let v = s["value"][1].as_str().unwrap().parse::<f64>().unwrap();
                (s["metric"].clone(), v)
            })
            .collect()
    }

    /// The value of a query that gives at most one series.
    pub async fn scalar(&self, expr: &str) -> Option<f64> {
        let r = self.samples(expr).await;
        assert!(r.len() <= 1, "{expr}: {r:?}");
        r.first().map(|(_, v)| *v)
    }

    /// Every rule of every group, as /api/v1/rules gives them.
    pub async fn rules(&self) -> Result<Vec<Value>, String> {
        let data = self.api("/api/v1/rules", &[]).await?;
        Ok(data["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .collect())
    }

    /// The sorted values of `label` over the last hour: over the series that
    /// match `selector`, or over all series.
    pub async fn label_values(
        &self,
        selector: Option<&str>,
        label: &str,
    ) -> Result<Vec<String>, String> {
        let end = now_unix();
        let start = (end - 3600.0).to_string();
        let end = end.to_string();
        let mut values = BTreeSet::new();
        match selector {
            Some(selector) => {
                let series = self
                    .api(
                        "/api/v1/series",
                        &[("match[]", selector), ("start", &start), ("end", &end)],
                    )
                    .await?;
                for s in series.as_array().into_iter().flatten() {
                    if let Some(v) = s[label].as_str() {
                        values.insert(v.to_string());
                    }
                }
            }
            None => {
                let data = self
                    .api(&format!("/api/v1/label/{label}/values"), &[])
                    .await?;
                for v in data.as_array().into_iter().flatten() {
                    values.extend(v.as_str().map(str::to_string));
                }
            }
        }
        Ok(values.into_iter().collect())
    }
}

fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}
