//! What every request of one target and workload shares, and sending one of
//! them; sweeps and gateway pairs send through it.

use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::config::{MaxTokensField, Target, Workload};
use crate::probe::api::{self, EndpointKind};
use crate::probe::body::Bodies;
use crate::probe::exchange::{self as probe, RequestSpec};
use crate::stats::sample::Sample;
use crate::sweep::env::SweepEnv;
use crate::sweep::shared_bodies;

/// Output tokens asked by the requests that open a level's connections: they
/// exist to open them, not to measure anything.
const POOL_OUTPUT_TOKENS: u32 = 1;

/// The requests of one target and workload.
pub(crate) struct Requests {
    /// The target requests go to.
    pub(crate) target: Arc<Target>,
    /// The workload they belong to.
    pub(crate) workload: Arc<Workload>,
    kind: &'static dyn EndpointKind,
    url: String,
    /// Shared with every other sweep that sends the same ([`shared_bodies`]).
    bodies: Arc<Bodies>,
    /// Bodies of the uncounted requests that open a level's connections.
    pool: Arc<Bodies>,
    output_limit: u64,
}

/// One request sent from a place the caller already holds.
pub(crate) struct Placed {
    /// Its measurement.
    pub(crate) sample: Sample,
    /// When it was sent.
    pub(crate) sent: Instant,
    /// When its place was free again.
    pub(crate) freed: Instant,
}

impl Requests {
    /// The endpoint's full URL.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// With the configured output-limit field, else the endpoint kind's
    /// default (gateway pairs, which measure stub engines).
    pub(crate) async fn new(
        target: &Arc<Target>,
        workload: &Arc<Workload>,
        base_url: &str,
    ) -> Self {
        let field = target
            .max_tokens_field
            .unwrap_or(api::kind(target.api).output_limit_fields()[0]);
        Self::for_sweep(target, workload, base_url, field).await
    }

    /// Bodies of the target's endpoint kind built once, for its model and
    /// request options, with `field` carrying the workload's output limit.
    pub(crate) async fn for_sweep(
        target: &Arc<Target>,
        workload: &Arc<Workload>,
        base_url: &str,
        field: MaxTokensField,
    ) -> Self {
        let kind = api::kind(target.api);
        let bodies = |max_tokens| {
            shared_bodies::built_aside(
                target.api,
                target.model.clone(),
                workload.clone(),
                target.request_options(),
                field,
                max_tokens,
            )
        };
        Requests {
            target: target.clone(),
            workload: workload.clone(),
            kind,
            url: format!("{base_url}{}", kind.path()),
            bodies: bodies(workload.max_completion_tokens).await,
            pool: bodies(POOL_OUTPUT_TOKENS).await,
            output_limit: u64::from(workload.max_completion_tokens),
        }
    }

    /// Sends request number `i` once it has a place in the global cap, and
    /// returns its sample with the time it ended; None when cancelled while
    /// waiting. `counted` requests reach the observer, sent among
    /// `concurrency` in flight.
    pub(crate) async fn send(
        &self,
        env: &SweepEnv,
        cancel: &CancellationToken,
        i: u64,
        counted: bool,
        concurrency: u32,
    ) -> Option<(Sample, Instant)> {
        // Waiting for the global cap is not latency: the clock starts in `measure`.
        let permit = tokio::select! {
            p = env.in_flight.acquire() => p.ok()?,
            _ = cancel.cancelled() => return None,
        };
        let placed = self
            .send_placed(env, cancel, i, counted, false, Some(concurrency))
            .await;
        drop(permit);
        Some((placed.sample, placed.freed))
    }

    /// Sends request number `i` (prompts round robin) from a place the
    /// caller holds; `pool` ones open connections with a one-token answer.
    /// `concurrency` is what the observer is told of the load it was sent
    /// under (None: an open-loop step).
    pub(crate) async fn send_placed(
        &self,
        env: &SweepEnv,
        cancel: &CancellationToken,
        i: u64,
        counted: bool,
        pool: bool,
        concurrency: Option<u32>,
    ) -> Placed {
        let counted_in_flight = env.observer.in_flight();
        let bodies = if pool { &self.pool } else { &self.bodies };
        // A marker no earlier request carried, where the workload puts one.
        let body = bodies.body(i, fastrand::u64(..));
        let spec = RequestSpec {
            url: &self.url,
            read_chunk: self.kind.read_chunk(),
            key: self.target.api_key.as_ref(),
            timeout: self.target.request_timeout,
            output_limit: Some(self.output_limit),
        };
        let sent = Instant::now();
        let sample =
            probe::measure(env.clients.for_target(&self.target), &spec, body, cancel).await;
        let freed = Instant::now();
        drop(counted_in_flight);
        if counted {
            env.observer
                .request(&self.target, &self.workload, &sample, concurrency);
        } else if !pool {
            env.observer.uncounted(&self.target, &self.workload);
        }
        Placed {
            sample,
            sent,
            freed,
        }
    }
}
