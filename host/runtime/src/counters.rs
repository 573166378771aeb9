//! What one CRD's reconcilers did, counted: the metrics stamp, the admin endpoint and the
//! benchmarks read these.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

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
}

impl Counters {
    /// Counts a failed reconcile.
    pub fn failed(&self, reason: &Reason) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        let mut by_reason = self.failures_by_reason.lock().unwrap_or_else(|e| e.into_inner());
        *by_reason.entry(reason.label()).or_default() += 1;
    }

    /// Failures so far, by reason label.
    pub fn failures_by_reason(&self) -> BTreeMap<&'static str, u64> {
        self.failures_by_reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
