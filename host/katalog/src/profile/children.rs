//! Profiles on child resources: `resources: {profile: small}` on a workload, a probe's
//! `profile: standard`, `securityContext`/`podSecurity` presets, `rollingUpdate`, an HPA's or
//! a PDB's `behavior.profile`, and `profile:` on a ResourceQuota, NetworkPolicy or LimitRange
//! entry. A name written out is expanded at load (an unknown one is an error that names the
//! closest); a templated name is kept with every preset of its class and chosen when the
//! entry renders, so an unknown name fails only that CR's reconcile. A profile and the
//! fields it sets are never written together.
//!
//! The built-ins follow upstream's documented tables; a user profile of the same name
//! (`profiles.<class>`) replaces one.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::registry::Registry;
use crate::model::ProfileChoice;
use orkestra_expr::text::closest;

/// Where in an entry a class's `profile:` is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holder {
    /// On the entry itself.
    Entry,
    /// In one of its fields (`resources`, `behavior`, ...).
    Field(&'static str),
    /// In each probe of `probes` (startup, liveness, readiness).
    Probes,
}

/// A profile class for child resources.
#[derive(Debug)]
pub struct Class {
    pub key: &'static str,
    holder: Holder,
    kinds: &'static [&'static str],
    /// The fields a preset of this class sets, which may not be written beside `profile`
    /// (`None`: every other field of the holder).
    sets: Option<&'static [&'static str]>,
}

const WORKLOADS: &[&str] = &["deployments", "statefulSets", "replicaSets", "pods", "jobs", "cronJobs"];

pub const CLASSES: &[Class] = &[
    Class {
        key: "resources",
        holder: Holder::Field("resources"),
        kinds: WORKLOADS,
        sets: Some(&["requests", "limits"]),
    },
    Class {
        key: "probes",
        holder: Holder::Probes,
        kinds: &["deployments", "statefulSets", "replicaSets", "pods"],
        sets: Some(&[
            "initialDelaySeconds",
            "periodSeconds",
            "failureThreshold",
            "successThreshold",
            "timeoutSeconds",
        ]),
    },
    Class {
        key: "containerSecurity",
        holder: Holder::Field("securityContext"),
        kinds: WORKLOADS,
        sets: None,
    },
    Class {
        key: "podSecurity",
        holder: Holder::Field("podSecurity"),
        kinds: WORKLOADS,
        sets: None,
    },
    Class {
        key: "rollingUpdate",
        holder: Holder::Field("rollingUpdate"),
        kinds: &["deployments", "statefulSets"],
        sets: Some(&["maxSurge", "maxUnavailable"]),
    },
    Class {
        key: "hpa",
        holder: Holder::Field("behavior"),
        kinds: &["hpa"],
        sets: Some(&["scaleUp", "scaleDown"]),
    },
    Class {
        key: "pdb",
        holder: Holder::Field("behavior"),
        kinds: &["pdb"],
        sets: Some(&["minAvailable", "maxUnavailable"]),
    },
    // Also on the entry itself, beside whichever of the two it does not set.
    Class {
        key: "pdb",
        holder: Holder::Entry,
        kinds: &["pdb"],
        sets: Some(&["minAvailable", "maxUnavailable"]),
    },
    Class {
        key: "resourceQuotas",
        holder: Holder::Entry,
        kinds: &["resourceQuotas"],
        sets: Some(&["hard"]),
    },
    Class {
        key: "networkPolicies",
        holder: Holder::Entry,
        kinds: &["networkPolicies"],
        sets: Some(&["ingress", "egress", "policyTypes"]),
    },
    Class {
        key: "limitRanges",
        holder: Holder::Entry,
        kinds: &["limitRanges"],
        sets: Some(&["limits"]),
    },
];

const PROBES: [&str; 3] = ["startup", "liveness", "readiness"];

/// One problem with a profile in an entry: the field path under the entry, and the message.
pub type Finding = (String, String);

/// Expands the profiles written out in one entry of kind `kind` (its `fields`), and returns
/// those chosen per CR. A profile of a class the kind does not take is left for validation,
/// which reports the field.
pub fn expand(kind: &str, fields: &mut Map<String, Value>, registry: &Registry) -> (Vec<ProfileChoice>, Vec<Finding>) {
    let (mut choices, mut findings) = (Vec::new(), Vec::new());
    for class in CLASSES.iter().filter(|c| c.kinds.contains(&kind)) {
        for path in holders(class, fields) {
            let at = path.iter().map(|p| format!("{p}.")).collect::<String>() + "profile";
            let Some(holder) = holder_mut(fields, &path) else {
                continue;
            };
            let Some(name) = holder.get("profile").cloned() else {
                continue;
            };
            let written: Vec<&String> = holder
                .keys()
                .filter(|k| *k != "profile" && class.sets.is_none_or(|sets| sets.contains(&k.as_str())))
                .collect();
            if !written.is_empty() {
                let keys: Vec<&str> = written.iter().map(|k| k.as_str()).collect();
                findings.push((
                    at,
                    format!(
                        "a profile and the fields it sets ({}) are not written together: keep one",
                        keys.join(", ")
                    ),
                ));
                continue;
            }
            match name.as_str() {
                Some(name) if name.contains("{{") => choices.push(ProfileChoice {
                    path,
                    class: class.key,
                    options: options(class, registry),
                }),
                Some(name) => match preset(class, name, registry) {
                    Ok(preset) => place(class.key, fields, &path, &preset),
                    Err(error) => findings.push((at, error.to_string())),
                },
                None => findings.push((at, format!("must be a profile name, found {name}"))),
            }
        }
    }
    (choices, findings)
}

/// The preset of `class` named `name`: the user's, else the built-in; unknown names the
/// closest.
pub fn preset(class: &Class, name: &str, registry: &Registry) -> Result<Map<String, Value>, crate::error::Error> {
    if let Some(user) = registry.get(class.key, name) {
        return Ok(user.body.clone());
    }
    if let Some(built_in) = built_in(class.key, &name.to_lowercase()) {
        return Ok(built_in);
    }
    Err(crate::error::Error::Field(unknown(
        class.key,
        name,
        options(class, registry).keys().map(String::as_str),
    )))
}

/// The message for an unknown profile name.
pub fn unknown<'a>(class: &str, name: &str, known: impl Iterator<Item = &'a str>) -> String {
    let known: Vec<&str> = known.collect();
    let hint = match closest(name, &known) {
        Some(best) => format!("; the closest is \"{best}\""),
        None => String::new(),
    };
    format!(
        "unknown {class} profile \"{name}\"{hint} (known: {}; or define it under profiles.{class})",
        known.join(", "),
    )
}

/// Every preset of `class`: the built-ins, then the user's over them.
fn options(class: &Class, registry: &Registry) -> BTreeMap<String, Value> {
    let mut options: BTreeMap<String, Value> = BUILT_IN_NAMES
        .iter()
        .filter(|(key, _)| *key == class.key)
        .flat_map(|(_, names)| names.iter())
        .filter_map(|name| Some((name.to_string(), Value::Object(built_in(class.key, name)?))))
        .collect();
    for user in registry.of(class.key) {
        options.insert(user.name.to_lowercase(), Value::Object(user.body.clone()));
    }
    options
}

/// The holders of `class` present in `fields`, as paths.
fn holders(class: &Class, fields: &Map<String, Value>) -> Vec<Vec<String>> {
    match class.holder {
        Holder::Entry => vec![Vec::new()],
        Holder::Field(field) => match fields.get(field) {
            Some(Value::Object(_)) => vec![vec![field.to_string()]],
            _ => Vec::new(),
        },
        Holder::Probes => PROBES
            .iter()
            .filter(|probe| {
                fields
                    .get("probes")
                    .and_then(|p| p.get(**probe))
                    .is_some_and(Value::is_object)
            })
            .map(|probe| vec!["probes".to_string(), probe.to_string()])
            .collect(),
    }
}

fn holder_mut<'a>(fields: &'a mut Map<String, Value>, path: &[String]) -> Option<&'a mut Map<String, Value>> {
    let mut holder = fields;
    for step in path {
        holder = holder.get_mut(step)?.as_object_mut()?;
    }
    Some(holder)
}

/// Writes `preset` where the profile was: its fields replace `profile` in the holder. An
/// HPA preset's CPU target and replica bounds go on the entry, where the entry does not set
/// them itself.
pub fn place(class: &str, fields: &mut Map<String, Value>, path: &[String], preset: &Map<String, Value>) {
    let mut to_entry = Vec::new();
    let mut to_holder: Vec<(String, Value)> = Vec::new();
    for (key, value) in preset {
        if class != "hpa" {
            to_holder.push((key.clone(), value.clone()));
            continue;
        }
        match (key.as_str(), value) {
            ("behavior", Value::Object(behavior)) => {
                to_holder.extend(behavior.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            ("scaleUp" | "scaleDown", _) => to_holder.push((key.clone(), value.clone())),
            _ => to_entry.push((key.clone(), value.clone())),
        }
    }
    for (key, value) in to_entry {
        fields.entry(key).or_insert(value);
    }
    if let Some(holder) = holder_mut(fields, path) {
        holder.remove("profile");
        holder.extend(to_holder);
    }
}

/// The built-in names of each class.
const BUILT_IN_NAMES: &[(&str, &[&str])] = &[
    (
        "resources",
        &[
            "tiny",
            "small",
            "medium",
            "large",
            "burst",
            "steady",
            "compute-heavy",
            "memory-heavy",
        ],
    ),
    ("probes", &["fast", "standard", "patient", "slow-start"]),
    ("containerSecurity", &["baseline", "restricted", "hardened"]),
    ("podSecurity", &["baseline", "restricted", "hardened"]),
    ("rollingUpdate", &["safe", "fast", "blue-green"]),
    ("hpa", &["web", "api", "latency-sensitive", "batch", "cost-optimized"]),
    ("pdb", &["zero-downtime", "rolling", "relaxed"]),
    ("resourceQuotas", &["small", "medium", "large", "xlarge"]),
    (
        "networkPolicies",
        &[
            "deny-all",
            "deny-all-ingress",
            "deny-all-egress",
            "allow-same-namespace",
            "allow-dns-egress",
        ],
    ),
];

/// A built-in preset (values in the form the API server stores, so a settled child compares
/// equal and is not written again).
fn built_in(class: &str, name: &str) -> Option<Map<String, Value>> {
    let value = match (class, name) {
        ("resources", _) => {
            let (rc, lc, rm, lm) = match name {
                "tiny" => ("25m", "100m", "64Mi", "128Mi"),
                "small" => ("100m", "500m", "128Mi", "512Mi"),
                "medium" => ("250m", "1", "256Mi", "1Gi"),
                "large" => ("500m", "2", "512Mi", "2Gi"),
                "burst" => ("200m", "2", "256Mi", "2Gi"),
                "steady" => ("300m", "600m", "256Mi", "512Mi"),
                "compute-heavy" => ("1", "2", "512Mi", "1Gi"),
                "memory-heavy" => ("250m", "500m", "1Gi", "2Gi"),
                _ => return None,
            };
            json!({"requests": {"cpu": rc, "memory": rm}, "limits": {"cpu": lc, "memory": lm}})
        }
        ("probes", _) => {
            let (delay, period, failures, timeout) = match name {
                "fast" => (5, 10, 2, 5),
                "standard" => (15, 20, 3, 10),
                "patient" => (30, 30, 5, 10),
                "slow-start" => (0, 10, 30, 10),
                _ => return None,
            };
            json!({"initialDelaySeconds": delay, "periodSeconds": period, "failureThreshold": failures, "timeoutSeconds": timeout})
        }
        ("containerSecurity", "baseline") => {
            json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["NET_RAW"]}})
        }
        ("containerSecurity", "restricted") => {
            json!({"allowPrivilegeEscalation": false, "runAsNonRoot": true, "capabilities": {"drop": ["ALL"]}})
        }
        ("containerSecurity", "hardened") => json!({
            "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "runAsNonRoot": true,
            "capabilities": {"drop": ["ALL"]},
        }),
        ("podSecurity", "baseline") => json!({"runAsNonRoot": false}),
        ("podSecurity", "restricted") => json!({"runAsNonRoot": true, "runAsUser": 1000}),
        ("podSecurity", "hardened") => {
            json!({"runAsNonRoot": true, "runAsUser": 65534, "runAsGroup": 65534, "fsGroup": 65534})
        }
        ("rollingUpdate", "safe") => json!({"maxSurge": 1, "maxUnavailable": 0}),
        ("rollingUpdate", "fast") => json!({"maxSurge": "25%", "maxUnavailable": "25%"}),
        ("rollingUpdate", "blue-green") => json!({"maxSurge": "100%", "maxUnavailable": 0}),
        ("hpa", _) => hpa(name)?,
        ("pdb", "zero-downtime") => json!({"minAvailable": "100%"}),
        ("pdb", "rolling") => json!({"maxUnavailable": 1}),
        ("pdb", "relaxed") => json!({"maxUnavailable": "25%"}),
        ("resourceQuotas", _) => {
            let (pods, cpu, memory, request_cpu, request_memory) = match name {
                "small" => ("10", "2", "4Gi", "1", "2Gi"),
                "medium" => ("20", "4", "8Gi", "2", "4Gi"),
                "large" => ("50", "8", "16Gi", "4", "8Gi"),
                "xlarge" => ("100", "16", "32Gi", "8", "16Gi"),
                _ => return None,
            };
            json!({"hard": {
                "pods": pods, "cpu": cpu, "memory": memory,
                "requests.cpu": request_cpu, "requests.memory": request_memory,
                "limits.cpu": cpu, "limits.memory": memory,
            }})
        }
        // No rule lists at all (rather than empty ones, which the API server drops): with its
        // policy type named, a policy without rules denies that direction.
        ("networkPolicies", "deny-all") => json!({"policyTypes": ["Ingress", "Egress"]}),
        ("networkPolicies", "deny-all-ingress") => json!({"policyTypes": ["Ingress"]}),
        ("networkPolicies", "deny-all-egress") => json!({"policyTypes": ["Egress"]}),
        ("networkPolicies", "allow-same-namespace") => {
            json!({"policyTypes": ["Ingress"], "ingress": [{"from": [{"podSelector": {}}]}]})
        }
        ("networkPolicies", "allow-dns-egress") => json!({
            "policyTypes": ["Egress"],
            "egress": [{"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}],
        }),
        _ => return None,
    };
    value.as_object().cloned()
}

/// An HPA behaviour preset and its CPU target.
fn hpa(name: &str) -> Option<Value> {
    // (cpu target, up window, up policies, up select, down window, down policies, down select)
    type Policy = (&'static str, i64, i64);
    let (cpu, up_window, up, up_select, down_window, down, down_select): (
        i64,
        i64,
        &[Policy],
        &str,
        i64,
        &[Policy],
        &str,
    ) = match name {
        "web" => (
            70,
            0,
            &[("Percent", 100, 15), ("Pods", 4, 15)],
            "Max",
            300,
            &[("Percent", 10, 60)],
            "Min",
        ),
        "api" => (
            60,
            0,
            &[("Percent", 100, 15), ("Pods", 4, 15)],
            "Max",
            600,
            &[("Percent", 5, 60)],
            "Min",
        ),
        "latency-sensitive" => (
            50,
            0,
            &[("Percent", 200, 15), ("Pods", 10, 15)],
            "Max",
            900,
            &[("Percent", 5, 120)],
            "Min",
        ),
        "batch" => (
            80,
            30,
            &[("Percent", 100, 60)],
            "Max",
            120,
            &[("Percent", 50, 60)],
            "Min",
        ),
        "cost-optimized" => (
            80,
            180,
            &[("Percent", 25, 60)],
            "Min",
            60,
            &[("Percent", 50, 60)],
            "Max",
        ),
        _ => return None,
    };
    let policies = |list: &[Policy]| -> Vec<Value> {
        list.iter()
            .map(|(kind, value, period)| json!({"type": kind, "value": value, "periodSeconds": period}))
            .collect()
    };
    Some(json!({
        "targetCPUUtilizationPercentage": cpu,
        "behavior": {
            "scaleUp": {"stabilizationWindowSeconds": up_window, "selectPolicy": up_select, "policies": policies(up)},
            "scaleDown": {"stabilizationWindowSeconds": down_window, "selectPolicy": down_select, "policies": policies(down)},
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn a_written_name_expands_in_place_and_a_templated_one_is_kept_with_its_options() {
        let mut deployment = fields(json!({
            "image": "x",
            "resources": {"profile": "Small"},
            "probes": {"liveness": {"type": "http", "path": "/h", "profile": "standard"},
                       "readiness": {"profile": "{{ .spec.probe }}"}},
            "securityContext": {"profile": "hardened"},
            "rollingUpdate": {"profile": "safe"},
        }));
        let (choices, findings) = expand("deployments", &mut deployment, &Registry::default());
        assert!(findings.is_empty(), "{findings:?}");
        assert_eq!(
            deployment["resources"],
            json!({"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}})
        );
        assert_eq!(deployment["probes"]["liveness"]["type"], "http", "what to check stays");
        assert_eq!(deployment["probes"]["liveness"]["failureThreshold"], 3);
        assert_eq!(deployment["securityContext"]["readOnlyRootFilesystem"], true);
        assert_eq!(deployment["rollingUpdate"], json!({"maxSurge": 1, "maxUnavailable": 0}));
        assert_eq!(choices.len(), 1);
        assert_eq!(choices[0].path, ["probes", "readiness"]);
        assert!(choices[0].options.contains_key("slow-start"));
    }

    #[test]
    fn an_hpa_preset_sets_behaviour_and_a_cpu_target_the_entry_does_not_set_itself() {
        let mut hpa =
            fields(json!({"maxReplicas": 5, "targetCPUUtilizationPercentage": 55, "behavior": {"profile": "web"}}));
        let (_, findings) = expand("hpa", &mut hpa, &Registry::default());
        assert!(findings.is_empty(), "{findings:?}");
        assert_eq!(hpa["targetCPUUtilizationPercentage"], 55, "the entry's own target wins");
        assert_eq!(hpa["behavior"]["scaleDown"]["stabilizationWindowSeconds"], 300);
        assert!(hpa["behavior"].get("profile").is_none());
    }

    #[test]
    fn mixing_unknown_names_and_non_strings_are_findings() {
        let mut deployment = fields(json!({
            "resources": {"profile": "burst", "requests": {"cpu": "1"}},
            "podSecurity": {"profile": "restrictd"},
            "rollingUpdate": {"profile": 3},
        }));
        let (_, findings) = expand("deployments", &mut deployment, &Registry::default());
        assert_eq!(findings.len(), 3, "{findings:?}");
        assert_eq!(findings[0].0, "resources.profile");
        assert!(
            findings[0].1.contains("(requests) are not written together"),
            "{findings:?}"
        );
        assert_eq!(findings[1].0, "podSecurity.profile");
        assert!(
            findings[1]
                .1
                .contains("unknown podSecurity profile \"restrictd\"; the closest is \"restricted\""),
            "{findings:?}"
        );
        assert!(findings[2].1.contains("must be a profile name"), "{findings:?}");
    }

    #[test]
    fn every_built_in_name_has_a_preset() {
        for (class, names) in BUILT_IN_NAMES {
            for name in *names {
                assert!(built_in(class, name).is_some(), "{class} {name}");
            }
        }
    }
}
