//! The limit that binds at the knee: what broke at the first level above
//! it, from the client's view (shed, rate limited, errors, latency),
//! refined by what the server's own metrics said during that level
//! (queue, KV cache, compute). The rule is docs/measuring.md's.

use crate::config::Slo;
use crate::stats::binomial;
use crate::stats::decision::{Basis, Breach, Counts, Decision};
use crate::stats::report::{Capacity, LevelSummary, Limit};
use crate::stats::sample::Outcome;
use crate::stats::verdict;

/// KV-cache usage at or above which the cache is full.
pub const KV_CACHE_FULL: f64 = 0.9;

/// Significance below which a level's errors are taken to grow with load
/// (Fisher's exact test against the levels below it): a capacity limit
/// that shows in errors fails most requests where few failed, far below
/// it (10 of 48 beside 1 of 72: p 0.0004), while a server failing 10% at
/// every load gives 6 of 36 beside 2 of 72 (p 0.016) by chance often
/// enough to keep its knee up for sweeps.
pub const GROWTH_ALPHA: f64 = 0.001;

/// [`GROWTH_ALPHA`] for a level that stopped early on latency: an early
/// stop ends a level where its slow requests cluster, on too few for the
/// growth test, so its share is weighed at a looser significance. A KV
/// cache of two sequences stopped level 8 after 6 slow of 14, beside 0 of
/// 8 at level 1 (p 0.04): growth, the limit `kv_cache`. And left out of the
/// pool altogether, as it was, a level 2 that stopped on 4 slow of 24
/// beside level 1's 10% read knee 1 `compute` on a server holding 10% of
/// its requests at any load, right after knee 0 `latency_at_every_load`.
pub const EARLY_STOP_GROWTH_ALPHA: f64 = 0.1;

/// Mean requests waiting in the engine above which requests queued there
/// (below it, a request only waits for the step it joins).
pub const QUEUED: f64 = 0.5;

/// Sets the limit of a workload's `capacity` from the `levels` it measured
/// and those `carried` for it from an earlier sweep (each sorted by
/// concurrency; a knee that rests on carried levels takes its limit from
/// the first level above it, carried or not), judged at `confidence`. When requests fail
/// whatever the load ([`fails_at_every_load`]) the knee is 0 and the limit
/// [`Limit::ErrorsAtEveryLoad`]: a server that fails 10% of requests at
/// level 1 as at level 16 has a health problem, not a capacity of 1. Also
/// records in `capacity` how many sweeps ago the workload's error ratio or
/// share of slow requests changed, when one did ([`health_changed`]).
pub fn settle(
    capacity: &mut Capacity,
    levels: &[LevelSummary],
    carried: &[LevelSummary],
    earlier: &dyn Fn(u32) -> Vec<(u64, Counts)>,
    slo: &Slo,
    confidence: f64,
) {
    let errors = HealthPool::of(levels, earlier, slo, Share::Errors);
    let slow = HealthPool::of(levels, earlier, slo, Share::Slow);
    capacity.health_changed_sweeps = more_recent_change(&errors, &slow);
    let knee = capacity.knee_concurrency;
    let health = if errors.at_every_load(levels, knee, slo, confidence) {
        Some(Limit::ErrorsAtEveryLoad)
    } else if slow.at_every_load(levels, knee, slo, confidence) {
        Some(Limit::LatencyAtEveryLoad)
    } else {
        None
    };
    if let Some(limit) = health {
        *capacity = Capacity {
            knee_concurrency: 0,
            throughput_tokens_per_second: 0.0,
            requests_per_second: 0.0,
            requests_per_second_samples: 0,
            recommended_max_in_flight: 0,
            saturated_before_knee: false,
            knee_is_lower_bound: false,
            knee_carried_over: false,
            knee_measured_at_unix_seconds: None,
            knee_undecided: false,
            limit: Some(limit),
            ..capacity.clone()
        };
        return;
    }
    let mut all: Vec<&LevelSummary> = levels.iter().chain(carried).collect();
    all.sort_by_key(|l| l.concurrency);
    capacity.limit = Some(first_break(&all, capacity.knee_concurrency, slo));
}

/// Whether requests fail whatever the load: the lowest level broke on
/// errors (so the knee is 0), or the error counts of the levels, pooled
/// with what `earlier` sweeps saw at each (the verdicts' window, unless
/// the level saw a change; from the most likely change of the workload's
/// error ratio on when there is one, [`since_change`]), are over
/// `max_error_ratio` at `confidence`.
/// A level that broke on errors joins the pool only when its error ratio is
/// not higher than that of the levels below it beyond chance (Fisher's
/// exact test at [`GROWTH_ALPHA`]): errors that grow with load are a limit
/// of capacity, and are left out; errors that do not are health. At 10% of
/// errors every level alone passes by luck, stays undecided or breaks, the
/// climb stops at the first that breaks, and only together do they hold
/// the evidence.
pub fn fails_at_every_load(
    levels: &[LevelSummary],
    earlier: &dyn Fn(u32) -> Vec<(u64, Counts)>,
    knee: u32,
    slo: &Slo,
    confidence: f64,
) -> bool {
    HealthPool::of(levels, earlier, slo, Share::Errors).at_every_load(levels, knee, slo, confidence)
}

/// Whether requests run over the p95 latency limit whatever the load, as
/// [`fails_at_every_load`] judges errors, on the share of slow requests
/// (over the p95's share, [`verdict::SLOW_SHARE`]). A level that broke on
/// latency also stays out of the pool when half or more of this sweep's
/// requests there were slow ([`Share::moved_as_a_whole`]), and one that
/// stopped early is tested for growth at [`EARLY_STOP_GROWTH_ALPHA`].
/// Outliers at any load (10% of requests
/// held 600 ms past a 500 ms p95 read knee 1 to 4 `compute`) are health.
pub fn slow_at_every_load(
    levels: &[LevelSummary],
    earlier: &dyn Fn(u32) -> Vec<(u64, Counts)>,
    knee: u32,
    slo: &Slo,
    confidence: f64,
) -> bool {
    HealthPool::of(levels, earlier, slo, Share::Slow).at_every_load(levels, knee, slo, confidence)
}

/// Sweeps, this one included, since the most likely change of the error
/// ratio, or of the share of slow requests, of the workload whose `levels`
/// this sweep measured (pooled with what `earlier` sweeps saw at each, as
/// [`fails_at_every_load`] and [`slow_at_every_load`] pool them); the more
/// recent of the two, None when neither changed beyond chance
/// ([`since_change`]).
pub fn health_changed(
    levels: &[LevelSummary],
    earlier: &dyn Fn(u32) -> Vec<(u64, Counts)>,
    slo: &Slo,
) -> Option<u32> {
    more_recent_change(
        &HealthPool::of(levels, earlier, slo, Share::Errors),
        &HealthPool::of(levels, earlier, slo, Share::Slow),
    )
}

/// The sweeps since the more recent of the two pools' changes.
fn more_recent_change(errors: &HealthPool, slow: &HealthPool) -> Option<u32> {
    [errors.change, slow.change]
        .into_iter()
        .flatten()
        .map(|(split, _)| split as u32)
        .min()
}

/// One share's counts as the health tests judge them: the levels' counts by
/// recency (index `i` holds the sweep `i` sweeps before this one, 0 this
/// one, the last entry all older ones), and the most likely change in it.
struct HealthPool {
    share: Share,
    by_recency: [Counts; RECENT_SWEEPS + 1],
    change: Option<(usize, Counts)>,
}

impl HealthPool {
    /// Pools the levels of this sweep with what `earlier` sweeps saw at each.
    /// A level that broke on the share joins the pool only when its share is
    /// not higher than that of the levels below it beyond chance (Fisher's
    /// exact test at [`Share::growth_alpha`]), and [`Share::moved_as_a_whole`]
    /// does not leave it out. A level that saw a change is weighed against the
    /// levels below it in this sweep alone: their pools still hold the ratio
    /// from before a rise, which made the rise read as errors that grow with
    /// load (knee 1 to 4, limit `errors`).
    fn of(
        levels: &[LevelSummary],
        earlier: &dyn Fn(u32) -> Vec<(u64, Counts)>,
        slo: &Slo,
        share: Share,
    ) -> Self {
        let mut pooled = [Counts::default(); RECENT_SWEEPS + 1];
        for l in levels {
            let (Some(v), Some(c)) = (l.verdict.as_ref(), by_recency(l, earlier)) else {
                continue;
            };
            if share.broke(l, slo) {
                if share.moved_as_a_whole(&v.counts) {
                    continue;
                }
                let (all, so_far) = if v.change_seen {
                    (c[0], pooled[0])
                } else {
                    (total(&c), total(&pooled))
                };
                let ((k, n), (ks, ns)) = (share.of(&all), share.of(&so_far));
                let (_, higher) = binomial::fisher(k, n, ks, ns);
                if higher < share.growth_alpha(l) {
                    continue;
                }
            }
            for (p, c) in pooled.iter_mut().zip(c) {
                *p = *p + c;
            }
        }
        HealthPool {
            share,
            by_recency: pooled,
            change: since_change(&pooled, share),
        }
    }

    /// Whether the share is over its limit whatever the load: the lowest
    /// level broke on it (so the knee is 0), or the pool, from its change on
    /// when there is one, is over the limit at `confidence`.
    fn at_every_load(
        &self,
        levels: &[LevelSummary],
        knee: u32,
        slo: &Slo,
        confidence: f64,
    ) -> bool {
        if knee == 0 && levels.first().is_some_and(|l| self.share.broke(l, slo)) {
            return true;
        }
        self.over(slo, confidence)
    }

    /// Whether the pool, from its change on when there is one, is over the
    /// share's limit at `confidence`.
    fn over(&self, slo: &Slo, confidence: f64) -> bool {
        let judged = self
            .change
            .map_or_else(|| total(&self.by_recency), |(_, recent)| recent);
        let (k, n) = self.share.of(&judged);
        n > 0 && binomial::over_limit(k, n, self.share.limit(slo), 1.0 - confidence)
    }
}

/// Counts a level of `levels` (sorted by concurrency) undecided when its
/// break on errors rests on its pool alone ([`break_rests_on_pool`]) while
/// the workload's errors, pooled over its levels as [`fails_at_every_load`]
/// pools them, are not over `max_error_ratio` at `confidence`: the lowest
/// level so, and one above it when a level above that passed in this sweep
/// (errors that grow with load do not pass above where they broke). Such a
/// break at the lowest level read knee 0 (`errors_at_every_load`) where the
/// levels above passed: a server failing 4% drew 10 errors in 104 requests
/// at level 1 and read 0 for 6 sweeps while levels 2 to 8 measured 1 to 3
/// errors of 24 to 48 (BENCHMARKS.md); at level 2, 3 errors of 32 read
/// knee 1 for 4 sweeps while levels 4 and 8 passed. A break that a sweep's
/// own requests show, or one that every load's errors together show, stands.
pub fn doubt_pooled_breaks(
    levels: &mut [LevelSummary],
    earlier: &dyn Fn(u32) -> Vec<(u64, Counts)>,
    slo: &Slo,
    confidence: f64,
) {
    let doubted: Vec<usize> = (0..levels.len())
        .filter(|&i| {
            let l = &levels[i];
            broke_on_errors(l, slo)
                && break_rests_on_pool(l, slo, confidence)
                && (i == 0 || levels[i + 1..].iter().any(passed))
        })
        .collect();
    if doubted.is_empty()
        || HealthPool::of(levels, earlier, slo, Share::Errors).over(slo, confidence)
    {
        return;
    }
    for i in doubted {
        let l = &mut levels[i];
        if let Some(v) = l.verdict.as_mut() {
            v.counted_as = Decision::Undecided;
        }
        l.within_slo = false;
    }
}

/// Whether `l` passed in this sweep, on its own verdict (not a stand-in).
fn passed(l: &LevelSummary) -> bool {
    l.within_slo
        && l.kept_concurrency
        && l.verdict
            .as_ref()
            .is_some_and(|v| v.decision == Decision::Pass)
}

/// Whether `l` broke on errors or on latency on its pool alone (or,
/// undecided, counts as the break its pool last decided): earlier sweeps
/// pooled, no change seen, and this sweep's own share not over the limit
/// at `confidence` (a break by an early stop is never one: it needs this
/// sweep's own evidence). The climb goes on past such a level
/// (`sweep::climb`), so that the workload's errors, pooled over every
/// level, show a change of the error ratio ([`health_changed`]) that each
/// level's pool hides for as long as it holds the old ratio (a sweep at
/// knee 0 measured level 1 alone, 8 requests, and a fall from 15% to 2%
/// showed after 3 to 9 sweeps), and so that outliers at any load are
/// pooled over more than the two lowest levels ([`slow_at_every_load`]:
/// 10% outliers read knee 1 `compute` on a pooled break at level 2).
pub fn break_rests_on_pool(l: &LevelSummary, slo: &Slo, confidence: f64) -> bool {
    let Some(v) = l.verdict.as_ref() else {
        return false;
    };
    let (k, n, limit) = match v.decided_by {
        Some(Basis::Errors) => (v.counts.failed, v.counts.ended, slo.max_error_ratio),
        Some(Basis::P95Latency) => (v.counts.slow, v.counts.timed, verdict::SLOW_SHARE),
        _ => return false,
    };
    l.kept_concurrency
        && l.stopped_early.is_none()
        && v.counted_as == Decision::Break
        && v.pooled_sweeps > 0
        && !v.change_seen
        && !binomial::over_limit(k, n, limit, 1.0 - confidence)
}

/// Whether `l` broke, decided, on errors.
fn broke_on_errors(l: &LevelSummary, slo: &Slo) -> bool {
    !l.within_slo && !l.undecided() && broke_on(l, slo) == Breach::Errors
}

/// Whether `l` broke, decided, on latency.
fn broke_on_latency(l: &LevelSummary, slo: &Slo) -> bool {
    !l.within_slo && !l.undecided() && broke_on(l, slo) == Breach::Latency
}

/// The sum of `counts`.
fn total(counts: &[Counts]) -> Counts {
    counts.iter().fold(Counts::default(), |a, c| a + *c)
}

/// The counts of level `l` by the sweeps before this one, as a
/// [`HealthPool`] holds them (this one's at 0; the window of `earlier`
/// sweeps left out when the level saw a change); None when it has no
/// verdict.
fn by_recency(
    l: &LevelSummary,
    earlier: &dyn Fn(u32) -> Vec<(u64, Counts)>,
) -> Option<[Counts; RECENT_SWEEPS + 1]> {
    let v = l.verdict.as_ref()?;
    let window = if v.change_seen {
        Vec::new()
    } else {
        earlier(l.concurrency)
    };
    let mut by_age = [Counts::default(); RECENT_SWEEPS + 1];
    by_age[0] = v.counts;
    for (age, c) in window {
        let i = usize::try_from(age).map_or(RECENT_SWEEPS, |a| (a + 1).min(RECENT_SWEEPS));
        by_age[i] = by_age[i] + c;
    }
    Some(by_age)
}

/// Sweeps, this one included, that may make the recent side of a change in
/// the error ratio, or the share of slow requests, of a whole workload
/// ([`since_change`]).
pub const RECENT_SWEEPS: usize = 3;

/// Significance at which a workload's recent error ratio (or share of slow
/// requests) is taken to differ from its older one (Fisher's exact test, each side, each split):
/// a change of 2% to 10% over 80 requests a sweep shows within 2 sweeps
/// (16 of 160 beside 11 of 560: p 2.4e-5), while of 3,000 simulated
/// sweeps of a server steady at 4% (80 requests each, 8 before them) 2
/// split this far by chance and then read over a 5% limit
/// (`benches/sim/errors_change.py`).
pub const ERRORS_CHANGE_ALPHA: f64 = 0.001;

/// A share the health tests judge.
#[derive(Debug, Clone, Copy)]
enum Share {
    /// Failed requests.
    Errors,
    /// Requests over the p95 limit.
    Slow,
}

impl Share {
    /// Its count and denominator in `c`: errors over requests that ended,
    /// slow requests over those timed.
    fn of(self, c: &Counts) -> (u64, u64) {
        match self {
            Share::Errors => (c.failed, c.ended),
            Share::Slow => (c.slow, c.timed),
        }
    }

    /// [`Share::of`] as a change is looked for: errors over answered
    /// requests, since sheds in the denominator would make the ratio move
    /// with how many requests the top level shed.
    fn changes_of(self, c: &Counts) -> (u64, u64) {
        match self {
            Share::Errors => (c.failed, c.ended.saturating_sub(c.shed)),
            Share::Slow => self.of(c),
        }
    }

    /// The SLO's limit on it.
    fn limit(self, slo: &Slo) -> f64 {
        match self {
            Share::Errors => slo.max_error_ratio,
            Share::Slow => verdict::SLOW_SHARE,
        }
    }

    /// Whether `l` broke, decided, on it.
    fn broke(self, l: &LevelSummary, slo: &Slo) -> bool {
        match self {
            Share::Errors => broke_on_errors(l, slo),
            Share::Slow => broke_on_latency(l, slo),
        }
    }

    /// Whether a level that broke on it, with `own` counts in this sweep,
    /// moved with load whatever the growth test says: outliers are a
    /// minority, and a level whose own requests were mostly slow moved as
    /// a whole (a batch cap of 1 stopped level 4 after 4 slow of 4).
    fn moved_as_a_whole(self, own: &Counts) -> bool {
        match self {
            Share::Errors => false,
            Share::Slow => 2 * own.slow >= own.timed,
        }
    }

    /// The significance under which level `l`'s share is taken to grow
    /// with load: [`GROWTH_ALPHA`], or [`EARLY_STOP_GROWTH_ALPHA`] for a
    /// level that stopped early on slow requests.
    fn growth_alpha(self, l: &LevelSummary) -> f64 {
        match self {
            Share::Slow if l.stopped_early.is_some() => EARLY_STOP_GROWTH_ALPHA,
            _ => GROWTH_ALPHA,
        }
    }
}

/// The sweeps since the most likely change of `share`, and their counts,
/// when there is one: `by_recency[i]` holds
/// the counts of the sweep `i` sweeps before this one (0: this one; the
/// last entry, all older ones). Of the splits
/// into this sweep and up to [`RECENT_SWEEPS`] - 1 before it, against the
/// rest, the one whose Fisher test gives the lowest p-value, when that is
/// under [`ERRORS_CHANGE_ALPHA`]. A pool of 8 sweeps otherwise holds the old
/// ratio for sweeps after the server changed, both ways.
fn since_change(by_recency: &[Counts], share: Share) -> Option<(usize, Counts)> {
    let mut best: Option<(f64, (usize, Counts))> = None;
    for split in 1..by_recency.len() {
        let (recent, older) = (total(&by_recency[..split]), total(&by_recency[split..]));
        let ((kr, nr), (ko, no)) = (share.changes_of(&recent), share.changes_of(&older));
        let (lower, higher) = binomial::fisher(kr, nr, ko, no);
        let p = lower.min(higher);
        if p < ERRORS_CHANGE_ALPHA && best.map_or(true, |(b, _)| p < b) {
            best = Some((p, (split, recent)));
        }
    }
    best.map(|(_, recent)| recent)
}

/// The limit of a workload whose knee is `knee`, from its `levels` sorted
/// by concurrency: the first level above the knee that broke the SLO says
/// it (an undecided level broke nothing).
pub fn of(levels: &[LevelSummary], knee: u32, slo: &Slo) -> Limit {
    first_break(&levels.iter().collect::<Vec<_>>(), knee, slo)
}

/// [`of`], over levels gathered from several lists.
fn first_break(levels: &[&LevelSummary], knee: u32, slo: &Slo) -> Limit {
    let Some(broken) = levels
        .iter()
        .filter(|l| l.concurrency > knee)
        .find(|l| !l.within_slo && !l.undecided())
    else {
        return Limit::NotReached;
    };
    at(broken, slo)
}

/// Which share broke a level, from the client's view.
fn broke_on(l: &LevelSummary, slo: &Slo) -> Breach {
    // The verdict's test says what broke: an observed ratio over its limit
    // without evidence (1 error of 8 beside a latency break) did not.
    if let Some(by) = l.verdict.as_ref().and_then(|v| v.decided_by) {
        return match by {
            Basis::Shed => Breach::Shed,
            Basis::Errors | Basis::NoSuccess => Breach::Errors,
            Basis::P95Latency => Breach::Latency,
        };
    }
    let early = l.stopped_early.map(|e| e.breach);
    let none_succeeded = l.stopped_early.is_none() && l.count(Outcome::Ok) == 0;
    if l.error_ratio > slo.max_error_ratio || early == Some(Breach::Errors) || none_succeeded {
        Breach::Errors
    } else if l.shed_ratio > slo.max_shed_ratio || early == Some(Breach::Shed) {
        Breach::Shed
    } else {
        Breach::Latency
    }
}

/// What broke at one level outside the SLO.
pub fn at(l: &LevelSummary, slo: &Slo) -> Limit {
    let broke = broke_on(l, slo);
    if broke == Breach::Errors {
        return Limit::Errors;
    }
    let server = l.server.as_ref().filter(|s| s.readings > 0);
    let kv_full = server.is_some_and(|s| {
        s.kv_cache_usage_max.is_some_and(|u| u >= KV_CACHE_FULL)
            || s.preemptions.is_some_and(|p| p > 0.0)
    });
    if broke == Breach::Shed {
        let rate_limited = l.count(Outcome::RateLimited);
        return if rate_limited * 2 > l.shed() {
            Limit::RateLimited
        } else if kv_full {
            Limit::KvCache
        } else {
            Limit::Shed
        };
    }
    if kv_full {
        return Limit::KvCache;
    }
    let Some(s) = server.filter(|s| s.running.is_some() || s.waiting.is_some()) else {
        return Limit::Latency;
    };
    let queued = s.waiting.is_some_and(|w| w.mean >= QUEUED);
    // The engine ran fewer than the level kept in flight (half a request
    // of slack: a request between two of its steps is in neither count).
    let capped = s
        .running
        .map_or(true, |r| r.max + 0.5 < f64::from(l.concurrency));
    if queued && capped {
        Limit::Queue
    } else {
        Limit::Compute
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::stats::decision::{Decision, Verdict};
    use crate::stats::server::{GaugeStat, ServerSignals};

    fn slo() -> Slo {
        Slo {
            p95_latency: Duration::from_secs(1),
            max_shed_ratio: 0.05,
            max_error_ratio: 0.05,
        }
    }

    fn level(c: u32, within: bool, server: Option<ServerSignals>) -> LevelSummary {
        let mut outcomes = BTreeMap::new();
        outcomes.insert(Outcome::Ok.as_str(), 10);
        LevelSummary {
            concurrency: c,
            requests: 10,
            outcomes,
            within_slo: within,
            server,
            ..LevelSummary::default()
        }
    }

    fn signals(running: f64, waiting: f64, kv: Option<f64>) -> ServerSignals {
        ServerSignals {
            readings: 4,
            running: Some(GaugeStat {
                max: running,
                mean: running,
            }),
            waiting: Some(GaugeStat {
                max: waiting,
                mean: waiting,
            }),
            kv_cache_usage_max: kv,
            ..ServerSignals::default()
        }
    }

    /// A level of `ended` requests, `failed` of them failed, judged as
    /// `decision` (counted as such) on the errors test.
    fn failing(c: u32, ended: u64, failed: u64, decision: Decision) -> LevelSummary {
        let mut outcomes = BTreeMap::new();
        outcomes.insert(Outcome::Ok.as_str(), ended - failed);
        outcomes.insert(Outcome::HttpError.as_str(), failed);
        LevelSummary {
            concurrency: c,
            requests: ended,
            outcomes,
            error_ratio: failed as f64 / ended as f64,
            kept_concurrency: true,
            within_slo: decision == Decision::Pass,
            verdict: Some(Verdict {
                decision,
                counted_as: decision,
                decided_by: (decision != Decision::Pass).then_some(Basis::Errors),
                counts: Counts::errors(ended, failed),
                ..Verdict::default()
            }),
            ..LevelSummary::default()
        }
    }

    #[test]
    fn a_break_on_errors_or_latency_rests_on_the_pool_when_the_sweeps_own_are_not_over() {
        let pooled = |failed, sweeps| {
            let mut l = failing(1, 8, failed, Decision::Break);
            l.verdict.as_mut().unwrap().pooled_sweeps = sweeps;
            l
        };
        let slo = slo();
        // 1 of 8 is not over 5% at 95%; 3 of 8 is (p 0.006).
        assert!(break_rests_on_pool(&pooled(1, 7), &slo, 0.95));
        assert!(!break_rests_on_pool(&pooled(3, 7), &slo, 0.95));
        // With nothing pooled, or a change seen, the break is the sweep's own.
        assert!(!break_rests_on_pool(&pooled(1, 0), &slo, 0.95));
        let mut changed = pooled(1, 7);
        changed.verdict.as_mut().unwrap().change_seen = true;
        assert!(!break_rests_on_pool(&changed, &slo, 0.95));
        // Undecided, counted as the break the pool last decided: one too.
        let mut stand_in = pooled(1, 7);
        stand_in.verdict.as_mut().unwrap().decision = Decision::Undecided;
        assert!(break_rests_on_pool(&stand_in, &slo, 0.95));
        stand_in.verdict.as_mut().unwrap().counted_as = Decision::Undecided;
        assert!(!break_rests_on_pool(&stand_in, &slo, 0.95));
        // A pass, or a break on another share, is not one.
        assert!(!break_rests_on_pool(
            &failing(1, 8, 0, Decision::Pass),
            &slo,
            0.95
        ));
        let mut shed = pooled(1, 7);
        shed.verdict.as_mut().unwrap().decided_by = Some(Basis::Shed);
        assert!(!break_rests_on_pool(&shed, &slo, 0.95));
        // A latency break: 1 slow request of 8 rests on the pool, 3 do not.
        let late = |n_slow| {
            let mut l = slow(2, 8, n_slow, Decision::Break);
            l.verdict.as_mut().unwrap().pooled_sweeps = 3;
            l
        };
        assert!(break_rests_on_pool(&late(1), &slo, 0.95));
        assert!(!break_rests_on_pool(&late(3), &slo, 0.95));
    }

    fn settled(levels: &[LevelSummary]) -> Capacity {
        let mut c = crate::stats::knee::capacity(levels, 0.9, None);
        settle(&mut c, levels, &[], &|_| Vec::new(), &slo(), 0.95);
        c
    }

    #[test]
    fn errors_at_every_load_read_knee_zero_not_a_capacity() {
        use Decision::{Break, Pass, Undecided};
        // 10% at every level: each alone passes by luck or stays undecided,
        // the one that broke is left out; pooled, 31 of 264 is over 5%.
        let ten = [
            failing(1, 8, 0, Pass),
            failing(2, 32, 3, Undecided),
            failing(4, 32, 5, Break),
            failing(8, 96, 10, Undecided),
            failing(16, 96, 10, Undecided),
            failing(32, 96, 8, Undecided),
        ];
        let c = settled(&ten);
        assert_eq!(c.limit, Some(Limit::ErrorsAtEveryLoad));
        assert_eq!((c.knee_concurrency, c.recommended_max_in_flight), (0, 0));
        assert!(!c.knee_is_lower_bound);
        // Level 1 broke on errors: knee 0, and failing at every load.
        let first = [failing(1, 8, 4, Break), failing(2, 8, 0, Pass)];
        let c = settled(&first);
        assert_eq!(
            (c.knee_concurrency, c.limit),
            (0, Some(Limit::ErrorsAtEveryLoad))
        );
        assert_eq!(Limit::ErrorsAtEveryLoad.as_str(), "errors_at_every_load");
    }

    #[test]
    fn a_change_of_the_error_ratio_is_read_from_the_sweeps_since_it() {
        // Two sweeps at 10% after six at 2%: this one and the last split
        // from the rest.
        let by_recency = [
            Counts::errors(80, 8),
            Counts::errors(80, 8),
            Counts::errors(80, 2),
            Counts::errors(480, 9),
        ];
        assert_eq!(
            since_change(&by_recency, Share::Errors),
            Some((2, Counts::errors(160, 16)))
        );
        // Steady at 4%: no split.
        let steady = [
            Counts::errors(80, 4),
            Counts::errors(80, 3),
            Counts::errors(80, 4),
            Counts::errors(480, 19),
        ];
        assert_eq!(since_change(&steady, Share::Errors), None);
        // Back from 10% to 2%: the recent side is the lower one.
        let back = [
            Counts::errors(80, 1),
            Counts::errors(80, 2),
            Counts::errors(80, 1),
            Counts::errors(480, 50),
        ];
        assert_eq!(
            since_change(&back, Share::Errors),
            Some((3, Counts::errors(240, 4)))
        );
    }

    #[test]
    fn errors_that_rose_at_every_load_read_knee_zero_within_two_sweeps() {
        use Decision::{Pass, Undecided};
        // Levels 1, 8 and 16 of a warm start at 10% now and in the last
        // sweep, after seven sweeps at 2%: each level still passes on its
        // pool, but the workload's errors changed.
        let levels = [
            failing(1, 8, 1, Undecided),
            failing(8, 24, 2, Pass),
            failing(16, 48, 5, Undecided),
        ];
        // Earlier sweeps at each level: 8, 24 and 48 requests, with 0, 0
        // and 2 errors at 2%, and 1, 2 and 4 in the last sweep, at 10%.
        let window = |c: u32| -> Vec<(u64, Counts)> {
            let (n, before, last) = match c {
                1 => (8, 0, 1),
                8 => (24, 0, 2),
                _ => (48, 2, 4),
            };
            let mut w: Vec<(u64, Counts)> = (1..8)
                .rev()
                .map(|age| (age, Counts::errors(n, before)))
                .collect();
            w.push((0, Counts::errors(n, last)));
            w
        };
        assert!(fails_at_every_load(&levels, &window, 8, &slo(), 0.95));
        // The change began a sweep ago: the loop's evidence keeps the two.
        assert_eq!(health_changed(&levels, &window, &slo()), Some(2));
        // Pooled as one, the same counts are within the limit: 29 of 720.
        let all = levels
            .iter()
            .flat_map(|l| {
                window(l.concurrency)
                    .into_iter()
                    .map(|(_, c)| c)
                    .chain(l.verdict.as_ref().map(|v| v.counts))
            })
            .fold(Counts::default(), |a, c| a + c);
        assert_eq!((all.failed, all.ended), (29, 720));
        assert!(!binomial::over_limit(all.failed, all.ended, 0.05, 0.05));
    }

    #[test]
    fn a_rise_first_seen_at_the_top_level_is_health_not_capacity() {
        use Decision::{Break, Pass, Undecided};
        // The first sweep at 10%: level 8 saw the change (its pool dropped)
        // and broke, 7 of 24; below it 3 of 52, whose pools hold 7 sweeps
        // without an error. Against those pools level 8's errors grow with
        // load (p < 0.001); against this sweep's own they do not (p 0.006).
        let mut eight = failing(8, 24, 7, Break);
        eight.verdict.as_mut().unwrap().change_seen = true;
        let levels = [
            failing(1, 8, 0, Pass),
            failing(2, 32, 2, Undecided),
            failing(4, 12, 1, Pass),
            eight,
        ];
        let window = |c: u32| -> Vec<(u64, Counts)> {
            let n = match c {
                1 => 8,
                2 => 32,
                _ => 12,
            };
            (0..7)
                .rev()
                .map(|age| (age, Counts::errors(n, 0)))
                .collect()
        };
        assert_eq!(health_changed(&levels, &window, &slo()), Some(1));
        assert!(fails_at_every_load(&levels, &window, 4, &slo(), 0.95));
    }

    #[test]
    fn errors_only_under_load_or_within_the_slo_are_capacity() {
        use Decision::{Break, Pass, Undecided};
        // Clean until 16, where 40 of 48 fail: a break on errors, a knee of 8.
        let overload = [
            failing(1, 8, 0, Pass),
            failing(2, 8, 0, Pass),
            failing(4, 12, 0, Pass),
            failing(8, 24, 0, Pass),
            failing(16, 48, 40, Break),
        ];
        let c = settled(&overload);
        assert_eq!((c.knee_concurrency, c.limit), (8, Some(Limit::Errors)));
        // 2% at every level, one level undecided (2 of 32): no health problem.
        let two = [
            failing(1, 8, 0, Pass),
            failing(2, 8, 0, Pass),
            failing(4, 12, 0, Pass),
            failing(8, 32, 2, Undecided),
            failing(16, 48, 1, Pass),
        ];
        let c = settled(&two);
        assert_eq!((c.knee_concurrency, c.limit), (16, Some(Limit::NotReached)));
        assert!(c.knee_undecided);
    }

    /// A level of `timed` requests, `slow` of them over the p95 limit,
    /// judged as `decision` on the latency test.
    fn slow(c: u32, timed: u64, slow: u64, decision: Decision) -> LevelSummary {
        let mut l = failing(c, timed, 0, decision);
        let v = l.verdict.as_mut().unwrap();
        v.decided_by = (decision != Decision::Pass).then_some(Basis::P95Latency);
        v.counts.slow = slow;
        l
    }

    #[test]
    fn outliers_at_every_load_read_knee_zero_with_latency_at_every_load() {
        use Decision::{Break, Pass, Undecided};
        // 10% of requests held past the p95 limit at every level: level 2
        // broke (3 of 32 against 0 of 8 below it is chance, p 0.6), and
        // pooled, 14 of 120 is over 5% at 95%.
        let outliers = [
            slow(1, 8, 0, Pass),
            slow(2, 32, 3, Break),
            slow(4, 40, 5, Undecided),
            slow(8, 40, 6, Undecided),
        ];
        let c = settled(&outliers);
        assert_eq!(
            (c.knee_concurrency, c.limit),
            (0, Some(Limit::LatencyAtEveryLoad))
        );
        assert_eq!(c.recommended_max_in_flight, 0);
        assert_eq!(Limit::LatencyAtEveryLoad.as_str(), "latency_at_every_load");
        // Level 1 itself over the limit: knee 0, and over it at every load.
        let c = settled(&[slow(1, 8, 4, Break)]);
        assert_eq!(
            (c.knee_concurrency, c.limit),
            (0, Some(Limit::LatencyAtEveryLoad))
        );
        // Latency that grows with load is capacity: 20 of 32 at level 8
        // beside 1 of 88 below it.
        let queue = [
            slow(1, 8, 0, Pass),
            slow(2, 32, 0, Pass),
            slow(4, 48, 1, Pass),
            slow(8, 32, 20, Break),
        ];
        let c = settled(&queue);
        assert_eq!((c.knee_concurrency, c.limit), (4, Some(Limit::Latency)));
        // A level that stopped early, certain of its break, shows too few
        // requests to test growth: capacity, not outliers...
        let mut stopped = slow(8, 14, 6, Break);
        stopped.stopped_early = Some(crate::stats::report::EarlyStop {
            breach: Breach::Latency,
            saved_requests: 2,
        });
        let c = settled(&[slow(1, 8, 0, Pass), stopped]);
        assert_eq!((c.knee_concurrency, c.limit), (1, Some(Limit::Latency)));
        // An early stop on outliers whose share is not higher than below
        // it beyond chance (4 slow of 24 beside 5 of 56: p 0.26) is pooled
        // with them, 9 of 80 over 5% at 95%; left out, 5 of 56 alone is
        // not, and the knee read 1.
        let mut on_outliers = slow(2, 24, 4, Break);
        on_outliers.stopped_early = Some(crate::stats::report::EarlyStop {
            breach: Breach::Latency,
            saved_requests: 8,
        });
        let c = settled(&[slow(1, 56, 5, Pass), on_outliers]);
        assert_eq!(
            (c.knee_concurrency, c.limit),
            (0, Some(Limit::LatencyAtEveryLoad))
        );
        // ...and so does a level whose requests were mostly slow (5 of 8
        // beside 0 of 8 is p 0.013): it moved as a whole.
        let c = settled(&[slow(1, 8, 0, Pass), slow(2, 8, 5, Break)]);
        assert_eq!((c.knee_concurrency, c.limit), (1, Some(Limit::Latency)));
        // 3% outliers pass everywhere but one undecided level: within the SLO.
        let three = [
            slow(1, 8, 0, Pass),
            slow(2, 32, 1, Pass),
            slow(4, 40, 3, Undecided),
            slow(8, 40, 1, Pass),
        ];
        let c = settled(&three);
        assert_eq!(c.knee_concurrency, 8);
        assert_ne!(c.limit, Some(Limit::LatencyAtEveryLoad));
    }

    /// Counts of `timed` requests, `slow` of them over the p95 limit.
    fn slow_of(timed: u64, slow: u64) -> Counts {
        Counts {
            slow,
            ..Counts::errors(timed, 0)
        }
    }

    #[test]
    fn a_change_of_the_share_of_slow_requests_is_read_from_the_sweeps_since_it() {
        use Decision::Pass;
        // Levels 1 and 8 of warm starts: 0 slow of 32 a sweep for seven
        // sweeps, then 10% in the last sweep and this one, where each
        // level still passes on its pool (and pooled as one, 7 of 320 is
        // within the p95's 5%).
        let levels = [slow(1, 8, 1, Pass), slow(8, 24, 3, Pass)];
        let rose = |c: u32| -> Vec<(u64, Counts)> {
            let n = if c == 1 { 8 } else { 24 };
            let mut w: Vec<(u64, Counts)> = (1..8).rev().map(|a| (a, slow_of(n, 0))).collect();
            w.push((0, slow_of(n, if c == 1 { 1 } else { 2 })));
            w
        };
        assert_eq!(health_changed(&levels, &rose, &slo()), Some(2));
        assert!(slow_at_every_load(&levels, &rose, 8, &slo(), 0.95));
        // Back to none after eight sweeps at 12.5%, on a sweep whose levels,
        // undecided on pools their own requests no longer bear out, sent
        // more: the recent side is this sweep's, within the limit, though
        // the pool of eight is not.
        let levels = [slow(1, 32, 0, Pass), slow(8, 96, 0, Pass)];
        let fell = |c: u32| -> Vec<(u64, Counts)> {
            let (n, k) = if c == 1 { (8, 1) } else { (24, 3) };
            (0..8).rev().map(|a| (a, slow_of(n, k))).collect()
        };
        assert_eq!(health_changed(&levels, &fell, &slo()), Some(1));
        assert!(!slow_at_every_load(&levels, &fell, 8, &slo(), 0.95));
        let pooled = HealthPool::of(&levels, &fell, &slo(), Share::Slow);
        let all = total(&pooled.by_recency);
        assert!(binomial::over_limit(
            all.slow,
            all.timed,
            verdict::SLOW_SHARE,
            0.05
        ));
    }

    #[test]
    fn a_knee_resting_on_carried_levels_takes_its_limit_from_them() {
        use Decision::Pass;
        // Levels 1 to 8 measured now; 16 could not have its places, and the
        // earlier sweep's 16, which shed, stands in for it.
        let measured = [
            failing(1, 8, 0, Pass),
            failing(2, 8, 0, Pass),
            failing(4, 12, 0, Pass),
            failing(8, 24, 0, Pass),
        ];
        let mut shed = level(16, false, None);
        shed.shed_ratio = 0.5;
        shed.kept_concurrency = true;
        let carried = [shed];
        let mut c = crate::stats::carry::capacity(&measured, &carried, &[16], 0.9, None);
        settle(&mut c, &measured, &carried, &|_| Vec::new(), &slo(), 0.95);
        assert_eq!((c.knee_concurrency, c.limit), (8, Some(Limit::Shed)));
    }

    #[test]
    fn the_server_says_why_latency_broke() {
        let judged = |s: Option<ServerSignals>| {
            of(&[level(4, true, None), level(8, false, s)], 4, &slo()).as_str()
        };
        assert_eq!(judged(Some(signals(4.0, 4.0, Some(0.3)))), "queue");
        assert_eq!(judged(Some(signals(4.0, 4.0, Some(0.95)))), "kv_cache");
        assert_eq!(judged(Some(signals(8.0, 0.1, None))), "compute");
        // Requests waited, yet the engine ran every one of them.
        assert_eq!(judged(Some(signals(8.0, 2.0, None))), "compute");
        assert_eq!(judged(None), "latency");
        assert_eq!(judged(Some(ServerSignals::default())), "latency");
        let mut preempted = signals(8.0, 0.0, None);
        preempted.preemptions = Some(3.0);
        assert_eq!(judged(Some(preempted)), "kv_cache");
    }

    #[test]
    fn the_client_ratios_come_first() {
        let mut shed = level(8, false, Some(signals(4.0, 4.0, None)));
        shed.outcomes.insert(Outcome::Shed.as_str(), 5);
        shed.shed_ratio = 0.33;
        assert_eq!(at(&shed, &slo()), Limit::Shed);
        shed.server = Some(signals(4.0, 4.0, Some(0.97)));
        assert_eq!(at(&shed, &slo()), Limit::KvCache);
        shed.outcomes.insert(Outcome::RateLimited.as_str(), 6);
        assert_eq!(at(&shed, &slo()), Limit::RateLimited);
        shed.error_ratio = 0.2;
        assert_eq!(at(&shed, &slo()), Limit::Errors);
        let mut none_ok = level(8, false, None);
        none_ok.outcomes.clear();
        assert_eq!(at(&none_ok, &slo()), Limit::Errors);
    }

    #[test]
    fn the_verdicts_test_says_what_broke_not_an_observed_ratio() {
        use crate::stats::decision::Verdict;
        // Latency broke with evidence; 1 error of 8 is over 5% observed
        // but no evidence: the server's queue binds, not errors.
        let mut l = level(8, false, Some(signals(4.0, 4.0, None)));
        l.error_ratio = 0.125;
        l.verdict = Some(Verdict {
            decided_by: Some(Basis::P95Latency),
            ..Verdict::default()
        });
        assert_eq!(at(&l, &slo()), Limit::Queue);
        // Undecided on errors at the ceiling and counted as a break.
        l.verdict = Some(Verdict {
            decided_by: Some(Basis::Errors),
            ..Verdict::default()
        });
        assert_eq!(at(&l, &slo()), Limit::Errors);
        l.verdict = Some(Verdict {
            decided_by: Some(Basis::Shed),
            ..Verdict::default()
        });
        assert_eq!(at(&l, &slo()), Limit::Shed);
        // Without a verdict (an older report), the observed ratios decide.
        l.verdict = None;
        assert_eq!(at(&l, &slo()), Limit::Errors);
    }

    #[test]
    fn nothing_broke_above_the_knee() {
        assert_eq!(of(&[level(4, true, None)], 4, &slo()), Limit::NotReached);
        assert_eq!(of(&[], 0, &slo()), Limit::NotReached);
        assert_eq!(
            of(&[level(1, false, None)], 0, &slo()),
            Limit::Latency,
            "a knee of 0 is still explained"
        );
    }

    /// A workload whose lowest level broke on `floor_failed` errors of 16
    /// on a pool that drew 9 of 88 before, with `above` the errors of 24,
    /// 48 and 48 requests at levels 2, 4 and 8 (decided as `judged`), and
    /// as many in the sweep before: its capacity, concluded as a sweep's.
    fn floor_on_pool(floor_failed: u64, above: [u64; 3], judged: Decision) -> Capacity {
        let mut floor = failing(1, 16, floor_failed, Decision::Break);
        floor.verdict.as_mut().unwrap().pooled_sweeps = 5;
        let mut levels = vec![
            floor,
            failing(2, 24, above[0], judged),
            failing(4, 48, above[1], judged),
            failing(8, 48, above[2], judged),
        ];
        for l in &mut levels[1..] {
            l.verdict.as_mut().unwrap().pooled_sweeps = 1;
        }
        let before = [
            (1, Counts::errors(88, 9)),
            (2, Counts::errors(24, above[0])),
            (4, Counts::errors(48, above[1])),
            (8, Counts::errors(48, above[2])),
        ];
        concluded(levels, &before)
    }

    /// The capacity of `levels`, concluded as a sweep's (pooled breaks
    /// weighed, [`doubt_pooled_breaks`]), with `before` the counts each
    /// level drew in the sweep before.
    fn concluded(mut levels: Vec<LevelSummary>, before: &[(u32, Counts)]) -> Capacity {
        let earlier = |c: u32| -> Vec<(u64, Counts)> {
            before
                .iter()
                .filter(|(l, _)| *l == c)
                .map(|(_, n)| (1, *n))
                .collect()
        };
        let slo = slo();
        doubt_pooled_breaks(&mut levels, &earlier, &slo, 0.95);
        let mut c = crate::stats::knee::capacity(&levels, 0.9, None);
        settle(&mut c, &levels, &[], &earlier, &slo, 0.95);
        c
    }

    #[test]
    fn a_floor_broken_on_its_pool_alone_is_in_doubt_while_every_load_passes() {
        // A server failing 4%: level 1 drew 10 of 104 on its pool, 1 of 16
        // of its own; the levels above 1 to 3 of 24 to 48 a sweep. In all
        // 22 of 344 (6.4%, p 0.14) is not over 5% at 95%: the floor
        // neither is the knee nor lowers it.
        let c = floor_on_pool(1, [1, 3, 2], Decision::Pass);
        assert_eq!(c.knee_concurrency, 8);
        assert!(c.knee_undecided, "the knee says it stepped over level 1");
        assert_ne!(c.limit, Some(Limit::ErrorsAtEveryLoad));
        // Every load failing 10% or more: the pool shows it, knee 0.
        let c = floor_on_pool(1, [3, 5, 5], Decision::Undecided);
        assert_eq!(c.knee_concurrency, 0);
        assert_eq!(c.limit, Some(Limit::ErrorsAtEveryLoad));
        // The floor's own requests show it (3 of 16, p 0.04): it stands.
        let c = floor_on_pool(3, [1, 3, 2], Decision::Pass);
        assert_eq!(c.knee_concurrency, 0);
        assert_eq!(c.limit, Some(Limit::ErrorsAtEveryLoad));
    }

    /// Level 2 broken on its pool (this sweep's 3 of 32, 6 of 64 pooled),
    /// level 1 passing, levels 4 and 8 at `above` errors of 24 and 48,
    /// each `judged`; the knee after the rule.
    fn level_2_on_pool(above: [u64; 2], judged: Decision) -> Capacity {
        let mut levels = vec![
            failing(1, 8, 0, Decision::Pass),
            failing(2, 32, 3, Decision::Break),
            failing(4, 24, above[0], judged),
            failing(8, 48, above[1], judged),
        ];
        for l in &mut levels {
            l.verdict.as_mut().unwrap().pooled_sweeps = 1;
        }
        let before = [
            (1, Counts::errors(64, 2)),
            (2, Counts::errors(32, 3)),
            (4, Counts::errors(24, above[0])),
            (8, Counts::errors(48, above[1])),
        ];
        concluded(levels, &before)
    }

    #[test]
    fn a_break_on_its_pool_alone_below_a_level_that_passes_is_in_doubt() {
        // A server failing 4%: level 2's 6 of 64 on its pool (3 of 32 of
        // its own, p 0.21) read knee 1 `errors` for 4 sweeps while levels
        // 4 and 8 passed. It neither is the knee nor lowers it now.
        let c = level_2_on_pool([0, 1], Decision::Pass);
        assert_eq!(c.knee_concurrency, 8);
        assert!(c.knee_undecided, "the knee says it stepped over level 2");
        // Errors that grow with load break the levels above too: no level
        // above passes, and the break stands.
        let c = level_2_on_pool([6, 12], Decision::Break);
        assert_eq!(c.knee_concurrency, 1);
        assert_eq!(c.limit, Some(Limit::Errors));
    }
}
