//! What every sweep shares: the HTTP clients, the global cap on requests in
//! flight, the cancel token, and the observer that hears what sweeps do.

use std::sync::Arc;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::config::{GatewayPair, Target, Workload};
use crate::probe::tls::Clients;
use crate::stats::report::LevelSummary;
use crate::stats::sample::Sample;

/// Receives what a sweep does as it happens: the daemon's loops forward it
/// to the sinks, the one-shot sweep draws its progress display.
pub trait Observer: Send + Sync {
    /// A measured (counted) request, sent with `concurrency` requests kept
    /// in flight (None: an open-loop step).
    fn request(
        &self,
        _target: &Target,
        _workload: &Workload,
        _sample: &Sample,
        _concurrency: Option<u32>,
    ) {
    }
    /// A request answered but not counted (a warm-up request, one of an
    /// open-loop step's first arrivals): what a progress display counts too.
    fn uncounted(&self, _target: &Target, _workload: &Workload) {}
    /// A one-shot sweep of `target` is about to start, before its server is
    /// reached (a progress display shows it from the first second).
    fn sweep_started(&self, _target: &Target) {}
    /// A workload's warm-up of `requests` uncounted requests is about to start.
    fn warmup_started(&self, _target: &Target, _workload: &Workload, _requests: u64) {}
    /// An open-loop step of the sustained-rate search is about to send
    /// `requests` arrivals at `rate` per second.
    fn step_started(&self, _target: &Target, _workload: &Workload, _rate: f64, _requests: u64) {}
    /// A level is about to start: told before it waits for its places in
    /// the global cap and opens its connections.
    fn level_started(
        &self,
        _target: &Target,
        _workload: &Workload,
        _concurrency: u32,
        _requests: u64,
    ) {
    }
    /// A level finished: its summary, before the sweep's report holds it.
    fn level_finished(&self, _target: &Target, _workload: &Workload, _level: &LevelSummary) {}
    /// A one-shot measurement of a gateway pair is about to start.
    fn pair_started(&self, _pair: &GatewayPair) {}
    /// A request took a place in the global cap; it is given back when the
    /// returned guard (if any) is dropped.
    fn in_flight(&self) -> Option<Box<dyn Send>> {
        None
    }
}

/// An observer that ignores everything.
pub struct NoObserver;
impl Observer for NoObserver {}

/// What every sweep shares.
#[derive(Clone)]
pub struct SweepEnv {
    /// The HTTP clients, one per TLS setting (connections pooled across sweeps).
    pub clients: Clients,
    /// Global cap on requests in flight across all targets.
    pub in_flight: Arc<Semaphore>,
    /// The number of places in that cap (`schedule.max_in_flight_total`).
    pub in_flight_total: u32,
    /// Cancels everything on shutdown or reload.
    pub cancel: CancellationToken,
    /// Receives requests and progress.
    pub observer: Arc<dyn Observer>,
}

impl SweepEnv {
    /// An environment with a global cap of `in_flight_total` requests.
    pub fn new(
        clients: Clients,
        in_flight_total: u32,
        cancel: CancellationToken,
        observer: Arc<dyn Observer>,
    ) -> Self {
        SweepEnv {
            clients,
            in_flight: Arc::new(Semaphore::new(in_flight_total as usize)),
            in_flight_total,
            cancel,
            observer,
        }
    }
}
