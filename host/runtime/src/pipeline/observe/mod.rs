//! Observation: the primary informer, `observe.watch`, `observe.events` and the implicit
//! watches on owned children. Each source turns what it sees into [`Trigger`]s (a primary
//! key plus the facts of the event) and hands them to the one enqueue path; none knows
//! anything about queues or reconcilers.

mod cache;
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

pub use cache::Cache;
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

    /// Lets the applier's writes be read back at once, each into the cache of its kind (see
    /// [`Cache::advance`]).
    pub fn read_back(&self) {
        let kinds = self.kinds.clone();
        self.own.read_back_into(move |own_key, answer| {
            // As `own_key` wrote it: neither an apiVersion nor a kind holds a space.
            let mut parts = own_key.splitn(3, ' ');
            let (Some(api_version), Some(kind), Some(_)) = (parts.next(), parts.next(), parts.next()) else {
                return;
            };
            let cache = kinds.read().get(&(api_version.to_string(), kind.to_string())).cloned();
            // The owned-kind watches declare no sentinels.
            if let Some(cache) = cache {
                cache.advance_to_answer(answer, 0);
            }
        });
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
    use cache::tests::child;

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

    #[tokio::test]
    async fn the_applier_s_write_of_a_child_is_read_back_in_its_kind_s_cache() {
        let children = Children::default();
        let configmaps = children.register("v1", "ConfigMap");
        children.read_back();
        let at = |version: &str, k: &str| {
            let mut child = child("a", Some("u1"));
            child["metadata"]["resourceVersion"] = version.into();
            child["data"]["k"] = k.into();
            child
        };
        configmaps.insert("ns/a".into(), &at("5", "old"));
        let own_key = Children::own_key("v1", "ConfigMap", "ns/a");
        let answer: kube::api::DynamicObject = serde_json::from_value(at("6", "applied")).unwrap();
        let written = children.own_writes().write(&own_key, async { Ok::<_, ()>(answer) });
        written.await.unwrap();
        let read = children.get("v1", "ConfigMap", "ns/a").unwrap();
        assert_eq!(read["data"]["k"], "applied");
        assert_eq!(children.owned_by("u1").len(), 1);
        // A kind not watched has no cache to keep it in.
        let unwatched = Children::own_key("v1", "Secret", "ns/a");
        let answer: kube::api::DynamicObject = serde_json::from_value(at("7", "secret")).unwrap();
        children
            .own_writes()
            .write(&unwatched, async { Ok::<_, ()>(answer) })
            .await
            .unwrap();
        assert_eq!(children.get("v1", "ConfigMap", "ns/a").unwrap()["data"]["k"], "applied");
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
