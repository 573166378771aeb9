//! Kubernetes Events on the CR (`kubectl describe` shows them): one recorder per CRD,
//! reporting as the `orkestra` controller. Publishing is best effort and off the reconcile's
//! path: an event is queued and written by a few publishers in the background, so a worker
//! never waits on one; one that cannot be written (or finds the queue full) is logged, never
//! a reason to fail a reconcile.

use std::sync::OnceLock;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use serde_json::Value;
use tokio::sync::mpsc;

/// The Events API's limit on a note.
const NOTE_LIMIT: usize = 1024;
/// Events waiting to be written; past this, new ones are dropped (and logged).
const QUEUED: usize = 1024;
/// Events written at once.
const PUBLISHERS: usize = 4;

type Queued = (ObjectReference, Event);

pub struct Events {
    recorder: Recorder,
    /// Started with the first event (a tokio runtime is running then).
    queue: OnceLock<mpsc::Sender<Queued>>,
}

impl Events {
    pub fn new(client: kube::Client) -> Self {
        let reporter = Reporter {
            controller: "orkestra".into(),
            instance: None,
        };
        Self {
            recorder: Recorder::new(client, reporter),
            queue: OnceLock::new(),
        }
    }

    pub fn normal(&self, cr: &Value, reason: &str, note: String) {
        self.publish(cr, EventType::Normal, reason, note);
    }

    pub fn warning(&self, cr: &Value, reason: &str, note: String) {
        self.publish(cr, EventType::Warning, reason, note);
    }

    /// The queue, and the publishers that drain it until the recorder is dropped.
    fn queue(&self) -> &mpsc::Sender<Queued> {
        self.queue.get_or_init(|| {
            let (sender, receiver) = mpsc::channel::<Queued>(QUEUED);
            let recorder = self.recorder.clone();
            let queued = futures::stream::unfold(receiver, |mut receiver| async move {
                receiver.recv().await.map(|item| (item, receiver))
            });
            tokio::spawn(queued.for_each_concurrent(PUBLISHERS, move |(reference, event)| {
                let recorder = recorder.clone();
                async move {
                    if let Err(error) = recorder.publish(&event, &reference).await {
                        tracing::debug!(%error, reason = %event.reason, "could not record the event");
                    }
                }
            }));
            sender
        })
    }

    fn publish(&self, cr: &Value, type_: EventType, reason: &str, note: String) {
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
            note: Some(orkestra_katalog::text::bounded(note, NOTE_LIMIT)),
            action: "Reconcile".into(),
            secondary: None,
        };
        if self.queue().try_send((reference, event)).is_err() {
            tracing::debug!(reason, "event dropped: the queue of events to write is full");
        }
    }
}
