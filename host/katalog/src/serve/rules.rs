//! Admission rules made from `serve`: a field the Serve API requires, or holds to an
//! `enum`, or defaults or overrides, is held to the same by the admission webhooks, so a CR
//! written with kubectl meets what an intent would. Admission only: at reconcile a CR is
//! checked against the Katalog's own rules, as before.

use serde_json::{Value, json};

use crate::model::{Admission, MutationRule, MutationSpec, Serve, ServeField, ValidationRule, ValidationSpec};
use orkestra_expr::condition::ListValue;

/// `admission` with the rules `serve` implies appended (admission-only).
pub fn with_serve_rules(admission: &Admission, serve: Option<&Serve>) -> Admission {
    let Some(serve) = serve.filter(|s| s.enabled) else {
        return admission.clone();
    };
    let mut validations = Vec::new();
    let mut mutations = Vec::new();
    let admission_only = Some(json!({"reconcile": false}));
    let buckets = [
        ("fields", "spec", &serve.fields),
        ("labels", "metadata.labels", &serve.labels),
        ("annotations", "metadata.annotations", &serve.annotations),
    ];
    for (bucket, base, fields) in buckets {
        for (name, field) in fields {
            let Some(path) = stored_path(base, name, field) else {
                continue;
            };
            // A field shown only under conditions (`when`/`or`, in intent terms) is not
            // required of every CR.
            let conditional = !field.when.is_empty() || !field.or.is_empty();
            if field.required && !conditional && field.disabled.is_none() {
                validations.push(ValidationRule {
                    field: Some(path.clone()),
                    exists: Some(true),
                    message: format!("is required (serve.{bucket}.{name})"),
                    fires: admission_only.clone(),
                    ..ValidationRule::default()
                });
            }
            if !field.enum_.is_empty() {
                let allowed: Vec<String> = field.enum_.iter().map(text).collect();
                validations.push(ValidationRule {
                    field: Some(path.clone()),
                    in_: Some(ListValue(allowed.clone())),
                    message: format!("must be one of {} (serve.{bucket}.{name})", allowed.join(", ")),
                    when: vec![orkestra_expr::condition::ConditionSpec {
                        field: Some(path.clone()),
                        exists: Some(true),
                        ..Default::default()
                    }],
                    fires: admission_only.clone(),
                    ..ValidationRule::default()
                });
            }
            if field.default.is_some() || field.override_.is_some() {
                mutations.push(MutationRule {
                    field: path,
                    default: field.default.clone(),
                    override_: field.override_.clone(),
                    fires: admission_only.clone(),
                    ..MutationRule::default()
                });
            }
        }
    }
    let mut out = admission.clone();
    if !validations.is_empty() {
        out.validation
            .get_or_insert_with(ValidationSpec::default)
            .rules
            .extend(validations);
    }
    if !mutations.is_empty() {
        out.mutation
            .get_or_insert_with(MutationSpec::default)
            .rules
            .extend(mutations);
    }
    out
}

/// Where a field's value is stored: `spec.<path or name>`; `None` for a field written to
/// several places (`values`), which has no one place to check.
fn stored_path(base: &str, name: &str, field: &ServeField) -> Option<String> {
    if !field.values.is_empty() {
        return None;
    }
    let path = field.path.as_deref().unwrap_or(name);
    Some(match base {
        "spec" => format!("spec.{}", path.trim_start_matches("spec.")),
        _ => format!("{base}.{name}"),
    })
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::rules::{Rules, Stage};
    use orkestra_expr::template::Functions;

    fn serve() -> Serve {
        serde_json::from_value(json!({
            "enabled": true,
            "fields": {
                "image": {"required": true},
                "tier": {"enum": ["gold", "silver"], "path": "plan.tier"},
                "replicas": {"default": 2},
                "approval": {"required": true, "when": [{"field": "env", "equals": "prod"}]},
                "split": {"required": true, "values": {"spec.a": "{{ .value }}"}},
            },
            "labels": {"team": {"required": true, "type": "string"}},
        }))
        .unwrap()
    }

    fn admission_rules() -> Rules {
        let admission = with_serve_rules(&Admission::default(), Some(&serve()));
        Rules::compile(&admission, Functions::builtin(), Stage::Admission).unwrap()
    }

    #[test]
    fn a_kubectl_write_meets_what_an_intent_would() {
        let rules = admission_rules();
        let bare = json!({"metadata": {"name": "a"}, "spec": {}});
        let verdict = rules.verdict(&bare, &[], &Default::default());
        assert_eq!(
            verdict.denied,
            [
                "field \"spec.image\": is required (serve.fields.image)",
                "field \"metadata.labels.team\": is required (serve.labels.team)"
            ],
            "conditional and fanned-out fields are not required"
        );
        let wrong = json!({"metadata": {"labels": {"team": "a"}}, "spec": {"image": "x", "plan": {"tier": "bronze"}}});
        let verdict = rules.verdict(&wrong, &[], &Default::default());
        assert_eq!(
            verdict.denied,
            ["field \"spec.plan.tier\": must be one of gold, silver (serve.fields.tier)"]
        );
        let (mutated, _) = rules.mutated(&wrong, &[], &Default::default());
        assert_eq!(mutated["spec"]["replicas"], 2, "the default lands");
    }

    #[test]
    fn the_reconcile_stage_does_not_see_them() {
        let admission = with_serve_rules(&Admission::default(), Some(&serve()));
        let rules = Rules::compile(&admission, Functions::builtin(), Stage::Reconcile).unwrap();
        let verdict = rules.verdict(&json!({"spec": {}}), &[], &Default::default());
        assert!(verdict.denied.is_empty());
    }
}
