//! An intent made into a CR, the gateway's stages 1, 3 and 4: which CRD and surface a
//! request names, the CR its fields make (`serve.fields`, labels, annotations, the
//! `serve.name`/`serve.namespace` templates), and the provenance annotations. Nothing a
//! caller sends decides provenance: the caller's own `serve-*` annotations are dropped and
//! the gateway's written in their place, and a whole CR keeps only its identity, labels,
//! annotations and spec.

use serde_json::{Map, Value, json};

use super::compile::{CompiledServe, IntentField, Surface};
use crate::fields::set_path;
use crate::model::FieldType;
use orkestra_expr::labels::{SERVE_ALIAS, SERVE_INTENT, SERVE_SOURCE, SERVE_TARGET};
use orkestra_expr::names::{is_dns1123_label, is_dns1123_subdomain};
use orkestra_expr::resolver::Resolver;
use orkestra_expr::template::Template;

/// The annotation naming the target a whole CR was routed to by its fieldSelector.
pub const SERVE_SELECTOR_TARGET: &str = "orkestra.orkspace.io/serve-selector-target";
/// The fieldSelector that routed it (JSON).
pub const SERVE_SELECTOR: &str = "orkestra.orkspace.io/serve-selector";

/// Intent keys that name the CR rather than set a field.
const IDENTITY: [&str; 3] = ["target", "name", "namespace"];

/// Why an intent makes no CR.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// The request itself is wrong (400): unknown target, closed mode, wrong shape.
    BadRequest(String),
    /// The CR it would make is not valid (422).
    Invalid(Vec<Violation>),
}

/// One thing wrong with what a caller sent, at a field.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Violation {
    pub field: String,
    pub message: String,
    pub severity: Severity,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Severity {
    Error,
    Warning,
}

impl Violation {
    pub fn error(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
            severity: Severity::Error,
        }
    }
}

/// A CR ready to apply, and the surface it came through.
#[derive(Debug, Clone)]
pub struct Made {
    pub object: Value,
    /// The surface's name (an alias, or the primary target).
    pub surface: String,
}

/// What making a CR needs of the CRD it is for; the compiled CRD lends it
/// (`CompiledCrd::served`), so this module reads no more of a CRD than this.
#[derive(Debug, Clone)]
pub struct Served<'c> {
    pub kind: &'c str,
    /// `group/version` (or `version` for the core group).
    pub api_version: String,
    pub namespaced: bool,
    /// The Katalog's notes, for the intent's templates.
    pub notes: &'c [Template],
    pub serve: &'c CompiledServe,
}

/// The JSON type the CRD's schema gives a path (`integer`, `boolean`, ...), to turn a
/// template's text into the value the API server expects.
pub type SchemaTypes<'a> = &'a dyn Fn(&[String]) -> Option<String>;

/// Target mode: flat fields, by name, through a surface.
pub fn from_target(
    crd: Served<'_>,
    surface: &Surface,
    intent: &Map<String, Value>,
    source: &str,
    types: SchemaTypes<'_>,
) -> Result<Made, Refusal> {
    let serve = crd.serve;
    if !surface.target_mode {
        return Err(Refusal::BadRequest(format!(
            "target mode is closed for target \"{}\"; send a whole CR",
            surface.name
        )));
    }
    let notes = crd.notes;
    let mut object = json!({
        "apiVersion": &crd.api_version, "kind": crd.kind,
        "metadata": {"labels": {}, "annotations": {}}, "spec": {},
    });
    let mut violations = Vec::new();
    let request = Value::Object(intent.clone());
    let declared: Vec<&IntentField> = serve
        .fields
        .iter()
        .chain(&serve.labels)
        .chain(&serve.annotations)
        .collect();
    for (key, value) in intent {
        if IDENTITY.contains(&key.as_str()) || declared.iter().any(|f| f.name == *key) {
            continue;
        }
        if ["apiVersion", "kind", "metadata", "status", "spec"].contains(&key.as_str()) {
            violations.push(Violation::error(
                key,
                "target mode takes the target's fields by name; send a whole CR (no target) to give apiVersion, kind, metadata or spec",
            ));
            continue;
        }
        let path = vec!["spec".to_string(), key.clone()];
        if ignored(serve, &path) {
            violations.push(Violation::error(key, "is managed by the platform and cannot be set"));
            continue;
        }
        set_path(&mut object, &path, value.clone());
    }
    for field in &declared {
        let given = intent.get(&field.name).filter(|v| !v.is_null());
        let value = match (&field.override_, given, &field.default) {
            (Some(forced), _, _) => Some(forced.clone()),
            (None, Some(value), _) => Some(value.clone()),
            (None, None, Some(default)) => Some(default.clone()),
            (None, None, None) => None,
        };
        let Some(value) = value else {
            if field.required {
                violations.push(Violation::error(&field.name, format!("{} is required", field.name)));
            }
            continue;
        };
        if !field.enum_.is_empty() && !field.enum_.contains(&value) {
            let allowed: Vec<String> = field.enum_.iter().map(text_of).collect();
            violations.push(Violation::error(
                &field.name,
                format!("{} is not one of {}", text_of(&value), allowed.join(", ")),
            ));
            continue;
        }
        if let Err(why) = write_field(&mut object, field, value, &request, notes, types) {
            violations.push(Violation::error(&field.name, why));
        }
    }
    let made = finish(crd, surface, object, source, Some(intent), violations)?;
    Ok(made)
}

/// Whole-CR mode: a CR with apiVersion and kind, routed to a surface by fieldSelector.
pub fn from_cr(crd: Served<'_>, given: &Map<String, Value>, source: &str) -> Result<Made, Refusal> {
    let serve = crd.serve;
    let expected = crd.api_version.as_str();
    if given.get("apiVersion").and_then(Value::as_str) != Some(expected) {
        return Err(Refusal::BadRequest(format!(
            "apiVersion must be {expected} for kind {}",
            crd.kind
        )));
    }
    let metadata = given.get("metadata").cloned().unwrap_or_default();
    // Only what a caller may decide: identity, labels, annotations and spec.
    let mut object = json!({
        "apiVersion": expected, "kind": crd.kind,
        "metadata": {
            "labels": metadata.get("labels").cloned().unwrap_or(json!({})),
            "annotations": metadata.get("annotations").cloned().unwrap_or(json!({})),
        },
        "spec": given.get("spec").cloned().unwrap_or(json!({})),
    });
    for key in ["name", "namespace"] {
        if let Some(value) = metadata.get(key) {
            object["metadata"][key] = value.clone();
        }
    }
    let surface = serve.route(&object);
    if !surface.cr_mode {
        return Err(Refusal::BadRequest(format!(
            "whole-CR mode is closed for kind {}; send {{\"target\": \"{}\", ...}}",
            crd.kind, surface.name
        )));
    }
    let mut violations = Vec::new();
    for path in &serve.ignore {
        let segments: Vec<&str> = path.split('.').collect();
        if segments.iter().try_fold(&object, |v, k| v.get(*k)).is_some() {
            violations.push(Violation::error(path, "is managed by the platform and cannot be set"));
        }
    }
    let routed = (!surface.field_selector.is_empty()).then(|| surface.clone());
    let mut made = finish(crd, surface, object, source, None, violations)?;
    if let Some(surface) = routed {
        let annotations = &mut made.object["metadata"]["annotations"];
        annotations[SERVE_SELECTOR_TARGET] = json!(surface.name);
        annotations[SERVE_SELECTOR] = json!(serde_json::to_string(&surface.field_selector).unwrap_or_default());
    }
    Ok(made)
}

fn ignored(serve: &CompiledServe, path: &[String]) -> bool {
    let dotted = path.join(".");
    serve
        .ignore
        .iter()
        .any(|i| dotted == *i || dotted.starts_with(&format!("{i}.")) || i.starts_with(&format!("{dotted}.")))
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Writes one declared field: through `values` (a fan-out), `value` (a transform) or as
/// sent. Labels and annotations are text.
fn write_field(
    object: &mut Value,
    field: &IntentField,
    value: Value,
    request: &Value,
    notes: &[Template],
    types: SchemaTypes<'_>,
) -> Result<(), String> {
    let metadata = field.path.first().is_some_and(|p| p == "metadata");
    let mut context = Map::new();
    context.insert("request".into(), request.clone());
    context.insert("value".into(), value.clone());
    let render = |template: &Template, path: &[String], object: &Value| -> Result<Value, String> {
        let text = Resolver::in_context(object, notes, &context)
            .render(template)
            .map_err(|e| e.message)?;
        Ok(coerce(text, if metadata { None } else { types(path) }, field.type_))
    };
    if !field.values.is_empty() {
        for (path, template) in &field.values {
            let written = render(template, path, object)?;
            set_path(object, path, written);
        }
        return Ok(());
    }
    let written = match &field.value {
        Some(template) => render(template, &field.path, object)?,
        None => value,
    };
    let written = match (metadata, written) {
        (true, Value::String(s)) => Value::String(s),
        (true, other) => Value::String(text_of(&other)),
        (false, other) => other,
    };
    set_path(object, &field.path, written);
    Ok(())
}

/// A rendered template's text as the type the schema (or the field) declares.
fn coerce(text: String, schema: Option<String>, declared: Option<FieldType>) -> Value {
    let kind = schema.as_deref().or(match declared {
        Some(FieldType::Integer) => Some("integer"),
        Some(FieldType::Number) => Some("number"),
        Some(FieldType::Boolean) => Some("boolean"),
        _ => None,
    });
    let parsed = match kind {
        Some("integer") => text.trim().parse::<i64>().ok().map(Value::from),
        Some("number") => text.trim().parse::<f64>().ok().map(Value::from),
        Some("boolean") => text.trim().parse::<bool>().ok().map(Value::Bool),
        _ => None,
    };
    parsed.unwrap_or(Value::String(text))
}

/// Name, namespace and provenance, then the verdict.
fn finish(
    crd: Served<'_>,
    surface: &Surface,
    mut object: Value,
    source: &str,
    intent: Option<&Map<String, Value>>,
    mut violations: Vec<Violation>,
) -> Result<Made, Refusal> {
    let (serve, notes) = (crd.serve, crd.notes);
    let mut context = Map::new();
    if let Some(intent) = intent {
        context.insert("request".into(), Value::Object(intent.clone()));
    }
    let resolve = |template: &Template, object: &Value| {
        Resolver::in_context(object, notes, &context)
            .render(template)
            .map(|t| t.trim().to_string())
            .map_err(|e| e.message)
    };
    let given = |key: &str, object: &Value| {
        intent
            .and_then(|i| i.get(key))
            .or_else(|| object["metadata"].get(key))
            .and_then(Value::as_str)
            .map(String::from)
    };
    let name = match &serve.name {
        Some(template) => resolve(template, &object).map(Some),
        None => Ok(given("name", &object)),
    };
    match name {
        Ok(Some(name)) if is_dns1123_subdomain(&name) => object["metadata"]["name"] = json!(name),
        Ok(Some(name)) => violations.push(Violation::error(
            "metadata.name",
            format!("{name:?} is not a valid name (lowercase letters, digits, '-' and '.')"),
        )),
        Ok(None) => violations.push(Violation::error("metadata.name", "name is required")),
        Err(why) => violations.push(Violation::error("metadata.name", format!("serve.name: {why}"))),
    }
    let namespace = match &serve.namespace {
        Some(template) => resolve(template, &object).map(Some),
        None => Ok(given("namespace", &object)),
    };
    match (crd.namespaced, namespace) {
        (true, Ok(Some(namespace))) if is_dns1123_label(&namespace) => {
            object["metadata"]["namespace"] = json!(namespace)
        }
        (true, Ok(Some(namespace))) => violations.push(Violation::error(
            "metadata.namespace",
            format!("{namespace:?} is not a valid namespace"),
        )),
        (true, Ok(None)) => violations.push(Violation::error("metadata.namespace", "namespace is required")),
        (_, Err(why)) => violations.push(Violation::error(
            "metadata.namespace",
            format!("serve.namespace: {why}"),
        )),
        (false, Ok(Some(_))) => violations.push(Violation::error(
            "metadata.namespace",
            format!("{} is cluster-scoped: it takes no namespace", crd.kind),
        )),
        (false, Ok(None)) => {}
    }
    if !violations.is_empty() {
        return Err(Refusal::Invalid(violations));
    }
    let annotations = object["metadata"]["annotations"].as_object_mut();
    if let Some(annotations) = annotations {
        // Provenance is the gateway's to write.
        annotations.retain(|k, _| !k.starts_with("orkestra.orkspace.io/serve-"));
        annotations.insert(SERVE_TARGET.into(), json!(serve.primary));
        let alias = if surface.primary { "" } else { surface.name.as_str() };
        annotations.insert(SERVE_ALIAS.into(), json!(alias));
        annotations.insert(SERVE_SOURCE.into(), json!(source));
        if let Some(intent) = intent {
            annotations.insert(SERVE_INTENT.into(), json!(Value::Object(intent.clone()).to_string()));
        }
    }
    Ok(Made {
        object,
        surface: surface.name.clone(),
    })
}

/// The surface a stored CR came through (its alias, else its target), if any.
pub fn stored_surface(object: &Value) -> Option<String> {
    let annotations = &object["metadata"]["annotations"];
    let text = |key: &str| annotations[key].as_str().filter(|s| !s.is_empty()).map(String::from);
    text(SERVE_ALIAS).or_else(|| text(SERVE_TARGET))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Arc;

    use super::*;
    use crate::compile::CompiledCrd;

    const KATALOG: &str = r#"
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: serve}
spec:
  crds:
    app:
      apiTypes: {group: demo.orkestra.io, version: v1, kind: App, plural: apps}
      serve:
        enabled: true
        namespace: 'team-{{ .metadata.labels.team }}'
        ignore: [spec.internalRef]
        fields:
          image: {required: true}
          cpu: {path: resources.cpu}
          size: {values: {spec.replicas: '{{ if eq .value "large" }}5{{ else }}1{{ end }}', spec.tier: '{{ .value }}'}}
          region: {value: '{{ upper .value }}', default: eu}
          managed: {override: platform}
        labels:
          team: {type: string, required: true}
        target:
          app: {primary: true}
          preview:
            fieldSelector: {spec.tier: small}
            modes: {target: false}
"#;

    fn crd() -> Arc<CompiledCrd> {
        let compiled = crate::load::load_sources(&[(PathBuf::from("serve.yaml"), KATALOG.to_string())]).unwrap();
        compiled.crds["app"].clone()
    }

    fn no_types(_: &[String]) -> Option<String> {
        None
    }

    fn integer_replicas(path: &[String]) -> Option<String> {
        (path.join(".") == "spec.replicas").then(|| "integer".to_string())
    }

    fn intent(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn a_target_intent_maps_its_fields_and_stamps_provenance() {
        let crd = crd();
        let serve = crd.serve.as_ref().unwrap();
        let surface = serve.surface("app").unwrap();
        let request = intent(json!({"target": "app", "name": "shop", "image": "nginx", "cpu": "500m",
                                    "size": "large", "team": "pay", "extra": 3}));
        let made = from_target(crd.served().unwrap(), surface, &request, "ci-bot", &integer_replicas).unwrap();
        let object = &made.object;
        assert_eq!(object["metadata"]["name"], "shop");
        assert_eq!(object["metadata"]["namespace"], "team-pay", "serve.namespace wins");
        assert_eq!(object["spec"]["resources"]["cpu"], "500m");
        assert_eq!(object["spec"]["replicas"], 5, "a fan-out, typed by the schema");
        assert_eq!(object["spec"]["tier"], "large");
        assert_eq!(object["spec"]["region"], "EU", "the default, through the transform");
        assert_eq!(object["spec"]["managed"], "platform");
        assert_eq!(object["spec"]["extra"], 3, "an undeclared field goes to spec by name");
        assert_eq!(object["metadata"]["labels"]["team"], "pay");
        let annotations = &object["metadata"]["annotations"];
        assert_eq!(annotations[SERVE_TARGET], "app");
        assert_eq!(annotations[SERVE_ALIAS], "");
        assert_eq!(annotations[SERVE_SOURCE], "ci-bot");
        let recorded: Value = serde_json::from_str(annotations[SERVE_INTENT].as_str().unwrap()).unwrap();
        assert_eq!(recorded["size"], "large");
    }

    #[test]
    fn a_bad_intent_is_refused_field_by_field() {
        let crd = crd();
        let surface = crd.serve.as_ref().unwrap().surface("app").unwrap();
        let request = intent(json!({"target": "app", "internalRef": "x", "metadata": {}}));
        let Err(Refusal::Invalid(violations)) = from_target(crd.served().unwrap(), surface, &request, "", &no_types)
        else {
            panic!("refused");
        };
        let fields: Vec<&str> = violations.iter().map(|v| v.field.as_str()).collect();
        for wanted in ["internalRef", "metadata", "image", "team", "metadata.name"] {
            assert!(fields.contains(&wanted), "{wanted} in {fields:?}");
        }
        let closed = crd.serve.as_ref().unwrap().surface("preview").unwrap();
        assert!(matches!(
            from_target(crd.served().unwrap(), closed, &request, "", &no_types),
            Err(Refusal::BadRequest(_))
        ));
    }

    #[test]
    fn a_whole_cr_keeps_only_what_a_caller_decides_and_is_routed_by_its_fields() {
        let crd = crd();
        let given = intent(json!({
            "apiVersion": "demo.orkestra.io/v1", "kind": "App",
            "metadata": {"name": "small-one", "labels": {"team": "pay"},
                         "ownerReferences": [{"uid": "x"}], "finalizers": ["evil"],
                         "annotations": {SERVE_TARGET: "forged", SERVE_SOURCE: "admin", "keep": "me"}},
            "spec": {"tier": "small", "image": "nginx"},
            "status": {"phase": "Ready"},
        }));
        let made = from_cr(crd.served().unwrap(), &given, "").unwrap();
        let object = &made.object;
        assert_eq!(made.surface, "preview", "the fieldSelector routes it");
        assert_eq!(object["metadata"]["namespace"], "team-pay");
        assert!(object.get("status").is_none());
        assert!(object["metadata"].get("ownerReferences").is_none());
        assert!(object["metadata"].get("finalizers").is_none());
        let annotations = &object["metadata"]["annotations"];
        assert_eq!(annotations[SERVE_TARGET], "app", "the caller's provenance is replaced");
        assert_eq!(annotations[SERVE_ALIAS], "preview");
        assert_eq!(annotations[SERVE_SOURCE], "");
        assert_eq!(annotations["keep"], "me");
        assert_eq!(annotations[SERVE_SELECTOR_TARGET], "preview");
        let wrong = intent(json!({"apiVersion": "demo.orkestra.io/v2", "kind": "App"}));
        assert!(matches!(
            from_cr(crd.served().unwrap(), &wrong, ""),
            Err(Refusal::BadRequest(_))
        ));
        assert_eq!(stored_surface(object).as_deref(), Some("preview"));
    }
}
