//! A target loop's probes between sweeps: the stream run beside the sweeps,
//! its events handed to the sinks, and a log line when probes start failing
//! and when they are served again (not one per probe).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use crate::config::Target;
use crate::sinks::Sinks;
use crate::stats::probe::ProbeEvent;
use crate::sweep::probe_stream::{self, Lane};
use crate::sweep::SweepEnv;

const UNKNOWN: u8 = 0;
const SERVED: u8 = 1;
const FAILING: u8 = 2;

/// Sends `target`'s probes until the loop is cancelled.
pub(crate) async fn run(
    env: &SweepEnv,
    target: &Arc<Target>,
    base_url: &str,
    lane: &Lane,
    sinks: &Sinks,
) {
    let state = AtomicU8::new(UNKNOWN);
    let report = |event: ProbeEvent| {
        if let ProbeEvent::Probed(r) = &event {
            let now = if r.outcome.served() { SERVED } else { FAILING };
            let before = state.swap(now, Ordering::SeqCst);
            if now == FAILING && before != FAILING {
                tracing::warn!(
                    target_name = %target.name,
                    outcome = r.outcome.as_str(),
                    error = r.error.as_deref().unwrap_or(""),
                    "probe failed"
                );
            } else if now == SERVED && before == FAILING {
                tracing::info!(target_name = %target.name, "probes served again");
            }
            if let Some(stall) = r.client_stall {
                tracing::info!(
                    target_name = %target.name,
                    ttft_seconds = r.ttft.unwrap_or(0.0),
                    stall_seconds = stall,
                    "probe's TTFT kept out: llmprobe's own runtime stalled while it ran"
                );
            }
            if let Some(cold) = r.cold {
                tracing::info!(
                    target_name = %target.name,
                    ttft_seconds = r.ttft.unwrap_or(0.0),
                    why = cold.as_str(),
                    "probe met a cold start"
                );
            }
        }
        sinks.probe(target, &event);
    };
    probe_stream::run(env, target, base_url, lane, &report).await;
}
