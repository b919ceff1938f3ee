//! The engine's signals and the limit that binds, in words: the phrases
//! the terminal table and the HTML pages share.

use std::fmt::Write;

use crate::stats::report::Limit;
use crate::stats::report::{Capacity, SweepReport, WorkloadReport};
use crate::stats::server::{GaugeStat, MetricsSource};

/// What binds at the knee, and what an operator does about it.
pub fn limit_meaning(limit: Limit) -> &'static str {
    match limit {
        Limit::Queue => {
            "requests waited at the server, which ran fewer than were in flight: its batch cap \
             binds (raise max_num_seqs or its equivalent, if memory allows)"
        }
        Limit::KvCache => {
            "the KV cache was full or sequences were preempted: add GPU memory, shorten \
             contexts or lower max_model_len"
        }
        Limit::Compute => {
            "every request ran and each step got slower: more GPUs, a smaller model or a \
             faster engine"
        }
        Limit::Shed => {
            "the server or a gateway declined requests (503): its admission limit binds; raise it \
             if the engine's figures show room (nothing waiting, KV cache not full)"
        }
        Limit::RateLimited => "a rate limiter answered 429: raise the rate limit",
        Limit::Errors => "requests failed: see the errors below",
        Limit::ErrorsAtEveryLoad => {
            "requests fail whatever the load (at the lowest level too): a health problem, \
             not capacity; see the errors below"
        }
        Limit::Latency => {
            "latency broke, and the server's metrics do not tell why (none were read)"
        }
        Limit::LatencyAtEveryLoad => {
            "requests run over the p95 limit whatever the load (at the lowest level too): \
             outliers at any load or a server too slow for this SLO; a health problem, not \
             capacity"
        }
        Limit::NotReached => "no level broke the SLO: capacity is at least the knee",
    }
}

/// `limit: queue (what it means)`, when the report has one.
pub fn limit_line(c: &Capacity) -> Option<String> {
    c.limit
        .map(|l| format!("limit: {} ({})", l.as_str(), limit_meaning(l)))
}

/// Where the server's metrics were read, in words.
pub fn server_metrics_line(r: &SweepReport) -> String {
    let s = &r.server_metrics;
    let what = match (s.source, &s.url, &s.engine) {
        (MetricsSource::Off, ..) => "off (server_metrics_url: off)".to_string(),
        (MetricsSource::None, ..) => "none found".to_string(),
        // Without its scheme: the pages that show this line link to nothing
        // and fetch nothing.
        (source, Some(url), engine) => format!(
            "{} at {} ({})",
            engine.as_deref().unwrap_or("unknown engine"),
            url.split_once("://").map_or(url.as_str(), |(_, rest)| rest),
            match source {
                MetricsSource::Configured => "server_metrics_url",
                _ => "found beside /v1",
            }
        ),
        (_, None, _) => "none".to_string(),
    };
    match &s.note {
        Some(note) => format!("server metrics: {what}; {note}"),
        None => format!("server metrics: {what}"),
    }
}

fn stat(g: Option<GaugeStat>) -> (String, String) {
    g.map_or(("-".into(), "-".into()), |g| {
        (format!("{:.0}", g.max), format!("{:.1}", g.mean))
    })
}

/// The server's figures per level as table rows (with their header), and
/// each level's note; empty when no level read any.
pub fn server_rows(w: &WorkloadReport) -> Vec<String> {
    let read: Vec<_> = w
        .levels
        .iter()
        .filter_map(|l| l.server.as_ref().map(|s| (l.concurrency, s)))
        .collect();
    if read.is_empty() {
        return Vec::new();
    }
    let mut rows = vec![format!(
        "{:>5} {:>8} {:>8} {:>8} {:>8} {:>7} {:>9} {:>5}",
        "conc", "run max", "run avg", "wait max", "wait avg", "kv max", "preempted", "reads"
    )];
    for (c, s) in read {
        let (rmax, rmean) = stat(s.running);
        let (wmax, wmean) = stat(s.waiting);
        let mut row = format!(
            "{c:>5} {rmax:>8} {rmean:>8} {wmax:>8} {wmean:>8} {:>7} {:>9} {:>5}",
            s.kv_cache_usage_max
                .map_or("-".into(), |u| format!("{:.0}%", u * 100.0)),
            s.preemptions.map_or("-".into(), |p| format!("{p:.0}")),
            s.readings
        );
        if let Some(note) = &s.note {
            let _ = write!(row, "  {note}");
        }
        rows.push(row);
    }
    rows
}
