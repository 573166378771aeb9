//! Notes on what `enrich` embeds on a child (`_owner`, `_replicaSets`, `_pvcs`, `_pv`,
//! `_storageClass`, `_endpoints`, `_backingPods`, `_node`, `_currentMetrics`,
//! `_scaleTarget`, `_activeJobs`, `_lastJob`, `_loadBalancerIPs`, `_tlsSecrets`) and on the
//! child's own fields they summarise. Nil-safe like every note: a child without the data
//! gives an empty answer.

use serde_json::Value;

use super::args::{Result, string};
use super::entry::Entry;
use super::kubernetes::{at, condition_true, int_at, obj, text_at};
use crate::template::env::Env;
use crate::template::value::{display, truthy};

macro_rules! note {
    ($name:literal, $func:ident, $doc:literal) => {
        Entry {
            name: $name,
            func: $func,
            usage: concat!($name, " OBJ"),
            doc: $doc,
        }
    };
}

pub const FUNCS: &[Entry] = &[
    note!(
        "replicaSetOwnerName",
        owner_name,
        "name of the ReplicaSet's controller (enrich: owner)"
    ),
    note!(
        "replicaSetOwnerKind",
        owner_kind,
        "kind of the ReplicaSet's controller (enrich: owner)"
    ),
    note!(
        "deploymentReplicaSets",
        replica_sets,
        "names of the Deployment's ReplicaSets (enrich: replicasets)"
    ),
    note!(
        "oldDeploymentReplicaSets",
        old_replica_sets,
        "names of its ReplicaSets other than the newest revision"
    ),
    note!(
        "statefulSetPVCCount",
        pvc_count,
        "number of the StatefulSet's claims found (enrich: pvcs)"
    ),
    note!("pvcBound", pvc_bound, "status.phase is Bound"),
    note!("pvcPhase", pvc_phase, "status.phase"),
    note!(
        "pvcCapacity",
        pvc_capacity,
        "status.capacity.storage, else the requested size"
    ),
    note!(
        "pvcStorageClass",
        pvc_storage_class,
        "spec.storageClassName (or the enriched _storageClass)"
    ),
    note!("pvcAccessModes", pvc_access_modes, "spec.accessModes, comma-separated"),
    note!(
        "pvcVolumeMode",
        pvc_volume_mode,
        "volumeMode of the bound volume (enrich: pvc)"
    ),
    note!(
        "pvcProvisioner",
        pvc_provisioner,
        "the bound volume's provisioned-by annotation (enrich: pvc)"
    ),
    note!(
        "pvcStorageClassProvisioner",
        class_provisioner,
        "_storageClass.provisioner (enrich: storageclass)"
    ),
    note!(
        "pvcStorageClassReclaimPolicy",
        class_reclaim,
        "_storageClass.reclaimPolicy (enrich: storageclass)"
    ),
    note!(
        "pvReclaimPolicy",
        pv_reclaim,
        "the bound volume's reclaim policy, or the volume's own"
    ),
    note!(
        "pvAccessModes",
        pv_access_modes,
        "the bound volume's access modes, or the volume's own"
    ),
    note!(
        "hasEndpoints",
        has_endpoints,
        "_endpoints holds a ready address (enrich: endpoints)"
    ),
    note!(
        "serviceEndpoints",
        service_endpoints,
        "ready endpoints as ip:port, comma-separated"
    ),
    note!("serviceEndpointCount", endpoint_count, "number of ready endpoints"),
    note!(
        "serviceFirstEndpoint",
        first_endpoint,
        "the first ready endpoint as ip:port"
    ),
    note!(
        "backingPodCount",
        backing_pod_count,
        "pods the Service selects (enrich: backingpods)"
    ),
    note!("backingPodNames", backing_pod_names, "their names, comma-separated"),
    note!(
        "podNode",
        pod_node,
        "the node the pod runs on (enrich: node), else spec.nodeName"
    ),
    note!("podNodeZone", node_zone, "the node's zone label (enrich: node)"),
    note!("podNodeRegion", node_region, "the node's region label (enrich: node)"),
    note!(
        "podNodeInstanceType",
        node_instance_type,
        "the node's instance type label (enrich: node)"
    ),
    note!("hpaCurrentReplicas", hpa_current, "status.currentReplicas"),
    note!("hpaDesiredReplicas", hpa_desired, "status.desiredReplicas"),
    note!("hpaMinReplicas", hpa_min, "spec.minReplicas (1 when unset)"),
    note!("hpaMaxReplicas", hpa_max, "spec.maxReplicas"),
    note!(
        "hpaScaling",
        hpa_scaling,
        "ScalingActive and current differs from desired"
    ),
    note!("noteHPAScaling", hpa_scaling, "as hpaScaling"),
    note!(
        "hpaScalingActive",
        hpa_scaling_active,
        "condition ScalingActive is True"
    ),
    note!("noteHPAScalingActive", hpa_scaling_active, "as hpaScalingActive"),
    note!("hpaAbleToScale", hpa_able, "condition AbleToScale is True"),
    note!("hpaScalingLimited", hpa_limited, "condition ScalingLimited is True"),
    note!("hpaAtMax", hpa_at_max, "currentReplicas has reached maxReplicas"),
    note!(
        "hpaScaleTargetName",
        hpa_target_name,
        "name of the scale target (_scaleTarget, else spec)"
    ),
    note!("hpaScaleTargetKind", hpa_target_kind, "kind of the scale target"),
    note!(
        "hpaMetricTypes",
        hpa_metric_types,
        "types of _currentMetrics, comma-separated (enrich: hpa)"
    ),
    note!(
        "cronJobActive",
        cron_active,
        "the CronJob has a running Job (enrich: cronjob, else status.active)"
    ),
    note!(
        "cronJobLastRunTime",
        cron_last_run,
        "start time of its latest Job, else status.lastScheduleTime"
    ),
    note!(
        "cronJobLastSuccessTime",
        cron_last_success,
        "completion time of its latest successful Job"
    ),
    note!("ingressReady", ingress_ready, "a load-balancer address is assigned"),
    note!("ingressHasLoadBalancer", ingress_ready, "as ingressReady"),
    note!("ingressIP", ingress_ip, "the first load-balancer IP"),
    note!("ingressLoadBalancerIP", ingress_ip, "as ingressIP"),
    note!("ingressHost", ingress_host, "the first load-balancer hostname"),
    note!("ingressClassName", ingress_class, "spec.ingressClassName"),
    note!("ingressRules", ingress_rules, "hosts of spec.rules, comma-separated"),
    note!(
        "ingressTLSHosts",
        ingress_tls_hosts,
        "hosts of spec.tls, comma-separated"
    ),
    note!(
        "ingressLoadBalancerIPs",
        ingress_addresses,
        "every load-balancer IP and hostname, comma-separated"
    ),
    note!(
        "ingressTLSSecrets",
        ingress_tls_secrets,
        "names of the TLS Secrets found (enrich: ingress)"
    ),
    note!(
        "ingressTLSSecretCount",
        ingress_tls_secret_count,
        "number of TLS Secrets found (enrich: ingress)"
    ),
];

fn list(value: &Value, key: &str) -> Vec<Value> {
    at(value, &[key]).as_array().cloned().unwrap_or_default()
}

fn joined(items: impl Iterator<Item = String>) -> Value {
    string(items.filter(|s| !s.is_empty()).collect::<Vec<_>>().join(", "))
}

fn names(items: &[Value]) -> Value {
    joined(items.iter().map(|i| display(at(i, &["metadata", "name"])).into_owned()))
}

fn owner_name(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(obj(args)?, &["_owner", "name"]))
}
fn owner_kind(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(obj(args)?, &["_owner", "kind"]))
}

/// A ReplicaSet's rollout revision.
fn revision(set: &Value) -> i64 {
    at(set, &["metadata", "annotations", "deployment.kubernetes.io/revision"])
        .as_str()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}
fn replica_sets(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(names(&list(obj(args)?, "_replicaSets")))
}
fn old_replica_sets(_: &Env<'_>, args: &[&Value]) -> Result {
    let sets = list(obj(args)?, "_replicaSets");
    let newest = sets.iter().map(revision).max().unwrap_or(0);
    let old: Vec<Value> = sets.into_iter().filter(|s| revision(s) < newest).collect();
    Ok(names(&old))
}
fn pvc_count(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(list(obj(args)?, "_pvcs").len()))
}

fn pvc_bound(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(
        at(obj(args)?, &["status", "phase"]).as_str() == Some("Bound"),
    ))
}
fn pvc_phase(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(obj(args)?, &["status", "phase"]))
}
fn pvc_capacity(_: &Env<'_>, args: &[&Value]) -> Result {
    let claim = obj(args)?;
    let stored = at(claim, &["status", "capacity", "storage"]);
    Ok(match stored.is_null() {
        true => text_at(claim, &["spec", "resources", "requests", "storage"]),
        false => string(display(stored)),
    })
}
fn pvc_storage_class(_: &Env<'_>, args: &[&Value]) -> Result {
    let claim = obj(args)?;
    let named = at(claim, &["spec", "storageClassName"]);
    Ok(match named.is_null() {
        true => text_at(claim, &["_storageClass", "metadata", "name"]),
        false => string(display(named)),
    })
}
fn pvc_access_modes(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(modes(at(obj(args)?, &["spec", "accessModes"])))
}
fn modes(value: &Value) -> Value {
    joined(value.as_array().into_iter().flatten().map(|m| display(m).into_owned()))
}
fn pvc_volume_mode(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(obj(args)?, &["_pv", "spec", "volumeMode"]))
}
fn pvc_provisioner(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(
        obj(args)?,
        &["_pv", "metadata", "annotations", "pv.kubernetes.io/provisioned-by"],
    ))
}
fn class_provisioner(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(obj(args)?, &["_storageClass", "provisioner"]))
}
fn class_reclaim(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(obj(args)?, &["_storageClass", "reclaimPolicy"]))
}
/// The bound volume of a claim (`_pv`), or the object itself when it is a volume.
fn volume(value: &Value) -> &Value {
    match at(value, &["_pv"]) {
        Value::Null => value,
        bound => bound,
    }
}
fn pv_reclaim(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(volume(obj(args)?), &["spec", "persistentVolumeReclaimPolicy"]))
}
fn pv_access_modes(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(modes(at(volume(obj(args)?), &["spec", "accessModes"])))
}

/// The ready endpoints as `ip:port`.
fn endpoints(value: &Value) -> Vec<String> {
    list(value, "_endpoints")
        .iter()
        .filter(|e| e.get("ready") != Some(&Value::Bool(false)))
        .map(|e| match at(e, &["port"]) {
            Value::Null => display(at(e, &["ip"])).into_owned(),
            port => format!("{}:{}", display(at(e, &["ip"])), display(port)),
        })
        .collect()
}
fn has_endpoints(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(!endpoints(obj(args)?).is_empty()))
}
fn service_endpoints(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(joined(endpoints(obj(args)?).into_iter()))
}
fn endpoint_count(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(endpoints(obj(args)?).len()))
}
fn first_endpoint(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(string(endpoints(obj(args)?).into_iter().next().unwrap_or_default()))
}
fn backing_pod_count(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(list(obj(args)?, "_backingPods").len()))
}
fn backing_pod_names(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(names(&list(obj(args)?, "_backingPods")))
}

pub(super) fn pod_node(_: &Env<'_>, args: &[&Value]) -> Result {
    let pod = obj(args)?;
    let node = at(pod, &["_node", "name"]);
    Ok(match node.is_null() {
        true => text_at(pod, &["spec", "nodeName"]),
        false => string(display(node)),
    })
}
fn node_zone(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(obj(args)?, &["_node", "zone"]))
}
fn node_region(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(obj(args)?, &["_node", "region"]))
}
fn node_instance_type(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(obj(args)?, &["_node", "instanceType"]))
}

fn hpa_current(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(int_at(obj(args)?, &["status", "currentReplicas"])))
}
fn hpa_desired(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(int_at(obj(args)?, &["status", "desiredReplicas"])))
}
fn hpa_min(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(int_at(obj(args)?, &["spec", "minReplicas"]).max(1)))
}
fn hpa_max(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(int_at(obj(args)?, &["spec", "maxReplicas"])))
}
fn hpa_scaling(_: &Env<'_>, args: &[&Value]) -> Result {
    let hpa = obj(args)?;
    let moving = int_at(hpa, &["status", "currentReplicas"]) != int_at(hpa, &["status", "desiredReplicas"]);
    Ok(Value::Bool(condition_true(hpa, "ScalingActive") && moving))
}
fn hpa_scaling_active(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(condition_true(obj(args)?, "ScalingActive")))
}
fn hpa_able(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(condition_true(obj(args)?, "AbleToScale")))
}
fn hpa_limited(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(condition_true(obj(args)?, "ScalingLimited")))
}
fn hpa_at_max(_: &Env<'_>, args: &[&Value]) -> Result {
    let hpa = obj(args)?;
    let max = int_at(hpa, &["spec", "maxReplicas"]);
    Ok(Value::Bool(
        max > 0 && int_at(hpa, &["status", "currentReplicas"]) >= max,
    ))
}
/// `_scaleTarget` when enriched, else the spec's scaleTargetRef.
fn scale_target(hpa: &Value) -> &Value {
    match at(hpa, &["_scaleTarget"]) {
        Value::Null => at(hpa, &["spec", "scaleTargetRef"]),
        target => target,
    }
}
fn hpa_target_name(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(scale_target(obj(args)?), &["name"]))
}
fn hpa_target_kind(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(scale_target(obj(args)?), &["kind"]))
}
fn hpa_metric_types(_: &Env<'_>, args: &[&Value]) -> Result {
    let metrics = list(obj(args)?, "_currentMetrics");
    Ok(joined(metrics.iter().map(|m| display(at(m, &["type"])).into_owned())))
}

fn cron_active(_: &Env<'_>, args: &[&Value]) -> Result {
    let cron = obj(args)?;
    let enriched = !list(cron, "_activeJobs").is_empty();
    Ok(Value::Bool(enriched || truthy(at(cron, &["status", "active"]))))
}
fn cron_last_run(_: &Env<'_>, args: &[&Value]) -> Result {
    let cron = obj(args)?;
    let started = at(cron, &["_lastJob", "status", "startTime"]);
    Ok(match started.is_null() {
        true => text_at(cron, &["status", "lastScheduleTime"]),
        false => string(display(started)),
    })
}
fn cron_last_success(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(obj(args)?, &["_lastSuccessfulJob", "status", "completionTime"]))
}

fn balancers(ingress: &Value) -> Vec<Value> {
    at(ingress, &["status", "loadBalancer", "ingress"])
        .as_array()
        .cloned()
        .unwrap_or_default()
}
fn ingress_ready(_: &Env<'_>, args: &[&Value]) -> Result {
    let found = balancers(obj(args)?)
        .iter()
        .any(|b| truthy(at(b, &["ip"])) || truthy(at(b, &["hostname"])));
    Ok(Value::Bool(found))
}
fn first_balancer(ingress: &Value, key: &str) -> Value {
    let found = balancers(ingress)
        .iter()
        .find_map(|b| b.get(key).filter(|v| truthy(v)).cloned());
    string(found.as_ref().map(|v| display(v).into_owned()).unwrap_or_default())
}
fn ingress_ip(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(first_balancer(obj(args)?, "ip"))
}
fn ingress_host(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(first_balancer(obj(args)?, "hostname"))
}
fn ingress_class(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(obj(args)?, &["spec", "ingressClassName"]))
}
fn ingress_rules(_: &Env<'_>, args: &[&Value]) -> Result {
    let rules = at(obj(args)?, &["spec", "rules"])
        .as_array()
        .cloned()
        .unwrap_or_default();
    Ok(joined(rules.iter().map(|r| display(at(r, &["host"])).into_owned())))
}
fn ingress_tls_hosts(_: &Env<'_>, args: &[&Value]) -> Result {
    let tls = at(obj(args)?, &["spec", "tls"]).as_array().cloned().unwrap_or_default();
    let hosts = tls
        .iter()
        .flat_map(|t| t.get("hosts").and_then(Value::as_array).cloned().unwrap_or_default());
    Ok(joined(hosts.map(|h| display(&h).into_owned())))
}
fn ingress_addresses(_: &Env<'_>, args: &[&Value]) -> Result {
    let ingress = obj(args)?;
    let enriched = list(ingress, "_loadBalancerIPs");
    let addresses: Vec<String> = match enriched.is_empty() {
        false => enriched.iter().map(|a| display(a).into_owned()).collect(),
        true => balancers(ingress)
            .iter()
            .flat_map(|b| {
                [
                    display(at(b, &["ip"])).into_owned(),
                    display(at(b, &["hostname"])).into_owned(),
                ]
            })
            .collect(),
    };
    Ok(joined(addresses.into_iter()))
}
fn ingress_tls_secrets(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(names(&list(obj(args)?, "_tlsSecrets")))
}
fn ingress_tls_secret_count(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(list(obj(args)?, "_tlsSecrets").len()))
}
