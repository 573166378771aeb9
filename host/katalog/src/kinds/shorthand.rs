//! What a kind's renderer reads ([`Shorthand`]), and the expansions kinds share: the pod
//! spec of every workload (container, probes, env), selectors, integers and percentages as
//! Kubernetes takes them.

use crate::error::Error;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::KindSpec;
pub(super) use super::default_name;

/// One entry's rendered fields, for its kind's renderer.
pub struct Shorthand<'a> {
    pub kind: &'a KindSpec,
    /// The kind-specific fields, their templates rendered.
    pub fields: &'a Map<String, Value>,
    /// The owning CR's name and namespace.
    pub cr: &'a str,
    pub cr_namespace: &'a str,
    /// Makes a certificate for a Secret's `tls` (its spec, and its validity when the entry
    /// gives one): the Secret's data. The runtime's is `orkestra_effects::tls::generate`;
    /// the Katalog crate itself stays free of crypto.
    pub certify: &'a Certify,
}

/// A certificate maker: the `tls` spec and a validity in, a Secret's data out.
pub type Certify = dyn Fn(&Value, Option<Duration>) -> Result<Map<String, Value>, String>;

impl Shorthand<'_> {
    /// A field that is set (not null).
    pub fn get(&self, key: &str) -> Option<Value> {
        self.fields.get(key).cloned().filter(|v| !v.is_null())
    }
}

/// A rendered string or number as an integer.
pub(super) fn int(value: Option<&Value>, field: &str) -> Result<Option<i64>, Error> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(v) => orkestra_expr::template::value::as_i64(v)
            .map(Some)
            .ok_or_else(|| Error::Render(format!("{field}: {v} is not an integer"))),
    }
}

/// The pod spec of a workload: one container named after the workload.
pub(super) fn pod_spec(fields: &Map<String, Value>, name: &str, restart: Option<&str>) -> Result<Value, Error> {
    let mut container = json!({
        "name": fields.get("containerName").and_then(Value::as_str).unwrap_or(name),
        "image": fields.get("image").cloned().ok_or_else(|| Error::Render("image is required".into()))?,
    });
    copy(
        fields,
        &mut container,
        &[
            "command",
            "args",
            "resources",
            "volumeMounts",
            "imagePullPolicy",
            "securityContext",
        ],
    );
    if let Some(dir) = fields.get("workingDirectory") {
        container["workingDir"] = dir.clone();
    }
    let port = int(fields.get("port"), "port")?;
    if let Some(port) = port {
        let protocol = fields.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
        container["ports"] = json!([{"containerPort": port, "protocol": protocol}]);
    }
    if let Some(probes) = fields.get("probes").filter(|p| !p.is_null()) {
        let probes = probes
            .as_object()
            .ok_or_else(|| Error::Render("probes: must be a map of startup, liveness and readiness".into()))?;
        for (which, spec) in probes {
            let key = match which.as_str() {
                "startup" => "startupProbe",
                "liveness" => "livenessProbe",
                "readiness" => "readinessProbe",
                other => {
                    return Err(Error::Render(format!(
                        "probes.{other}: not a probe (startup, liveness, readiness)"
                    )));
                }
            };
            container[key] = probe(spec, port).map_err(|e| Error::Render(format!("probes.{which}: {e}")))?;
        }
    }
    if let Some(env) = fields.get("env") {
        container["env"] = env_list(env);
    }
    if let Some(env_from) = fields.get("envFrom") {
        // Katalog shape: {secretRef: [{name}], configMapRef: [{name}]}; Kubernetes: a list.
        // A reference may be the bare name (`configMapRef: app-config`), as upstream writes.
        let named = |item: &Value| match item {
            Value::String(name) => json!({"name": name}),
            other => other.clone(),
        };
        let mut list = Vec::new();
        for key in ["secretRef", "configMapRef"] {
            for item in env_from[key].as_array().into_iter().flatten() {
                list.push(json!({ key: named(item) }));
            }
        }
        for item in env_from.as_array().into_iter().flatten() {
            let mut item = item.clone();
            for key in ["secretRef", "configMapRef"] {
                if let Some(reference) = item.get(key).map(named) {
                    item[key] = reference;
                }
            }
            list.push(item);
        }
        container["envFrom"] = Value::Array(list);
    }
    let mut spec = json!({"containers": [container]});
    copy(
        fields,
        &mut spec,
        &[
            "volumes",
            "nodeSelector",
            "tolerations",
            "affinity",
            "serviceAccountName",
        ],
    );
    if let Some(secrets) = fields.get("imagePullSecrets").and_then(Value::as_array) {
        let list: Vec<Value> = secrets
            .iter()
            .map(|s| if s.is_string() { json!({"name": s}) } else { s.clone() })
            .collect();
        spec["imagePullSecrets"] = Value::Array(list);
    }
    if let Some(podsec) = fields.get("podSecurity").filter(|v| v.is_object()) {
        spec["securityContext"] = podsec.clone();
    }
    if let Some(restart) = fields.get("restartPolicy").and_then(Value::as_str).or(restart) {
        spec["restartPolicy"] = json!(restart);
    }
    Ok(spec)
}

/// Probe timing fields, copied as integers.
const PROBE_TIMING: [&str; 5] = [
    "initialDelaySeconds",
    "periodSeconds",
    "failureThreshold",
    "successThreshold",
    "timeoutSeconds",
];

/// One probe: `type` http (the default with a `path`), tcp (the default otherwise), exec
/// (with `command`) or grpc, against `port` or the container's port, with its timing.
pub(super) fn probe(spec: &Value, container_port: Option<i64>) -> Result<Value, Error> {
    let spec = spec
        .as_object()
        .ok_or_else(|| Error::Render("must be a map (type, path, port, timing)".into()))?;
    let text = |key: &str| spec.get(key).and_then(Value::as_str);
    let kind = text("type").unwrap_or(if spec.contains_key("path") {
        "http"
    } else if spec.contains_key("command") {
        "exec"
    } else {
        "tcp"
    });
    let port = || {
        int(spec.get("port"), "port")?
            .or(container_port)
            .ok_or_else(|| Error::Render("port: required, as the container declares none".into()))
    };
    let mut probe = match kind {
        "http" => {
            let mut get = json!({"path": text("path").unwrap_or("/"), "port": port()?});
            if let Some(scheme) = text("scheme") {
                get["scheme"] = json!(scheme.to_uppercase());
            }
            json!({ "httpGet": get })
        }
        "tcp" => json!({"tcpSocket": {"port": port()?}}),
        "grpc" => json!({"grpc": {"port": port()?}}),
        "exec" => {
            json!({"exec": {"command": spec.get("command").cloned().ok_or_else(|| Error::Render("command: required for an exec probe".into()))?}})
        }
        other => {
            return Err(Error::Render(format!(
                "type: {other} is not a probe type (http, tcp, grpc, exec)"
            )));
        }
    };
    for key in PROBE_TIMING {
        if let Some(n) = int(spec.get(key), key)? {
            probe[key] = json!(n);
        }
    }
    Ok(probe)
}

/// An integer, or a percentage kept as text (Kubernetes' IntOrString).
pub(super) fn int_or_percent(value: Option<&Value>, field: &str) -> Result<Option<Value>, Error> {
    match value {
        Some(Value::String(s)) if s.trim().ends_with('%') => Ok(Some(json!(s.trim()))),
        other => Ok(int(other, field)?.map(|n| json!(n))),
    }
}

/// A label selector: `{matchLabels}`/`{matchExpressions}` as written, or a bare map of
/// labels (as upstream writes selectors) as its `matchLabels`.
pub(super) fn selector(value: Value) -> Value {
    match value {
        Value::Object(map)
            if !map.is_empty() && !map.contains_key("matchLabels") && !map.contains_key("matchExpressions") =>
        {
            json!({ "matchLabels": map })
        }
        other => other,
    }
}

/// NetworkPolicy peers (`from`/`to`) with their selectors read as [`selector`] does.
pub(super) fn policy_rules(rules: Value) -> Value {
    let Value::Array(rules) = rules else { return rules };
    let peers = |peers: &Value| -> Value {
        let Value::Array(peers) = peers else {
            return peers.clone();
        };
        Value::Array(
            peers
                .iter()
                .map(|peer| {
                    let mut peer = peer.clone();
                    for key in ["podSelector", "namespaceSelector"] {
                        if let Some(found) = peer.get_mut(key) {
                            *found = selector(found.take());
                        }
                    }
                    peer
                })
                .collect(),
        )
    };
    Value::Array(
        rules
            .into_iter()
            .map(|mut rule| {
                for key in ["from", "to"] {
                    if let Some(found) = rule.get(key).map(peers) {
                        rule[key] = found;
                    }
                }
                rule
            })
            .collect(),
    )
}

/// A StatefulSet's `volumeClaimTemplates`: a Kubernetes claim as written, or the shorthand
/// `{name, storage, accessModes, storageClassName}`.
pub(super) fn claim_templates(templates: &Value) -> Result<Value, Error> {
    let templates = templates
        .as_array()
        .ok_or_else(|| Error::Render("volumeClaimTemplates: must be a list".into()))?;
    let claims = templates
        .iter()
        .enumerate()
        .map(|(i, template)| {
            if template.get("metadata").is_some() || template.get("spec").is_some() {
                return Ok(template.clone());
            }
            let at = |field: &str| format!("volumeClaimTemplates[{i}].{field}");
            let name = template
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| Error::Render(at("name") + ": required"))?;
            let storage = template
                .get("storage")
                .cloned()
                .ok_or_else(|| Error::Render(at("storage") + ": required"))?;
            let mut spec = json!({
                "accessModes": template.get("accessModes").cloned().unwrap_or_else(|| json!(["ReadWriteOnce"])),
                "resources": {"requests": {"storage": storage}},
            });
            if let Some(class) = template.get("storageClassName") {
                spec["storageClassName"] = class.clone();
            }
            Ok(json!({"metadata": {"name": name}, "spec": spec}))
        })
        .collect::<Result<Vec<_>, Error>>()?;
    Ok(Value::Array(claims))
}

/// `env` as Kubernetes takes it: a list stays; upstream's map of name to `{value}`,
/// `{secretKeyRef}`, `{configMapKeyRef}` (or a bare value) becomes the list.
pub(super) fn env_list(env: &Value) -> Value {
    let Value::Object(by_name) = env else {
        return env.clone();
    };
    let items = by_name
        .iter()
        .map(|(name, source)| {
            let mut item = match source {
                Value::Object(fields) if ["value", "valueFrom"].iter().any(|k| fields.contains_key(*k)) => {
                    source.clone()
                }
                Value::Object(_) => json!({"valueFrom": source}),
                Value::String(text) => json!({"value": text}),
                other => json!({"value": other.to_string()}),
            };
            item["name"] = json!(name);
            item
        })
        .collect();
    Value::Array(items)
}

/// Labels that select the pods of a CR's workloads (and that its Services select by default).
pub(super) fn pod_labels(cr: &str) -> Value {
    json!({"app": cr})
}

/// Copies the listed fields, when present, into `target` unchanged.
pub(super) fn copy(fields: &Map<String, Value>, target: &mut Value, keys: &[&str]) {
    for key in keys {
        if let Some(value) = fields.get(*key).filter(|v| !v.is_null()) {
            target[*key] = value.clone();
        }
    }
}

/// Map values as strings (ConfigMap and Secret data).
pub(super) fn stringify(value: Option<Value>) -> Value {
    match value {
        Some(Value::Object(map)) => Value::Object(
            map.into_iter()
                .map(|(k, v)| {
                    (
                        k,
                        Value::String(orkestra_expr::template::value::display(&v).into_owned()),
                    )
                })
                .collect(),
        ),
        _ => json!({}),
    }
}
