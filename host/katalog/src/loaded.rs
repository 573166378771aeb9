//! What loading produces: the merged [`Katalog`], its CRDs with their source files, and the
//! located findings; also the parsed form each file passes through.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::diagnostic::Diagnostic;
use crate::model::{CrdEntry, KatalogFile, NoteSpec};
use crate::reads::StampReads;
use crate::yaml::Node;

/// A CRD entry with the file it came from (relative paths resolve against its folder).
#[derive(Debug, Clone)]
pub struct LoadedCrd {
    pub name: String,
    pub entry: CrdEntry,
    pub source: PathBuf,
    /// Which of the runtime's stamps (`.health`, `.metrics`) its templates, conditions or the
    /// Katalog's notes read.
    pub reads: StampReads,
}

impl LoadedCrd {
    /// Resolves a path written in the Katalog relative to the Katalog's folder.
    pub fn resolve(&self, path: &str) -> PathBuf {
        let base = self.source.parent().unwrap_or(Path::new("."));
        base.join(path)
    }

    /// The plural, defaulting to the lowercased kind plus `s`.
    pub fn plural(&self) -> String {
        if self.entry.api_types.plural.is_empty() {
            format!("{}s", self.entry.api_types.kind.to_lowercase())
        } else {
            self.entry.api_types.plural.clone()
        }
    }
}

/// Several Katalog files merged and validated.
#[derive(Debug, Clone, Default)]
pub struct Katalog {
    /// The name of the first file's Katalog.
    pub name: String,
    /// Every CRD of every file, by name.
    pub crds: BTreeMap<String, LoadedCrd>,
    /// User notes of every file.
    pub notes: Vec<NoteSpec>,
    /// Katalog-wide finalizers.
    pub finalizers: Vec<String>,
    /// Findings that do not stop the Katalog from loading.
    pub warnings: Vec<Diagnostic>,
    /// Each file given, as written (for the Live API's `/katalog/raw`).
    pub sources: Vec<(PathBuf, String)>,
    /// The gateway's settings (of the first file that has them).
    pub gateway: Option<crate::model::Gateway>,
    pub security: Option<crate::model::Security>,
    /// `spec.ha` (of the first file that has it).
    pub ha: Option<crate::model::HaSpec>,
    /// `spec.tenants` (of the first file that has it).
    pub tenants: Option<crate::model::TenantsSpec>,
}

impl Katalog {
    /// `unknown CRD "x"`, with the closest key as a hint, when `name` is not a CRD key here.
    pub(crate) fn unknown_crd(&self, name: &str) -> Option<String> {
        if self.crds.contains_key(name) {
            return None;
        }
        let names: Vec<&str> = self.crds.keys().map(String::as_str).collect();
        let hint = orkestra_expr::text::closest(name, &names)
            .map(|c| format!(" (did you mean \"{c}\"?)"))
            .unwrap_or_default();
        Some(format!("unknown CRD \"{name}\"{hint}"))
    }
}

/// One file after parsing: the node tree (kept for positions) and the typed model.
pub(super) struct Parsed {
    pub node: Node,
    pub file: KatalogFile,
}

/// The node of `spec.crds.<name>`.
pub(super) fn crd_node<'n>(root: &'n Node, name: &str) -> Option<&'n Node> {
    root.get("spec")?.get("crds")?.get(name)
}
