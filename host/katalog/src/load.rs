//! Reads Katalog files: YAML with positions, `include:` expansion, translation of the
//! older shape, typed deserialization, then validation; several files merge into one
//! [`Katalog`]. Every problem found is reported, each with its file, line and column.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use super::compile::{self, Compiled};
use super::compose::include::{self, Files, PulledMotifs};
use super::compose::{condition_source, crd_file, komposer, legacy, motif};
use super::de::{self, Problem};
use super::diagnostic::Diagnostic;
use super::error::Error;
use super::loaded::{Katalog, LoadedCrd, Parsed, crd_node};
use super::model::KatalogFile;
use super::reads::StampReads;
use super::validate;
use super::yaml::{self, Node, NodeValue};
use crate::model::{API_VERSION, LEGACY_API_VERSION};
use orkestra_expr::template::Functions;

/// Loads, merges, validates and compiles the files in order.
pub fn load(paths: &[PathBuf]) -> Result<Compiled, Error> {
    load_with(paths, &PulledMotifs::new())
}

/// [`load`], with the motifs pulled from OCI registries so far; one it imports that is not
/// among them is [`Error::Unpulled`].
pub fn load_with(paths: &[PathBuf], pulled: &PulledMotifs) -> Result<Compiled, Error> {
    load_sources_with(&read_sources(paths)?, pulled)
}

/// The text of each file, for [`load_sources`].
pub fn read_sources(paths: &[PathBuf]) -> Result<Vec<(PathBuf, String)>, Error> {
    paths
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
                path: path.clone(),
                source,
            })?;
            Ok((path.clone(), text))
        })
        .collect()
}

/// [`load`] for texts already read (`include:` paths still resolve against each path).
pub fn load_sources(sources: &[(PathBuf, String)]) -> Result<Compiled, Error> {
    load_sources_with(sources, &PulledMotifs::new())
}

/// [`load_with`] for texts already read.
pub fn load_sources_with(sources: &[(PathBuf, String)], pulled: &PulledMotifs) -> Result<Compiled, Error> {
    if sources.is_empty() {
        return Err(Error::NoFiles);
    }
    let mut files = Files {
        pulled: pulled.clone(),
        ..Files::default()
    };
    let mut problems = Vec::new();
    let mut warnings = Vec::new();
    let mut parsed = Vec::new();
    let mut read = sources.to_vec();
    // Per parsed file, the Komposer notes that replace its own of the same name.
    let mut replaced: Vec<BTreeSet<String>> = Vec::new();
    for (path, text) in sources {
        let index = files.paths.len();
        files.paths.push(path.clone());
        let Some(node) = parse_root(text, index, &mut problems) else {
            continue;
        };
        let (katalogs, notes) = katalogs_of(node, &mut files, &mut read, &mut problems, &mut warnings);
        // The Komposer's own part keeps its notes; the files it composes lose theirs.
        for (i, parsed_file) in katalogs.into_iter().enumerate() {
            replaced.push(if i == 0 { BTreeSet::new() } else { notes.clone() });
            parsed.push(parsed_file);
        }
    }
    let mut profiles = Vec::new();
    motif::merge_imports(&mut parsed, &mut files, &mut profiles, &mut problems);
    if !files.wanted.is_empty() {
        return Err(Error::Unpulled { motifs: files.wanted });
    }
    super::profile::apply(&mut parsed, &profiles, &mut problems);
    for (Parsed { file, .. }, names) in parsed.iter_mut().zip(&replaced) {
        if let Some(notes) = &mut file.notes {
            notes.0.retain(|note| !names.contains(&note.name));
        }
    }

    let mut katalog = Katalog {
        sources: read,
        ..Katalog::default()
    };
    let mut origins: BTreeMap<String, usize> = BTreeMap::new();
    for Parsed { node, file } in &parsed {
        if katalog.name.is_empty() {
            katalog.name = file.metadata.name.clone();
        }
        katalog.finalizers.extend(file.spec.finalizers.iter().cloned());
        // One gateway per Katalog: a second file's section is an error, not a silent merge.
        for (key, mine, theirs) in [
            ("gateway", file.gateway.is_some(), katalog.gateway.is_some()),
            ("security", file.security.is_some(), katalog.security.is_some()),
            ("spec.ha", file.spec.ha.is_some(), katalog.ha.is_some()),
            ("spec.tenants", file.spec.tenants.is_some(), katalog.tenants.is_some()),
        ] {
            if mine && theirs {
                let pos = key
                    .split('.')
                    .try_fold(node, |n, k| n.get(k))
                    .map_or(node.pos, |n| n.pos);
                problems.push(Problem {
                    path: key.to_string(),
                    pos,
                    message: format!("`{key}` is already set by an earlier file; give it once"),
                });
            }
        }
        katalog.gateway = katalog.gateway.take().or_else(|| file.gateway.clone());
        katalog.security = katalog.security.take().or_else(|| file.security.clone());
        katalog.ha = katalog.ha.take().or_else(|| file.spec.ha.clone());
        katalog.tenants = katalog.tenants.take().or_else(|| file.spec.tenants.clone());
        katalog
            .notes
            .extend(file.notes.iter().flat_map(|n| n.0.iter().cloned()));
        for (name, entry) in &file.spec.crds {
            let source = files.paths[node.pos.file].clone();
            if let Some(first) = origins.get(name) {
                let pos = crd_node(node, name).map_or(node.pos, |n| n.pos);
                problems.push(Problem {
                    path: format!("spec.crds.{name}"),
                    pos,
                    message: format!(
                        "CRD \"{name}\" is already declared in {}",
                        files.paths[*first].display()
                    ),
                });
                continue;
            }
            origins.insert(name.clone(), node.pos.file);
            katalog.crds.insert(
                name.clone(),
                LoadedCrd {
                    name: name.clone(),
                    entry: entry.clone(),
                    source,
                    reads: crd_node(node, name).map(super::reads::in_node).unwrap_or_default(),
                },
            );
        }
    }
    // Notes are functions every CRD's templates may call.
    let by_notes = katalog.notes.iter().fold(StampReads::default(), |r, note| {
        r.or(super::reads::in_text(&note.expression))
    });
    for crd in katalog.crds.values_mut() {
        crd.reads = std::mem::take(&mut crd.reads).or(by_notes.clone());
    }
    super::cross::target::resolve(&mut katalog);
    let functions = Functions::with_notes(katalog.notes.iter().map(|n| n.name.as_str()));
    validate::check(&parsed, &katalog, &functions, &mut problems, &mut warnings);
    let locate = |p: Problem| Diagnostic {
        file: files.paths.get(p.pos.file).cloned().unwrap_or_default(),
        line: p.pos.line,
        column: p.pos.column,
        path: p.path,
        message: p.message,
    };
    let warnings: Vec<Diagnostic> = warnings.into_iter().map(locate).collect();
    // Compiled even when invalid, so every error is reported at once; where validation
    // already found a problem (and reading left a stand-in value) the compile pass adds
    // nothing.
    match compile::compile(katalog, functions) {
        Ok(mut compiled) if problems.is_empty() => {
            compiled.katalog.warnings = warnings;
            return Ok(compiled);
        }
        Ok(_) => {}
        Err(errors) => {
            let seen: Vec<String> = problems.iter().map(|p| p.path.clone()).collect();
            let overlaps = |path: &str| {
                seen.iter().any(|s| {
                    let under = |a: &str, b: &str| {
                        a.strip_prefix(b)
                            .is_some_and(|r| r.is_empty() || r.starts_with(['.', '[']))
                    };
                    under(path, s) || under(s, path)
                })
            };
            let fresh: Vec<_> = errors.into_iter().filter(|e| !overlaps(&e.path)).collect();
            problems.extend(fresh.into_iter().map(|e| locate_in(&parsed, e)));
        }
    }
    let mut errors: Vec<Diagnostic> = problems.into_iter().map(locate).collect();
    // Stable: at one place, the first problem found (a type error before what validation
    // then made of the stand-in value) is the one reported.
    errors.sort_by(|a, b| (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column)));
    errors.dedup_by(|b, a| (&a.file, a.line, a.column, &a.path) == (&b.file, b.line, b.column, &b.path));
    Err(Error::Invalid { errors, warnings })
}

/// A compile error placed in the file that holds its path (the deepest match of any file).
fn locate_in(parsed: &[Parsed], error: compile::Error) -> Problem {
    let pos = parsed
        .iter()
        .map(|p| p.node.at_path(&error.path))
        .max_by_key(|(_, found)| *found)
        .map_or_else(Default::default, |(node, _)| node.pos);
    Problem {
        pos,
        path: error.path,
        message: error.message,
    }
}

/// A file's YAML root, when it is a map.
fn parse_root(text: &str, index: usize, problems: &mut Vec<Problem>) -> Option<Node> {
    let node = match yaml::parse_file(text, index) {
        Ok(node) => node,
        Err(e) => {
            problems.push(Problem {
                path: String::new(),
                pos: e.pos,
                message: format!("YAML error: {}", e.message),
            });
            return None;
        }
    };
    if !matches!(node.value, NodeValue::Map(_)) {
        problems.push(Problem {
            path: String::new(),
            pos: node.pos,
            message: format!("a Katalog is a map, found {}", node.kind()),
        });
        return None;
    }
    Some(node)
}

/// Checks a Katalog root's apiVersion and kind, expands its includes, translates the older
/// shape and fills CRD entries from their `crdFile`.
fn prepare(node: &mut Node, files: &mut Files, problems: &mut Vec<Problem>, warnings: &mut Vec<Problem>) {
    let api_version = node
        .get("apiVersion")
        .and_then(Node::as_str)
        .unwrap_or_default()
        .to_string();
    if api_version != API_VERSION && api_version != LEGACY_API_VERSION {
        let pos = node.get("apiVersion").map_or(node.pos, |n| n.pos);
        problems.push(Problem {
            path: "apiVersion".into(),
            pos,
            message: format!("\"{api_version}\" is not a Katalog apiVersion; use {API_VERSION}"),
        });
    }
    let kind = node.get("kind").and_then(Node::as_str).unwrap_or_default().to_string();
    if kind != "Katalog" {
        let pos = node.get("kind").map_or(node.pos, |n| n.pos);
        problems.push(Problem {
            path: "kind".into(),
            pos,
            message: format!("\"{kind}\" is not Katalog (or Komposer)"),
        });
    }
    include::expand(node, &mut Vec::new(), files, 0, problems);
    // The flat shape is a form upstream still writes: translated without a word.
    legacy::translate(node, problems, &mut Vec::new());
    // A condition's `source` is a cross read of another runtime in upstream's shorthand.
    condition_source::translate(node, problems);
    crd_file::fill(node, files, problems, warnings);
}

/// The typed Katalog file of a prepared root.
fn typed(node: Node, problems: &mut Vec<Problem>) -> Option<Parsed> {
    match de::read::<KatalogFile>(&node, "") {
        Ok((file, unknown)) => {
            problems.extend(unknown);
            Some(Parsed { node, file })
        }
        Err(problem) => {
            problems.push(problem);
            None
        }
    }
}

fn note_names(parsed: &Parsed) -> BTreeSet<String> {
    parsed
        .file
        .notes
        .iter()
        .flat_map(|n| n.0.iter().map(|n| n.name.clone()))
        .collect()
}

/// The Katalogs one file holds: itself, or for a Komposer its own part first (its name, notes
/// and added CRDs) and then the files it composes, with the names of the notes it replaces.
fn katalogs_of(
    mut node: Node,
    files: &mut Files,
    read: &mut Vec<(PathBuf, String)>,
    problems: &mut Vec<Problem>,
    warnings: &mut Vec<Problem>,
) -> (Vec<Parsed>, BTreeSet<String>) {
    if node.get("kind").and_then(Node::as_str) != Some("Komposer") {
        prepare(&mut node, files, problems, warnings);
        return (typed(node, problems).into_iter().collect(), BTreeSet::new());
    }
    let Some(komposer) = komposer::read(&node, files, problems) else {
        return (Vec::new(), BTreeSet::new());
    };
    let mut roots = Vec::new();
    for (index, text) in &komposer.sources {
        read.push((files.paths[*index].clone(), text.clone()));
        if let Some(mut root) = parse_root(text, *index, problems) {
            prepare(&mut root, files, problems, warnings);
            roots.push(root);
        }
    }
    let replaced = komposer.note_names.clone();
    let mut own = komposer.compose(&mut roots, problems);
    prepare(&mut own, files, problems, warnings);
    let mut parsed: Vec<Parsed> = std::iter::once(own)
        .chain(roots)
        .filter_map(|root| typed(root, problems))
        .collect();
    // A later file's note replaces an earlier one's, as its CRDs do (the Komposer's own part,
    // first, replaces them all through `replaced`).
    for later in (2..parsed.len()).rev() {
        let names: BTreeSet<String> = note_names(&parsed[later]);
        for earlier in &mut parsed[1..later] {
            if let Some(notes) = &mut earlier.file.notes {
                notes.0.retain(|note| !names.contains(&note.name));
            }
        }
    }
    (parsed, replaced)
}
