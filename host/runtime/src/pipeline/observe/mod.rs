//! Observation: the primary informer, `observe.watch`, `observe.events` and the implicit
//! watches on owned children. Each source turns what it sees into [`Trigger`]s (a primary
//! key plus the facts of the event) and hands them to the one enqueue path; none knows
//! anything about queues or reconcilers.

pub mod cr_events;
mod events;
pub mod own_writes;
mod primary;
pub mod secondary;

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use tokio::time::Instant;

use orkestra_kube::objects::Objects;
use serde_json::Value;
use tracing::Instrument;

use crate::pipeline::flows::Class;

pub use events::watch_events;
pub(crate) use primary::to_cached_json;
pub use primary::{PrimaryObserver, watch_primary};
pub use secondary::{watch_owned, watch_secondary};

use orkestra_expr::sentinel::SentinelBits;

/// Where a trigger came from (for logs and counters; admission treats all alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Primary,
    Watch,
    Events,
    Owned,
    Resync,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Primary => "primary",
            Source::Watch => "watch",
            Source::Events => "events",
            Source::Owned => "owned",
            Source::Resync => "resync",
        }
    }
}

/// An observed occurrence that may become work for one primary CR.
#[derive(Debug, Clone)]
pub struct Trigger {
    /// The primary CR's key (`namespace/name` or `name`).
    pub key: String,
    pub source: Source,
    /// Sentinels of the observed object's update (none for creates, deletes, resyncs).
    pub sentinels: SentinelBits,
    /// `{<name>: {reason, type, ...}}` for an `observe.events` trigger.
    pub events: Option<Value>,
    /// A user's change, or background work (a resync, the initial list): its place in the
    /// queue.
    pub class: Class,
    /// When the runtime saw it: the start of the change's queue and reconcile latencies.
    pub seen: Instant,
}

impl Trigger {
    /// A trigger without sentinels or event context (creates, deletes, resyncs, children);
    /// a resync is background work.
    pub fn new(key: String, source: Source) -> Self {
        Self {
            key,
            source,
            sentinels: SentinelBits::default(),
            events: None,
            class: match source {
                Source::Resync => Class::Background,
                _ => Class::User,
            },
            seen: Instant::now(),
        }
    }
}

/// The hand-off every source calls: the one enqueue path.
pub trait Enqueue: Send + Sync {
    fn offer(&self, trigger: Trigger);

    /// Offers every cached CR again, as background work: something that changes how each
    /// one comes out happened (a component swapped, ownership gained, a permission granted).
    fn offer_all(&self, cache: &Cache) {
        for key in cache.keys() {
            self.offer(Trigger::new(key, Source::Resync));
        }
    }
}

/// For tests: the keys of the triggers offered, in order.
#[cfg(test)]
#[derive(Default)]
pub(crate) struct Offered(pub(crate) parking_lot::Mutex<Vec<String>>);

#[cfg(test)]
impl Enqueue for Offered {
    fn offer(&self, trigger: Trigger) {
        self.0.lock().push(trigger.key);
    }
}

/// The objects a watch has seen (the primary CRs, or one owned kind's children), by key.
///
/// Each is kept as its JSON text and parsed again on each read: a parsed tree of a small
/// object takes about eight times its text (a 635-byte CR is 5 KB as a `serde_json::Value`,
/// a 474-byte ConfigMap 3.7 KB), and most cached objects sit unread between their changes.
/// Reading one costs a parse of a few microseconds per kilobyte, outside the lock: a watch's
/// writes never wait for a reader's parse.
#[derive(Debug, Clone, Default)]
pub struct Cache {
    objects: Arc<RwLock<HashMap<String, Entry>>>,
    /// Complete lists the watch made: the first, and one per relist (an expired
    /// resourceVersion, a restarted API server).
    lists: Arc<std::sync::atomic::AtomicU64>,
    /// The first list has been stored whole: from then on, what is not here was not there.
    /// A watch channel, so a start-up step can wait for it.
    listed: Arc<tokio::sync::watch::Sender<bool>>,
}

/// One cached object.
#[derive(Debug)]
struct Entry {
    /// Shared, so a reader takes it out of the lock and parses it there.
    text: Arc<str>,
    /// The value of its owner-UID label: what every scan for a CR's children asks, answered
    /// without a parse.
    owner: Option<Box<str>>,
}

impl Entry {
    fn new(object: &Value) -> Self {
        Self {
            text: orkestra_wasm::json_text(object).into(),
            owner: object["metadata"]["labels"][orkestra_expr::labels::OWNER_UID_LABEL]
                .as_str()
                .map(Into::into),
        }
    }

    fn value(&self) -> Option<Arc<Value>> {
        parsed(&self.text)
    }
}

/// A cached object's text parsed back: it is a serialized `Value`, so it parses (a failure
/// would be a bug, and reads as an object not seen).
fn parsed(text: &str) -> Option<Arc<Value>> {
    serde_json::from_str(text).ok().map(Arc::new)
}

impl Cache {
    /// The first complete list is stored.
    pub fn listed(&self) {
        self.listed.send_replace(true);
    }

    /// Whether it holds a complete list yet.
    pub fn is_listed(&self) -> bool {
        *self.listed.borrow()
    }

    /// Returns once it holds a complete list.
    pub async fn until_listed(&self) {
        // The sender lives as long as this cache: the wait ends only by the list.
        let _ = self.listed.subscribe().wait_for(|listed| *listed).await;
    }

    /// A complete list began.
    pub fn listing(&self) {
        self.lists.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Complete lists so far.
    pub fn lists(&self) -> u64 {
        self.lists.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn read(&self) -> parking_lot::RwLockReadGuard<'_, HashMap<String, Entry>> {
        self.objects.read()
    }

    fn write(&self) -> parking_lot::RwLockWriteGuard<'_, HashMap<String, Entry>> {
        self.objects.write()
    }

    pub fn get(&self, key: &str) -> Option<Arc<Value>> {
        self.get_with_text(key).map(|(object, _)| object)
    }

    /// The object and the text it was parsed from: what a component receives, serialized
    /// once per version (when the watch stored it), never per call.
    pub fn get_with_text(&self, key: &str) -> Option<(Arc<Value>, Arc<str>)> {
        let text = self.read().get(key)?.text.clone();
        Some((parsed(&text)?, text))
    }

    /// Stores the object; whether it replaced one (left unparsed).
    pub fn insert(&self, key: String, object: &Value) -> bool {
        let entry = Entry::new(object);
        self.write().insert(key, entry).is_some()
    }

    /// Stores the object, returning the previous version.
    pub fn replace(&self, key: String, object: &Value) -> Option<Arc<Value>> {
        let entry = Entry::new(object);
        let old = self.write().insert(key, entry);
        old?.value()
    }

    pub fn remove(&self, key: &str) -> Option<Arc<Value>> {
        let old = self.write().remove(key);
        old?.value()
    }

    /// The object at `key`, if its text holds each of `pairs` (from [`pair_text`]): a scan
    /// for labels parses only the objects that may match (one that passes may still not: the
    /// pair may stand elsewhere in the object).
    pub fn get_holding(&self, key: &str, pairs: &[String]) -> Option<Arc<Value>> {
        let text = self.read().get(key)?.text.clone();
        match pairs.iter().all(|pair| text.contains(pair.as_str())) {
            true => parsed(&text),
            false => None,
        }
    }

    /// The objects whose owner-UID label is `uid`.
    pub fn owned_by(&self, uid: &str) -> Vec<Arc<Value>> {
        let owned: Vec<Arc<str>> = self
            .read()
            .values()
            .filter(|entry| entry.owner.as_deref() == Some(uid))
            .map(|entry| entry.text.clone())
            .collect();
        owned.iter().filter_map(|text| parsed(text)).collect()
    }

    pub fn keys(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Runs the watch `start` makes, for as long as the caller keeps this future: a watch that
/// ends or panics (it should do neither; the watcher relists and backs off by itself) is
/// logged and started again after a pause that doubles up to 30 s. Dropping this future stops
/// the watch with it.
pub async fn supervise<F, Fut>(what: String, mut start: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    /// Aborts the running watch when the supervisor is dropped.
    struct Running(tokio::task::JoinHandle<()>);
    impl Drop for Running {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let mut pause = Duration::from_secs(1);
    loop {
        let mut running = Running(tokio::spawn(start().in_current_span()));
        match (&mut running.0).await {
            Ok(()) => tracing::error!(watch = %what, "the watch ended; starting it again"),
            Err(error) if error.is_panic() => tracing::error!(watch = %what, "the watch panicked; starting it again"),
            Err(_) => return,
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(30));
    }
}

/// The children of one CRD as its owned-kind watches see them, by (apiVersion, kind): what
/// the applier compares against instead of asking the API server. A hit is trusted; an object
/// not here may still exist (someone else's, or not seen yet), so a miss is never taken as
/// proof of absence.
#[derive(Clone, Default)]
pub struct Children {
    kinds: Arc<RwLock<HashMap<(String, String), Cache>>>,
    /// The applier's writes, whose echoes the owned-kind watches drop.
    own: Arc<own_writes::OwnWrites>,
}

impl Children {
    pub fn own_writes(&self) -> &Arc<own_writes::OwnWrites> {
        &self.own
    }

    /// A child's name among [`Children::own_writes`]: its kind as watched, and its key.
    pub fn own_key(api_version: &str, kind: &str, key: &str) -> String {
        format!("{api_version} {kind} {key}")
    }

    /// The store the watch of `api_version` `kind` fills.
    pub fn register(&self, api_version: &str, kind: &str) -> Cache {
        self.kinds
            .write()
            .entry((api_version.to_string(), kind.to_string()))
            .or_default()
            .clone()
    }

    /// The store of every kind registered so far, taken out of the lock.
    fn caches(&self) -> Vec<Cache> {
        self.kinds.read().values().cloned().collect()
    }

    /// Returns once the watch of every kind registered so far has listed what it watches.
    pub async fn until_listed(&self) {
        futures::future::join_all(self.caches().iter().map(Cache::until_listed)).await;
    }

    /// The child `key` (`namespace/name` or `name`) as last seen, if its kind is watched and
    /// it was seen.
    pub fn get(&self, api_version: &str, kind: &str, key: &str) -> Option<Arc<Value>> {
        let kinds = self.kinds.read();
        kinds.get(&(api_version.to_string(), kind.to_string()))?.get(key)
    }

    /// Whether the watch of `api_version` `kind` runs and has listed what it watches: a
    /// child of that kind that is provably ours is then here, or does not exist yet.
    pub fn holds_all(&self, api_version: &str, kind: &str) -> bool {
        let kinds = self.kinds.read();
        kinds
            .get(&(api_version.to_string(), kind.to_string()))
            .is_some_and(Cache::is_listed)
    }

    /// Every seen child of any kind whose owner UID label is `uid`.
    pub fn owned_by(&self, uid: &str) -> Vec<Arc<Value>> {
        self.caches().iter().flat_map(|cache| cache.owned_by(uid)).collect()
    }

    /// The seen children of `api_version` `kind` whose owner UID label is `uid` (none when
    /// the kind is not watched).
    pub fn owned_of_kind(&self, api_version: &str, kind: &str, uid: &str) -> Vec<Arc<Value>> {
        let cache = self
            .kinds
            .read()
            .get(&(api_version.to_string(), kind.to_string()))
            .cloned();
        cache.map_or_else(Vec::new, |cache| cache.owned_by(uid))
    }
}

/// `"name":"value"` as a cached object's text holds a field with that string value.
pub fn pair_text(name: &str, value: &str) -> String {
    format!("{}:{}", Value::from(name), Value::from(value))
}

/// The key of an object: `namespace/name`, or `name` when cluster-scoped.
pub fn object_key(object: &Value) -> Option<String> {
    let meta = object.get("metadata")?;
    let name = meta.get("name")?.as_str()?;
    Some(key_in(
        meta.get("namespace").and_then(Value::as_str).unwrap_or_default(),
        name,
    ))
}

/// The key of `name` in `namespace` (none: cluster-scoped).
fn key_in(namespace: &str, name: &str) -> String {
    match namespace.is_empty() {
        true => name.to_string(),
        false => format!("{namespace}/{name}"),
    }
}

/// The objects of the kind and namespace a key names, and its name (a key from a watched
/// object's fields, through `keyFrom`, is checked like any other name).
pub fn api_for_key<'k>(
    client: &kube::Client,
    resource: &kube::core::ApiResource,
    key: &'k str,
) -> Result<(Objects<kube::api::DynamicObject>, &'k str), kube::Error> {
    let (namespace, name) = split_key(key);
    Ok((Objects::within(client.clone(), namespace, resource)?, name))
}

/// Splits a key into namespace (if any) and name.
pub fn split_key(key: &str) -> (Option<&str>, &str) {
    match key.split_once('/') {
        Some((ns, name)) => (Some(ns), name),
        None => (None, key),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn child(name: &str, owner: Option<&str>) -> Value {
        let mut child = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "labels": {"app": "x"}}, "data": {"k": "v"}});
        if let Some(owner) = owner {
            child["metadata"]["labels"][orkestra_expr::labels::OWNER_UID_LABEL] = owner.into();
        }
        child
    }

    #[test]
    fn a_cached_object_reads_back_as_stored_and_a_replacement_returns_the_previous() {
        let cache = Cache::default();
        let first = child("a", Some("u1"));
        assert!(cache.replace("ns/a".into(), &first).is_none());
        assert_eq!(cache.get("ns/a").as_deref(), Some(&first));
        let mut second = first.clone();
        second["data"]["k"] = "w".into();
        assert_eq!(cache.replace("ns/a".into(), &second).as_deref(), Some(&first));
        assert_eq!(cache.get("ns/a").as_deref(), Some(&second));
        assert_eq!(cache.remove("ns/a").as_deref(), Some(&second));
        assert!(cache.get("ns/a").is_none() && cache.is_empty());
        assert!(!cache.insert("ns/b".into(), &first), "nothing was there");
        assert!(cache.insert("ns/b".into(), &second), "it replaced the first");
        assert_eq!(cache.get("ns/b").as_deref(), Some(&second));
        cache.remove("ns/b");
        // Numbers come back as they went in, floats to the last bit: a changed-spec sentinel
        // compares a parsed old version with a new one never serialized.
        let numbers =
            serde_json::json!({"spec": {"f": 0.1 + 0.2, "e": 2.225_073_858_507_201e-308, "i": u64::MAX, "n": -7}});
        cache.insert("ns/n".into(), &numbers);
        assert_eq!(cache.get("ns/n").as_deref(), Some(&numbers));
    }

    #[test]
    fn a_cr_s_children_are_found_by_their_owner_label_as_it_is_now() {
        let children = Children::default();
        let configmaps = children.register("v1", "ConfigMap");
        let secrets = children.register("v1", "Secret");
        configmaps.insert("ns/a".into(), &child("a", Some("u1")));
        configmaps.insert("ns/b".into(), &child("b", Some("u2")));
        configmaps.insert("ns/c".into(), &child("c", None));
        let mut secret = child("s", Some("u1"));
        secret["kind"] = "Secret".into();
        secrets.insert("ns/s".into(), &secret);
        let names = |found: Vec<Arc<Value>>| {
            let mut names: Vec<String> = found.iter().map(|c| c["metadata"]["name"].to_string()).collect();
            names.sort();
            names.join(",")
        };
        assert_eq!(names(children.owned_by("u1")), r#""a","s""#);
        assert_eq!(names(children.owned_of_kind("v1", "ConfigMap", "u1")), r#""a""#);
        assert_eq!(names(children.owned_of_kind("v1", "Pod", "u1")), "");
        // Relabelled to another owner, then gone: each scan sees the object as it is now.
        configmaps.insert("ns/a".into(), &child("a", Some("u2")));
        assert_eq!(names(children.owned_by("u1")), r#""s""#);
        assert_eq!(names(children.owned_by("u2")), r#""a","b""#);
        configmaps.remove("ns/b");
        assert_eq!(names(children.owned_by("u2")), r#""a""#);
    }

    #[test]
    fn a_label_scan_skips_only_objects_whose_text_cannot_hold_the_labels() {
        let cache = Cache::default();
        let mut quoted = child("q", None);
        quoted["metadata"]["labels"]["tier"] = r#"say "hi"\"#.into();
        cache.insert("ns/a".into(), &child("a", None));
        cache.insert("ns/q".into(), &quoted);
        let app = [pair_text("app", "x")];
        assert!(cache.get_holding("ns/a", &app).is_some() && cache.get_holding("ns/q", &app).is_some());
        assert!(cache.get_holding("ns/a", &[pair_text("app", "y")]).is_none());
        assert!(
            cache
                .get_holding("ns/q", &[pair_text("tier", r#"say "hi"\"#), pair_text("app", "x")])
                .is_some()
        );
        assert!(
            cache
                .get_holding("ns/a", &[pair_text("tier", r#"say "hi"\"#)])
                .is_none()
        );
        assert!(cache.get_holding("ns/gone", &app).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_that_panics_or_ends_is_started_again_and_stops_with_its_supervisor() {
        let starts = Arc::new(AtomicUsize::new(0));
        let running = Arc::new(AtomicUsize::new(0));
        let supervisor = {
            let (starts, running) = (starts.clone(), running.clone());
            tokio::spawn(supervise("test".into(), move || {
                let (starts, running) = (starts.clone(), running.clone());
                async move {
                    match starts.fetch_add(1, Ordering::SeqCst) {
                        0 => panic!("the first run of the watch panics"),
                        1 => {}
                        _ => {
                            running.fetch_add(1, Ordering::SeqCst);
                            std::future::pending::<()>().await;
                        }
                    }
                }
            }))
        };
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(
            starts.load(Ordering::SeqCst),
            3,
            "after a panic and an end, a third run"
        );
        supervisor.abort();
        let _ = supervisor.await;
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(starts.load(Ordering::SeqCst), 3, "no run after the supervisor stopped");
        assert_eq!(running.load(Ordering::SeqCst), 1);
    }
}
