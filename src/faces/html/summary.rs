//! The summary a multi-target HTML report opens with (the rows of
//! [`crate::faces::summary`]), each target linked to its section.

use std::fmt::Write as _;

use crate::faces::html::escape::escape;
use crate::faces::summary::{rows, HEADINGS};
use crate::stats::report::SweepReport;

/// The summary as an HTML table, each target linked to its section
/// (`#target-I`); "" for fewer than two targets.
pub fn table(reports: &[SweepReport]) -> String {
    if reports.len() < 2 {
        return String::new();
    }
    let mut out = String::from(
        "<section class=\"summary\"><h2>Summary</h2>\n<div class=\"scroll\"><table>\n<tr>",
    );
    for h in HEADINGS {
        let _ = write!(out, "<th>{h}</th>");
    }
    out.push_str("</tr>\n");
    let index = |name: &str| reports.iter().position(|r| r.target == name).unwrap_or(0);
    for row in rows(reports) {
        let cells = row.cells();
        let _ = write!(
            out,
            "<tr><td><a href=\"#target-{}\">{}</a></td>",
            index(&row.target),
            escape(cells[0])
        );
        for cell in &cells[1..] {
            let _ = write!(out, "<td>{}</td>", escape(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table></div></section>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_link_to_their_sections_escaped() {
        let report = |name: &str| SweepReport {
            target: name.into(),
            ..SweepReport::default()
        };
        let reports = [report("a"), report("worker-<2>")];
        let h = table(&reports);
        assert!(
            h.contains(
                "<td><a href=\"#target-1\">worker-&lt;2&gt;</a></td><td>-</td><td>failed</td>"
            ),
            "{h}"
        );
        assert!(table(&reports[..1]).is_empty());
    }
}
