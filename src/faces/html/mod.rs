//! Sweep reports as one self-contained HTML page: charts against
//! concurrency, the verdict beside them, the terminal's table below. Used by
//! `sweep --format html`, `llmprobe report results.json` and the daemon's
//! `/` and `/targets/NAME` pages.
//!
//! The charts are SVG written by hand (`charts`), not drawn with `plotters`:
//! every chart here is a few polylines over two axes, about 300 lines of
//! code, while `plotters` would add a dependency tree (and minutes of build
//! on a 2-core machine) to produce the same lines, with less control over
//! what a test can read back: each marker here carries its exact value.
//! The page needs no network and no JavaScript: inline CSS and SVG only.
//!
//! Every string that comes from a server, a configuration or a JSON
//! document passes through [`escape::escape`] before it reaches the page.

pub mod charts;
pub mod escape;
pub mod page;
pub mod settings;
pub mod summary;
pub mod sustained;
pub mod workload_charts;
