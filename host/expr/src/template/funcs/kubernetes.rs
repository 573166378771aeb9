//! Kubernetes object notes: metadata, conditions, workloads, services, containers, jobs,
//! enrichment data (`_pods`, `_warnings`) and gateway provenance. Every function is nil-safe:
//! a missing object or field gives an empty answer, never an error.

use serde_json::Value;

use super::args::{Result, exactly, last, string, text};
use super::entry::Entry;
use crate::labels;
use crate::template::env::Env;
use crate::template::value::{as_i64, display, truthy};

pub const FUNCS: &[Entry] = &[
    Entry {
        name: "meta",
        func: meta,
        usage: "meta OBJ",
        doc: "metadata",
    },
    Entry {
        name: "name",
        func: name,
        usage: "name OBJ",
        doc: "metadata.name",
    },
    Entry {
        name: "namespace",
        func: namespace,
        usage: "namespace OBJ",
        doc: "metadata.namespace",
    },
    Entry {
        name: "labels",
        func: labels_fn,
        usage: "labels OBJ",
        doc: "metadata.labels ({} when none)",
    },
    Entry {
        name: "annotations",
        func: annotations,
        usage: "annotations OBJ",
        doc: "metadata.annotations ({} when none)",
    },
    Entry {
        name: "spec",
        func: spec,
        usage: "spec OBJ",
        doc: "spec",
    },
    Entry {
        name: "status",
        func: status,
        usage: "status OBJ",
        doc: "status",
    },
    Entry {
        name: "phase",
        func: phase,
        usage: "phase OBJ",
        doc: "status.phase",
    },
    Entry {
        name: "resourceName",
        func: name,
        usage: "resourceName OBJ",
        doc: "metadata.name",
    },
    Entry {
        name: "resourceNamespace",
        func: namespace,
        usage: "resourceNamespace OBJ",
        doc: "metadata.namespace",
    },
    Entry {
        name: "resourceUID",
        func: uid,
        usage: "resourceUID OBJ",
        doc: "metadata.uid",
    },
    Entry {
        name: "resourceVersion",
        func: resource_version,
        usage: "resourceVersion OBJ",
        doc: "metadata.resourceVersion",
    },
    Entry {
        name: "creationTimestamp",
        func: creation_timestamp,
        usage: "creationTimestamp OBJ",
        doc: "metadata.creationTimestamp",
    },
    Entry {
        name: "ownerKind",
        func: owner_kind,
        usage: "ownerKind OBJ",
        doc: "kind of the first owner reference",
    },
    Entry {
        name: "ownerName",
        func: owner_name,
        usage: "ownerName OBJ",
        doc: "name of the first owner reference",
    },
    Entry {
        name: "hasCondition",
        func: has_condition,
        usage: "hasCondition TYPE OBJ",
        doc: "status.conditions has TYPE with status True",
    },
    Entry {
        name: "conditionReason",
        func: condition_reason,
        usage: "conditionReason TYPE OBJ",
        doc: "reason of condition TYPE",
    },
    Entry {
        name: "conditionMessage",
        func: condition_message,
        usage: "conditionMessage TYPE OBJ",
        doc: "message of condition TYPE",
    },
    Entry {
        name: "resourceExists",
        func: resource_exists,
        usage: "resourceExists OBJ",
        doc: "OBJ is an object with a name",
    },
    Entry {
        name: "isTerminating",
        func: is_terminating,
        usage: "isTerminating OBJ",
        doc: "metadata.deletionTimestamp is set",
    },
    Entry {
        name: "generation",
        func: generation,
        usage: "generation OBJ",
        doc: "metadata.generation (0 when absent)",
    },
    Entry {
        name: "observedGeneration",
        func: observed_generation,
        usage: "observedGeneration OBJ",
        doc: "status.observedGeneration (0 when absent)",
    },
    Entry {
        name: "isSynced",
        func: is_synced,
        usage: "isSynced OBJ",
        doc: "status.observedGeneration has caught up with metadata.generation",
    },
    Entry {
        name: "getAnnotation",
        func: get_annotation,
        usage: "getAnnotation KEY OBJ",
        doc: "the annotation's value (\"\" when absent)",
    },
    Entry {
        name: "hasAnnotation",
        func: has_annotation,
        usage: "hasAnnotation KEY OBJ",
        doc: "the annotation is set",
    },
];

pub const ENRICHMENT: &[Entry] = &[
    Entry {
        name: "podCount",
        func: pod_count,
        usage: "podCount OBJ",
        doc: "number of enriched _pods",
    },
    Entry {
        name: "readyPodCount",
        func: ready_pod_count,
        usage: "readyPodCount OBJ",
        doc: "number of _pods with condition Ready",
    },
    Entry {
        name: "podNames",
        func: pod_names,
        usage: "podNames OBJ",
        doc: "names of _pods",
    },
    Entry {
        name: "podIPs",
        func: pod_ips,
        usage: "podIPs OBJ",
        doc: "status.podIP of _pods that have one",
    },
    Entry {
        name: "hasCrashingPod",
        func: has_crashing_pod,
        usage: "hasCrashingPod OBJ",
        doc: "a container of _pods waits in CrashLoopBackOff",
    },
    Entry {
        name: "podMaxRestarts",
        func: pod_max_restarts,
        usage: "podMaxRestarts OBJ",
        doc: "highest container restart count in _pods",
    },
    Entry {
        name: "podContainerReasons",
        func: pod_container_reasons,
        usage: "podContainerReasons OBJ",
        doc: "the distinct waiting or terminated reasons of the containers in _pods",
    },
    Entry {
        name: "deploymentReplicaSetCount",
        func: replica_set_count,
        usage: "deploymentReplicaSetCount OBJ",
        doc: "number of enriched _replicaSets",
    },
    Entry {
        name: "hasWarnings",
        func: has_warnings,
        usage: "hasWarnings OBJ",
        doc: "_warnings is not empty",
    },
    Entry {
        name: "warningCount",
        func: warning_count,
        usage: "warningCount OBJ",
        doc: "number of _warnings",
    },
    Entry {
        name: "firstWarning",
        func: first_warning,
        usage: "firstWarning OBJ",
        doc: "message of the first of _warnings",
    },
    Entry {
        name: "firstWarningMessage",
        func: first_warning,
        usage: "firstWarningMessage OBJ",
        doc: "message of the first of _warnings (as firstWarning)",
    },
    Entry {
        name: "firstWarningReason",
        func: first_warning_reason,
        usage: "firstWarningReason OBJ",
        doc: "reason of the first of _warnings",
    },
];

pub const SERVE: &[Entry] = &[
    Entry {
        name: "getServeTarget",
        func: get_serve_target,
        usage: "getServeTarget OBJ",
        doc: "the serve-target annotation",
    },
    Entry {
        name: "getServeAlias",
        func: get_serve_alias,
        usage: "getServeAlias OBJ",
        doc: "the serve-alias annotation",
    },
    Entry {
        name: "getServeSource",
        func: get_serve_source,
        usage: "getServeSource OBJ",
        doc: "the serve-source annotation",
    },
    Entry {
        name: "hasServeTarget",
        func: has_serve_target,
        usage: "hasServeTarget OBJ",
        doc: "the CR came through a serve target",
    },
    Entry {
        name: "hasServeAlias",
        func: has_serve_alias,
        usage: "hasServeAlias OBJ",
        doc: "the CR came through an alias",
    },
    Entry {
        name: "hasServeSource",
        func: has_serve_source,
        usage: "hasServeSource OBJ",
        doc: "the CR carries a serve source",
    },
    Entry {
        name: "isDirectApply",
        func: is_direct_apply,
        usage: "isDirectApply OBJ",
        doc: "the CR did not come through the gateway",
    },
];

static NULL: Value = Value::Null;

/// Follows a path of object keys; nil when missing.
pub(super) fn at<'a>(value: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().try_fold(value, |v, key| v.get(key)).unwrap_or(&NULL)
}

pub(super) fn obj<'a>(args: &[&'a Value]) -> Result<&'a Value> {
    exactly(args, 1)?;
    Ok(args[0])
}

/// A key and an object, in either order: `KEY OBJ` (so a pipe passes the object) or
/// upstream's `OBJ KEY`.
pub(super) fn keyed<'a>(args: &[&'a Value]) -> Result<(String, &'a Value)> {
    exactly(args, 2)?;
    let (key, object) = match args[0].is_object() && !args[1].is_object() {
        true => (1, args[0]),
        false => (0, args[1]),
    };
    Ok((text(args, key).into_owned(), object))
}

pub(super) fn int_at(value: &Value, path: &[&str]) -> i64 {
    as_i64(at(value, path)).unwrap_or(0)
}

pub(super) fn text_at(value: &Value, path: &[&str]) -> Value {
    string(display(at(value, path)))
}

fn meta(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(at(obj(args)?, &["metadata"]).clone())
}
fn name(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(obj(args)?, &["metadata", "name"]))
}
fn namespace(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(obj(args)?, &["metadata", "namespace"]))
}
fn map_or_empty(value: &Value) -> Value {
    if value.is_object() {
        value.clone()
    } else {
        Value::Object(Default::default())
    }
}
fn labels_fn(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(map_or_empty(at(obj(args)?, &["metadata", "labels"])))
}
fn annotations(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(map_or_empty(at(obj(args)?, &["metadata", "annotations"])))
}
fn spec(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(at(obj(args)?, &["spec"]).clone())
}
fn status(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(at(obj(args)?, &["status"]).clone())
}
fn phase(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(obj(args)?, &["status", "phase"]))
}
fn uid(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(obj(args)?, &["metadata", "uid"]))
}
fn resource_version(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(obj(args)?, &["metadata", "resourceVersion"]))
}
fn creation_timestamp(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(obj(args)?, &["metadata", "creationTimestamp"]))
}
fn first_owner(value: &Value) -> &Value {
    at(value, &["metadata", "ownerReferences"]).get(0).unwrap_or(&NULL)
}
fn owner_kind(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(first_owner(obj(args)?), &["kind"]))
}
fn owner_name(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(first_owner(obj(args)?), &["name"]))
}

/// The condition of `kind` in `status.conditions`, if present.
fn condition<'a>(value: &'a Value, kind: &str) -> Option<&'a Value> {
    at(value, &["status", "conditions"])
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
}

pub(super) fn condition_true(value: &Value, kind: &str) -> bool {
    condition(value, kind).is_some_and(|c| c.get("status").and_then(Value::as_str) == Some("True"))
}

fn has_condition(_: &Env<'_>, args: &[&Value]) -> Result {
    let (kind, value) = keyed(args)?;
    Ok(Value::Bool(condition_true(value, &kind)))
}
fn condition_reason(_: &Env<'_>, args: &[&Value]) -> Result {
    let (kind, value) = keyed(args)?;
    Ok(condition(value, &kind).map_or(string(""), |c| text_at(c, &["reason"])))
}
fn condition_message(_: &Env<'_>, args: &[&Value]) -> Result {
    let (kind, value) = keyed(args)?;
    Ok(condition(value, &kind).map_or(string(""), |c| text_at(c, &["message"])))
}
fn resource_exists(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(truthy(at(obj(args)?, &["metadata", "name"]))))
}
fn is_terminating(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(truthy(at(obj(args)?, &["metadata", "deletionTimestamp"]))))
}
fn generation(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(int_at(obj(args)?, &["metadata", "generation"])))
}
fn observed_generation(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(int_at(obj(args)?, &["status", "observedGeneration"])))
}
fn is_synced(_: &Env<'_>, args: &[&Value]) -> Result {
    let value = obj(args)?;
    Ok(Value::Bool(
        truthy(at(value, &["metadata", "name"]))
            && int_at(value, &["status", "observedGeneration"]) >= int_at(value, &["metadata", "generation"]),
    ))
}
pub(super) fn get_annotation(_: &Env<'_>, args: &[&Value]) -> Result {
    let (key, value) = keyed(args)?;
    Ok(text_at(value, &["metadata", "annotations", &key]))
}
fn has_annotation(_: &Env<'_>, args: &[&Value]) -> Result {
    let (key, value) = keyed(args)?;
    Ok(Value::Bool(!at(value, &["metadata", "annotations", &key]).is_null()))
}

pub(super) fn pods(value: &Value) -> Vec<Value> {
    at(value, &["_pods"]).as_array().cloned().unwrap_or_default()
}
pub(super) fn warnings(value: &Value) -> Vec<Value> {
    at(value, &["_warnings"]).as_array().cloned().unwrap_or_default()
}
fn pod_count(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(pods(obj(args)?).len()))
}
fn ready_pod_count(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(
        pods(obj(args)?).iter().filter(|p| condition_true(p, "Ready")).count(),
    ))
}
fn pod_names(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Array(
        pods(obj(args)?)
            .iter()
            .map(|p| text_at(p, &["metadata", "name"]))
            .collect(),
    ))
}
fn pod_ips(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Array(
        pods(obj(args)?)
            .iter()
            .map(|p| text_at(p, &["status", "podIP"]))
            .filter(truthy)
            .collect(),
    ))
}
pub(super) fn container_statuses(pod: &Value) -> Vec<Value> {
    at(pod, &["status", "containerStatuses"])
        .as_array()
        .cloned()
        .unwrap_or_default()
}
fn has_crashing_pod(_: &Env<'_>, args: &[&Value]) -> Result {
    let crashing = pods(obj(args)?)
        .iter()
        .flat_map(container_statuses)
        .any(|s| at(&s, &["state", "waiting", "reason"]).as_str() == Some("CrashLoopBackOff"));
    Ok(Value::Bool(crashing))
}
fn pod_max_restarts(_: &Env<'_>, args: &[&Value]) -> Result {
    let max = pods(obj(args)?)
        .iter()
        .flat_map(container_statuses)
        .map(|s| int_at(&s, &["restartCount"]))
        .max()
        .unwrap_or(0);
    Ok(Value::from(max))
}
fn pod_container_reasons(_: &Env<'_>, args: &[&Value]) -> Result {
    let mut reasons: Vec<Value> = Vec::new();
    for status in pods(obj(args)?).iter().flat_map(container_statuses) {
        for state in ["waiting", "terminated"] {
            if let Some(reason) = at(&status, &["state", state, "reason"]).as_str()
                && !reasons.iter().any(|r| r == reason)
            {
                reasons.push(string(reason));
            }
        }
    }
    Ok(Value::Array(reasons))
}
fn replica_set_count(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(
        at(obj(args)?, &["_replicaSets"]).as_array().map_or(0, Vec::len),
    ))
}
fn has_warnings(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(!warnings(obj(args)?).is_empty()))
}
fn warning_count(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(warnings(obj(args)?).len()))
}
fn first_warning(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(warnings(obj(args)?)
        .first()
        .map_or(string(""), |w| text_at(w, &["message"])))
}
fn first_warning_reason(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(warnings(obj(args)?)
        .first()
        .map_or(string(""), |w| text_at(w, &["reason"])))
}

fn annotation<'a>(value: &'a Value, key: &str) -> &'a Value {
    at(value, &["metadata", "annotations", key])
}
fn get_serve_target(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(string(display(annotation(last(args), labels::SERVE_TARGET))))
}
fn get_serve_alias(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(string(display(annotation(last(args), labels::SERVE_ALIAS))))
}
fn get_serve_source(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(string(display(annotation(last(args), labels::SERVE_SOURCE))))
}
fn has_serve_target(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(truthy(annotation(obj(args)?, labels::SERVE_TARGET))))
}
fn has_serve_alias(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(truthy(annotation(obj(args)?, labels::SERVE_ALIAS))))
}
fn has_serve_source(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(truthy(annotation(obj(args)?, labels::SERVE_SOURCE))))
}
fn is_direct_apply(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(!truthy(annotation(obj(args)?, labels::SERVE_TARGET))))
}
