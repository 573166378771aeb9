//! The Katalog: YAML files in, a merged, typed description of every operator out.
//!
//! Pure: no kube or wasmtime imports, so it is fast to test and to read.

mod load;
mod model;

pub use load::{Error, Katalog, LoadedCrd, load};
pub use model::{ApiTypes, CrdEntry, KatalogFile, Metadata};

/// The current Katalog apiVersion.
pub const API_VERSION: &str = "orkestra.orkspace.io/v1";
/// The older apiVersion, still accepted.
pub const LEGACY_API_VERSION: &str = "orkestra.konductor.io/v1Alpha";
