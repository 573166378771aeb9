//! The resolver context: the object being processed plus everything the pipeline learned
//! about it (sentinels, event context, cross reads, external calls, health, metrics, the
//! gateway request, the forEach item, children). Every template and every condition reads
//! through it; each stage adds its part and nothing else implements lookup.
//!
//! Pure: no kube or wasmtime imports.

use serde_json::{Map, Value};

use crate::template::{Env, ExecError, SentinelBits, Template};

/// Names a stage may add at the top level of the resolver, next to the object's own
/// `apiVersion`, `kind`, `metadata`, `spec` and `status`.
pub const CONTEXT_KEYS: [&str; 9] = [
    "children", "cross", "external", "health", "metrics", "request", "events", "item", "value",
];

/// The object plus context, the evaluation clock and the sentinels of the current event.
#[derive(Debug, Clone)]
pub struct Resolver<'n> {
    data: Value,
    sentinels: SentinelBits,
    notes: &'n [Template],
    now: jiff::Timestamp,
}

impl<'n> Resolver<'n> {
    /// A resolver over `object` (a Kubernetes object as JSON), at the current time.
    pub fn new(object: Value, notes: &'n [Template]) -> Self {
        let data = match object {
            Value::Object(map) => Value::Object(map),
            _ => Value::Object(Map::new()),
        };
        Self {
            data,
            sentinels: SentinelBits::default(),
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
        if let Value::Object(map) = &mut self.data {
            map.insert(key.to_string(), value);
        }
    }

    /// Adds `value` under `key.name` (e.g. `external.health-check`, `cross.db`).
    pub fn set_entry(&mut self, key: &str, name: &str, value: Value) {
        if let Value::Object(map) = &mut self.data {
            let entry = map.entry(key.to_string()).or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            if let Value::Object(inner) = entry {
                inner.insert(name.to_string(), value);
            }
        }
    }

    /// The whole map templates see as `.`.
    pub fn data(&self) -> &Value {
        &self.data
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
        template.render(&self.env(), &self.data)
    }

    /// Evaluates a template, keeping the type of a single-action template.
    pub fn evaluate(&self, template: &Template) -> Result<Value, ExecError> {
        template.evaluate(&self.env(), &self.data)
    }

    /// Looks up a dot path (`spec.replicas`, `.children.job.status.succeeded`,
    /// `spec.items.0.name`); `None` when any step is missing.
    pub fn lookup(&self, path: &str) -> Option<&Value> {
        lookup(&self.data, path)
    }
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
        let resolver = Resolver::new(json!({"spec": {"items": [{"name": "a"}], "x": 1}}), &[]);
        assert_eq!(resolver.lookup("spec.x"), Some(&json!(1)));
        assert_eq!(resolver.lookup(".spec.items.0.name"), Some(&json!("a")));
        assert_eq!(resolver.lookup("spec.items.5.name"), None);
        assert_eq!(resolver.lookup("spec.x.y"), None);
    }

    #[test]
    fn stages_add_context_that_templates_and_lookups_both_see() {
        let mut resolver = Resolver::new(json!({"metadata": {"name": "db"}}), &[]);
        resolver.set("metrics", json!({"queueDepth": 7}));
        resolver.set_entry("external", "health-check", json!({"status": "ok"}));
        resolver.set_entry("external", "quota", json!({"status": "low"}));
        assert_eq!(resolver.lookup("external.health-check.status"), Some(&json!("ok")));
        let template = Template::compile(
            "{{ .metadata.name }} {{ .metrics.queueDepth }} {{ (index .external \"quota\").status }}",
            Functions::builtin(),
        )
        .unwrap();
        assert_eq!(resolver.render(&template).unwrap(), "db 7 low");
    }
}
