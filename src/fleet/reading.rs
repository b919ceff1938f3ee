//! The discovery read under way, bounded: it runs on a blocking thread and
//! is abandoned when it has not finished within its time limit (a hung
//! network mount blocks a read in the kernel, where nothing can cancel
//! it). An abandoned read's thread is left to finish on its own and its
//! result dropped; while [`MAX_HUNG`] of them still hang no new one starts,
//! so a dead mount costs a few threads, not one per refresh.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Longest time a discovery read may take before it is abandoned.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Abandoned reads that may still hang before no new one is started.
pub const MAX_HUNG: usize = 2;

/// How a read ended.
#[derive(Debug)]
pub enum Ended<T> {
    /// It finished with this.
    Done(T),
    /// Its thread failed (a panic); nothing was read.
    Failed,
    /// It did not finish in time and was left behind.
    Abandoned,
}

/// The read under way, if any, and the abandoned ones still running.
#[derive(Debug)]
pub struct Reads<T> {
    timeout: Duration,
    current: Option<(JoinHandle<T>, Instant)>,
    hung: Vec<JoinHandle<T>>,
}

impl<T: Send + 'static> Reads<T> {
    /// No read under way; each will be abandoned after `timeout`.
    pub fn new(timeout: Duration) -> Reads<T> {
        Reads {
            timeout,
            current: None,
            hung: Vec::new(),
        }
    }

    /// Whether a read is under way.
    pub fn busy(&self) -> bool {
        self.current.is_some()
    }

    /// Abandoned reads whose thread still runs.
    pub fn hung(&mut self) -> usize {
        self.hung.retain(|h| !h.is_finished());
        self.hung.len()
    }

    /// Starts `read` on a blocking thread; false (and nothing started) when
    /// [`MAX_HUNG`] abandoned reads still hang or one is under way.
    pub fn start(&mut self, read: impl FnOnce() -> T + Send + 'static) -> bool {
        if self.busy() || self.hung() >= MAX_HUNG {
            return false;
        }
        let deadline = Instant::now() + self.timeout;
        self.current = Some((tokio::task::spawn_blocking(read), deadline));
        true
    }

    /// How the read under way ends (pending forever when there is none).
    pub async fn ended(&mut self) -> Ended<T> {
        let Some((handle, deadline)) = self.current.as_mut() else {
            return std::future::pending().await;
        };
        let ended = tokio::select! {
            r = handle => match r {
                Ok(v) => Ended::Done(v),
                Err(_) => Ended::Failed,
            },
            _ = tokio::time::sleep_until(*deadline) => Ended::Abandoned,
        };
        if let Some((handle, _)) = self.current.take() {
            if matches!(ended, Ended::Abandoned) {
                self.hung.push(handle);
            }
        }
        ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[tokio::test]
    async fn a_read_that_hangs_is_abandoned_and_a_few_at_most_hang() {
        let mut reads = Reads::new(Duration::from_millis(50));
        assert!(reads.start(|| 7));
        assert!(matches!(reads.ended().await, Ended::Done(7)));
        // Two reads that block until released: each abandoned in time.
        let (release, held) = mpsc::channel::<()>();
        let held = std::sync::Arc::new(std::sync::Mutex::new(held));
        for _ in 0..MAX_HUNG {
            let held = held.clone();
            assert!(reads.start(move || {
                let _ = held.lock().unwrap().recv();
                0
            }));
            let start = std::time::Instant::now();
            assert!(matches!(reads.ended().await, Ended::Abandoned));
            assert!(start.elapsed() < Duration::from_secs(5));
        }
        assert_eq!(reads.hung(), MAX_HUNG);
        assert!(!reads.start(|| 1), "no new read while two still hang");
        // Released, the hung threads end and reads start again.
        drop(release);
        let waited = std::time::Instant::now();
        while reads.hung() > 0 {
            assert!(
                waited.elapsed() < Duration::from_secs(5),
                "the threads ended"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(reads.start(|| 2));
        assert!(matches!(reads.ended().await, Ended::Done(2)));
    }
}
