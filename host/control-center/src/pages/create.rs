//! Self-service from the Control Center: the serve targets a runtime's Serve API offers, and
//! a form per target built from the gateway's flat schema (`GET /api/v1/schema?target=`),
//! whose submission is applied as an intent through the Serve API, so every check the gateway
//! makes (the token's grants, required fields, admission rules) holds here too.

use std::collections::HashMap;

use maud::{Markup, html};
use serde_json::{Map, Value};

use super::layout::{BASE, csrf_field, notice, text};
use crate::csrf::{FIELD, Token};

/// The targets the Control Center's Serve API token may use, each a link to its form.
pub fn catalog(runtime: &str, answer: Result<Value, String>) -> Markup {
    html! {
        h1 { "Create a custom resource on " (runtime) }
        @match answer {
            Err(why) => (notice(&why)),
            Ok(catalog) => {
                @let items = catalog["items"].as_array().cloned().unwrap_or_default();
                @if items.is_empty() { p.muted { "The Serve API offers this Control Center's token no target." } }
                table.targets {
                    tr { th { "target" } th { "kind" } th { "category" } th { "" } }
                    @for item in &items {
                        @let target = item["target"].as_str().unwrap_or_default();
                        tr {
                            td { a href={(BASE) "/r/" (runtime) "/create/" (target)} { (target) } }
                            td { (text(&item["kind"])) }
                            td { (item["category"].as_str().unwrap_or("-")) }
                            td.muted { (item["description"].as_str().unwrap_or("")) }
                        }
                    }
                }
            }
        }
    }
}

/// What an apply answered, for the form to show.
pub enum Outcome {
    Accepted {
        kind: String,
        namespace: Option<String>,
        name: String,
    },
    Refused {
        message: String,
        violations: Vec<String>,
    },
}

/// The form of `target` from its flat schema; `values` refill it after a refusal.
pub fn form(
    runtime: &str,
    target: &str,
    schema: &Value,
    token: &Token,
    values: &HashMap<String, String>,
    outcome: Option<&Outcome>,
) -> Markup {
    let value = |name: &str| values.get(name).cloned().unwrap_or_default();
    let kind = schema["kind"].as_str().unwrap_or_default();
    html! {
        h1 { "New " (kind) " through " (target) }
        @match outcome {
            Some(Outcome::Accepted { kind, namespace, name }) => {
                p.ok.created { "Created " (kind) " " (namespace.as_deref().map(|n| format!("{n}/")).unwrap_or_default()) (name) }
            }
            Some(Outcome::Refused { message, violations }) => {
                div.error.refused { (message) @for violation in violations { div { (violation) } } }
            }
            None => {}
        }
        form.create method="post" action={(BASE) "/r/" (runtime) "/create/" (target)} {
            (csrf_field(token))
            @if schema["requireServeName"] == true {
                label { "name *" input name="name" required value=(value("name")); }
            }
            @if schema["requireNamespace"] == true {
                label { "namespace *" input name="namespace" required value=(value("namespace")); }
            }
            @for field in schema["fields"].as_array().into_iter().flatten() {
                (input(field, &value))
            }
            button.primary type="submit" { "Create" }
        }
    }
}

/// One field's input, as its type, enum and required flag say.
fn input(field: &Value, value: &dyn Fn(&str) -> String) -> Markup {
    let name = field["name"].as_str().unwrap_or_default();
    let label = field["label"].as_str().unwrap_or(name);
    let required = field["required"] == true;
    let given = value(name);
    let shown = match (given.is_empty(), &field["default"]) {
        (true, Value::String(default)) => default.clone(),
        (true, Value::Null) => String::new(),
        (true, default) => default.to_string(),
        (false, _) => given,
    };
    let kind = field["type"].as_str().unwrap_or("string");
    html! {
        label data-field=(name) {
            (label) @if required { " *" }
            @if let Some(options) = field["enum"].as_array() {
                select name=(name) required[required] {
                    @if !required { option value="" { "" } }
                    @for option in options {
                        @let option = option.as_str().map_or_else(|| option.to_string(), String::from);
                        option value=(option) selected[option == shown] { (option) }
                    }
                }
            } @else if kind == "boolean" {
                input type="checkbox" name=(name) value="true" checked[shown == "true"];
            } @else {
                input type=(if matches!(kind, "integer" | "number") { "number" } else { "text" })
                    name=(name) required[required] value=(shown)
                    placeholder=(field["placeholder"].as_str().unwrap_or(""));
            }
            @if let Some(hint) = field["hint"].as_str().or(field["description"].as_str()) { span.muted { (hint) } }
        }
    }
}

/// The intent a submitted form stands for: each field under its name, typed as the schema
/// types it; empty optional fields left out; the target set. An error names the field.
pub fn intent_of(target: &str, schema: &Value, form: &HashMap<String, String>) -> Result<Map<String, Value>, String> {
    let mut intent = Map::new();
    intent.insert("target".into(), Value::String(target.into()));
    for key in ["name", "namespace"] {
        if let Some(given) = form.get(key).map(|v| v.trim()).filter(|v| !v.is_empty()) {
            intent.insert(key.into(), Value::String(given.into()));
        }
    }
    for field in schema["fields"].as_array().into_iter().flatten() {
        let Some(name) = field["name"].as_str() else { continue };
        if name == FIELD {
            continue;
        }
        let kind = field["type"].as_str().unwrap_or("string");
        let given = form.get(name).map(|v| v.trim()).unwrap_or_default();
        let typed = match kind {
            // An unchecked box is not sent: false, not missing.
            "boolean" => Value::Bool(given == "true"),
            _ if given.is_empty() => continue,
            "integer" => Value::from(
                given
                    .parse::<i64>()
                    .map_err(|_| format!("{name}: {given:?} is not a whole number"))?,
            ),
            "number" => serde_json::Number::from_f64(
                given
                    .parse::<f64>()
                    .map_err(|_| format!("{name}: {given:?} is not a number"))?,
            )
            .map(Value::Number)
            .ok_or_else(|| format!("{name}: {given:?} is not a number"))?,
            _ => Value::String(given.into()),
        };
        intent.insert(name.into(), typed);
    }
    Ok(intent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"kind": "Website", "requireServeName": true, "requireNamespace": false, "fields": [
            {"name": "image", "type": "string", "required": true, "label": "Image"},
            {"name": "size", "type": "string", "enum": ["small", "large"], "required": false},
            {"name": "replicas", "type": "integer", "required": false, "default": 2},
            {"name": "public", "type": "boolean", "required": false},
        ]})
    }

    #[test]
    fn a_form_has_an_input_per_field_of_its_type_and_refills_what_was_given() {
        let given = HashMap::from([("image".to_string(), "nginx:1.27".to_string())]);
        let shown = form("rt", "site", &schema(), &Token("t0k".into()), &given, None).into_string();
        for expected in [
            r#"action="/controlcenter/r/rt/create/site""#,
            r#"<input type="hidden" name="csrf" value="t0k">"#,
            r#"<input name="name" required value="">"#,
            r#"<input type="text" name="image" required value="nginx:1.27""#,
            r#"<option value="large">large</option>"#,
            r#"<input type="number" name="replicas" value="2""#,
            r#"<input type="checkbox" name="public" value="true">"#,
        ] {
            assert!(shown.contains(expected), "{expected} in {shown}");
        }
        assert!(
            !shown.contains("namespace *"),
            "no namespace field when the target sets it"
        );
    }

    #[test]
    fn a_submitted_form_becomes_a_typed_intent_and_a_bad_number_names_its_field() {
        let form = HashMap::from([
            ("csrf".to_string(), "t0k".to_string()),
            ("name".to_string(), "blog".to_string()),
            ("image".to_string(), "nginx:1.27".to_string()),
            ("size".to_string(), String::new()),
            ("replicas".to_string(), "3".to_string()),
        ]);
        let intent = intent_of("site", &schema(), &form).unwrap();
        assert_eq!(
            Value::Object(intent),
            json!({"target": "site", "name": "blog", "image": "nginx:1.27", "replicas": 3, "public": false})
        );
        let bad = HashMap::from([("replicas".to_string(), "three".to_string())]);
        assert_eq!(
            intent_of("site", &schema(), &bad).unwrap_err(),
            "replicas: \"three\" is not a whole number"
        );
    }
}
