//! The summary a multi-target report opens with: a row per target and
//! workload (status, knee, recommended max_in_flight, limit, sustained
//! rate), as the daemon's index page gives it; in text here, in HTML in
//! `html/summary.rs`.

use std::fmt::Write as _;

use crate::faces::text;
use crate::stats::report::{SweepReport, WorkloadReport};

/// One row of the summary: a target and workload, its cells as shown.
pub struct Row {
    pub target: String,
    pub workload: String,
    pub status: String,
    pub knee: String,
    pub max_in_flight: String,
    pub limit: String,
    pub sustained: String,
}

/// The column headings, in order.
pub const HEADINGS: [&str; 7] = [
    "target",
    "workload",
    "status",
    "knee",
    "max_in_flight",
    "limit",
    "sustained",
];

/// A row per target and workload; a target with no workload measured (a
/// setup error, an unreachable server) gets one row that says why.
pub fn rows(reports: &[SweepReport]) -> Vec<Row> {
    let mut rows = Vec::new();
    for r in reports {
        let status = match (&r.setup_error, r.success) {
            (Some(e), _) => format!("setup error: {}", e.cause.as_str()),
            (None, true) => "ok".to_string(),
            (None, false) => "failed".to_string(),
        };
        if r.workloads.is_empty() {
            rows.push(Row {
                target: r.target.clone(),
                workload: "-".into(),
                status,
                knee: "-".into(),
                max_in_flight: "-".into(),
                limit: "-".into(),
                sustained: "-".into(),
            });
            continue;
        }
        for w in &r.workloads {
            let [knee, max_in_flight, limit, sustained] = capacity_cells(w);
            rows.push(Row {
                target: r.target.clone(),
                workload: w.workload.clone(),
                status: status.clone(),
                knee,
                max_in_flight,
                limit,
                sustained,
            });
        }
    }
    rows
}

/// A workload's knee, recommended max_in_flight, limit and sustained rate
/// as the summary and the daemon's index page show them.
pub fn capacity_cells(w: &WorkloadReport) -> [String; 4] {
    let c = &w.capacity;
    [
        text::knee(c),
        c.recommended_max_in_flight.to_string(),
        c.limit.map_or("-", |l| l.as_str()).to_string(),
        c.sustained
            .as_ref()
            .and_then(|s| s.requests_per_second)
            .map_or("-".into(), |r| format!("{r:.2} req/s")),
    ]
}

impl Row {
    /// The cells, in the order of [`HEADINGS`].
    pub fn cells(&self) -> [&str; 7] {
        [
            &self.target,
            &self.workload,
            &self.status,
            &self.knee,
            &self.max_in_flight,
            &self.limit,
            &self.sustained,
        ]
    }
}

/// The summary as a text table (columns aligned), with a blank line after;
/// "" for fewer than two targets (the report itself is the summary).
pub fn text(reports: &[SweepReport]) -> String {
    if reports.len() < 2 {
        return String::new();
    }
    let rows = rows(reports);
    let mut widths = HEADINGS.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row.cells()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 7]| -> String {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i > 0 {
                out.push_str("  ");
            }
            let _ = write!(out, "{cell:<w$}");
        }
        out.trim_end().to_string()
    };
    let mut out = format!("summary of {} targets\n", reports.len());
    let _ = writeln!(out, "  {}", line(HEADINGS));
    for row in &rows {
        let _ = writeln!(out, "  {}", line(row.cells()));
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::report::{Capacity, Limit};

    fn report(name: &str, knee: u32, success: bool) -> SweepReport {
        let chat = WorkloadReport {
            workload: "chat".into(),
            capacity: Capacity {
                knee_concurrency: knee,
                recommended_max_in_flight: knee * 9 / 10,
                limit: Some(Limit::Shed),
                ..Capacity::default()
            },
            ..WorkloadReport::default()
        };
        SweepReport {
            target: name.into(),
            model: "m".into(),
            success,
            workloads: if success { vec![chat] } else { Vec::new() },
            ..SweepReport::default()
        }
    }

    #[test]
    fn a_row_per_target_and_workload_aligned() {
        let reports = [report("a", 8, true), report("worker-<2>", 0, false)];
        let t = text(&reports);
        assert_eq!(
            t,
            "summary of 2 targets\n\
             \x20 target      workload  status  knee  max_in_flight  limit  sustained\n\
             \x20 a           chat      ok      8     7              shed   -\n\
             \x20 worker-<2>  -         failed  -     -              -      -\n\n"
        );
        assert!(text(&reports[..1]).is_empty());
    }
}
