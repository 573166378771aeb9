//! The events of each CR, for the Live API (`/katalog/{crd}/cr/{ns}/{name}/events`) and the
//! `events` cross protocol: one watch of core Events whose `involvedObject` is of the CRD's
//! kind, kept per CR, newest last, at most [`PER_CR`] each (Kubernetes expires Events after
//! an hour; a CR's log forgets them as the API server does). The watch only observes: it
//! never enqueues.

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use parking_lot::RwLock;
use serde_json::{Value, json};

/// Events kept per CR.
pub const PER_CR: usize = 100;

/// Distinct reasons and sources shared between events; past this many a new one is kept on
/// its own (a flood of odd reasons costs its own memory, not a growing table).
const SHARED_TEXTS: usize = 1024;

/// Events listed per page when the watch starts: a smaller page keeps the start-up's
/// transient memory (and what the allocator keeps of it) small.
const PAGE: u32 = 100;

/// One Event as the log keeps it. A runtime with every CR of every tenant keeps tens of
/// thousands of these, so it is held compact (about 70 bytes and its message; a JSON object
/// per event cost about 1 KB).
#[derive(Debug, Clone)]
struct Kept {
    /// A hash of the Event's uid: what tells a repeat (the same Event, counted on) from a
    /// new one.
    uid: u64,
    /// Seconds since the epoch of its last occurrence (`i64::MIN`: none given).
    last: i64,
    count: u32,
    /// Core Events are Normal or Warning (the API server refuses other types).
    warning: bool,
    reason: Arc<str>,
    source: Arc<str>,
    message: Box<str>,
}

impl Kept {
    fn to_json(&self) -> Value {
        let last = jiff::Timestamp::from_second(self.last).ok().map(|t| t.to_string());
        json!({
            "type": if self.warning { "Warning" } else { "Normal" },
            "reason": &*self.reason,
            "message": &*self.message,
            "count": self.count,
            "lastTimestamp": last,
            "source": &*self.source,
        })
    }
}

#[derive(Debug, Default)]
struct Log {
    by_cr: HashMap<Box<str>, Box<[Kept]>>,
    texts: HashSet<Arc<str>>,
}

impl Log {
    fn shared(&mut self, text: &str) -> Arc<str> {
        if let Some(known) = self.texts.get(text) {
            return known.clone();
        }
        let text: Arc<str> = Arc::from(text);
        if self.texts.len() < SHARED_TEXTS {
            self.texts.insert(text.clone());
        }
        text
    }
}

/// The events of one CRD's CRs, by CR key.
#[derive(Debug, Clone, Default)]
pub struct EventLog {
    log: Arc<RwLock<Log>>,
}

fn uid_of(event: &DynamicObject) -> u64 {
    let mut hasher = DefaultHasher::new();
    event.metadata.uid.as_deref().unwrap_or_default().hash(&mut hasher);
    hasher.finish()
}

impl EventLog {
    /// The events of `key`, newest first: `{type, reason, message, count, lastTimestamp,
    /// source}` each.
    pub fn of(&self, key: &str) -> Vec<Value> {
        let log = self.log.read();
        log.by_cr
            .get(key)
            .map(|events| events.iter().rev().map(Kept::to_json).collect())
            .unwrap_or_default()
    }

    /// Takes in one Event as the API server has it now.
    fn record(&self, event: &DynamicObject) {
        let data = &event.data;
        let Some(key) = involved_key(data) else { return };
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        // Events written through events.k8s.io count in their series and name their reporter.
        let or = |a: &'_ Value, b: &'_ Value| if a.is_null() { b.clone() } else { a.clone() };
        let last = [
            &data["lastTimestamp"],
            &data["series"]["lastObservedTime"],
            &data["eventTime"],
        ]
        .into_iter()
        .find_map(|t| t.as_str().and_then(|t| t.parse::<jiff::Timestamp>().ok()))
        .map_or(i64::MIN, |t| t.as_second());
        let count = or(&data["count"], &data["series"]["count"]).as_u64().unwrap_or(1);
        let mut log = self.log.write();
        let kept = Kept {
            uid: uid_of(event),
            last,
            count: u32::try_from(count).unwrap_or(u32::MAX),
            warning: data["type"] == "Warning",
            reason: log.shared(&text(&data["reason"])),
            source: log.shared(&text(&or(&data["source"]["component"], &data["reportingComponent"]))),
            message: text(&data["message"]).into_boxed_str(),
        };
        let events = log.by_cr.entry(key.into_boxed_str()).or_default();
        // A repeat of an Event is the same object with its count moved on. Most CRs have an
        // event or two: the list is rebuilt to its exact length rather than grown by doubling.
        let mut list: Vec<Kept> = std::mem::take(events).into_vec();
        list.retain(|e| e.uid != kept.uid);
        if list.len() >= PER_CR {
            list.remove(0);
        }
        list.push(kept);
        *events = list.into_boxed_slice();
    }

    fn forget(&self, event: &DynamicObject) {
        let Some(key) = involved_key(&event.data) else { return };
        let uid = uid_of(event);
        let mut log = self.log.write();
        if let Some(events) = log.by_cr.get_mut(key.as_str()) {
            let kept: Box<[Kept]> = events.iter().filter(|e| e.uid != uid).cloned().collect();
            match kept.is_empty() {
                true => drop(log.by_cr.remove(key.as_str())),
                false => *events = kept,
            }
        }
    }

    /// Forgets everything (before a relist).
    fn clear(&self) {
        let mut log = self.log.write();
        log.by_cr = HashMap::new();
    }

    /// How many events are kept in all.
    pub fn len(&self) -> usize {
        let log = self.log.read();
        log.by_cr.values().map(|events| events.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many CRs have events kept.
    pub fn crs(&self) -> usize {
        self.log.read().by_cr.len()
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

/// Keeps `log` in step with the Events `api` lists (already narrowed to the CRD's kind).
pub async fn watch(api: Api<DynamicObject>, config: watcher::Config, log: EventLog) {
    let config = config.page_size(PAGE);
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => log.clear(),
            Ok(Event::Apply(object) | Event::InitApply(object)) => log.record(&object),
            Ok(Event::Delete(object)) => log.forget(&object),
            Ok(Event::InitDone) => {}
            Err(error) => tracing::warn!(%error, "watch of the custom resources' events failed; retrying with backoff"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(event: Value) -> DynamicObject {
        serde_json::from_value(event).unwrap()
    }

    fn event(uid: &str, name: &str, reason: &str, at: &str) -> DynamicObject {
        object(json!({"apiVersion": "v1", "kind": "Event", "metadata": {"uid": uid},
               "involvedObject": {"namespace": "ns", "name": name},
               "type": "Normal", "reason": reason, "message": "m", "count": 1, "lastTimestamp": at}))
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
        assert_eq!(log.of("ns/c")[0]["reason"], "Tick");
    }

    #[test]
    fn an_event_reads_back_as_the_api_server_wrote_it() {
        let log = EventLog::default();
        log.record(&object(json!({
            "apiVersion": "v1", "kind": "Event", "metadata": {"uid": "u"},
            "involvedObject": {"name": "cluster-wide"},
            "type": "Warning", "reason": "Failed", "message": "no quota",
            "series": {"count": 7, "lastObservedTime": "2026-02-03T04:05:06.123456Z"},
            "reportingComponent": "orkestra",
        })));
        // Seconds are what an Event's lastTimestamp carries; a series' microseconds go.
        assert_eq!(
            log.of("cluster-wide"),
            [
                json!({"type": "Warning", "reason": "Failed", "message": "no quota", "count": 7,
                    "lastTimestamp": "2026-02-03T04:05:06Z", "source": "orkestra"})
            ]
        );
    }
}
