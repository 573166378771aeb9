//! Kubernetes Events on the CR (`kubectl describe` shows them): one recorder per CRD,
//! reporting as the `orkestra` controller. Publishing is best effort and off the reconcile's
//! path: an event is queued and written by a few publishers in the background, so a worker
//! never waits on one; one that cannot be written (or finds the queue full) is logged, never
//! a reason to fail a reconcile.
//!
//! A repeat of a recent event (same CR, type, reason and note) updates the earlier Event's
//! series count instead of creating another. Past [`SIMILAR`] different notes of one reason
//! on one CR within the window, they join one combined Event ("combined from similar
//! events"), as client-go's correlator does. And each CR may write at most a burst of
//! [`SPAM`] Events or series counts, then one per ten seconds (a repeat in between is
//! counted, and written with the next): a reconcile that emits an event every time costs a
//! handful of writes a minute, not one per call. Only the last [`REMEMBERED`] events
//! are kept for this, by a hash of what they say, so memory does not grow with the CRs.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Patch, PatchParams, PostParams};
use orkestra_kube::objects::{self, Objects};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// The Events API's limit on a note.
const NOTE_LIMIT: usize = 1024;
/// Events waiting to be written; past this, new ones are dropped (and logged).
const QUEUED: usize = 1024;
/// Events written at once.
const PUBLISHERS: usize = 4;
/// Recent events remembered for series.
const REMEMBERED: usize = 256;
/// A repeat within this long of the last one joins its series.
const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);
/// Different notes of one reason on one CR before they are combined.
const SIMILAR: usize = 10;
/// What one CR may publish: a burst, then one event per ten seconds.
const SPAM: crate::outcome::budget::Rate = crate::outcome::budget::Rate {
    burst: 25.0,
    per_second: 0.1,
};
/// Who reports.
const CONTROLLER: &str = "orkestra";

/// One event to write.
struct Queued {
    regarding: ObjectReference,
    type_: &'static str,
    reason: String,
    note: String,
}

impl Queued {
    /// What makes a repeat: the same CR, type, reason and note.
    fn key(&self) -> u64 {
        let mut hasher = DefaultHasher::new();
        (self.similar_key(), &self.note).hash(&mut hasher);
        hasher.finish()
    }

    /// What makes events similar: the same CR, type and reason.
    fn similar_key(&self) -> u64 {
        let mut hasher = DefaultHasher::new();
        (
            &self.regarding.namespace,
            &self.regarding.name,
            &self.regarding.uid,
            self.type_,
            &self.reason,
        )
            .hash(&mut hasher);
        hasher.finish()
    }

    /// The CR it is about, for its spam budget.
    fn source(&self) -> String {
        let r = &self.regarding;
        format!(
            "{}/{}/{}",
            r.namespace.as_deref().unwrap_or_default(),
            r.name.as_deref().unwrap_or_default(),
            r.uid.as_deref().unwrap_or_default()
        )
    }

    /// This event as part of the combined Event of its similar ones.
    fn combined(self) -> Self {
        Self {
            note: orkestra_expr::text::bounded(format!("(combined from similar events): {}", self.note), NOTE_LIMIT),
            ..self
        }
    }
}

pub struct Events {
    client: kube::Client,
    /// Started with the first event (a tokio runtime is running then).
    queue: OnceLock<mpsc::Sender<Queued>>,
}

impl Events {
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            queue: OnceLock::new(),
        }
    }

    pub fn normal(&self, cr: &Value, reason: &str, note: String) {
        self.publish(cr, "Normal", reason, note);
    }

    pub fn warning(&self, cr: &Value, reason: &str, note: String) {
        self.publish(cr, "Warning", reason, note);
    }

    /// The queue, and the publishers that drain it until the recorder is dropped.
    fn queue(&self) -> &mpsc::Sender<Queued> {
        self.queue.get_or_init(|| {
            let (sender, receiver) = mpsc::channel::<Queued>(QUEUED);
            let client = self.client.clone();
            let recent = Arc::new(Mutex::new(Recent::default()));
            let queued = futures::stream::unfold(receiver, |mut receiver| async move {
                receiver.recv().await.map(|item| (item, receiver))
            });
            tokio::spawn(queued.for_each_concurrent(PUBLISHERS, move |event| {
                let (client, recent) = (client.clone(), recent.clone());
                async move {
                    let reason = event.reason.clone();
                    if let Err(error) = write(&client, &recent, event).await {
                        tracing::debug!(%error, %reason, "could not record the event");
                    }
                }
            }));
            sender
        })
    }

    fn publish(&self, cr: &Value, type_: &'static str, reason: &str, note: String) {
        let text = |field: &Value| field.as_str().map(String::from);
        let event = Queued {
            regarding: ObjectReference {
                api_version: text(&cr["apiVersion"]),
                kind: text(&cr["kind"]),
                name: text(&cr["metadata"]["name"]),
                namespace: text(&cr["metadata"]["namespace"]),
                uid: text(&cr["metadata"]["uid"]),
                resource_version: text(&cr["metadata"]["resourceVersion"]),
                ..ObjectReference::default()
            },
            type_,
            reason: reason.into(),
            note: orkestra_expr::text::bounded(note, NOTE_LIMIT),
        };
        // A write to come (or a series count): charged to the reconcile that asked for it.
        crate::outcome::budget::count();
        if self.queue().try_send(event).is_err() {
            tracing::debug!(reason, "event dropped: the queue of events to write is full");
        }
    }
}

/// Writes one event: a new Event, or the next count of a recent one's series. A repeat that
/// arrives while its first Event is still being created only counts; the creator adds it.
async fn write(client: &kube::Client, recent: &Mutex<Recent>, event: Queued) -> Result<(), kube::Error> {
    let namespace = event.regarding.namespace.clone().unwrap_or_else(|| "default".into());
    let api: Objects<Event> = objects::namespaced(client.clone(), &namespace)?;
    let now = Timestamp::now();
    let (event, next) = {
        let mut recent = recent.lock();
        let event = match recent.too_similar(event.similar_key(), event.key(), now) {
            true => event.combined(),
            false => event,
        };
        let next = recent.next(event.key(), now);
        if next != Next::Counted && recent.spam.admit(&event.source()).is_err() {
            tracing::debug!(reason = %event.reason, "event dropped: its custom resource published too many");
            if next == Next::Create {
                recent.forget(event.key());
            }
            return Ok(());
        }
        recent.spam.charge(&event.source(), 1);
        (event, next)
    };
    let key = event.key();
    let event = &event;
    let created = match next {
        Next::Counted => return Ok(()),
        Next::Series(name, count) => match patch_series(&api, &name, count, now).await {
            // The API server has let the Event expire: start anew.
            Err(kube::Error::Api(status)) if status.code == 404 => {
                recent.lock().restart(key);
                api.create(&PostParams::default(), &new_event(event, now)).await
            }
            other => return other,
        },
        Next::Create => api.create(&PostParams::default(), &new_event(event, now)).await,
    };
    let name = match created {
        Ok(created) => created.metadata.name.unwrap_or_default(),
        Err(error) => {
            recent.lock().forget(key);
            return Err(error);
        }
    };
    let repeats = recent.lock().created(key, name.clone(), now);
    if repeats > 1 {
        patch_series(&api, &name, repeats, Timestamp::now()).await?;
    }
    Ok(())
}

async fn patch_series(api: &Objects<Event>, name: &str, count: i32, now: Timestamp) -> Result<(), kube::Error> {
    let series = json!({"series": {"count": count, "lastObservedTime": MicroTime(now)}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&series))
        .await
        .map(|_| ())
}

fn new_event(event: &Queued, now: Timestamp) -> Event {
    let name = event.regarding.name.as_deref().unwrap_or(CONTROLLER);
    Event {
        metadata: ObjectMeta {
            // As client-go names them: the CR's name and the time in hex.
            name: Some(format!("{name}.{:x}", now.as_nanosecond())),
            namespace: event.regarding.namespace.clone(),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(now)),
        action: Some("Reconcile".into()),
        reason: Some(event.reason.clone()),
        note: Some(event.note.clone()),
        type_: Some(event.type_.into()),
        regarding: Some(event.regarding.clone()),
        reporting_controller: Some(CONTROLLER.into()),
        reporting_instance: Some(CONTROLLER.into()),
        ..Event::default()
    }
}

/// The last [`REMEMBERED`] events, by key; the notes seen lately per CR, type and reason;
/// what each CR may still publish.
struct Recent {
    seen: HashMap<u64, Seen>,
    similar: HashMap<u64, (Vec<u64>, Timestamp)>,
    spam: crate::outcome::budget::WriteBudget,
}

impl Default for Recent {
    fn default() -> Self {
        Self {
            seen: HashMap::new(),
            similar: HashMap::new(),
            spam: crate::outcome::budget::WriteBudget::new(SPAM, SPAM),
        }
    }
}

/// What is known of a recent event.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    /// Its Event is being created; this many occurrences so far.
    Creating(i32),
    /// Its Event, the count so far, and when it was last seen.
    Written(String, i32, Timestamp),
}

/// What to do with an occurrence.
#[derive(Debug, PartialEq)]
enum Next {
    /// Create an Event.
    Create,
    /// Set the series of this Event to this count.
    Series(String, i32),
    /// Nothing: its Event is being created and will carry the count.
    Counted,
}

impl Recent {
    /// Records an occurrence of `key` at `now` and says what to write.
    fn next(&mut self, key: u64, now: Timestamp) -> Next {
        match self.seen.get_mut(&key) {
            Some(Seen::Creating(count)) => {
                *count = count.saturating_add(1);
                Next::Counted
            }
            Some(Seen::Written(name, count, last)) if now.duration_since(*last).unsigned_abs() < SERIES_WINDOW => {
                *count = count.saturating_add(1);
                *last = now;
                Next::Series(name.clone(), *count)
            }
            _ => {
                self.remember(key, Seen::Creating(1));
                Next::Create
            }
        }
    }

    /// Its Event exists now; returns the occurrences it stands for.
    fn created(&mut self, key: u64, name: String, now: Timestamp) -> i32 {
        let count = match self.seen.get(&key) {
            Some(Seen::Creating(count)) => *count,
            _ => 1,
        };
        self.remember(key, Seen::Written(name, count, now));
        count
    }

    /// Whether the event `key` is one note too many among the similar ones `similar`
    /// (same CR, type and reason) seen within the window.
    fn too_similar(&mut self, similar: u64, key: u64, now: Timestamp) -> bool {
        let (notes, since) = self.similar.entry(similar).or_insert_with(|| (Vec::new(), now));
        if now.duration_since(*since).unsigned_abs() >= SERIES_WINDOW {
            *notes = Vec::new();
            *since = now;
        }
        if notes.contains(&key) {
            return false;
        }
        if notes.len() >= SIMILAR {
            return true;
        }
        notes.push(key);
        if self.similar.len() > REMEMBERED {
            // The group seen first is the one dropped: its notes count from zero again.
            let oldest = self
                .similar
                .iter()
                .min_by_key(|(_, (_, since))| *since)
                .map(|(k, _)| *k);
            if let Some(oldest) = oldest {
                self.similar.remove(&oldest);
            }
        }
        false
    }

    /// Its Event is gone (expired): this occurrence creates a new one.
    fn restart(&mut self, key: u64) {
        self.remember(key, Seen::Creating(1));
    }

    /// The Event could not be written: the next occurrence tries anew.
    fn forget(&mut self, key: u64) {
        self.seen.remove(&key);
    }

    fn remember(&mut self, key: u64, seen: Seen) {
        if self.seen.len() >= REMEMBERED && !self.seen.contains_key(&key) {
            // Forget the written one seen longest ago (one being created is kept).
            let oldest = self
                .seen
                .iter()
                .filter_map(|(k, seen)| match seen {
                    Seen::Written(_, _, last) => Some((*last, *k)),
                    Seen::Creating(_) => None,
                })
                .min()
                .map(|(_, k)| k);
            if let Some(oldest) = oldest {
                self.seen.remove(&oldest);
            }
        }
        self.seen.insert(key, seen);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_join_the_series_within_the_window_only() {
        let mut recent = Recent::default();
        let start = Timestamp::now();
        assert_eq!(recent.next(7, start), Next::Create);
        assert_eq!(recent.next(7, start), Next::Counted, "its Event is still being created");
        assert_eq!(recent.created(7, "web.1".into(), start), 2, "the creator writes both");
        assert_eq!(recent.next(7, start), Next::Series("web.1".into(), 3));
        assert_eq!(recent.next(8, start), Next::Create, "another event");
        let later = start + SERIES_WINDOW + Duration::from_secs(1);
        assert_eq!(recent.next(7, later), Next::Create, "too long ago: a new Event");
    }

    #[test]
    fn past_ten_notes_of_one_reason_they_are_combined() {
        let mut recent = Recent::default();
        let start = Timestamp::now();
        for note in 0..SIMILAR as u64 {
            assert!(!recent.too_similar(1, note, start), "note {note}");
        }
        assert!(!recent.too_similar(1, 3, start), "a repeat is not a new note");
        assert!(recent.too_similar(1, 99, start), "the eleventh note");
        assert!(!recent.too_similar(2, 99, start), "another reason");
        let later = start + SERIES_WINDOW;
        assert!(!recent.too_similar(1, 99, later), "a new window");
    }

    #[test]
    fn a_cr_publishes_a_burst_then_one_event_in_ten_seconds() {
        let recent = Recent::default();
        for _ in 0..SPAM.burst as usize {
            assert!(recent.spam.admit("ns/web/uid").is_ok());
            recent.spam.charge("ns/web/uid", 1);
        }
        let wait = recent.spam.admit("ns/web/uid").unwrap_err();
        assert!(wait > Duration::from_secs(9), "{wait:?}");
        assert!(recent.spam.admit("ns/other/uid").is_ok());
    }

    #[test]
    fn only_the_most_recent_are_remembered() {
        let mut recent = Recent::default();
        let start = Timestamp::now();
        for key in 0..(REMEMBERED as u64 + 50) {
            let at = start + Duration::from_secs(key);
            recent.next(key, at);
            recent.created(key, format!("e{key}"), at);
        }
        assert_eq!(recent.seen.len(), REMEMBERED);
        assert_eq!(recent.next(0, start), Next::Create, "the oldest is forgotten");
        let last = REMEMBERED as u64 + 49;
        assert!(matches!(
            recent.next(last, start + Duration::from_secs(last)),
            Next::Series(..)
        ));
    }
}
