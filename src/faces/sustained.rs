//! The sustained rate in words: the headline and the table of the search's
//! steps, shared by the terminal table and the HTML report.

use crate::stats::sustained::{Sustained, SustainedStatus};

/// The headline: the rate, how it compares with the closed loop, how it was
/// decided, and its age when carried.
pub fn headline(s: &Sustained) -> String {
    let rate = match (s.status, s.requests_per_second) {
        (SustainedStatus::NotMeasured, _) | (_, None) => "not measured".to_string(),
        (SustainedStatus::LowerBound, Some(r)) => format!("≥ {r:.2} req/s"),
        (SustainedStatus::Unconfirmed, Some(r)) => format!("{r:.2} req/s, not confirmed"),
        (_, Some(r)) => format!("{r:.2} req/s"),
    };
    let share = s
        .share_of_closed_loop()
        .map(|x| {
            format!(
                ", {x:.2} of the closed-loop {:.2} req/s",
                s.closed_loop_requests_per_second
            )
        })
        .unwrap_or_default();
    let age = if s.is_fresh() {
        format!("{} steps, {} requests", s.steps.len(), s.requests)
    } else {
        format!("carried: searched {} sweep(s) ago", s.sweeps_since_measured)
    };
    format!(
        "sustained rate ({} arrivals, open loop): {rate}{share}; {} ({age})",
        s.arrivals.as_str(),
        s.why
    )
}

/// The header of the step table.
pub const STEP_HEAD: [&str; 10] = [
    "offered/s",
    "achieved/s",
    "goodput/s",
    "shed",
    "err",
    "sched p95",
    "lat p95",
    "lag p99",
    "in flight",
    "result",
];

/// One row per step, cells in [`STEP_HEAD`]'s order.
pub fn step_rows(s: &Sustained) -> Vec<[String; 10]> {
    let secs = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}s"));
    s.steps
        .iter()
        .map(|st| {
            [
                format!("{:.2}", st.offered_requests_per_second),
                format!("{:.2}", st.achieved_requests_per_second),
                format!("{:.2}", st.goodput_requests_per_second),
                format!("{:.3}", st.shed_ratio),
                format!("{:.3}", st.error_ratio),
                secs(st.scheduled_latency_seconds.p95),
                secs(st.latency_seconds.p95),
                st.dispatch_lag_seconds
                    .p99
                    .map_or("-".to_string(), |v| format!("{:.1}ms", v * 1e3)),
                format!("{:.0}/{}", st.in_flight_p99, st.in_flight_max),
                match &st.note {
                    Some(n) => format!("{} ({n})", st.result.as_str()),
                    None if st.confirmation => format!("{} (confirmation)", st.result.as_str()),
                    None if st.not_sent_client_ceiling > 0 => format!(
                        "{} ({} not sent)",
                        st.result.as_str(),
                        st.not_sent_client_ceiling
                    ),
                    None => st.result.as_str().to_string(),
                },
            ]
        })
        .collect()
}

/// The block the terminal table prints under a workload's capacity.
pub fn text_block(s: &Sustained) -> Vec<String> {
    let mut out = vec![headline(s)];
    if s.steps.is_empty() || !s.is_fresh() {
        return out;
    }
    let row = |cells: &[String]| {
        let widths = [9, 10, 9, 6, 6, 9, 8, 8, 9];
        let mut line = String::from("   ");
        for (c, w) in cells.iter().zip(widths) {
            line.push_str(&format!(" {c:>w$}"));
        }
        if let Some(last) = cells.get(9) {
            line.push_str(&format!("  {last}"));
        }
        line
    };
    let head: Vec<String> = STEP_HEAD.iter().map(|h| h.to_string()).collect();
    out.push(row(&head));
    for r in step_rows(s) {
        out.push(row(&r));
    }
    out
}
