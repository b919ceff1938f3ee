//! How late the client's runtime woke while a level ran: the delays a
//! ticker saw, summarised (`sweep::client_lag` watches, `stats::client`
//! judges).

use serde::{Deserialize, Serialize};

/// How late the client's runtime woke against a fixed ticker while a level
/// ran: the delay every read of a server's answer shares.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ClientLag {
    /// 99th percentile of the wake-up delays, seconds.
    pub p99_seconds: f64,
    /// The largest, seconds.
    pub max_seconds: f64,
    /// Ticks measured.
    pub ticks: u64,
}

impl ClientLag {
    /// The lag of a ticker's wake-up delays, seconds.
    pub fn of(mut delays: Vec<f64>) -> ClientLag {
        delays.retain(|d| d.is_finite());
        delays.sort_by(f64::total_cmp);
        let n = delays.len();
        if n == 0 {
            return ClientLag::default();
        }
        // The nearest rank: with fewer than 100 ticks, the largest.
        let rank = ((0.99 * n as f64).ceil() as usize).clamp(1, n);
        ClientLag {
            p99_seconds: delays[rank - 1],
            max_seconds: delays[n - 1],
            ticks: n as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_percentiles_by_nearest_rank() {
        let mut d: Vec<f64> = (1..=200).map(|i| f64::from(i) / 1000.0).collect();
        d.push(f64::NAN);
        let lag = ClientLag::of(d);
        assert_eq!(
            (lag.p99_seconds, lag.max_seconds, lag.ticks),
            (0.198, 0.2, 200)
        );
        assert_eq!(ClientLag::of(vec![0.004, 0.001]).p99_seconds, 0.004);
        assert_eq!(ClientLag::of(Vec::new()), ClientLag::default());
    }
}
