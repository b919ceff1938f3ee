//! Running totals over every measured request (histograms and counters,
//! for `rate()` and `histogram_quantile()` over any window), per (target,
//! model, workload), kept as plain numbers so that a removed target's series
//! can go, and written as text at scrape time.
//!
//! Not the prometheus crate's vecs: its `gather` copied every label of every
//! series into a protobuf tree and sorted it on each scrape (about 36,000
//! series with a thousand targets; most of a scrape's allocations). The text
//! is the same, series for series and in the same order (labels by name,
//! series by label values), as that crate's encoder wrote it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::metrics::exposition::Source;
use crate::metrics::names::{self, Spec};
use crate::metrics::pieces::{family_header, write_series};
use crate::stats::report::SweepReport;
use crate::stats::sample::{Outcome, Sample};

const BUCKETS: usize = names::LATENCY_BUCKETS.len();

/// One histogram: counts per bucket (not cumulative), sum and count.
#[derive(Debug, Default, Clone)]
struct Histogram {
    buckets: [u64; BUCKETS],
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, v: f64) {
        // As the prometheus crate does: the first bucket whose upper bound
        // is at least the value; above every bound only +Inf counts it.
        if let Some(i) = names::LATENCY_BUCKETS.iter().position(|b| v <= *b) {
            self.buckets[i] += 1;
        }
        self.sum += v;
        self.count += 1;
    }
}

/// Every running total of one (target, model, workload).
#[derive(Debug, Default, Clone)]
struct Totals {
    requests: [u64; Outcome::ALL.len()],
    output_tokens: u64,
    reasoning_tokens: u64,
    prompt_tokens: u64,
    /// Requests not sent because a level stopped early (per sweep report).
    requests_saved: u64,
    ttft: Histogram,
    answer_ttft: Histogram,
    duration: Histogram,
}

/// (model, target, workload): the order in which series are written.
type Key = (String, String, String);

/// model -> target -> (workload, totals) sorted by workload: nested so that
/// a request finds its totals by borrowed names, without allocating a key.
/// The workloads of a target are few: a map there would allocate a node
/// with room for 11 (4 KB per target; heaptrack, 1000 targets).
type Series = BTreeMap<String, BTreeMap<String, Vec<(String, Totals)>>>;

/// The running-total families.
#[derive(Debug, Default)]
pub(super) struct RunningTotals {
    series: Mutex<Series>,
}

impl RunningTotals {
    /// No series yet.
    pub(super) fn new() -> Self {
        RunningTotals::default()
    }

    /// Adds one measured request; see [`Metrics::observe_request`](super::Metrics::observe_request).
    ///
    /// The first request of a (target, model, workload) creates all of its
    /// series at zero, so that `rate()` and alerts on an outcome work from
    /// its first occurrence.
    pub(super) fn observe(&self, target: &str, model: &str, workload: &str, sample: &Sample) {
        let mut series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(totals) = totals_of(&mut series, target, model, workload) else {
            return;
        };
        totals.requests[sample.outcome.index()] += 1;
        if sample.outcome != Outcome::Ok {
            return;
        }
        if let Some(ttft) = sample.ttft {
            totals.ttft.observe(ttft.as_secs_f64());
        }
        if let Some(answer) = sample.answer_ttft() {
            totals.answer_ttft.observe(answer.as_secs_f64());
        }
        if let Some(latency) = sample.latency {
            totals.duration.observe(latency.as_secs_f64());
        }
        // Saturating: a counter that wrapped would read as a reset.
        totals.output_tokens = totals.output_tokens.saturating_add(sample.output_tokens);
        totals.reasoning_tokens = totals
            .reasoning_tokens
            .saturating_add(sample.reasoning_tokens().0);
        if let Some(tokens) = sample.prompt_tokens {
            totals.prompt_tokens = totals.prompt_tokens.saturating_add(tokens);
        }
    }

    /// Adds the requests the report's early-stopped levels did not send.
    pub(super) fn sweep_finished(&self, report: &SweepReport) {
        let mut series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        for w in &report.workloads {
            let saved: u64 = w
                .levels
                .iter()
                .filter_map(|l| l.stopped_early.map(|e| e.saved_requests))
                .sum();
            if let Some(t) = totals_of(&mut series, &report.target, &report.model, &w.workload) {
                t.requests_saved += saved;
            }
        }
    }

    /// Removes every running-total series of `target`.
    pub(super) fn forget(&self, target: &str) {
        let mut series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        for by_target in series.values_mut() {
            by_target.remove(target);
        }
        series.retain(|_, by_target| !by_target.is_empty());
    }

    /// Every running-total family as a source of text, in name order;
    /// none when nothing was measured yet.
    pub(super) fn sources(&self) -> Vec<(&'static str, RunningSource)> {
        // A copy of the numbers, so that requests are not held up while
        // the text is written (a few hundred KB with a thousand targets).
        let series: Vec<(Key, Totals)> = {
            let s = self.series.lock().unwrap_or_else(PoisonError::into_inner);
            let mut flat = Vec::new();
            for (m, by_target) in s.iter() {
                for (t, by_workload) in by_target {
                    for (w, totals) in by_workload {
                        flat.push(((m.clone(), t.clone(), w.clone()), totals.clone()));
                    }
                }
            }
            flat
        };
        if series.is_empty() {
            return Vec::new();
        }
        let series = Arc::new(series);
        let mut out: Vec<(&'static str, RunningSource)> = [
            (&names::OUTPUT_TOKENS, Kind::Counter(|t| t.output_tokens)),
            (&names::PROMPT_TOKENS, Kind::Counter(|t| t.prompt_tokens)),
            (
                &names::REASONING_TOKENS,
                Kind::Counter(|t| t.reasoning_tokens),
            ),
            (&names::REQUESTS_SAVED, Kind::Counter(|t| t.requests_saved)),
            (&names::REQUEST_DURATION, Kind::Histogram(|t| &t.duration)),
            (&names::REQUEST_TTFT, Kind::Histogram(|t| &t.ttft)),
            (
                &names::REQUEST_ANSWER_TTFT,
                Kind::Histogram(|t| &t.answer_ttft),
            ),
            (&names::REQUESTS, Kind::Requests(requests_order(&series))),
        ]
        .into_iter()
        .map(|(spec, kind)| (spec.name, RunningSource::new(spec, kind, &series)))
        .collect();
        out.sort_by_key(|(name, _)| *name);
        out
    }

    /// Every running-total family in one string.
    #[cfg(test)]
    fn text(&self) -> String {
        let sources = self.sources().into_iter().map(|(_, s)| {
            let s: Box<dyn Source> = Box::new(s);
            s
        });
        super::exposition::Exposition::new(sources.collect()).into_string()
    }
}

/// How a running-total family is written.
enum Kind {
    /// One counter series per (model, target, workload).
    Counter(fn(&Totals) -> u64),
    /// One histogram per (model, target, workload).
    Histogram(fn(&Totals) -> &Histogram),
    /// `llmprobe_requests_total`: (series index, outcome) in writing order.
    Requests(Vec<(usize, Outcome)>),
}

/// One running-total family of one scrape, written a series at a time
/// from a copy of the numbers shared by the scrape's families.
pub(super) struct RunningSource {
    spec: &'static Spec,
    kind: Kind,
    series: Arc<Vec<(Key, Totals)>>,
    /// The next series (or, for requests, position in its order) to write.
    next: usize,
    header_written: bool,
    /// Set for histograms.
    histogram: Option<HistogramNames>,
}

impl RunningSource {
    fn new(spec: &'static Spec, kind: Kind, series: &Arc<Vec<(Key, Totals)>>) -> Self {
        let histogram = match kind {
            Kind::Histogram(_) => Some(HistogramNames::new(spec.name)),
            _ => None,
        };
        RunningSource {
            spec,
            kind,
            series: Arc::clone(series),
            next: 0,
            header_written: false,
            histogram,
        }
    }
}

impl Source for RunningSource {
    fn write_next(&mut self, out: &mut String) -> bool {
        let spec = self.spec;
        if !self.header_written {
            let kind = match self.kind {
                Kind::Histogram(_) => "histogram",
                _ => "counter",
            };
            family_header(out, spec, kind);
            self.header_written = true;
            return true;
        }
        let i = self.next;
        self.next += 1;
        match &self.kind {
            Kind::Counter(value) => {
                let Some((key, totals)) = self.series.get(i) else {
                    return false;
                };
                write_series(out, spec.name, labels(key), value(totals) as f64);
            }
            Kind::Histogram(value) => {
                let (Some((key, totals)), Some(names)) = (self.series.get(i), &self.histogram)
                else {
                    return false;
                };
                names.write(out, key, value(totals));
            }
            Kind::Requests(order) => {
                let Some(&(s, outcome)) = order.get(i) else {
                    return false;
                };
                let Some(((m, t, w), totals)) = self.series.get(s) else {
                    return false;
                };
                let l = [
                    ("model", m.as_str()),
                    ("outcome", outcome.as_str()),
                    ("target", t.as_str()),
                    ("workload", w.as_str()),
                ];
                let n = totals.requests[outcome.index()] as f64;
                write_series(out, spec.name, l, n);
            }
        }
        true
    }
}

/// The totals of (target, model, workload), created at zero when new; found
/// by borrowed names, so a known series costs no allocation (this runs for
/// every measured request). None only if an insert just made were missing.
fn totals_of<'a>(
    series: &'a mut Series,
    target: &str,
    model: &str,
    workload: &str,
) -> Option<&'a mut Totals> {
    if !series.contains_key(model) {
        series.insert(model.to_string(), BTreeMap::new());
    }
    let by_target = series.get_mut(model)?;
    if !by_target.contains_key(target) {
        by_target.insert(target.to_string(), Vec::new());
    }
    let by_workload = by_target.get_mut(target)?;
    let i = match by_workload.binary_search_by(|(w, _)| w.as_str().cmp(workload)) {
        Ok(i) => i,
        Err(i) => {
            by_workload.insert(i, (workload.to_string(), Totals::default()));
            i
        }
    };
    by_workload.get_mut(i).map(|(_, t)| t)
}

/// The labels of a series of `key`, sorted by name as the prometheus
/// crate sorts them.
fn labels(key: &Key) -> [(&'static str, &str); 3] {
    let (m, t, w) = key;
    [("model", m), ("target", t), ("workload", w)]
}

/// Names and `le` values of a histogram family's lines.
struct HistogramNames {
    bucket: String,
    sum: String,
    count: String,
    /// `le` label values of the buckets, +Inf last.
    bounds: Vec<String>,
}

impl HistogramNames {
    fn new(name: &str) -> Self {
        HistogramNames {
            bucket: format!("{name}_bucket"),
            sum: format!("{name}_sum"),
            count: format!("{name}_count"),
            bounds: names::LATENCY_BUCKETS
                .iter()
                .map(|b| b.to_string())
                .chain(std::iter::once("+Inf".to_string()))
                .collect(),
        }
    }

    /// Appends the bucket, sum and count lines of one histogram.
    fn write(&self, out: &mut String, key: &Key, h: &Histogram) {
        let [m, t, w] = labels(key);
        let mut cumulative = 0;
        for (i, bound) in self.bounds.iter().enumerate() {
            cumulative += h.buckets.get(i).copied().unwrap_or(h.count - cumulative);
            let le = [m, t, w, ("le", bound.as_str())];
            write_series(out, &self.bucket, le, cumulative as f64);
        }
        write_series(out, &self.sum, [m, t, w], h.sum);
        write_series(out, &self.count, [m, t, w], h.count as f64);
    }
}

/// The writing order of `llmprobe_requests_total`, whose labels sorted by
/// name put the outcome second: series go by model, then outcome, then
/// target and workload.
fn requests_order(series: &[(Key, Totals)]) -> Vec<(usize, Outcome)> {
    let mut outcomes = Outcome::ALL;
    outcomes.sort_by_key(|o| o.as_str());
    let mut order = Vec::with_capacity(series.len() * outcomes.len());
    let mut start = 0;
    while start < series.len() {
        let model = &series[start].0 .0;
        let end = start
            + series[start..]
                .iter()
                .take_while(|((m, _, _), _)| m == model)
                .count();
        for outcome in outcomes {
            order.extend((start..end).map(|i| (i, outcome)));
        }
        start = end;
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::sample::TokenSource;
    use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry, TextEncoder};
    use std::time::Duration;

    fn sample(outcome: Outcome, ttft_ms: u64, latency_ms: u64) -> Sample {
        Sample {
            outcome,
            status: Some(200),
            ttft: Some(Duration::from_millis(ttft_ms)),
            latency: Some(Duration::from_millis(latency_ms)),
            inter_token: vec![],
            output_tokens: latency_ms / 3,
            token_source: TokenSource::Usage,
            prompt_tokens: (ttft_ms % 2 == 0).then_some(ttft_ms),
            cached_prompt_tokens: None,
            content_chunks: 1,
            finish_reason_seen: true,
            error: None,
            elapsed: Duration::from_millis(latency_ms),
            connect: None,
            usage_disagreed: false,
            thinking: Default::default(),
        }
    }

    /// The same observations through the prometheus crate's vecs, as these
    /// totals were kept before, encoded by its encoder.
    /// A reasoning model's completed request.
    fn thinking(ttft_ms: u64, answer_ms: Option<u64>, chunks: u64, usage: Option<u64>) -> Sample {
        let mut s = sample(Outcome::Ok, ttft_ms, 5000);
        s.thinking.chunks = chunks;
        s.thinking.answer_ttft = answer_ms.map(Duration::from_millis);
        s.thinking.usage_tokens = usage;
        s
    }

    fn through_the_crate(observed: &[(&str, &str, &str, Sample)]) -> String {
        let r = Registry::new();
        let hist = |spec: &Spec| {
            let h = HistogramVec::new(
                HistogramOpts::new(spec.name, spec.help).buckets(names::LATENCY_BUCKETS.to_vec()),
                spec.labels,
            )
            .unwrap();
            r.register(Box::new(h.clone())).unwrap();
            h
        };
        let count = |spec: &Spec| {
            let c = IntCounterVec::new(Opts::new(spec.name, spec.help), spec.labels).unwrap();
            r.register(Box::new(c.clone())).unwrap();
            c
        };
        let (ttft, duration) = (hist(&names::REQUEST_TTFT), hist(&names::REQUEST_DURATION));
        let answer = hist(&names::REQUEST_ANSWER_TTFT);
        let reasoning = count(&names::REASONING_TOKENS);
        let requests = count(&names::REQUESTS);
        let (output, prompt) = (count(&names::OUTPUT_TOKENS), count(&names::PROMPT_TOKENS));
        let saved = count(&names::REQUESTS_SAVED);
        for (t, m, w, s) in observed {
            let l = [*t, *m, *w];
            let _ = saved.with_label_values(&l);
            for o in Outcome::ALL {
                requests.with_label_values(&[*t, *m, *w, o.as_str()]);
            }
            let _ = (ttft.with_label_values(&l), duration.with_label_values(&l));
            let _ = (output.with_label_values(&l), prompt.with_label_values(&l));
            let _ = (
                answer.with_label_values(&l),
                reasoning.with_label_values(&l),
            );
            requests
                .with_label_values(&[*t, *m, *w, s.outcome.as_str()])
                .inc();
            if s.outcome != Outcome::Ok {
                continue;
            }
            ttft.with_label_values(&l)
                .observe(s.ttft.unwrap().as_secs_f64());
            duration
                .with_label_values(&l)
                .observe(s.latency.unwrap().as_secs_f64());
            if let Some(a) = s.answer_ttft() {
                answer.with_label_values(&l).observe(a.as_secs_f64());
            }
            output.with_label_values(&l).inc_by(s.output_tokens);
            reasoning
                .with_label_values(&l)
                .inc_by(s.reasoning_tokens().0);
            if let Some(p) = s.prompt_tokens {
                prompt.with_label_values(&l).inc_by(p);
            }
        }
        TextEncoder::new().encode_to_string(&r.gather()).unwrap()
    }

    #[test]
    fn text_is_what_the_prometheus_crate_wrote() {
        let observed = vec![
            ("w2", "qwen", "chat", sample(Outcome::Ok, 120, 1500)),
            ("w1", "qwen", "chat", sample(Outcome::Ok, 10, 250)),
            ("w1", "qwen", "rag", sample(Outcome::Shed, 0, 0)),
            ("w1", "llama", "chat", sample(Outcome::Ok, 3, 400_000)),
            ("w1", "qwen", "chat", sample(Outcome::Timeout, 0, 0)),
            ("a\"b", "qwen", "chat", sample(Outcome::Ok, 25, 60_000)),
            ("w2", "qwen", "chat", sample(Outcome::Ok, 51, 2501)),
            (
                "w3",
                "qwen3",
                "chat",
                thinking(40, Some(900), 300, Some(280)),
            ),
            ("w3", "qwen3", "chat", thinking(40, None, 500, None)),
        ];
        let totals = RunningTotals::new();
        for (t, m, w, s) in &observed {
            totals.observe(t, m, w, s);
        }
        let ours: String = totals.text();
        assert_eq!(ours, through_the_crate(&observed));
    }

    #[test]
    fn forget_removes_only_that_target() {
        let totals = RunningTotals::new();
        totals.observe("w1", "qwen", "chat", &sample(Outcome::Ok, 10, 20));
        totals.observe("w1", "llama", "chat", &sample(Outcome::Ok, 10, 20));
        totals.observe("w2", "qwen", "chat", &sample(Outcome::Ok, 10, 20));
        totals.forget("w1");
        let text: String = totals.text();
        assert!(!text.contains("target=\"w1\""));
        assert!(!text.contains("model=\"llama\""));
        assert!(text.contains("target=\"w2\""));
        totals.forget("w2");
        assert!(totals.text().is_empty());
    }
}
