//! The progress line on stderr, overwritten as a one-shot sweep goes: the
//! level being measured, then the gateway pair being measured.

use crate::config::{GatewayPair, Target, Workload};
use crate::sweep::Observer;

/// Draws the progress line (see the module comment).
pub struct Progress;

impl Observer for Progress {
    fn level_started(&self, target: &Target, workload: &Workload, concurrency: u32, requests: u64) {
        eprint!(
            "\r\x1b[2K{} / {}: concurrency {concurrency}, {requests} requests...",
            target.name, workload.name
        );
    }

    fn pair_started(&self, pair: &GatewayPair) {
        eprint!(
            "\r\x1b[2Kgateway pair {}: {} requests per side...",
            pair.name, pair.requests
        );
    }
}

impl Progress {
    /// Clears the line once everything is measured.
    pub fn done(&self) {
        eprint!("\r\x1b[2K");
    }
}

/// Whether a progress line should be drawn (stdout is a terminal).
pub fn wanted() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal()
}
