//! `observe.watch` and `observe.events` entries, compiled: their enqueue gates, the
//! `keyFrom.name` template that routes a watched object to its primary, and an event
//! entry's match fields written as templates.

use super::gate::Gate;
use super::{Error, template};
use crate::model::{EventWatch, KeyFrom, Watch};
use orkestra_expr::template::{Functions, Template};

/// One `observe.watch` entry with its gate and key template compiled.
#[derive(Debug)]
pub struct CompiledWatch {
    pub entry: Watch,
    /// The serve target that declares it (`None`: the CRD's own `observe`).
    pub target: Option<String>,
    pub gate: Option<Gate>,
    /// `keyFrom.name`: the primary's name, rendered over the watched object.
    pub key_name: Option<Template>,
}

impl CompiledWatch {
    pub fn compile(entry: &Watch, target: Option<&str>, functions: &Functions) -> Result<Self, Error> {
        let gate = Gate::compile_watch(entry.enqueue_gate.as_ref(), functions)?;
        let key_name = key_name(entry.key_from.as_ref(), functions)?;
        Ok(Self {
            entry: entry.clone(),
            target: target.map(str::to_string),
            gate,
            key_name,
        })
    }
}

/// One `observe.events` entry with its gate and templates compiled.
#[derive(Debug)]
pub struct CompiledEvents {
    pub name: String,
    /// The serve target that declares it (`None`: the CRD's own `observe`).
    pub target: Option<String>,
    /// The entry with its literal match fields only (templated ones are in `per_cr`).
    pub entry: EventWatch,
    pub gate: Option<Gate>,
    /// `keyFrom.name`: the primary's name, rendered over the Event.
    pub key_name: Option<Template>,
    /// Match fields written as templates (`regarding.name: "{{ .spec.databaseRef }}"`).
    pub per_cr: Vec<PerCrMatch>,
}

/// A match field written as a template: rendered over a primary CR, it says which Events
/// concern that CR (those whose field at `pointer` is the rendered text).
#[derive(Debug)]
pub struct PerCrMatch {
    /// Where the field is in an Event (`/regarding/name`).
    pub pointer: String,
    pub template: Template,
}

impl CompiledEvents {
    pub fn compile(name: &str, entry: &EventWatch, target: Option<&str>, functions: &Functions) -> Result<Self, Error> {
        let mut literal = entry.clone();
        let mut per_cr = Vec::new();
        let mut take = |field: &mut Option<String>, pointer: String, at: &[&str]| -> Result<(), Error> {
            let Some(text) = field.as_deref().filter(|t| t.contains("{{")) else {
                return Ok(());
            };
            let template = template(text, functions).map_err(|e| at.iter().rev().fold(e, |e, key| e.within(key)))?;
            per_cr.push(PerCrMatch { pointer, template });
            *field = None;
            Ok(())
        };
        take(&mut literal.reason, "/reason".into(), &["reason"])?;
        take(&mut literal.action, "/action".into(), &["action"])?;
        take(&mut literal.type_, "/type".into(), &["type"])?;
        let (controller, instance) = (&mut literal.reporting_controller, &mut literal.reporting_instance);
        take(controller, "/reportingController".into(), &["reportingController"])?;
        take(instance, "/reportingInstance".into(), &["reportingInstance"])?;
        take(&mut literal.namespace, "/metadata/namespace".into(), &["namespace"])?;
        take(&mut literal.name, "/metadata/name".into(), &["name"])?;
        for (key, object) in [("regarding", &mut literal.regarding), ("related", &mut literal.related)] {
            let Some(object) = object else { continue };
            for (field, value) in [
                ("apiVersion", &mut object.api_version),
                ("kind", &mut object.kind),
                ("name", &mut object.name),
                ("namespace", &mut object.namespace),
            ] {
                take(value, format!("/{key}/{field}"), &[key, field])?;
            }
        }
        let key_name = key_name(entry.key_from.as_ref(), functions)?;
        Ok(Self {
            name: name.to_string(),
            target: target.map(str::to_string),
            entry: literal,
            gate: Gate::compile_watch(entry.enqueue_gate.as_ref(), functions)?,
            key_name,
            per_cr,
        })
    }
}

/// `keyFrom.name`, compiled.
fn key_name(key_from: Option<&KeyFrom>, functions: &Functions) -> Result<Option<Template>, Error> {
    key_from
        .and_then(|k| k.name.as_ref())
        .map(|n| template(n, functions).map_err(|e| e.within("name").within("keyFrom")))
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templated_match_fields_move_out_of_the_literal_match() {
        let entry: EventWatch = serde_json::from_value(serde_json::json!({
            "reason": "DatabaseReady",
            "regarding": {"kind": "Database", "name": "{{ .spec.databaseRef }}"},
            "keyFrom": {"name": "{{ .regarding.name }}-app"},
        }))
        .unwrap();
        let compiled = CompiledEvents::compile("dbReady", &entry, None, Functions::builtin()).unwrap();
        assert_eq!(compiled.entry.reason.as_deref(), Some("DatabaseReady"));
        let regarding = compiled.entry.regarding.as_ref().unwrap();
        assert_eq!(
            (regarding.kind.as_deref(), regarding.name.as_deref()),
            (Some("Database"), None)
        );
        let pointers: Vec<&str> = compiled.per_cr.iter().map(|m| m.pointer.as_str()).collect();
        assert_eq!(pointers, ["/regarding/name"]);
        assert!(compiled.key_name.is_some());

        let bad: EventWatch = serde_json::from_value(serde_json::json!({"related": {"name": "{{ .spec.x "}})).unwrap();
        let error = CompiledEvents::compile("e", &bad, None, Functions::builtin()).unwrap_err();
        assert!(error.to_string().contains("related.name"), "{error}");
    }
}
