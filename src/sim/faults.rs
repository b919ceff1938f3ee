//! Fault injection, deterministic from the seed: the n-th request to arrive
//! always meets the same fate for a given seed.

use super::params::SimParams;
use super::text::{mix, unit};

/// What happens to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// Served normally.
    None,
    /// Answered at once with `fail_status`.
    Fail,
    /// The connection is aborted after this many content tokens, without `[DONE]`.
    Reset { after_tokens: u32 },
}

/// The hash behind the `n`-th request's draws. The seed is mixed on its own
/// first: `mix(seed, n)` alone only flips low bits of `n`'s input, so that
/// small seeds gave nearly the same failing requests, merely reordered.
fn fate(params: &SimParams, n: u64) -> u64 {
    mix(mix(params.seed, 0x5EED), n)
}

/// The fate of the `n`-th request (counted from 0) asking for `max_tokens`.
pub(crate) fn draw(params: &SimParams, n: u64, max_tokens: u32) -> Fault {
    let h = fate(params, n);
    // Two independent draws: a failure is decided first, and reset_ratio
    // applies to the requests that did not fail.
    if unit(mix(h, 1)) < params.fail_ratio {
        return Fault::Fail;
    }
    if unit(mix(h, 2)) < params.reset_ratio {
        // "A few tokens", and always fewer than the request asked for, so the
        // stream is visibly unfinished.
        return Fault::Reset {
            after_tokens: max_tokens.saturating_sub(1).min(3),
        };
    }
    Fault::None
}

/// Whether the `n`-th request is a latency outlier, held `slow_delay`
/// before its answer starts (a draw independent of [`draw`]'s).
pub(crate) fn slow(params: &SimParams, n: u64) -> bool {
    unit(mix(fate(params, n), 3)) < params.slow_ratio
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimConfig;

    fn params(fail: f64, reset: f64) -> SimParams {
        SimConfig {
            fail_ratio: Some(fail),
            reset_ratio: Some(reset),
            ..SimConfig::default()
        }
        .resolve()
        .unwrap()
    }

    #[test]
    fn ratios_hold_and_are_deterministic() {
        let p = params(0.1, 0.2);
        let fates: Vec<Fault> = (0..10_000).map(|n| draw(&p, n, 16)).collect();
        let again: Vec<Fault> = (0..10_000).map(|n| draw(&p, n, 16)).collect();
        assert_eq!(fates, again);
        let fails = fates.iter().filter(|f| **f == Fault::Fail).count();
        let resets = fates
            .iter()
            .filter(|f| **f == Fault::Reset { after_tokens: 3 })
            .count();
        assert!((900..1100).contains(&fails), "{fails}");
        // 20% of the 90% that did not fail.
        assert!((1650..1950).contains(&resets), "{resets}");
    }

    #[test]
    fn seeds_give_different_fates() {
        let failing = |seed| {
            let p = SimConfig {
                fail_ratio: Some(0.02),
                seed: Some(seed),
                ..SimConfig::default()
            }
            .resolve()
            .unwrap();
            (0..2000u64)
                .filter(|n| draw(&p, *n, 16) == Fault::Fail)
                .collect::<Vec<_>>()
        };
        let (a, b) = (failing(0), failing(1));
        let shared = a.iter().filter(|n| b.contains(n)).count();
        // Independent draws at 2% share about 2% of 40 failures.
        assert!(
            shared < 8,
            "seeds 0 and 1 share {shared} of {} failures",
            a.len()
        );
    }

    #[test]
    fn extremes() {
        assert!((0..100).all(|n| draw(&params(1.0, 0.0), n, 8) == Fault::Fail));
        assert!((0..100).all(|n| draw(&params(0.0, 0.0), n, 8) == Fault::None));
        assert_eq!(
            draw(&params(0.0, 1.0), 0, 1),
            Fault::Reset { after_tokens: 0 }
        );
    }
}
