//! What every webhook of the gateway shares: the AdmissionReview answer, and the counts
//! of what the webhooks answered.

use std::sync::atomic::AtomicU64;

use axum::Json;
use serde_json::{Value, json};

/// What the webhooks answered, per outcome.
#[derive(Debug, Default)]
pub struct Counts {
    pub allowed: AtomicU64,
    pub denied: AtomicU64,
    pub warned: AtomicU64,
    pub mutated: AtomicU64,
    /// Deletes (and strict-mode label removals) deletion protection refused.
    pub deletion_blocked: AtomicU64,
    /// Creates namespace protection refused.
    pub namespace_blocked: AtomicU64,
    /// Objects converted, and conversions that failed.
    pub converted: AtomicU64,
    pub conversion_failed: AtomicU64,
}

/// An `admission.k8s.io/v1` AdmissionReview carrying `response`.
pub fn review(response: Value) -> Json<Value> {
    Json(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}))
}
