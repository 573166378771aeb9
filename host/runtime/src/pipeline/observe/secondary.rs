//! Secondary watches: `observe.watch` entries and the implicit watches on owned children.
//! Each change of a watched object (after its initial list) is filtered by `on:`, gets its
//! sentinels, is routed to primary keys (owner reference, `keyFrom`, or every primary) and
//! handed to the enqueue path.

use std::collections::HashSet;
use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Api, DynamicObject, TypeMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::Value;

use super::own_writes::OwnWrites;
use super::primary::{to_cached_json, to_json};
use super::{Cache, Enqueue, Source, Trigger};
use crate::pipeline::flows::Class;
use orkestra_expr::resolver::Resolver;
use orkestra_expr::sentinel;
use orkestra_expr::sentinel::SentinelBits;
use orkestra_expr::template::Template;
use orkestra_katalog::compile::{CompiledCrd, CompiledWatch};
use orkestra_katalog::{EventType, KeyFrom};

/// The primary CRD: its kind, for owner-reference routing, and which of its CRs each
/// observation may trigger.
#[derive(Debug, Clone)]
pub struct PrimaryKind {
    pub crd: Arc<CompiledCrd>,
}

impl PrimaryKind {
    /// Of `keys`, the CRs an observation declared by `target` (`None`: the CRD's own)
    /// triggers (see [`CompiledCrd::observes`]).
    pub(super) fn observed(&self, target: Option<&str>, mut keys: Vec<String>, cache: &Cache) -> Vec<String> {
        if !self.crd.observing_targets.is_empty() {
            keys.retain(|key| match cache.get(key) {
                Some(cr) => self.crd.observes(target, &cr),
                None => target.is_none(),
            });
        }
        keys
    }

    /// The keys of primaries that own `object` (same namespace).
    fn owners(&self, object: &Value) -> Vec<String> {
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
        object["metadata"]["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|owner| {
                let api_version = owner["apiVersion"].as_str().unwrap_or_default();
                let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
                owner["kind"].as_str() == Some(self.crd.kind.as_str()) && group == self.crd.group
            })
            .filter_map(|owner| owner["name"].as_str())
            .map(|name| {
                if namespace.is_empty() {
                    name.to_string()
                } else {
                    format!("{namespace}/{name}")
                }
            })
            .collect()
    }
}

/// One change of a watched object.
struct Change {
    kind: EventType,
    object: Arc<Value>,
    sentinels: SentinelBits,
}

/// `object` with `types` where it has none.
fn typed(mut object: DynamicObject, types: Option<&TypeMeta>) -> DynamicObject {
    if object.types.is_none() {
        object.types = types.cloned();
    }
    object
}

/// Runs a watch and calls `route` for every change after the initial list. With `types`, an
/// object that comes without its apiVersion and kind (every item of a list answer) is stored
/// with them, so readers of `seen` get it as the watch would.
async fn changes(
    api: Api<DynamicObject>,
    config: watcher::Config,
    (declared, types): (u16, Option<&TypeMeta>),
    seen: Cache,
    mut route: impl FnMut(Change),
) {
    // Keys listed by the current (re)list; what it no longer holds was deleted meanwhile.
    let mut relisting: Option<HashSet<String>> = None;
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => relisting = Some(HashSet::new()),
            Ok(Event::InitApply(object)) => {
                // The initial list is not a change: remember it, trigger nothing.
                if let Some((key, value)) = to_cached_json(typed(object, types), declared) {
                    if let Some(listed) = relisting.as_mut() {
                        listed.insert(key.clone());
                    }
                    seen.insert(key, &value);
                }
            }
            Ok(Event::InitDone) => {
                seen.listed();
                let Some(listed) = relisting.take() else { continue };
                for key in seen.keys().into_iter().filter(|k| !listed.contains(k)) {
                    if let Some(gone) = seen.remove(&key) {
                        route(Change {
                            kind: EventType::Delete,
                            object: gone,
                            sentinels: SentinelBits::default(),
                        });
                    }
                }
            }
            Ok(Event::Apply(object)) => {
                let Some((key, value)) = to_cached_json(typed(object, types), declared) else {
                    continue;
                };
                // Stored before anyone hears of it: a reconcile it triggers reads this version.
                // The previous version is parsed only where sentinels are declared (never for
                // owned children, the largest of the caches).
                let (existed, sentinels) = match declared {
                    0 => (seen.insert(key, &value), SentinelBits::default()),
                    _ => {
                        let old = seen.replace(key, &value);
                        (old.is_some(), sentinel::compute(old.as_deref(), &value, declared))
                    }
                };
                let value = Arc::new(value);
                let kind = if existed { EventType::Update } else { EventType::Create };
                route(Change {
                    kind,
                    object: value,
                    sentinels,
                });
            }
            Ok(Event::Delete(object)) => {
                let Some((key, value)) = to_json(&object) else { continue };
                seen.remove(&key);
                route(Change {
                    kind: EventType::Delete,
                    object: Arc::new(value),
                    sentinels: SentinelBits::default(),
                });
            }
            Err(error) => tracing::warn!(%error, "secondary watch failed; retrying with backoff"),
        }
    }
}

/// Runs one `observe.watch` entry.
pub async fn watch_secondary(
    api: Api<DynamicObject>,
    config: watcher::Config,
    watch: Arc<CompiledWatch>,
    primary: PrimaryKind,
    cache: Cache,
    declared: u16,
    enqueue: Arc<dyn Enqueue>,
) {
    let entry = &watch.entry;
    let on = if entry.on.is_empty() {
        vec![EventType::Create, EventType::Update, EventType::Delete]
    } else {
        entry.on.clone()
    };
    changes(api, config, (declared, None), Cache::default(), |change| {
        if !on.contains(&change.kind) {
            return;
        }
        let resolver = Resolver::new(&change.object, &[]).with_sentinels(change.sentinels);
        if watch.gate.as_ref().is_some_and(|g| !g.passes(&resolver)) {
            return;
        }
        let keys: Vec<String> = match &entry.key_from {
            Some(key_from) => keyed(key_from, watch.key_name.as_ref(), &change.object, &resolver),
            None => {
                let owners = primary.owners(&change.object);
                if owners.is_empty() { cache.keys() } else { owners }
            }
        };
        for key in primary.observed(watch.target.as_deref(), keys, &cache) {
            enqueue.offer(Trigger {
                key,
                source: Source::Watch,
                sentinels: change.sentinels,
                events: None,
                class: Class::User,
                seen: tokio::time::Instant::now(),
            });
        }
    })
    .await;
}

/// The primary keys `keyFrom` names for `object` (a watched object, or an Event): its label's
/// value (`name` or `namespace/name`), or `keyFrom.name` rendered over it; in
/// `keyFrom.namespace`, else the object's own namespace. One that names none drops the
/// change.
pub(super) fn keyed(
    key_from: &KeyFrom,
    key_name: Option<&Template>,
    object: &Value,
    resolver: &Resolver<'_, '_>,
) -> Vec<String> {
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    if let Some(label) = &key_from.label {
        return match object["metadata"]["labels"][label.as_str()].as_str() {
            Some(value) if value.contains('/') => vec![value.to_string()],
            Some(value) => vec![super::key_in(namespace, value)],
            None => vec![],
        };
    }
    let Some(template) = key_name else { return vec![] };
    match resolver.render(template) {
        Ok(name) if !name.trim().is_empty() => {
            let namespace = key_from.namespace.as_deref().unwrap_or(namespace);
            vec![super::key_in(namespace, name.trim())]
        }
        Ok(_) => {
            tracing::debug!(kind = %object["kind"], "keyFrom.name is empty for this object; the change is dropped");
            vec![]
        }
        Err(error) => {
            tracing::warn!(kind = %object["kind"], error = %error.message, "keyFrom.name does not render; the change is dropped");
            vec![]
        }
    }
}

/// Runs an implicit watch on an owned kind: its objects are kept in `children` (the applier
/// reads them there instead of asking the API server), and a changed or deleted child
/// re-enqueues its owner.
/// The echo of the runtime's own apply (`own`, by `kind` — apiVersion and kind as watched —
/// and key) re-enqueues nobody.
pub async fn watch_owned(
    api: Api<DynamicObject>,
    config: watcher::Config,
    primary: PrimaryKind,
    enqueue: Arc<dyn Enqueue>,
    (children, kind, own): (Cache, (String, String), Arc<OwnWrites>),
) {
    let types = TypeMeta {
        api_version: kind.0.clone(),
        kind: kind.1.clone(),
    };
    changes(api, config, (0, Some(&types)), children, |change| {
        let key = super::object_key(&change.object).unwrap_or_default();
        let own_key = super::Children::own_key(&kind.0, &kind.1, &key);
        if change.kind == EventType::Delete {
            own.forget(&own_key);
        }
        let version = super::own_writes::version_of(&change.object).filter(|_| change.kind != EventType::Delete);
        for owner in primary.owners(&change.object) {
            let trigger = Trigger::new(owner, Source::Owned);
            let trigger = match &version {
                Some(version) => own.screen(&own_key, version, trigger),
                None => Some(trigger),
            };
            if let Some(trigger) = trigger {
                enqueue.offer(trigger);
            }
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_child_is_stored_with_the_kind_it_was_watched_as() {
        // A list answer's items carry no apiVersion or kind.
        let listed: DynamicObject = serde_json::from_value(
            serde_json::json!({"metadata": {"name": "a-c", "namespace": "ns"}, "data": {"v": "1"}}),
        )
        .unwrap();
        assert!(listed.types.is_none());
        let types = TypeMeta {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        let (key, stored) = to_cached_json(typed(listed, Some(&types)), 0).unwrap();
        assert_eq!(key, "ns/a-c");
        assert_eq!(
            (&stored["apiVersion"], &stored["kind"]),
            (&serde_json::json!("v1"), &serde_json::json!("ConfigMap"))
        );
        // What the watch names stays its own.
        let watched: DynamicObject = serde_json::from_value(
            serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}),
        )
        .unwrap();
        assert_eq!(typed(watched, Some(&types)).types.unwrap().kind, "Secret");
    }

    #[test]
    fn a_child_keeps_its_managed_fields_only_while_the_older_shared_manager_holds_some() {
        let child = |manager: &str| -> DynamicObject {
            serde_json::from_value(serde_json::json!({"metadata": {"name": "c", "namespace": "ns", "managedFields": [
                {"manager": manager, "operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}},
            ]}}))
            .unwrap()
        };
        let (_, tenant) = to_cached_json(child("orkestra/apps.a.io"), 0).unwrap();
        assert!(tenant["metadata"]["managedFields"].is_null(), "nothing reads them");
        let (_, legacy) = to_cached_json(child(orkestra_katalog::ownership::LEGACY_FIELD_MANAGER), 0).unwrap();
        assert!(
            orkestra_katalog::ownership::migrated_managers(&legacy, "orkestra/apps.a.io").is_some(),
            "the applier sees what it has to hand over: {legacy}"
        );
    }
}
