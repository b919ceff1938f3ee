//! Fair admission of password checks. bcrypt is slow on purpose, so the
//! checks run one at a time, off the runtime, with a bounded number of
//! places to wait: a flood must not queue work without end. Fairness is in
//! who holds the places and in whose turn comes next: one client address
//! (an IPv6 /64) holds at most [`PLACES_PER_CLIENT`] of them, and the
//! waiting checks take turns round robin by address, not in order of
//! arrival. A right password from an address with no check waiting gets a
//! place unless [`MAX_PLACES`] / [`PLACES_PER_CLIENT`] other addresses hold
//! their full share, and then waits for at most one check per other
//! address waiting (and the one running), however many connections each
//! opens: thirty-two addresses flooding wrong passwords took every place
//! of an earlier first-come, first-served design (16 places), and a right
//! password was refused until the flood stopped.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;

/// Checks running or waiting at once, over all clients; beyond, a request
/// is refused without a check. Sixty-four addresses at their full share.
pub const MAX_PLACES: usize = 128;

/// Places one client address may hold: one check running, one waiting.
pub const PLACES_PER_CLIENT: usize = 2;

/// The places, the turns and the one running check.
#[derive(Debug, Default)]
pub struct Admission {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Places held, over all clients.
    total: usize,
    by_client: HashMap<IpAddr, Client>,
    /// The clients with a check waiting, in the order their next turn
    /// comes (each once; to the back after its turn when it has more).
    turns: VecDeque<IpAddr>,
    /// Whether a check runs (a [`Turn`] is held).
    running: bool,
    next_id: u64,
}

/// One client's places and its checks waiting, oldest first.
#[derive(Debug, Default)]
struct Client {
    held: usize,
    waiting: VecDeque<(u64, oneshot::Sender<Turn>)>,
}

/// A place held until dropped.
#[derive(Debug)]
pub struct Ticket {
    admission: Arc<Admission>,
    client: IpAddr,
    id: u64,
}

/// The one running check's turn; the next waiting check's comes when it is
/// dropped.
#[derive(Debug)]
pub struct Turn {
    /// None once disarmed (a turn its waiter no longer wanted).
    admission: Option<Arc<Admission>>,
}

impl Admission {
    /// A place for a check asked by `peer`, or None when every place is
    /// taken or that client holds its share.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<Ticket> {
        let client = client_of(peer);
        let mut state = self.lock();
        let held = state.by_client.get(&client).map_or(0, |c| c.held);
        if state.total >= MAX_PLACES || held >= PLACES_PER_CLIENT {
            return None;
        }
        state.total += 1;
        state.next_id += 1;
        let id = state.next_id;
        state.by_client.entry(client).or_default().held += 1;
        Some(Ticket {
            admission: self.clone(),
            client,
            id,
        })
    }

    /// Places held now.
    pub fn held(&self) -> usize {
        self.lock().total
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Gives the turn to the next client's oldest waiting check, round
    /// robin; no check runs when none waits.
    fn hand_over(self: &Arc<Self>) {
        let mut state = self.lock();
        while let Some(client) = state.turns.pop_front() {
            let Some(c) = state.by_client.get_mut(&client) else {
                continue;
            };
            let Some((_, waiter)) = c.waiting.pop_front() else {
                continue;
            };
            if !c.waiting.is_empty() {
                state.turns.push_back(client);
            }
            match waiter.send(Turn {
                admission: Some(self.clone()),
            }) {
                Ok(()) => return,
                // Its request went away meanwhile: the next one's turn.
                Err(mut unwanted) => unwanted.admission = None,
            }
        }
        state.running = false;
    }
}

impl Ticket {
    /// Waits for this check's turn to run (see [`Admission`] for the order).
    pub async fn turn(&self) -> Option<Turn> {
        let waiting = {
            let mut state = self.admission.lock();
            if !state.running && state.turns.is_empty() {
                state.running = true;
                return Some(Turn {
                    admission: Some(self.admission.clone()),
                });
            }
            let (tx, rx) = oneshot::channel();
            let client = state.by_client.entry(self.client).or_default();
            client.waiting.push_back((self.id, tx));
            if client.waiting.len() == 1 {
                state.turns.push_back(self.client);
            }
            rx
        };
        waiting.await.ok()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut state = self.admission.lock();
        state.total = state.total.saturating_sub(1);
        let Some(client) = state.by_client.get_mut(&self.client) else {
            return;
        };
        client.held = client.held.saturating_sub(1);
        client.waiting.retain(|(id, _)| *id != self.id);
        let (idle, gone) = (client.waiting.is_empty(), client.held == 0);
        if idle {
            let me = self.client;
            state.turns.retain(|c| *c != me);
        }
        if gone {
            state.by_client.remove(&self.client);
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        if let Some(admission) = self.admission.take() {
            admission.hand_over();
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

    #[test]
    fn a_newcomer_gets_a_place_beside_32_clients_at_their_full_share() {
        let a = Arc::new(Admission::default());
        let _flood: Vec<_> = (0..32)
            .flat_map(|i| {
                let peer = ip(&format!("10.0.3.{i}"));
                [
                    a.admit(peer).expect("a place"),
                    a.admit(peer).expect("a second"),
                ]
            })
            .collect();
        assert!(a.admit(ip("10.0.4.1")).is_some());
    }

    /// Spawns a task that waits for `ticket`'s turn, then notes `name` and
    /// gives the turn back; it is waiting when this returns.
    async fn queue(ticket: Ticket, name: &'static str, order: &Arc<Mutex<Vec<&'static str>>>) {
        let order = order.clone();
        tokio::spawn(async move {
            let turn = ticket.turn().await.expect("a turn");
            order.lock().unwrap().push(name);
            drop(turn);
        });
        tokio::task::yield_now().await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn turns_go_round_the_clients_not_by_arrival() {
        let a = Arc::new(Admission::default());
        let first = a.admit(ip("10.0.0.9")).unwrap();
        let running = first.turn().await.expect("nothing runs: at once");
        let order = Arc::new(Mutex::new(Vec::new()));
        queue(a.admit(ip("10.0.0.1")).unwrap(), "a1", &order).await;
        queue(a.admit(ip("10.0.0.1")).unwrap(), "a2", &order).await;
        let gone = a.admit(ip("10.0.0.3")).unwrap();
        let gone = tokio::spawn(async move {
            let _turn = gone.turn().await;
            panic!("it went away before its turn");
        });
        tokio::task::yield_now().await;
        queue(a.admit(ip("10.0.0.2")).unwrap(), "b1", &order).await;
        // A waiter that went away is passed over.
        gone.abort();
        assert!(gone.await.unwrap_err().is_cancelled());
        drop(running);
        while order.lock().unwrap().len() < 3 {
            tokio::task::yield_now().await;
        }
        assert_eq!(*order.lock().unwrap(), ["a1", "b1", "a2"]);
        drop(first);
        assert_eq!(a.held(), 0);
        assert!(a.lock().turns.is_empty() && !a.lock().running);
    }
}
