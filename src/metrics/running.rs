//! Running totals over every measured request (histograms and counters,
//! for `rate()` and `histogram_quantile()` over any window), per (target,
//! model, workload), remembered so that a removed target's series can go.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Registry};

use crate::metrics::counter;
use crate::metrics::names::{self, Spec};
use crate::stats::sample::{Outcome, Sample};

/// Which (target, model, workload) series exist, so that `forget` can
/// delete them (the vecs cannot match a partial label set).
type Keys = BTreeMap<String, BTreeMap<String, Vec<String>>>;

/// The running-total families.
pub(super) struct RunningTotals {
    request_ttft: HistogramVec,
    request_duration: HistogramVec,
    requests: IntCounterVec,
    output_tokens: IntCounterVec,
    prompt_tokens: IntCounterVec,
    keys: Mutex<Keys>,
}

fn histogram(registry: &Registry, spec: &Spec) -> Result<HistogramVec, prometheus::Error> {
    let h = HistogramVec::new(
        HistogramOpts::new(spec.name, spec.help).buckets(names::LATENCY_BUCKETS.to_vec()),
        spec.labels,
    )?;
    registry.register(Box::new(h.clone()))?;
    Ok(h)
}

impl RunningTotals {
    /// Creates the families and registers them.
    pub(super) fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        Ok(RunningTotals {
            request_ttft: histogram(registry, &names::REQUEST_TTFT)?,
            request_duration: histogram(registry, &names::REQUEST_DURATION)?,
            requests: counter(registry, &names::REQUESTS)?,
            output_tokens: counter(registry, &names::OUTPUT_TOKENS)?,
            prompt_tokens: counter(registry, &names::PROMPT_TOKENS)?,
            keys: Mutex::new(BTreeMap::new()),
        })
    }

    /// Adds one measured request; see [`Metrics::observe_request`](super::Metrics::observe_request).
    pub(super) fn observe(&self, target: &str, model: &str, workload: &str, sample: &Sample) {
        // Held while updating so that `forget` sees either all of this
        // request or none of it.
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        self.ensure_series(&mut keys, target, model, workload);

        let labels = [target, model, workload];
        if let Ok(c) = self.requests.get_metric_with_label_values(&[
            target,
            model,
            workload,
            sample.outcome.as_str(),
        ]) {
            c.inc();
        }
        if sample.outcome != Outcome::Ok {
            return;
        }
        if let (Some(ttft), Ok(h)) = (
            sample.ttft,
            self.request_ttft.get_metric_with_label_values(&labels),
        ) {
            h.observe(ttft.as_secs_f64());
        }
        if let (Some(latency), Ok(h)) = (
            sample.latency,
            self.request_duration.get_metric_with_label_values(&labels),
        ) {
            h.observe(latency.as_secs_f64());
        }
        if let Ok(c) = self.output_tokens.get_metric_with_label_values(&labels) {
            c.inc_by(sample.output_tokens);
        }
        if let (Some(tokens), Ok(c)) = (
            sample.prompt_tokens,
            self.prompt_tokens.get_metric_with_label_values(&labels),
        ) {
            c.inc_by(tokens);
        }
    }

    /// Creates, at zero, every running-total series of a (target, model,
    /// workload) seen for the first time, so that `rate()` and alerts on an
    /// outcome work from its first occurrence.
    fn ensure_series(&self, keys: &mut Keys, target: &str, model: &str, workload: &str) {
        let known = keys
            .get(target)
            .and_then(|models| models.get(model))
            .is_some_and(|workloads| workloads.iter().any(|w| w == workload));
        if known {
            return;
        }
        keys.entry(target.to_string())
            .or_default()
            .entry(model.to_string())
            .or_default()
            .push(workload.to_string());
        let labels = [target, model, workload];
        for outcome in Outcome::ALL {
            let _ = self.requests.get_metric_with_label_values(&[
                target,
                model,
                workload,
                outcome.as_str(),
            ]);
        }
        let _ = self.request_ttft.get_metric_with_label_values(&labels);
        let _ = self.request_duration.get_metric_with_label_values(&labels);
        let _ = self.output_tokens.get_metric_with_label_values(&labels);
        let _ = self.prompt_tokens.get_metric_with_label_values(&labels);
    }

    /// Removes every running-total series of `target`.
    pub(super) fn forget(&self, target: &str) {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(models) = keys.remove(target) else {
            return;
        };
        for (model, workloads) in &models {
            for workload in workloads {
                let labels = [target, model.as_str(), workload.as_str()];
                // Errors here only mean the series did not exist.
                let _ = self.request_ttft.remove_label_values(&labels);
                let _ = self.request_duration.remove_label_values(&labels);
                let _ = self.output_tokens.remove_label_values(&labels);
                let _ = self.prompt_tokens.remove_label_values(&labels);
                for outcome in Outcome::ALL {
                    let _ = self.requests.remove_label_values(&[
                        target,
                        model,
                        workload,
                        outcome.as_str(),
                    ]);
                }
            }
        }
    }
}
