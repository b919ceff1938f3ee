//! The gateway pairs' measurements in words: the table `llmprobe sweep`
//! prints after the sweeps'.

use std::fmt::Write;

use crate::stats::pair_report::PairReport;

/// Milliseconds with microsecond resolution: gateway overheads are small.
fn millis(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.3}ms", v * 1000.0))
}

/// The gateway pairs' measurements as one table (empty when there are none).
pub fn pairs_table(pairs: &[PairReport]) -> String {
    let mut out = String::new();
    if pairs.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "gateway overhead (through minus direct, interleaved on a stub engine)"
    );
    let _ = writeln!(
        out,
        "  {:<16} {:<7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7}",
        "pair",
        "",
        "direct p50",
        "direct p95",
        "thru p50",
        "thru p95",
        "ovh p50",
        "ovh p95",
        "samples"
    );
    for p in pairs {
        let rows = [
            (
                "latency",
                &p.direct.latency_seconds,
                &p.through.latency_seconds,
                &p.latency_overhead_seconds,
            ),
            (
                "ttft",
                &p.direct.ttft_seconds,
                &p.through.ttft_seconds,
                &p.ttft_overhead_seconds,
            ),
        ];
        for (i, (quantity, d, t, o)) in rows.into_iter().enumerate() {
            let _ = writeln!(
                out,
                "  {:<16} {:<7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7}",
                if i == 0 { p.pair.as_str() } else { "" },
                quantity,
                millis(d.p50),
                millis(d.p95),
                millis(t.p50),
                millis(t.p95),
                millis(o.p50),
                millis(o.p95),
                o.count
            );
        }
        let _ = writeln!(
            out,
            "  {:<16} {} vs {}, workload {}, concurrency {}, {:.1}s",
            "", p.direct.target, p.through.target, p.workload, p.concurrency, p.duration_seconds
        );
        if let Some(e) = &p.error {
            let _ = writeln!(out, "  {:<16} measurement failed: {e}", "");
        }
    }
    out.push('\n');
    out
}
