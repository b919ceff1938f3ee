//! The OTLP exporter: a task on the daemon's runtime that collects the
//! sink's instruments every interval and POSTs them to the collector, one
//! request at a time. A failed export waits for a retry with backoff in a
//! bounded queue; what the queue cannot keep is dropped and counted
//! (`llmprobe_otlp_dropped_data_points_total`). The sweeps never wait for
//! it: the sink's hooks only write to the instruments in memory.
//!
//! Its HTTP client is its own (reqwest, which the probe's client wraps for
//! targets): a collector is not a target, has no key or private TLS of a
//! target, and an export must never take a connection the measured
//! requests pool.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::aggregate::Aggregator;
use super::encode::export_request;
use crate::config::redact;
use crate::config::{OtlpSink, Temporality};
use crate::metrics::Metrics;

/// Batches kept waiting for delivery with delta temporality (each holds
/// counts no other has); a cumulative batch replaces the ones before it.
const MAX_PENDING: usize = 8;
/// First wait before a retry; doubled after each failure.
const BACKOFF_START: Duration = Duration::from_secs(1);
/// Longest wait before a retry.
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// Longest `Retry-After` honoured.
const RETRY_AFTER_MAX: Duration = Duration::from_secs(300);
/// Bytes of a refusal's body quoted in the log line.
const BODY_QUOTED: usize = 512;

/// The current time, Unix nanoseconds.
pub fn now_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// What became of one export request.
#[derive(Debug, PartialEq)]
enum Attempt {
    /// The collector took it.
    Sent,
    /// Worth trying again (unreachable, timed out, 429, 502, 503, 504),
    /// after the wait the collector asked for, if any.
    Retry(String, Option<Duration>),
    /// Refused for good (any other status): dropped.
    Refused(String),
}

/// One encoded export request and its number of points.
struct Pending {
    body: Vec<u8>,
    points: usize,
}

/// The exporter of one OTLP sink.
pub struct Exporter {
    settings: OtlpSink,
    client: reqwest::Client,
    headers: reqwest::header::HeaderMap,
    aggregator: Arc<Mutex<Aggregator>>,
    metrics: Arc<Metrics>,
}

impl Exporter {
    /// An exporter of `aggregator` to `settings.endpoint`; Err when the
    /// HTTP client or a header cannot be built (said without its value).
    pub fn new(
        settings: &OtlpSink,
        aggregator: Arc<Mutex<Aggregator>>,
        metrics: Arc<Metrics>,
    ) -> Result<Self, String> {
        use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
        let mut headers = HeaderMap::new();
        for (name, value) in &settings.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("header `{name}`: not a valid name"))?;
            let mut v = HeaderValue::from_str(&value.expose())
                .map_err(|_| format!("header `{name}`: not a valid value"))?;
            // Never printed by the HTTP stack's own debug output.
            v.set_sensitive(matches!(value, crate::config::HeaderValue::Secret(..)));
            headers.insert(name, v);
        }
        let client = reqwest::Client::builder()
            .no_proxy()
            // Headers carry secrets: never to another host.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(settings.timeout)
            .timeout(settings.timeout)
            .user_agent(concat!("llmprobe/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Exporter {
            settings: settings.clone(),
            client,
            headers,
            aggregator,
            metrics,
        })
    }

    /// Exports every interval until `cancel`.
    pub async fn run(self, cancel: CancellationToken) {
        let every = self.settings.interval;
        let mut tick = tokio::time::interval_at(Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut pending: VecDeque<Pending> = VecDeque::new();
        let mut retry_at = Instant::now();
        let mut backoff = BACKOFF_START;
        let mut failing = false;
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tick.tick() => self.collect(&mut pending),
                _ = tokio::time::sleep_until(retry_at), if !pending.is_empty() => {
                    let attempt = tokio::select! {
                        _ = cancel.cancelled() => return,
                        a = self.send(&pending[0].body) => a,
                    };
                    match attempt {
                        Attempt::Sent => {
                            pending.pop_front();
                            backoff = BACKOFF_START;
                            if std::mem::take(&mut failing) {
                                tracing::info!(endpoint = %self.settings.endpoint, "OTLP export delivered again");
                            }
                        }
                        Attempt::Retry(why, after) => {
                            // A `Retry-After: 0` must not make a busy loop.
                            retry_at = Instant::now() + after.map_or(backoff, |a| a.max(BACKOFF_START));
                            backoff = (backoff * 2).min(BACKOFF_MAX);
                            if !std::mem::replace(&mut failing, true) {
                                tracing::warn!(endpoint = %self.settings.endpoint, error = %why, "OTLP export failed; retrying with backoff");
                            } else {
                                tracing::debug!(endpoint = %self.settings.endpoint, error = %why, "OTLP export failed again");
                            }
                        }
                        Attempt::Refused(why) => {
                            let dropped = pending.pop_front().map_or(0, |p| p.points);
                            self.metrics.otlp_dropped(dropped as u64);
                            tracing::warn!(endpoint = %self.settings.endpoint, error = %why, points = dropped, "OTLP export refused; its points are dropped");
                        }
                    }
                }
            }
        }
    }

    /// Collects a batch into the queue: with cumulative temporality it
    /// replaces every batch still waiting (it carries their totals); with
    /// delta the oldest goes when the queue is full. Either way, what
    /// goes unsent is counted.
    fn collect(&self, pending: &mut VecDeque<Pending>) {
        let temporality = self.settings.temporality;
        let batch = self
            .aggregator
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .collect(temporality, now_nanos());
        let points = batch.points();
        if points == 0 {
            return;
        }
        let keep = match temporality {
            Temporality::Cumulative => 0,
            Temporality::Delta => MAX_PENDING - 1,
        };
        let mut dropped = 0;
        while pending.len() > keep {
            dropped += pending.pop_front().map_or(0, |p| p.points);
        }
        if dropped > 0 {
            self.metrics.otlp_dropped(dropped as u64);
            tracing::debug!(
                points = dropped,
                "OTLP points dropped: a newer export replaced them"
            );
        }
        pending.push_back(Pending {
            body: export_request(&batch),
            points,
        });
    }

    /// POSTs one export request.
    async fn send(&self, body: &[u8]) -> Attempt {
        let request = self
            .client
            .post(&self.settings.endpoint)
            .headers(self.headers.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/x-protobuf")
            .body(body.to_vec());
        let mut response = match request.send().await {
            Ok(r) => r,
            Err(e) => return Attempt::Retry(redact::message(&error_chain(&e), 300), None),
        };
        let status = response.status().as_u16();
        if response.status().is_success() {
            return Attempt::Sent;
        }
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|s| Duration::from_secs(s).min(RETRY_AFTER_MAX));
        // Only the start of the body is read: a collector's refusal is
        // quoted, never held whole.
        let mut start = Vec::new();
        while start.len() < BODY_QUOTED {
            match response.chunk().await {
                Ok(Some(b)) => {
                    start.extend_from_slice(&b[..b.len().min(BODY_QUOTED - start.len())])
                }
                _ => break,
            }
        }
        let mut quoted = String::from_utf8_lossy(&start).into_owned();
        if start.len() >= BODY_QUOTED {
            // A secret cut in two at the end is redacted too.
            quoted.push(redact::CUT_MARK);
        }
        let why = redact::message(&format!("HTTP {status}: {quoted}"), 300);
        if matches!(status, 429 | 502 | 503 | 504) {
            Attempt::Retry(why, retry_after)
        } else {
            Attempt::Refused(why)
        }
    }
}

/// An error with its causes (reqwest's own message says little alone).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exporter(temporality: Temporality) -> (Exporter, Arc<Metrics>) {
        let settings = OtlpSink {
            endpoint: "http://127.0.0.1:9/v1/metrics".into(),
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            temporality,
            headers: Vec::new(),
        };
        let metrics = Arc::new(Metrics::on_own_registry().unwrap());
        metrics.otlp_started();
        let aggregator = Arc::new(Mutex::new(Aggregator::new(0)));
        let e = Exporter::new(&settings, aggregator, metrics.clone()).unwrap();
        (e, metrics)
    }

    fn dropped(metrics: &Metrics) -> String {
        let text = metrics.encode();
        let line = text
            .lines()
            .find(|l| l.starts_with("llmprobe_otlp_dropped_data_points_total "));
        line.unwrap_or_default().to_string()
    }

    fn record(e: &Exporter) {
        e.aggregator.lock().unwrap().record(0, Vec::new(), 1.0);
    }

    #[test]
    fn a_cumulative_batch_replaces_those_still_waiting_and_counts_them() {
        let (e, metrics) = exporter(Temporality::Cumulative);
        let mut pending = VecDeque::new();
        e.collect(&mut pending);
        assert!(pending.is_empty(), "nothing recorded, nothing sent");
        record(&e);
        e.collect(&mut pending);
        e.collect(&mut pending);
        assert_eq!(pending.len(), 1);
        assert_eq!(
            dropped(&metrics),
            "llmprobe_otlp_dropped_data_points_total 1"
        );
    }

    #[test]
    fn delta_batches_wait_in_a_bounded_queue() {
        let (e, metrics) = exporter(Temporality::Delta);
        let mut pending = VecDeque::new();
        for _ in 0..MAX_PENDING + 2 {
            record(&e);
            e.collect(&mut pending);
        }
        assert_eq!(pending.len(), MAX_PENDING);
        assert_eq!(
            dropped(&metrics),
            "llmprobe_otlp_dropped_data_points_total 2"
        );
        // Nothing new: no empty batch queued.
        e.collect(&mut pending);
        assert_eq!(pending.len(), MAX_PENDING);
    }
}
