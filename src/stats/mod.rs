//! Samples -> level summaries -> knee, recommendation, saturation; the two
//! sides of a gateway pair -> its overhead; and the report types every
//! consumer reads. Pure: no I/O, no clock.

pub mod arrivals;
pub mod binomial;
pub mod carry;
pub mod client;
pub mod conclusion;
pub mod decision;
pub mod erlang;
pub mod evidence;
pub mod knee;
pub mod lag;
pub mod level;
pub mod limit;
pub mod overhead;
pub mod pair_report;
pub mod probe;
pub mod quantity;
pub mod rate_search;
pub mod report;
pub mod sample;
pub mod server;
pub mod setup_error;
pub mod status;
pub mod sustained;
pub mod verdict;
