//! Operating-system signals as typed messages: SIGHUP -> reload,
//! SIGTERM / SIGINT -> shutdown; for a one-shot sweep, SIGINT (Ctrl-C) ->
//! stop and report what was measured.

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

/// For a one-shot command: cancels `stop` on the first SIGINT (the command
/// ends what it started and reports it); a second SIGINT exits at once
/// with [`EXIT_INTERRUPTED`], for a person who will not wait for that.
/// Returns an error when the handler cannot be installed.
pub fn interrupt(stop: CancellationToken) -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        if int.recv().await.is_none() {
            return;
        }
        stop.cancel();
        if int.recv().await.is_some() {
            eprintln!("\nllmprobe: interrupted twice: exiting without a report");
            std::process::exit(i32::from(EXIT_INTERRUPTED));
        }
    });
    Ok(())
}
