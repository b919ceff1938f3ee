//! Verdicts with a stated confidence on seeded simulated engines (issue 24):
//! one slow request of eight does not break a p95 SLO while a real rise
//! does; over daemon sweeps (driven in-process through the loop's own
//! `Memory`, as the daemon does), a 2%-failure engine keeps its knee of 8, a
//! 15%-failure one is at knee 0, and a capacity drop from 8 to 4 shows
//! within 4 sweeps.

mod support;

use std::sync::Arc;
use std::time::Duration;

use llmprobe::config::Target;
use llmprobe::probe::tls::Clients;
use llmprobe::schedule::endpoint::{self, Reachable};
use llmprobe::schedule::memory::Memory;
use llmprobe::stats::decision::{Basis, Decision};
use llmprobe::stats::report::{LevelRole, Limit, SweepReport};
use llmprobe::stats::verdict;
use llmprobe::sweep::{NoObserver, SweepEnv};
use support::config::{load, Yaml};
use support::sweep::sweep_one;
use tokio_util::sync::CancellationToken;

/// One level of 8 requests (then 8 more at a time while undecided) on the
/// tiny engine with latency outliers held 600 ms, under a 500 ms p95 SLO.
fn outlier_config(simulator: &str) -> String {
    Yaml {
        warmup_requests: 0,
        levels: "[1]",
        requests_per_level: "1x",
        min_requests_per_level: 8,
        slo: Some("{ p95_latency: 500ms }"),
        more_defaults: "  max_tokens_field: max_completion_tokens",
        rest: &format!("targets:\n  - name: sim\n    simulator: {simulator}"),
        ..Yaml::default()
    }
    .render()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_slow_request_of_eight_does_not_break_the_p95_but_a_rise_does() {
    // Seed 139 at 5%: of the arrivals, the pool's request (0) is fast, the
    // third counted one (3) is held, none of the next 32 is.
    let one = sweep_one(&outlier_config(
        "{ profile: tiny, slow_ratio: 0.05, slow_delay: 600ms, seed: 139 }",
    ))
    .await;
    let l = &one.workloads[0].levels[0];
    let v = l.verdict.as_ref().expect("a verdict");
    assert_eq!(v.counts.slow, 1, "{v:?}");
    // 1 of 8 and 1 of 16 are over 5% but no evidence; 1 of 24 is within it.
    assert_eq!((v.decision, v.requests), (Decision::Pass, 24), "{v:?}");
    assert!(l.within_slo);
    assert_eq!(one.workloads[0].capacity.knee_concurrency, 1);

    let all = sweep_one(&outlier_config(
        "{ profile: tiny, slow_ratio: 1, slow_delay: 600ms }",
    ))
    .await;
    let l = &all.workloads[0].levels[0];
    let v = l.verdict.as_ref().expect("a verdict");
    assert_eq!(
        (v.decision, v.decided_by),
        (Decision::Break, Some(Basis::P95Latency))
    );
    // Certain after 3 slow of 8 (x(6) of 8 bounds the p95 from below).
    assert_eq!(l.requests, 3, "stopped early: {l:?}");
    assert_eq!(all.workloads[0].capacity.knee_concurrency, 0);
}

/// The tiny engine (sheds above `capacity` in flight), with short steps,
/// failing `fail_ratio` of requests at random from `seed`, on the default
/// levels, request counts and SLO.
fn daemon_config(capacity: u32, fail_ratio: f64, seed: u64) -> String {
    config_with(capacity, fail_ratio, seed, "3x", 8)
}

/// [`daemon_config`] with `per_level` requests at a level, at least `least`.
fn config_with(capacity: u32, fail_ratio: f64, seed: u64, per_level: &str, least: u32) -> String {
    Yaml {
        warmup_requests: 2,
        levels: "[1, 2, 4, 8, 16]",
        requests_per_level: per_level,
        min_requests_per_level: least,
        slo: Some("{ p95_latency: 5s, max_shed_ratio: 0.05, max_error_ratio: 0.05 }"),
        rest: &format!(
            "targets:\n  - name: sim\n    simulator: {{ profile: tiny, step_base: 4ms, \
             step_per_sequence: 500us, max_in_flight: {capacity}, fail_ratio: {fail_ratio}, seed: {seed} }}"
        ),
        ..Yaml::default()
    }
    .render()
}

/// A target's loop, driven in-process: the daemon's memory between sweeps,
/// no wait between them.
struct Loop {
    env: SweepEnv,
    memory: Memory,
}

impl Loop {
    fn new(target: &Target) -> Self {
        Loop {
            env: SweepEnv::new(
                Clients::new(Duration::from_secs(5)).unwrap(),
                64,
                CancellationToken::new(),
                Arc::new(NoObserver),
            ),
            memory: Memory::new(target),
        }
    }

    async fn sweep(&mut self, target: &Arc<Target>, at: &Reachable) -> SweepReport {
        let r = self
            .memory
            .sweep(&self.env, target, &at.base_url, Duration::from_secs(60))
            .await;
        assert!(r.success, "{:?}", r.error);
        r
    }
}

async fn engine(yaml: &str) -> (Arc<Target>, Reachable) {
    let target = load(yaml).targets[0].clone();
    let at = endpoint::reach(&target).await.unwrap();
    (target, at)
}

/// Per level with a request that did not succeed, its outcomes other than
/// `ok`: whether the server or the client made the failures.
fn failed_outcomes(r: &SweepReport) -> Vec<(u32, Vec<(&'static str, u64)>)> {
    r.workloads[0]
        .levels
        .iter()
        .map(|l| {
            let failed = l.outcomes.iter().filter(|(o, n)| **n > 0 && **o != "ok");
            (
                l.concurrency,
                failed.map(|(o, n)| (*o, *n)).collect::<Vec<_>>(),
            )
        })
        .filter(|(_, f)| !f.is_empty())
        .collect()
}

fn knee(r: &SweepReport) -> u32 {
    r.workloads[0].capacity.knee_concurrency
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_percent_failures_keep_the_knee_over_thirty_daemon_sweeps() {
    let (target, at) = engine(&daemon_config(8, 0.02, 11)).await;
    let mut l = Loop::new(&target);
    let mut knees = Vec::new();
    let mut why = Vec::new();
    let mut pooled = 0;
    let mut client_bound = 0;
    for _ in 0..30 {
        let r = l.sweep(&target, &at).await;
        // On a loaded machine the client itself may fall behind: such a
        // level is not measured (client), never the server's break, and the
        // knee says so; only a lower knee that does not is wrong.
        if r.workloads[0].capacity.not_measured_client.is_some() {
            client_bound += 1;
            continue;
        }
        knees.push(knee(&r));
        if knee(&r) != 8 {
            why.push(format!(
                "{:?}, outcomes {:?}",
                r.workloads[0].capacity.stopped_because,
                failed_outcomes(&r)
            ));
        }

        pooled = pooled.max(
            r.workloads[0]
                .levels
                .iter()
                .filter_map(|l| l.verdict.as_ref())
                .map(|v| v.pooled_sweeps)
                .max()
                .unwrap_or(0),
        );
    }
    assert!(knees.iter().all(|k| *k == 8), "knees {knees:?}: {why:?}");
    assert!(
        knees.len() >= 15,
        "only {} of 30 sweeps measured: the client lagged in {client_bound}",
        knees.len()
    );
    assert_eq!(pooled, 8, "the verdicts pool the last 8 sweeps");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifteen_percent_failures_are_knee_zero() {
    let (target, at) = engine(&daemon_config(8, 0.15, 5)).await;
    let mut l = Loop::new(&target);
    let mut knees = Vec::new();
    for _ in 0..12 {
        knees.push(knee(&l.sweep(&target, &at).await));
    }
    // The first sweep judges level 1 on its own requests; from the second
    // on, the pool holds enough to break it every time.
    assert!(knees[1..].iter().all(|k| *k == 0), "knees {knees:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capacity_drop_from_eight_to_four_shows_within_four_sweeps() {
    let (eight, at_eight) = engine(&daemon_config(8, 0.02, 3)).await;
    let (four, at_four) = engine(&daemon_config(4, 0.02, 3)).await;
    let mut l = Loop::new(&eight);
    for _ in 0..6 {
        assert_eq!(knee(&l.sweep(&eight, &at_eight).await), 8);
    }
    // The same server (same identity), now shedding above 4 in flight.
    let mut after = Vec::new();
    for _ in 0..4 {
        after.push(knee(&l.sweep(&four, &at_four).await));
    }
    assert_eq!(after.last(), Some(&4), "knees after the drop {after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rise_from_two_to_ten_percent_errors_reads_knee_zero_within_four_sweeps() {
    // Eight sweeps pool 2% at every level; then the same server (same
    // identity) fails 10%. Each level's pool still passes it for sweeps
    // (the code before still read 8 after 4 on seed 5); the workload's
    // error ratio, split at the change, does not. Levels of 6 times their
    // concurrency (a warm start's 1, 8 and 16, which stops early: about
    // 70 requests a sweep) show it in the first or second sweep here;
    // with 3 times (about 40), seed 5 took 3 to 5 (BENCHMARKS.md).
    for seed in [3, 5] {
        let before = config_with(8, 0.02, seed, "6x", 16);
        let now = config_with(8, 0.10, seed, "6x", 16);
        let after = after_a_change(&before, &now, 4, |r| {
            (knee(r), limit(r)) == (0, Some(Limit::ErrorsAtEveryLoad))
        })
        .await
        .iter()
        .map(|r| (knee(r), limit(r)))
        .collect::<Vec<_>>();
        assert_eq!(
            after.last(),
            Some(&(0, Some(Limit::ErrorsAtEveryLoad))),
            "seed {seed}: knees after the rise {after:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_level_whose_errors_this_sweep_puts_in_doubt_sends_more_requests() {
    // A server failing 4%: a level above the lowest often draws 2 errors
    // of 24 in a sweep while its pool passes. Its errors are in doubt (a
    // rise of the error ratio shows first so), and it sends its planned
    // count again until its own error ratio is within the limit or it
    // reaches `verdict_ceiling` (4) times it, twice that for a pass where
    // one error is within the limit (24 requests, level 8): none ends a
    // sweep unbroken with its own errors over the limit short of that.
    // The code before stopped every level at 4 times. What a sweep draws
    // depends on timing; the rule holds whatever it draws.
    let (target, at) = engine(&daemon_config(8, 0.04, 5)).await;
    let mut l = Loop::new(&target);
    let mut over_and_passed = Vec::new();
    let mut near_after_one_pass = Vec::new();
    for sweep in 0..12 {
        let r = l.sweep(&target, &at).await;
        for level in &r.workloads[0].levels {
            let Some(v) = &level.verdict else { continue };
            // The rule judges unbroken configured levels above the lowest.
            if level.concurrency == 1
                || level.role != LevelRole::Configured
                || v.decision == Decision::Break
            {
                continue;
            }
            let n = (3 * u64::from(level.concurrency)).max(8);
            let fine = verdict::fine(n, &target.slo);
            let ceiling = if fine { 8 } else { 4 } * n;
            // One error of a fine first pass (1 of 24) is over half the
            // limit: the level may not stop there.
            if fine && level.planned_requests == n && v.counts.failed > 0 {
                near_after_one_pass.push((sweep, level.concurrency, v.counts.failed));
            }
            if v.counts.failed as f64 > v.counts.ended as f64 * target.slo.max_error_ratio {
                over_and_passed.push((
                    sweep,
                    level.concurrency,
                    v.counts.failed,
                    level.planned_requests,
                    ceiling,
                ));
            }
        }
    }
    let short: Vec<_> = over_and_passed
        .iter()
        .filter(|(.., planned, ceiling)| planned < ceiling)
        .collect();
    assert!(
        short.is_empty(),
        "levels in doubt not sent more (sweep, level, errors, planned, ceiling): {short:?}"
    );
    assert!(
        near_after_one_pass.is_empty(),
        "fine levels stopped after one pass with an error (sweep, level, errors): {near_after_one_pass:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fall_from_fifteen_to_two_percent_errors_reads_the_knee_within_three_sweeps() {
    // Eight sweeps at 15% (knee 0, every level's pool full of errors);
    // then the same server fails 2%. A sweep at knee 0 measured level 1
    // alone and its pool held the break: the knee came back after 3 to 9
    // sweeps. Now a break that rests on the pool alone does not end the
    // climb, the workload's errors show the change, and the loop keeps
    // only the sweeps since it at every level.
    for seed in [3, 5] {
        let before = daemon_config(8, 0.15, seed);
        let now = daemon_config(8, 0.02, seed);
        let after = after_a_change(&before, &now, 3, |r| knee(r) == 8)
            .await
            .iter()
            .map(knee)
            .collect::<Vec<_>>();
        assert_eq!(
            after.last(),
            Some(&8),
            "seed {seed}: knees after the fall {after:?}"
        );
    }
}

/// A loop's sweeps after a change of its server: 8 sweeps of an engine
/// on `before` fill the pool, then the same loop sweeps an engine on `now`
/// (same identity) until `shown` or `most` sweeps; the sweeps after it.
async fn after_a_change(
    before: &str,
    now: &str,
    most: usize,
    shown: impl Fn(&SweepReport) -> bool,
) -> Vec<SweepReport> {
    let (old, at_old) = engine(before).await;
    let (new, at_new) = engine(now).await;
    let mut l = Loop::new(&old);
    for _ in 0..8 {
        l.sweep(&old, &at_old).await;
    }
    let mut after = Vec::new();
    for _ in 0..most {
        let r = l.sweep(&new, &at_new).await;
        let done = shown(&r);
        after.push(r);
        if done {
            break;
        }
    }
    after
}

/// Knee and limit of each of `sweeps` sweeps of one loop on the engine
/// of `yaml`.
async fn knees_and_limits(yaml: &str, sweeps: usize) -> Vec<(u32, Option<Limit>)> {
    let (target, at) = engine(yaml).await;
    let mut l = Loop::new(&target);
    let mut seen = Vec::new();
    for _ in 0..sweeps {
        let r = l.sweep(&target, &at).await;
        seen.push((knee(&r), limit(&r)));
    }
    seen
}

fn limit(r: &SweepReport) -> Option<Limit> {
    r.workloads[0].capacity.limit
}

/// Issue 28: a first sweep (nothing pooled) at 2% errors reads the true
/// knee: a level left undecided (2 or 3 errors of 32) is stepped over,
/// neither lowering the knee to the level below it nor to 0, and the knee
/// says so. Seeds 15, 19, 29, 33 and 34 leave level 1, 2 or 4 undecided
/// (the old rule counted it as a break: knee 0 or 1); 1 and 2 do not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecided_level_with_nothing_pooled_does_not_lower_the_knee() {
    let mut undecided = Vec::new();
    let mut knees = Vec::new();
    for seed in [1, 2, 15, 19, 29, 33, 34] {
        let (target, at) = engine(&daemon_config(8, 0.02, seed)).await;
        let r = Loop::new(&target).sweep(&target, &at).await;
        knees.push(knee(&r));
        assert_ne!(limit(&r), Some(Limit::ErrorsAtEveryLoad), "seed {seed}");
        let c = &r.workloads[0].capacity;
        let skipped = r.workloads[0].levels.iter().any(|l| {
            l.concurrency <= 8
                && l.verdict
                    .as_ref()
                    .is_some_and(|v| v.counted_as == Decision::Undecided)
        });
        assert_eq!(c.knee_undecided, skipped, "seed {seed}: {c:?}");
        if skipped {
            undecided.push(seed);
        }
    }
    assert_eq!(knees, [8; 7], "knees");
    // The rule was exercised where the old one read a lower knee.
    assert!(
        undecided.len() >= 3,
        "undecided first sweeps: {undecided:?}"
    );
}

/// Issue 28: failures at every load are health, not capacity: a loop on a
/// 10%-error engine reads knee 0 with `errors_at_every_load` once its pool
/// holds the evidence (here from its fifth sweep), never `errors` at 0.
/// From then on a sweep whose pooled errors fall short of the evidence by
/// chance may read another knee (1 with `errors` once in 8 sweeps, in a CI
/// run on a loaded machine, where timing changes which requests fail): the
/// issue's targets are 95% of sweeps and no wrong run longer than 2, so one
/// such sweep of the last four is allowed and two are not (the old rule: 1
/// with `errors` for 20 sweeps).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_percent_failures_read_errors_at_every_load() {
    for seed in [2, 4] {
        let seen = knees_and_limits(&daemon_config(8, 0.10, seed), 8).await;
        for (k, why) in &seen {
            assert!(
                *k > 0 || *why == Some(Limit::ErrorsAtEveryLoad),
                "seed {seed}: {seen:?}"
            );
        }
        let off = seen[4..]
            .iter()
            .filter(|s| **s != (0, Some(Limit::ErrorsAtEveryLoad)))
            .count();
        assert!(off <= 1, "seed {seed}: {seen:?}");
    }
}

/// Issue 28: latency outliers at every load are health, not capacity: an
/// engine that holds 10% of its requests 600 ms past a 500 ms p95 limit,
/// at any load, reads knee 0 with `latency_at_every_load` once the loop's
/// pool holds the evidence, and never a knee with `compute` or `latency`
/// (the old rule: knee 1 to 4 with `compute`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_percent_latency_outliers_read_latency_at_every_load() {
    // Seed 4 draws 22 outliers in its first 200 requests.
    let seed = 4;
    let seen = knees_and_limits(&outliers_config(0.1, seed), 6).await;
    for (k, why) in &seen {
        assert!(
            *k > 0 || *why == Some(Limit::LatencyAtEveryLoad),
            "seed {seed}: {seen:?}"
        );
        assert!(
            !matches!(why, Some(Limit::Compute | Limit::Latency)),
            "seed {seed}: {seen:?}"
        );
    }
    assert!(
        seen[2..]
            .iter()
            .all(|s| *s == (0, Some(Limit::LatencyAtEveryLoad))),
        "seed {seed}: {seen:?}"
    );
}

/// The tiny engine of [`daemon_config`] (no errors), holding `ratio` of
/// its requests 600 ms past a 500 ms p95 limit at any load, from `seed`.
fn outliers_config(ratio: f64, seed: u64) -> String {
    outliers_with(ratio, seed, "3x", 8)
}

/// [`outliers_config`] with `per_level` requests at a level, at least `least`.
fn outliers_with(ratio: f64, seed: u64, per_level: &str, least: u32) -> String {
    Yaml {
        warmup_requests: 2,
        levels: "[1, 2, 4, 8, 16]",
        requests_per_level: per_level,
        min_requests_per_level: least,
        slo: Some("{ p95_latency: 500ms, max_shed_ratio: 0.05, max_error_ratio: 0.05 }"),
        rest: &format!(
            "targets:\n  - name: sim\n    simulator: {{ profile: tiny, step_base: 4ms, \
             step_per_sequence: 500us, max_in_flight: 8, slow_ratio: {ratio}, \
             slow_delay: 600ms, seed: {seed} }}"
        ),
        ..Yaml::default()
    }
    .render()
}

/// Issue 28: a rise of latency outliers at every load shows as fast as a
/// rise of errors: eight sweeps without outliers pool every level, then
/// the same server holds 20% of its requests 600 ms past the 500 ms p95.
/// The workload's share of slow requests, split at the change, reads knee
/// 0 with `latency_at_every_load` within two sweeps; the 8-sweep pool
/// alone still held 2 sweeps at 20% beside 6 at none, 5%, within the
/// limit (and the level that saw the change read as latency growing with
/// load against its neighbours' pools: knee 4 then 1, `compute`, on seed
/// 5). At 10% on the default 3 times, `noisy_knee` showed it within two
/// sweeps in 3 of 6 loops and within three in 6 of 6 (BENCHMARKS.md,
/// "Issue 28: a change of latency outliers").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rise_of_latency_outliers_reads_knee_zero_within_two_sweeps() {
    for seed in [3, 5] {
        let before = outliers_with(0.0, seed, "6x", 16);
        let now = outliers_with(0.2, seed, "6x", 16);
        let at_zero = |r: &SweepReport| (knee(r), limit(r)) == (0, Some(Limit::LatencyAtEveryLoad));
        let after = after_a_change(&before, &now, 2, at_zero).await;
        let seen: Vec<_> = after.iter().map(|r| (knee(r), limit(r))).collect();
        assert!(after.last().is_some_and(at_zero), "seed {seed}: {seen:?}");
    }
}

/// Issue 28: a fall of latency outliers shows within two sweeps: after
/// eight sweeps at 10% (knee 0, `latency_at_every_load`), the same server
/// without outliers reads its knee of 8 by the second sweep, and the first
/// sweep's knee, when not 8, says it is undecided (its levels' pools still
/// hold the outliers their own requests no longer show), never a decided
/// knee that pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fall_of_latency_outliers_reads_the_knee_within_two_sweeps() {
    for seed in [5, 7] {
        let before = outliers_config(0.1, seed);
        let now = outliers_config(0.0, seed);
        let after = after_a_change(&before, &now, 2, |r| knee(r) == 8).await;
        let seen: Vec<_> = after.iter().map(|r| (knee(r), limit(r))).collect();
        assert_eq!(after.last().map(knee), Some(8), "seed {seed}: {seen:?}");
        for r in &after[..after.len() - 1] {
            assert!(
                r.workloads[0].capacity.knee_undecided,
                "seed {seed}: {seen:?}"
            );
        }
    }
}
