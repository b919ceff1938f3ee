//! `POST /-/reload` bounded: one reload at a time, one more waiting its
//! turn, and at least [`SPACING`] between the starts of two, so that a
//! flood of posts (reload is on by default, and open when no basic auth is
//! set) reloads at most once a second and logs as much; the posts beyond
//! are refused with 429, counted and logged at a bounded rate.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Mutex, MutexGuard};
use tokio::time::Instant;

use crate::http::tally::Tally;

/// Shortest time between the starts of two reloads over HTTP.
pub const SPACING: Duration = Duration::from_secs(1);

/// Reloads over HTTP running or waiting at once; beyond, a post is refused.
pub const MAX_HELD: usize = 2;

/// The turn of reloads over HTTP.
#[derive(Debug)]
pub struct ReloadGate {
    /// When the last reload started; locked for the whole of one, and
    /// handed out in order of arrival.
    last: Mutex<Option<Instant>>,
    held: AtomicUsize,
    refusals: Tally,
}

impl Default for ReloadGate {
    fn default() -> Self {
        ReloadGate {
            last: Mutex::new(None),
            held: AtomicUsize::new(0),
            refusals: Tally::new("POST /-/reload requests refused"),
        }
    }
}

/// A reload's turn, held until dropped.
#[derive(Debug)]
pub struct Turn<'a> {
    gate: &'a ReloadGate,
    _last: MutexGuard<'a, Option<Instant>>,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.gate.held.fetch_sub(1, Ordering::SeqCst);
    }
}

impl ReloadGate {
    /// Waits for this reload's turn, [`SPACING`] after the last one
    /// started; None at once when [`MAX_HELD`] are running or waiting.
    pub async fn enter(&self) -> Option<Turn<'_>> {
        if self.held.fetch_add(1, Ordering::SeqCst) >= MAX_HELD {
            self.held.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        // Counted from here: a post whose client goes away gives its place
        // back when the future is dropped.
        let place = Place(self);
        let mut last = self.last.lock().await;
        if let Some(at) = *last {
            tokio::time::sleep_until(at + SPACING).await;
        }
        *last = Some(Instant::now());
        std::mem::forget(place);
        Some(Turn {
            gate: self,
            _last: last,
        })
    }

    /// The count of refused posts not yet logged.
    pub fn refusals(&self) -> &Tally {
        &self.refusals
    }
}

/// A place taken before the turn comes; given back if the wait is dropped.
struct Place<'a>(&'a ReloadGate);

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.0.held.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn reloads_are_spaced_and_a_third_is_refused() {
        let gate = ReloadGate::default();
        let start = Instant::now();
        let first = gate.enter().await.expect("the first goes at once");
        assert_eq!(start.elapsed(), Duration::ZERO);
        let (second, third) = tokio::join!(gate.enter(), async {
            tokio::task::yield_now().await;
            let third = gate.enter().await;
            drop(first);
            third
        });
        assert!(
            third.is_none(),
            "one running, one waiting: the third is refused"
        );
        assert!(second.is_some());
        assert!(start.elapsed() >= SPACING, "{:?}", start.elapsed());
        drop(second);
        assert_eq!(gate.held.load(Ordering::SeqCst), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_given_up_gives_its_place_back() {
        let gate = ReloadGate::default();
        let first = gate.enter().await.unwrap();
        let waited = tokio::time::timeout(Duration::from_millis(10), gate.enter()).await;
        assert!(waited.is_err(), "still waiting when given up");
        assert_eq!(gate.held.load(Ordering::SeqCst), 1);
        drop(first);
        assert!(gate.enter().await.is_some());
    }
}
