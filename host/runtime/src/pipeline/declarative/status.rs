//! The CR's status: Ready (with observedGeneration), the `emit.status` fields in order, the
//! validation conditions, and the failure a reconcile ended with; written only when it
//! differs from what is there.

use std::sync::atomic::Ordering;

use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::{Map, Value, json};

use super::Declarative;
use crate::outcome::failure::{Reason, ReconcileError};
use crate::pipeline::mux::Request;
use crate::pipeline::observe::split_key;
use orkestra_expr::resolver::Resolver;
use orkestra_expr::template::Template;
use orkestra_katalog::compile::CompiledBox;
use orkestra_katalog::fields::{set_path, typed};
use orkestra_katalog::rules::Verdict;

/// Longest Ready message, as upstream (253 characters and "...").
pub(super) const MESSAGE_LIMIT: usize = 256;

impl Declarative {
    /// Writes `status` unless it is already there (or `runtime.ignoreStatusPatch` says
    /// never); returns whether it wrote.
    ///
    /// A kind without a status subresource (a CRD from a `crdFile` may lack one) answers 404
    /// on `/status` although the object exists. Its status is then written through the
    /// object itself, from then on, without the observedGeneration fields: there every
    /// write moves the generation, so they could never be true and would never settle.
    #[tracing::instrument(level = "debug", name = "status", skip_all)]
    pub(super) async fn patch_status(
        &self,
        request: &Request,
        object: &Value,
        mut status: Value,
    ) -> Result<bool, ReconcileError> {
        if self.crd.ignore_status_patch || self.status_dropped.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let inline = self.status_inline.load(Ordering::Relaxed);
        if inline {
            without_observed_generation(&mut status);
        }
        if object.get("status") == Some(&status) || (object.get("status").is_none() && status == json!({})) {
            return Ok(false);
        }
        let name = split_key(&request.key).1;
        let failed = |e| ReconcileError::api(Reason::StatusPatchFailed, format!("status of {}", request.key), e);
        let api = self.api(request).map_err(failed)?;
        if !inline {
            self.counters.wrote();
            let patch = Patch::Merge(json!({"status": status}));
            let params = PatchParams::default();
            match request.write_cr(api.patch_status(name, &params, &patch)).await {
                Ok(written) => {
                    self.check_kept(&written, &status, object);
                    return Ok(true);
                }
                Err(kube::Error::Api(answer))
                    if answer.code == 404 && api.get_opt(name).await.is_ok_and(|o| o.is_some()) =>
                {
                    tracing::info!(kind = %self.crd.kind, "this kind has no status subresource: status is written through the object itself, without observedGeneration");
                    self.status_inline.store(true, Ordering::Relaxed);
                    without_observed_generation(&mut status);
                    if object.get("status") == Some(&status) {
                        return Ok(false);
                    }
                }
                Err(error) => return Err(failed(error)),
            }
        }
        self.counters.wrote();
        let patch = Patch::Merge(json!({"status": status}));
        let params = PatchParams::default();
        let patched = request.write_cr(api.patch(name, &params, &patch));
        let written = patched.await.map_err(failed)?;
        self.check_kept(&written, &status, object);
        Ok(true)
    }

    /// A schema that declares no status (and keeps no unknown fields) prunes what was
    /// written: say so once, and stop writing what can never be kept.
    fn check_kept(&self, written: &DynamicObject, status: &Value, object: &Value) {
        if written.data.get("status").is_some_and(|s| !s.is_null()) || status == &json!({}) {
            return;
        }
        self.status_dropped.store(true, Ordering::Relaxed);
        let note = format!(
            "the {} CRD's schema has no status and keeps no unknown fields: the API server drops the status the runtime writes (Ready included); declare status in the schema",
            self.crd.kind
        );
        tracing::warn!(kind = %self.crd.kind, "{note}");
        self.events.warning(object, "StatusDropped", note);
    }
}

/// Drops `observedGeneration` from a status and its conditions.
fn without_observed_generation(status: &mut Value) {
    if let Some(fields) = status.as_object_mut() {
        fields.remove("observedGeneration");
    }
    let conditions = status.get_mut("conditions").and_then(Value::as_array_mut);
    for condition in conditions.into_iter().flatten() {
        if let Some(fields) = condition.as_object_mut() {
            fields.remove("observedGeneration");
        }
    }
}

/// Sets one condition in `status.conditions`, Ready kept first; `lastTransitionTime` moves
/// only when the condition's status changes.
pub(super) fn set_condition(status: &mut Value, condition: [&str; 4], generation: &Value, now: jiff::Timestamp) {
    let [kind, state, reason, message] = condition;
    let mut conditions: Vec<Value> = status["conditions"].as_array().cloned().unwrap_or_default();
    let position = conditions.iter().position(|c| c["type"] == kind);
    let since = match position.map(|i| &conditions[i]) {
        Some(previous) if previous["status"] == state => previous["lastTransitionTime"].clone(),
        _ => json!(orkestra_expr::calendar::rfc3339(now)),
    };
    let condition = json!({
        "type": kind, "status": state, "reason": reason, "message": message,
        "lastTransitionTime": since, "observedGeneration": generation,
    });
    match position {
        Some(i) => conditions[i] = condition,
        None if kind == "Ready" => conditions.insert(0, condition),
        None => conditions.push(condition),
    }
    status["conditions"] = Value::Array(conditions);
}

/// `PermissionMissing`: True with each permission the CRD lacks, as the last check found;
/// False once they are granted, on a CR that had it (a CR that never lacked one gains no
/// condition, nor a write). Returns the Event's note when the CR now lacks what it did not.
pub(super) fn permission_condition(
    status: &mut Value,
    previous: &Value,
    missing: &[orkestra_katalog::rbac::Need],
    generation: &Value,
    now: jiff::Timestamp,
) -> Option<String> {
    use crate::outcome::permissions::{note, note_with_rules};
    let had = previous["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "PermissionMissing"));
    if missing.is_empty() {
        if had.is_some_and(|c| c["status"] == "True") {
            set_condition(
                status,
                ["PermissionMissing", "False", "PermissionsGranted", ""],
                generation,
                now,
            );
        }
        return None;
    }
    let message = orkestra_expr::text::bounded(note(missing), MESSAGE_LIMIT);
    set_condition(
        status,
        ["PermissionMissing", "True", "RBACMissing", &message],
        generation,
        now,
    );
    let same = had.is_some_and(|c| c["status"] == "True" && c["message"] == message.as_str());
    (!same).then(|| note_with_rules(missing))
}

/// ValidationFailed (deny rules) and ValidationWarning (warn rules).
pub(super) fn validation_conditions(status: &mut Value, verdict: &Verdict, generation: &Value, now: jiff::Timestamp) {
    let denied = verdict.denied.join("; ");
    let failed = match denied.is_empty() {
        true => ["ValidationFailed", "False", "ValidationPassed", ""],
        false => ["ValidationFailed", "True", "DenyRuleViolation", &denied],
    };
    set_condition(status, failed, generation, now);
    let warnings = verdict.warnings.join("; ");
    let warned = match warnings.is_empty() {
        true => ["ValidationWarning", "False", "NoWarnings", ""],
        false => ["ValidationWarning", "True", "WarnRuleViolation", &warnings],
    };
    set_condition(status, warned, generation, now);
}

/// The status after a failed reconcile: Ready=False with the reason and a bounded message.
pub(super) fn failed_status(object: &Value, error: &ReconcileError, now: jiff::Timestamp) -> Value {
    let mut status = object
        .get("status")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    // The failure's own reason (NotOwned, ComponentTimeout, ...) tells users more than a
    // generic one; upstream says ReconcileError.
    let message = orkestra_expr::text::bounded(error.message.clone(), MESSAGE_LIMIT);
    set_condition(
        &mut status,
        ["Ready", "False", error.reason.as_str(), &message],
        &object["metadata"]["generation"],
        now,
    );
    status
}

/// The status a successful reconcile leaves: conditions and fields over the current status.
/// Conditions of fields are evaluated against the object as it was (a state machine reads
/// the phase it is in, not the one it is writing).
pub fn desired_status(
    compiled: &CompiledBox,
    object: &Value,
    notes: &[Template],
    now: jiff::Timestamp,
    context: &Map<String, Value>,
) -> Value {
    let mut status = object
        .get("status")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    if compiled.status_conditions {
        let generation = object["metadata"]["generation"].clone();
        status["observedGeneration"] = generation.clone();
        set_condition(
            &mut status,
            ["Ready", "True", "ReconcileSucceeded", ""],
            &generation,
            now,
        );
    }
    let resolver = Resolver::in_context(object, notes, context).at(now);
    for field in &compiled.status_fields {
        let value = if field.conditions.is_empty() || field.conditions.passes(&resolver, None) {
            match typed(&resolver, &field.value, field.value_type) {
                Ok(value) => Some(value),
                Err(why) => {
                    tracing::warn!(field = field.path.join("."), %why, "status field has no value; left as it was");
                    None
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::compile_for_test as crd;

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
    fn a_missing_permission_is_a_condition_with_one_event_and_clears_only_where_it_was() {
        use orkestra_katalog::rbac::{Need, Scope};
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let generation = json!(1);
        let create = Need {
            scope: Scope::Namespace("shop".into()),
            group: String::new(),
            resource: "configmaps".into(),
            verb: "create",
            name: None,
        };
        // Nothing missing, nothing said: no condition, so no write.
        let mut status = json!({});
        assert_eq!(
            permission_condition(&mut status, &json!({}), &[], &generation, now),
            None
        );
        assert_eq!(status, json!({}));

        // Missing: the condition names it; the Event names the rule, once.
        let note = permission_condition(&mut status, &json!({}), std::slice::from_ref(&create), &generation, now);
        assert!(note.unwrap().contains(
            r#"add to the Role in namespace shop: {apiGroups: [""], resources: [configmaps], verbs: [create]}"#
        ));
        assert_eq!(status["conditions"][0]["type"], "PermissionMissing");
        assert_eq!(status["conditions"][0]["status"], "True");
        assert_eq!(
            status["conditions"][0]["message"],
            "the runtime may not create configmaps in namespace shop"
        );
        let previous = status.clone();
        let again = permission_condition(&mut status, &previous, std::slice::from_ref(&create), &generation, now);
        assert_eq!(again, None, "the same missing permission: no second Event");
        assert_eq!(status, previous, "nor a write");

        // Granted: False where it was True.
        let note = permission_condition(&mut status, &previous, &[], &generation, now);
        assert_eq!(note, None);
        assert_eq!(status["conditions"][0]["status"], "False");
        assert_eq!(status["conditions"][0]["reason"], "PermissionsGranted");
    }

    #[test]
    fn status_fields_apply_in_order_with_types_and_the_ready_condition() {
        let crd = crd(STATE_MACHINE);
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let object = json!({"metadata": {"name": "a", "generation": 3}, "spec": {"replicas": 2}});
        let status = desired_status(crd.crd_box(), &object, &[], now, &Map::new());
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
        let next = desired_status(crd.crd_box(), &object, &[], later, &Map::new());
        assert_eq!(next["phase"], "Running");
        assert_eq!(next["conditions"][0]["lastTransitionTime"], "2026-01-01T00:00:00Z");

        // A steady state yields the same status: no PATCH.
        let steady =
            json!({"metadata": {"name": "a", "generation": 3}, "spec": {"replicas": 2}, "status": next.clone()});
        let again = desired_status(crd.crd_box(), &steady, &[], later, &Map::new());
        assert_eq!(
            desired_status(
                crd.crd_box(),
                &json!({"metadata": {"name": "a", "generation": 3}, "spec": {"replicas": 2}, "status": again.clone()}),
                &[],
                later,
                &Map::new()
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
            &Map::new(),
        );
        assert_eq!(status, json!({}));
    }
}
