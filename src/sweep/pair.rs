//! Gateway overhead (method step 8): the same workload sent to a stub engine
//! directly and through a gateway; the difference of the two latency (and
//! TTFT) distributions is the gateway's own cost.
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
//! buried under seconds of generation.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, GatewayPair, Schedule, Target};
use crate::metrics::Metrics;
use crate::schedule::endpoint;

use crate::stats::level;
use crate::stats::report::Percentiles;
use crate::stats::sample::{Outcome, Sample};
use crate::sweep::{NoObserver, Requests, SweepEnv};

/// The `quantity` label of the latency overhead.
pub const LATENCY: &str = "latency";
/// The `quantity` label of the TTFT overhead.
pub const TTFT: &str = "ttft";

/// What one side of a pair measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideSummary {
    /// Target name.
    pub target: String,
    /// Counted requests sent (warm-up excluded).
    pub requests: u64,
    /// Requests per outcome, keyed by the outcome label.
    #[serde(deserialize_with = "crate::stats::report::labels::outcome_map")]
    pub outcomes: BTreeMap<&'static str, u64>,
    /// End-to-end latency of the successful requests, seconds.
    pub latency_seconds: Percentiles,
    /// Time to first token of the successful requests, seconds.
    pub ttft_seconds: Percentiles,
    /// The first failure, when there was one (for the operator, not a label).
    pub first_error: Option<String>,
}

/// Result of one interleaved measurement of a gateway pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairReport {
    /// Pair name (the `pair` label).
    pub pair: String,
    /// Workload sent to both sides.
    pub workload: String,
    /// Requests in flight on a side during one batch.
    pub concurrency: u32,
    /// Whether both sides were measured to the end with at least one success each.
    pub success: bool,
    /// Why the measurement failed, when it did.
    pub error: Option<String>,
    /// The stub engine reached directly.
    pub direct: SideSummary,
    /// The stub engine reached through the gateway.
    pub through: SideSummary,
    /// Through minus direct, per latency percentile; `count` is the smaller
    /// of the two sides' successful requests.
    pub latency_overhead_seconds: Percentiles,
    /// Through minus direct, per TTFT percentile; `count` as above.
    pub ttft_overhead_seconds: Percentiles,
    /// Wall time of the measurement, warm-up included, seconds.
    pub duration_seconds: f64,
    /// Unix time at which it finished, seconds.
    pub finished_at_unix_seconds: f64,
}

/// The difference of quantiles `through - direct`, each percentile on its own
/// (not the quantiles of per-request differences: the two sides' requests are
/// not paired one to one). A percentile missing on either side is missing;
/// `count` is the smaller side's count, the number of samples the weaker of
/// the two estimates rests on.
pub fn overhead(direct: &Percentiles, through: &Percentiles) -> Percentiles {
    let diff = |d: Option<f64>, t: Option<f64>| match (d, t) {
        (Some(d), Some(t)) => Some(t - d),
        _ => None,
    };
    let count = direct.count.min(through.count);
    if count == 0 {
        return Percentiles::default();
    }
    Percentiles {
        count,
        p50: diff(direct.p50, through.p50),
        p95: diff(direct.p95, through.p95),
        p99: diff(direct.p99, through.p99),
    }
}

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

/// Summarises the counted samples of one side.
pub fn summarize_side(target: &str, samples: &[Sample]) -> SideSummary {
    let outcomes = level::count_outcomes(samples);
    let ok = samples.iter().filter(|s| s.outcome == Outcome::Ok);
    let mut latency: Vec<f64> = ok
        .clone()
        .filter_map(|s| s.latency.map(|d| d.as_secs_f64()))
        .collect();
    let mut ttft: Vec<f64> = ok.filter_map(|s| s.ttft.map(|d| d.as_secs_f64())).collect();
    SideSummary {
        target: target.to_string(),
        requests: samples.len() as u64,
        outcomes,
        latency_seconds: level::percentiles(&mut latency),
        ttft_seconds: level::percentiles(&mut ttft),
        first_error: samples
            .iter()
            .find(|s| s.outcome != Outcome::Ok)
            .map(|s| match &s.error {
                Some(e) => format!("{}: {e}", s.outcome.as_str()),
                None => s.outcome.as_str().to_string(),
            }),
    }
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
        tasks.spawn(async move { side.send(&env, &cancel, first + k, counted).await });
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

/// Indices into `[direct, through]` in the order of round `round`.
fn order(round: usize) -> [usize; 2] {
    if direct_first(round) {
        [0, 1]
    } else {
        [1, 0]
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
        Arc::new(Requests::new(direct.0, &pair.workload, direct.1)),
        Arc::new(Requests::new(through.0, &pair.workload, through.1)),
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

/// A side without any successful request leaves nothing to compare.
fn no_success(side: &SideSummary) -> Option<String> {
    (side.latency_seconds.count == 0).then(|| {
        format!(
            "no request to `{}` succeeded{}",
            side.target,
            side.first_error
                .as_deref()
                .map(|e| format!(" (first failure: {e})"))
                .unwrap_or_default()
        )
    })
}

/// Replaces the pair's exported overhead with this report's. A report that
/// was cut short still carries its sample count, so a thin result is visible
/// as such; one with no successful request on a side exports only count 0.
pub fn publish(metrics: &Metrics, report: &PairReport) {
    metrics.publish_gateway_overhead(&report.pair, LATENCY, &report.latency_overhead_seconds);
    metrics.publish_gateway_overhead(&report.pair, TTFT, &report.ttft_overhead_seconds);
}

/// The pair's two targets, looked up by name in `config`.
fn pair_targets<'a>(
    config: &'a Config,
    pair: &GatewayPair,
) -> Option<(&'a Arc<Target>, &'a Arc<Target>)> {
    let find = |name: &str| config.targets.iter().find(|t| t.name == name);
    Some((find(&pair.direct)?, find(&pair.through)?))
}

/// Measures the pairs of `config` once, one after the other, for `llmprobe
/// sweep`. With `only` non-empty, only pairs whose two targets are both in it.
pub async fn measure_once(
    config: &Config,
    only: &[String],
    progress: bool,
) -> anyhow::Result<Vec<PairReport>> {
    let env = SweepEnv::new(
        crate::probe::client::Client::new(crate::CONNECT_TIMEOUT).map_err(anyhow::Error::msg)?,
        config.schedule.max_in_flight_total,
        CancellationToken::new(),
        Arc::new(NoObserver),
    );
    let mut reports = Vec::new();
    for pair in &config.gateway_pairs {
        let selected = |name: &String| only.is_empty() || only.contains(name);
        if !selected(&pair.direct) || !selected(&pair.through) {
            continue;
        }
        let Some((direct, through)) = pair_targets(config, pair) else {
            continue;
        };
        if progress {
            eprint!(
                "\r\x1b[2Kgateway pair {}: {} requests per side...",
                pair.name, pair.requests
            );
        }
        let d = endpoint::reach(direct).await.map_err(anyhow::Error::msg)?;
        let t = endpoint::reach(through).await.map_err(anyhow::Error::msg)?;
        reports.push(
            measure(
                &env,
                pair,
                (direct, &d.base_url),
                (through, &t.base_url),
                config.schedule.sweep_timeout,
            )
            .await,
        );
    }
    if progress {
        eprint!("\r\x1b[2K");
    }
    Ok(reports)
}

// ---------------------------------------------------------------------------
// The daemon's pair loops.
// ---------------------------------------------------------------------------

struct RunningPair {
    pair: GatewayPair,
    direct: Arc<Target>,
    through: Arc<Target>,
    cancel: CancellationToken,
    handle: JoinHandle<()>,
}

/// The daemon's loops, one per gateway pair, owned by the scheduler: started,
/// restarted and stopped on reload like the targets' loops.
#[derive(Default)]
pub struct PairLoops {
    running: BTreeMap<String, RunningPair>,
}

impl PairLoops {
    /// Brings the running pair loops in line with `config`. `restart_all`
    /// when `env` is new (a new global cap): every loop must move to it.
    /// Removed pairs' series are dropped from `metrics`.
    pub fn apply(
        &mut self,
        config: &Config,
        env: &SweepEnv,
        schedule: &Schedule,
        restart_all: bool,
        root: &CancellationToken,
        metrics: &Arc<Metrics>,
    ) {
        let wanted: BTreeMap<&str, (&GatewayPair, &Arc<Target>, &Arc<Target>)> = config
            .gateway_pairs
            .iter()
            .filter_map(|p| pair_targets(config, p).map(|(d, t)| (p.name.as_str(), (p, d, t))))
            .collect();
        let names: Vec<String> = self.running.keys().cloned().collect();
        for name in names {
            let keep = !restart_all
                && wanted.get(name.as_str()).is_some_and(|(p, d, t)| {
                    let r = &self.running[&name];
                    **p == r.pair && ***d == *r.direct && ***t == *r.through
                });
            if !keep {
                let Some(r) = self.running.remove(&name) else {
                    continue;
                };
                r.cancel.cancel();
                tracing::info!(pair = %name, "stopping measurement of gateway pair");
                if !wanted.contains_key(name.as_str()) {
                    // Forgotten once the loop has ended: a loop that had just
                    // finished a measurement could otherwise publish it after
                    // the series were dropped, and it would stay forever.
                    let metrics = metrics.clone();
                    tokio::spawn(async move {
                        let _ = r.handle.await;
                        metrics.forget_pair(&name);
                    });
                }
            }
        }
        let new: Vec<_> = wanted
            .into_values()
            .filter(|(p, _, _)| !self.running.contains_key(&p.name))
            .collect();
        let gap = crate::schedule::stagger_gap(schedule.interval, new.len());
        for (i, (pair, direct, through)) in new.into_iter().enumerate() {
            let cancel = root.child_token();
            let offset = gap * i as u32 + gap.mul_f64(fastrand::f64());
            let handle = tokio::spawn(pair_loop(
                pair.clone(),
                direct.clone(),
                through.clone(),
                SweepEnv {
                    cancel: cancel.clone(),
                    ..env.clone()
                },
                schedule.clone(),
                offset,
                metrics.clone(),
            ));
            self.running.insert(
                pair.name.clone(),
                RunningPair {
                    pair: pair.clone(),
                    direct: direct.clone(),
                    through: through.clone(),
                    cancel,
                    handle,
                },
            );
        }
    }

    /// The loops' tasks, for shutdown to wait on (cancel them first).
    pub fn into_handles(self) -> Vec<JoinHandle<()>> {
        self.running.into_values().map(|r| r.handle).collect()
    }
}

async fn pair_loop(
    pair: GatewayPair,
    direct: Arc<Target>,
    through: Arc<Target>,
    env: SweepEnv,
    schedule: Schedule,
    offset: Duration,
    metrics: Arc<Metrics>,
) {
    let cancel = env.cancel.clone();
    tokio::select! {
        _ = tokio::time::sleep(offset) => {}
        _ = cancel.cancelled() => return,
    }
    let (d, t) = match (
        endpoint::reach(&direct).await,
        endpoint::reach(&through).await,
    ) {
        (Ok(d), Ok(t)) => (d, t),
        (Err(e), _) | (_, Err(e)) => {
            tracing::error!(pair = %pair.name, error = %e, "cannot reach a target of the gateway pair");
            return;
        }
    };
    loop {
        let report = measure(
            &env,
            &pair,
            (&direct, &d.base_url),
            (&through, &t.base_url),
            schedule.sweep_timeout,
        )
        .await;
        if cancel.is_cancelled() {
            break;
        }
        log_report(&report);
        publish(&metrics, &report);
        let wait = crate::schedule::jittered(schedule.interval, schedule.jitter, fastrand::f64());
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = cancel.cancelled() => break,
        }
    }
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.3}", v * 1000.0))
}

/// One line per measurement.
fn log_report(r: &PairReport) {
    if r.success {
        tracing::info!(
            pair = %r.pair,
            latency_overhead_p50_ms = %ms(r.latency_overhead_seconds.p50),
            latency_overhead_p95_ms = %ms(r.latency_overhead_seconds.p95),
            ttft_overhead_p50_ms = %ms(r.ttft_overhead_seconds.p50),
            samples = r.latency_overhead_seconds.count,
            "gateway overhead measured"
        );
    } else {
        tracing::warn!(
            pair = %r.pair,
            error = r.error.as_deref().unwrap_or(""),
            samples = r.latency_overhead_seconds.count,
            "gateway overhead measurement failed"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(count: usize, p50: f64, p95: f64, p99: f64) -> Percentiles {
        Percentiles {
            count,
            p50: Some(p50),
            p95: Some(p95),
            p99: Some(p99),
        }
    }

    fn close(a: Option<f64>, b: f64) {
        let a = a.expect("a value");
        assert!((a - b).abs() < 1e-12, "{a} != {b}");
    }

    #[test]
    fn overhead_is_through_minus_direct_per_percentile() {
        let o = overhead(&p(40, 0.001, 0.002, 0.004), &p(38, 0.0015, 0.0031, 0.0035));
        assert_eq!(o.count, 38, "the smaller side's count");
        close(o.p50, 0.0005);
        close(o.p95, 0.0011);
        // A gateway can lower a tail percentile by chance: the sign is kept.
        close(o.p99, -0.0005);
    }

    #[test]
    fn overhead_without_samples_on_a_side_is_empty() {
        let empty = Percentiles::default();
        assert_eq!(
            overhead(&empty, &p(40, 1.0, 1.0, 1.0)),
            Percentiles::default()
        );
        assert_eq!(
            overhead(&p(40, 1.0, 1.0, 1.0), &empty),
            Percentiles::default()
        );
        let partial = Percentiles {
            count: 3,
            p50: Some(0.5),
            p95: None,
            p99: None,
        };
        let o = overhead(&p(5, 0.25, 1.0, 1.0), &partial);
        assert_eq!(o.count, 3);
        close(o.p50, 0.25);
        assert_eq!((o.p95, o.p99), (None, None));
    }

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

    fn ok(latency_ms: u64, ttft_ms: u64) -> Sample {
        let mut s = Sample::failed(Outcome::Ok, Some(200), "");
        s.error = None;
        s.latency = Some(Duration::from_millis(latency_ms));
        s.ttft = Some(Duration::from_millis(ttft_ms));
        s
    }

    #[test]
    fn side_summary_counts_only_successes_in_percentiles() {
        let samples = vec![
            ok(10, 5),
            ok(30, 15),
            Sample::failed(Outcome::HttpError, Some(502), "HTTP 502: bad gateway"),
            ok(20, 10),
        ];
        let s = summarize_side("gw", &samples);
        assert_eq!(s.requests, 4);
        assert_eq!(s.outcomes["ok"], 3);
        assert_eq!(s.outcomes["http_error"], 1);
        assert_eq!(s.latency_seconds.count, 3);
        close(s.latency_seconds.p50, 0.020);
        close(s.ttft_seconds.p50, 0.010);
        assert_eq!(
            s.first_error.as_deref(),
            Some("http_error: HTTP 502: bad gateway")
        );
        assert_eq!(no_success(&s), None);
        let failed = summarize_side("gw", &samples[2..3]);
        assert_eq!(
            no_success(&failed).as_deref(),
            Some("no request to `gw` succeeded (first failure: http_error: HTTP 502: bad gateway)")
        );
    }
}
