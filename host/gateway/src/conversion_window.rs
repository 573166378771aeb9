//! The conversion webhook's rolling figures (`security.conversion.conversionWindow`, default
//! 100): of the last N reviews, how many failed and how long they took, on the gateway's
//! `/katalog`, beside the totals since start.

use std::collections::VecDeque;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{Value, json};

/// Reviews kept when the Katalog does not say.
pub const DEFAULT_WINDOW: usize = 100;

/// The last reviews: whether each succeeded, and how long it took.
#[derive(Debug)]
pub struct Window {
    size: usize,
    reviews: Mutex<VecDeque<(bool, Duration)>>,
}

impl Default for Window {
    fn default() -> Self {
        Self::new(DEFAULT_WINDOW)
    }
}

impl Window {
    /// A window of the last `size` reviews (at least one).
    pub fn new(size: usize) -> Self {
        Self {
            size: size.max(1),
            reviews: Mutex::new(VecDeque::new()),
        }
    }

    pub fn record(&self, ok: bool, took: Duration) {
        let mut reviews = self.reviews.lock();
        if reviews.len() == self.size {
            reviews.pop_front();
        }
        reviews.push_back((ok, took));
    }

    /// `{size, reviews, failed, failedPercent, p95Ms}` over the window.
    pub fn json(&self) -> Value {
        let reviews = self.reviews.lock();
        let failed = reviews.iter().filter(|(ok, _)| !ok).count();
        let mut took: Vec<Duration> = reviews.iter().map(|(_, took)| *took).collect();
        took.sort_unstable();
        // The nearest rank: the smallest value at or above 95% of the reviews.
        let p95 = match took.len() {
            0 => None,
            n => Some(took[(n * 95).div_ceil(100).max(1) - 1]),
        };
        json!({
            "size": self.size,
            "reviews": reviews.len(),
            "failed": failed,
            "failedPercent": (failed * 100).checked_div(reviews.len()).unwrap_or(0),
            "p95Ms": p95.map(|d| d.as_secs_f64() * 1000.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_keeps_the_last_reviews_only() {
        let window = Window::new(4);
        assert_eq!(window.json()["reviews"], 0);
        assert!(window.json()["p95Ms"].is_null());
        window.record(false, Duration::from_millis(50));
        for ms in [1, 2, 3, 4] {
            window.record(true, Duration::from_millis(ms));
        }
        let figures = window.json();
        assert_eq!(figures["size"], 4);
        assert_eq!(figures["reviews"], 4);
        assert_eq!(figures["failed"], 0, "the failure fell out of the window");
        assert_eq!(figures["p95Ms"], 4.0);
        window.record(false, Duration::from_millis(10));
        assert_eq!(window.json()["failedPercent"], 25);
        assert_eq!(Window::new(0).json()["size"], 1);
    }
}
