//! Waiting, bounded in time, for something a test cannot be told about.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often a condition is tried again.
const EVERY: Duration = Duration::from_millis(200);

/// Tries `attempt` until it gives a value, for at most `limit`; panics with
/// `what` and the last thing `attempt` saw (its `Err`) when time runs out.
pub async fn poll<T, F, Fut>(what: &str, limit: Duration, mut attempt: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + limit;
    loop {
        match attempt().await {
            Ok(value) => return value,
            Err(seen) if Instant::now() > deadline => {
                panic!("timed out after {limit:?} waiting for {what}\n{seen}")
            }
            Err(_) => tokio::time::sleep(EVERY).await,
        }
    }
}

/// [`poll`] for code outside a runtime: sleeps the thread between tries.
pub fn poll_blocking<T>(
    what: &str,
    limit: Duration,
    mut attempt: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        match attempt() {
            Ok(value) => return value,
            Err(seen) if Instant::now() > deadline => {
                panic!("timed out after {limit:?} waiting for {what}\n{seen}")
            }
            Err(_) => std::thread::sleep(EVERY / 4),
        }
    }
}
