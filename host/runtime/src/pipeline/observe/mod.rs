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
use std::sync::{Arc, RwLock};
use std::time::Duration;

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
}

/// The primary CRs as last observed, by key.
#[derive(Debug, Clone, Default)]
pub struct Cache {
    objects: Arc<RwLock<HashMap<String, Arc<Value>>>>,
    /// Complete lists the watch made: the first, and one per relist (an expired
    /// resourceVersion, a restarted API server).
    lists: Arc<std::sync::atomic::AtomicU64>,
    /// The first list has been stored whole: from then on, what is not here was not there.
    listed: Arc<std::sync::atomic::AtomicBool>,
}

impl Cache {
    /// The first complete list is stored.
    pub fn listed(&self) {
        self.listed.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether it holds a complete list yet.
    pub fn is_listed(&self) -> bool {
        self.listed.load(std::sync::atomic::Ordering::Acquire)
    }

    /// A complete list began.
    pub fn listing(&self) {
        self.lists.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Complete lists so far.
    pub fn lists(&self) -> u64 {
        self.lists.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn get(&self, key: &str) -> Option<Arc<Value>> {
        self.objects
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(key)
            .cloned()
    }

    /// Stores the object, returning the previous version.
    pub fn insert(&self, key: String, object: Arc<Value>) -> Option<Arc<Value>> {
        self.objects
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key, object)
    }

    pub fn remove(&self, key: &str) -> Option<Arc<Value>> {
        self.objects
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(key)
    }

    /// The objects `keep` says yes to.
    pub fn select(&self, keep: impl Fn(&Value) -> bool) -> Vec<Arc<Value>> {
        self.objects
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .filter(|object| keep(object))
            .cloned()
            .collect()
    }

    pub fn keys(&self) -> Vec<String> {
        self.objects
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }

    pub fn len(&self) -> usize {
        self.objects
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
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
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry((api_version.to_string(), kind.to_string()))
            .or_default()
            .clone()
    }

    /// The child `key` (`namespace/name` or `name`) as last seen, if its kind is watched and
    /// it was seen.
    pub fn get(&self, api_version: &str, kind: &str, key: &str) -> Option<Arc<Value>> {
        let kinds = self.kinds.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        kinds.get(&(api_version.to_string(), kind.to_string()))?.get(key)
    }

    /// Whether the watch of `api_version` `kind` runs and has listed what it watches: a
    /// child of that kind that is provably ours is then here, or does not exist yet.
    pub fn holds_all(&self, api_version: &str, kind: &str) -> bool {
        let kinds = self.kinds.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        kinds
            .get(&(api_version.to_string(), kind.to_string()))
            .is_some_and(Cache::is_listed)
    }

    /// Every seen child of any kind whose owner UID label is `uid`.
    pub fn owned_by(&self, uid: &str) -> Vec<Arc<Value>> {
        let kinds = self.kinds.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        kinds
            .values()
            .flat_map(|cache| {
                cache.select(|child| {
                    child["metadata"]["labels"][orkestra_expr::labels::OWNER_UID_LABEL].as_str() == Some(uid)
                })
            })
            .collect()
    }

    /// The seen children of `api_version` `kind` that `keep` says yes to (none when the kind
    /// is not watched).
    pub fn select(&self, api_version: &str, kind: &str, keep: impl Fn(&Value) -> bool) -> Vec<Arc<Value>> {
        let kinds = self.kinds.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        kinds
            .get(&(api_version.to_string(), kind.to_string()))
            .map_or_else(Vec::new, |cache| cache.select(keep))
    }
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
