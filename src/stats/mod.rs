//! Samples -> level summaries -> knee, recommendation, saturation, and the
//! report types every consumer reads. Pure: no I/O, no clock.

pub mod knee;
pub mod level;
pub mod report;
pub mod sample;
pub mod verdict;
