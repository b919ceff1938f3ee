//! The client's own lag while a level runs: a task on the sweep's runtime
//! that wakes on a fixed period and notes how late each wake-up came. A
//! reply from the server is read by the same runtime: when its workers are
//! busy (a loaded host, a throttled container), both are late alike.

use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::stats::client::ClientLag;

/// Time between two wake-ups: fine enough for the delays that matter
/// beside LLM latencies, cheap enough to run beside every level.
const TICK: Duration = Duration::from_millis(5);

/// A running lag watch; [`LagWatch::finish`] ends it.
pub(crate) struct LagWatch {
    stop: CancellationToken,
    task: JoinHandle<Vec<f64>>,
}

impl LagWatch {
    /// Starts watching on the current runtime.
    pub(crate) fn start() -> LagWatch {
        let stop = CancellationToken::new();
        let token = stop.clone();
        let task = tokio::spawn(async move {
            let mut delays = Vec::new();
            loop {
                let due = Instant::now() + TICK;
                tokio::select! {
                    _ = tokio::time::sleep_until(due.into()) => {}
                    _ = token.cancelled() => return delays,
                }
                delays.push(Instant::now().saturating_duration_since(due).as_secs_f64());
            }
        });
        LagWatch { stop, task }
    }

    /// Stops watching: the delays seen.
    pub(crate) async fn finish(self) -> ClientLag {
        self.stop.cancel();
        ClientLag::of(self.task.await.unwrap_or_default())
    }
}
