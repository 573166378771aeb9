//! A CRD entry that names its manifest (`crdFile:`) and no `apiTypes` takes group, version,
//! kind, plural and scope from that manifest, as upstream does; one that has both must agree
//! with it. A manifest whose schema would drop the status the runtime writes is warned
//! about. Runs on the node tree before deserialization, so what it fills in reads (and
//! errs) like what a user wrote, placed at the `crdFile` line.

use serde_json::Value;

use crate::compose::include::Files;
use crate::de::Problem;
use crate::yaml::{self, Node, NodeValue, Pos};

/// Fills in `apiTypes` (and `namespaced`) of every CRD entry of `root` that has a local
/// `crdFile` and no `apiTypes`; checks the two against each other where both are given;
/// warns where the manifest's version has no status subresource or drops `status`.
pub fn fill(root: &mut Node, files: &Files, problems: &mut Vec<Problem>, warnings: &mut Vec<Problem>) {
    let Some(NodeValue::Map(crds)) = root
        .get_mut("spec")
        .and_then(|s| s.get_mut("crds"))
        .map(|c| &mut c.value)
    else {
        return;
    };
    for (key, entry) in crds.iter_mut() {
        let name = key.key_text();
        let Some(file) = entry.get("crdFile") else {
            continue;
        };
        let base = format!("spec.crds.{name}");
        let at = file.pos;
        let Some(relative) = file.as_str().map(str::to_string) else {
            continue; // the type error is reported when the entry is read
        };
        let written = entry.get("apiTypes").is_some();
        if relative.starts_with("http://") || relative.starts_with("https://") {
            if !written {
                problems.push(Problem {
                    path: format!("{base}.apiTypes"),
                    pos: at,
                    message: format!(
                        "is required with a crdFile fetched over HTTP ({relative}): the loader reads only local files; write apiTypes or download the manifest beside the Katalog"
                    ),
                });
            }
            continue;
        }
        let path = files.dir_of(at.file).join(&relative);
        let found = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))
            .and_then(|text| definition(&text, &name).map_err(|e| format!("{}: {e}", path.display())));
        let types = match found {
            Ok(types) => types,
            // apiTypes says what the CRD is; the manifest matters only to `ork dev`, which
            // reports a file it cannot read when it installs it.
            Err(_) if written => continue,
            Err(message) => {
                problems.push(Problem {
                    path: format!("{base}.crdFile"),
                    pos: at,
                    message: format!("{message} (apiTypes is not given, so it is read from this file)"),
                });
                continue;
            }
        };
        for message in types.status_warnings() {
            warnings.push(Problem {
                path: format!("{base}.crdFile"),
                pos: at,
                message: format!("{relative}: {message}"),
            });
        }
        match entry.get("apiTypes") {
            Some(given) => check(given, &types, &base, &relative, problems),
            None => {
                entry.insert(Node::string("apiTypes", at), types.node(at));
                if entry.get("namespaced").is_none() {
                    entry.insert(
                        Node::string("namespaced", at),
                        Node::new(NodeValue::Bool(types.namespaced), at),
                    );
                }
            }
        }
    }
}

/// What a CustomResourceDefinition manifest says.
#[derive(Debug, PartialEq)]
struct Definition {
    group: String,
    version: String,
    kind: String,
    plural: String,
    namespaced: bool,
    /// The version's schema keeps a `status` (declares it, or keeps unknown fields).
    keeps_status: bool,
}

impl Definition {
    /// What the runtime's status writes will meet on this version. Without a status
    /// subresource they go through the object itself, which works (see the runtime); a
    /// schema without `status` drops them.
    fn status_warnings(&self) -> Vec<String> {
        match self.keeps_status {
            true => Vec::new(),
            false => vec![format!(
                "the schema of version {} has no `status` property (and keeps no unknown fields): the API server drops every status the runtime writes, the Ready condition included; declare `status` with x-kubernetes-preserve-unknown-fields",
                self.version
            )],
        }
    }

    fn node(&self, at: Pos) -> Node {
        let entries = [
            ("group", &self.group),
            ("version", &self.version),
            ("kind", &self.kind),
            ("plural", &self.plural),
        ]
        .into_iter()
        .map(|(k, v)| (Node::string(k, at), Node::string(v.as_str(), at)))
        .collect();
        Node::new(NodeValue::Map(entries), at)
    }
}

/// The CustomResourceDefinition of a manifest meant for the CRD entry `key`: the only one,
/// or (a file holding several) the one whose kind, singular or plural is the key. Its
/// version is the storage version (else the first served one), as clients address it.
fn definition(text: &str, key: &str) -> Result<Definition, String> {
    let documents = yaml::parse_documents(text).map_err(|e| format!("YAML error at {}: {}", e.pos, e.message))?;
    let crds: Vec<Value> = documents
        .iter()
        .map(Node::to_json)
        .filter(|d| d["kind"] == "CustomResourceDefinition")
        .collect();
    let wanted = key.to_ascii_lowercase().replace('-', "");
    let crd = match crds.as_slice() {
        [] => return Err("no CustomResourceDefinition in it".into()),
        [only] => only,
        several => several
            .iter()
            .find(|c| {
                let names = &c["spec"]["names"];
                ["kind", "singular", "plural"]
                    .iter()
                    .any(|n| names[*n].as_str().is_some_and(|v| v.to_ascii_lowercase() == wanted))
            })
            .ok_or_else(|| {
                format!(
                    "it holds {} CustomResourceDefinitions and none has the kind, singular or plural \"{key}\"; write apiTypes to say which",
                    several.len()
                )
            })?,
    };
    let spec = &crd["spec"];
    let text = |v: &Value, what: &str| {
        v.as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .ok_or_else(|| format!("its CustomResourceDefinition has no {what}"))
    };
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    let chosen = versions
        .iter()
        .find(|v| v["storage"] == true)
        .or_else(|| versions.iter().find(|v| v["served"] != false));
    let version = chosen
        .map(|v| text(&v["name"], "spec.versions[].name"))
        .unwrap_or_else(|| text(&spec["version"], "spec.versions"))?;
    // Older manifests put the schema beside the versions.
    let schema = match chosen {
        Some(v) if v.get("schema").is_some() => &v["schema"]["openAPIV3Schema"],
        _ => &spec["validation"]["openAPIV3Schema"],
    };
    let keeps_status = schema.is_null()
        || schema["x-kubernetes-preserve-unknown-fields"] == true
        || !schema["properties"]["status"].is_null();
    Ok(Definition {
        keeps_status,
        group: text(&spec["group"], "spec.group")?,
        version,
        kind: text(&spec["names"]["kind"], "spec.names.kind")?,
        plural: text(&spec["names"]["plural"], "spec.names.plural")?,
        namespaced: spec["scope"].as_str() != Some("Cluster"),
    })
}

/// Both given: group and kind must name the same resource.
fn check(given: &Node, types: &Definition, base: &str, file: &str, problems: &mut Vec<Problem>) {
    for (field, theirs) in [("group", &types.group), ("kind", &types.kind)] {
        if let Some(ours) = given.get(field)
            && let Some(text) = ours.as_str()
            && text != theirs
        {
            problems.push(Problem {
                path: format!("{base}.apiTypes.{field}"),
                pos: ours.pos,
                message: format!("is \"{text}\" but {file} defines \"{theirs}\""),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: hellos.demo.io}
spec:
  group: demo.io
  scope: Cluster
  names: {kind: Hello, plural: hellos}
  versions:
    - {name: v1alpha1, served: true, storage: false}
    - {name: v1, served: true, storage: true}
";

    #[test]
    fn a_manifest_gives_group_storage_version_kind_plural_and_scope() {
        let found = definition(
            &format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: x}}\n---\n{CRD}"),
            "hello",
        )
        .unwrap();
        assert_eq!(
            found,
            Definition {
                group: "demo.io".into(),
                version: "v1".into(),
                kind: "Hello".into(),
                plural: "hellos".into(),
                namespaced: false,
                keeps_status: true,
            }
        );
        let err = definition("apiVersion: v1\nkind: ConfigMap\n", "x").unwrap_err();
        assert!(err.contains("no CustomResourceDefinition"), "{err}");
        let err = definition(&CRD.replace("  group: demo.io\n", ""), "x").unwrap_err();
        assert!(err.contains("spec.group"), "{err}");
    }

    #[test]
    fn a_manifest_of_several_crds_gives_each_entry_the_one_named_like_it() {
        let two = format!(
            "{CRD}---\n{}",
            CRD.replace("Hello", "Greeting").replace("hellos", "greetings")
        );
        assert_eq!(definition(&two, "hello").unwrap().kind, "Hello");
        assert_eq!(definition(&two, "greetings").unwrap().kind, "Greeting");
        assert_eq!(definition(&two, "Greeting").unwrap().kind, "Greeting");
        let err = definition(&two, "other").unwrap_err();
        assert!(
            err.contains("holds 2 CustomResourceDefinitions") && err.contains("\"other\""),
            "{err}"
        );
    }

    #[test]
    fn a_version_that_cannot_hold_the_status_is_warned_about() {
        let with = |version: &str| CRD.replace("    - {name: v1, served: true, storage: true}\n", version);
        let full = with(
            "    - name: v1\n      served: true\n      storage: true\n      subresources: {status: {}}\n      schema: {openAPIV3Schema: {type: object, properties: {status: {type: object, x-kubernetes-preserve-unknown-fields: true}}}}\n",
        );
        assert_eq!(
            definition(&full, "hello").unwrap().status_warnings(),
            Vec::<String>::new()
        );
        let inline = with(
            "    - name: v1\n      served: true\n      storage: true\n      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}\n",
        );
        assert_eq!(
            definition(&inline, "hello").unwrap().status_warnings(),
            Vec::<String>::new(),
            "no status subresource: written through the object, which works"
        );
        let dropped = with(
            "    - name: v1\n      served: true\n      storage: true\n      subresources: {status: {}}\n      schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object}}}}\n",
        );
        let warnings = definition(&dropped, "hello").unwrap().status_warnings();
        assert!(warnings[0].contains("drops every status"), "{warnings:?}");
    }
}
