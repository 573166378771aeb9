//! `observe.events`: Kubernetes Event objects (`events.k8s.io/v1`) that match an entry's
//! fields become triggers, routed by `keyFrom`, by `regarding` (when it names a primary),
//! or to every primary; the Event's content rides along as `.events.<name>`. A match field
//! written as a template (`regarding.name: "{{ .spec.databaseRef }}"`) is rendered over each
//! of those primaries, and the Event goes only to the ones it names.

use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::{Value, json};

use super::primary::to_json;
use super::secondary::{PrimaryKind, keyed};
use super::{Cache, Enqueue, Source, Trigger};
use crate::pipeline::flows::Class;
use orkestra_expr::resolver::Resolver;
use orkestra_katalog::compile::CompiledEvents;
use orkestra_katalog::{EventType, EventWatch, ObjectMatch};

/// Runs every events entry of a CRD over one watch of Event objects.
pub async fn watch_events(
    api: Api<DynamicObject>,
    entries: Arc<Vec<CompiledEvents>>,
    primary: PrimaryKind,
    cache: Cache,
    enqueue: Arc<dyn Enqueue>,
) {
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = stream.next().await {
        let (object, kind) = match event {
            Ok(Event::Apply(object)) => (object, EventType::Create),
            Ok(Event::Delete(object)) => (object, EventType::Delete),
            // Events from before we started are history, not signals.
            Ok(Event::Init | Event::InitApply(_) | Event::InitDone) => continue,
            Err(error) => {
                tracing::warn!(%error, "events watch failed; retrying with backoff");
                continue;
            }
        };
        let Some((_, event)) = to_json(&object) else { continue };
        for compiled in entries.iter() {
            let CompiledEvents { name, entry, gate, .. } = compiled;
            let on = &entry.on;
            if (!on.is_empty() && !on.contains(&kind)) || !matches(entry, &event) {
                continue;
            }
            let context = json!({ name.as_str(): summary(&event) });
            let mut resolver = Resolver::new(&event, &[]);
            resolver.set("events", context.clone());
            if gate.as_ref().is_some_and(|g| !g.passes(&resolver)) {
                continue;
            }
            let keys = route(compiled, &event, &resolver, &primary, &cache);
            let mut keys = primary.observed(compiled.target.as_deref(), keys, &cache);
            if !compiled.per_cr.is_empty() {
                keys.retain(|key| cache.get(key).is_some_and(|cr| concerns(compiled, &event, &cr)));
            }
            for key in keys {
                enqueue.offer(Trigger {
                    key,
                    source: Source::Events,
                    sentinels: Default::default(),
                    events: Some(context.clone()),
                    class: Class::User,
                    seen: tokio::time::Instant::now(),
                });
            }
        }
    }
}

/// What `.events.<name>` shows of an Event.
fn summary(event: &Value) -> Value {
    json!({
        "reason": event["reason"],
        "action": event["action"],
        "type": event["type"],
        "note": event["note"],
        "reportingController": event["reportingController"],
        "reportingInstance": event["reportingInstance"],
        "regarding": event["regarding"],
        "related": event["related"],
        "name": event["metadata"]["name"],
        "namespace": event["metadata"]["namespace"],
    })
}

fn field_matches(want: &Option<String>, got: &Value) -> bool {
    want.as_deref().is_none_or(|w| got.as_str() == Some(w))
}

fn object_matches(want: &Option<ObjectMatch>, got: &Value) -> bool {
    let Some(want) = want else { return true };
    field_matches(&want.api_version, &got["apiVersion"])
        && field_matches(&want.kind, &got["kind"])
        && field_matches(&want.name, &got["name"])
        && field_matches(&want.namespace, &got["namespace"])
}

/// Every field set in the entry must equal the Event's.
fn matches(entry: &EventWatch, event: &Value) -> bool {
    field_matches(&entry.reason, &event["reason"])
        && field_matches(&entry.action, &event["action"])
        && field_matches(&entry.type_, &event["type"])
        && field_matches(&entry.reporting_controller, &event["reportingController"])
        && field_matches(&entry.reporting_instance, &event["reportingInstance"])
        && field_matches(&entry.namespace, &event["metadata"]["namespace"])
        && field_matches(&entry.name, &event["metadata"]["name"])
        && object_matches(&entry.regarding, &event["regarding"])
        && object_matches(&entry.related, &event["related"])
}

/// Whether every templated match field, rendered over `cr`, equals the Event's.
fn concerns(compiled: &CompiledEvents, event: &Value, cr: &Value) -> bool {
    let resolver = Resolver::new(cr, &[]);
    compiled.per_cr.iter().all(|m| {
        let want = resolver.render(&m.template);
        let got = event.pointer(&m.pointer).and_then(Value::as_str);
        matches!((want, got), (Ok(want), Some(got)) if want.trim() == got)
    })
}

/// The primaries an Event may concern.
fn route(
    compiled: &CompiledEvents,
    event: &Value,
    resolver: &Resolver<'_, '_>,
    primary: &PrimaryKind,
    cache: &Cache,
) -> Vec<String> {
    if let Some(key_from) = &compiled.entry.key_from {
        return keyed(key_from, compiled.key_name.as_ref(), event, resolver);
    }
    let namespace = event["metadata"]["namespace"].as_str().unwrap_or_default();
    let regarding = &event["regarding"];
    if regarding["kind"].as_str() == Some(primary.crd.kind.as_str())
        && let Some(name) = regarding["name"].as_str()
    {
        let namespace = regarding["namespace"].as_str().unwrap_or(namespace);
        return vec![super::key_in(namespace, name)];
    }
    cache.keys()
}
