//! Operating-system signals as typed messages: SIGHUP -> reload,
//! SIGTERM / SIGINT -> shutdown; for a one-shot sweep, SIGINT (Ctrl-C) or
//! SIGTERM -> stop and report what was measured.

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What a signal asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Re-read the configuration.
    Reload,
}

/// Forwards SIGHUP as [`Signal::Reload`] and cancels `shutdown` on SIGTERM
/// or SIGINT. Returns an error when handlers cannot be installed.
pub fn listen(reload: mpsc::Sender<Signal>, shutdown: CancellationToken) -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = signal(SignalKind::hangup())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = hup.recv() => {
                    if reload.send(Signal::Reload).await.is_err() {
                        break;
                    }
                }
                _ = term.recv() => { shutdown.cancel(); break; }
                _ = int.recv() => { shutdown.cancel(); break; }
            }
        }
    });
    Ok(())
}

/// Exit status after Ctrl-C: 128 + SIGINT, as a shell reports a process
/// that SIGINT ended, so scripts tell an interrupted run from a failed one.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Exit status after SIGTERM (`timeout`, a CI runner, `systemctl stop` of
/// a unit that runs a sweep): 128 + SIGTERM.
pub const EXIT_TERMINATED: u8 = 143;

/// Which signal stopped a one-shot command, once one did.
#[derive(Debug, Clone, Default)]
pub struct Stopped(std::sync::Arc<std::sync::atomic::AtomicU8>);

impl Stopped {
    /// The exit status the first signal asks for; None before any.
    pub fn exit_status(&self) -> Option<u8> {
        match self.0.load(std::sync::atomic::Ordering::Acquire) {
            0 => None,
            n => Some(n),
        }
    }

    /// What stopped it, for the line on standard error.
    pub fn name(&self) -> &'static str {
        match self.exit_status() {
            Some(EXIT_TERMINATED) => "SIGTERM",
            _ => "Ctrl-C",
        }
    }

    fn set(&self, status: u8) {
        let _ = self.0.compare_exchange(
            0,
            status,
            std::sync::atomic::Ordering::AcqRel,
            std::sync::atomic::Ordering::Acquire,
        );
    }
}

/// For a one-shot command: cancels `stop` on the first SIGINT or SIGTERM
/// (the command ends what it started and reports it); a second signal
/// exits at once with its status, for a person (or a supervisor) who will
/// not wait for that. Returns which signal came first, or an error when
/// the handlers cannot be installed.
pub fn interrupt(stop: CancellationToken) -> std::io::Result<Stopped> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let stopped = Stopped::default();
    let seen = stopped.clone();
    tokio::spawn(async move {
        let mut count = 0;
        loop {
            let status = tokio::select! {
                s = int.recv() => s.map(|()| EXIT_INTERRUPTED),
                s = term.recv() => s.map(|()| EXIT_TERMINATED),
            };
            let Some(status) = status else { return };
            seen.set(status);
            stop.cancel();
            count += 1;
            if count > 1 {
                eprintln!("\nllmprobe: interrupted twice: exiting without a report");
                std::process::exit(i32::from(status));
            }
        }
    });
    Ok(stopped)
}
