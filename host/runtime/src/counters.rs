//! What one CRD's reconcilers did, counted: the metrics stamp, the admin endpoint and the
//! benchmarks read these.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::failure::Reason;

/// Counters of one CRD's reconciles.
#[derive(Debug, Default)]
pub struct Counters {
    pub reconciles: AtomicU64,
    pub failures: AtomicU64,
    /// Failures by [`Reason::label`]: a fixed set of keys, whatever a guest reports.
    failures_by_reason: Mutex<BTreeMap<&'static str, u64>>,
    pub panics: AtomicU64,
    pub gated: AtomicU64,
    /// Writes reconcilers made to the API server (applies, deletes, status patches).
    pub writes: AtomicU64,
    /// The latest reconciles: when each ended, how long it took, whether it failed.
    recent: Mutex<VecDeque<(Instant, Duration, bool)>>,
}

/// How far back the rolling figures look, and at most how many reconciles they keep.
const RECENT_WINDOW: Duration = Duration::from_secs(60);
const RECENT_LIMIT: usize = 256;

/// Rolling figures over the reconciles of the last minute (zero when there were none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recent {
    pub p95_ms: u64,
    pub error_rate_percent: u64,
}

impl Counters {
    /// Counts a failed reconcile.
    pub fn failed(&self, reason: &Reason) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        let mut by_reason = self.failures_by_reason.lock().unwrap_or_else(|e| e.into_inner());
        *by_reason.entry(reason.label()).or_default() += 1;
    }

    /// Notes one reconcile's duration and outcome for the rolling figures.
    pub fn record(&self, took: Duration, failed: bool) {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        if recent.len() == RECENT_LIMIT {
            recent.pop_front();
        }
        recent.push_back((Instant::now(), took, failed));
    }

    /// The p95 duration and the failure share of the reconciles that ended in the last
    /// minute before `now`.
    pub fn recent(&self, now: Instant) -> Recent {
        let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        let mut took: Vec<Duration> = Vec::new();
        let mut failed = 0u64;
        for (at, duration, fail) in recent.iter() {
            if now.saturating_duration_since(*at) <= RECENT_WINDOW {
                took.push(*duration);
                failed += u64::from(*fail);
            }
        }
        if took.is_empty() {
            return Recent::default();
        }
        took.sort();
        let p95 = took[(took.len() * 95).div_ceil(100) - 1];
        Recent {
            p95_ms: u64::try_from(p95.as_millis()).unwrap_or(u64::MAX),
            error_rate_percent: failed * 100 / took.len() as u64,
        }
    }

    /// Failures so far, by reason label.
    pub fn failures_by_reason(&self) -> BTreeMap<&'static str, u64> {
        self.failures_by_reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rolling_figures_cover_the_last_minute_only() {
        let counters = Counters::default();
        for ms in 1..=20 {
            counters.record(Duration::from_millis(ms * 10), ms % 4 == 0);
        }
        let now = Instant::now();
        assert_eq!(
            counters.recent(now),
            Recent {
                p95_ms: 190,
                error_rate_percent: 25
            }
        );
        assert_eq!(counters.recent(now + Duration::from_secs(61)), Recent::default());
    }
}
