//! Where a target stands, for the index page: its latest sweep, kept whole.

use std::sync::Arc;
use std::time::Duration;

use crate::config::Target;
use crate::stats::probe::ProbeResult;
use crate::stats::report::SweepReport;

/// The last probe between sweeps of a target, for the index page.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeSeen {
    /// Whether the server served it.
    pub served: bool,
    /// Its outcome label.
    pub outcome: &'static str,
    /// Its TTFT, seconds, when served.
    pub ttft: Option<f64>,
    /// How long llmprobe's own runtime stalled while it ran, seconds, when
    /// that explains its TTFT (the TTFT is then the client's, not shown).
    pub client_stall: Option<f64>,
    /// When it ended, Unix seconds.
    pub at_unix: f64,
}

/// Where a target stands, for the index page: the latest sweep's verdict.
#[derive(Debug, Clone, Default)]
pub struct TargetStatus {
    /// Target name.
    pub name: String,
    /// Model id measured.
    pub model: String,
    /// Unix time of the last completed sweep, if any.
    pub last_success_unix: Option<f64>,
    /// Why the last sweep failed, when it did (never holds a secret).
    pub last_error: Option<String>,
    /// The latest sweep's report, successful or not (for the pages' charts).
    pub report: Option<Arc<SweepReport>>,
    /// The target as configured (for the pages' configuration facts).
    pub target: Option<Arc<Target>>,
    /// The last probe between sweeps, if any was sent.
    pub probe: Option<ProbeSeen>,
    /// The loop's interval between sweeps, once the target is configured.
    pub interval: Option<Duration>,
}

/// Sweep intervals (each with a sweep's duration) without a sweep after
/// which a target is stale, as `LlmprobeSweepStale` and the overview
/// dashboard count...
pub const STALE_AFTER_INTERVALS: f64 = 3.0;
/// ...plus this, for scrape and evaluation delays.
pub const STALE_GRACE_SECONDS: f64 = 60.0;

impl TargetStatus {
    /// Where the target stands, in a word or two: "not measured yet", "ok",
    /// "setup error: CAUSE" or "sweep failed"; and whether that is good.
    pub fn state(&self) -> (&'static str, String) {
        match self.report.as_deref() {
            None => ("", "not measured yet".to_string()),
            Some(r) if r.success => ("ok", "ok".to_string()),
            Some(r) => match &r.setup_error {
                Some(e) => ("failed", format!("setup error: {}", e.cause.as_str())),
                None => ("failed", "sweep failed".to_string()),
            },
        }
    }

    /// [`TargetStatus::state`], or "stale" when no sweep has ended for as
    /// long as `LlmprobeSweepStale` waits: [`STALE_AFTER_INTERVALS`] times
    /// the interval and the last sweep's duration, plus a minute (the last
    /// state kept below it).
    pub fn health(&self, now_unix: f64) -> (&'static str, String) {
        let last = self
            .report
            .as_deref()
            .map(|r| (r.finished_at_unix_seconds, r.duration_seconds));
        match (last, self.interval) {
            (Some((at, took)), Some(every))
                if now_unix - at
                    > STALE_AFTER_INTERVALS * (every.as_secs_f64() + took)
                        + STALE_GRACE_SECONDS =>
            {
                let (_, state) = self.state();
                ("stale", format!("stale (last: {state})"))
            }
            _ => self.state(),
        }
    }

    /// Takes in a finished probe, ended at `at_unix`.
    pub fn record_probe(&mut self, r: &ProbeResult, at_unix: f64) {
        self.probe = Some(ProbeSeen {
            served: r.outcome.served(),
            outcome: r.outcome.as_str(),
            ttft: r.ttft,
            client_stall: r.client_stall,
            at_unix,
        });
    }

    /// The last probe in a few words ("" before the first), and whether
    /// it was served.
    pub fn probe_line(&self, now_unix: f64) -> (&'static str, String) {
        let Some(p) = &self.probe else {
            return ("", String::new());
        };
        let ago = (now_unix - p.at_unix).max(0.0);
        match (p.served, p.ttft, p.client_stall) {
            // The metrics keep this TTFT out of the histograms; the page
            // does not show it as the server's either.
            (true, Some(_), Some(stall)) => (
                "ok",
                format!(
                    "{} (TTFT kept out: llmprobe stalled {:.0} ms, {ago:.0}s ago)",
                    p.outcome,
                    stall * 1000.0
                ),
            ),
            (true, Some(t), _) => (
                "ok",
                format!("{} (TTFT {:.0} ms, {ago:.0}s ago)", p.outcome, t * 1000.0),
            ),
            (true, None, _) => ("ok", format!("{} ({ago:.0}s ago)", p.outcome)),
            (false, _, _) => ("failed", format!("failing: {} ({ago:.0}s ago)", p.outcome)),
        }
    }

    /// The status of a target not swept yet.
    pub fn new(name: &str, model: &str) -> Self {
        TargetStatus {
            name: name.to_string(),
            model: model.to_string(),
            ..TargetStatus::default()
        }
    }

    /// Takes in a finished sweep: a success replaces the time of the last
    /// success and clears the error; a failure keeps that time.
    pub fn record(&mut self, report: &SweepReport) {
        self.record_shared(Arc::new(report.clone()));
    }

    /// [`TargetStatus::record`] of a report shared with its loop.
    pub fn record_shared(&mut self, shared: Arc<SweepReport>) {
        let report = &*shared;
        self.model = report.model.clone();
        if report.success {
            self.last_success_unix = Some(report.finished_at_unix_seconds);
            self.last_error = None;
        } else {
            self.last_error = report.error.clone();
        }
        self.report = Some(shared);
    }
}
