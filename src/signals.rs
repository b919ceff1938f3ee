//! Operating-system signals as typed messages: SIGHUP -> reload,
//! SIGTERM / SIGINT -> shutdown.

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
