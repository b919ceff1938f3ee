//! The decode-step loop of the model engine: one task owns the queue and the
//! batch, and hands every running sequence one token per step.
//!
//! Steps are scheduled on absolute deadlines (each ends at the previous end
//! plus its duration), so a late timer wake-up delays one token but never
//! shifts the ones after it.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::gauges::Gauges;
use super::params::SimParams;

/// A request handed to the engine: its size and where its tokens go.
pub(crate) struct Seq {
    /// Prompt tokens, held in the KV cache while the sequence runs.
    pub prompt_tokens: u64,
    /// Prompt tokens prefilled in the step the sequence joins (those not
    /// served from the prefix cache).
    pub prefill_tokens: u64,
    /// Tokens to generate; at least 1.
    pub max_tokens: u32,
    /// One `()` per generated token; a closed receiver means the client left.
    pub tokens: mpsc::UnboundedSender<()>,
}

struct Running {
    tokens: mpsc::UnboundedSender<()>,
    left: u32,
    reserved: u64,
}

/// The queue and the batch, without the clock.
struct Batch {
    max_batch: usize,
    kv_capacity: u64,
    kv_used: u64,
    waiting: VecDeque<Seq>,
    running: Vec<Running>,
}

impl Batch {
    fn new(params: &SimParams) -> Self {
        Batch {
            max_batch: usize::try_from(params.max_batch).unwrap_or(usize::MAX),
            kv_capacity: params.kv_cache_tokens.unwrap_or(u64::MAX),
            kv_used: 0,
            waiting: VecDeque::new(),
            running: Vec::new(),
        }
    }

    fn is_idle(&self) -> bool {
        self.waiting.is_empty() && self.running.is_empty()
    }

    /// Moves waiting sequences into the batch in arrival order while the batch
    /// and the KV cache have room; returns the prompt tokens to prefill.
    /// First come, first served: a big request at the head is not overtaken.
    fn admit(&mut self) -> u64 {
        let mut prefill = 0u64;
        while let Some(head) = self.waiting.front() {
            if head.tokens.is_closed() {
                self.waiting.pop_front();
                continue;
            }
            let reserved = SimParams::reservation(head.prompt_tokens, u64::from(head.max_tokens));
            let fits = self.kv_used.saturating_add(reserved) <= self.kv_capacity;
            // An empty batch always takes the head, so an oversized request
            // (refused earlier by the HTTP layer anyway) cannot stall the queue.
            if self.running.len() >= self.max_batch || (!fits && !self.running.is_empty()) {
                break;
            }
            let Some(seq) = self.waiting.pop_front() else {
                break;
            };
            self.kv_used = self.kv_used.saturating_add(reserved);
            prefill = prefill.saturating_add(seq.prefill_tokens);
            self.running.push(Running {
                tokens: seq.tokens,
                left: seq.max_tokens.max(1),
                reserved,
            });
        }
        prefill
    }

    /// The end of a step: one token to every running sequence; finished and
    /// abandoned ones leave the batch and free their memory.
    fn emit(&mut self) {
        let kv_used = &mut self.kv_used;
        self.running.retain_mut(|seq| {
            let delivered = seq.tokens.send(()).is_ok();
            seq.left -= 1;
            let keep = delivered && seq.left > 0;
            if !keep {
                *kv_used = kv_used.saturating_sub(seq.reserved);
            }
            keep
        });
    }

    /// What `/metrics` shows of the batch now.
    fn show(&self, gauges: &Gauges) {
        gauges.set_batch(self.running.len(), self.waiting.len(), self.kv_used);
    }

    fn batch_size(&self) -> u32 {
        u32::try_from(self.running.len()).unwrap_or(u32::MAX)
    }
}

/// Runs the engine until every submitter is gone or `shutdown` fires; on
/// shutdown the sequences in flight are dropped, which cuts their streams.
pub(crate) async fn run(
    params: SimParams,
    mut arrivals: mpsc::UnboundedReceiver<Seq>,
    shutdown: CancellationToken,
    gauges: std::sync::Arc<Gauges>,
) {
    let mut batch = Batch::new(&params);
    // The end of the latest step (a virtual time: the wake-up may be later).
    let mut boundary = Instant::now();
    loop {
        while let Ok(seq) = arrivals.try_recv() {
            batch.waiting.push_back(seq);
        }
        if batch.is_idle() {
            batch.show(&gauges);
            let seq = tokio::select! {
                seq = arrivals.recv() => seq,
                () = shutdown.cancelled() => return,
            };
            let Some(seq) = seq else { return };
            batch.waiting.push_back(seq);
            // An idle engine keeps its step clock (empty steps of step_base), so a
            // request arriving at an idle engine waits for the next tick just as it
            // waits for the running step on a busy one.
            boundary = next_tick(boundary, params.step_base, Instant::now());
            if !sleep_until(boundary, &shutdown).await {
                return;
            }
            continue;
        }
        let prefill = batch.admit();
        batch.show(&gauges);
        let duration = params
            .step_duration(batch.batch_size())
            .saturating_add(params.prefill_duration(prefill));
        let end = later(boundary, duration);
        if !sleep_until(end, &shutdown).await {
            return;
        }
        boundary = end;
        batch.emit();
        batch.show(&gauges);
    }
}

/// The first tick of the grid `from + k x period` (k >= 0) not before `now`.
fn next_tick(from: Instant, period: Duration, now: Instant) -> Instant {
    if now <= from {
        return from;
    }
    let period_ns = period.as_nanos();
    if period_ns == 0 {
        return now;
    }
    let ticks = (now - from).as_nanos().div_ceil(period_ns);
    let offset = period_ns.saturating_mul(ticks);
    later(
        from,
        Duration::from_nanos(u64::try_from(offset).unwrap_or(u64::MAX)),
    )
}

/// `t + d`, or far in the future instead of the panic on overflow.
fn later(t: Instant, d: Duration) -> Instant {
    const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);
    t.checked_add(d)
        .or_else(|| t.checked_add(YEAR))
        .unwrap_or(t)
}

/// Sleeps until `deadline`; false when shut down first.
async fn sleep_until(deadline: Instant, shutdown: &CancellationToken) -> bool {
    tokio::select! {
        () = tokio::time::sleep_until(deadline) => true,
        () = shutdown.cancelled() => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimConfig;

    fn params(kv: Option<u64>) -> SimParams {
        let mut p = SimConfig {
            profile: "tiny".into(),
            ..SimConfig::default()
        }
        .resolve()
        .unwrap();
        p.max_batch = 3;
        p.kv_cache_tokens = kv;
        p
    }

    fn seq(prompt: u64, max: u32) -> (Seq, mpsc::UnboundedReceiver<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let seq = Seq {
            prompt_tokens: prompt,
            prefill_tokens: prompt,
            max_tokens: max,
            tokens: tx,
        };
        (seq, rx)
    }

    #[test]
    fn admits_up_to_max_batch_then_queues() {
        let mut b = Batch::new(&params(None));
        let mut rxs = Vec::new();
        for _ in 0..5 {
            let (s, rx) = seq(10, 2);
            b.waiting.push_back(s);
            rxs.push(rx);
        }
        assert_eq!(b.admit(), 30);
        assert_eq!((b.running.len(), b.waiting.len()), (3, 2));
        b.emit();
        b.emit();
        assert!(b.running.is_empty());
        assert_eq!(b.admit(), 20);
        assert_eq!(rxs[0].len(), 2);
    }

    #[test]
    fn memory_caps_admission_and_is_freed() {
        let mut b = Batch::new(&params(Some(100)));
        let mut rxs = Vec::new();
        for _ in 0..3 {
            let (s, rx) = seq(30, 10);
            b.waiting.push_back(s);
            rxs.push(rx);
        }
        b.admit();
        assert_eq!((b.running.len(), b.kv_used), (2, 80));
        drop(rxs.remove(0));
        b.emit();
        assert_eq!((b.running.len(), b.kv_used), (1, 40));
        b.admit();
        assert_eq!(b.running.len(), 2);
    }

    #[test]
    fn abandoned_waiting_requests_are_dropped() {
        let mut b = Batch::new(&params(None));
        let (s, rx) = seq(1, 1);
        b.waiting.push_back(s);
        drop(rx);
        assert_eq!(b.admit(), 0);
        assert!(b.is_idle());
    }

    #[test]
    fn ticks_stay_on_the_grid() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(next_tick(t, ms(10), t + ms(1)), t + ms(10));
        assert_eq!(next_tick(t, ms(10), t + ms(25)), t + ms(30));
        assert_eq!(next_tick(t, ms(10), t + ms(30)), t + ms(30));
        assert_eq!(next_tick(t, ms(0), t + ms(7)), t + ms(7));
    }
}
