//! The per-target keys: those that `defaults:`, each target and
//! `target_template:` may all set, each declared once in
//! `per_target_keys!` with its type as written, its type once resolved, its
//! default and its checks. A target's value wins over `defaults:`, which
//! wins over the default; a table (`slo`) is merged key by key.
//!
//! **Adding a per-target key** is one entry in the list below:
//!
//! ```text
//! /// What it does (the doc of the file field and of `Target`'s).
//! top_p: f64 => Option<f64> = rule(|v| v).check(|p| share(*p)),
//! ```
//!
//! (`rule(|v| v.unwrap_or(DEFAULT))` for a key with a default, `.check(f)`
//! for each check, reported under the key where the value was set). From
//! the list follow the three file structs and their strict decoding
//! ([`super::file`]), the merge, the default and the checks ([`Settings::resolve`]),
//! and the field on [`super::resolved::Target`], where its consumer reads
//! it. Then docs/configuration.md (and `config/example.yaml`). The only
//! keys resolved by hand are those that depend on others: the TLS files and
//! the levels capped by `max_concurrency` ([`super::target`]).
//!
//! Why a macro: serde's `flatten` cannot be combined with
//! `deny_unknown_fields`, so each file struct is decoded through a flat
//! twin that holds its own keys and the list's, and then split; and
//! `Target` holds every key's resolved value as a field of its own.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::checks::{check_base_url, MAX_LEVEL, MAX_REQUESTS_PER_LEVEL};
use super::gentle::Resolution;
use super::probe::{ProbeFile, ProbeSettings};
use super::sustained::{SustainedFile, SustainedSearch};
use super::values::{
    is_reserved_body_key, Api, MaxTokensField, RequestsPerLevel, ServerMetricsUrl, BODY_KEYS,
};

/// The one list of per-target keys: calls `$then! { $($pass)* [keys] }`.
/// Each entry: doc comments, at most one `#[serde(...)]` (for the file
/// structs), `name: type as written => type resolved = rule`. Types are
/// full paths (the list is expanded in other modules); the rule is
/// expanded in this one.
macro_rules! per_target_keys {
    ($then:ident ! { $($pass:tt)* }) => {
        $then! { $($pass)* [
            /// Requests sent first and not counted.
            warmup_requests: u32 => u32 = rule(|v| v.unwrap_or(2))
                .check(|n| at_most(u64::from(*n), MAX_REQUESTS_PER_LEVEL)),
            /// Concurrency levels, increasing (capped by `max_concurrency`).
            levels: Vec<u32> => Vec<u32> = rule(|v| v.unwrap_or_else(|| vec![1, 2, 4, 8, 16]))
                .check(|l| increasing_levels(l)),
            /// Requests per level: `Nx` (N times the concurrency) or a number.
            requests_per_level: $crate::config::values::RequestsPerLevel
                => $crate::config::values::RequestsPerLevel
                = rule(|v| v.unwrap_or(RequestsPerLevel::PerConcurrency(3.0))),
            /// Lower bound on requests per level.
            min_requests_per_level: u32 => u32 = rule(|v| v.unwrap_or(8)),
            /// Limit on one request.
            #[serde(default, with = "humantime_serde")]
            request_timeout: std::time::Duration => std::time::Duration
                = rule(|v| v.unwrap_or(Duration::from_secs(120)))
                .check_at_target("", |t| more_than_zero(*t)),
            /// Acceptance limits of a level.
            slo: $crate::config::keys::SloFile => $crate::config::keys::Slo
                = rule(|v| Slo::from_file(v.unwrap_or_default()))
                .check_at_target(".max_shed_ratio", |s| share(s.max_shed_ratio))
                .check_at_target(".max_error_ratio", |s| share(s.max_error_ratio)),
            /// Knee fraction recommended as max_in_flight:
            /// floor(knee x headroom).
            headroom: f64 => f64 = rule(|v| v.unwrap_or(0.9)).check(|h| headroom(*h)),
            /// Highest level sent to the target (no default: every level).
            max_concurrency: u32 => Option<u32> = rule(|v| v)
                .check_at_target("", |m| m.map_or(Ok(()), at_least_one)),
            /// Request field that carries the output limit; None: not
            /// configured, so every answer is checked: `max_completion_tokens`
            /// first, then `max_tokens`, then both, when it does not bound
            /// the output.
            max_tokens_field: $crate::config::values::MaxTokensField
                => Option<$crate::config::values::MaxTokensField> = rule(|v| v),
            /// Endpoint kind the requests go to: `chat` or `completions`.
            api: $crate::config::values::Api => $crate::config::values::Api
                = rule(|v| v.unwrap_or_default()),
            /// Nucleus sampling sent with every request (unset: not sent).
            top_p: f64 => Option<f64> = rule(|v| v).check(|p| p.map_or(Ok(()), top_p)),
            /// Engine-specific body keys sent verbatim with every request
            /// (none that llmprobe sets or that has a key of its own).
            extra_body: std::collections::BTreeMap<String, serde_json::Value>
                => std::collections::BTreeMap<String, serde_json::Value>
                = rule(|v| v.unwrap_or_default()).check(|m| no_reserved_body_keys(m)),
            /// PEM roots that replace the built-in ones for this server.
            ca_file: std::path::PathBuf => Option<std::path::PathBuf> = rule(|v| v),
            /// PEM client certificate chain for mutual TLS (with `key_file`).
            cert_file: std::path::PathBuf => Option<std::path::PathBuf> = rule(|v| v),
            /// PEM private key of `cert_file`.
            key_file: std::path::PathBuf => Option<std::path::PathBuf> = rule(|v| v),
            /// Stop a level as soon as it is certain to break the SLO: the
            /// verdict is the one the full level would reach (see
            /// docs/measuring.md), with fewer requests and less time above
            /// the knee.
            early_stop: bool => bool = rule(|v| v.unwrap_or(true)),
            /// Locate the knee between two configured levels to this
            /// resolution: `off`, a share like `25%`, or a count like `1`.
            /// Off unless asked: probing between two configured levels costs
            /// requests above the last passed level on every sweep (about as
            /// many as early stop and warm start save, in the benchmark).
            refine_resolution: $crate::config::gentle::Resolution
                => $crate::config::gentle::Resolution
                = rule(|v| v.unwrap_or(Resolution::Off)),
            /// A full climb from the lowest level every this many sweeps;
            /// the others start near the last knee (1: always full).
            full_sweep_every: u32 => u32 = rule(|v| v.unwrap_or(6)).check(|n| {
                at_least_one(*n).map_err(|e| {
                    format!("{e} (1: every sweep climbs from the lowest level)")
                })
            }),
            /// Confidence at which a level's verdict says it breaks the SLO
            /// (see docs/measuring.md).
            verdict_confidence: f64 => f64 = rule(|v| v.unwrap_or(VERDICT_CONFIDENCE))
                .check(|c| confidence(*c)),
            /// An undecided level sends its planned count again, up to this
            /// many times in all (1: never more).
            verdict_ceiling: u32 => u32 = rule(|v| v.unwrap_or(VERDICT_CEILING)).check(|n| {
                at_least_one(*n).map_err(|e| {
                    format!("{e} (1: an undecided level sends no more requests)")
                })
            }),
            /// Where the server's own Prometheus metrics are read during
            /// each level: a URL, or `off`; unset: `/metrics` beside `/v1`,
            /// when it answers with a known engine's figures.
            server_metrics_url: String => $crate::config::values::ServerMetricsUrl
                = rule(ServerMetricsUrl::from_file).check(|u| metrics_url(u)),
            /// How often they are read while a level runs (at least 50ms:
            /// each read parses the whole exposition).
            #[serde(default, with = "humantime_serde")]
            server_metrics_period: std::time::Duration => std::time::Duration
                = rule(|v| v.unwrap_or(Duration::from_millis(250)))
                .check(|d| at_least(*d, Duration::from_millis(50))),
            /// The open-loop search for the highest arrival rate within the
            /// SLO (see docs/measuring.md): how often, how arrivals come,
            /// its resolution and budget.
            sustained: $crate::config::sustained::SustainedFile
                => $crate::config::sustained::SustainedSearch
                = rule(|v| SustainedSearch::from_file(v.unwrap_or_default()))
                .check_at_target("", |s| sustained_problems(s)),
            /// The light probes sent between sweeps, one at a time on a
            /// Poisson schedule (see docs/measuring.md): their mean
            /// interval (`0s`: none), workload, output budget, when one is
            /// cold, and seed.
            probe: $crate::config::probe::ProbeFile
                => $crate::config::probe::ProbeSettings
                = rule(|v| ProbeSettings::from_file(v.unwrap_or_default()))
                .check_at_target("", |p| probe_problems(p)),
            /// Whether requests may go through a proxy: `off` (the default:
            /// `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` are ignored) or
            /// `environment` (they apply, with `NO_PROXY`; loopback and the
            /// built-in engine are never proxied).
            proxy: $crate::config::proxy::ProxyMode => $crate::config::proxy::ProxyMode
                = rule(|v| v.unwrap_or_default()),
        ] }
    };
}

pub(crate) use per_target_keys;

/// Confidence of a level's verdict: a level breaks on a ratio or its p95
/// only when the evidence says so at 95% (the usual one-sided level).
pub const VERDICT_CONFIDENCE: f64 = 0.95;

/// Times an undecided level's planned count it may send in all: enough for
/// one error of eight at a 5% limit to be decided (1 of 24 is within it),
/// bounded so that a doubtful level costs at most 4x.
pub const VERDICT_CEILING: u32 = 4;

/// Defines [`Settings`] (as written), [`Keys`] (resolved) and the steps
/// between them from the list.
macro_rules! define_keys {
    ([ $( $(#[doc = $doc:literal])* $(#[serde $serde:tt])?
          $field:ident : $ty:ty => $rty:ty = $rule:expr, )* ]) => {
        /// The per-target keys as written at one level (`defaults:`, a
        /// target, `target_template:`): every key optional.
        #[derive(Debug, Clone, Default, PartialEq, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct Settings {
            $( $(#[doc = $doc])* $(#[serde $serde])? pub $field: Option<$ty>, )*
        }

        /// The per-target keys resolved: every default applied, every
        /// check run. [`super::resolved::Target`] holds each as a field.
        #[derive(Debug, Clone, PartialEq)]
        pub struct Keys {
            $( $(#[doc = $doc])* pub $field: $rty, )*
        }

        impl Settings {
            /// The merge: `self`'s values where set, else `base`'s (a table
            /// key by key: see [`Merge`]).
            pub fn or(&self, base: &Settings) -> Settings {
                Settings {
                    $( $field: Merge::merge(self.$field.as_ref(), base.$field.as_ref()), )*
                }
            }

            /// Each key of `self` (the merged values) resolved by its rule,
            /// in the list's order; `at(key)` names where a value was set
            /// (see [`Names`]).
            pub fn resolve(&self, names: &Names<'_>, bad: &mut dyn FnMut(&str, String)) -> Keys {
                Keys {
                    $( $field: {
                        let rule: Rule<$ty, $rty> = $rule;
                        rule.apply(self.$field.clone(), stringify!($field), names, bad)
                    }, )*
                }
            }
        }
    };
}

per_target_keys!(define_keys! {});

/// Where a problem with a key is reported: under the target's key, or
/// under `defaults.KEY` for a value it inherits.
pub struct Names<'a> {
    /// The target's key (`targets[0] (w1)`, `target_template`).
    pub target: &'a str,
    /// The keys the target (or its template) sets itself.
    pub own: &'a Settings,
}

impl Names<'_> {
    /// The target's `field`.
    pub fn target(&self, field: &str) -> String {
        format!("{}.{field}", self.target)
    }

    /// `field` where it was set: the target's, else `defaults.`.
    pub fn at(&self, field: &str, set_here: bool) -> String {
        if set_here {
            self.target(field)
        } else {
            format!("defaults.{field}")
        }
    }
}

/// One key's rule: how its merged value (None: set nowhere) becomes the
/// resolved one, then the checks of the result.
pub struct Rule<W, R> {
    resolve: fn(Option<W>) -> R,
    checks: Vec<(Where, Check<R>)>,
}

/// A check of a resolved value: Err(what is wrong).
type Check<R> = fn(&R) -> Result<(), String>;

/// Where a check's problem is named.
enum Where {
    /// Where the value was set (the target, or `defaults:`).
    Set,
    /// Always under the target's key, with this suffix (`.max_shed_ratio`).
    Target(&'static str),
}

/// A rule resolving the merged value with `resolve` (the default goes there).
pub fn rule<W, R>(resolve: fn(Option<W>) -> R) -> Rule<W, R> {
    Rule {
        resolve,
        checks: Vec::new(),
    }
}

impl<W, R> Rule<W, R> {
    /// Adds a check, reported under the key where the value was set.
    pub fn check(mut self, check: Check<R>) -> Self {
        self.checks.push((Where::Set, check));
        self
    }

    /// Adds a check reported under the target's own key (plus `suffix`),
    /// even for an inherited value.
    pub fn check_at_target(mut self, suffix: &'static str, check: Check<R>) -> Self {
        self.checks.push((Where::Target(suffix), check));
        self
    }

    fn apply(
        self,
        merged: Option<W>,
        field: &str,
        names: &Names<'_>,
        bad: &mut dyn FnMut(&str, String),
    ) -> R {
        let value = (self.resolve)(merged);
        for (at, check) in &self.checks {
            if let Err(e) = check(&value) {
                let key = match at {
                    Where::Set => names.at(field, names.own.is_set(field)),
                    Where::Target(suffix) => names.target(&format!("{field}{suffix}")),
                };
                bad(&key, e);
            }
        }
        value
    }
}

/// Defines [`Settings::is_set`] from the list.
macro_rules! define_is_set {
    ([ $( $(#[doc = $doc:literal])* $(#[serde $serde:tt])?
          $field:ident : $ty:ty => $rty:ty = $rule:expr, )* ]) => {
        impl Settings {
            /// Whether the key named `field` is set here.
            pub fn is_set(&self, field: &str) -> bool {
                match field {
                    $( stringify!($field) => self.$field.is_some(), )*
                    _ => false,
                }
            }
        }
    };
}

per_target_keys!(define_is_set! {});

// The checks the list names.

fn at_most(n: u64, max: u64) -> Result<(), String> {
    if n > max {
        return Err(format!("must be at most {max}"));
    }
    Ok(())
}

fn at_least_one(n: u32) -> Result<(), String> {
    if n == 0 {
        return Err("must be at least 1".into());
    }
    Ok(())
}

fn more_than_zero(d: Duration) -> Result<(), String> {
    if d.is_zero() {
        return Err("must be more than 0s".into());
    }
    Ok(())
}

fn metrics_url(u: &ServerMetricsUrl) -> Result<(), String> {
    match u {
        ServerMetricsUrl::At(url) => check_base_url(url)
            .map(drop)
            .map_err(|e| format!("{e} (or `off`)")),
        _ => Ok(()),
    }
}

fn at_least(d: Duration, min: Duration) -> Result<(), String> {
    if d < min {
        return Err(format!(
            "must be at least {}",
            humantime::format_duration(min)
        ));
    }
    Ok(())
}

fn sustained_problems(s: &SustainedSearch) -> Result<(), String> {
    match s.problems().first() {
        None => Ok(()),
        Some((key, why)) => Err(format!("{} {why}", key.trim_start_matches('.'))),
    }
}

fn probe_problems(p: &ProbeSettings) -> Result<(), String> {
    match p.problems().first() {
        None => Ok(()),
        Some((key, why)) => Err(format!("{} {why}", key.trim_start_matches('.'))),
    }
}

fn share(x: f64) -> Result<(), String> {
    if !(0.0..=1.0).contains(&x) {
        return Err("must be between 0 and 1".into());
    }
    Ok(())
}

fn confidence(c: f64) -> Result<(), String> {
    if !(0.5..1.0).contains(&c) {
        return Err(format!("must be in [0.5, 1), got {c}"));
    }
    Ok(())
}

fn headroom(h: f64) -> Result<(), String> {
    if !(h > 0.0 && h <= 1.0) {
        return Err(format!("must be in (0, 1], got {h}"));
    }
    Ok(())
}

fn top_p(p: f64) -> Result<(), String> {
    if !(p > 0.0 && p <= 1.0) {
        return Err(format!("must be in (0, 1], got {p}"));
    }
    Ok(())
}

/// `extra_body` adds keys, and replaces none that llmprobe sets itself.
fn no_reserved_body_keys(extra: &BTreeMap<String, serde_json::Value>) -> Result<(), String> {
    let reserved: Vec<String> = extra
        .keys()
        .filter(|k| is_reserved_body_key(k))
        .map(|k| format!("`{k}`"))
        .collect();
    if reserved.is_empty() {
        return Ok(());
    }
    let it = if reserved.len() == 1 { "it" } else { "them" };
    let own: Vec<String> = BODY_KEYS.iter().map(|k| format!("`{k}`")).collect();
    Err(format!(
        "{} cannot be set here: llmprobe sets {it} itself, and the measurement depends on {it} \
         (`temperature` and {} have keys of their own)",
        reserved.join(", "),
        own.join(", "),
    ))
}

fn increasing_levels(levels: &[u32]) -> Result<(), String> {
    if levels.is_empty() {
        Err("is empty".into())
    } else if levels.contains(&0) {
        Err("a level must be at least 1".into())
    } else if levels.iter().any(|&l| l > MAX_LEVEL) {
        Err(format!("a level must be at most {MAX_LEVEL}"))
    } else if levels.windows(2).any(|w| w[1] <= w[0]) {
        Err(format!("must be strictly increasing, got {levels:?}"))
    } else {
        Ok(())
    }
}

/// `slo:` as written: latency and failure limits that decide whether a
/// level is acceptable.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SloFile {
    /// p95 end-to-end latency limit.
    #[serde(default, with = "humantime_serde")]
    pub p95_latency: Option<Duration>,
    /// Highest acceptable fraction of shed (503/429) requests.
    pub max_shed_ratio: Option<f64>,
    /// Highest acceptable fraction of other failures.
    pub max_error_ratio: Option<f64>,
}

/// Acceptance limits of a level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slo {
    /// p95 latency limit.
    pub p95_latency: Duration,
    /// Highest acceptable shed ratio.
    pub max_shed_ratio: f64,
    /// Highest acceptable error ratio.
    pub max_error_ratio: f64,
}

impl Slo {
    /// `slo:` with the default of each limit it does not set (30s, 5%, 5%).
    pub fn from_file(f: SloFile) -> Slo {
        Slo {
            p95_latency: f.p95_latency.unwrap_or(Duration::from_secs(30)),
            max_shed_ratio: f.max_shed_ratio.unwrap_or(0.05),
            max_error_ratio: f.max_error_ratio.unwrap_or(0.05),
        }
    }
}

/// How one setting written at two levels combines: the nearer one wins,
/// except that a table is merged key by key.
pub trait Merge: Clone {
    /// `near` over `far`.
    fn merge(near: Option<&Self>, far: Option<&Self>) -> Option<Self> {
        near.or(far).cloned()
    }
}

impl Merge for u32 {}
impl Merge for f64 {}
impl Merge for Vec<u32> {}
impl Merge for Duration {}
impl Merge for RequestsPerLevel {}
impl Merge for MaxTokensField {}
impl Merge for Api {}

/// Merged key by key, as `slo`: a target adds to the keys of `defaults:`,
/// and replaces those it sets again.
impl Merge for BTreeMap<String, serde_json::Value> {
    fn merge(near: Option<&Self>, far: Option<&Self>) -> Option<Self> {
        match (near, far) {
            (Some(n), Some(f)) => {
                let mut merged = f.clone();
                merged.extend(n.iter().map(|(k, v)| (k.clone(), v.clone())));
                Some(merged)
            }
            (n, f) => n.or(f).cloned(),
        }
    }
}
impl Merge for std::path::PathBuf {}
impl Merge for bool {}
impl Merge for String {}
impl Merge for Resolution {}
impl Merge for super::proxy::ProxyMode {}

impl Merge for SustainedFile {
    fn merge(near: Option<&Self>, far: Option<&Self>) -> Option<Self> {
        super::sustained::merge(near, far)
    }
}

impl Merge for ProbeFile {
    fn merge(near: Option<&Self>, far: Option<&Self>) -> Option<Self> {
        super::probe::merge(near, far)
    }
}

impl Merge for SloFile {
    fn merge(near: Option<&Self>, far: Option<&Self>) -> Option<Self> {
        match (near, far) {
            (Some(n), Some(f)) => Some(SloFile {
                p95_latency: n.p95_latency.or(f.p95_latency),
                max_shed_ratio: n.max_shed_ratio.or(f.max_shed_ratio),
                max_error_ratio: n.max_error_ratio.or(f.max_error_ratio),
            }),
            (n, f) => n.or(f).cloned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearer_values_win_and_the_slo_merges_key_by_key() {
        let near = Settings {
            levels: Some(vec![1, 2]),
            slo: Some(SloFile {
                max_shed_ratio: Some(0.2),
                ..Default::default()
            }),
            ..Default::default()
        };
        let far = Settings {
            levels: Some(vec![4]),
            headroom: Some(0.5),
            slo: Some(SloFile {
                p95_latency: Some(Duration::from_secs(3)),
                max_shed_ratio: Some(0.1),
                max_error_ratio: None,
            }),
            ..Default::default()
        };
        let m = near.or(&far);
        assert_eq!(m.levels, Some(vec![1, 2]));
        assert_eq!(m.headroom, Some(0.5));
        assert_eq!(m.warmup_requests, None);
        let slo = m.slo.unwrap();
        assert_eq!(slo.p95_latency, Some(Duration::from_secs(3)));
        assert_eq!(slo.max_shed_ratio, Some(0.2));
        assert_eq!(slo.max_error_ratio, None);
    }

    #[test]
    fn defaults_apply_and_problems_name_where_the_value_was_set() {
        let own = Settings {
            headroom: Some(2.0),
            ..Default::default()
        };
        let defaults = Settings {
            full_sweep_every: Some(0),
            request_timeout: Some(Duration::ZERO),
            ..Default::default()
        };
        let names = Names {
            target: "targets[0] (w1)",
            own: &own,
        };
        let mut problems = Vec::new();
        let keys = own
            .or(&defaults)
            .resolve(&names, &mut |k, m| problems.push(format!("{k}: {m}")));
        assert_eq!(keys.warmup_requests, 2);
        assert_eq!(keys.levels, vec![1, 2, 4, 8, 16]);
        assert_eq!(keys.max_concurrency, None);
        assert_eq!(keys.slo.max_shed_ratio, 0.05);
        assert_eq!(
            problems,
            [
                "targets[0] (w1).request_timeout: must be more than 0s",
                "targets[0] (w1).headroom: must be in (0, 1], got 2",
                "defaults.full_sweep_every: must be at least 1 (1: every sweep climbs from the lowest level)",
            ]
        );
    }
}
