//! The sweep's shared clocks and pauses.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
