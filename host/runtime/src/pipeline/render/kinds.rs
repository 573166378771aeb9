//! Each kind's shorthand fields expanded to its Kubernetes shape (a Deployment from `image`,
//! `replicas` and `port`, a Secret from `data` or a generated certificate, ...).

use serde_json::{Map, Value, json};

use orkestra_effects::tls;

use super::default_name;
use orkestra_katalog::KindSpec;

/// A rendered string or number as an integer.
fn int(value: Option<&Value>, field: &str) -> Result<Option<i64>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(v) => orkestra_expr::template::value::as_i64(v)
            .map(Some)
            .ok_or_else(|| format!("{field}: {v} is not an integer")),
    }
}

/// The pod spec of a workload: one container named after the workload.
fn pod_spec(fields: &Map<String, Value>, name: &str, restart: Option<&str>) -> Result<Value, String> {
    let mut container = json!({
        "name": fields.get("containerName").and_then(Value::as_str).unwrap_or(name),
        "image": fields.get("image").cloned().ok_or("image is required")?,
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
            .ok_or("probes: must be a map of startup, liveness and readiness")?;
        for (which, spec) in probes {
            let key = match which.as_str() {
                "startup" => "startupProbe",
                "liveness" => "livenessProbe",
                "readiness" => "readinessProbe",
                other => return Err(format!("probes.{other}: not a probe (startup, liveness, readiness)")),
            };
            container[key] = probe(spec, port).map_err(|e| format!("probes.{which}: {e}"))?;
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
fn probe(spec: &Value, container_port: Option<i64>) -> Result<Value, String> {
    let spec = spec.as_object().ok_or("must be a map (type, path, port, timing)")?;
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
            .ok_or_else(|| "port: required, as the container declares none".to_string())
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
            json!({"exec": {"command": spec.get("command").cloned().ok_or("command: required for an exec probe")?}})
        }
        other => return Err(format!("type: {other} is not a probe type (http, tcp, grpc, exec)")),
    };
    for key in PROBE_TIMING {
        if let Some(n) = int(spec.get(key), key)? {
            probe[key] = json!(n);
        }
    }
    Ok(probe)
}

/// An integer, or a percentage kept as text (Kubernetes' IntOrString).
fn int_or_percent(value: Option<&Value>, field: &str) -> Result<Option<Value>, String> {
    match value {
        Some(Value::String(s)) if s.trim().ends_with('%') => Ok(Some(json!(s.trim()))),
        other => Ok(int(other, field)?.map(|n| json!(n))),
    }
}

/// A label selector: `{matchLabels}`/`{matchExpressions}` as written, or a bare map of
/// labels (as upstream writes selectors) as its `matchLabels`.
fn selector(value: Value) -> Value {
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
fn policy_rules(rules: Value) -> Value {
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
fn claim_templates(templates: &Value) -> Result<Value, String> {
    let templates = templates.as_array().ok_or("volumeClaimTemplates: must be a list")?;
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
                .ok_or_else(|| at("name") + ": required")?;
            let storage = template
                .get("storage")
                .cloned()
                .ok_or_else(|| at("storage") + ": required")?;
            let mut spec = json!({
                "accessModes": template.get("accessModes").cloned().unwrap_or_else(|| json!(["ReadWriteOnce"])),
                "resources": {"requests": {"storage": storage}},
            });
            if let Some(class) = template.get("storageClassName") {
                spec["storageClassName"] = class.clone();
            }
            Ok(json!({"metadata": {"name": name}, "spec": spec}))
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Value::Array(claims))
}

/// `env` as Kubernetes takes it: a list stays; upstream's map of name to `{value}`,
/// `{secretKeyRef}`, `{configMapKeyRef}` (or a bare value) becomes the list.
fn env_list(env: &Value) -> Value {
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
fn pod_labels(cr: &str) -> Value {
    json!({"app": cr})
}

/// The kind-specific part of the object.
pub(super) fn body(
    kind: &KindSpec,
    fields: &Map<String, Value>,
    cr: &str,
    cr_namespace: &str,
) -> Result<Value, String> {
    let get = |key: &str| fields.get(key).cloned().filter(|v| !v.is_null());
    Ok(match kind.key {
        "deployments" | "statefulSets" | "replicaSets" => {
            let replicas = int(fields.get("replicas"), "replicas")?.unwrap_or(1);
            let mut spec = json!({
                "replicas": replicas,
                "selector": {"matchLabels": pod_labels(cr)},
                "template": {"metadata": {"labels": pod_labels(cr)}, "spec": pod_spec(fields, cr, None)?},
            });
            if kind.key == "statefulSets" {
                spec["serviceName"] = get("serviceName").unwrap_or_else(|| json!(cr));
                if let Some(templates) = get("volumeClaimTemplates") {
                    spec["volumeClaimTemplates"] = claim_templates(&templates)?;
                }
            }
            if let Some(update) = get("rollingUpdate") {
                let surge = int_or_percent(update.get("maxSurge"), "rollingUpdate.maxSurge")?;
                let unavailable = int_or_percent(update.get("maxUnavailable"), "rollingUpdate.maxUnavailable")?;
                match kind.key {
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
            json!({"spec": spec})
        }
        "pods" => json!({"metadata": {"labels": pod_labels(cr)}, "spec": pod_spec(fields, cr, None)?}),
        "jobs" => {
            let mut spec = json!({"template": {"spec": pod_spec(fields, cr, Some("Never"))?}});
            for key in [
                "backoffLimit",
                "ttlSecondsAfterFinished",
                "activeDeadlineSeconds",
                "completions",
                "parallelism",
            ] {
                if let Some(n) = int(fields.get(key), key)? {
                    spec[key] = json!(n);
                }
            }
            json!({"spec": spec})
        }
        "services" => {
            let port = int(fields.get("port"), "port")?.unwrap_or(80);
            let target = match fields.get("targetPort") {
                Some(Value::String(s)) if s.parse::<i64>().is_err() && !s.is_empty() => json!(s),
                other => json!(int(other, "targetPort")?.unwrap_or(port)),
            };
            let protocol = fields.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
            let mut service_port = json!({"port": port, "targetPort": target, "protocol": protocol});
            if let Some(node_port) = int(fields.get("nodePort"), "nodePort")? {
                service_port["nodePort"] = json!(node_port);
            }
            let mut spec = json!({
                "type": get("type").unwrap_or_else(|| json!("ClusterIP")),
                "selector": get("selector").unwrap_or_else(|| pod_labels(cr)),
                "ports": get("ports").unwrap_or_else(|| json!([service_port])),
            });
            if fields.get("headless") == Some(&json!(true)) {
                spec["clusterIP"] = json!("None");
            }
            json!({"spec": spec})
        }
        "configMaps" => json!({"data": stringify(get("data"))}),
        "secrets" => {
            let mut string_data = stringify(get("data"));
            if let (Value::Object(target), Value::Object(extra)) = (&mut string_data, stringify(get("stringData"))) {
                target.extend(extra);
            }
            let mut secret_type = get("type").unwrap_or_else(|| json!("Opaque"));
            if let Some(tls) = get("tls") {
                let validity = match fields.get("rotateAfter").and_then(Value::as_str) {
                    Some(text) => orkestra_expr::duration::parse(text).map_err(|e| format!("rotateAfter: {e}"))?,
                    None => tls::DEFAULT_VALIDITY,
                };
                if let Value::Object(target) = &mut string_data {
                    target.extend(tls::generate(&tls, validity)?);
                }
                secret_type = json!("kubernetes.io/tls");
            }
            json!({"type": secret_type, "stringData": string_data})
        }
        "serviceAccounts" => {
            let mut body = json!({});
            if let Some(secrets) = fields.get("imagePullSecrets").and_then(Value::as_array) {
                body["imagePullSecrets"] = Value::Array(
                    secrets
                        .iter()
                        .map(|s| if s.is_string() { json!({"name": s}) } else { s.clone() })
                        .collect(),
                );
            }
            if let Some(automount) = get("automountServiceAccountToken") {
                body["automountServiceAccountToken"] = automount;
            }
            body
        }
        "cronJobs" => {
            let mut job = json!({"template": {"spec": pod_spec(fields, cr, Some("OnFailure"))?}});
            if let Some(n) = int(fields.get("backoffLimit"), "backoffLimit")? {
                job["backoffLimit"] = json!(n);
            }
            let mut spec =
                json!({"schedule": get("schedule").ok_or("schedule is required")?, "jobTemplate": {"spec": job}});
            copy(fields, &mut spec, &["suspend", "concurrencyPolicy"]);
            for key in [
                "successfulJobsHistoryLimit",
                "failedJobsHistoryLimit",
                "startingDeadlineSeconds",
            ] {
                if let Some(n) = int(fields.get(key), key)? {
                    spec[key] = json!(n);
                }
            }
            json!({"spec": spec})
        }
        "ingresses" => {
            let mut spec = json!({});
            copy(fields, &mut spec, &["ingressClassName", "tls", "rules"]);
            if spec.get("rules").is_none() {
                let port = int(fields.get("servicePort").or(fields.get("port")), "servicePort")?.unwrap_or(80);
                let service = get("serviceName").unwrap_or_else(|| json!(default_name("services", cr)));
                let mut rule = json!({"http": {"paths": [{
                    "path": get("path").unwrap_or_else(|| json!("/")),
                    "pathType": get("pathType").unwrap_or_else(|| json!("Prefix")),
                    "backend": {"service": {"name": service, "port": {"number": port}}},
                }]}});
                if let Some(host) = get("host") {
                    rule["host"] = host;
                }
                spec["rules"] = json!([rule]);
            }
            json!({"spec": spec})
        }
        "persistentVolumes" => {
            let capacity = match (get("capacity"), get("storage")) {
                (Some(capacity), _) => capacity,
                (None, Some(storage)) => json!({"storage": storage}),
                (None, None) => return Err("storage (or capacity) is required".into()),
            };
            let mut spec = json!({
                "capacity": capacity,
                "accessModes": get("accessModes").unwrap_or_else(|| json!(["ReadWriteOnce"])),
            });
            copy(fields, &mut spec, &["storageClassName", "volumeMode", "nfs", "csi"]);
            if let Some(policy) = get("reclaimPolicy") {
                spec["persistentVolumeReclaimPolicy"] = policy;
            }
            match get("hostPath") {
                Some(Value::String(path)) => spec["hostPath"] = json!({"path": path}),
                Some(other) => spec["hostPath"] = other,
                None => {}
            }
            json!({"spec": spec})
        }
        "persistentVolumeClaims" => {
            let mut spec = json!({
                "accessModes": get("accessModes").unwrap_or_else(|| json!(["ReadWriteOnce"])),
                "resources": {"requests": {"storage": get("storage").ok_or("storage is required")?}},
            });
            copy(fields, &mut spec, &["storageClassName", "volumeMode", "volumeName"]);
            json!({"spec": spec})
        }
        "hpa" => {
            let target = get("scaleTargetRef").unwrap_or_else(|| {
                let name = get("target").unwrap_or_else(|| json!(default_name("deployments", cr)));
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": name})
            });
            let mut metrics: Vec<Value> = get("metrics").and_then(|m| m.as_array().cloned()).unwrap_or_default();
            for (key, resource) in [("targetCPUUtilization", "cpu"), ("targetMemoryUtilization", "memory")] {
                // Upstream also writes `...Percentage`.
                let given = fields.get(key).or_else(|| fields.get(&format!("{key}Percentage")));
                if let Some(percent) = int(given, key)? {
                    metrics.push(json!({"type": "Resource", "resource": {
                        "name": resource, "target": {"type": "Utilization", "averageUtilization": percent},
                    }}));
                }
            }
            let max = int(fields.get("maxReplicas"), "maxReplicas")?.ok_or("maxReplicas is required")?;
            let mut spec = json!({
                "scaleTargetRef": target,
                "minReplicas": int(fields.get("minReplicas"), "minReplicas")?.unwrap_or(1),
                "maxReplicas": max,
            });
            if !metrics.is_empty() {
                spec["metrics"] = Value::Array(metrics);
            }
            copy(fields, &mut spec, &["behavior"]);
            json!({"spec": spec})
        }
        "pdb" => {
            let selected = get("selector").map(selector);
            let mut spec = json!({"selector": selected.unwrap_or_else(|| json!({"matchLabels": pod_labels(cr)}))});
            for key in ["minAvailable", "maxUnavailable"] {
                // On the entry, or in `behavior` (where upstream's profiles put it).
                let given = fields
                    .get(key)
                    .or_else(|| fields.get("behavior").and_then(|b| b.get(key)));
                if let Some(value) = int_or_percent(given, key)? {
                    spec[key] = value;
                }
            }
            json!({"spec": spec})
        }
        "namespaces" => json!({}),
        "roles" => json!({"rules": get("rules").unwrap_or_else(|| json!([]))}),
        "clusterRoles" => {
            let mut body = json!({"rules": get("rules").unwrap_or_else(|| json!([]))});
            copy(fields, &mut body, &["aggregationRule"]);
            body
        }
        "roleBindings" | "clusterRoleBindings" => {
            let role_ref = match (get("roleRef"), get("role"), get("clusterRole")) {
                (Some(role_ref), _, _) => role_ref,
                (None, Some(role), _) if kind.key == "roleBindings" => {
                    json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role})
                }
                (None, _, Some(role)) => {
                    json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role})
                }
                _ => return Err("roleRef (or role / clusterRole) is required".into()),
            };
            let mut subjects: Vec<Value> = get("subjects").and_then(|s| s.as_array().cloned()).unwrap_or_default();
            if let Some(account) = get("serviceAccount") {
                subjects.push(json!({"kind": "ServiceAccount", "name": account, "namespace": cr_namespace}));
            }
            json!({"roleRef": role_ref, "subjects": subjects})
        }
        "limitRanges" => json!({"spec": {"limits": get("limits").ok_or("limits is required")?}}),
        "resourceQuotas" => {
            let mut spec = json!({"hard": get("hard").ok_or("hard is required")?});
            copy(fields, &mut spec, &["scopes", "scopeSelector"]);
            json!({"spec": spec})
        }
        "networkPolicies" => {
            let selected = get("podSelector").map(selector);
            let mut spec = json!({"podSelector": selected.unwrap_or_else(|| json!({"matchLabels": pod_labels(cr)}))});
            copy(fields, &mut spec, &["policyTypes"]);
            for key in ["ingress", "egress"] {
                if let Some(rules) = get(key) {
                    spec[key] = policy_rules(rules);
                }
            }
            json!({"spec": spec})
        }
        "custom" => {
            let mut body = Map::new();
            for (key, value) in fields {
                if key != "hasStatus" {
                    body.insert(key.clone(), value.clone());
                }
            }
            Value::Object(body)
        }
        other => return Err(format!("{other} templates are not rendered by this runtime yet")),
    })
}

/// Copies the listed fields, when present, into `target` unchanged.
fn copy(fields: &Map<String, Value>, target: &mut Value, keys: &[&str]) {
    for key in keys {
        if let Some(value) = fields.get(*key).filter(|v| !v.is_null()) {
            target[*key] = value.clone();
        }
    }
}

/// Map values as strings (ConfigMap and Secret data).
fn stringify(value: Option<Value>) -> Value {
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
