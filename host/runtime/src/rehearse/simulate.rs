//! What `ork simulate` reports of one CR reconciled against the [`super::stand_in`] API
//! server: every object the reconcile wrote, as it ends up (or that it deleted), the CR's
//! status, the Events it recorded, its requeue, and why it failed.

use serde::Serialize;
use serde_json::Value;

use super::plan::{event_line, is_event, name_of, resource_of};
use super::stand_in::Cluster;
use crate::runtime::Rehearsed;

/// Metadata the API server sets, left out of what is printed.
const SERVER_SET: [&str; 5] = [
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
];

/// The outcome of a simulated reconcile.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Simulated {
    pub cr: String,
    /// `reconciled`, `gated` (its reconcile gate is closed) or `failed`.
    pub outcome: &'static str,
    /// Each object written, as it ends up, in the order first written.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Value>,
    /// `resource namespace/name` of each object deleted (`services team-a/web`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deleted: Vec<String>,
    /// The CR's status after the reconcile.
    pub status: Value,
    /// The CR's finalizers after the reconcile.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub finalizers: Vec<Value>,
    /// `Type Reason: note`, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requeue_after: Option<String>,
    /// The Katalog's external calls the reconcile would have made (a simulation makes none).
    #[serde(rename = "externalCallsNotMade", skip_serializing_if = "Vec::is_empty")]
    pub external: Vec<orkestra_effects::external::NotMade>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The report of the CR at `cr_path` (`namespace/name` `cr`) after `rehearsed`, from what
/// `cluster` recorded and holds once the writes left in flight (Events) have landed.
pub async fn report(cluster: &Cluster, cr_path: &str, cr: String, rehearsed: Rehearsed) -> Simulated {
    cluster.writes().settle().await;
    let requeue_after = rehearsed.requeue_after();
    let (outcome, error) = match rehearsed {
        Rehearsed::Gated => ("gated", None),
        Rehearsed::Failed(why) => ("failed", Some(why)),
        Rehearsed::Reconciled(_) => ("reconciled", None),
    };
    let mut report = Simulated {
        cr,
        outcome,
        children: Vec::new(),
        deleted: Vec::new(),
        status: Value::Null,
        finalizers: Vec::new(),
        events: Vec::new(),
        requeue_after,
        external: Vec::new(),
        error,
    };
    let status_path = format!("{cr_path}/status");
    let mut seen: Vec<String> = Vec::new();
    // A write the stand-in refused changed nothing; the reconcile's error says why.
    for write in cluster.writes().take().into_iter().filter(|w| w.status < 400) {
        if is_event(&write.path) {
            report
                .events
                .push(event_line(write.body.as_ref().unwrap_or(&Value::Null)));
        } else if write.path != cr_path && write.path != status_path && !seen.contains(&write.path) {
            seen.push(write.path);
        }
    }
    for path in seen {
        match cluster.get(&path) {
            Some(object) => report.children.push(without_server_fields(object)),
            None => report
                .deleted
                .push(format!("{} {}", resource_of(&path), name_of(&path))),
        }
    }
    if let Some(object) = cluster.get(cr_path) {
        report.status = object["status"].clone();
        report.finalizers = object["metadata"]["finalizers"].as_array().cloned().unwrap_or_default();
    }
    report
}

fn without_server_fields(mut object: Value) -> Value {
    if let Some(metadata) = object["metadata"].as_object_mut() {
        metadata.retain(|key, _| !SERVER_SET.contains(&key.as_str()));
    }
    object
}
