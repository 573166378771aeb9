//! What one CRD's reconcilers did, counted: the metrics stamp, the admin endpoint and the
//! benchmarks read these.

use std::sync::atomic::AtomicU64;

/// Counters of one CRD's reconciles.
#[derive(Debug, Default)]
pub struct Counters {
    pub reconciles: AtomicU64,
    pub failures: AtomicU64,
    pub panics: AtomicU64,
    pub gated: AtomicU64,
    /// Writes reconcilers made to the API server (applies, deletes, status patches).
    pub writes: AtomicU64,
}
