//! Samples of one level -> its summary. Percentiles are exact, from every
//! sample of the level, and carry the count they rest on.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::config::Slo;
use crate::stats::decision::Breach;
use crate::stats::report::{EarlyStop, LevelRole, LevelSummary, Percentiles};
use crate::stats::sample::{Outcome, ReasoningFields, Sample, TokenSource};

/// The `q` quantile (0..=1) of already sorted values, by linear interpolation
/// between closest ranks: numpy's default `linear` method (Hyndman and Fan
/// type 7): with h = (n - 1) q, the result is x[floor h] + (h - floor h) (x[floor h + 1] - x[floor h]).
/// None for an empty slice.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    quantile_of(sorted.len(), q, |i| sorted[i])
}

/// [`quantile_sorted`] of the `len` sorted values that `at` returns by rank:
/// the one interpolation, for callers whose values are not one slice (the
/// early verdict reads zeros it never stores).
pub fn quantile_of(len: usize, q: f64, at: impl Fn(usize) -> f64) -> Option<f64> {
    if len == 0 {
        return None;
    }
    let h = (len - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(len - 1);
    Some(at(lo) + (h - lo as f64) * (at(hi) - at(lo)))
}

pub use crate::stats::binomial::ratio;

/// The latency, in seconds, a request contributes to the percentile that
/// decides its level ([`Sample::decision_seconds`]).
pub fn decision_seconds(s: &Sample) -> Option<f64> {
    s.decision_seconds()
}

/// p50, p95 and p99 of `values` (sorted in place), with their count.
pub fn percentiles(values: &mut [f64]) -> Percentiles {
    // Unstable: values equal under total_cmp are the same bits, so order
    // among them cannot matter, and the stable sort's scratch copy (3 MB for
    // the inter-token gaps of a level at concurrency 512) raised peak memory.
    values.sort_unstable_by(f64::total_cmp);
    Percentiles {
        count: values.len(),
        p50: quantile_sorted(values, 0.50),
        p95: quantile_sorted(values, 0.95),
        p99: quantile_sorted(values, 0.99),
    }
}

/// Requests per outcome label, every outcome present (zeros included).
pub fn count_outcomes(samples: &[Sample]) -> BTreeMap<&'static str, u64> {
    let mut outcomes: BTreeMap<&'static str, u64> =
        Outcome::ALL.iter().map(|o| (o.as_str(), 0)).collect();
    for s in samples {
        *outcomes.entry(s.outcome.as_str()).or_default() += 1;
    }
    outcomes
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Fraction of its concurrency a level must keep in flight to count.
pub const KEPT_CONCURRENCY: f64 = 0.9;

/// The client's own turnaround between a request's end and its
/// replacement's send that is not held against a level: scheduling on a busy
/// machine, not a client falling behind (LLM requests last 100s of ms).
pub const TURNAROUND_TOLERANCE: f64 = 0.005;

/// One request's place in a level, in seconds from the level's start: when
/// it was sent and when its place was freed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    /// Sent (after it got its place).
    pub sent: f64,
    /// Its place freed (its stream ended, or it failed).
    pub freed: f64,
}

/// Time-weighted mean of requests in flight while a closed loop of
/// `concurrency` places should have held them all: from the first send
/// until the first end that no send replaced (ends are replaced in order:
/// the k-th end by the send after the first `concurrency`); after it the
/// level drains by design. 0 without requests.
pub fn achieved_concurrency(spans: &[Span], concurrency: u32) -> f64 {
    held_concurrency(spans, concurrency, 0.0)
}

/// As [`achieved_concurrency`], with a wait of at most `tolerance` seconds
/// between an end and the send that replaced it (or between the first send
/// and the others of the first round) counted as held.
pub fn held_concurrency(spans: &[Span], concurrency: u32, tolerance: f64) -> f64 {
    let c = (concurrency as usize).max(1);
    let mut sends: Vec<f64> = spans.iter().map(|s| s.sent).collect();
    let mut ends: Vec<f64> = spans.iter().map(|s| s.freed).collect();
    sends.sort_by(f64::total_cmp);
    ends.sort_by(f64::total_cmp);
    let (Some(&start), Some(&last_end)) = (sends.first(), ends.last()) else {
        return 0.0;
    };
    let end = ends
        .get(sends.len().saturating_sub(c))
        .copied()
        .unwrap_or(last_end);
    if end <= start {
        return 0.0;
    }
    let clip = |a: f64, b: f64| (b.min(end) - a.max(start)).max(0.0);
    let mut busy: f64 = spans.iter().map(|s| clip(s.sent, s.freed)).sum();
    let waits = sends
        .iter()
        .take(c)
        .map(|&s| (start, s))
        .chain(ends.iter().zip(sends.iter().skip(c)).map(|(&e, &s)| (e, s)));
    for (from, to) in waits {
        if to - from <= tolerance {
            busy += clip(from, to);
        }
    }
    busy / (end - start)
}

/// Records what the level achieved from its spans, and whether that is
/// enough for it to count toward the knee (the client's own turnaround, up
/// to [`TURNAROUND_TOLERANCE`], forgiven).
pub fn judge_concurrency(level: &mut LevelSummary, spans: &[Span]) {
    level.achieved_concurrency = achieved_concurrency(spans, level.concurrency);
    level.kept_concurrency = held_concurrency(spans, level.concurrency, TURNAROUND_TOLERANCE)
        >= KEPT_CONCURRENCY * f64::from(level.concurrency);
}

/// Summarises the samples of one level that ran for `wall` with
/// `concurrency` requests in flight, and judges it against `slo`.
pub fn summarize_level(
    concurrency: u32,
    samples: &[Sample],
    wall: Duration,
    slo: &Slo,
) -> LevelSummary {
    let outcomes = count_outcomes(samples);
    let error_examples = error_examples(samples);
    let ok: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.outcome == Outcome::Ok)
        .collect();
    let requests = samples.len() as u64;
    let shed = samples.iter().filter(|s| s.outcome.is_shed()).count() as u64;
    // Requests llmprobe cancelled itself (a level stopped early) ended
    // neither well nor badly: they count in no ratio.
    let cancelled = outcomes[Outcome::Cancelled.as_str()];
    let ended_requests = requests - cancelled;
    let failed = ended_requests - ok.len() as u64 - shed;

    let mut ttft: Vec<f64> = ok.iter().filter_map(|s| s.ttft.map(secs)).collect();
    let mut answer_ttft: Vec<f64> = ok
        .iter()
        .filter_map(|s| s.answer_ttft().map(secs))
        .collect();
    let reasoning: Vec<(u64, TokenSource)> = ok.iter().map(|s| s.reasoning_tokens()).collect();
    let reasoning_tokens: u64 = reasoning.iter().map(|(n, _)| n).sum();
    let reasoning_from_usage = reasoning
        .iter()
        .filter(|(_, src)| *src == TokenSource::Usage)
        .count();
    let mut latency: Vec<f64> = ok.iter().filter_map(|s| s.latency.map(secs)).collect();
    let mut itl: Vec<f64> = ok
        .iter()
        .flat_map(|s| s.inter_token.iter().copied().map(secs))
        .collect();
    let mut speed: Vec<f64> = ok.iter().filter_map(|s| s.generation_speed()).collect();

    let output_tokens: u64 = ok.iter().map(|s| s.output_tokens).sum();
    let prompt_tokens: u64 = ok.iter().filter_map(|s| s.prompt_tokens).sum();
    let cached_prompt_tokens: u64 = ok.iter().filter_map(|s| s.cached_prompt_tokens).sum();
    let wall_seconds = secs(wall);
    let throughput = if wall_seconds > 0.0 {
        output_tokens as f64 / wall_seconds
    } else {
        0.0
    };
    let from_usage = ok
        .iter()
        .filter(|s| s.token_source == TokenSource::Usage)
        .count();
    let token_source = source_of(from_usage, ok.len());
    let reasoning_token_source = source_of(reasoning_from_usage, ok.len());
    let tokens_per_content_chunk = tokens_per_content_chunk(&ok);
    let latency = percentiles(&mut latency);
    let shed_ratio = ratio(shed, ended_requests);
    let error_ratio = ratio(failed, ended_requests);
    let mut decision: Vec<f64> = samples.iter().filter_map(decision_seconds).collect();
    let decision = percentiles(&mut decision);
    // The verdict of this level alone, at the default confidence: the
    // sweep decides again with the target's confidence and pooled evidence.
    let verdict = crate::stats::verdict::decide(
        &[],
        &crate::stats::decision::Counts::of(samples, slo),
        slo,
        crate::config::keys::VERDICT_CONFIDENCE,
    );
    let within_slo = verdict.decision == crate::stats::decision::Decision::Pass;
    let mut connect: Vec<f64> = samples.iter().filter_map(|s| s.connect.map(secs)).collect();
    let connect = percentiles(&mut connect);
    let littles_law_concurrency = littles_law(samples, wall_seconds);

    LevelSummary {
        server: None,
        client_lag: None,
        concurrency,
        role: LevelRole::Configured,
        requests,
        planned_requests: requests,
        stopped_early: None,
        outcomes,
        shed_ratio,
        error_ratio,
        ttft_seconds: percentiles(&mut ttft),
        answer_ttft_seconds: percentiles(&mut answer_ttft),
        reasoning_tokens,
        reasoning_token_source,
        requests_without_answer: ok.iter().filter(|s| s.answer_ttft().is_none()).count() as u64,
        reasoning_fields: samples.iter().fold(ReasoningFields::default(), |f, s| {
            f.union(s.thinking.fields)
        }),
        latency_seconds: latency,
        inter_token_latency_seconds: percentiles(&mut itl),
        generation_tokens_per_second: percentiles(&mut speed),
        throughput_tokens_per_second: throughput,
        output_tokens,
        prompt_tokens,
        cached_prompt_tokens,
        wall_seconds,
        token_source,
        tokens_per_content_chunk,
        streams_without_finish_reason: ok.iter().filter(|s| !s.finish_reason_seen).count() as u64,
        error_examples,
        decision_latency_seconds: decision,
        // Until the caller judges the level's spans (`judge_concurrency`).
        achieved_concurrency: f64::from(concurrency),
        littles_law_concurrency,
        kept_concurrency: true,
        new_connections: connect.count as u64,
        connect_seconds: connect,
        usage_disagreements: ok.iter().filter(|s| s.usage_disagreed).count() as u64,
        // Set by the caller, who knows when the level ended.
        measured_at_unix_seconds: 0.0,
        verdict: Some(verdict),
        within_slo,
    }
}

/// The first error message of each failed outcome among `samples`.
fn error_examples(samples: &[Sample]) -> BTreeMap<&'static str, String> {
    let mut examples: BTreeMap<&'static str, String> = BTreeMap::new();
    for s in samples {
        // A request llmprobe cancelled itself has nothing to explain.
        let failed = !matches!(s.outcome, Outcome::Ok | Outcome::Cancelled);
        if let (true, Some(e)) = (failed, &s.error) {
            examples
                .entry(s.outcome.as_str())
                .or_insert_with(|| e.clone());
        }
    }
    examples
}

/// Output tokens per content chunk of the completed requests whose usage
/// was reported (None without any).
fn tokens_per_content_chunk(ok: &[&Sample]) -> Option<f64> {
    let (usage_tokens, usage_chunks) = ok
        .iter()
        .filter(|s| s.token_source == TokenSource::Usage)
        .fold((0u64, 0u64), |(t, c), s| {
            (t + s.output_tokens, c + s.content_chunks)
        });
    (usage_chunks > 0).then(|| usage_tokens as f64 / usage_chunks as f64)
}

/// Little's law: requests ended per second x their mean time in flight
/// (a failure: the time it took); cancelled ones left out.
fn littles_law(samples: &[Sample], wall_seconds: f64) -> f64 {
    let ended: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.outcome != Outcome::Cancelled)
        .collect();
    if wall_seconds > 0.0 && !ended.is_empty() {
        let mean = ended
            .iter()
            .map(|s| secs(s.decision_latency()))
            .sum::<f64>()
            / ended.len() as f64;
        ended.len() as f64 / wall_seconds * mean
    } else {
        0.0
    }
}

/// How the `ok` completed requests' tokens were counted, when `from_usage`
/// of them had a usage report: one of [`TOKEN_SOURCES`](crate::stats::report::TOKEN_SOURCES).
fn source_of(from_usage: usize, ok: usize) -> &'static str {
    match (from_usage, ok) {
        (_, 0) => "none",
        (u, n) if u == n => "usage",
        (0, _) => "chunks",
        _ => "mixed",
    }
}

/// Marks `level` as stopped early, `breach` certain after it sent fewer
/// than the `planned` requests: it breaks the SLO, and its shed and error
/// ratios are over the planned count, as the early verdict judged them (the
/// ratios of the requests that ended would overstate the full level: the
/// requests it cancelled in flight were the ones being served).
pub fn mark_stopped_early(level: &mut LevelSummary, breach: Breach, planned: u64) {
    let shed = level.shed();
    let ended = level
        .requests
        .saturating_sub(level.count(Outcome::Cancelled));
    let failed = ended
        .saturating_sub(level.count(Outcome::Ok))
        .saturating_sub(shed);
    level.planned_requests = planned;
    level.within_slo = false;
    level.shed_ratio = ratio(shed, planned);
    level.error_ratio = ratio(failed, planned);
    level.stopped_early = Some(EarlyStop {
        breach,
        saved_requests: planned.saturating_sub(level.requests),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-9, "{a} != {b}");
    }

    #[test]
    fn quantiles_match_hand_computed_numpy_linear() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        // numpy.percentile([1..6], 50) = 3.5; 95 -> h = 4.75 -> 5.75; 99 -> h = 4.95 -> 5.95
        close(quantile_sorted(&v, 0.5).unwrap(), 3.5);
        close(quantile_sorted(&v, 0.95).unwrap(), 5.75);
        close(quantile_sorted(&v, 0.99).unwrap(), 5.95);
        close(quantile_sorted(&v, 0.0).unwrap(), 1.0);
        close(quantile_sorted(&v, 1.0).unwrap(), 6.0);
        close(quantile_sorted(&[7.0], 0.95).unwrap(), 7.0);
        assert_eq!(quantile_sorted(&[], 0.5), None);
        // 10, 20, 30, 40 at 0.95: h = 2.85 -> 30 + 0.85 * 10 = 38.5
        close(
            quantile_sorted(&[10.0, 20.0, 30.0, 40.0], 0.95).unwrap(),
            38.5,
        );
    }

    #[test]
    fn percentiles_sort_first_and_carry_count() {
        let mut v = vec![6.0, 1.0, 5.0, 2.0, 4.0, 3.0];
        let p = percentiles(&mut v);
        assert_eq!(p.count, 6);
        close(p.p50.unwrap(), 3.5);
        close(p.p95.unwrap(), 5.75);
    }

    fn ok(ttft_ms: u64, latency_ms: u64, tokens: u64) -> Sample {
        let mut s = Sample::failed(Outcome::Ok, Some(200), "");
        s.error = None;
        s.ttft = Some(Duration::from_millis(ttft_ms));
        s.latency = Some(Duration::from_millis(latency_ms));
        s.output_tokens = tokens;
        s.token_source = TokenSource::Usage;
        s.content_chunks = tokens / 2;
        s.finish_reason_seen = true;
        s.inter_token = vec![Duration::from_millis(10); tokens.saturating_sub(1) as usize];
        s
    }

    fn slo(p95_ms: u64) -> Slo {
        Slo {
            p95_latency: Duration::from_millis(p95_ms),
            max_shed_ratio: 0.05,
            max_error_ratio: 0.05,
        }
    }

    #[test]
    fn answer_ttft_and_reasoning_tokens_per_level() {
        let think = |ttft: u64, answer: Option<u64>, chunks: u64, usage: Option<u64>| {
            let mut s = ok(ttft, 1000, 50);
            s.thinking.chunks = chunks;
            s.thinking.answer_ttft = answer.map(Duration::from_millis);
            s.thinking.usage_tokens = usage;
            s
        };
        let samples = vec![
            think(100, Some(400), 6, None),
            think(200, Some(500), 6, Some(24)),
            // Thought until the limit and never answered.
            think(300, None, 50, None),
        ];
        let l = summarize_level(2, &samples, Duration::from_secs(1), &slo(5000));
        assert_eq!(l.ttft_seconds.count, 3);
        assert_eq!(
            l.answer_ttft_seconds.count, 2,
            "the one without an answer has none"
        );
        close(l.answer_ttft_seconds.p50.unwrap(), 0.45);
        assert_eq!(
            l.reasoning_tokens,
            6 + 24 + 50,
            "usage where reported, chunks elsewhere"
        );
        assert_eq!(l.reasoning_token_source, "mixed");
        assert_eq!(l.requests_without_answer, 1);

        // A model that does not reason: the answer begins at the first token.
        let plain = summarize_level(
            1,
            &[ok(100, 1100, 101), ok(300, 2200, 201)],
            Duration::from_secs(1),
            &slo(5000),
        );
        assert_eq!(plain.answer_ttft_seconds, plain.ttft_seconds);
        assert_eq!(
            (plain.reasoning_tokens, plain.reasoning_token_source),
            (0, "chunks")
        );
        assert_eq!(plain.requests_without_answer, 0);
    }

    #[test]
    fn level_summary_values() {
        let samples = vec![
            ok(100, 1100, 101),
            ok(200, 2200, 201),
            Sample::failed(Outcome::Shed, Some(503), "shed"),
        ];
        let l = summarize_level(2, &samples, Duration::from_secs(2), &slo(5000));
        assert_eq!(l.requests, 3);
        assert_eq!(l.outcomes["ok"], 2);
        assert_eq!(l.outcomes["shed"], 1);
        assert_eq!(l.outcomes["timeout"], 0);
        close(l.shed_ratio, 1.0 / 3.0);
        close(l.error_ratio, 0.0);
        close(l.throughput_tokens_per_second, 302.0 / 2.0);
        // speeds: 100 / 1.0 = 100 and 200 / 2.0 = 100
        close(l.generation_tokens_per_second.p50.unwrap(), 100.0);
        close(l.ttft_seconds.p50.unwrap(), 0.15);
        assert_eq!(l.inter_token_latency_seconds.count, 300);
        assert_eq!(l.token_source, "usage");
        // 302 tokens in 50 + 100 chunks
        close(l.tokens_per_content_chunk.unwrap(), 302.0 / 150.0);
        assert!(!l.within_slo, "a third shed is over 5%");
    }

    #[test]
    fn slo_judges_latency_and_empty_levels() {
        let samples: Vec<Sample> = (0..20).map(|i| ok(10, 100 + i * 10, 10)).collect();
        // latencies 100..290 ms: one of 20 (5%) over 281 ms passes; three
        // (15%) over 265 ms are no evidence at 95% (undecided); ten over 195
        // ms break it.
        let at = |ms| summarize_level(1, &samples, Duration::from_secs(1), &slo(ms));
        assert!(at(281).within_slo);
        assert!(
            at(280).within_slo,
            "290 ms alone is over 280 ms: 5% allowed"
        );
        let v = at(265).verdict.unwrap();
        assert!(!at(265).within_slo);
        assert_eq!(v.decision, crate::stats::decision::Decision::Undecided);
        assert_eq!(
            at(195).verdict.unwrap().decision,
            crate::stats::decision::Decision::Break
        );
        let failed = vec![Sample::failed(Outcome::ProtocolError, Some(200), "garbage")];
        let l = summarize_level(1, &failed, Duration::from_secs(1), &slo(1000));
        assert!(!l.within_slo);
        close(l.error_ratio, 1.0);
        assert_eq!(l.latency_seconds.p95, None);
    }

    fn failed_after(outcome: Outcome, ms: u64) -> Sample {
        let mut s = Sample::failed(outcome, None, "failed");
        s.elapsed = Duration::from_millis(ms);
        s
    }

    #[test]
    fn timeouts_count_in_the_decision_but_not_in_the_ok_percentiles() {
        // 46 fast, 2 slow but ok, 2 timeouts (4%) of 600 ms: the ok-only p95
        // is fast, the decision's p95 lands on the slow ones.
        let mut samples: Vec<Sample> = (0..46).map(|_| ok(5, 10, 4)).collect();
        samples.extend((0..2).map(|_| ok(5, 400, 4)));
        samples.extend((0..2).map(|_| failed_after(Outcome::Timeout, 600)));
        samples.push(failed_after(Outcome::Shed, 1));
        let l = summarize_level(1, &samples, Duration::from_secs(1), &slo(300));
        close(l.latency_seconds.p95.unwrap(), 0.010);
        assert_eq!(l.decision_latency_seconds.count, 50, "shed left out");
        close(l.decision_latency_seconds.p95.unwrap(), 0.400);
        assert!(l.error_ratio < 0.05);
        assert!(!l.within_slo);
    }

    #[test]
    fn achieved_concurrency_is_time_weighted_until_the_loop_drains() {
        let span = |sent, freed| Span { sent, freed };
        // Two places, each refilled at once: 2 in flight until 2.0, when the
        // first end that no send replaced comes; the tail does not count.
        let full = [
            span(0.0, 1.0),
            span(0.0, 1.5),
            span(1.0, 2.0),
            span(1.5, 4.0),
        ];
        close(achieved_concurrency(&full, 2), 2.0);
        // The second end replaced only after a 0.5 s wait.
        let gap = [
            span(0.0, 1.0),
            span(0.0, 1.0),
            span(1.0, 2.0),
            span(1.5, 2.5),
        ];
        close(achieved_concurrency(&gap, 2), 3.5 / 2.0);
        close(held_concurrency(&gap, 2, 0.4), 3.5 / 2.0);
        close(held_concurrency(&gap, 2, 0.5), 2.0);
        // One loop stalled after its end; another replaced it late, and its
        // own end (1.85) was the first that nothing replaced.
        let late = [
            span(0.05, 0.98),
            span(0.23, 1.33),
            span(1.17, 1.85),
            span(1.89, 2.43),
        ];
        close(held_concurrency(&late, 2, 0.6), 2.0);
        assert!(achieved_concurrency(&late, 2) < 1.6);
        assert_eq!(achieved_concurrency(&[], 2), 0.0);
        let mut l = summarize_level(2, &[ok(1, 2, 2)], Duration::from_secs(1), &slo(1000));
        judge_concurrency(&mut l, &gap);
        assert!(!l.kept_concurrency, "1.75 of 2 is under 90%");
        judge_concurrency(&mut l, &full);
        assert!(l.kept_concurrency);
    }

    #[test]
    fn connections_and_untrusted_usage_are_counted() {
        let mut a = ok(5, 10, 4);
        a.connect = Some(Duration::from_millis(3));
        let mut b = ok(5, 10, 4);
        b.usage_disagreed = true;
        let l = summarize_level(2, &[a, b], Duration::from_secs(1), &slo(1000));
        assert_eq!(l.new_connections, 1);
        close(l.connect_seconds.p50.unwrap(), 0.003);
        assert_eq!(l.usage_disagreements, 1);
    }

    #[test]
    fn error_examples_keep_the_first_message_of_each_failed_outcome() {
        let samples = vec![
            ok(10, 100, 5),
            Sample::failed(Outcome::Timeout, None, "first timeout"),
            Sample::failed(Outcome::Timeout, None, "second timeout"),
            Sample::failed(Outcome::Shed, Some(503), "HTTP 503: busy"),
        ];
        let l = summarize_level(1, &samples, Duration::from_secs(1), &slo(1000));
        assert_eq!(l.error_examples.len(), 2);
        assert_eq!(l.error_examples["timeout"], "first timeout");
        assert_eq!(l.error_examples["shed"], "HTTP 503: busy");
    }

    #[test]
    fn a_stopped_level_has_its_ratios_over_the_planned_count() {
        // 48 planned; 8 ended (2 ok, 5 shed, 1 error) before the verdict,
        // 6 cancelled in flight.
        let mut samples = vec![ok(10, 100, 4); 2];
        samples.extend(vec![Sample::failed(Outcome::Shed, Some(503), "busy"); 5]);
        samples.push(Sample::failed(Outcome::HttpError, Some(500), "oops"));
        samples.extend(vec![
            Sample::failed(Outcome::Cancelled, None, "cancelled");
            6
        ]);
        let mut l = summarize_level(16, &samples, Duration::from_secs(1), &slo(1000));
        close(l.shed_ratio, 5.0 / 8.0);
        mark_stopped_early(&mut l, Breach::Shed, 48);
        close(l.shed_ratio, 5.0 / 48.0);
        close(l.error_ratio, 1.0 / 48.0);
        assert!(!l.within_slo);
        assert_eq!(l.planned_requests, 48);
        assert_eq!(
            l.stopped_early,
            Some(EarlyStop {
                breach: Breach::Shed,
                saved_requests: 34
            })
        );
    }
}
