//! What the server's own metrics said during a level: one [`EngineReading`]
//! per read of its `/metrics` (see `probe::engine_metrics`), summarized per
//! level into [`ServerSignals`]. Plain data and pure arithmetic.

use serde::{Deserialize, Serialize};

/// One read of a server's engine figures; None where it exports no such figure.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct EngineReading {
    /// Requests in the engine's batch.
    pub running: Option<f64>,
    /// Requests queued in the engine, not yet running.
    pub waiting: Option<f64>,
    /// KV-cache usage, 0 to 1.
    pub kv_cache_usage: Option<f64>,
    /// Preemptions so far (a counter).
    pub preemptions: Option<f64>,
    /// Prefix-cache hits so far, tokens (a counter).
    pub prefix_cache_hits: Option<f64>,
    /// Prefix-cache queries so far, tokens (a counter).
    pub prefix_cache_queries: Option<f64>,
}

/// The largest and the mean value of a gauge over a level's readings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GaugeStat {
    /// Largest reading.
    pub max: f64,
    /// Mean of the readings.
    pub mean: f64,
}

/// What the server's metrics said while one level ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ServerSignals {
    /// Reads that returned a known engine's figures.
    pub readings: u32,
    /// Requests running in the engine.
    pub running: Option<GaugeStat>,
    /// Requests waiting in the engine's queue.
    pub waiting: Option<GaugeStat>,
    /// Largest KV-cache usage, 0 to 1.
    pub kv_cache_usage_max: Option<f64>,
    /// Preemptions during the level.
    pub preemptions: Option<f64>,
    /// Prefix-cache hits during the level, tokens.
    pub prefix_cache_hits: Option<f64>,
    /// Prefix-cache queries during the level, tokens.
    pub prefix_cache_queries: Option<f64>,
    /// Why some reads gave nothing (the first such reason), when they did.
    pub note: Option<String>,
}

impl ServerSignals {
    /// The summary of a level's `readings`, with `note` (the first failed read).
    pub fn of(readings: &[EngineReading], note: Option<String>) -> ServerSignals {
        ServerSignals {
            readings: u32::try_from(readings.len()).unwrap_or(u32::MAX),
            running: gauge(readings.iter().filter_map(|r| r.running)),
            waiting: gauge(readings.iter().filter_map(|r| r.waiting)),
            kv_cache_usage_max: readings
                .iter()
                .filter_map(|r| r.kv_cache_usage)
                .reduce(f64::max),
            preemptions: increase(readings.iter().filter_map(|r| r.preemptions)),
            prefix_cache_hits: increase(readings.iter().filter_map(|r| r.prefix_cache_hits)),
            prefix_cache_queries: increase(readings.iter().filter_map(|r| r.prefix_cache_queries)),
            note,
        }
    }
}

/// How the server's metrics endpoint was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum MetricsSource {
    /// The target's `server_metrics_url`.
    Configured,
    /// `/metrics` beside the base URL's `/v1`, which answered with a known engine's figures.
    Found,
    /// Turned off (`server_metrics_url: off`).
    Off,
    /// Nothing configured and nothing found.
    #[default]
    None,
}

impl MetricsSource {
    /// The value in JSON and the terminal.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricsSource::Configured => "configured",
            MetricsSource::Found => "found",
            MetricsSource::Off => "off",
            MetricsSource::None => "none",
        }
    }
}

/// Where a sweep read the server's own metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ServerMetrics {
    /// Configured, found at warm-up, or none.
    pub source: MetricsSource,
    /// The endpoint read (None when none).
    pub url: Option<String>,
    /// The engine its names are those of (`vllm`, `sglang`, `tgi`, `llama.cpp`).
    pub engine: Option<String>,
    /// Why none was found, or what went wrong with the configured one.
    pub note: Option<String>,
}

fn gauge(values: impl Iterator<Item = f64>) -> Option<GaugeStat> {
    let (mut n, mut sum, mut max) = (0u32, 0.0, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        n += 1;
        sum += v;
        max = max.max(v);
    }
    (n > 0).then(|| GaugeStat {
        max,
        mean: sum / f64::from(n),
    })
}

/// A counter's increase over its readings, as Prometheus' `increase`
/// counts it: a drop is a restart from zero. None with fewer than two.
fn increase(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut previous = None;
    let mut total = None;
    for v in values.filter(|v| v.is_finite()) {
        if let Some(p) = previous {
            *total.get_or_insert(0.0) += if v >= p { v - p } else { v };
        }
        previous = Some(v);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(running: f64, waiting: Option<f64>, preempted: f64) -> EngineReading {
        EngineReading {
            running: Some(running),
            waiting,
            kv_cache_usage: Some(running / 10.0),
            preemptions: Some(preempted),
            ..EngineReading::default()
        }
    }

    #[test]
    fn a_level_keeps_max_mean_and_counter_increases() {
        let r = [
            reading(2.0, Some(0.0), 5.0),
            reading(4.0, None, 7.0),
            reading(3.0, Some(2.0), 1.0), // restarted, then one more
        ];
        let s = ServerSignals::of(&r, None);
        assert_eq!(s.readings, 3);
        assert_eq!(
            s.running,
            Some(GaugeStat {
                max: 4.0,
                mean: 3.0
            })
        );
        assert_eq!(
            s.waiting,
            Some(GaugeStat {
                max: 2.0,
                mean: 1.0
            })
        );
        assert_eq!(s.kv_cache_usage_max, Some(0.4));
        assert_eq!(s.preemptions, Some(3.0));
        assert_eq!(s.prefix_cache_hits, None);
    }

    #[test]
    fn one_reading_gives_gauges_but_no_increase() {
        let s = ServerSignals::of(&[reading(1.0, Some(0.0), 9.0)], None);
        assert_eq!(s.running.map(|g| g.max), Some(1.0));
        assert_eq!(s.preemptions, None);
        assert_eq!(ServerSignals::of(&[], None).running, None);
    }
}
