//! The primary informer: a watch (list, then watch, relisting on expiry) of the CRD's own
//! objects into the [`Cache`], with sentinels computed from the old and new version of
//! each update, and a trigger for every change.

use std::collections::HashSet;
use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::Value;
use tokio::sync::oneshot;

use super::own_writes::OwnWrites;
use super::{Cache, Enqueue, Source, Trigger, object_key};
use crate::pipeline::flows::Class;
use orkestra_expr::sentinel;
use orkestra_katalog::ownership;

/// Watches `api` until the stream ends (it does not: the watcher relists and backs off on
/// errors), feeding every event to the observer.
pub async fn watch_primary(api: Api<DynamicObject>, config: watcher::Config, mut observer: PrimaryObserver) {
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) => observer.handle(event),
            Err(error) => tracing::warn!(%error, "primary watch failed; retrying with backoff"),
        }
    }
}

/// What the primary informer does with each watch event: update the cache, compute the
/// declared sentinels from the old and new version, and offer a trigger.
pub struct PrimaryObserver {
    cache: Cache,
    declared_sentinels: u16,
    enqueue: Arc<dyn Enqueue>,
    /// The runtime's writes to the CRs, whose echoes are no trigger.
    own: Arc<OwnWrites>,
    relisting: Option<HashSet<String>>,
    ready: Option<oneshot::Sender<Vec<Trigger>>>,
    /// The first list's settled CRs, handed over with `ready` rather than queued.
    settled: Vec<Trigger>,
}

impl PrimaryObserver {
    /// `ready`, if any, fires after the first complete list, with that list's settled CRs
    /// (background work) instead of offering them: the caller offers them when the caches
    /// their reconciles read have listed too, while new and changed CRs run at once.
    pub fn new(
        cache: Cache,
        declared_sentinels: u16,
        enqueue: Arc<dyn Enqueue>,
        own: Arc<OwnWrites>,
        ready: Option<oneshot::Sender<Vec<Trigger>>>,
    ) -> Self {
        Self {
            cache,
            declared_sentinels,
            enqueue,
            own,
            relisting: None,
            ready,
            settled: Vec::new(),
        }
    }

    pub fn handle(&mut self, event: Event<DynamicObject>) {
        match event {
            Event::Init => {
                self.cache.listing();
                self.relisting = Some(HashSet::new());
            }
            Event::InitApply(object) | Event::Apply(object) => {
                let Some((key, value)) = to_cached_json(object, self.declared_sentinels) else {
                    return;
                };
                if let Some(seen) = self.relisting.as_mut() {
                    seen.insert(key.clone());
                }
                let old = self.cache.replace(key.clone(), &value);
                // The runtime's own health/metrics stamp is news to no one.
                if old
                    .as_deref()
                    .is_some_and(|old| crate::pipeline::feedback::only_stamps_changed(old, &value))
                {
                    return;
                }
                let sentinels = sentinel::compute(old.as_deref(), &value, self.declared_sentinels);
                let trigger = Trigger {
                    key: key.clone(),
                    source: Source::Primary,
                    sentinels,
                    events: None,
                    class: class_of(old.as_deref(), &value, self.relisting.is_some()),
                    seen: tokio::time::Instant::now(),
                };
                // A relist's change may hold others' writes: never screened.
                let version = super::own_writes::version_of(&value).filter(|_| self.relisting.is_none());
                let trigger = match version {
                    Some(version) => self.own.screen(&key, &version, trigger),
                    None => Some(trigger),
                };
                match trigger {
                    Some(trigger) if self.ready.is_some() && trigger.class == Class::Background => {
                        self.settled.push(trigger);
                    }
                    Some(trigger) => self.enqueue.offer(trigger),
                    None => {}
                }
            }
            Event::InitDone => {
                // Objects deleted while the watch was down are gone from the new list.
                if let Some(seen) = self.relisting.take() {
                    for key in self.cache.keys().into_iter().filter(|k| !seen.contains(k)) {
                        self.cache.remove(&key);
                        self.enqueue.offer(Trigger::new(key, Source::Primary));
                    }
                }
                if let Some(ready) = self.ready.take() {
                    let _ = ready.send(std::mem::take(&mut self.settled));
                }
            }
            Event::Delete(object) => {
                let Some((key, _)) = to_json(&object) else { return };
                self.cache.remove(&key);
                self.own.forget(&key);
                self.enqueue.offer(Trigger::new(key, Source::Primary));
            }
        }
    }
}

/// Whether a change of a CR is a user's (a new CR, a new generation, a deletion begun, new
/// labels or annotations) or background work: the initial list (a CR seen for the first
/// time while listing), a relist that found nothing new, a change of its status alone. A
/// listed CR that waits for a reconcile (no status for its generation yet: new, or changed
/// while no runtime ran; its deletion begun) is a user's change all the same: after a
/// restart it goes before the settled CRs the initial list brings back.
fn class_of(old: Option<&Value>, new: &Value, listing: bool) -> Class {
    let Some(old) = old else {
        let waits = new["status"]["observedGeneration"] != new["metadata"]["generation"]
            || !new["metadata"]["deletionTimestamp"].is_null();
        return if listing && !waits {
            Class::Background
        } else {
            Class::User
        };
    };
    let user = [
        "/metadata/generation",
        "/metadata/deletionTimestamp",
        "/metadata/labels",
        "/metadata/annotations",
    ]
    .iter()
    .any(|at| old.pointer(at) != new.pointer(at));
    if user { Class::User } else { Class::Background }
}

/// The object as JSON and its key; an object that does not convert is logged and skipped.
pub(super) fn to_json(object: &DynamicObject) -> Option<(String, Value)> {
    let value = match serde_json::to_value(object) {
        Ok(value) => value,
        Err(error) => {
            tracing::warn!(name = ?object.metadata.name, %error, "a watched object does not convert to JSON; skipped");
            return None;
        }
    };
    let Some(key) = object_key(&value) else {
        tracing::warn!(name = ?object.metadata.name, "a watched object has no name; skipped");
        return None;
    };
    Some((key, value))
}

/// As [`to_json`], for a cache: without `managedFields` (most of a small object's metadata)
/// unless `declared` asks for them (the `managedFieldsChanged` sentinel) or an entry is
/// the shared field manager of older releases, which the applier hands over to the
/// tenant's own (see [`ownership::migrated_managers`]). They are dropped before the
/// conversion, so they are never copied.
pub(crate) fn to_cached_json(mut object: DynamicObject, declared: u16) -> Option<(String, Value)> {
    let legacy = object
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .any(|entry| entry.manager.as_deref() == Some(ownership::LEGACY_FIELD_MANAGER));
    if declared & (1 << sentinel::MANAGED_FIELDS_CHANGED) == 0 && !legacy {
        object.metadata.managed_fields = None;
    }
    to_json(&object)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::pipeline::observe::Offered;

    fn cr(name: &str, generation: i64, observed: Option<i64>) -> DynamicObject {
        let mut cr = json!({"apiVersion": "x.io/v1", "kind": "App",
                            "metadata": {"name": name, "namespace": "ns", "generation": generation}});
        if let Some(observed) = observed {
            cr["status"] = json!({"observedGeneration": observed});
        }
        serde_json::from_value(cr).unwrap()
    }

    #[test]
    fn the_first_list_hands_its_settled_crs_over_with_ready_and_offers_the_waiting_ones_at_once() {
        let offered = Arc::new(Offered::default());
        let (ready, mut listed) = oneshot::channel();
        let mut observer = PrimaryObserver::new(Cache::default(), 0, offered.clone(), Arc::default(), Some(ready));
        observer.handle(Event::Init);
        observer.handle(Event::InitApply(cr("settled", 2, Some(2))));
        observer.handle(Event::InitApply(cr("changed", 3, Some(2))));
        observer.handle(Event::InitApply(cr("new", 1, None)));
        assert_eq!(*offered.0.lock(), ["ns/changed", "ns/new"]);
        assert!(listed.try_recv().is_err(), "not ready before the list ends");
        observer.handle(Event::InitDone);
        let settled: Vec<String> = listed.try_recv().unwrap().into_iter().map(|t| t.key).collect();
        assert_eq!(settled, ["ns/settled"]);
        // A relist later offers all it lists as it comes: the children have listed by then.
        observer.handle(Event::Init);
        observer.handle(Event::InitApply(cr("settled", 2, Some(2))));
        observer.handle(Event::InitApply(cr("changed", 3, Some(2))));
        observer.handle(Event::InitApply(cr("new", 1, None)));
        observer.handle(Event::InitApply(cr("other", 1, Some(1))));
        observer.handle(Event::InitDone);
        assert_eq!(
            offered.0.lock()[2..],
            ["ns/settled", "ns/changed", "ns/new", "ns/other"]
        );
    }

    #[test]
    fn a_listed_cr_that_waits_for_a_reconcile_goes_before_the_settled_ones() {
        let settled = json!({"metadata": {"generation": 3}, "status": {"observedGeneration": 3}});
        let changed = json!({"metadata": {"generation": 4}, "status": {"observedGeneration": 3}});
        let new = json!({"metadata": {"generation": 1}});
        let deleting = json!({"metadata": {"generation": 3, "deletionTimestamp": "2026-12-06T10:00:00Z"},
                              "status": {"observedGeneration": 3}});
        assert_eq!(class_of(None, &settled, true), Class::Background);
        for waiting in [&changed, &new, &deleting] {
            assert_eq!(class_of(None, waiting, true), Class::User, "{waiting}");
        }
        // Seen by the watch after the list, anything new is a user's.
        assert_eq!(class_of(None, &settled, false), Class::User);
        // A status written, nothing else: background.
        assert_eq!(
            class_of(
                Some(&changed),
                &json!({"metadata": {"generation": 4}, "status": {"observedGeneration": 4}}),
                false
            ),
            Class::Background
        );
    }
}
