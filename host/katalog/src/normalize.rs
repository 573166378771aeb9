//! `reconcile.normalize`: spec values rewritten in memory before anything else of a
//! reconcile (mutation, validation, templates). Every expression sees the CR as written, so
//! none reads another's output; the result is never written back to the cluster.

use crate::error::Error;
use std::borrow::Cow;

use serde_json::Value;

use crate::fields::{set_path, typed};
use orkestra_expr::condition::ValueType;
use orkestra_expr::resolver::Resolver;
use orkestra_expr::template::{Functions, Template};

use crate::model::Normalize;

/// The compiled `normalize` of a box.
#[derive(Debug, Clone, Default)]
pub struct Normalizer {
    /// Full paths (`spec.image`) and what each becomes.
    fields: Vec<(Vec<String>, Template)>,
    /// Log every value it changes.
    pub audit: bool,
}

/// One value normalization changed: its path, before and after.
#[derive(Debug, PartialEq)]
pub struct Change {
    pub path: String,
    pub before: Value,
    pub after: Value,
}

impl Normalizer {
    /// Errors name the key under `normalize` (`spec.image: ...`).
    pub fn compile(spec: &Normalize, functions: &Functions) -> Result<Self, Error> {
        let mut fields = Vec::new();
        for (section, paths) in &spec.sections {
            if section != "spec" {
                return Err(Error::Field(format!(
                    "{section}: normalize rewrites spec values only (`spec: {{path: template}}`)"
                )));
            }
            for (path, text) in paths {
                let template = Template::compile(text, functions)
                    .map_err(|e| Error::Field(format!("{section}.{path}: {}", e.message)))?;
                let full = std::iter::once(section.clone()).chain(path.split('.').map(String::from));
                fields.push((full.collect(), template));
            }
        }
        Ok(Self {
            fields,
            audit: spec.audit,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The CR as its reconcile sees it, with what changed. A template that fails leaves its
    /// value as written and says why in the change list's place: `Err` entries.
    pub fn apply<'o>(&self, object: &'o Value, notes: &[Template]) -> (Cow<'o, Value>, Vec<Result<Change, Error>>) {
        if self.fields.is_empty() {
            return (Cow::Borrowed(object), Vec::new());
        }
        let resolver = Resolver::new(object, notes);
        let mut normalized = Cow::Borrowed(object);
        let mut changes = Vec::new();
        for (path, template) in &self.fields {
            let before = path
                .iter()
                .try_fold(object, |v, k| v.get(k.as_str()))
                .cloned()
                .unwrap_or(Value::Null);
            match typed(&resolver, template, ValueType::Auto) {
                Ok(after) if after != before => {
                    set_path(normalized.to_mut(), path, after.clone());
                    changes.push(Ok(Change {
                        path: path.join("."),
                        before,
                        after,
                    }));
                }
                Ok(_) => {}
                Err(why) => changes.push(Err(Error::Normalize(format!("{}: {why}", path.join("."))))),
            }
        }
        (normalized, changes)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn normalizer(yaml: &str) -> Result<Normalizer, String> {
        let node = crate::yaml::parse(yaml).unwrap();
        let (spec, problems) = crate::de::read::<Normalize>(&node, "").unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        Normalizer::compile(&spec, Functions::builtin()).map_err(String::from)
    }

    #[test]
    fn values_are_rewritten_from_the_cr_as_written_and_the_cr_is_copied_only_on_change() {
        let n = normalizer(
            "spec: {image: '{{ lower .spec.image }}', copy: '{{ .spec.image }}', replicas: '{{ .spec.replicas }}'}",
        )
        .unwrap();
        let cr = json!({"spec": {"image": "NGINX", "replicas": 2}});
        let (out, changes) = n.apply(&cr, &[]);
        assert_eq!(out["spec"]["image"], "nginx");
        assert_eq!(
            out["spec"]["copy"], "NGINX",
            "sees the CR as written, not the other's output"
        );
        assert_eq!(out["spec"]["replicas"], 2, "a number stays a number");
        let paths: Vec<String> = changes.into_iter().map(|c| c.unwrap().path).collect();
        assert_eq!(paths, ["spec.copy", "spec.image"]);
        let settled = json!({"spec": {"image": "nginx", "copy": "nginx", "replicas": 2}});
        assert!(matches!(n.apply(&settled, &[]).0, Cow::Borrowed(_)));
    }

    #[test]
    fn only_spec_is_rewritten_and_a_failing_template_is_reported() {
        let err = normalizer("status: {phase: x}").unwrap_err();
        assert!(err.contains("spec values only"), "{err}");
        let n = normalizer("spec: {n: '{{ add .spec.a 1 }}'}").unwrap();
        let cr = json!({"spec": {"a": "word"}});
        let (out, changes) = n.apply(&cr, &[]);
        assert_eq!(out["spec"].get("n"), None);
        assert!(changes[0].as_ref().unwrap_err().to_string().starts_with("spec.n: "));
    }
}
