//! The random spread added to every loop's interval, so that loops started
//! together do not stay in step.

use std::time::Duration;

/// The interval with up to `jitter` of it added at random.
pub fn jittered(interval: Duration, jitter: f64, unit_random: f64) -> Duration {
    // Saturating: an interval near Duration::MAX must not panic the loop.
    interval.saturating_add(interval.mul_f64(jitter * unit_random))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_its_fraction() {
        let i = Duration::from_secs(100);
        assert_eq!(jittered(i, 0.1, 0.0), i);
        assert_eq!(jittered(i, 0.1, 0.5), Duration::from_secs(105));
        assert!(jittered(i, 0.1, 0.999) < Duration::from_secs(110));
    }
}
