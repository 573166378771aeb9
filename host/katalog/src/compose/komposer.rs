//! Komposer files (`kind: Komposer`): one runtime's Katalog composed of several Katalog files.
//! The files it lists (`sources.files`, or `imports.files`; relative to the Komposer) load as
//! if given one after another, except that a later file's CRD (or note) replaces an earlier
//! one of the same name. Its `spec.crds` then layers over them: an entry naming a CRD of a source
//! changes only the fields it writes (maps merge key by key, anything else is replaced; an
//! empty entry keeps the CRD as it is), an entry naming no source's CRD adds one. Its
//! `notes` replace imported notes of the same name. Registry and Helm sources are fetched
//! by upstream's CLI; here they are refused with the reason, as are remote files.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::Value;

use crate::compose::include::Files;
use crate::de::{self, Problem};
use crate::yaml::{Node, NodeValue};

/// A Komposer file as written.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct KomposerFile {
    #[serde(default)]
    #[expect(dead_code, reason = "checked on the node, as for a Katalog")]
    api_version: String,
    #[expect(dead_code, reason = "what made this file a Komposer")]
    kind: String,
    #[serde(default)]
    #[expect(dead_code, reason = "accepted so a Komposer may describe itself")]
    metadata: Option<Value>,
    #[serde(default)]
    sources: Option<Sources>,
    /// The newer name of `sources`.
    #[serde(default)]
    imports: Option<Sources>,
    /// Read from the node (positions kept); typed here for its unknown keys.
    #[serde(default)]
    #[expect(dead_code, reason = "merged from the node, where positions are kept")]
    spec: KomposerSpec,
    #[serde(default)]
    notes: Option<crate::model::Notes>,
    /// Maturity, deprecation and what deprecations it accepts.
    #[serde(default)]
    #[expect(dead_code, reason = "accepted; deprecations only warn here")]
    lifecycle: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Sources {
    #[serde(default)]
    files: Vec<Value>,
    #[serde(default)]
    registry: Vec<Value>,
    #[serde(default)]
    helm: Vec<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct KomposerSpec {
    /// Overrides and additions, as a map by name or a list of entries with `name`.
    #[serde(default)]
    #[expect(dead_code, reason = "merged from the node, where positions are kept")]
    crds: Option<Value>,
}

/// What a Komposer asks for: the Katalog files to load in order, and what to lay over them.
pub(crate) struct Komposer {
    /// The source files, read.
    pub sources: Vec<(usize, String)>,
    /// `spec.crds` as a map by name (each a CRD entry node, possibly partial).
    overrides: Vec<(Node, Node)>,
    /// The names of the Komposer's own notes.
    pub note_names: BTreeSet<String>,
    /// The Komposer as a Katalog node holding its notes and the CRDs no source declares.
    own: Node,
}

/// Reads a Komposer whose file index is `index`; problems name the field and file.
pub(crate) fn read(node: &Node, files: &mut Files, problems: &mut Vec<Problem>) -> Option<Komposer> {
    let (file, unknown) = match de::read::<KomposerFile>(node, "") {
        Ok(read) => read,
        Err(problem) => {
            problems.push(problem);
            return None;
        }
    };
    problems.extend(unknown);
    let key = if file.imports.is_some() { "imports" } else { "sources" };
    let sources = file.imports.or(file.sources).unwrap_or_default();
    let at = |field: &str| node.get(key).and_then(|s| s.get(field)).map_or(node.pos, |n| n.pos);
    for (field, given, how) in [
        (
            "registry",
            !sources.registry.is_empty(),
            "pull the pattern with upstream's CLI or an OCI client",
        ),
        (
            "helm",
            !sources.helm.is_empty(),
            "render the chart (helm template) to a file",
        ),
    ] {
        if given {
            problems.push(Problem {
                path: format!("{key}.{field}"),
                pos: at(field),
                message: format!(
                    "this runtime composes local Katalog files only; {how} and list the file under {key}.files"
                ),
            });
        }
    }
    let dir = files.dir_of(node.pos.file);
    let mut read_sources = Vec::new();
    for (i, entry) in sources.files.iter().enumerate() {
        let path = format!("{key}.files[{i}]");
        let Some(relative) = entry.as_str() else {
            problems.push(Problem {
                path,
                pos: at("files"),
                message: "a remote Katalog (url, auth) is not fetched by this runtime; download it and give its path"
                    .into(),
            });
            continue;
        };
        let full = dir.join(relative);
        match std::fs::read_to_string(&full) {
            Ok(text) => {
                files.paths.push(full);
                read_sources.push((files.paths.len() - 1, text));
            }
            Err(e) => problems.push(Problem {
                path,
                pos: at("files"),
                message: format!("cannot read {}: {e}", full.display()),
            }),
        }
    }
    if read_sources.is_empty() && problems.is_empty() {
        problems.push(Problem {
            path: key.into(),
            pos: node.pos,
            message: format!("a Komposer lists the Katalog files it composes under {key}.files"),
        });
    }
    let overrides = crd_entries(node.get("spec").and_then(|s| s.get("crds")), problems);
    let note_names = file
        .notes
        .iter()
        .flat_map(|n| n.0.iter().map(|n| n.name.clone()))
        .collect();
    let mut own = node.clone();
    own.insert(Node::string("kind", node.pos), Node::string("Katalog", node.pos));
    for key in ["sources", "imports", "spec", "lifecycle"] {
        own.remove(key);
    }
    Some(Komposer {
        sources: read_sources,
        overrides,
        note_names,
        own,
    })
}

/// `spec.crds` as (name, entry) pairs, from a map or a list of entries with `name`.
fn crd_entries(crds: Option<&Node>, problems: &mut Vec<Problem>) -> Vec<(Node, Node)> {
    let Some(crds) = crds else { return Vec::new() };
    match &crds.value {
        NodeValue::Map(entries) => entries.clone(),
        NodeValue::Seq(items) => items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| {
                let mut item = item.clone();
                match item.remove("name") {
                    Some((key, name)) if name.as_str().is_some() => {
                        Some((Node::string(name.as_str().unwrap_or_default(), key.pos), item))
                    }
                    _ => {
                        problems.push(Problem {
                            path: format!("spec.crds[{i}]"),
                            pos: item.pos,
                            message: "a list entry needs `name:` (the CRD it overrides or adds)".into(),
                        });
                        None
                    }
                }
            })
            .collect(),
        NodeValue::Null => Vec::new(),
        _ => {
            problems.push(Problem {
                path: "spec.crds".into(),
                pos: crds.pos,
                message: "is a map of CRD entries by name".into(),
            });
            Vec::new()
        }
    }
}

impl Komposer {
    /// Lays the Komposer over its sources (Katalog roots, in order, each already translated to
    /// the current shape); returns the Komposer's own Katalog root (its notes, its metadata,
    /// and the CRDs it adds), to load first so the Katalog takes its name.
    pub(crate) fn compose(self, sources: &mut [Node], problems: &mut Vec<Problem>) -> Node {
        // A later source's CRD replaces an earlier one of the same name.
        for later in (1..sources.len()).rev() {
            let names: Vec<String> = crd_names(&sources[later]);
            for earlier in &mut sources[..later] {
                if let Some(NodeValue::Map(entries)) = earlier
                    .get_mut("spec")
                    .and_then(|s| s.get_mut("crds"))
                    .map(|c| &mut c.value)
                {
                    entries.retain(|(k, _)| !names.contains(&k.key_text()));
                }
            }
        }
        let mut own = self.own;
        let mut added = Vec::new();
        for (name, patch) in self.overrides {
            let key = name.key_text();
            // An override may be written in the flat shape, like any entry: translate it alone.
            let mut wrapper = crds_root(vec![(name.clone(), patch)], name.pos);
            crate::compose::legacy::translate(&mut wrapper, problems, &mut Vec::new());
            let Some((_, patch)) = take_crds(wrapper).into_iter().next() else {
                continue;
            };
            let target = sources
                .iter_mut()
                .rev()
                .find_map(|root| root.get_mut("spec")?.get_mut("crds")?.get_mut(&key));
            match target {
                Some(entry) => merge(entry, patch),
                None => added.push((name, patch)),
            }
        }
        if !added.is_empty() {
            let pos = own.pos;
            let spec = Node::new(
                NodeValue::Map(vec![(Node::string("crds", pos), Node::new(NodeValue::Map(added), pos))]),
                pos,
            );
            own.insert(Node::string("spec", pos), spec);
        }
        own
    }
}

fn crd_names(root: &Node) -> Vec<String> {
    root.get("spec")
        .and_then(|s| s.get("crds"))
        .and_then(Node::entries)
        .map(|entries| entries.iter().map(|(k, _)| k.key_text()).collect())
        .unwrap_or_default()
}

fn crds_root(entries: Vec<(Node, Node)>, pos: crate::yaml::Pos) -> Node {
    let crds = Node::new(NodeValue::Map(entries), pos);
    let spec = Node::new(NodeValue::Map(vec![(Node::string("crds", pos), crds)]), pos);
    Node::new(NodeValue::Map(vec![(Node::string("spec", pos), spec)]), pos)
}

fn take_crds(mut root: Node) -> Vec<(Node, Node)> {
    match root
        .get_mut("spec")
        .and_then(|s| s.remove("crds"))
        .map(|(_, c)| c.value)
    {
        Some(NodeValue::Map(entries)) => entries,
        _ => Vec::new(),
    }
}

/// Lays `patch` over `base`: maps merge key by key (a null value keeps the base's), anything
/// else replaces.
fn merge(base: &mut Node, patch: Node) {
    match (&mut base.value, patch.value) {
        (_, NodeValue::Null) => {}
        (NodeValue::Map(entries), NodeValue::Map(patches)) => {
            for (key, value) in patches {
                match entries.iter_mut().find(|(k, _)| k.key_text() == key.key_text()) {
                    Some((_, existing)) => merge(existing, value),
                    None => entries.push((key, value)),
                }
            }
        }
        (_, value) => {
            base.value = value;
            base.pos = patch.pos;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_changes_only_the_fields_it_writes() {
        let mut base = crate::yaml::parse("a: {b: 1, c: [1, 2]}\nd: x\n").unwrap();
        let patch = crate::yaml::parse("a: {c: [3]}\nd:\ne: new\n").unwrap();
        merge(&mut base, patch);
        assert_eq!(
            base.to_json(),
            serde_json::json!({"a": {"b": 1, "c": [3]}, "d": "x", "e": "new"})
        );
    }
}
