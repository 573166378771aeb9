//! Workloads that run pods: Deployments, StatefulSets and ReplicaSets from `image`, `replicas`
//! and `port` (with probes, rollouts and claim templates), and bare Pods.

use crate::error::Error;
use serde_json::{Value, json};

use super::shorthand::*;
use super::{KindSpec, Shorthand};

pub(super) const DEPLOYMENTS: KindSpec = KindSpec {
    key: "deployments",
    resource: "deployments",
    suffix: Some("deployment"),
    api_version: "apps/v1",
    kind: "Deployment",
    namespaced: true,
    pod: true,
    fields: &["replicas", "port", "protocol", "probes", "rollingUpdate"],
    render: render_replicated,
};

fn render_replicated(s: &Shorthand<'_>) -> Result<Value, Error> {
    let replicas = int(s.fields.get("replicas"), "replicas")?.unwrap_or(1);
    let mut spec = json!({
        "replicas": replicas,
        "selector": {"matchLabels": pod_labels(s.cr)},
        "template": {"metadata": {"labels": pod_labels(s.cr)}, "spec": pod_spec(s.fields, s.cr, None)?},
    });
    if s.kind.key == "statefulSets" {
        spec["serviceName"] = s.get("serviceName").unwrap_or_else(|| json!(s.cr));
        if let Some(templates) = s.get("volumeClaimTemplates") {
            spec["volumeClaimTemplates"] = claim_templates(&templates)?;
        }
    }
    if let Some(update) = s.get("rollingUpdate") {
        let surge = int_or_percent(update.get("maxSurge"), "rollingUpdate.maxSurge")?;
        let unavailable = int_or_percent(update.get("maxUnavailable"), "rollingUpdate.maxUnavailable")?;
        match s.kind.key {
            "deployments" => {
                let mut rolling = json!({});
                if let Some(surge) = surge {
                    rolling["maxSurge"] = surge;
                }
                if let Some(unavailable) = unavailable {
                    rolling["maxUnavailable"] = unavailable;
                }
                spec["strategy"] = json!({"type": "RollingUpdate", "rollingUpdate": rolling});
            }
            // One pod at a time, in order; a StatefulSet has no surge, and takes no
            // more than one pod down unless maxUnavailable says more (0 is that one).
            "statefulSets" => {
                let mut strategy = json!({"type": "RollingUpdate"});
                if let Some(unavailable) = unavailable.filter(|u| u != &json!(0)) {
                    strategy["rollingUpdate"] = json!({ "maxUnavailable": unavailable });
                }
                spec["updateStrategy"] = strategy;
            }
            _ => {}
        }
    }
    Ok(json!({"spec": spec}))
}

pub(super) const STATEFUL_SETS: KindSpec = KindSpec {
    key: "statefulSets",
    resource: "statefulsets",
    suffix: Some("statefulset"),
    api_version: "apps/v1",
    kind: "StatefulSet",
    namespaced: true,
    pod: true,
    fields: &[
        "replicas",
        "port",
        "protocol",
        "probes",
        "serviceName",
        "volumeClaimTemplates",
        "rollingUpdate",
    ],
    render: render_replicated,
};

pub(super) const REPLICA_SETS: KindSpec = KindSpec {
    key: "replicaSets",
    resource: "replicasets",
    suffix: Some("replicaset"),
    api_version: "apps/v1",
    kind: "ReplicaSet",
    namespaced: true,
    pod: true,
    fields: &["replicas", "port", "protocol", "probes"],
    render: render_replicated,
};

pub(super) const PODS: KindSpec = KindSpec {
    key: "pods",
    resource: "pods",
    suffix: Some("pod"),
    api_version: "v1",
    kind: "Pod",
    namespaced: true,
    pod: true,
    fields: &["port", "protocol", "probes", "restartPolicy"],
    render: render_pods,
};

fn render_pods(s: &Shorthand<'_>) -> Result<Value, Error> {
    Ok(json!({"metadata": {"labels": pod_labels(s.cr)}, "spec": pod_spec(s.fields, s.cr, None)?}))
}
