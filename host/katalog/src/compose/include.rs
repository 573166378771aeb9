//! `include:` expansion: a section may pull its content from a file (relative to the file
//! that names it); what is written inline wins over what is included, and included list
//! items come before inline ones.

use std::path::{Path, PathBuf};

use crate::de::Problem;
use crate::yaml::{self, Node, NodeValue};

/// Sections whose maps may carry `include:`.
const SECTIONS: &[&str] = &[
    "reconcile",
    "reconciler",
    "observe",
    "validation",
    "mutation",
    "status",
    "serve",
    "tokens",
    "clusters",
    "auth",
    "profiles",
];
/// Lists whose entries may carry `include:`.
const ENTRY_LISTS: &[&str] = &["watch", "external"];
/// Includes within includes, at most this deep (a cycle guard).
const MAX_DEPTH: usize = 8;

/// The files a load has read; a node's `pos.file` indexes this list.
#[derive(Debug, Default)]
pub struct Files {
    pub paths: Vec<PathBuf>,
    /// Motifs already pulled from OCI registries, by manifest digest: their YAML.
    pub pulled: PulledMotifs,
    /// The OCI motifs imported but not in [`Files::pulled`]: the caller pulls them and
    /// loads again.
    pub wanted: Vec<crate::component::OciReference>,
}

/// Motif texts pulled from OCI registries, by the manifest digest their import pins.
pub type PulledMotifs = std::collections::BTreeMap<String, String>;

impl Files {
    /// The folder relative paths in file `index` resolve against.
    pub fn dir_of(&self, index: usize) -> PathBuf {
        self.paths
            .get(index)
            .and_then(|p| p.parent())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
    }
}

/// Expands every `include:` under `node` (whose path is `path`).
pub fn expand(node: &mut Node, path: &mut Vec<String>, files: &mut Files, depth: usize, problems: &mut Vec<Problem>) {
    if matches!(node.value, NodeValue::Map(_)) && allows_include(path) && node.get("include").is_some() {
        include_into(node, path, files, depth, problems);
    }
    match &mut node.value {
        NodeValue::Map(entries) => {
            for (key, value) in entries.iter_mut() {
                path.push(key.key_text());
                expand(value, path, files, depth, problems);
                path.pop();
            }
        }
        NodeValue::Seq(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                path.push(i.to_string());
                expand(item, path, files, depth, problems);
                path.pop();
            }
        }
        _ => {}
    }
}

fn allows_include(path: &[String]) -> bool {
    let last = path.last().map(String::as_str).unwrap_or_default();
    let parent = path
        .len()
        .checked_sub(2)
        .and_then(|i| path.get(i))
        .map(String::as_str)
        .unwrap_or_default();
    let grandparent = path
        .len()
        .checked_sub(3)
        .and_then(|i| path.get(i))
        .map(String::as_str)
        .unwrap_or_default();
    SECTIONS.contains(&last)
        || (ENTRY_LISTS.contains(&parent) && last.parse::<usize>().is_ok())
        || (parent == "target" && grandparent == "serve")
}

fn include_into(node: &mut Node, path: &mut Vec<String>, files: &mut Files, depth: usize, problems: &mut Vec<Problem>) {
    let Some((key, value)) = node.remove("include") else {
        return;
    };
    let at = path.join(".") + ".include";
    let Some(relative) = value.as_str() else {
        problems.push(Problem {
            path: at,
            pos: value.pos,
            message: format!("include must be a file path, found {}", value.kind()),
        });
        return;
    };
    if depth >= MAX_DEPTH {
        problems.push(Problem {
            path: at,
            pos: key.pos,
            message: format!("includes nest more than {MAX_DEPTH} deep (does {relative} include itself?)"),
        });
        return;
    }
    let file = files.dir_of(key.pos.file).join(relative);
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) => {
            problems.push(Problem {
                path: at,
                pos: value.pos,
                message: format!("cannot read include {}: {e}", file.display()),
            });
            return;
        }
    };
    let index = files.paths.len();
    files.paths.push(file);
    let mut included = match yaml::parse_file(&text, index) {
        Ok(included) => included,
        Err(e) => {
            problems.push(Problem {
                path: at,
                pos: e.pos,
                message: format!("YAML error in include: {}", e.message),
            });
            return;
        }
    };
    // A file may wrap its content in the section's own key (`reconcile:` ... or `status:`).
    let section = path.last().cloned().unwrap_or_default();
    if let NodeValue::Map(entries) = &included.value
        && entries.len() == 1
        && entries[0].0.key_text() == section
    {
        included = entries[0].1.clone();
    }
    expand(&mut included, path, files, depth + 1, problems);
    let inline = std::mem::replace(node, Node::new(NodeValue::Null, node.pos));
    *node = merge(included, inline);
}

/// Merges `inline` over `base`: maps key by key (inline wins), lists concatenated (base
/// first), anything else replaced by inline.
pub fn merge(base: Node, inline: Node) -> Node {
    match (base.value, inline.value) {
        (NodeValue::Map(base_entries), NodeValue::Map(inline_entries)) => {
            let mut merged = base_entries;
            for (key, value) in inline_entries {
                let text = key.key_text();
                match merged.iter().position(|(k, _)| k.key_text() == text) {
                    Some(i) => {
                        let (_, old_value) = merged.remove(i);
                        merged.insert(i, (key, merge(old_value, value)));
                    }
                    None => merged.push((key, value)),
                }
            }
            Node::new(NodeValue::Map(merged), inline.pos)
        }
        (NodeValue::Seq(mut base_items), NodeValue::Seq(inline_items)) => {
            base_items.extend(inline_items);
            Node::new(NodeValue::Seq(base_items), inline.pos)
        }
        (base_value, NodeValue::Null) => Node::new(base_value, base.pos),
        (_, inline_value) => Node::new(inline_value, inline.pos),
    }
}
