//! What one probe between sweeps says: its outcome class (a request's, or
//! `reasoning_budget` for a model that spent the whole budget thinking),
//! whether it met a cold model, and what it cost. Pure: the probe stream
//! (`sweep::probe_stream`) measures, this judges, the sinks export.

use std::collections::VecDeque;
use std::time::Duration;

use crate::stats::sample::{Outcome, Sample};

/// How a probe ended: one per probe (the `outcome` label of
/// `llmprobe_probe_requests_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// As a measured request ends ([`Outcome`]).
    Request(Outcome),
    /// The stream completed, but the output budget went on reasoning before
    /// any answer token: the server works, the probe was too small to see
    /// an answer. Neither ok nor an error.
    ReasoningBudget,
}

impl ProbeOutcome {
    /// Every outcome a probe can report, in exposition order (a cancelled
    /// probe is not reported).
    pub const ALL: [ProbeOutcome; 9] = [
        ProbeOutcome::Request(Outcome::Ok),
        ProbeOutcome::ReasoningBudget,
        ProbeOutcome::Request(Outcome::Shed),
        ProbeOutcome::Request(Outcome::RateLimited),
        ProbeOutcome::Request(Outcome::HttpError),
        ProbeOutcome::Request(Outcome::Timeout),
        ProbeOutcome::Request(Outcome::ConnectError),
        ProbeOutcome::Request(Outcome::ProxyError),
        ProbeOutcome::Request(Outcome::ProtocolError),
    ];

    /// The outcome of a finished probe.
    pub fn of(sample: &Sample) -> ProbeOutcome {
        let thought_only = sample.thinking.chunks > 0 && sample.answer_ttft().is_none();
        match sample.outcome {
            Outcome::Ok if thought_only => ProbeOutcome::ReasoningBudget,
            o => ProbeOutcome::Request(o),
        }
    }

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeOutcome::Request(o) => o.as_str(),
            ProbeOutcome::ReasoningBudget => "reasoning_budget",
        }
    }

    /// Whether the server served the probe: it answered (or began to, in
    /// thought). The availability indicator counts these as good.
    pub fn served(self) -> bool {
        matches!(
            self,
            ProbeOutcome::Request(Outcome::Ok) | ProbeOutcome::ReasoningBudget
        )
    }
}

/// Why a probe counts as a cold start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cold {
    /// No request from llmprobe for longer than `probe.cold_after` before it.
    Idle,
    /// Its TTFT was far above the recent warm ones ([`ColdRule`]), and the
    /// probe before it was not.
    Outlier,
}

impl Cold {
    /// In words, for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Cold::Idle => "idle",
            Cold::Outlier => "outlier",
        }
    }
}

/// Warm TTFTs the outlier rule compares with.
const WARM_WINDOW: usize = 16;
/// Fewest warm TTFTs before the outlier rule applies.
const MIN_WARM: usize = 4;
/// A TTFT this many times the warm median...
const OUTLIER_FACTOR: f64 = 10.0;
/// ...and at least this much above it is an outlier.
const OUTLIER_MARGIN: f64 = 1.0;

/// Tells cold starts from warm probes: a probe is cold after an idle
/// period longer than `cold_after`, or when its TTFT is above both 10 times
/// the median of the last 16 warm ones (at least 4 of them) and that
/// median plus 1 s, unless the probe before was such an outlier too: a
/// model loads once, so a second slow probe in a row is the server being
/// slow, and counts as warm.
#[derive(Debug, Clone)]
pub struct ColdRule {
    cold_after: Duration,
    warm: VecDeque<f64>,
    last_was_outlier: bool,
}

impl ColdRule {
    /// No warm probe seen yet.
    pub fn new(cold_after: Duration) -> Self {
        ColdRule {
            cold_after,
            warm: VecDeque::with_capacity(WARM_WINDOW),
            last_was_outlier: false,
        }
    }

    /// Judges one served probe with its TTFT, sent `idle` after the last
    /// request from llmprobe ended (None: none since the start); a warm one
    /// joins the window.
    pub fn judge(&mut self, idle: Option<Duration>, ttft: Duration) -> Option<Cold> {
        let ttft = ttft.as_secs_f64();
        let outlier = self
            .median()
            .is_some_and(|m| ttft > (m * OUTLIER_FACTOR).max(m + OUTLIER_MARGIN));
        let cold = if idle.is_some_and(|i| i > self.cold_after) {
            Some(Cold::Idle)
        } else if outlier && !self.last_was_outlier {
            Some(Cold::Outlier)
        } else {
            None
        };
        self.last_was_outlier = outlier;
        if cold.is_none() {
            if self.warm.len() == WARM_WINDOW {
                self.warm.pop_front();
            }
            self.warm.push_back(ttft);
        }
        cold
    }

    /// A probe that was not served breaks a run of outliers.
    pub fn failed(&mut self) {
        self.last_was_outlier = false;
    }

    fn median(&self) -> Option<f64> {
        if self.warm.len() < MIN_WARM {
            return None;
        }
        let mut v: Vec<f64> = self.warm.iter().copied().collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        Some(if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        })
    }
}

/// A wake-up of the client's runtime at least this late (seconds) while a
/// probe ran...
const STALL_FLOOR: f64 = 0.05;
/// ...and at least this share of the probe's TTFT makes the TTFT the
/// client's: without the stall it would be under three quarters of what was
/// read, so a TTFT over an SLO threshold may be the host's (a stalled or
/// throttled process), not the server's, and an alert on it would page for
/// nothing. A slow server with a passing hiccup keeps its TTFT.
const STALL_SHARE: f64 = 0.25;

/// Whether the client's longest wake-up delay while a probe ran (`stall`,
/// seconds) can explain the probe's `ttft` (seconds).
fn client_stalled(stall: f64, ttft: f64) -> bool {
    stall >= STALL_FLOOR && stall >= STALL_SHARE * ttft
}

/// Why a scheduled probe was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// llmprobe was sweeping the target: probes pause.
    Sweeping,
    /// The probe before was still in flight at its time (one at a time).
    Overlap,
    /// The client reached its time too late (a stalled process): missed
    /// arrivals are not sent afterwards in a burst.
    Late,
}

impl Skip {
    /// Every reason, in exposition order.
    pub const ALL: [Skip; 3] = [Skip::Sweeping, Skip::Overlap, Skip::Late];

    /// The `reason` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Skip::Sweeping => "sweeping",
            Skip::Overlap => "overlap",
            Skip::Late => "late",
        }
    }
}

/// One finished probe, as the sinks receive it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeResult {
    /// How it ended.
    pub outcome: ProbeOutcome,
    /// Send to first token (thinking or answer), seconds, when served.
    pub ttft: Option<f64>,
    /// Send to the last token, seconds, when served.
    pub latency: Option<f64>,
    /// Set when it met a cold model: its TTFT is kept apart.
    pub cold: Option<Cold>,
    /// The client's longest wake-up delay while the probe ran, seconds, set
    /// when it can explain the TTFT (`client_stalled`): the TTFT and
    /// latency are the client's, and kept out.
    pub client_stall: Option<f64>,
    /// Actual minus scheduled send, seconds.
    pub dispatch_lag: f64,
    /// Prompt tokens, when the server reported them.
    pub prompt_tokens: u64,
    /// Output tokens (thinking included).
    pub output_tokens: u64,
    /// Of which reasoning.
    pub reasoning_tokens: u64,
    /// What went wrong, for logs (redacted, cut).
    pub error: Option<String>,
}

impl ProbeResult {
    /// The result of `sample`, with the client's longest wake-up delay
    /// while it ran (`stall`, seconds); not judged cold (the caller's
    /// [`ColdRule`] sets `cold`, leaving out a TTFT that was the client's).
    pub fn of(sample: &Sample, dispatch_lag: f64, stall: f64) -> ProbeResult {
        let outcome = ProbeOutcome::of(sample);
        let served = outcome.served();
        let ttft = sample.ttft.filter(|_| served).map(|d| d.as_secs_f64());
        ProbeResult {
            outcome,
            ttft,
            latency: sample.latency.filter(|_| served).map(|d| d.as_secs_f64()),
            cold: None,
            client_stall: ttft.filter(|t| client_stalled(stall, *t)).map(|_| stall),
            dispatch_lag,
            prompt_tokens: sample.prompt_tokens.unwrap_or(0),
            output_tokens: sample.output_tokens,
            reasoning_tokens: sample.reasoning_tokens().0,
            error: sample.error.clone(),
        }
    }
}

/// What the probe stream of a target tells the sinks.
#[derive(Debug, Clone, PartialEq)]
pub enum ProbeEvent {
    /// A probe finished.
    Probed(ProbeResult),
    /// A scheduled probe was not sent.
    Skipped(Skip),
    /// Probes paused (true) for a sweep of the target, or resumed (false).
    Paused(bool),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::sample::Thinking;

    fn ok() -> Sample {
        let mut s = Sample::failed(Outcome::Ok, Some(200), "");
        s.error = None;
        s.ttft = Some(Duration::from_millis(20));
        s.latency = Some(Duration::from_millis(90));
        s.output_tokens = 16;
        s
    }

    #[test]
    fn a_budget_spent_thinking_is_its_own_outcome() {
        let mut thought = ok();
        thought.thinking = Thinking {
            answer_ttft: None,
            chunks: 16,
            usage_tokens: None,
            fields: Default::default(),
        };
        assert_eq!(ProbeOutcome::of(&thought), ProbeOutcome::ReasoningBudget);
        assert!(ProbeOutcome::of(&thought).served());
        let r = ProbeResult::of(&thought, 0.0, 0.0);
        assert_eq!((r.reasoning_tokens, r.output_tokens), (16, 16));
        let mut answered = thought.clone();
        answered.thinking.answer_ttft = Some(Duration::from_millis(80));
        assert_eq!(
            ProbeOutcome::of(&answered),
            ProbeOutcome::Request(Outcome::Ok)
        );
        assert_eq!(ProbeOutcome::of(&ok()).as_str(), "ok");
        let refused = Sample::failed(Outcome::ConnectError, None, "refused");
        assert!(!ProbeOutcome::of(&refused).served());
        let labels: Vec<&str> = ProbeOutcome::ALL.iter().map(|o| o.as_str()).collect();
        assert!(labels.contains(&"reasoning_budget") && !labels.contains(&"cancelled"));
    }

    #[test]
    fn a_ttft_the_client_stall_explains_is_the_clients() {
        let mut slow = ok();
        slow.ttft = Some(Duration::from_millis(2_500));
        // A 2 s stall in a 2.5 s TTFT: the host's.
        assert_eq!(ProbeResult::of(&slow, 0.0, 2.0).client_stall, Some(2.0));
        // A 100 ms hiccup in a slow server's 2.5 s: the server's.
        assert_eq!(ProbeResult::of(&slow, 0.0, 0.1).client_stall, None);
        // Timer jitter beside a fast TTFT: under the floor.
        assert_eq!(ProbeResult::of(&ok(), 0.0, 0.02).client_stall, None);
        assert_eq!(ProbeResult::of(&ok(), 0.0, 0.05).client_stall, Some(0.05));
        // No TTFT to explain: a probe not served keeps its outcome only.
        let refused = Sample::failed(Outcome::ConnectError, None, "refused");
        assert_eq!(ProbeResult::of(&refused, 0.0, 3.0).client_stall, None);
    }

    #[test]
    fn idle_probes_are_cold_and_stay_out_of_the_window() {
        let mut rule = ColdRule::new(Duration::from_secs(300));
        let ms = Duration::from_millis;
        assert_eq!(rule.judge(None, ms(30_000)), None, "nothing to compare yet");
        let mut rule = ColdRule::new(Duration::from_secs(300));
        assert_eq!(
            rule.judge(Some(Duration::from_secs(301)), ms(70_000)),
            Some(Cold::Idle)
        );
        assert!(rule.warm.is_empty());
        assert_eq!(rule.judge(Some(Duration::from_secs(30)), ms(20)), None);
        assert_eq!(rule.warm.len(), 1);
    }

    #[test]
    fn the_first_far_outlier_is_cold_the_second_in_a_row_is_the_server() {
        let mut rule = ColdRule::new(Duration::from_secs(300));
        let ms = Duration::from_millis;
        let idle = Some(Duration::from_secs(20));
        for t in [20, 22, 19, 21] {
            assert_eq!(rule.judge(idle, ms(t)), None);
        }
        // 10x the median (20.5 ms) is not enough: the margin is 1 s.
        assert_eq!(rule.judge(idle, ms(400)), None);
        assert_eq!(rule.judge(idle, ms(5_000)), Some(Cold::Outlier));
        assert_eq!(rule.judge(idle, ms(5_000)), None, "slow twice: warm");
        assert_eq!(rule.judge(idle, ms(5_000)), None);
        // A failure between two outliers: the next outlier is a load again.
        rule.failed();
        let median_now = rule.median().unwrap();
        assert!(median_now < 1.0, "{median_now}");
    }
}
