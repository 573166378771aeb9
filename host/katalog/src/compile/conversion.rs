//! `admission.conversion`, compiled: the declared paths between versions of a
//! multi-version CRD, each a set of spec fields templated over the source object. The
//! gateway's conversion webhook chains paths when there is no direct one (`v1alpha1` to
//! `v1beta1` to `v1`), so a Katalog declares each step once.

use std::collections::{BTreeMap, VecDeque};

use serde_json::Value;

use super::{Error, template};
use crate::model::Conversion;
use orkestra_expr::resolver::Resolver;
use orkestra_expr::template::{Functions, Template};

/// A CRD's conversion, compiled.
#[derive(Debug, Clone)]
pub struct CompiledConversion {
    pub storage_version: String,
    pub update_crd: bool,
    paths: Vec<Path>,
}

#[derive(Debug, Clone)]
struct Path {
    from: String,
    to: String,
    fields: Vec<(Vec<String>, Field)>,
}

#[derive(Debug, Clone)]
enum Field {
    Template(Template),
    /// A non-string YAML value, set as written.
    Value(Value),
}

impl CompiledConversion {
    /// `version` is the CRD entry's (its `crdFile`'s storage version, or `apiTypes.version`):
    /// the storage version when `storageVersion` is left out, as upstream reads it.
    pub(super) fn compile(spec: &Conversion, version: &str, functions: &Functions) -> Result<Self, Vec<Error>> {
        let mut errors = Vec::new();
        let storage_version = match spec.storage_version.trim() {
            "" => version.to_string(),
            given => given.to_string(),
        };
        if storage_version.is_empty() {
            errors.push(Error::at(
                "storageVersion",
                "is required: the version objects are stored as (the CRD entry names no version to default it to)",
            ));
        }
        let mut seen = BTreeMap::new();
        let mut paths = Vec::new();
        for (i, path) in spec.paths.iter().enumerate() {
            let at = format!("paths[{i}]");
            let bare = |v: &str| !v.is_empty() && !v.contains('/');
            if !bare(&path.from) || !bare(&path.to) {
                errors.push(Error::at(
                    &at,
                    "from and to are bare versions (v1alpha1, v1), not group/version",
                ));
                continue;
            }
            if path.from == path.to {
                errors.push(Error::at(&at, format!("converts {} to itself", path.from)));
                continue;
            }
            if let Some(first) = seen.insert((path.from.clone(), path.to.clone()), i) {
                errors.push(Error::at(
                    &at,
                    format!("{} to {} is declared already at paths[{first}]", path.from, path.to),
                ));
                continue;
            }
            let mut fields = Vec::new();
            for (key, value) in &path.spec {
                let segments: Vec<String> = key.split('.').map(str::to_string).collect();
                if segments.iter().any(String::is_empty) {
                    errors.push(Error::at(format!("{at}.spec.{key}"), "is not a dotted field path"));
                    continue;
                }
                let field = match value {
                    Value::String(text) => match template(text, functions) {
                        Ok(t) => Field::Template(t),
                        Err(e) => {
                            errors.push(e.within(&format!("{at}.spec.{key}")));
                            continue;
                        }
                    },
                    other => Field::Value(other.clone()),
                };
                fields.push((segments, field));
            }
            paths.push(Path {
                from: path.from.clone(),
                to: path.to.clone(),
                fields,
            });
        }
        match errors.is_empty() {
            true => Ok(Self {
                storage_version,
                update_crd: spec.update_crd,
                paths,
            }),
            false => Err(errors),
        }
    }

    /// The versions some path starts or ends at.
    pub fn versions(&self) -> Vec<&str> {
        let mut versions: Vec<&str> = self.paths.iter().flat_map(|p| [&*p.from, &*p.to]).collect();
        versions.sort_unstable();
        versions.dedup();
        versions
    }

    /// The shortest chain of declared paths from one version to another.
    fn route(&self, from: &str, to: &str) -> Option<Vec<&Path>> {
        let mut came_by: BTreeMap<&str, Option<&Path>> = BTreeMap::from([(from, None)]);
        let mut queue = VecDeque::from([from]);
        while let Some(at) = queue.pop_front() {
            if at == to {
                let mut chain = Vec::new();
                let mut step = at;
                while let Some(Some(path)) = came_by.get(step) {
                    chain.push(*path);
                    step = &path.from;
                }
                chain.reverse();
                return Some(chain);
            }
            for path in self.paths.iter().filter(|p| p.from == at) {
                if !came_by.contains_key(&*path.to) {
                    came_by.insert(&path.to, Some(path));
                    queue.push_back(&path.to);
                }
            }
        }
        None
    }

    /// `object` as `to_api_version` (`group/version`): its spec fields set by each path of
    /// the chain in turn, every other field carried over (the API server prunes what the
    /// target version's schema does not know).
    pub fn convert(
        &self,
        object: &Value,
        to_api_version: &str,
        notes: &[Template],
    ) -> Result<Value, crate::error::Error> {
        let from_api_version = object["apiVersion"]
            .as_str()
            .ok_or_else(|| crate::error::Error::Conversion("the object has no apiVersion".into()))?;
        let (group, from) = split(from_api_version);
        let (to_group, to) = split(to_api_version);
        if group != to_group {
            return Err(crate::error::Error::Conversion(format!(
                "cannot convert {from_api_version} to another group ({to_api_version})"
            )));
        }
        let chain = self.route(from, to).ok_or_else(|| {
            crate::error::Error::Conversion(format!("no conversion path from {from} to {to} is declared"))
        })?;
        let mut current = object.clone();
        for path in chain {
            let mut next = current.clone();
            {
                let resolver = Resolver::new(&current, notes);
                for (segments, field) in &path.fields {
                    let value = match field {
                        Field::Template(t) => resolver.evaluate(t).map_err(|e| {
                            crate::error::Error::Conversion(format!(
                                "{} to {}, spec.{}: {}",
                                path.from,
                                path.to,
                                segments.join("."),
                                e.message
                            ))
                        })?,
                        Field::Value(v) => v.clone(),
                    };
                    if !next["spec"].is_object() {
                        next["spec"] = Value::Object(Default::default());
                    }
                    crate::fields::set_path(&mut next["spec"], segments, value);
                }
            }
            next["apiVersion"] = Value::String(join(group, &path.to));
            current = next;
        }
        current["apiVersion"] = Value::String(to_api_version.to_string());
        Ok(current)
    }
}

fn split(api_version: &str) -> (&str, &str) {
    api_version.rsplit_once('/').unwrap_or(("", api_version))
}

fn join(group: &str, version: &str) -> String {
    match group.is_empty() {
        true => version.to_string(),
        false => format!("{group}/{version}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn compiled(yaml: &str) -> Result<CompiledConversion, Vec<Error>> {
        compiled_for(yaml, "")
    }

    /// Compiled for a CRD entry of `version`.
    fn compiled_for(yaml: &str, version: &str) -> Result<CompiledConversion, Vec<Error>> {
        let node = crate::yaml::parse(yaml).unwrap();
        let (spec, problems) = crate::de::read::<Conversion>(&node, "").unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        CompiledConversion::compile(&spec, version, Functions::builtin())
    }

    #[test]
    fn storage_version_defaults_to_the_crd_entry_s_version() {
        let paths = "paths: [{from: v1alpha1, to: v1}, {from: v1, to: v1alpha1}]\n";
        assert_eq!(compiled_for(paths, "v1").unwrap().storage_version, "v1");
        let given = format!("storageVersion: v1alpha1\n{paths}");
        assert_eq!(compiled_for(&given, "v1").unwrap().storage_version, "v1alpha1");
    }

    const SIZES: &str = "
storageVersion: v1
paths:
  - {from: v1alpha1, to: v1beta1, spec: {replicas: '{{ .spec.size }}'}}
  - {from: v1beta1, to: v1, spec: {scaling.replicas: '{{ .spec.replicas }}', tier: gold}}
  - {from: v1, to: v1alpha1, spec: {size: '{{ .spec.scaling.replicas }}', flags: [a]}}
";

    #[test]
    fn a_direct_path_keeps_types_and_carries_other_fields_over() {
        let conversion = compiled(SIZES).unwrap();
        let object = json!({"apiVersion": "demo.io/v1", "kind": "Db", "metadata": {"name": "a"},
                            "spec": {"scaling": {"replicas": 3}, "image": "pg"}});
        let out = conversion.convert(&object, "demo.io/v1alpha1", &[]).unwrap();
        assert_eq!(out["apiVersion"], "demo.io/v1alpha1");
        assert_eq!(out["spec"]["size"], json!(3), "an integer stays an integer");
        assert_eq!(out["spec"]["flags"], json!(["a"]));
        assert_eq!(out["spec"]["image"], "pg");
        assert_eq!(out["metadata"]["name"], "a");
    }

    #[test]
    fn paths_chain_when_there_is_no_direct_one() {
        let conversion = compiled(SIZES).unwrap();
        let object = json!({"apiVersion": "demo.io/v1alpha1", "kind": "Db", "spec": {"size": 2}});
        let out = conversion.convert(&object, "demo.io/v1", &[]).unwrap();
        assert_eq!(out["apiVersion"], "demo.io/v1");
        assert_eq!(out["spec"]["scaling"]["replicas"], json!(2));
        assert_eq!(out["spec"]["tier"], "gold");
    }

    #[test]
    fn a_missing_path_or_another_group_is_an_error_that_says_so() {
        let conversion = compiled(SIZES).unwrap();
        let object = json!({"apiVersion": "demo.io/v1beta1", "spec": {}});
        assert_eq!(
            conversion.convert(&object, "demo.io/v2", &[]).unwrap_err().to_string(),
            "no conversion path from v1beta1 to v2 is declared"
        );
        assert!(
            conversion
                .convert(&object, "other.io/v1", &[])
                .unwrap_err()
                .to_string()
                .contains("another group")
        );
        let same = conversion.convert(&object, "demo.io/v1beta1", &[]).unwrap();
        assert_eq!(same, object, "to its own version, nothing changes");
    }

    #[test]
    fn bad_paths_are_named() {
        let errors = compiled(
            "
paths:
  - {from: v1, to: v1}
  - {from: demo.io/v1, to: v2}
  - {from: v1, to: v2, spec: {'a..b': x, c: '{{ .spec'}}
  - {from: v1, to: v2}
",
        )
        .unwrap_err();
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "storageVersion",
                "paths[0]",
                "paths[1]",
                "paths[2].spec.a..b",
                "paths[2].spec.c",
                "paths[3]"
            ]
        );
    }
}
