//! The Katalog as written: serde types whose doc comments are the format reference.

use std::collections::BTreeMap;

use serde::Deserialize;

/// One Katalog file.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KatalogFile {
    /// `orkestra.orkspace.io/v1` (or the older `orkestra.konductor.io/v1Alpha`).
    pub api_version: String,
    /// Always `Katalog`.
    pub kind: String,
    /// Name and description; the name is written on managed CRs as `managed-by`.
    #[serde(default)]
    pub metadata: Metadata,
    /// The operators.
    #[serde(default)]
    pub spec: Spec,
}

/// Katalog metadata.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub version: String,
}

/// `spec`: the CRDs this Katalog operates, keyed by a DNS-1123 name.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    #[serde(default)]
    pub crds: BTreeMap<String, CrdEntry>,
}

/// `spec.crds.<name>`: one operator.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CrdEntry {
    /// `false` skips the CRD entirely.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The kind this operator reconciles.
    pub api_types: ApiTypes,
    /// A CRD manifest to install in dev mode; generated from `apiTypes` when absent.
    #[serde(default)]
    pub crd_file: Option<String>,
    /// Sample CRs applied by `ork dev --apply-cr`.
    #[serde(default)]
    pub cr_files: Vec<String>,
    /// Namespaced (default) or cluster-scoped.
    #[serde(default = "yes")]
    pub namespaced: bool,
}

/// `apiTypes`: group, version, kind and plural of the primary resource.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiTypes {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    pub kind: String,
    #[serde(default)]
    pub plural: String,
}

fn yes() -> bool {
    true
}
