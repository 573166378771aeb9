//! The user's profiles: every `profiles:` block of the Katalog files and of the motifs they
//! import, by class and name. A class is written as a list of `{name, description, ...}`
//! (upstream's form) or as a map of name to preset. A name defined twice in one class is an
//! error naming both places; the same name in two classes is fine.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::de::Problem;
use crate::yaml::Pos;
use orkestra_expr::text::closest;

/// Every profile class a `profiles:` block may hold.
pub const CLASSES: &[&str] = &[
    "reconciler",
    "resources",
    "probes",
    "containerSecurity",
    "podSecurity",
    "hpa",
    "pdb",
    "rollingUpdate",
    "resourceQuotas",
    "networkPolicies",
    "limitRanges",
];

/// Where a `profiles:` block comes from, for conflict messages.
pub struct Source<'a> {
    /// `the katalog`, `motif ./motifs/x.yaml`.
    pub origin: String,
    pub profiles: &'a Value,
    /// Where each class is written: `(class, index)` to a position.
    pub pos: &'a dyn Fn(&str, Option<usize>) -> Pos,
}

/// A user preset: its body (without `name` and `description`) and where it is defined.
#[derive(Debug, Clone)]
pub struct Preset {
    pub name: String,
    pub body: Map<String, Value>,
    pub origin: String,
}

/// User presets by class, then by lowercase name (names match case-insensitively, as
/// upstream's built-ins do).
#[derive(Debug, Clone, Default)]
pub struct Registry {
    classes: BTreeMap<String, BTreeMap<String, Preset>>,
}

impl Registry {
    /// Reads every source in order; problems go to `problems`.
    pub fn read(sources: &[Source<'_>], problems: &mut Vec<Problem>) -> Self {
        let mut registry = Self::default();
        for source in sources {
            registry.add(source, problems);
        }
        registry
    }

    fn add(&mut self, source: &Source<'_>, problems: &mut Vec<Problem>) {
        let Value::Object(classes) = source.profiles else {
            problems.push(Problem {
                path: "profiles".into(),
                pos: (source.pos)("", None),
                message: format!("must be a map of profile classes ({})", CLASSES.join(", ")),
            });
            return;
        };
        for (class, presets) in classes {
            if !CLASSES.contains(&class.as_str()) {
                let best = closest(class, CLASSES).unwrap_or("resources");
                problems.push(Problem {
                    path: format!("profiles.{class}"),
                    pos: (source.pos)(class, None),
                    message: format!("unknown profile class \"{class}\"; the closest is \"{best}\""),
                });
                continue;
            }
            let named: Vec<(Option<usize>, Option<String>, &Value)> = match presets {
                Value::Array(items) => items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| (Some(i), item["name"].as_str().map(String::from), item))
                    .collect(),
                Value::Object(by_name) => by_name
                    .iter()
                    .map(|(name, body)| (None, Some(name.clone()), body))
                    .collect(),
                _ => {
                    problems.push(Problem {
                        path: format!("profiles.{class}"),
                        pos: (source.pos)(class, None),
                        message: "must be a list of profiles, each with a name".into(),
                    });
                    continue;
                }
            };
            let known = self.classes.entry(class.clone()).or_default();
            for (index, name, body) in named {
                let at = match index {
                    Some(i) => format!("profiles.{class}[{i}]"),
                    None => format!("profiles.{class}.{}", name.clone().unwrap_or_default()),
                };
                let pos = (source.pos)(class, index);
                let (Some(name), Value::Object(fields)) = (name.filter(|n| !n.trim().is_empty()), body) else {
                    problems.push(Problem {
                        path: at,
                        pos,
                        message: "a profile is a map with a non-empty name".into(),
                    });
                    continue;
                };
                let mut body = fields.clone();
                body.remove("name");
                body.remove("description");
                let key = name.to_lowercase();
                if let Some(first) = known.get(&key) {
                    let places = match first.origin == source.origin {
                        true => format!("twice in {}", source.origin),
                        false => format!("in both {} and {}", first.origin, source.origin),
                    };
                    problems.push(Problem {
                        path: at,
                        pos,
                        message: format!("profile conflict: {class} \"{name}\" is defined {places}"),
                    });
                    continue;
                }
                known.insert(
                    key,
                    Preset {
                        name,
                        body,
                        origin: source.origin.clone(),
                    },
                );
            }
        }
    }

    /// The user preset of `class` named `name` (any case).
    pub fn get(&self, class: &str, name: &str) -> Option<&Preset> {
        self.classes.get(class)?.get(&name.to_lowercase())
    }

    /// The user presets of `class`.
    pub fn of(&self, class: &str) -> impl Iterator<Item = &Preset> {
        self.classes.get(class).into_iter().flat_map(BTreeMap::values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(sources: &[(&str, Value)]) -> (Registry, Vec<Problem>) {
        let at = |_: &str, _: Option<usize>| Pos::default();
        let sources: Vec<Source<'_>> = sources
            .iter()
            .map(|(origin, profiles)| Source {
                origin: (*origin).into(),
                profiles,
                pos: &at,
            })
            .collect();
        let mut problems = Vec::new();
        (Registry::read(&sources, &mut problems), problems)
    }

    #[test]
    fn lists_and_maps_read_alike_and_names_match_in_any_case() {
        let (registry, problems) = read(&[(
            "the katalog",
            serde_json::json!({
                "resources": [{"name": "API-worker", "description": "d", "requests": {"cpu": "500m"}}],
                "reconciler": {"batch": {"workers": 6}},
            }),
        )]);
        assert!(problems.is_empty(), "{problems:?}");
        let preset = registry.get("resources", "api-worker").unwrap();
        assert_eq!(preset.name, "API-worker");
        assert_eq!(
            Value::Object(preset.body.clone()),
            serde_json::json!({"requests": {"cpu": "500m"}})
        );
        assert_eq!(registry.get("reconciler", "BATCH").unwrap().body["workers"], 6);
        assert!(registry.get("probes", "api-worker").is_none(), "classes are separate");
    }

    #[test]
    fn a_name_twice_in_a_class_an_unknown_class_and_a_nameless_profile_are_errors() {
        let (_, problems) = read(&[
            (
                "the katalog",
                serde_json::json!({"networkPolicies": [{"name": "allow-monitoring"}], "probe": []}),
            ),
            (
                "motif tenant.yaml",
                serde_json::json!({"networkPolicies": [{"name": "allow-monitoring"}, {"ingress": []}]}),
            ),
        ]);
        let messages: Vec<&str> = problems.iter().map(|p| p.message.as_str()).collect();
        assert!(
            messages.contains(&"profile conflict: networkPolicies \"allow-monitoring\" is defined in both the katalog and motif tenant.yaml"),
            "{messages:?}"
        );
        assert!(
            messages.contains(&"unknown profile class \"probe\"; the closest is \"probes\""),
            "{messages:?}"
        );
        assert!(
            messages.contains(&"a profile is a map with a non-empty name"),
            "{messages:?}"
        );
    }
}
