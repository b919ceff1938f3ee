//! Exact binomial and hypergeometric tails: what a level's verdict tests.
//!
//! Exact rather than a normal approximation (Wilson): a level rests on 8 to
//! a few hundred requests and its limits are near 0 (a 5% error ratio),
//! where the approximation's coverage falls below its nominal confidence.
//! The tails are summed term by term in log space, so that neither a large
//! count nor a tiny probability underflows.

/// `count` as a fraction of `of` requests (0 of none): the shed and error
/// ratios, computed one way for a level's summary and for its verdict.
pub fn ratio(count: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        count as f64 / of as f64
    }
}

/// ln C(n, k), summed term by term (k <= n; callers pass small k or small n - k).
fn ln_choose(n: u64, k: u64) -> f64 {
    let k = k.min(n - k);
    (1..=k)
        .map(|i| ((n - k + i) as f64).ln() - (i as f64).ln())
        .sum()
}

/// P(X >= k) for X ~ Binomial(n, p).
pub fn upper_tail(n: u64, p: f64, k: u64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if k > n || p <= 0.0 {
        return 0.0;
    }
    if p >= 1.0 {
        return 1.0;
    }
    let (lp, lq) = (p.ln(), (-p).ln_1p());
    // ln pmf(k), then each next term from the previous one.
    let mut ln_term = ln_choose(n, k) + k as f64 * lp + (n - k) as f64 * lq;
    let mut sum = 0.0;
    let ratio = lp - lq;
    for i in k..=n {
        let term = ln_term.exp();
        sum += term;
        // Terms past the mode only shrink: stop once they no longer count.
        if term < sum * 1e-17 && (i as f64) > n as f64 * p {
            break;
        }
        ln_term += ((n - i) as f64).ln() - ((i + 1) as f64).ln() + ratio;
    }
    sum.min(1.0)
}

/// Whether `k` of `n` is evidence, at significance `alpha`, that the true
/// ratio is over `limit`: the exact one-sided binomial test, the same as
/// the Clopper-Pearson lower bound at confidence 1 - alpha exceeding `limit`.
pub fn over_limit(k: u64, n: u64, limit: f64, alpha: f64) -> bool {
    k > 0 && upper_tail(n, limit, k) < alpha
}

/// The Clopper-Pearson lower confidence bound, at confidence 1 - `alpha`, on
/// the true ratio behind `k` of `n` (0 when k is 0): the ratio p at which
/// P(Binomial(n, p) >= k) = alpha. Found by bisection, to 1e-9.
pub fn lower_bound(k: u64, n: u64, alpha: f64) -> f64 {
    if k == 0 || n == 0 {
        return 0.0;
    }
    let (mut lo, mut hi) = (0.0f64, k.min(n) as f64 / n as f64);
    for _ in 0..40 {
        let mid = 0.5 * (lo + hi);
        if upper_tail(n, mid, k) < alpha {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The rank (1-based) of the order statistic that is a lower confidence
/// bound, at confidence 1 - `alpha`, on the `q` quantile of `n` values:
/// the highest k with P(x(k) <= the true quantile) = P(Binomial(n, q) >= k)
/// over 1 - alpha; None when even the lowest value is not such a bound.
/// x(k) over a limit is the same evidence as n - k + 1 values over it:
/// [`over_limit`] on the share over the limit, with limit 1 - q.
pub fn quantile_lower_rank(n: u64, q: f64, alpha: f64) -> Option<u64> {
    (1..=n).rev().find(|&k| upper_tail(n, q, k) > 1.0 - alpha)
}

/// ln of the hypergeometric pmf: `x` marked among `draw` taken from
/// `total`, of which `marked` are marked.
fn ln_hypergeometric(total: u64, marked: u64, draw: u64, x: u64) -> f64 {
    ln_choose(marked, x) + ln_choose(total - marked, draw - x) - ln_choose(total, draw)
}

/// Fisher's exact test, both one-sided p-values: with `k1` of `n1` in one
/// group and `k2` of `n2` in the other, P(X <= k1) and P(X >= k1) for the
/// count X of the first group under the hypothesis that both share one ratio.
pub fn fisher(k1: u64, n1: u64, k2: u64, n2: u64) -> (f64, f64) {
    let (total, marked) = (n1 + n2, k1 + k2);
    if n1 == 0 || n2 == 0 || marked == 0 || marked == total {
        return (1.0, 1.0);
    }
    let lo = marked.saturating_sub(n2);
    let hi = marked.min(n1);
    let p = |x: u64| ln_hypergeometric(total, marked, n1, x).exp();
    let below: f64 = (lo..=k1).map(p).sum();
    let above: f64 = (k1..=hi).map(p).sum();
    (below.min(1.0), above.min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) {
        assert!((a - b).abs() < tol, "{a} != {b}");
    }

    #[test]
    fn tails_match_hand_computed_values() {
        // Binomial(8, 0.05): P(0) = 0.95^8 = 0.66342, P(1) = 8 * 0.05 * 0.95^7.
        let p0 = 0.95f64.powi(8);
        let p1 = 8.0 * 0.05 * 0.95f64.powi(7);
        close(upper_tail(8, 0.05, 1), 1.0 - p0, 1e-12);
        close(upper_tail(8, 0.05, 2), 1.0 - p0 - p1, 1e-12);
        close(upper_tail(8, 0.05, 8), 0.05f64.powi(8), 1e-20);
        assert_eq!(upper_tail(8, 0.05, 0), 1.0);
        assert_eq!(upper_tail(8, 0.05, 9), 0.0);
        assert_eq!(upper_tail(8, 0.0, 1), 0.0);
        assert_eq!(upper_tail(8, 1.0, 8), 1.0);
        // Large counts neither underflow nor overflow.
        let t = upper_tail(100_000, 0.05, 5_000);
        assert!(t > 0.4 && t < 0.6, "{t}");
        assert!(upper_tail(100_000, 0.05, 6_000) < 1e-40);
    }

    #[test]
    fn the_test_needs_three_of_eight_at_five_percent() {
        // P(>= 2 of 8) = 0.057: not evidence at 95%; P(>= 3 of 8) = 0.0058 is.
        assert!(!over_limit(2, 8, 0.05, 0.05));
        assert!(over_limit(3, 8, 0.05, 0.05));
        assert!(!over_limit(0, 8, 0.0, 0.05));
        assert!(over_limit(1, 8, 0.0, 0.05), "a limit of 0: any is over");
        assert!(!over_limit(8, 8, 1.0, 0.05), "a limit of 1: none is over");
    }

    #[test]
    fn the_lower_bound_is_where_the_test_turns() {
        for (k, n) in [(1u64, 8u64), (3, 8), (4, 24), (12, 96), (8, 8)] {
            let b = lower_bound(k, n, 0.05);
            assert!(b <= k as f64 / n as f64);
            assert!(over_limit(k, n, b - 1e-6, 0.05), "{k}/{n}: {b}");
            assert!(!over_limit(k, n, b + 1e-6, 0.05), "{k}/{n}: {b}");
        }
        // 1 of 8 at 95%: 1 - 0.95^(1/8) = 0.00639.
        close(lower_bound(1, 8, 0.05), 1.0 - 0.95f64.powf(1.0 / 8.0), 1e-8);
        assert_eq!(lower_bound(0, 8, 0.05), 0.0);
    }

    #[test]
    fn the_order_statistic_bound_of_the_p95() {
        // Of 8: P(Bin(8, .95) >= 6) = 0.9942, >= 7: 0.9428: x(6) is the bound.
        assert_eq!(quantile_lower_rank(8, 0.95, 0.05), Some(6));
        // Of 1 value, none bounds the p95 at 95% (P = 0.95 exactly); of 2, the lower.
        assert_eq!(quantile_lower_rank(1, 0.95, 0.05), None);
        assert_eq!(quantile_lower_rank(2, 0.95, 0.05), Some(1));
        // x(k) over the limit <=> n - k + 1 values over it <=> the test on
        // the share over the limit, with limit 5%.
        for n in 3..200u64 {
            let slowest_allowed = match quantile_lower_rank(n, 0.95, 0.05) {
                Some(k) => n - k,
                None => n,
            };
            for slow in 0..=n {
                assert_eq!(
                    over_limit(slow, n, 0.05, 0.05),
                    slow > slowest_allowed,
                    "{slow} of {n}"
                );
            }
        }
    }

    #[test]
    fn fisher_sees_a_change_and_not_noise() {
        // 168 clean requests before, 18 of 20 shed now: a change.
        let (_, worse) = fisher(18, 20, 0, 168);
        assert!(worse < 1e-10, "{worse}");
        // 3 of 24 now, 3 of 168 before: within noise at 0.001.
        let (_, worse) = fisher(3, 24, 3, 168);
        assert!(worse > 0.001 && worse < 0.1, "{worse}");
        // 0 of 8 now, 10 of 56 before (15%): no evidence of a change.
        let (better, _) = fisher(0, 8, 10, 56);
        assert!(better > 0.1, "{better}");
        // Both tails include the observed value.
        let (b, a) = fisher(2, 10, 2, 10);
        assert!(b > 0.5 && a > 0.5);
        assert_eq!(fisher(0, 10, 0, 10), (1.0, 1.0));
    }
}
