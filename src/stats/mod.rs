//! Samples -> level summaries -> knee, recommendation, saturation; the two
//! sides of a gateway pair -> its overhead; and the report types every
//! consumer reads. Pure: no I/O, no clock.

pub mod binomial;
pub mod carry;
pub mod evidence;
pub mod knee;
pub mod level;
pub mod limit;
pub mod overhead;
pub mod quantity;
pub mod report;
pub mod sample;
pub mod server;
pub mod verdict;
