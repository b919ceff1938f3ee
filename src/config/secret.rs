//! A value that must never be printed: API keys, password hashes.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// An API key or a password hash. `Debug` shows `[redacted]`; there is no
/// `Display` and no `Serialize`, so it cannot reach a log line, a label or a
/// JSON document by accident. Only the client (the key) and the HTTP auth
/// check (the hash) read it, with [`Secret::expose`]. While a `Secret` is
/// alive, [`crate::config::redact`] removes its value from any text.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<Value>);

/// A secret's value; its end is counted, so that redaction forgets it.
#[derive(PartialEq, Eq)]
struct Value(Arc<str>);

impl Drop for Value {
    fn drop(&mut self) {
        GENERATION.fetch_add(1, Ordering::Relaxed);
    }
}

/// Changes whenever a secret is made or dropped: redaction's cue to
/// rebuild what it searches for.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The current [`GENERATION`].
pub(crate) fn generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

/// Every secret alive in the process. Process-wide on purpose: a server can
/// echo any key it was sent (a gateway quotes the upstream's key), and every
/// text that leaves the process, whichever target or log line it belongs
/// to, is checked against all of them. Weak, so that a reload drops the old keys.
static LIVE: Mutex<Vec<Weak<str>>> = Mutex::new(Vec::new());

/// The values of every secret alive now.
pub(crate) fn live() -> Vec<Arc<str>> {
    let list = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let mut values: Vec<Arc<str>> = list.iter().filter_map(Weak::upgrade).collect();
    drop(list);
    values.sort();
    values.dedup();
    values
}

impl Secret {
    /// Wraps a secret.
    pub fn new(value: String) -> Self {
        let value: Arc<str> = value.into();
        let mut list = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        list.retain(|w| w.strong_count() > 0);
        list.push(Arc::downgrade(&value));
        GENERATION.fetch_add(1, Ordering::Relaxed);
        Secret(Arc::new(Value(value)))
    }

    /// The value itself, for the Authorization header or the auth check only.
    pub fn expose(&self) -> &str {
        &self.0 .0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_value() {
        let s = Secret::new("sk-very-secret".into());
        assert_eq!(format!("{s:?}"), "[redacted]");
        assert_eq!(format!("{:?}", Some(&s)), "Some([redacted])");
        assert_eq!(s.expose(), "sk-very-secret");
    }
}
