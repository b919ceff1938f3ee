//! When each request of an open-loop step is to be sent: an absolute
//! schedule fixed before the step starts, from a seeded generator, so that
//! nothing the server does can move an arrival (no coordinated omission).

pub use crate::config::Arrivals;

/// Send times, in seconds from the step's start, of `n` arrivals at `rate`
/// per second: the first arrives one gap after the start. The same seed gives
/// the same schedule.
pub fn schedule(kind: Arrivals, rate: f64, n: usize, seed: u64) -> Vec<f64> {
    if !(rate > 0.0 && rate.is_finite()) {
        return Vec::new();
    }
    let mut rng = fastrand::Rng::with_seed(seed);
    let mean_gap = 1.0 / rate;
    let mut t = 0.0;
    (0..n)
        .map(|_| {
            t += match kind {
                // 1 - U is in (0, 1]: its logarithm is finite.
                Arrivals::Poisson => -(1.0 - rng.f64()).ln() * mean_gap,
                Arrivals::Constant => mean_gap,
            };
            t
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gaps(times: &[f64]) -> Vec<f64> {
        let mut prev = 0.0;
        times
            .iter()
            .map(|t| {
                let g = t - prev;
                prev = *t;
                g
            })
            .collect()
    }

    fn mean_and_cv(v: &[f64]) -> (f64, f64) {
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, var.sqrt() / mean)
    }

    #[test]
    fn poisson_gaps_have_the_mean_and_dispersion_of_an_exponential() {
        let times = schedule(Arrivals::Poisson, 20.0, 20_000, 7);
        assert!(times.windows(2).all(|w| w[1] > w[0]));
        let (mean, cv) = mean_and_cv(&gaps(&times));
        // 20,000 gaps: the mean's standard error is 0.7%, the CV's about 1%.
        assert!((mean - 0.05).abs() < 0.05 * 0.03, "mean gap {mean}");
        assert!((cv - 1.0).abs() < 0.04, "coefficient of variation {cv}");
        // Counts in 1 s windows: Poisson, variance equal to the mean.
        let mut counts = vec![0u32; 1000];
        for t in &times {
            if let Some(c) = counts.get_mut(*t as usize) {
                *c += 1;
            }
        }
        let c: Vec<f64> = counts.iter().map(|c| f64::from(*c)).collect();
        let (m, cv) = mean_and_cv(&c);
        let dispersion = (cv * m).powi(2) / m;
        assert!((m - 20.0).abs() < 0.6, "mean count {m}");
        assert!(
            (dispersion - 1.0).abs() < 0.15,
            "index of dispersion {dispersion}"
        );
    }

    #[test]
    fn constant_gaps_are_equal_and_seeds_repeat() {
        let times = schedule(Arrivals::Constant, 4.0, 8, 1);
        assert_eq!(times, vec![0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]);
        assert_eq!(
            schedule(Arrivals::Poisson, 3.0, 50, 9),
            schedule(Arrivals::Poisson, 3.0, 50, 9)
        );
        assert_ne!(
            schedule(Arrivals::Poisson, 3.0, 50, 9),
            schedule(Arrivals::Poisson, 3.0, 50, 10)
        );
        assert!(schedule(Arrivals::Poisson, 0.0, 5, 1).is_empty());
        assert!(schedule(Arrivals::Poisson, f64::NAN, 5, 1).is_empty());
    }
}
