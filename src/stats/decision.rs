//! What a level's verdict says: the limit it is certain to break, its
//! decision and on what basis, the counts it rests on, at which confidence
//! (`stats::verdict` decides; the reports carry it).

use serde::{Deserialize, Serialize};

/// Which limit of the SLO a level is certain to break.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Breach {
    /// The shed ratio of the full level must exceed its limit.
    Shed,
    /// The error ratio of the full level must exceed its limit.
    Errors,
    /// The p95 latency of the full level must exceed its limit.
    #[serde(rename = "p95_latency")]
    Latency,
}

impl Breach {
    /// The value used in JSON and tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Breach::Shed => "shed",
            Breach::Errors => "errors",
            Breach::Latency => "p95_latency",
        }
    }
}

/// What a level's verdict decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// No evidence against the SLO: the level counts toward the knee.
    #[default]
    Pass,
    /// Evidence, at the stated confidence, that the level breaks the SLO.
    Break,
    /// Observed over a limit, without that evidence, at the request ceiling:
    /// the knee counts it as the level's last decided verdict on the same
    /// server; when there is none (or a pass, over the error limit, below a
    /// level that broke on errors) it neither raises nor lowers the knee
    /// ([`Verdict::counted_as`], [`Capacity::knee_undecided`]).
    Undecided,
}

impl Decision {
    /// The value used in JSON, tables and the `decision` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Pass => "pass",
            Decision::Break => "break",
            Decision::Undecided => "undecided",
        }
    }
}

/// Which test decided a level that did not pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// The shed ratio (503 and 429).
    Shed,
    /// The error ratio.
    Errors,
    /// The share of requests over the p95 limit (the order-statistic bound
    /// of the p95).
    P95Latency,
    /// No request of the level succeeded.
    NoSuccess,
}

impl Basis {
    /// The value used in JSON, tables and the `decided_by` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Basis::Shed => "shed",
            Basis::Errors => "errors",
            Basis::P95Latency => "p95_latency",
            Basis::NoSuccess => "no_success",
        }
    }
}

/// The counts a level's verdict rests on, from the requests that ended
/// (requests llmprobe cancelled aside).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Counts {
    /// Requests that ended: the shed and error ratios' denominator.
    pub ended: u64,
    /// Of those, successes.
    pub ok: u64,
    /// Shed (503) or rate limited (429).
    pub shed: u64,
    /// Failed for any other reason.
    pub failed: u64,
    /// In the latency decision (all that ended but shed ones).
    pub timed: u64,
    /// Of those, with a decision latency over the p95 limit.
    pub slow: u64,
}

#[cfg(test)]
impl Counts {
    /// Counts of `ended` requests, `failed` of them failed, all timed and
    /// none slow.
    pub fn errors(ended: u64, failed: u64) -> Counts {
        Counts {
            ended,
            ok: ended - failed,
            failed,
            timed: ended,
            ..Counts::default()
        }
    }
}

impl std::ops::Add for Counts {
    type Output = Counts;
    fn add(self, o: Counts) -> Counts {
        Counts {
            ended: self.ended + o.ended,
            ok: self.ok + o.ok,
            shed: self.shed + o.shed,
            failed: self.failed + o.failed,
            timed: self.timed + o.timed,
            slow: self.slow + o.slow,
        }
    }
}

/// Lower confidence bounds (Clopper-Pearson, at the verdict's confidence) on
/// the true ratios behind a level's evidence.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct LowerBounds {
    /// On the shed ratio.
    pub shed_ratio: f64,
    /// On the error ratio.
    pub error_ratio: f64,
    /// On the share of requests over the p95 limit (over 5%: the p95 is over it).
    pub slow_ratio: f64,
}

/// A level's verdict: the decision, which test made it, and the evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Verdict {
    /// Pass, break or undecided.
    pub decision: Decision,
    /// The test that decided a break, or found the level over a limit when
    /// undecided (None on a pass).
    pub decided_by: Option<Basis>,
    /// Requests the verdict rests on: this sweep's and those pooled from
    /// earlier sweeps.
    pub requests: u64,
    /// Earlier sweeps whose requests at this level were pooled in (0: this
    /// sweep's alone).
    pub pooled_sweeps: u32,
    /// Whether earlier evidence was left out because this sweep's differs
    /// from it beyond chance (the server changed).
    pub change_seen: bool,
    /// The confidence of the tests (`verdict_confidence`).
    pub confidence: f64,
    /// What the knee counted: the decision, or for an undecided level the
    /// last decided verdict of that level on the same server, else
    /// undecided (the level neither raises nor lowers the knee).
    pub counted_as: Decision,
    /// The bounds on the evidence.
    pub lower_bounds: LowerBounds,
    /// This sweep's counts (what later sweeps pool).
    pub counts: Counts,
}
