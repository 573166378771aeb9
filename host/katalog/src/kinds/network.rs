//! Services, Ingresses and NetworkPolicies: how a CR's pods are reached, and by whom.

use crate::error::Error;
use serde_json::{Value, json};

use super::shorthand::*;
use super::{KindSpec, Shorthand};

pub(super) const SERVICES: KindSpec = KindSpec {
    key: "services",
    resource: "services",
    suffix: Some("svc"),
    api_version: "v1",
    kind: "Service",
    namespaced: true,
    pod: false,
    fields: &[
        "type",
        "headless",
        "protocol",
        "port",
        "targetPort",
        "nodePort",
        "selector",
        "ports",
    ],
    render: render_services,
};

fn render_services(s: &Shorthand<'_>) -> Result<Value, Error> {
    let port = int(s.fields.get("port"), "port")?.unwrap_or(80);
    let target = match s.fields.get("targetPort") {
        Some(Value::String(s)) if s.parse::<i64>().is_err() && !s.is_empty() => json!(s),
        other => json!(int(other, "targetPort")?.unwrap_or(port)),
    };
    let protocol = s.fields.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
    let mut service_port = json!({"port": port, "targetPort": target, "protocol": protocol});
    if let Some(node_port) = int(s.fields.get("nodePort"), "nodePort")? {
        service_port["nodePort"] = json!(node_port);
    }
    let mut spec = json!({
        "type": s.get("type").unwrap_or_else(|| json!("ClusterIP")),
        "selector": s.get("selector").unwrap_or_else(|| pod_labels(s.cr)),
        "ports": s.get("ports").unwrap_or_else(|| json!([service_port])),
    });
    if s.fields.get("headless") == Some(&json!(true)) {
        spec["clusterIP"] = json!("None");
    }
    Ok(json!({"spec": spec}))
}

pub(super) const INGRESSES: KindSpec = KindSpec {
    key: "ingresses",
    resource: "ingresses",
    suffix: Some("ingress"),
    api_version: "networking.k8s.io/v1",
    kind: "Ingress",
    namespaced: true,
    pod: false,
    fields: &[
        "ingressClassName",
        "host",
        "path",
        "pathType",
        "serviceName",
        "servicePort",
        "port",
        "tls",
        "rules",
    ],
    render: render_ingresses,
};

fn render_ingresses(s: &Shorthand<'_>) -> Result<Value, Error> {
    let mut spec = json!({});
    copy(s.fields, &mut spec, &["ingressClassName", "tls", "rules"]);
    if spec.get("rules").is_none() {
        let port = int(s.fields.get("servicePort").or(s.fields.get("port")), "servicePort")?.unwrap_or(80);
        let service = s
            .get("serviceName")
            .unwrap_or_else(|| json!(default_name("services", s.cr)));
        let mut rule = json!({"http": {"paths": [{
            "path": s.get("path").unwrap_or_else(|| json!("/")),
            "pathType": s.get("pathType").unwrap_or_else(|| json!("Prefix")),
            "backend": {"service": {"name": service, "port": {"number": port}}},
        }]}});
        if let Some(host) = s.get("host") {
            rule["host"] = host;
        }
        spec["rules"] = json!([rule]);
    }
    Ok(json!({"spec": spec}))
}

pub(super) const NETWORK_POLICIES: KindSpec = KindSpec {
    key: "networkPolicies",
    resource: "networkpolicies",
    suffix: Some("netpol"),
    api_version: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    namespaced: true,
    pod: false,
    fields: &["podSelector", "policyTypes", "ingress", "egress", "profile"],
    render: render_network_policies,
};

fn render_network_policies(s: &Shorthand<'_>) -> Result<Value, Error> {
    let selected = s.get("podSelector").map(selector);
    let mut spec = json!({"podSelector": selected.unwrap_or_else(|| json!({"matchLabels": pod_labels(s.cr)}))});
    copy(s.fields, &mut spec, &["policyTypes"]);
    for key in ["ingress", "egress"] {
        if let Some(rules) = s.get(key) {
            spec[key] = policy_rules(rules);
        }
    }
    Ok(json!({"spec": spec}))
}
