//! What one CRD's reconcilers did, counted: the metrics stamp, the Live API, `/metrics` and
//! the benchmarks read these.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use crate::outcome::failure::Reason;

/// How each reconcile ended, as controller-runtime counts it.
#[derive(Debug, Default)]
pub struct Results {
    pub success: AtomicU64,
    pub error: AtomicU64,
    /// Run again at once (the CR changed under a write).
    pub requeue: AtomicU64,
    /// Run again after a delay the reconciler (or `requeue`) asked for.
    pub requeue_after: AtomicU64,
}

/// Durations of one CRD's work, as histograms for `/metrics`.
#[derive(Debug)]
pub struct Timing {
    /// Seconds per reconcile call.
    pub reconcile: Histogram,
    /// Seconds an item waited in the queue once ready.
    pub queued: Histogram,
    /// Seconds a worker held an item (gate, reconcile, stamps).
    pub work: Histogram,
    /// Seconds from a change's watch event to the start of its reconcile, for a user's
    /// change (`[0]`) and background work (`[1]`: the initial list, resyncs).
    pub change_queued: [Histogram; 2],
    /// Seconds from a change's watch event to the end of the reconcile that handled it (its
    /// status written), retries included; by class as `change_queued`.
    pub change_done: [Histogram; 2],
}

/// The classes of [`Timing::change_queued`] and [`Timing::change_done`], as labelled.
pub const CHANGE_CLASSES: [&str; 2] = ["user", "background"];

impl Default for Timing {
    fn default() -> Self {
        // controller-runtime's reconcile buckets, and client-go's workqueue ones.
        const RECONCILE: [f64; 40] = [
            0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25,
            1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0,
            60.0,
        ];
        // Fine where the targets are (10 ms to start, 1 s to done), coarse beyond.
        const CHANGE: [f64; 18] = [
            0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 30.0,
            60.0,
        ];
        let queue = || Histogram::new(exponential_buckets(1e-8, 10.0, 10));
        let change = || [Histogram::new(CHANGE), Histogram::new(CHANGE)];
        Self {
            reconcile: Histogram::new(RECONCILE),
            queued: queue(),
            work: queue(),
            change_queued: change(),
            change_done: change(),
        }
    }
}

/// Counters of one CRD's reconciles.
#[derive(Debug, Default)]
pub struct Counters {
    pub results: Results,
    pub timing: Timing,
    pub reconciles: AtomicU64,
    pub failures: AtomicU64,
    /// Failures by [`Reason::label`]: a fixed set of keys, whatever a guest reports.
    failures_by_reason: Mutex<BTreeMap<&'static str, u64>>,
    pub panics: AtomicU64,
    pub gated: AtomicU64,
    /// Writes reconcilers made to the API server (applies, deletes, status patches).
    pub writes: AtomicU64,
    /// Reconciles held back because their CR had spent its write budget.
    pub held: AtomicU64,
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
    pub p99_ms: u64,
    pub error_rate_percent: u64,
}

impl Counters {
    /// Counts one write to the API server, in total and against the reconcile making it
    /// (its write budget).
    pub fn wrote(&self) {
        self.writes.fetch_add(1, Ordering::Relaxed);
        crate::outcome::budget::count();
    }

    /// Counts a failed reconcile.
    pub fn failed(&self, reason: &Reason) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        let mut by_reason = self.failures_by_reason.lock();
        *by_reason.entry(reason.label()).or_default() += 1;
    }

    /// Notes one reconcile's duration and outcome for the rolling figures and the histogram.
    pub fn record(&self, took: Duration, failed: bool) {
        self.timing.reconcile.observe(took.as_secs_f64());
        let mut recent = self.recent.lock();
        if recent.len() == RECENT_LIMIT {
            recent.pop_front();
        }
        recent.push_back((Instant::now(), took, failed));
    }

    /// The p95 duration and the failure share of the reconciles that ended in the last
    /// minute before `now`.
    pub fn recent(&self, now: Instant) -> Recent {
        let recent = self.recent.lock();
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
        let percentile = |p: usize| {
            let at = took[(took.len() * p).div_ceil(100) - 1];
            u64::try_from(at.as_millis()).unwrap_or(u64::MAX)
        };
        Recent {
            p95_ms: percentile(95),
            p99_ms: percentile(99),
            error_rate_percent: failed * 100 / took.len() as u64,
        }
    }

    /// Failures so far, by reason label.
    pub fn failures_by_reason(&self) -> BTreeMap<&'static str, u64> {
        self.failures_by_reason.lock().clone()
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
                p99_ms: 200,
                error_rate_percent: 25
            }
        );
        assert_eq!(counters.recent(now + Duration::from_secs(61)), Recent::default());
    }
}
