//! Erlang B: the share of Poisson arrivals a server with `n` places and no
//! queue turns away; Erlang C: the share that waits when the rest queue.
//! They give the open-loop rate search its first guess on a server that
//! sheds or queues, and the benchmark its reference value.

/// The blocking probability B(n, a) of `n` places offered `a` erlangs
/// (arrival rate times mean holding time), by the stable recurrence
/// B(k, a) = a B(k-1, a) / (k + a B(k-1, a)).
pub fn blocking(n: u32, a: f64) -> f64 {
    if a <= 0.0 {
        return 0.0;
    }
    (1..=n).fold(1.0, |b, k| a * b / (f64::from(k) + a * b))
}

/// The offered load, in erlangs, at which `n` places block `share` of the
/// arrivals (Erlang B: every place served).
pub fn load_for(n: u32, share: f64) -> f64 {
    load_with_queue_for(n, n, share)
}

/// The share of Poisson arrivals turned away by `servers` servers with
/// room for `places` requests in all (running plus waiting; M/M/c/K),
/// offered `a` erlangs. With `places == servers` it is Erlang B.
pub fn blocking_with_queue(servers: u32, places: u32, a: f64) -> f64 {
    if a <= 0.0 {
        return 0.0;
    }
    let servers = servers.clamp(1, places.max(1));
    // p_n is proportional to a^n / n! up to the servers, then each place
    // more multiplies by a / servers; terms rescaled so none overflows.
    let (mut term, mut sum) = (1.0f64, 1.0f64);
    for n in 1..=places {
        term *= a / f64::from(n.min(servers));
        sum += term;
        if sum > 1e200 {
            term /= sum;
            sum = 1.0;
        }
    }
    term / sum
}

/// The offered load, in erlangs, at which `servers` servers with room for
/// `places` turn away `share` of the arrivals (blocking rises with the
/// load, so bisection finds it).
pub fn load_with_queue_for(servers: u32, places: u32, share: f64) -> f64 {
    if places == 0 || share <= 0.0 {
        return 0.0;
    }
    let share = share.min(1.0 - 1e-12);
    let (mut lo, mut hi) = (0.0f64, f64::from(places).max(1.0));
    while blocking_with_queue(servers, places, hi) < share {
        hi *= 2.0;
    }
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if blocking_with_queue(servers, places, mid) < share {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// The probability C(n, a) that a Poisson arrival to `n` servers offered
/// `a` erlangs waits (M/M/n with an unbounded queue); 1 when `a >= n`.
pub fn waiting(n: u32, a: f64) -> f64 {
    let n_f = f64::from(n);
    if n == 0 || a >= n_f {
        return 1.0;
    }
    let b = blocking(n, a);
    b / (1.0 - (a / n_f) * (1.0 - b))
}

/// The share of arrivals that wait longer than `t` seconds in a queue
/// before `n` servers of `mu` requests per second each, at `rate`
/// arrivals per second (M/M/n): C(n, a) e^(-(n mu - rate) t).
pub fn wait_over(n: u32, mu: f64, rate: f64, t: f64) -> f64 {
    let capacity = f64::from(n) * mu;
    if rate >= capacity {
        return 1.0;
    }
    waiting(n, rate / mu) * (-(capacity - rate) * t.max(0.0)).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocking_matches_the_tables() {
        // Standard Erlang B table values.
        assert!((blocking(1, 1.0) - 0.5).abs() < 1e-12);
        assert!((blocking(8, 4.54) - 0.05).abs() < 0.001);
        assert!((blocking(10, 5.0) - 0.018_38).abs() < 1e-4);
        assert_eq!(blocking(4, 0.0), 0.0);
    }

    #[test]
    fn the_load_for_a_share_inverts_blocking() {
        let a = load_for(8, 0.05);
        assert!((a - 4.54).abs() < 0.01, "{a}");
        assert!((blocking(8, a) - 0.05).abs() < 1e-9);
        assert_eq!(load_for(0, 0.05), 0.0);
        // The 0.57 of the closed-loop rate: 8 places at 0.5 s each complete
        // 16 req/s in a closed loop; 5% blocking comes at 9.1 req/s.
        let rate = a / 0.5;
        assert!((rate / 16.0 - 0.57).abs() < 0.01, "{}", rate / 16.0);
    }

    #[test]
    fn waiting_matches_erlang_c() {
        // Textbook value: 2 servers offered 1 erlang, C = 1/3.
        assert!((waiting(2, 1.0) - 1.0 / 3.0).abs() < 1e-12);
        // One server: C = rho.
        assert!((waiting(1, 0.7) - 0.7).abs() < 1e-12);
        assert_eq!(waiting(4, 4.0), 1.0);
        // M/M/1 at rho 0.5, mu 1: P(Wq > t) = 0.5 e^(-0.5 t).
        let p = wait_over(1, 1.0, 0.5, 2.0);
        assert!((p - 0.5 * (-1.0f64).exp()).abs() < 1e-12, "{p}");
        assert_eq!(wait_over(2, 1.0, 2.0, 1.0), 1.0);
    }

    #[test]
    fn blocking_with_a_queue_is_erlang_b_without_one_and_less_with_one() {
        for a in [0.5, 4.54, 9.0] {
            assert!((blocking_with_queue(8, 8, a) - blocking(8, a)).abs() < 1e-12);
        }
        // M/M/1/2 at a = 1: p0 = p1 = p2 = 1/3.
        assert!((blocking_with_queue(1, 2, 1.0) - 1.0 / 3.0).abs() < 1e-12);
        // 4 servers, 4 waiting places: fewer turned away than 4 places alone.
        assert!(blocking_with_queue(4, 8, 3.0) < blocking(4, 3.0));
        let a = load_with_queue_for(4, 8, 0.05);
        assert!((blocking_with_queue(4, 8, a) - 0.05).abs() < 1e-9);
        // No overflow with many places.
        let b = blocking_with_queue(64, 4096, 200.0);
        assert!(b.is_finite() && b > 0.5 && b < 1.0, "{b}");
    }
}
