//! The layer check of `tests/architecture.rs`: a crate's use graph read from
//! its sources, and the rules it must keep.

pub mod graph;
pub mod rules;

use std::path::Path;

use rules::Finding;

/// Everything wrong with the crate rooted at `root` (its `src/` and its
/// `ARCHITECTURE.md`), sorted by key.
pub fn check(root: &Path) -> Vec<Finding> {
    let architecture = root.join("ARCHITECTURE.md");
    let text = std::fs::read_to_string(&architecture)
        .unwrap_or_else(|e| panic!("{}: {e}", architecture.display()));
    let table =
        rules::read_table(&text).unwrap_or_else(|e| panic!("{}: {e}", architecture.display()));
    let graph = graph::read(&root.join("src")).unwrap_or_else(|e| panic!("{e}"));
    let mut findings = rules::layer_findings(&graph, &table);
    findings.extend(rules::circle_findings(&graph));
    findings.extend(rules::unreached_findings(&graph));
    findings.sort();
    findings
}
