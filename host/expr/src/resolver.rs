//! The resolver context: the object being processed plus everything the pipeline learned
//! about it (sentinels, event context, cross reads, external calls, health, metrics, the
//! gateway request, the forEach item, children). Every template and every condition reads
//! through it; each stage adds its part and nothing else implements lookup.
//!
//! Pure: no kube or wasmtime imports.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::sentinel::SentinelBits;
use crate::template::{Env, ExecError, Template};

/// Names a stage may add at the top level of the resolver, next to the object's own
/// `apiVersion`, `kind`, `metadata`, `spec` and `status`.
pub const CONTEXT_KEYS: [&str; 11] = [
    "children",
    "cross",
    "external",
    "health",
    "metrics",
    "request",
    "events",
    "sentinels",
    "item",
    "value",
    "inputs",
];

/// The object plus context, the evaluation clock and the sentinels of the current event.
///
/// The object is borrowed where the caller can lend it (an informer cache entry) and
/// copied only when a stage must change it (normalize, mutation); context entries live
/// beside it and are seen first by templates and lookups.
#[derive(Debug, Clone)]
pub struct Resolver<'o, 'n> {
    object: Cow<'o, Value>,
    context: Map<String, Value>,
    sentinels: SentinelBits,
    notes: &'n [Template],
    now: jiff::Timestamp,
}

impl<'o, 'n> Resolver<'o, 'n> {
    /// A resolver over a borrowed object (a Kubernetes object as JSON), at the current time,
    /// with the object's [`stamps`] in its context.
    pub fn new(object: &'o Value, notes: &'n [Template]) -> Self {
        Self::in_context(object, notes, &stamps(object))
    }

    /// A resolver whose context starts as `context`: what one reconcile shares between its
    /// stages (the stamps parsed once, cross reads, call results). Nothing is parsed here.
    pub fn in_context(object: &'o Value, notes: &'n [Template], context: &Map<String, Value>) -> Self {
        Self::from_cow(Cow::Borrowed(object), notes, context.clone())
    }

    /// A resolver that owns its object.
    pub fn owned(object: Value, notes: &'n [Template]) -> Resolver<'static, 'n> {
        let context = stamps(&object);
        Resolver::from_cow(Cow::Owned(object), notes, context)
    }

    /// A context that carries the run's `sentinels` (see [`SentinelBits::named`]) gives
    /// them to the sentinel functions, so every stage of a run sees its event's.
    fn from_cow(object: Cow<'o, Value>, notes: &'n [Template], context: Map<String, Value>) -> Self {
        let sentinels = context.get("sentinels").map(SentinelBits::of_named).unwrap_or_default();
        Self {
            object,
            context,
            sentinels,
            notes,
            now: jiff::Timestamp::now(),
        }
    }

    /// Pins the clock (tests, and one consistent "now" across a reconcile).
    pub fn at(mut self, now: jiff::Timestamp) -> Self {
        self.now = now;
        self
    }

    /// Sets the sentinels of the event being admitted.
    pub fn with_sentinels(mut self, sentinels: SentinelBits) -> Self {
        self.sentinels = sentinels;
        self
    }

    /// Adds or replaces a top-level context entry (`children`, `cross`, `external`, `health`,
    /// `metrics`, `request`, `events`, `item`, or a forEach `as` name).
    pub fn set(&mut self, key: &str, value: Value) {
        self.context.insert(key.to_string(), value);
    }

    /// Adds `value` under `key.name` (e.g. `external.health-check`, `cross.db`).
    pub fn set_entry(&mut self, key: &str, name: &str, value: Value) {
        let entry = self
            .context
            .entry(key.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        if let Value::Object(inner) = entry {
            inner.insert(name.to_string(), value);
        }
    }

    /// The object being processed.
    pub fn object(&self) -> &Value {
        &self.object
    }

    /// The object, for stages that rewrite it in memory (copied on first write).
    pub fn object_mut(&mut self) -> &mut Value {
        self.object.to_mut()
    }

    /// The sentinels of the current event.
    pub fn sentinels(&self) -> SentinelBits {
        self.sentinels
    }

    /// The evaluation clock.
    pub fn now(&self) -> jiff::Timestamp {
        self.now
    }

    /// The template environment for this resolver.
    pub fn env(&self) -> Env<'n> {
        Env {
            now: self.now,
            notes: self.notes,
            sentinels: self.sentinels,
        }
    }

    /// Renders a template against the resolver.
    pub fn render(&self, template: &Template) -> Result<String, ExecError> {
        template.render_in(&self.env(), &self.object, Some(&self.context))
    }

    /// Evaluates a template, keeping the type of a single-action template.
    pub fn evaluate(&self, template: &Template) -> Result<Value, ExecError> {
        template.evaluate_in(&self.env(), &self.object, Some(&self.context))
    }

    /// Looks up a dot path (`spec.replicas`, `.children.job.status.succeeded`,
    /// `spec.items.0.name`), context entries first; `None` when any step is missing.
    pub fn lookup(&self, path: &str) -> Option<&Value> {
        let path = path.strip_prefix('.').unwrap_or(path);
        let (first, rest) = path.split_once('.').unwrap_or((path, ""));
        match self.context.get(first) {
            Some(value) => lookup(value, rest),
            None => lookup(&self.object, path),
        }
    }
}

/// The health and metrics the runtime stamped on `object` after its last reconcile, as
/// `health` and `metrics` context entries: the feedback loop that lets a gate read the
/// operator's own state. An annotation that is not JSON is left out.
pub fn stamps(object: &Value) -> Map<String, Value> {
    let mut context = Map::new();
    for (key, annotation) in [
        ("health", crate::labels::HEALTH),
        ("metrics", crate::labels::CROSS_METRICS),
    ] {
        if let Some(text) = object["metadata"]["annotations"][annotation].as_str()
            && let Ok(value) = serde_json::from_str::<Value>(text)
        {
            context.insert(key.to_string(), value);
        }
    }
    context
}

/// Follows a dot path through maps (and list indexes); a leading dot is allowed.
pub fn lookup<'v>(root: &'v Value, path: &str) -> Option<&'v Value> {
    let path = path.strip_prefix('.').unwrap_or(path);
    if path.is_empty() {
        return Some(root);
    }
    let mut current = root;
    for key in path.split('.') {
        current = match current {
            Value::Object(map) => map.get(key)?,
            Value::Array(items) => items.get(key.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(current)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::template::Functions;

    #[test]
    fn lookup_follows_maps_and_list_indexes() {
        let object = json!({"spec": {"items": [{"name": "a"}], "x": 1}});
        let resolver = Resolver::new(&object, &[]);
        assert_eq!(resolver.lookup("spec.x"), Some(&json!(1)));
        assert_eq!(resolver.lookup(".spec.items.0.name"), Some(&json!("a")));
        assert_eq!(resolver.lookup("spec.items.5.name"), None);
        assert_eq!(resolver.lookup("spec.x.y"), None);
    }

    #[test]
    fn stages_add_context_that_templates_and_lookups_both_see() {
        let mut resolver = Resolver::owned(json!({"metadata": {"name": "db"}}), &[]);
        resolver.set("metrics", json!({"queueDepth": 7}));
        resolver.set_entry("external", "health-check", json!({"status": "ok"}));
        resolver.set_entry("external", "quota", json!({"status": "low"}));
        assert_eq!(resolver.lookup("external.health-check.status"), Some(&json!("ok")));
        assert_eq!(resolver.lookup("metadata.name"), Some(&json!("db")));
        let template = Template::compile(
            "{{ .metadata.name }} {{ .metrics.queueDepth }} {{ (index .external \"quota\").status }}",
            Functions::builtin(),
        )
        .unwrap();
        assert_eq!(resolver.render(&template).unwrap(), "db 7 low");
    }
}
