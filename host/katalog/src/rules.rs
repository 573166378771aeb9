//! Admission rules: mutation (a `default` when the field is absent or empty, an `override`
//! always) and validation (`deny` refuses, `warn` is reported and the object goes on). They
//! run at two stages: at every reconcile (`deny` stops it before any child is applied), and
//! in the gateway's admission webhooks (`deny` refuses the write). Rules marked
//! `fires: {reconcile: false}` run at admission only.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::fields::{set_path, typed};
use crate::model::{Admission, RuleAction};
use orkestra_expr::condition::{Check, Conditions, ValueType};
use orkestra_expr::resolver::Resolver;
use orkestra_expr::template::{Functions, Template};

#[derive(Debug, Clone)]
struct Validation {
    field: String,
    check: Check,
    guard: Conditions,
    message: Template,
    action: RuleAction,
}

#[derive(Debug, Clone)]
struct Mutation {
    path: Vec<String>,
    value: MutationValue,
    overwrite: bool,
    value_type: ValueType,
    guard: Conditions,
}

/// What a mutation sets: a template's value in the rule's type, or a YAML value as written.
#[derive(Debug, Clone)]
enum MutationValue {
    Template(Template),
    Literal(Value),
}

/// The compiled reconcile-time rules of one CRD.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    validations: Vec<Validation>,
    mutations: Vec<Mutation>,
    mutate_first: bool,
}

/// What the validation rules said about one object.
#[derive(Debug, Default, PartialEq)]
pub struct Verdict {
    pub denied: Vec<String>,
    pub warnings: Vec<String>,
    /// Mutations that did not produce a value, and why; skipped, as upstream does, and
    /// the CR is still reconciled.
    pub skipped: Vec<String>,
}

/// When rules run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// At every reconcile of a CR.
    Reconcile,
    /// When the API server asks the gateway's webhook about a write.
    Admission,
}

impl Stage {
    /// Whether a rule with this `fires` value runs at this stage.
    fn runs(self, fires: &Option<Value>) -> bool {
        match self {
            Stage::Admission => true,
            Stage::Reconcile => fires.as_ref().and_then(|f| f["reconcile"].as_bool()).unwrap_or(true),
        }
    }
}

impl Rules {
    pub fn compile(admission: &Admission, functions: &Functions, stage: Stage) -> Result<Self, crate::error::Error> {
        let mut rules = Rules::default();
        if let Some(validation) = &admission.validation {
            for (i, rule) in validation.rules.iter().enumerate() {
                if !stage.runs(&rule.fires) {
                    continue;
                }
                let at = |e: String| crate::error::Error::Field(format!("admission.validation.rules[{i}].{e}"));
                rules.validations.push(Validation {
                    field: rule.field.clone().unwrap_or_default(),
                    check: Check::compile(&rule.condition(), functions)
                        .map_err(|e| at(format!("{}: {}", e.key, e.message)))?,
                    guard: Conditions::compile(&rule.when, &rule.or, functions)
                        .map_err(|(path, e)| at(format!("{path}.{}: {}", e.key, e.message)))?,
                    // Upstream lets a rule go without a message; say which rule it is.
                    message: match rule.message.is_empty() {
                        true => Template::compile("does not pass its validation rule", functions),
                        false => Template::compile(&rule.message, functions),
                    }
                    .map_err(|e| at(format!("message: {}", e.message)))?,
                    action: rule.action.unwrap_or_default(),
                });
            }
        }
        if let Some(mutation) = &admission.mutation {
            rules.mutate_first = mutation.mutate_first;
            for (i, rule) in mutation.rules.iter().enumerate() {
                if !stage.runs(&rule.fires) {
                    continue;
                }
                let at = |e: String| crate::error::Error::Field(format!("admission.mutation.rules[{i}].{e}"));
                let (written, overwrite) = match (&rule.override_, &rule.default) {
                    (Some(value), _) => (value, true),
                    (None, Some(value)) => (value, false),
                    (None, None) => return Err(at("default or override is required".into())),
                };
                let value = match written {
                    Value::String(text) => MutationValue::Template(
                        Template::compile(text, functions).map_err(|e| at(format!("value: {}", e.message)))?,
                    ),
                    other => MutationValue::Literal(other.clone()),
                };
                rules.mutations.push(Mutation {
                    path: rule.field.split('.').map(String::from).collect(),
                    value,
                    overwrite,
                    value_type: rule.value_type.unwrap_or(ValueType::Auto),
                    guard: Conditions::compile(&rule.when, &rule.or, functions)
                        .map_err(|(path, e)| at(format!("{path}.{}: {}", e.key, e.message)))?,
                });
            }
        }
        Ok(rules)
    }

    /// Whether there are validation rules (and so Validation* conditions to report).
    pub fn validates(&self) -> bool {
        !self.validations.is_empty()
    }

    /// Whether there are mutation rules.
    pub fn mutates(&self) -> bool {
        !self.mutations.is_empty()
    }

    /// Mutates and validates in the declared order; returns the object to reconcile (the
    /// input itself unless a mutation wrote to it) and the verdict on it. The rules see
    /// `context` besides the object (the stamps, the admission calls' `.external`).
    pub fn run<'o>(
        &self,
        object: &'o Value,
        notes: &[Template],
        context: &Map<String, Value>,
    ) -> (Cow<'o, Value>, Verdict) {
        let mut verdict = Verdict::default();
        if self.mutate_first {
            let mutated = self.mutate(object, notes, context, &mut verdict);
            self.validate(&mutated, notes, context, &mut verdict);
            (mutated, verdict)
        } else {
            self.validate(object, notes, context, &mut verdict);
            (self.mutate(object, notes, context, &mut verdict), verdict)
        }
    }

    /// The mutations alone: what a mutating webhook turns into a patch (the API server runs
    /// mutating webhooks before validating ones, so there the order is fixed).
    pub fn mutated<'o>(
        &self,
        object: &'o Value,
        notes: &[Template],
        context: &Map<String, Value>,
    ) -> (Cow<'o, Value>, Verdict) {
        let mut verdict = Verdict::default();
        let mutated = self.mutate(object, notes, context, &mut verdict);
        (mutated, verdict)
    }

    /// The validations alone: what a validating webhook answers.
    pub fn verdict(&self, object: &Value, notes: &[Template], context: &Map<String, Value>) -> Verdict {
        let mut verdict = Verdict::default();
        self.validate(object, notes, context, &mut verdict);
        verdict
    }

    fn mutate<'o>(
        &self,
        object: &'o Value,
        notes: &[Template],
        context: &Map<String, Value>,
        verdict: &mut Verdict,
    ) -> Cow<'o, Value> {
        let mut mutated = Cow::Borrowed(object);
        for rule in &self.mutations {
            let resolver = Resolver::in_context(&mutated, notes, context);
            if !rule.guard.passes(&resolver, None) {
                continue;
            }
            let current = rule.path.iter().try_fold(&*mutated, |v, k| v.get(k.as_str()));
            let empty = matches!(current, None | Some(Value::Null)) || current == Some(&Value::String(String::new()));
            if !rule.overwrite && !empty {
                continue;
            }
            let value = match &rule.value {
                MutationValue::Template(template) => typed(&resolver, template, rule.value_type),
                MutationValue::Literal(value) => Ok(value.clone()),
            };
            match value {
                Ok(value) => set_path(mutated.to_mut(), &rule.path, value),
                Err(why) => verdict
                    .skipped
                    .push(format!("field \"{}\": {why}", rule.path.join("."))),
            }
        }
        mutated
    }

    fn validate(&self, object: &Value, notes: &[Template], context: &Map<String, Value>, verdict: &mut Verdict) {
        let resolver = Resolver::in_context(object, notes, context);
        for rule in &self.validations {
            if !rule.guard.passes(&resolver, None) || rule.check.passes(&resolver, None) {
                continue;
            }
            let message = resolver.render(&rule.message).unwrap_or_else(|e| e.message);
            let text = if rule.field.is_empty() {
                message
            } else {
                format!("field \"{}\": {message}", rule.field)
            };
            match rule.action {
                RuleAction::Deny => verdict.denied.push(text),
                RuleAction::Warn => verdict.warnings.push(text),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules_at(yaml: &str, stage: Stage) -> Rules {
        let node = crate::yaml::parse(yaml).unwrap();
        let (admission, problems) = crate::de::read::<Admission>(&node, "admission").unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        Rules::compile(&admission, Functions::builtin(), stage).unwrap()
    }

    fn rules(yaml: &str) -> Rules {
        rules_at(yaml, Stage::Reconcile)
    }

    const RULES: &str = "
validation:
  rules:
    - {field: spec.replicas, lessThanOrEqual: '5', valueType: int, message: 'at most 5, got {{ .spec.replicas }}'}
    - {field: spec.image, notContains: latest, action: warn, message: pin the image}
    - {field: spec.tier, exists: true, message: a tier is required, fires: {reconcile: false}}
mutation:
  rules:
    - {field: spec.replicas, default: '1', valueType: int}
    - {field: spec.tier, override: gold, when: [{field: spec.vip, equals: 'true'}]}
";

    #[test]
    fn deny_and_warn_name_the_field_and_render_the_message() {
        let rules = rules(RULES);
        let input = json!({"spec": {"replicas": 9, "image": "app:latest"}});
        let (_, verdict) = rules.run(&input, &[], &Map::new());
        assert_eq!(verdict.denied, ["field \"spec.replicas\": at most 5, got 9"]);
        assert_eq!(verdict.warnings, ["field \"spec.image\": pin the image"]);
        let input = json!({"spec": {"replicas": 2, "image": "app:1.0"}});
        let (_, verdict) = rules.run(&input, &[], &Map::new());
        assert_eq!(
            verdict,
            Verdict::default(),
            "admission-only rules do not fire at reconcile"
        );
        let (_, verdict) = rules_at(RULES, Stage::Admission).run(&input, &[], &Map::new());
        assert_eq!(
            verdict.denied,
            ["field \"spec.tier\": a tier is required"],
            "but at admission"
        );
    }

    #[test]
    fn defaults_fill_only_what_is_missing_and_overrides_follow_their_conditions() {
        let rules = rules(RULES);
        let input = json!({"spec": {"vip": true}});
        let (mutated, _) = rules.run(&input, &[], &Map::new());
        assert_eq!(mutated["spec"]["replicas"], 1);
        assert_eq!(mutated["spec"]["tier"], "gold");
        let input = json!({"spec": {"replicas": 3, "tier": "bronze"}});
        let (mutated, _) = rules.run(&input, &[], &Map::new());
        assert_eq!(mutated["spec"], json!({"replicas": 3, "tier": "bronze"}));
    }

    #[test]
    fn mutate_first_decides_what_validation_sees() {
        let yaml = "
validation:
  rules: [{field: spec.replicas, exists: true, message: replicas missing}]
mutation:
  mutateFirst: MF
  rules: [{field: spec.replicas, default: '2', valueType: int}]
";
        let input = json!({"spec": {}});
        let (_, after) = rules(&yaml.replace("MF", "true")).run(&input, &[], &Map::new());
        assert!(after.denied.is_empty(), "validation sees the default");
        let input = json!({"spec": {}});
        let (mutated, before) = rules(&yaml.replace("MF", "false")).run(&input, &[], &Map::new());
        assert_eq!(before.denied, ["field \"spec.replicas\": replicas missing"]);
        assert_eq!(mutated["spec"]["replicas"], 2);
    }

    #[test]
    fn the_object_is_copied_only_when_a_mutation_writes() {
        let rules = rules(RULES);
        let settled = json!({"spec": {"replicas": 3, "image": "app:1.0"}});
        let (object, _) = rules.run(&settled, &[], &Map::new());
        assert!(matches!(object, Cow::Borrowed(_)), "nothing to default: no copy");
        let input = json!({"spec": {}});
        let (object, _) = rules.run(&input, &[], &Map::new());
        assert!(matches!(object, Cow::Owned(_)));
    }

    #[test]
    fn a_mutation_that_does_not_convert_is_skipped_and_said() {
        let rules =
            rules("mutation:\n  rules: [{field: spec.replicas, default: '{{ .spec.name }}', valueType: int}]\n");
        let input = json!({"spec": {"name": "web"}});
        let (object, verdict) = rules.run(&input, &[], &Map::new());
        assert_eq!(object["spec"].get("replicas"), None);
        assert_eq!(
            verdict.skipped,
            ["field \"spec.replicas\": \"web\" does not convert to type int"]
        );
    }

    #[test]
    fn upstream_forms_a_rule_without_a_message_and_defaults_written_as_yaml_values() {
        let rules = rules(
            "
validation:
  rules: [{field: spec.image, operator: exists, action: deny}]
mutation:
  rules:
    - {field: spec.env, default: {}}
    - {field: spec.replicas, default: 2}
    - {field: spec.ports, default: [80]}
",
        );
        let input = json!({"spec": {}});
        let (mutated, verdict) = rules.run(&input, &[], &Map::new());
        assert_eq!(
            verdict.denied,
            ["field \"spec.image\": does not pass its validation rule"]
        );
        assert_eq!(mutated["spec"], json!({"env": {}, "replicas": 2, "ports": [80]}));
    }
}
