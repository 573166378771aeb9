//! The flat field schema of a serve target: the CRD's OpenAPI schema of `spec` flattened
//! to dotted paths, with `serve.fields` on top (labels, hints, order, their own paths),
//! the label and annotation fields, and `serve.ignore` left out. Also the type at a path,
//! which turns a rendered template's text into the value the API server expects.

use serde::Serialize;
use serde_json::Value;

use super::compile::{CompiledServe, IntentField};
use crate::model::FieldType;

/// One field of a target's schema.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SchemaField {
    /// The name an intent uses.
    pub name: String,
    /// Where it is written (`spec.replicas`, `metadata.labels.team`).
    pub path: String,
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(skip_serializing_if = "Vec::is_empty", rename = "enum")]
    pub enum_: Vec<Value>,
    pub required: bool,
    pub category: String,
    pub order: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// When clients show it (the Katalog's conditions, as written).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub when: Vec<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub or: Vec<Value>,
}

/// How deep nested objects are flattened (a schema is a tenant's; its depth is bounded).
const MAX_DEPTH: usize = 8;

/// The node of the OpenAPI schema at `path` (`["spec", "replicas"]`).
fn node_at<'s>(schema: &'s Value, path: &[String]) -> Option<&'s Value> {
    path.iter()
        .try_fold(schema, |node, key| node.get("properties")?.get(key.as_str()))
}

/// The JSON type the schema gives `path`.
pub fn type_at(schema: &Value, path: &[String]) -> Option<String> {
    node_at(schema, path)?.get("type")?.as_str().map(String::from)
}

/// The target's fields, ordered as a form shows them: by `order` (unset last), then name.
pub fn fields(schema: &Value, serve: &CompiledServe) -> Vec<SchemaField> {
    let mut out = Vec::new();
    if let Some(spec) = schema.get("properties").and_then(|p| p.get("spec")) {
        flatten(spec, &mut vec!["spec".to_string()], true, &mut out);
    }
    let ignored = |path: &str| {
        serve
            .ignore
            .iter()
            .any(|i| path == i || path.starts_with(&format!("{i}.")))
    };
    out.retain(|f| !ignored(&f.path));
    for declared in &serve.fields {
        let path = declared.path.join(".");
        if ignored(&path) {
            continue;
        }
        // A declared field takes the place of the schema's field at its path.
        let from_schema = out.iter().position(|f| f.path == path).map(|at| out.remove(at));
        out.push(merge(declared, from_schema, schema));
    }
    for declared in serve.labels.iter().chain(&serve.annotations) {
        out.push(merge(declared, None, schema));
    }
    out.sort_by(|a, b| {
        let key = |f: &SchemaField| (f.order == 0, f.order, f.name.clone());
        key(a).cmp(&key(b))
    });
    out
}

fn flatten(node: &Value, path: &mut Vec<String>, required: bool, out: &mut Vec<SchemaField>) {
    let properties = node.get("properties").and_then(Value::as_object);
    match properties {
        Some(properties) if path.len() <= MAX_DEPTH => {
            let required_keys: Vec<&str> = node
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for (key, child) in properties {
                path.push(key.clone());
                flatten(child, path, required && required_keys.contains(&key.as_str()), out);
                path.pop();
            }
        }
        _ if path.len() > 1 => out.push(SchemaField {
            name: path[1..].join("."),
            path: path.join("."),
            type_: node.get("type").and_then(Value::as_str).unwrap_or("string").to_string(),
            enum_: node.get("enum").and_then(Value::as_array).cloned().unwrap_or_default(),
            required,
            category: "Spec".into(),
            order: 0,
            label: None,
            hint: None,
            placeholder: None,
            description: node.get("description").and_then(Value::as_str).map(String::from),
            disabled: None,
            default: node.get("default").cloned(),
            when: Vec::new(),
            or: Vec::new(),
        }),
        _ => {}
    }
}

fn merge(declared: &IntentField, from_schema: Option<SchemaField>, schema: &Value) -> SchemaField {
    let spec = &declared.spec;
    let path = declared.path.join(".");
    let declared_type = declared.type_.map(|t| match t {
        FieldType::String => "string",
        FieldType::Integer => "integer",
        FieldType::Number => "number",
        FieldType::Boolean => "boolean",
        FieldType::Enum => "enum",
    });
    let type_ = declared_type
        .map(String::from)
        .or_else(|| from_schema.as_ref().map(|f| f.type_.clone()))
        .or_else(|| type_at(schema, &declared.path))
        .unwrap_or_else(|| "string".into());
    let conditions = |list: &[orkestra_expr::condition::ConditionSpec]| {
        list.iter()
            .filter_map(|c| serde_json::to_value(c).ok())
            .collect::<Vec<_>>()
    };
    SchemaField {
        name: declared.name.clone(),
        path,
        type_,
        enum_: match declared.enum_.is_empty() {
            true => from_schema.as_ref().map(|f| f.enum_.clone()).unwrap_or_default(),
            false => declared.enum_.clone(),
        },
        required: declared.required || from_schema.as_ref().is_some_and(|f| f.required),
        category: spec.category.clone().unwrap_or_else(|| "Spec".into()),
        order: spec.order,
        label: spec.label.clone(),
        hint: spec.hint.clone(),
        placeholder: spec.placeholder.clone(),
        description: from_schema.as_ref().and_then(|f| f.description.clone()),
        disabled: spec.disabled.clone(),
        default: spec.default.clone().or_else(|| from_schema.and_then(|f| f.default)),
        when: conditions(&spec.when),
        or: conditions(&spec.or),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use orkestra_expr::template::Functions;

    #[test]
    fn the_spec_flattens_and_declared_fields_take_their_paths_order_and_labels() {
        let schema = json!({"type": "object", "properties": {"spec": {
        "type": "object", "required": ["image"],
        "properties": {
            "image": {"type": "string", "description": "what runs"},
            "replicas": {"type": "integer", "default": 1},
            "app": {"type": "object", "properties": {"cpu": {"type": "string"}}},
            "internalRef": {"type": "string"},
        }}}});
        let serve: crate::model::Serve = serde_json::from_value(json!({
            "enabled": true, "ignore": ["spec.internalRef"],
            "fields": {"cpu": {"path": "app.cpu", "label": "CPU", "order": 2},
                       "image": {"order": 1, "category": "Basics"}},
            "labels": {"team": {"type": "string", "required": true}},
        }))
        .unwrap();
        let compiled = CompiledServe::compile(&serve, "App", Functions::builtin()).unwrap();
        let fields = fields(&schema, &compiled);
        let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["image", "cpu", "replicas", "team"]);
        assert_eq!(fields[0].category, "Basics");
        assert!(fields[0].required, "the schema's required");
        assert_eq!(fields[0].description.as_deref(), Some("what runs"));
        assert_eq!(
            (fields[1].path.as_str(), fields[1].label.as_deref()),
            ("spec.app.cpu", Some("CPU"))
        );
        assert_eq!(fields[2].type_, "integer");
        assert_eq!(fields[2].default, Some(json!(1)));
        assert_eq!(fields[3].path, "metadata.labels.team");
        assert!(!names.contains(&"internalRef"), "ignored");
        assert_eq!(
            type_at(&schema, &["spec".into(), "replicas".into()]).as_deref(),
            Some("integer")
        );
    }
}
