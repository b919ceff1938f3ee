//! Gateway overhead statistics (method step 8): each side of a pair
//! summarised from its samples, and the overhead as the difference of the
//! two sides' percentiles. Pure: the samples come from `sweep::interleaved`.

use crate::stats::level;
use crate::stats::pair_report::SideSummary;
use crate::stats::report::Percentiles;
use crate::stats::sample::{Outcome, Sample};

/// The difference of quantiles `through - direct`, each percentile on its own
/// (not the quantiles of per-request differences: the two sides' requests are
/// not paired one to one). A percentile missing on either side is missing;
/// `count` is the smaller side's count, the number of samples the weaker of
/// the two estimates rests on.
pub fn overhead(direct: &Percentiles, through: &Percentiles) -> Percentiles {
    let diff = |d: Option<f64>, t: Option<f64>| match (d, t) {
        (Some(d), Some(t)) => Some(t - d),
        _ => None,
    };
    let count = direct.count.min(through.count);
    if count == 0 {
        return Percentiles::default();
    }
    Percentiles {
        count,
        p50: diff(direct.p50, through.p50),
        p95: diff(direct.p95, through.p95),
        p99: diff(direct.p99, through.p99),
    }
}

/// Summarises the counted samples of one side.
pub fn summarize_side(target: &str, samples: &[Sample]) -> SideSummary {
    let outcomes = level::count_outcomes(samples);
    let ok = samples.iter().filter(|s| s.outcome == Outcome::Ok);
    let mut latency: Vec<f64> = ok
        .clone()
        .filter_map(|s| s.latency.map(|d| d.as_secs_f64()))
        .collect();
    let mut ttft: Vec<f64> = ok.filter_map(|s| s.ttft.map(|d| d.as_secs_f64())).collect();
    SideSummary {
        target: target.to_string(),
        requests: samples.len() as u64,
        outcomes,
        latency_seconds: level::percentiles(&mut latency),
        ttft_seconds: level::percentiles(&mut ttft),
        first_error: samples
            .iter()
            .find(|s| s.outcome != Outcome::Ok)
            .map(|s| match &s.error {
                Some(e) => format!("{}: {e}", s.outcome.as_str()),
                None => s.outcome.as_str().to_string(),
            }),
    }
}

/// Why a side leaves nothing to compare: none of its requests succeeded.
pub fn no_success(side: &SideSummary) -> Option<String> {
    (side.latency_seconds.count == 0).then(|| {
        format!(
            "no request to `{}` succeeded{}",
            side.target,
            side.first_error
                .as_deref()
                .map(|e| format!(" (first failure: {e})"))
                .unwrap_or_default()
        )
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn p(count: usize, p50: f64, p95: f64, p99: f64) -> Percentiles {
        Percentiles {
            count,
            p50: Some(p50),
            p95: Some(p95),
            p99: Some(p99),
        }
    }

    fn close(a: Option<f64>, b: f64) {
        let a = a.expect("a value");
        assert!((a - b).abs() < 1e-12, "{a} != {b}");
    }

    #[test]
    fn overhead_is_through_minus_direct_per_percentile() {
        let o = overhead(&p(40, 0.001, 0.002, 0.004), &p(38, 0.0015, 0.0031, 0.0035));
        assert_eq!(o.count, 38, "the smaller side's count");
        close(o.p50, 0.0005);
        close(o.p95, 0.0011);
        // A gateway can lower a tail percentile by chance: the sign is kept.
        close(o.p99, -0.0005);
    }

    #[test]
    fn overhead_without_samples_on_a_side_is_empty() {
        let empty = Percentiles::default();
        assert_eq!(
            overhead(&empty, &p(40, 1.0, 1.0, 1.0)),
            Percentiles::default()
        );
        assert_eq!(
            overhead(&p(40, 1.0, 1.0, 1.0), &empty),
            Percentiles::default()
        );
        let partial = Percentiles {
            count: 3,
            p50: Some(0.5),
            p95: None,
            p99: None,
        };
        let o = overhead(&p(5, 0.25, 1.0, 1.0), &partial);
        assert_eq!(o.count, 3);
        close(o.p50, 0.25);
        assert_eq!((o.p95, o.p99), (None, None));
    }

    fn ok(latency_ms: u64, ttft_ms: u64) -> Sample {
        let mut s = Sample::failed(Outcome::Ok, Some(200), "");
        s.error = None;
        s.latency = Some(Duration::from_millis(latency_ms));
        s.ttft = Some(Duration::from_millis(ttft_ms));
        s
    }

    #[test]
    fn side_summary_counts_only_successes_in_percentiles() {
        let samples = vec![
            ok(10, 5),
            ok(30, 15),
            Sample::failed(Outcome::HttpError, Some(502), "HTTP 502: bad gateway"),
            ok(20, 10),
        ];
        let s = summarize_side("gw", &samples);
        assert_eq!(s.requests, 4);
        assert_eq!(s.outcomes["ok"], 3);
        assert_eq!(s.outcomes["http_error"], 1);
        assert_eq!(s.latency_seconds.count, 3);
        close(s.latency_seconds.p50, 0.020);
        close(s.ttft_seconds.p50, 0.010);
        assert_eq!(
            s.first_error.as_deref(),
            Some("http_error: HTTP 502: bad gateway")
        );
        assert_eq!(no_success(&s), None);
        let failed = summarize_side("gw", &samples[2..3]);
        assert_eq!(
            no_success(&failed).as_deref(),
            Some("no request to `gw` succeeded (first failure: http_error: HTTP 502: bad gateway)")
        );
    }
}
