//! What the Serve API sends back: a CR shaped as its surface says (the CR or not, the
//! payload templates, the excluded paths, the poll URL), and the violations of a refused
//! write, from the API server's status causes.

use serde_json::{Map, Value, json};

use orkestra_expr::resolver::Resolver;
use orkestra_katalog::compile::{CompiledCrd, Response};

/// The CR (unless the surface leaves it out) with `payload` and without `exclude`.
pub fn read(crd: &CompiledCrd, response: &Response, mut object: Value) -> Value {
    strip_noise(&mut object);
    let payload = payload(crd, response, &object);
    let mut out = match response.include_cr {
        true => visible(crd, response, object),
        false => json!({}),
    };
    out["payload"] = payload;
    out
}

/// One value of the CR (`status.phase`), as the surface lets it be seen: an excluded path
/// reads as null like an absent one.
pub fn field(crd: &CompiledCrd, response: &Response, mut object: Value, path: &str) -> Value {
    strip_noise(&mut object);
    let shown = visible(crd, response, object);
    path.split('.')
        .try_fold(&shown, |v, k| v.get(k))
        .cloned()
        .unwrap_or(Value::Null)
}

/// The CR without the paths the surface's `exclude` names (rendered over the CR itself).
fn visible(crd: &CompiledCrd, response: &Response, object: Value) -> Value {
    let mut out = object.clone();
    let resolver = Resolver::new(&object, &crd.notes);
    for template in &response.exclude {
        let Ok(paths) = resolver.render(template) else { continue };
        for path in paths.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            remove_path(&mut out, path);
        }
    }
    out
}

/// The payload templates rendered over `object` (one that does not render is `""`, as at
/// apply time when there is no status yet).
pub fn payload(crd: &CompiledCrd, response: &Response, object: &Value) -> Value {
    let resolver = Resolver::new(object, &crd.notes);
    let map: Map<String, Value> = response
        .payload
        .iter()
        .map(|(key, template)| (key.clone(), json!(resolver.render(template).unwrap_or_default())))
        .collect();
    Value::Object(map)
}

/// Where to poll a CR: the surface's template, else the resource URL; `?field=` appended.
pub fn poll_url(crd: &CompiledCrd, response: &Response, object: &Value) -> String {
    let metadata = &object["metadata"];
    let default = match metadata["namespace"].as_str() {
        Some(namespace) => format!(
            "/api/v1/resources/{}/{namespace}/{}",
            crd.kind,
            metadata["name"].as_str().unwrap_or_default()
        ),
        None => format!(
            "/api/v1/resources/{}/{}",
            crd.kind,
            metadata["name"].as_str().unwrap_or_default()
        ),
    };
    let url = response
        .poll_url
        .as_ref()
        .and_then(|t| Resolver::new(object, &crd.notes).render(t).ok())
        .filter(|u| !u.trim().is_empty())
        .unwrap_or(default);
    match &response.poll_field {
        Some(field) => format!("{url}?field={field}"),
        None => url,
    }
}

/// Fields no caller needs (and that are mostly bytes).
fn strip_noise(object: &mut Value) {
    if let Some(metadata) = object["metadata"].as_object_mut() {
        metadata.remove("managedFields");
    }
}

fn remove_path(object: &mut Value, path: &str) {
    let mut segments: Vec<&str> = path.split('.').collect();
    let Some(last) = segments.pop() else { return };
    let parent = segments.iter().try_fold(&mut *object, |v, k| v.get_mut(*k));
    if let Some(Value::Object(map)) = parent {
        map.remove(last);
    }
}

/// The causes of a refused write as violations (invalid, required, duplicate and
/// unsupported values are errors; anything else a warning).
pub fn violations(status: &kube::core::Status) -> Vec<Value> {
    let causes = status.details.as_ref().map(|d| d.causes.clone()).unwrap_or_default();
    let mut out: Vec<Value> = causes
        .iter()
        .map(|cause| {
            let severity = match cause.reason.as_str() {
                "FieldValueInvalid" | "FieldValueRequired" | "FieldValueDuplicate" | "FieldValueNotSupported" => {
                    "error"
                }
                _ => "warning",
            };
            json!({"field": cause.field, "message": cause.message, "severity": severity})
        })
        .collect();
    if out.is_empty() && status.code == 422 {
        out.push(json!({"field": "", "message": status.message, "severity": "error"}));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn a_read_is_shaped_by_its_surface() {
        let katalog = "
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: s}
spec:
  crds:
    app:
      apiTypes: {group: demo.orkestra.io, version: v1, kind: App, plural: apps}
      serve:
        enabled: true
        namespace: default
        config:
          response:
            payload: {phase: '{{ .status.phase }}'}
            exclude: [spec.secretRef, '{{ .metadata.annotations.hide }}']
            poll: {field: status.phase}
";
        let compiled = orkestra_katalog::load_sources(&[(PathBuf::from("k.yaml"), katalog.to_string())]).unwrap();
        let crd = &compiled.crds["app"];
        let response = &crd.serve.as_ref().unwrap().primary_surface().response;
        let object = json!({"metadata": {"name": "a", "namespace": "default", "managedFields": [{}],
                                          "annotations": {"hide": "spec.token, spec.other"}},
                            "spec": {"secretRef": "x", "token": "t", "other": 1, "kept": true},
                            "status": {"phase": "Ready"}});
        let shaped = read(crd, response, object.clone());
        assert_eq!(shaped["payload"], json!({"phase": "Ready"}));
        assert_eq!(shaped["spec"], json!({"kept": true}));
        assert_eq!(field(crd, response, object.clone(), "spec.kept"), json!(true));
        for excluded in ["spec.secretRef", "spec.token", "spec.other"] {
            assert_eq!(
                field(crd, response, object.clone(), excluded),
                Value::Null,
                "{excluded}"
            );
        }
        assert_eq!(field(crd, response, object.clone(), "status.phase"), json!("Ready"));
        assert!(shaped["metadata"].get("managedFields").is_none());
        assert_eq!(
            poll_url(crd, response, &object),
            "/api/v1/resources/App/default/a?field=status.phase"
        );
    }
}
