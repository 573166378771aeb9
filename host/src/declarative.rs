//! The declarative reconciler (Katalog templates only). This stage writes status: the
//! Ready condition with observedGeneration and the declared `emit.status` fields (in
//! order, the last match winning), and skips the status PATCH when nothing changed, so a
//! reconcile never triggers itself. Resource templates, events and deletion follow.

use std::sync::Arc;

use futures::future::BoxFuture;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Map, Value, json};

use crate::compiled::{CompiledBox, CompiledCrd};
use crate::condition::ValueType;
use crate::mux::{Action, Form, ReconcileError, Reconciler, Request};
use crate::observe::split_key;
use crate::resolver::Resolver;
use crate::template::Template;

/// The declarative reconciler of one CRD.
pub struct Declarative {
    client: kube::Client,
    crd: Arc<CompiledCrd>,
}

impl Declarative {
    pub fn new(client: kube::Client, crd: Arc<CompiledCrd>) -> Self {
        Self { client, crd }
    }

    async fn run(&self, request: &Request) -> Result<Action, ReconcileError> {
        let Some(object) = &request.object else {
            return Ok(Action::Done);
        };
        if !object["metadata"]["deletionTimestamp"].is_null() {
            return Ok(Action::Done);
        }
        let (compiled, _) = self.crd.for_object(object);
        let now = jiff::Timestamp::now();
        let status = desired_status(compiled, object, &self.crd.notes, now);
        if object.get("status") == Some(&status) || (object.get("status").is_none() && status == json!({})) {
            return Ok(Action::Done);
        }
        let (namespace, name) = split_key(&request.key);
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, request.resource.as_ref()),
            None => Api::all_with(self.client.clone(), request.resource.as_ref()),
        };
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(json!({"status": status})))
            .await
            .map_err(|e| ReconcileError::new("StatusPatchFailed", e.to_string()))?;
        Ok(Action::Done)
    }
}

impl Reconciler for Declarative {
    fn form(&self) -> Form {
        Form::Declarative
    }

    fn reconcile<'a>(&'a self, request: &'a Request) -> BoxFuture<'a, Result<Action, ReconcileError>> {
        Box::pin(self.run(request))
    }
}

/// The status a successful reconcile leaves: conditions and fields over the current status.
/// Conditions of fields are evaluated against the object as it was (a state machine reads
/// the phase it is in, not the one it is writing).
pub fn desired_status(compiled: &CompiledBox, object: &Value, notes: &[Template], now: jiff::Timestamp) -> Value {
    let mut status = object
        .get("status")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    if compiled.status_conditions {
        let generation = object["metadata"]["generation"].clone();
        status["observedGeneration"] = generation.clone();
        let previous = status["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
            .cloned();
        let unchanged = previous
            .as_ref()
            .is_some_and(|p| p["status"] == "True" && p["reason"] == "ReconcileSucceeded");
        let since = match (&previous, unchanged) {
            (Some(p), true) => p["lastTransitionTime"].clone(),
            _ => json!(now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
        };
        let ready = json!({
            "type": "Ready", "status": "True", "reason": "ReconcileSucceeded", "message": "",
            "lastTransitionTime": since, "observedGeneration": generation,
        });
        let mut conditions: Vec<Value> = status["conditions"].as_array().cloned().unwrap_or_default();
        conditions.retain(|c| c["type"] != "Ready");
        conditions.insert(0, ready);
        status["conditions"] = Value::Array(conditions);
    }
    let resolver = Resolver::new(object, notes).at(now);
    for field in &compiled.status_fields {
        let value = if field.conditions.is_empty() || field.conditions.passes(&resolver, None) {
            typed(&resolver, &field.value, field.value_type)
        } else if field.clear_on_false {
            Some(json!(""))
        } else {
            None
        };
        if let Some(value) = value {
            set_path(&mut status, &field.path, value);
        }
    }
    status
}

/// A field's value in its declared type; `None` (and a warning) when it does not convert.
fn typed(resolver: &Resolver<'_, '_>, template: &Template, value_type: ValueType) -> Option<Value> {
    let text = match value_type {
        ValueType::Auto => return resolver.evaluate(template).ok(),
        _ => resolver.render(template).ok()?,
    };
    let value = match value_type {
        ValueType::String | ValueType::Auto => Some(Value::String(text.clone())),
        ValueType::Int => text.trim().parse::<i64>().ok().map(Value::from),
        ValueType::Float => text
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number),
        ValueType::Bool => match text.trim() {
            "true" => Some(Value::Bool(true)),
            "false" | "" => Some(Value::Bool(false)),
            _ => None,
        },
    };
    if value.is_none() {
        tracing::warn!(value = %text, ?value_type, "status field does not convert to its type; left as it was");
    }
    value
}

fn set_path(root: &mut Value, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut current = root;
    for segment in parents {
        if !current[segment.as_str()].is_object() {
            current[segment.as_str()] = Value::Object(Map::new());
        }
        current = &mut current[segment.as_str()];
    }
    current[last.as_str()] = value;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiled::compile_for_test as crd;

    const STATE_MACHINE: &str = "        emit:
          status:
            fields:
              - {path: phase, value: Pending, when: [{field: status.phase, notExists: true}]}
              - {path: phase, value: Running, when: [{field: status.phase, equals: Pending}]}
              - {path: replicas, type: int, value: '{{ .spec.replicas }}'}
              - {path: detail.ready, type: bool, value: '{{ gt .spec.replicas 0 }}'}
              - {path: note, value: busy, clearOnFalse: true, when: [{field: status.phase, equals: Running}]}
";

    #[test]
    fn status_fields_apply_in_order_with_types_and_the_ready_condition() {
        let crd = crd(STATE_MACHINE);
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let object = json!({"metadata": {"name": "a", "generation": 3}, "spec": {"replicas": 2}});
        let status = desired_status(crd.crd_box(), &object, &[], now);
        assert_eq!(status["phase"], "Pending");
        assert_eq!(status["replicas"], 2);
        assert_eq!(status["detail"]["ready"], true);
        assert_eq!(status["note"], "", "clearOnFalse writes empty");
        assert_eq!(status["observedGeneration"], 3);
        assert_eq!(status["conditions"][0]["type"], "Ready");
        assert_eq!(status["conditions"][0]["lastTransitionTime"], "2026-01-01T00:00:00Z");

        // The next reconcile moves the machine on, and keeps the condition's transition time.
        let object = json!({"metadata": {"name": "a", "generation": 3}, "spec": {"replicas": 2}, "status": status});
        let later: jiff::Timestamp = "2026-01-02T00:00:00Z".parse().unwrap();
        let next = desired_status(crd.crd_box(), &object, &[], later);
        assert_eq!(next["phase"], "Running");
        assert_eq!(next["conditions"][0]["lastTransitionTime"], "2026-01-01T00:00:00Z");

        // A steady state yields the same status: no PATCH.
        let steady =
            json!({"metadata": {"name": "a", "generation": 3}, "spec": {"replicas": 2}, "status": next.clone()});
        let again = desired_status(crd.crd_box(), &steady, &[], later);
        assert_eq!(
            desired_status(
                crd.crd_box(),
                &json!({"metadata": {"name": "a", "generation": 3}, "spec": {"replicas": 2}, "status": again.clone()}),
                &[],
                later
            ),
            again
        );
    }

    #[test]
    fn conditions_can_be_switched_off() {
        let crd = crd("        emit:\n          status:\n            conditions: false\n");
        let status = desired_status(
            crd.crd_box(),
            &json!({"metadata": {"generation": 1}}),
            &[],
            jiff::Timestamp::now(),
        );
        assert_eq!(status, json!({}));
    }
}
