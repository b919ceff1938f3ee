//! The engine's own signals during a sweep: where its metrics are (the
//! target's `server_metrics_url`, else `/metrics` beside `/v1` when it
//! answers with a known engine's figures), and one reader task per counted
//! level that reads them every `server_metrics_period`.
//!
//! The reader never touches the measuring path: its own task, its own
//! connection (the client's side pool), no place in the global cap, never
//! counted as a request. A slow, huge or garbled endpoint costs at most
//! one read in flight of [`READ_TIMEOUT`] and [`engine_metrics::MAX_BYTES`],
//! and a note in the result: the level ends when its requests do, whatever
//! the reader is doing.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::{ServerMetricsUrl, Target};
use crate::probe::client::Client;
use crate::probe::engine_metrics;
use crate::stats::server::{EngineReading, MetricsSource, ServerMetrics, ServerSignals};

/// Time limit on one read during a level.
pub const READ_TIMEOUT: Duration = Duration::from_secs(1);

/// Time limit on the read at warm-up that looks for the endpoint.
pub const FIND_TIMEOUT: Duration = Duration::from_secs(2);

/// Pause after a failed read before the next: a broken endpoint is not
/// hammered at the period.
pub const AFTER_FAILURE: Duration = Duration::from_secs(2);

/// Where a sweep reads the server's metrics, and how often.
#[derive(Clone)]
pub(crate) struct Watch {
    client: Client,
    url: String,
    model: String,
    period: Duration,
}

/// Finds where `target`'s server metrics are: what the sweep says of them,
/// and the watch its levels use (None: nothing to read).
pub(crate) async fn locate(
    client: &Client,
    target: &Target,
    base_url: &str,
) -> (ServerMetrics, Option<Watch>) {
    let (source, url) = match &target.server_metrics_url {
        ServerMetricsUrl::Off => {
            let off = ServerMetrics {
                source: MetricsSource::Off,
                ..ServerMetrics::default()
            };
            return (off, None);
        }
        ServerMetricsUrl::At(url) => (MetricsSource::Configured, url.clone()),
        ServerMetricsUrl::Find => match engine_metrics::beside(base_url) {
            Some(url) => (MetricsSource::Found, url),
            None => return (ServerMetrics::default(), None),
        },
    };
    let watch = Watch {
        client: client.clone(),
        url: url.clone(),
        model: target.model.clone(),
        period: target.server_metrics_period,
    };
    match engine_metrics::sample(client, &url, &target.model, FIND_TIMEOUT).await {
        Ok((engine, _)) => (
            ServerMetrics {
                source,
                url: Some(url),
                engine: Some(engine.as_str().to_string()),
                note: None,
            },
            Some(watch),
        ),
        // A configured endpoint is read anyway: it may come back, and each
        // level then says what it got.
        Err(why) if source == MetricsSource::Configured => (
            ServerMetrics {
                source,
                url: Some(url),
                engine: None,
                note: Some(why),
            },
            Some(watch),
        ),
        Err(why) => (
            ServerMetrics {
                note: Some(format!("no server metrics: {why}")),
                ..ServerMetrics::default()
            },
            None,
        ),
    }
}

/// The reader of one level, until [`LevelWatch::finish`].
pub(crate) struct LevelWatch {
    stop: CancellationToken,
    task: JoinHandle<()>,
    got: Arc<Mutex<(Vec<EngineReading>, Option<String>)>>,
}

impl Watch {
    /// Starts reading, at once and then every period.
    pub(crate) fn start(&self) -> LevelWatch {
        let stop = CancellationToken::new();
        let got: Arc<Mutex<(Vec<EngineReading>, Option<String>)>> = Arc::default();
        let task = {
            let (watch, stop, got) = (self.clone(), stop.clone(), got.clone());
            tokio::spawn(async move {
                // Half a period in: a read at the very start sees the level's
                // requests not sent yet.
                let mut next = tokio::time::Instant::now() + watch.period / 2;
                tokio::select! {
                    () = tokio::time::sleep_until(next) => {}
                    () = stop.cancelled() => return,
                }
                loop {
                    let read = engine_metrics::sample(
                        &watch.client,
                        &watch.url,
                        &watch.model,
                        READ_TIMEOUT,
                    );
                    let result = tokio::select! {
                        r = read => r,
                        () = stop.cancelled() => return,
                    };
                    let failed = {
                        let mut got = got.lock().unwrap_or_else(PoisonError::into_inner);
                        match result {
                            Ok((_, reading)) => {
                                got.0.push(reading);
                                false
                            }
                            Err(why) => {
                                got.1.get_or_insert(why);
                                true
                            }
                        }
                    };
                    next += watch.period;
                    let now = tokio::time::Instant::now();
                    if failed {
                        next = next.max(now + AFTER_FAILURE);
                    } else if next < now {
                        // A slow read: the next one at the period from now.
                        next = now + watch.period;
                    }
                    tokio::select! {
                        () = tokio::time::sleep_until(next) => {}
                        () = stop.cancelled() => return,
                    }
                }
            })
        };
        LevelWatch { stop, task, got }
    }
}

impl LevelWatch {
    /// Stops reading (a read in flight is dropped) and summarizes the level.
    pub(crate) async fn finish(self) -> ServerSignals {
        self.stop.cancel();
        let _ = self.task.await;
        let (readings, note) =
            std::mem::take(&mut *self.got.lock().unwrap_or_else(PoisonError::into_inner));
        let note = note.or_else(|| {
            readings
                .is_empty()
                .then(|| "no read completed during the level (it ended first)".to_string())
        });
        ServerSignals::of(&readings, note)
    }
}
