//! The events of each CR, for the Live API (`/katalog/{crd}/cr/{ns}/{name}/events`) and the
//! `events` cross protocol: one watch of core Events whose `involvedObject` is of the CRD's
//! kind, kept per CR, newest last, at most [`PER_CR`] each (Kubernetes expires Events after
//! an hour; a CR's log forgets them as the API server does). The watch only observes: it
//! never enqueues.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::{Value, json};

use super::primary::to_json;

/// Events kept per CR.
pub const PER_CR: usize = 100;

/// The events of one CRD's CRs, by CR key.
#[derive(Debug, Clone, Default)]
pub struct EventLog {
    by_cr: Arc<RwLock<HashMap<String, VecDeque<Value>>>>,
}

impl EventLog {
    /// The events of `key`, newest first.
    pub fn of(&self, key: &str) -> Vec<Value> {
        let by_cr = self.by_cr.read().unwrap_or_else(|e| e.into_inner());
        by_cr
            .get(key)
            .map(|events| events.iter().rev().cloned().collect())
            .unwrap_or_default()
    }

    /// Takes in one Event as the API server has it now.
    fn record(&self, event: &Value) {
        let Some(key) = involved_key(event) else { return };
        let uid = event["metadata"]["uid"].clone();
        let mut by_cr = self.by_cr.write().unwrap_or_else(|e| e.into_inner());
        let events = by_cr.entry(key).or_default();
        // A repeat of an Event is the same object with its count moved on.
        events.retain(|e| e["uid"] != uid);
        if events.len() == PER_CR {
            events.pop_front();
        }
        events.push_back(summary(event));
    }

    fn forget(&self, event: &Value) {
        let Some(key) = involved_key(event) else { return };
        let uid = &event["metadata"]["uid"];
        let mut by_cr = self.by_cr.write().unwrap_or_else(|e| e.into_inner());
        if let Some(events) = by_cr.get_mut(&key) {
            events.retain(|e| e["uid"] != *uid);
            if events.is_empty() {
                by_cr.remove(&key);
            }
        }
    }

    /// Forgets everything (before a relist).
    fn clear(&self) {
        self.by_cr.write().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// How many events are kept in all.
    pub fn len(&self) -> usize {
        self.by_cr
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(VecDeque::len)
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `namespace/name` (or `name`) of the object an Event is about.
fn involved_key(event: &Value) -> Option<String> {
    let involved = &event["involvedObject"];
    let name = involved["name"].as_str()?;
    Some(match involved["namespace"].as_str().filter(|ns| !ns.is_empty()) {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_string(),
    })
}

/// What the Live API shows of an Event.
fn summary(event: &Value) -> Value {
    let last = match &event["lastTimestamp"] {
        Value::Null => event["eventTime"].clone(),
        last => last.clone(),
    };
    // Events written through events.k8s.io count in their series and name their reporter.
    let or = |a: &Value, b: &Value| if a.is_null() { b.clone() } else { a.clone() };
    json!({
        "uid": event["metadata"]["uid"],
        "type": event["type"],
        "reason": event["reason"],
        "message": event["message"],
        "count": or(&event["count"], &event["series"]["count"]),
        "lastTimestamp": or(&last, &event["series"]["lastObservedTime"]),
        "source": or(&event["source"]["component"], &event["reportingComponent"]),
    })
}

/// Keeps `log` in step with the Events `api` lists (already narrowed to the CRD's kind).
pub async fn watch(api: Api<DynamicObject>, config: watcher::Config, log: EventLog) {
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => log.clear(),
            Ok(Event::Apply(object) | Event::InitApply(object)) => {
                if let Some((_, event)) = to_json(&object) {
                    log.record(&event);
                }
            }
            Ok(Event::Delete(object)) => {
                if let Some((_, event)) = to_json(&object) {
                    log.forget(&event);
                }
            }
            Ok(Event::InitDone) => {}
            Err(error) => tracing::warn!(%error, "watch of the custom resources' events failed; retrying with backoff"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(uid: &str, name: &str, reason: &str, at: &str) -> Value {
        json!({"metadata": {"uid": uid}, "involvedObject": {"namespace": "ns", "name": name},
               "type": "Normal", "reason": reason, "message": "m", "count": 1, "lastTimestamp": at})
    }

    #[test]
    fn events_are_kept_per_custom_resource_newest_first_and_bounded() {
        let log = EventLog::default();
        log.record(&event("1", "a", "Created", "2026-01-01T00:00:00Z"));
        log.record(&event("2", "a", "Reconciled", "2026-01-01T00:00:01Z"));
        log.record(&event("3", "b", "Created", "2026-01-01T00:00:02Z"));
        let reasons: Vec<Value> = log.of("ns/a").iter().map(|e| e["reason"].clone()).collect();
        assert_eq!(reasons, [json!("Reconciled"), json!("Created")]);
        // A repeat replaces the Event it counts.
        log.record(&event("2", "a", "Reconciled", "2026-01-01T00:00:05Z"));
        assert_eq!(log.of("ns/a").len(), 2);
        assert_eq!(log.of("ns/a")[0]["lastTimestamp"], "2026-01-01T00:00:05Z");
        log.forget(&event("3", "b", "Created", ""));
        assert!(log.of("ns/b").is_empty());
        for i in 0..PER_CR + 10 {
            log.record(&event(&format!("x{i}"), "c", "Tick", "2026-01-01T00:00:00Z"));
        }
        assert_eq!(log.of("ns/c").len(), PER_CR);
    }
}
