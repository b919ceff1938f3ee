//! The state every request of one simulated server shares: its parameters,
//! the in-flight count that sheds load, the scheduler's submission side,
//! the prefix cache and the figures `/metrics` shows.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::gauges::Gauges;
use super::params::SimParams;
use super::prefix_cache::PrefixCache;
use super::scheduler::{self, Seq};

/// State shared by every request of one simulated server.
pub(crate) struct Sim {
    /// The resolved parameters.
    pub params: SimParams,
    in_flight: AtomicU32,
    requests: AtomicU64,
    started: u64,
    engine: EngineHandle,
    prefix_cache: Mutex<PrefixCache>,
    /// What the engine shows on `/metrics`.
    pub gauges: Arc<Gauges>,
}

/// The submission side of the scheduler task, which starts with the first
/// request (building a router needs no runtime; serving one always has it).
struct EngineHandle {
    submit: mpsc::UnboundedSender<Seq>,
    pending: Mutex<Option<(mpsc::UnboundedReceiver<Seq>, CancellationToken)>>,
}

/// One admitted request, counted in flight until dropped.
pub(crate) struct InFlight(Arc<Sim>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Sim {
    /// A server's state; its scheduler starts with the first request.
    pub(crate) fn new(params: SimParams, shutdown: CancellationToken, started: u64) -> Self {
        let (submit, arrivals) = mpsc::unbounded_channel();
        Sim {
            prefix_cache: Mutex::new(PrefixCache::new(params.prefix_cache_tokens)),
            params,
            in_flight: AtomicU32::new(0),
            requests: AtomicU64::new(0),
            started,
            gauges: Arc::default(),
            engine: EngineHandle {
                submit,
                pending: Mutex::new(Some((arrivals, shutdown))),
            },
        }
    }

    /// The number of this request among all the server received (from 0).
    pub(crate) fn next_request(&self) -> u64 {
        self.requests.fetch_add(1, Ordering::Relaxed)
    }

    /// When the server started, in seconds since the Unix epoch.
    pub(crate) fn started(&self) -> u64 {
        self.started
    }

    /// Admits a prompt's blocks to the prefix cache; how many leading blocks
    /// were already cached.
    pub(crate) fn admit_prefix(&self, blocks: &[u64]) -> usize {
        self.prefix_cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .admit(blocks)
    }

    /// Counts a request in, unless `max_in_flight` are already in.
    pub(crate) fn enter(self: &Arc<Self>) -> Option<InFlight> {
        let max = self.params.max_in_flight;
        self.in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| InFlight(Arc::clone(self)))
    }

    /// Hands a sequence to the scheduler; false once the engine has stopped.
    pub(crate) fn submit(&self, seq: Seq) -> bool {
        let pending = self
            .engine
            .pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some((arrivals, shutdown)) = pending {
            tokio::spawn(scheduler::run(
                self.params.clone(),
                arrivals,
                shutdown,
                self.gauges.clone(),
            ));
        }
        self.engine.submit.send(seq).is_ok()
    }
}
