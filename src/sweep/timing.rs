//! The sweep's shared clocks and pauses.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio_util::sync::CancellationToken;

/// Pause after a level that stopped early, before the next one: the
/// requests it cancelled leave the server only once it notices their closed
/// connections (at its next step or check), and the next level must not
/// meet them still queued there.
pub const SETTLE_AFTER_EARLY_STOP: Duration = Duration::from_millis(500);

/// Now, as Unix seconds.
pub(crate) fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Why a sweep's token fired: its time limit, or shutdown and reload.
pub(crate) struct Ending {
    /// Set when the time limit fired.
    pub(crate) limit_hit: Arc<AtomicBool>,
    /// The sweep's time limit.
    pub(crate) time_limit: Duration,
}

impl Ending {
    /// The time limit's message.
    pub(crate) fn time_limit_text(&self) -> String {
        format!(
            "sweep exceeded its time limit of {}",
            humantime::format_duration(self.time_limit)
        )
    }

    /// Why the token fired, in words.
    pub(crate) fn why(&self) -> String {
        if self.limit_hit.load(Ordering::SeqCst) {
            self.time_limit_text()
        } else {
            "sweep cancelled (Ctrl-C, shutdown or reload)".to_string()
        }
    }
}

/// The server hears of cancelled requests only when their connections
/// close: the next level waits for it to let them go.
pub(crate) async fn settle_after(cancel: &CancellationToken) {
    tokio::select! {
        _ = tokio::time::sleep(SETTLE_AFTER_EARLY_STOP) => {}
        _ = cancel.cancelled() => {}
    }
}
