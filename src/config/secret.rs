//! A value that must never be printed: API keys, password hashes.

use std::fmt;

/// An API key or a password hash. `Debug` shows `[redacted]`; there is no
/// `Display` and no `Serialize`, so it cannot reach a log line, a label or a
/// JSON document by accident. Only the client (the key) and the HTTP auth
/// check (the hash) read it, with [`Secret::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(value: String) -> Self {
        Secret(value)
    }

    /// The value itself, for the Authorization header or the auth check only.
    pub fn expose(&self) -> &str {
        &self.0
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
