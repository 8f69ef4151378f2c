//! Summaries of repeated measurements: median, min and max.

use serde::Serialize;

/// The repetitions of one figure and their summary. With an even number of
/// samples the median is the mean of the two middle ones.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Every repetition, in the order measured.
    pub samples: Vec<f64>,
}

impl Summary {
    /// Summarizes `samples`; `None` when there are none.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let mid = sorted.len() / 2;
        let median = if sorted.len() % 2 == 1 {
            sorted[mid]
        } else {
            (sorted[mid - 1] + sorted[mid]) / 2.0
        };
        Some(Summary {
            median,
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            samples: samples.to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_and_even_counts() {
        let s = Summary::of(&[5.0, 1.0, 3.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (3.0, 1.0, 5.0));
        assert_eq!(s.samples, vec![5.0, 1.0, 3.0]);
        let s = Summary::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.5, 1.0, 4.0));
        assert_eq!(Summary::of(&[7.0]).unwrap().median, 7.0);
    }

    #[test]
    fn nothing_to_summarize() {
        assert_eq!(Summary::of(&[]), None);
    }
}
