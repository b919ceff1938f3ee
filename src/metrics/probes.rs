//! The probe families (see [`names::PROBE_REQUESTS`] and its neighbours):
//! the prometheus crate's vecs, one series set per (target, model). Every
//! outcome's counter is created at zero with a target's first probe, so
//! that a burn-rate rule's ratio is defined from the start.

use std::collections::BTreeMap;
use std::sync::Mutex;

use prometheus::{GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

use crate::metrics::locks::lock;
use crate::metrics::names::{self, Spec};
use crate::stats::probe::{ProbeEvent, ProbeOutcome, ProbeResult, Skip};

/// Owns the probe families.
pub(crate) struct ProbeMetrics {
    requests: IntCounterVec,
    success: GaugeVec,
    ttft: HistogramVec,
    latency: HistogramVec,
    cold_ttft: HistogramVec,
    last_success: GaugeVec,
    dispatch_lag: GaugeVec,
    tokens: IntCounterVec,
    skipped: IntCounterVec,
    client_stalled: IntCounterVec,
    paused: GaugeVec,
    interval: GaugeVec,
    /// The model each probed target's series carry, to remove them.
    models: Mutex<BTreeMap<String, String>>,
}

impl ProbeMetrics {
    /// Creates the families and registers them with `registry`.
    pub(crate) fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let gauge = |spec: &Spec| {
            let g = GaugeVec::new(Opts::new(spec.name, spec.help), spec.labels)?;
            registry.register(Box::new(g.clone()))?;
            Ok::<_, prometheus::Error>(g)
        };
        let histogram = |spec: &Spec, buckets: &[f64]| {
            let opts = HistogramOpts::new(spec.name, spec.help).buckets(buckets.to_vec());
            let h = HistogramVec::new(opts, spec.labels)?;
            registry.register(Box::new(h.clone()))?;
            Ok::<_, prometheus::Error>(h)
        };
        let counter = |spec: &Spec| super::register::counter(registry, spec);
        Ok(ProbeMetrics {
            requests: counter(&names::PROBE_REQUESTS)?,
            success: gauge(&names::PROBE_SUCCESS)?,
            ttft: histogram(&names::PROBE_TTFT, &names::PROBE_BUCKETS)?,
            latency: histogram(&names::PROBE_LATENCY, &names::PROBE_BUCKETS)?,
            cold_ttft: histogram(&names::PROBE_COLD_TTFT, &names::PROBE_COLD_BUCKETS)?,
            last_success: gauge(&names::PROBE_LAST_SUCCESS)?,
            dispatch_lag: gauge(&names::PROBE_DISPATCH_LAG)?,
            tokens: counter(&names::PROBE_TOKENS)?,
            skipped: counter(&names::PROBE_SKIPPED)?,
            client_stalled: counter(&names::PROBE_CLIENT_STALLED)?,
            paused: gauge(&names::PROBE_PAUSED)?,
            interval: gauge(&names::PROBE_INTERVAL)?,
            models: Mutex::new(BTreeMap::new()),
        })
    }

    /// Sets the configured interval of `target`'s probes; None: probes
    /// off, and its probe series go.
    pub(crate) fn configured(&self, target: &str, model: &str, interval: Option<f64>) {
        match interval {
            Some(i) => {
                self.started(target, model);
                self.interval.with_label_values(&[target, model]).set(i);
            }
            None => self.forget(target),
        }
    }

    /// Records one event of `target`'s probe stream, at Unix time `now`.
    pub(crate) fn observe(&self, target: &str, model: &str, event: &ProbeEvent, now: f64) {
        self.started(target, model);
        let tm = [target, model];
        match event {
            ProbeEvent::Probed(r) => self.probed(&tm, r, now),
            ProbeEvent::Skipped(reason) => self
                .skipped
                .with_label_values(&[target, model, reason.as_str()])
                .inc(),
            ProbeEvent::Paused(p) => self.paused.with_label_values(&tm).set(f64::from(*p)),
        }
    }

    fn probed(&self, tm: &[&str; 2], r: &ProbeResult, now: f64) {
        let [target, model] = *tm;
        self.requests
            .with_label_values(&[target, model, r.outcome.as_str()])
            .inc();
        let served = r.outcome.served();
        self.success.with_label_values(tm).set(f64::from(served));
        self.dispatch_lag.with_label_values(tm).set(r.dispatch_lag);
        if served {
            self.last_success.with_label_values(tm).set(now);
        }
        match (r.cold, r.ttft) {
            _ if r.client_stall.is_some() => self.client_stalled.with_label_values(tm).inc(),
            (Some(_), Some(t)) => self.cold_ttft.with_label_values(tm).observe(t),
            (None, Some(t)) => {
                self.ttft.with_label_values(tm).observe(t);
                if let Some(l) = r.latency {
                    self.latency.with_label_values(tm).observe(l);
                }
            }
            _ => {}
        }
        for (kind, n) in names::PROBE_TOKEN_KINDS.iter().zip([
            r.prompt_tokens,
            r.output_tokens,
            r.reasoning_tokens,
        ]) {
            self.tokens
                .with_label_values(&[target, model, kind])
                .inc_by(n);
        }
    }

    /// Creates a target's counters at zero (once), removing the series of
    /// a model it probed before.
    fn started(&self, target: &str, model: &str) {
        let mut models = lock(&self.models);
        match models.get(target) {
            Some(m) if m == model => return,
            Some(old) => {
                let old = old.clone();
                self.remove(target, &old);
            }
            None => {}
        }
        models.insert(target.to_string(), model.to_string());
        for o in ProbeOutcome::ALL {
            self.requests
                .with_label_values(&[target, model, o.as_str()]);
        }
        for s in Skip::ALL {
            self.skipped.with_label_values(&[target, model, s.as_str()]);
        }
        for kind in names::PROBE_TOKEN_KINDS {
            self.tokens.with_label_values(&[target, model, kind]);
        }
        self.client_stalled.with_label_values(&[target, model]);
        self.paused.with_label_values(&[target, model]).set(0.0);
    }

    /// Removes every probe series of `target`.
    pub(crate) fn forget(&self, target: &str) {
        if let Some(model) = lock(&self.models).remove(target) {
            self.remove(target, &model);
        }
    }

    fn remove(&self, target: &str, model: &str) {
        let tm = [target, model];
        for o in ProbeOutcome::ALL {
            let _ = self
                .requests
                .remove_label_values(&[target, model, o.as_str()]);
        }
        for s in Skip::ALL {
            let _ = self
                .skipped
                .remove_label_values(&[target, model, s.as_str()]);
        }
        for kind in names::PROBE_TOKEN_KINDS {
            let _ = self.tokens.remove_label_values(&[target, model, kind]);
        }
        let _ = self.client_stalled.remove_label_values(&tm);
        for g in [
            &self.success,
            &self.last_success,
            &self.dispatch_lag,
            &self.paused,
            &self.interval,
        ] {
            let _ = g.remove_label_values(&tm);
        }
        for h in [&self.ttft, &self.latency, &self.cold_ttft] {
            let _ = h.remove_label_values(&tm);
        }
    }
}
