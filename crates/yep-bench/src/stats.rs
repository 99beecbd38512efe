//! Percentiles and rates from raw samples.

use std::time::Duration;

/// p50 and p99 of a set of durations, in microseconds.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Percentiles {
    pub p50_us: f64,
    pub p99_us: f64,
    pub samples: usize,
}

pub fn percentiles(mut samples: Vec<Duration>) -> Percentiles {
    samples.sort_unstable();
    let at = |q: f64| {
        if samples.is_empty() {
            return 0.0;
        }
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[i].as_secs_f64() * 1e6
    };
    Percentiles {
        p50_us: at(0.50),
        p99_us: at(0.99),
        samples: samples.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_the_ranked_samples() {
        let samples: Vec<_> = (1..=100).map(Duration::from_micros).collect();
        let p = percentiles(samples);
        assert_eq!(p.p50_us, 51.0);
        assert_eq!(p.p99_us, 99.0);
        assert_eq!(p.samples, 100);
    }
}
