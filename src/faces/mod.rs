//! The faces: what a person reads. `text` (the reports in words: the
//! sweeps' table, and the phrases the HTML page shares), `pairs` (the
//! gateway pairs' table), `json` (the one JSON
//! document, written and read back), `html` (the report page), `progress`
//! (the display on stderr during a one-shot sweep), `signals` (the engine's
//! signals and the limit in words), `explain` (what
//! `check-config` prints), `online` (what `check-config --online` adds).

pub mod explain;
pub mod html;
pub mod json;
pub mod online;
pub mod pairs;
pub mod progress;
pub mod prompt_memory;
pub mod signals;
pub mod summary;
pub mod sustained;
pub mod text;
