//! The credentials basic auth has already judged, for the process's
//! lifetime: those that verified (a scrape every few seconds must not pay
//! bcrypt each time) and those that did not (a flood repeating a wrong
//! password pays bcrypt once, not once per request). Only a keyed digest
//! of each is kept, under a key drawn at start and never stored: a memory
//! dump holds no password and nothing to test guesses against offline.

use std::collections::{HashSet, VecDeque};
use std::sync::{Mutex, PoisonError};

use ring::hmac;

/// Most verified credentials remembered: a few users, a few passwords each
/// (bcrypt reads 72 bytes, so longer ones with the same start verify too).
const MAX_VERIFIED: usize = 256;

/// Most refused credentials remembered, the oldest forgotten first: 32
/// bytes each, 128 KiB in all.
const MAX_REFUSED: usize = 4096;

/// What a credential was found to be, when it was judged before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// It verified.
    Verified,
    /// It did not.
    Refused,
}

/// The judged credentials, as keyed digests.
pub struct Remembered {
    key: hmac::Key,
    verified: Mutex<HashSet<Digest>>,
    refused: Mutex<Bounded>,
}

type Digest = [u8; 32];

/// A set that forgets its oldest entry beyond [`MAX_REFUSED`].
#[derive(Default)]
struct Bounded {
    set: HashSet<Digest>,
    order: VecDeque<Digest>,
}

impl std::fmt::Debug for Remembered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remembered").finish_non_exhaustive()
    }
}

impl Default for Remembered {
    fn default() -> Self {
        Remembered::new()
    }
}

impl Remembered {
    /// Nothing remembered, under a fresh random key.
    pub fn new() -> Remembered {
        let rng = ring::rand::SystemRandom::new();
        // Without the system's randomness (it does not fail on Linux), a
        // key from the clock and the address space still differs per run.
        let key = hmac::Key::generate(hmac::HMAC_SHA256, &rng).unwrap_or_else(|_| {
            let seed = format!("{:?}{:p}", std::time::SystemTime::now(), &rng);
            hmac::Key::new(hmac::HMAC_SHA256, seed.as_bytes())
        });
        Remembered {
            key,
            verified: Mutex::default(),
            refused: Mutex::default(),
        }
    }

    /// The digest of one user and password.
    pub fn digest(&self, user: &str, password: &str) -> Digest {
        let mut ctx = hmac::Context::with_key(&self.key);
        // The length first: "a:b" + "c" and "a" + "b:c" differ.
        ctx.update(&(user.len() as u64).to_le_bytes());
        ctx.update(user.as_bytes());
        ctx.update(password.as_bytes());
        let tag = ctx.sign();
        let mut digest = [0; 32];
        digest.copy_from_slice(tag.as_ref());
        digest
    }

    /// What `digest` was found to be, if it was judged before.
    pub fn known(&self, digest: &Digest) -> Option<Known> {
        if lock(&self.verified).contains(digest) {
            return Some(Known::Verified);
        }
        lock(&self.refused)
            .set
            .contains(digest)
            .then_some(Known::Refused)
    }

    /// Remembers what `digest` was found to be.
    pub fn remember(&self, digest: Digest, verdict: Known) {
        match verdict {
            Known::Verified => {
                let mut verified = lock(&self.verified);
                if verified.len() < MAX_VERIFIED {
                    verified.insert(digest);
                }
            }
            Known::Refused => {
                let mut refused = lock(&self.refused);
                if refused.set.insert(digest) {
                    refused.order.push_back(digest);
                }
                while refused.order.len() > MAX_REFUSED {
                    if let Some(old) = refused.order.pop_front() {
                        refused.set.remove(&old);
                    }
                }
            }
        }
    }

    /// How many refused credentials are remembered.
    #[cfg(test)]
    fn refused_len(&self) -> usize {
        lock(&self.refused).set.len()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_remembered_by_digest_only() {
        let r = Remembered::new();
        let right = r.digest("prom", "s3cret");
        let wrong = r.digest("prom", "guess");
        assert_eq!(r.known(&right), None);
        r.remember(right, Known::Verified);
        r.remember(wrong, Known::Refused);
        assert_eq!(r.known(&right), Some(Known::Verified));
        assert_eq!(r.known(&wrong), Some(Known::Refused));
        assert_ne!(r.digest("prom:", "x"), r.digest("prom", ":x"));
        assert_ne!(
            Remembered::new().digest("prom", "s3cret"),
            right,
            "a key of its own per process"
        );
    }

    #[test]
    fn refused_ones_are_bounded_oldest_first() {
        let r = Remembered::new();
        let first = r.digest("u", "0");
        for i in 0..MAX_REFUSED + 10 {
            r.remember(r.digest("u", &i.to_string()), Known::Refused);
        }
        assert_eq!(r.refused_len(), MAX_REFUSED);
        assert_eq!(r.known(&first), None, "the oldest went first");
        let last = r.digest("u", &(MAX_REFUSED + 9).to_string());
        assert_eq!(r.known(&last), Some(Known::Refused));
    }
}
