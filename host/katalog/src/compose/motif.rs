//! Motif imports: `reconcile.imports: [{motif: ./file.yaml, with: {...}}]` merges a motif's
//! resource templates into `onReconcile` (or, written by phase, into `onCreate`, `onReconcile`
//! and `onDelete`), its `status` fields after the CRD's own, its `admission` rules after the
//! CRD's own and its notes into the Katalog's, at load time; `spec.imports` at Katalog level
//! brings notes to every CRD. A motif declares its inputs (with an optional `type`); a missing required
//! input, an undeclared one or a value of another type is an error. The values (given or
//! defaulted) travel with each merged entry and are visible to its templates as `.inputs`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

use crate::compose::include::Files;
use crate::de::{self, Problem};
use crate::loaded::{Parsed, crd_node};
use crate::model::{HookTemplates, Import, MutationSpec, Notes, StatusSpec, ValidationSpec};
use crate::profile::Imported;
use crate::yaml::{self, Node, NodeValue};

/// A motif file.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MotifFile {
    #[serde(default)]
    api_version: String,
    kind: String,
    /// Name and description, for people reading the file.
    #[serde(default)]
    #[expect(dead_code, reason = "accepted so motif files may describe themselves")]
    metadata: Option<Value>,
    #[serde(default)]
    inputs: Vec<MotifInput>,
    /// Read from the node by [`phases`]: one set of templates, or one per phase.
    #[serde(default)]
    #[expect(dead_code, reason = "read from the node, in one of its two shapes")]
    resources: Option<Value>,
    #[serde(skip)]
    phases: Phases,
    /// Status fields the importing CRD writes after its own.
    #[serde(default)]
    status: Option<StatusSpec>,
    /// Validation and mutation rules the importing CRD runs after its own.
    #[serde(default)]
    admission: Option<MotifAdmission>,
    /// Template functions for every CRD of the importing Katalog (a list, or a map by name).
    #[serde(default)]
    notes: Notes,
    /// Profiles for every CRD of the importing Katalog.
    #[serde(default)]
    profiles: Option<Value>,
}

/// A motif's resource templates by phase; the one-set shape is `on_reconcile`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Phases {
    #[serde(default)]
    on_create: HookTemplates,
    #[serde(default)]
    on_reconcile: HookTemplates,
    #[serde(default)]
    on_delete: HookTemplates,
}

impl Phases {
    fn is_empty(&self) -> bool {
        [&self.on_create, &self.on_reconcile, &self.on_delete]
            .iter()
            .all(|t| t.resources().iter().all(|(_, entries)| entries.is_empty()))
    }
}

/// The rules a motif adds to the importing CRD's admission.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MotifAdmission {
    #[serde(default)]
    validation: Option<ValidationSpec>,
    #[serde(default)]
    mutation: Option<MutationSpec>,
}

/// The `resources` of a motif node: by phase when it names one, else one set for
/// `onReconcile`.
fn phases(node: &Node, problems: &mut Vec<Problem>) -> Phases {
    let Some(resources) = node.get("resources") else {
        return Phases::default();
    };
    let by_phase = ["onCreate", "onReconcile", "onDelete"]
        .iter()
        .any(|phase| resources.get(phase).is_some());
    let read = match by_phase {
        true => de::read::<Phases>(resources, "resources"),
        false => de::read::<HookTemplates>(resources, "resources").map(|(on_reconcile, unknown)| {
            let phases = Phases {
                on_reconcile,
                ..Phases::default()
            };
            (phases, unknown)
        }),
    };
    match read {
        Ok((phases, unknown)) => {
            problems.extend(unknown);
            phases
        }
        Err(problem) => {
            problems.push(problem);
            Phases::default()
        }
    }
}

/// One declared input.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MotifInput {
    name: String,
    #[serde(default)]
    required: bool,
    #[serde(default)]
    default: Option<Value>,
    /// string, integer, number, boolean, list or map: what a given value must be.
    #[serde(default, rename = "type")]
    type_: Option<String>,
    #[serde(default)]
    #[expect(dead_code, reason = "accepted so motif files may document their inputs")]
    description: String,
}

/// Merges every CRD's motif imports into it, and Katalog-level imports' notes; the motifs'
/// profiles (each motif's once) go to `profiles`.
pub(crate) fn merge_imports(
    parsed: &mut [Parsed],
    files: &mut Files,
    profiles: &mut Vec<Imported>,
    problems: &mut Vec<Problem>,
) {
    let mut add_profiles = |motif: &mut MotifFile, origin: &str, pos: yaml::Pos| {
        let origin = format!("motif {origin}");
        if let Some(found) = motif.profiles.take()
            && !profiles.iter().any(|p| p.origin == origin)
        {
            profiles.push(Imported {
                origin,
                profiles: found,
                pos,
            });
        }
    };
    for Parsed { node, file } in parsed.iter_mut() {
        let imports = std::mem::take(&mut file.spec.imports);
        let imports_node = node.get("spec").and_then(|s| s.get("imports"));
        for (i, import) in imports.iter().enumerate() {
            let path = format!("spec.imports[{i}]");
            let Some((mut motif, pos)) = imported(import, imports_node, i, node.pos, &path, files, problems) else {
                continue;
            };
            add_profiles(&mut motif, import.motif.as_deref().unwrap_or_default(), pos);
            if !motif.phases.is_empty() || motif.status.is_some() || motif.admission.is_some() {
                problems.push(Problem {
                    path,
                    pos,
                    message: "a Katalog-level import brings only notes and profiles; import a motif with resources, status or admission under a CRD's reconcile.imports".into(),
                });
                continue;
            }
            add_notes(&mut file.notes, motif.notes.0);
        }
        for (name, entry) in file.spec.crds.iter_mut() {
            let Some(reconcile) = entry.operator_box.reconcile.as_mut() else {
                continue;
            };
            let imports = std::mem::take(&mut reconcile.imports);
            let imports_node = crd_node(node, name)
                .and_then(|n| n.get("operatorBox"))
                .and_then(|n| n.get("reconcile"))
                .and_then(|n| n.get("imports"));
            for (i, import) in imports.iter().enumerate() {
                let path = format!("spec.crds.{name}.operatorBox.reconcile.imports[{i}]");
                let Some((mut motif, pos)) = imported(import, imports_node, i, node.pos, &path, files, problems) else {
                    continue;
                };
                add_profiles(&mut motif, import.motif.as_deref().unwrap_or_default(), pos);
                let Some(inputs) = inputs(&motif, &import.with_, &path, pos, problems) else {
                    continue;
                };
                let Phases {
                    on_create,
                    on_reconcile,
                    on_delete,
                } = std::mem::take(&mut motif.phases);
                for (templates, target) in [
                    (on_create, &mut reconcile.on_create),
                    (on_reconcile, &mut reconcile.on_reconcile),
                    (on_delete, &mut reconcile.on_delete),
                ] {
                    join(templates, target, &inputs);
                }
                if let Some(admission) = motif.admission.take() {
                    let own = &mut entry.admission;
                    if let Some(validation) = admission.validation {
                        let into = own.validation.get_or_insert_with(Default::default);
                        into.rules.extend(validation.rules);
                        into.external.extend(validation.external);
                    }
                    if let Some(mutation) = admission.mutation {
                        let into = own.mutation.get_or_insert_with(Default::default);
                        into.rules.extend(mutation.rules);
                        into.external.extend(mutation.external);
                    }
                }
                if let Some(status) = motif.status {
                    let emit = entry.operator_box.emit.get_or_insert_with(Default::default);
                    let fields = &mut emit.status.get_or_insert_with(Default::default).fields;
                    fields.extend(status.fields);
                }
                add_notes(&mut file.notes, motif.notes.0);
            }
        }
    }
}

/// Adds a motif's templates (each carrying the import's input values) after a phase's own.
fn join(templates: HookTemplates, target: &mut Option<HookTemplates>, inputs: &Value) {
    let entries = templates.resources();
    if entries.iter().all(|(_, e)| e.is_empty()) {
        return;
    }
    let target = target.get_or_insert_with(HookTemplates::default);
    for (key, entries) in entries {
        if let Some(list) = target.resources_mut(key) {
            list.extend(entries.iter().cloned().map(|mut e| {
                e.inputs = Some(inputs.clone());
                e
            }));
        }
    }
}

/// The motif import `i` of a list (whose node is `list`) names, read, and where the import
/// is written (`fallback` when the list has no node).
fn imported(
    import: &Import,
    list: Option<&Node>,
    i: usize,
    fallback: yaml::Pos,
    path: &str,
    files: &mut Files,
    problems: &mut Vec<Problem>,
) -> Option<(MotifFile, yaml::Pos)> {
    let pos = match list.map(|n| &n.value) {
        Some(NodeValue::Seq(items)) => items.get(i).map_or(fallback, |n| n.pos),
        _ => fallback,
    };
    // `oci:` may leave the scheme out, as upstream writes it.
    let remote = match (&import.oci, &import.motif) {
        (Some(oci), _) => Some((format!("oci://{}", oci.trim_start_matches("oci://")), "oci")),
        (None, Some(motif)) if motif.starts_with("oci://") => Some((motif.clone(), "motif")),
        _ => None,
    };
    if let Some((reference, key)) = remote {
        return pulled_motif(&reference, pos, (path, key), files, problems).map(|motif| (motif, pos));
    }
    let Some(motif_path) = import.motif.as_ref() else {
        problems.push(Problem {
            path: path.to_string(),
            pos,
            message: "an import needs `motif:` (a file path, or an oci:// reference pinned by digest)".into(),
        });
        return None;
    };
    read_motif(motif_path, pos, path, files, problems).map(|motif| (motif, pos))
}

/// A motif kept in an OCI registry, pinned by its manifest digest: read from what the
/// caller pulled, or noted as wanted (the load then fails, and the caller pulls and loads
/// again).
fn pulled_motif(
    reference: &str,
    pos: yaml::Pos,
    (path, key): (&str, &str),
    files: &mut Files,
    problems: &mut Vec<Problem>,
) -> Option<MotifFile> {
    let reference = match crate::component::OciReference::parse(reference, true) {
        Ok(reference) => reference,
        Err(message) => {
            problems.push(Problem {
                path: format!("{path}.{key}"),
                pos,
                message: message.to_string(),
            });
            return None;
        }
    };
    let Some(text) = files.pulled.get(&reference.digest).cloned() else {
        problems.push(Problem {
            path: format!("{path}.{key}"),
            pos,
            message: format!("the motif {reference} is not pulled"),
        });
        if !files.wanted.contains(&reference) {
            files.wanted.push(reference);
        }
        return None;
    };
    let index = files.paths.len();
    // Its own relative paths (none are expected) resolve against the working folder.
    files.paths.push(PathBuf::from(reference.to_string()));
    parse_motif(&text, index, path, problems)
}

fn read_motif(
    relative: &str,
    pos: yaml::Pos,
    path: &str,
    files: &mut Files,
    problems: &mut Vec<Problem>,
) -> Option<MotifFile> {
    let full = files.dir_of(pos.file).join(relative);
    let text = match std::fs::read_to_string(&full) {
        Ok(text) => text,
        Err(e) => {
            problems.push(Problem {
                path: format!("{path}.motif"),
                pos,
                message: format!("cannot read motif {}: {e}", full.display()),
            });
            return None;
        }
    };
    let index = files.paths.len();
    files.paths.push(full);
    parse_motif(&text, index, path, problems)
}

/// A motif's YAML (file `index` of the load), read and checked to be a Motif.
fn parse_motif(text: &str, index: usize, path: &str, problems: &mut Vec<Problem>) -> Option<MotifFile> {
    let node: Node = match yaml::parse_file(text, index) {
        Ok(node) => node,
        Err(e) => {
            problems.push(Problem {
                path: format!("{path}.motif"),
                pos: e.pos,
                message: format!("YAML error in motif: {}", e.message),
            });
            return None;
        }
    };
    let mut node = node;
    crate::compose::legacy::rule_lists_as_maps(&mut node);
    match de::read::<MotifFile>(&node, "") {
        Ok((mut motif, unknown)) => {
            problems.extend(unknown);
            motif.phases = phases(&node, problems);
            if motif.kind != "Motif"
                || (motif.api_version != crate::model::API_VERSION && !motif.api_version.is_empty())
            {
                let message = format!(
                    "a motif file has kind Motif and apiVersion {}, found {} {}",
                    crate::model::API_VERSION,
                    motif.api_version,
                    motif.kind
                );
                problems.push(Problem {
                    path: "kind".into(),
                    pos: node.pos,
                    message,
                });
                return None;
            }
            Some(motif)
        }
        Err(problem) => {
            problems.push(problem);
            None
        }
    }
}

/// The input values: `with` over defaults; errors for missing required and unknown inputs.
fn inputs(
    motif: &MotifFile,
    with: &BTreeMap<String, Value>,
    path: &str,
    pos: yaml::Pos,
    problems: &mut Vec<Problem>,
) -> Option<Value> {
    let mut ok = true;
    for key in with.keys() {
        if !motif.inputs.iter().any(|i| &i.name == key) {
            let names: Vec<&str> = motif.inputs.iter().map(|i| i.name.as_str()).collect();
            problems.push(Problem {
                path: format!("{path}.with.{key}"),
                pos,
                message: format!(
                    "the motif declares no input \"{key}\" (inputs: {})",
                    if names.is_empty() {
                        "none".into()
                    } else {
                        names.join(", ")
                    }
                ),
            });
            ok = false;
        }
    }
    let mut values = serde_json::Map::new();
    for input in &motif.inputs {
        match (with.get(&input.name), &input.default) {
            (Some(value), _) | (None, Some(value)) => {
                if let Some(wanted) = &input.type_
                    && !is_of_type(value, wanted)
                {
                    problems.push(Problem {
                        path: format!("{path}.with.{}", input.name),
                        pos,
                        message: format!(
                            "the motif's input \"{}\" must be of type {wanted}, given {value}",
                            input.name
                        ),
                    });
                    ok = false;
                }
                values.insert(input.name.clone(), value.clone());
            }
            (None, None) if input.required => {
                problems.push(Problem {
                    path: format!("{path}.with"),
                    pos,
                    message: format!("the motif's required input \"{}\" is not given", input.name),
                });
                ok = false;
            }
            (None, None) => {}
        }
    }
    ok.then_some(Value::Object(values))
}

/// Whether `value` is of a motif input's declared type (an unknown type name accepts all).
fn is_of_type(value: &Value, wanted: &str) -> bool {
    match wanted {
        "string" => value.is_string(),
        "integer" | "int" => value.is_i64() || value.is_u64(),
        "number" | "float" => value.is_number(),
        "boolean" | "bool" => value.is_boolean(),
        "list" | "array" => value.is_array(),
        "map" | "object" => value.is_object(),
        _ => true,
    }
}

/// Adds a motif's notes; one imported twice (by two CRDs) is added once.
fn add_notes(notes: &mut Option<Notes>, imported: Vec<crate::model::NoteSpec>) {
    let notes = &mut notes.get_or_insert_with(Default::default).0;
    for note in imported {
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
}
