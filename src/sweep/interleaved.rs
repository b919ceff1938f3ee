//! The interleaved executor of a gateway pair (method step 8): the same
//! workload sent to a stub engine directly and through a gateway.
//!
//! The two sides are measured **interleaved**, in small alternating batches
//! of `concurrency` requests at once, in the order direct, through, through,
//! direct, direct, through... (ABBA): drift of the machine (another process
//! waking up, a CPU frequency change, a sweep of another target) lands on
//! both sides alike, and a linear drift cancels exactly, which two separate
//! runs one after the other would not give.
//!
//! The pair's targets are ordinary targets too (they are swept on their own
//! schedule); a pair is meant for targets that run the stub engine, where a
//! request costs no model time and a gateway's sub-millisecond cost is not
//! buried under seconds of generation. The statistics are `stats::overhead`'s.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio_util::sync::CancellationToken;

use crate::config::{Config, GatewayPair, Target};
use crate::stats::overhead::{no_success, overhead, summarize_side};
use crate::stats::pair_report::PairReport;
use crate::stats::sample::Sample;
use crate::sweep::env::SweepEnv;
use crate::sweep::requests::Requests;

/// Sizes of the batches that make up `requests` requests at `concurrency`:
/// full batches, then the remainder.
pub fn batch_sizes(requests: u64, concurrency: u32) -> Vec<u32> {
    let c = u64::from(concurrency.max(1));
    let mut left = requests;
    let mut sizes = Vec::new();
    while left > 0 {
        let n = left.min(c);
        sizes.push(n as u32);
        left -= n;
    }
    sizes
}

/// Which side goes first in round `round`: ABBA order (direct first in even
/// rounds, through first in odd ones), so that a drift that grows linearly
/// over the run adds the same to both sides.
pub fn direct_first(round: usize) -> bool {
    round % 2 == 0
}

/// Indices into `[direct, through]` in the order of round `round`.
fn order(round: usize) -> [usize; 2] {
    if direct_first(round) {
        [0, 1]
    } else {
        [1, 0]
    }
}

/// The pair's two targets, looked up by name in `config` (None when one is
/// not there, e.g. not in this instance's shard).
pub fn pair_targets<'a>(
    config: &'a Config,
    pair: &GatewayPair,
) -> Option<(&'a Arc<Target>, &'a Arc<Target>)> {
    let find = |name: &str| config.targets.iter().find(|t| t.name == name);
    Some((find(&pair.direct)?, find(&pair.through)?))
}

/// Sends `n` requests of `side` at once and waits for all of them. Request
/// `first + k` uses body `first + k` (round robin), so both sides send the
/// same prompts in the same order.
async fn batch(
    env: &SweepEnv,
    cancel: &CancellationToken,
    side: &Arc<Requests>,
    first: u64,
    n: u32,
    counted: bool,
) -> Vec<Sample> {
    let mut tasks = tokio::task::JoinSet::new();
    for k in 0..u64::from(n) {
        let (env, cancel, side) = (env.clone(), cancel.clone(), side.clone());
        tasks.spawn(async move { side.send(&env, &cancel, first + k, counted, n).await });
    }
    let mut samples = Vec::with_capacity(n as usize);
    while let Some(joined) = tasks.join_next().await {
        if let Ok(Some((s, _))) = joined {
            samples.push(s);
        }
    }
    samples
}

/// Runs the batches of both sides, alternating in ABBA order; warm-up first.
async fn interleave(
    env: &SweepEnv,
    cancel: &CancellationToken,
    sides: [&Arc<Requests>; 2],
    concurrency: u32,
    requests: u64,
    results: &mut [Vec<Sample>; 2],
) {
    // Warm-up opens (at least) as many connections as a batch uses, on both
    // sides and on the gateway's upstream, so that no counted request pays a
    // TCP handshake that its counterpart did not.
    let warmup = u64::from(
        sides[0]
            .target
            .warmup_requests
            .max(sides[1].target.warmup_requests)
            .max(concurrency),
    );
    for (round, n) in batch_sizes(warmup, concurrency).into_iter().enumerate() {
        for which in order(round) {
            if cancel.is_cancelled() {
                return;
            }
            batch(env, cancel, sides[which], 0, n, false).await;
        }
    }
    let mut sent = 0u64;
    for (round, n) in batch_sizes(requests, concurrency).into_iter().enumerate() {
        for which in order(round) {
            if cancel.is_cancelled() {
                return;
            }
            let samples = batch(env, cancel, sides[which], sent, n, true).await;
            results[which].extend(samples);
        }
        sent += u64::from(n);
    }
}

/// Measures `pair` once: `direct` and `through` are the pair's targets,
/// served at `direct_url` and `through_url`. Stops at `time_limit` or when
/// `env.cancel` fires; what was measured until then is reported.
pub async fn measure(
    env: &SweepEnv,
    pair: &GatewayPair,
    direct: (&Arc<Target>, &str),
    through: (&Arc<Target>, &str),
    time_limit: Duration,
) -> PairReport {
    let started = Instant::now();
    let cancel = env.cancel.child_token();
    let sides = [
        Arc::new(Requests::new(direct.0, &pair.workload, direct.1).await),
        Arc::new(Requests::new(through.0, &pair.workload, through.1).await),
    ];
    let mut results: [Vec<Sample>; 2] = [Vec::new(), Vec::new()];
    let timed_out = tokio::time::timeout(
        time_limit,
        interleave(
            env,
            &cancel,
            [&sides[0], &sides[1]],
            pair.concurrency,
            u64::from(pair.requests),
            &mut results,
        ),
    )
    .await
    .is_err();
    cancel.cancel();
    let d = summarize_side(&direct.0.name, &results[0]);
    let t = summarize_side(&through.0.name, &results[1]);
    let error = if timed_out {
        Some(format!(
            "measurement exceeded its time limit of {}",
            humantime::format_duration(time_limit)
        ))
    } else if env.cancel.is_cancelled() {
        Some("measurement cancelled".to_string())
    } else {
        no_success(&d).or_else(|| no_success(&t))
    };
    PairReport {
        pair: pair.name.clone(),
        workload: pair.workload.name.clone(),
        concurrency: pair.concurrency,
        success: error.is_none(),
        error,
        latency_overhead_seconds: overhead(&d.latency_seconds, &t.latency_seconds),
        ttft_overhead_seconds: overhead(&d.ttft_seconds, &t.ttft_seconds),
        direct: d,
        through: t,
        duration_seconds: started.elapsed().as_secs_f64(),
        finished_at_unix_seconds: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_cover_the_requests_at_the_concurrency() {
        assert_eq!(batch_sizes(40, 1), vec![1; 40]);
        assert_eq!(batch_sizes(10, 4), vec![4, 4, 2]);
        assert_eq!(batch_sizes(3, 8), vec![3]);
        assert_eq!(batch_sizes(0, 4), Vec::<u32>::new());
        assert_eq!(batch_sizes(2, 0), vec![1, 1], "concurrency 0 acts as 1");
    }

    #[test]
    fn rounds_alternate_abba() {
        let firsts: Vec<[usize; 2]> = (0..4).map(order).collect();
        assert_eq!(firsts, vec![[0, 1], [1, 0], [0, 1], [1, 0]]);
        // A drift growing by 1 per batch: D T T D D T T D gives both sides
        // the same total (0+3+4+7 and 1+2+5+6).
        let mut totals = [0usize; 2];
        let mut t = 0;
        for round in 0..4 {
            for which in order(round) {
                totals[which] += t;
                t += 1;
            }
        }
        assert_eq!(totals[0], totals[1]);
    }
}
