//! What systemd is told (`Type=notify`): ready, reloading, stopping, and
//! the watchdog ping, withheld while a measurement loop is dead so that
//! systemd restarts a daemon that stopped measuring. Outside systemd every
//! call does nothing.

use std::time::Duration;

use sd_notify::NotifyState;

/// The daemon serves and measures (after the start and after each reload).
pub fn ready() {
    notify(NotifyState::Ready);
}

/// A reload starts; [`ready`] ends it.
pub fn reloading() {
    notify(NotifyState::Reloading);
}

/// The daemon is shutting down.
pub fn stopping() {
    notify(NotifyState::Stopping);
}

/// How often to check the loops: half the systemd watchdog period when one
/// is set, else 15 seconds (the check also refreshes what `/healthz`
/// reports; it is cheap).
pub fn watchdog_period() -> Duration {
    let mut usec = 0;
    if sd_notify::watchdog_enabled(false, &mut usec) && usec > 0 {
        Duration::from_micros(usec / 2)
    } else {
        Duration::from_secs(15)
    }
}

/// Pings the watchdog when no measurement loop is `dead`; otherwise logs
/// them and withholds the ping, so that systemd restarts the daemon rather
/// than let it stop measuring in silence.
pub fn watchdog(dead: &[String]) {
    if dead.is_empty() {
        notify(NotifyState::Watchdog);
    } else {
        tracing::error!(loops = %dead.join(", "), "measurement loops stopped unexpectedly; withholding the watchdog ping");
    }
}

fn notify(state: NotifyState) {
    // Without NOTIFY_SOCKET (not under systemd) this is a no-op; a failure
    // to reach systemd must not stop the daemon.
    let _ = sd_notify::notify(false, &[state]);
}
