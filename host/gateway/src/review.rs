//! What every webhook of the gateway shares: the AdmissionReview answer, the Katalog CRD a
//! review is about, and the counts of what the webhooks answered.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use axum::Json;
use serde_json::{Value, json};

use orkestra_katalog::Compiled;
use orkestra_katalog::compile::CompiledCrd;

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
    /// The last conversion reviews (`conversionWindow` of them).
    pub conversions: crate::conversion_window::Window,
    /// External calls of the admission rules that failed or did not answer in time (each
    /// refused its write).
    pub calls_failed: AtomicU64,
}

/// An `admission.k8s.io/v1` AdmissionReview carrying `response`.
pub fn review(response: Value) -> Json<Value> {
    Json(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}))
}

/// The Katalog CRD whose CRs a review is about (not a subresource's review).
pub fn crd_of<'c>(compiled: &'c Compiled, request: &Value) -> Option<&'c Arc<CompiledCrd>> {
    let resource = &request["resource"];
    compiled.enabled().find(|crd| {
        resource["group"] == crd.group.as_str()
            && resource["resource"] == crd.plural.as_str()
            && request["subResource"].as_str().is_none_or(str::is_empty)
    })
}

/// What a webhook of `app` answers to `body` posted at `path` (the review's `response`).
#[cfg(test)]
pub(crate) async fn answer(app: axum::Router, path: &str, body: Value) -> Value {
    use tower::ServiceExt;
    let request = axum::http::Request::post(path)
        .header("content-type", "application/json")
        .body(axum::body::Body::from(body.to_string()))
        .unwrap();
    let response = app.oneshot(request).await.unwrap();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    serde_json::from_slice::<Value>(&bytes).unwrap()["response"].clone()
}
