//! Fair admission of password checks. bcrypt is slow on purpose, so the
//! checks run one at a time, off the runtime, with few places to wait: a
//! flood must not queue work without end. Fairness is in who holds the
//! places: one client address (an IPv6 /64) holds at most
//! [`PLACES_PER_CLIENT`] of them, and they are served in order of arrival,
//! so a right password from another address waits for a few checks at
//! most, however many connections a flood opens from one.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Checks running or waiting at once, over all clients; beyond, a request
/// is refused without a check.
pub const MAX_PLACES: usize = 16;

/// Places one client address may hold: one check running, one waiting.
pub const PLACES_PER_CLIENT: usize = 2;

/// The places, and the one running check.
#[derive(Debug)]
pub struct Admission {
    running: Arc<Semaphore>,
    places: Mutex<Places>,
}

#[derive(Debug, Default)]
struct Places {
    total: usize,
    by_client: HashMap<IpAddr, usize>,
}

/// A place held until dropped.
#[derive(Debug)]
pub struct Ticket {
    admission: Arc<Admission>,
    client: IpAddr,
}

impl Default for Admission {
    fn default() -> Self {
        Admission {
            running: Arc::new(Semaphore::new(1)),
            places: Mutex::default(),
        }
    }
}

impl Admission {
    /// A place for a check asked by `peer`, or None when every place is
    /// taken or that client holds its share.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<Ticket> {
        let client = client_of(peer);
        let mut places = self.places.lock().unwrap_or_else(PoisonError::into_inner);
        let held = places.by_client.get(&client).copied().unwrap_or(0);
        if places.total >= MAX_PLACES || held >= PLACES_PER_CLIENT {
            return None;
        }
        places.total += 1;
        places.by_client.insert(client, held + 1);
        Some(Ticket {
            admission: self.clone(),
            client,
        })
    }

    /// Places held now.
    pub fn held(&self) -> usize {
        self.places
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .total
    }
}

impl Ticket {
    /// Waits for the one running check's turn (first come, first served).
    pub async fn turn(&self) -> Option<OwnedSemaphorePermit> {
        self.admission.running.clone().acquire_owned().await.ok()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut places = self
            .admission
            .places
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        places.total = places.total.saturating_sub(1);
        if let Some(held) = places.by_client.get_mut(&self.client) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                places.by_client.remove(&self.client);
            }
        }
    }
}

/// The client an address stands for: itself for IPv4, its /64 for IPv6
/// (one host commonly holds a whole /64).
fn client_of(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(_) => peer,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut octets = v6.octets();
                octets[8..].fill(0);
                IpAddr::from(octets)
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn one_client_holds_its_share_and_no_more() {
        let a = Arc::new(Admission::default());
        let first = a.admit(ip("10.0.0.1")).expect("a place");
        let _second = a.admit(ip("10.0.0.1")).expect("a second place");
        assert!(a.admit(ip("10.0.0.1")).is_none(), "its share is held");
        let other = a.admit(ip("10.0.0.2"));
        assert!(other.is_some(), "another client still gets in");
        drop(first);
        assert!(a.admit(ip("10.0.0.1")).is_some(), "a place given back");
    }

    #[test]
    fn an_ipv6_slash_64_is_one_client() {
        let a = Arc::new(Admission::default());
        let _t: Vec<_> = ["2001:db8::1", "2001:db8::2:3"]
            .iter()
            .map(|s| a.admit(ip(s)).expect("a place"))
            .collect();
        assert!(a.admit(ip("2001:db8::ffff")).is_none());
        assert!(a.admit(ip("2001:db8:0:1::1")).is_some(), "another /64");
        let _m = a.admit(ip("::ffff:10.0.0.9")).expect("mapped v4");
        let _m2 = a.admit(ip("10.0.0.9")).expect("same client, second place");
        assert!(
            a.admit(ip("::ffff:10.0.0.9")).is_none(),
            "one client either way"
        );
    }

    #[test]
    fn places_are_bounded_over_all_clients() {
        let a = Arc::new(Admission::default());
        let held: Vec<_> = (0..MAX_PLACES)
            .map(|i| a.admit(ip(&format!("10.0.1.{i}"))).expect("a place"))
            .collect();
        assert_eq!(a.held(), MAX_PLACES);
        assert!(a.admit(ip("10.0.2.1")).is_none(), "all taken");
        drop(held);
        assert_eq!(a.held(), 0);
    }
}
