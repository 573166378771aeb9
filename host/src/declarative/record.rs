//! Kubernetes Events on the CR (`kubectl describe` shows them): one recorder per CRD,
//! reporting as the `orkestra` controller. Publishing is best effort: an event that cannot be
//! written is logged, never a reason to fail a reconcile.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use serde_json::Value;

/// The Events API's limit on a note.
const NOTE_LIMIT: usize = 1024;

pub struct Events {
    recorder: Recorder,
}

impl Events {
    pub fn new(client: kube::Client) -> Self {
        let reporter = Reporter {
            controller: "orkestra".into(),
            instance: None,
        };
        Self {
            recorder: Recorder::new(client, reporter),
        }
    }

    pub async fn normal(&self, cr: &Value, reason: &str, note: String) {
        self.publish(cr, EventType::Normal, reason, note).await;
    }

    pub async fn warning(&self, cr: &Value, reason: &str, note: String) {
        self.publish(cr, EventType::Warning, reason, note).await;
    }

    async fn publish(&self, cr: &Value, type_: EventType, reason: &str, note: String) {
        let text = |field: &Value| field.as_str().map(String::from);
        let reference = ObjectReference {
            api_version: text(&cr["apiVersion"]),
            kind: text(&cr["kind"]),
            name: text(&cr["metadata"]["name"]),
            namespace: text(&cr["metadata"]["namespace"]),
            uid: text(&cr["metadata"]["uid"]),
            resource_version: text(&cr["metadata"]["resourceVersion"]),
            ..ObjectReference::default()
        };
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(crate::text::bounded(note, NOTE_LIMIT)),
            action: "Reconcile".into(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &reference).await {
            tracing::debug!(%error, reason, "could not record the event");
        }
    }
}
