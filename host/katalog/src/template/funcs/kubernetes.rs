//! Kubernetes object notes: metadata, conditions, workloads, services, containers, jobs,
//! enrichment data (`_pods`, `_warnings`) and gateway provenance. Every function is nil-safe:
//! a missing object or field gives an empty answer, never an error.

use serde_json::Value;

use super::Entry;
use super::args::{Result, exactly, last, string, text};
use crate::labels;
use crate::template::Env;
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

pub const WORKLOADS: &[Entry] = &[
    Entry {
        name: "replicasReady",
        func: replicas_ready,
        usage: "replicasReady OBJ",
        doc: "status.readyReplicas reached spec.replicas",
    },
    Entry {
        name: "allReplicasReady",
        func: all_replicas_ready,
        usage: "allReplicasReady OBJ",
        doc: "ready, updated and available replicas all reached spec.replicas (at least 1)",
    },
    Entry {
        name: "rolloutComplete",
        func: rollout_complete,
        usage: "rolloutComplete OBJ",
        doc: "the latest generation is observed and fully updated and available",
    },
    Entry {
        name: "desiredReplicas",
        func: desired_replicas,
        usage: "desiredReplicas OBJ",
        doc: "spec.replicas (1 when unset)",
    },
    Entry {
        name: "readyReplicas",
        func: ready_replicas,
        usage: "readyReplicas OBJ",
        doc: "status.readyReplicas",
    },
    Entry {
        name: "availableReplicas",
        func: available_replicas,
        usage: "availableReplicas OBJ",
        doc: "status.availableReplicas",
    },
    Entry {
        name: "updatedReplicas",
        func: updated_replicas,
        usage: "updatedReplicas OBJ",
        doc: "status.updatedReplicas",
    },
    Entry {
        name: "serviceClusterIP",
        func: service_cluster_ip,
        usage: "serviceClusterIP SVC",
        doc: "spec.clusterIP",
    },
    Entry {
        name: "serviceNodePort",
        func: service_node_port,
        usage: "serviceNodePort SVC",
        doc: "nodePort of the first port (0 when none)",
    },
    Entry {
        name: "serviceLoadBalancerIP",
        func: service_lb_ip,
        usage: "serviceLoadBalancerIP SVC",
        doc: "the first load-balancer ingress IP",
    },
    Entry {
        name: "serviceLoadBalancerHost",
        func: service_lb_host,
        usage: "serviceLoadBalancerHost SVC",
        doc: "the first load-balancer ingress hostname",
    },
    Entry {
        name: "endpointsReady",
        func: endpoints_ready,
        usage: "endpointsReady ENDPOINTS",
        doc: "some subset has a ready address",
    },
    Entry {
        name: "containerImage",
        func: container_image,
        usage: "containerImage OBJ",
        doc: "image of the first container (pods, workloads, jobs, cronjobs)",
    },
    Entry {
        name: "containerEnv",
        func: container_env,
        usage: "containerEnv NAME OBJ",
        doc: "value of env var NAME in the first container",
    },
    Entry {
        name: "containerPort",
        func: container_port,
        usage: "containerPort OBJ",
        doc: "the first container's first port (0 when none)",
    },
    Entry {
        name: "containerPortByName",
        func: container_port_by_name,
        usage: "containerPortByName NAME OBJ",
        doc: "the port named NAME in any container",
    },
    Entry {
        name: "containerPorts",
        func: container_ports,
        usage: "containerPorts OBJ",
        doc: "every container port number",
    },
    Entry {
        name: "containerCount",
        func: container_count,
        usage: "containerCount OBJ",
        doc: "number of containers",
    },
    Entry {
        name: "jobSucceeded",
        func: job_succeeded,
        usage: "jobSucceeded JOB",
        doc: "the Job completed (condition Complete or status.succeeded > 0)",
    },
    Entry {
        name: "jobFailed",
        func: job_failed,
        usage: "jobFailed JOB",
        doc: "the Job failed (condition Failed)",
    },
    Entry {
        name: "jobActive",
        func: job_active,
        usage: "jobActive JOB",
        doc: "the Job has active pods",
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
fn at<'a>(value: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().try_fold(value, |v, key| v.get(key)).unwrap_or(&NULL)
}

fn obj<'a>(args: &[&'a Value]) -> Result<&'a Value> {
    exactly(args, 1)?;
    Ok(args[0])
}

fn keyed<'a>(args: &[&'a Value]) -> Result<(String, &'a Value)> {
    exactly(args, 2)?;
    Ok((text(args, 0).into_owned(), args[1]))
}

fn int_at(value: &Value, path: &[&str]) -> i64 {
    as_i64(at(value, path)).unwrap_or(0)
}

fn text_at(value: &Value, path: &[&str]) -> Value {
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

fn condition_true(value: &Value, kind: &str) -> bool {
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
fn get_annotation(_: &Env<'_>, args: &[&Value]) -> Result {
    let (key, value) = keyed(args)?;
    Ok(text_at(value, &["metadata", "annotations", &key]))
}
fn has_annotation(_: &Env<'_>, args: &[&Value]) -> Result {
    let (key, value) = keyed(args)?;
    Ok(Value::Bool(!at(value, &["metadata", "annotations", &key]).is_null()))
}

fn desired(value: &Value) -> i64 {
    as_i64(at(value, &["spec", "replicas"])).unwrap_or(1)
}
fn replicas_ready(_: &Env<'_>, args: &[&Value]) -> Result {
    let value = obj(args)?;
    Ok(Value::Bool(
        truthy(value) && int_at(value, &["status", "readyReplicas"]) >= desired(value),
    ))
}
fn all_replicas_ready(_: &Env<'_>, args: &[&Value]) -> Result {
    let value = obj(args)?;
    let want = desired(value);
    let all = ["readyReplicas", "updatedReplicas", "availableReplicas"]
        .iter()
        .all(|f| int_at(value, &["status", f]) >= want);
    Ok(Value::Bool(truthy(value) && want > 0 && all))
}
fn rollout_complete(_: &Env<'_>, args: &[&Value]) -> Result {
    let value = obj(args)?;
    let want = desired(value);
    let observed = int_at(value, &["status", "observedGeneration"]) >= int_at(value, &["metadata", "generation"]);
    let updated = int_at(value, &["status", "updatedReplicas"]) >= want;
    let available = int_at(value, &["status", "availableReplicas"]) >= want;
    let total = int_at(value, &["status", "replicas"]);
    Ok(Value::Bool(
        truthy(value) && observed && updated && available && total <= want,
    ))
}
fn desired_replicas(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(desired(obj(args)?)))
}
fn ready_replicas(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(int_at(obj(args)?, &["status", "readyReplicas"])))
}
fn available_replicas(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(int_at(obj(args)?, &["status", "availableReplicas"])))
}
fn updated_replicas(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(int_at(obj(args)?, &["status", "updatedReplicas"])))
}
fn service_cluster_ip(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(obj(args)?, &["spec", "clusterIP"]))
}
fn service_node_port(_: &Env<'_>, args: &[&Value]) -> Result {
    let port = at(obj(args)?, &["spec", "ports"])
        .get(0)
        .map_or(0, |p| int_at(p, &["nodePort"]));
    Ok(Value::from(port))
}
fn lb_ingress(value: &Value, field: &str) -> Value {
    at(value, &["status", "loadBalancer", "ingress"])
        .get(0)
        .map_or(string(""), |i| text_at(i, &[field]))
}
fn service_lb_ip(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(lb_ingress(obj(args)?, "ip"))
}
fn service_lb_host(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(lb_ingress(obj(args)?, "hostname"))
}
fn endpoints_ready(_: &Env<'_>, args: &[&Value]) -> Result {
    let subsets = at(obj(args)?, &["subsets"]).as_array().cloned().unwrap_or_default();
    Ok(Value::Bool(subsets.iter().any(|s| {
        s.get("addresses")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
    })))
}

/// The container list of a pod, a workload's pod template, or a CronJob's job template.
fn containers(value: &Value) -> Vec<Value> {
    [
        &["spec", "containers"][..],
        &["spec", "template", "spec", "containers"],
        &["spec", "jobTemplate", "spec", "template", "spec", "containers"],
    ]
    .iter()
    .find_map(|path| at(value, path).as_array().cloned())
    .unwrap_or_default()
}
fn container_image(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(containers(obj(args)?)
        .first()
        .map_or(string(""), |c| text_at(c, &["image"])))
}
fn container_env(_: &Env<'_>, args: &[&Value]) -> Result {
    let (key, value) = keyed(args)?;
    let first = containers(value).into_iter().next().unwrap_or(Value::Null);
    let env = at(&first, &["env"]).as_array().cloned().unwrap_or_default();
    Ok(env
        .iter()
        .find(|e| e.get("name").and_then(Value::as_str) == Some(&key))
        .map_or(string(""), |e| text_at(e, &["value"])))
}
fn ports(value: &Value) -> Vec<Value> {
    containers(value)
        .iter()
        .flat_map(|c| at(c, &["ports"]).as_array().cloned().unwrap_or_default())
        .collect()
}
fn container_port(_: &Env<'_>, args: &[&Value]) -> Result {
    let first = containers(obj(args)?).into_iter().next().unwrap_or(Value::Null);
    Ok(Value::from(
        at(&first, &["ports"])
            .get(0)
            .map_or(0, |p| int_at(p, &["containerPort"])),
    ))
}
fn container_port_by_name(_: &Env<'_>, args: &[&Value]) -> Result {
    let (key, value) = keyed(args)?;
    let port = ports(value)
        .iter()
        .find(|p| p.get("name").and_then(Value::as_str) == Some(&key))
        .map_or(0, |p| int_at(p, &["containerPort"]));
    Ok(Value::from(port))
}
fn container_ports(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Array(
        ports(obj(args)?)
            .iter()
            .map(|p| Value::from(int_at(p, &["containerPort"])))
            .collect(),
    ))
}
fn container_count(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(containers(obj(args)?).len()))
}
fn job_succeeded(_: &Env<'_>, args: &[&Value]) -> Result {
    let value = obj(args)?;
    Ok(Value::Bool(
        condition_true(value, "Complete") || int_at(value, &["status", "succeeded"]) > 0,
    ))
}
fn job_failed(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(condition_true(obj(args)?, "Failed")))
}
fn job_active(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(int_at(obj(args)?, &["status", "active"]) > 0))
}

fn pods(value: &Value) -> Vec<Value> {
    at(value, &["_pods"]).as_array().cloned().unwrap_or_default()
}
fn warnings(value: &Value) -> Vec<Value> {
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
fn container_statuses(pod: &Value) -> Vec<Value> {
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
