//! HorizontalPodAutoscalers and PodDisruptionBudgets of a CR's workloads.

use crate::error::Error;
use serde_json::{Value, json};

use super::shorthand::*;
use super::{KindSpec, Shorthand};

pub(super) const HPA: KindSpec = KindSpec {
    key: "hpa",
    resource: "horizontalpodautoscalers",
    suffix: Some("hpa"),
    api_version: "autoscaling/v2",
    kind: "HorizontalPodAutoscaler",
    namespaced: true,
    pod: false,
    fields: &[
        "scaleTargetRef",
        "target",
        "minReplicas",
        "maxReplicas",
        "metrics",
        "targetCPUUtilization",
        "targetMemoryUtilization",
        "targetCPUUtilizationPercentage",
        "targetMemoryUtilizationPercentage",
        "behavior",
    ],
    render: render_hpa,
};

fn render_hpa(s: &Shorthand<'_>) -> Result<Value, Error> {
    let target = s.get("scaleTargetRef").unwrap_or_else(|| {
        let name = s
            .get("target")
            .unwrap_or_else(|| json!(default_name("deployments", s.cr)));
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": name})
    });
    let mut metrics: Vec<Value> = s.get("metrics").and_then(|m| m.as_array().cloned()).unwrap_or_default();
    for (key, resource) in [("targetCPUUtilization", "cpu"), ("targetMemoryUtilization", "memory")] {
        // Upstream also writes `...Percentage`.
        let given = s.fields.get(key).or_else(|| s.fields.get(&format!("{key}Percentage")));
        if let Some(percent) = int(given, key)? {
            metrics.push(json!({"type": "Resource", "resource": {
                "name": resource, "target": {"type": "Utilization", "averageUtilization": percent},
            }}));
        }
    }
    let max = int(s.fields.get("maxReplicas"), "maxReplicas")?
        .ok_or_else(|| Error::Render("maxReplicas is required".into()))?;
    let mut spec = json!({
        "scaleTargetRef": target,
        "minReplicas": int(s.fields.get("minReplicas"), "minReplicas")?.unwrap_or(1),
        "maxReplicas": max,
    });
    if !metrics.is_empty() {
        spec["metrics"] = Value::Array(metrics);
    }
    copy(s.fields, &mut spec, &["behavior"]);
    Ok(json!({"spec": spec}))
}

pub(super) const PDB: KindSpec = KindSpec {
    key: "pdb",
    resource: "poddisruptionbudgets",
    suffix: Some("pdb"),
    api_version: "policy/v1",
    kind: "PodDisruptionBudget",
    namespaced: true,
    pod: false,
    fields: &["minAvailable", "maxUnavailable", "selector", "behavior", "profile"],
    render: render_pdb,
};

fn render_pdb(s: &Shorthand<'_>) -> Result<Value, Error> {
    let selected = s.get("selector").map(selector);
    let mut spec = json!({"selector": selected.unwrap_or_else(|| json!({"matchLabels": pod_labels(s.cr)}))});
    for key in ["minAvailable", "maxUnavailable"] {
        // On the entry, or in `behavior` (where upstream's profiles put it).
        let given = s
            .fields
            .get(key)
            .or_else(|| s.fields.get("behavior").and_then(|b| b.get(key)));
        if let Some(value) = int_or_percent(given, key)? {
            spec[key] = value;
        }
    }
    Ok(json!({"spec": spec}))
}
