//! The Katalog: YAML files in, a merged, validated, typed description of every operator
//! out. Errors point at file, line and column.
//!
//! Pure: no kube or wasmtime imports, so it is fast to test and to read.

mod de;
mod include;
mod legacy;
mod load;
mod model;
mod motif;
mod reads;
mod validate;
pub mod yaml;

pub use de::{Problem, closest, read};
pub use load::{Diagnostic, Error, Katalog, LoadedCrd, load, load_sources};
pub use model::*;
pub use reads::StampReads;
pub use validate::is_dns1123_label;

/// The current Katalog apiVersion.
pub const API_VERSION: &str = "orkestra.orkspace.io/v1";
/// The older apiVersion, still accepted.
pub const LEGACY_API_VERSION: &str = "orkestra.konductor.io/v1Alpha";

#[cfg(test)]
mod tests;
