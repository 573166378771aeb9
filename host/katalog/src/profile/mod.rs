//! Profiles: named presets a Katalog writes instead of the numbers (`reconcile.profile:
//! conservative`, `resources: {profile: small}`, a NetworkPolicy's `profile: deny-all`). The
//! user's come from the `profiles:` blocks of the Katalog files and of the motifs they import
//! ([`registry`]); a user profile replaces a built-in of its name. Applied at load, after
//! motifs are merged and before validation, so what follows sees the fields the presets
//! stand for ([`reconciler`] for the CRD's own tuning, [`children`] for child resources).

pub mod children;
mod reconciler;
mod registry;

use serde_json::Value;

use crate::de::Problem;
use crate::loaded::Parsed;
use crate::model::{HookTemplates, OperatorBox, box_path};
use crate::yaml::Pos;
pub use registry::Registry;

/// A `profiles:` block of an imported motif.
pub struct Imported {
    /// `motif ./motifs/x.yaml`.
    pub origin: String,
    pub profiles: Value,
    /// Where the import is written.
    pub pos: Pos,
}

/// Reads every profile, then expands what names one.
pub(super) fn apply(parsed: &mut [Parsed], imported: &[Imported], problems: &mut Vec<Problem>) {
    let registry = read(parsed, imported, problems);
    reconciler::apply(parsed, &registry, problems);
    for Parsed { node, file } in parsed.iter_mut() {
        for (name, entry) in &mut file.spec.crds {
            let mut report = |path: String, message: String| {
                let pos = node.at_path(&path).0.pos;
                problems.push(Problem { path, pos, message });
            };
            for (target, operator_box) in entry.boxes_mut() {
                let base = format!("spec.crds.{name}.{}", box_path(target));
                expand_box(operator_box, &base, &registry, &mut report);
            }
        }
    }
}

/// The registry of every file's and imported motif's profiles.
fn read(parsed: &[Parsed], imported: &[Imported], problems: &mut Vec<Problem>) -> Registry {
    let positions: Vec<_> = parsed
        .iter()
        .map(|Parsed { node, .. }| {
            move |class: &str, index: Option<usize>| {
                let path = match (class, index) {
                    ("", _) => "profiles".to_string(),
                    (class, None) => format!("profiles.{class}"),
                    (class, Some(i)) => format!("profiles.{class}[{i}]"),
                };
                node.at_path(&path).0.pos
            }
        })
        .collect();
    let at_import: Vec<_> = imported
        .iter()
        .map(|i| move |_: &str, _: Option<usize>| i.pos)
        .collect();
    let mut sources = Vec::new();
    for (Parsed { file, .. }, pos) in parsed.iter().zip(&positions) {
        if let Some(profiles) = &file.profiles {
            sources.push(registry::Source {
                origin: "the katalog".into(),
                profiles,
                pos,
            });
        }
    }
    for (import, pos) in imported.iter().zip(&at_import) {
        sources.push(registry::Source {
            origin: import.origin.clone(),
            profiles: &import.profiles,
            pos,
        });
    }
    Registry::read(&sources, problems)
}

/// Expands the child profiles of every entry of a box's templates.
fn expand_box(
    operator_box: &mut OperatorBox,
    base: &str,
    registry: &Registry,
    report: &mut impl FnMut(String, String),
) {
    let Some(reconcile) = operator_box.reconcile.as_mut() else {
        return;
    };
    for (block, name) in [
        (&mut reconcile.on_create, "onCreate"),
        (&mut reconcile.on_reconcile, "onReconcile"),
        (&mut reconcile.on_delete, "onDelete"),
    ] {
        if let Some(templates) = block {
            expand_templates(templates, &format!("{base}.reconcile.{name}"), registry, report);
        }
    }
}

fn expand_templates(
    templates: &mut HookTemplates,
    at: &str,
    registry: &Registry,
    report: &mut impl FnMut(String, String),
) {
    for (i, group) in templates.groups.iter_mut().enumerate() {
        expand_templates(group, &format!("{at}.groups[{i}]"), registry, report);
    }
    for kind in crate::kinds::RESOURCE_KINDS.iter().map(|k| k.key) {
        for (i, entry) in templates.resources_mut(kind).into_iter().flatten().enumerate() {
            let mut fields = std::mem::take(&mut entry.fields).into_iter().collect();
            let (choices, findings) = children::expand(kind, &mut fields, registry);
            entry.fields = fields.into_iter().collect();
            entry.profiles = choices;
            for (field, message) in findings {
                report(format!("{at}.{kind}[{i}].{field}"), message);
            }
        }
    }
}
