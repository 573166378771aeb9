//! Orkestra-rs Katalogs: YAML files in, a merged, validated, typed description of every
//! operator out, with errors that point at file, line and column. Also the expression
//! language Katalogs are written in and the pure evaluation around it.
//!
//! Pure: this crate depends on neither kube, wasmtime, tokio nor an HTTP stack (Cargo
//! enforces it: none is a dependency), so it is fast to build, test and fuzz.
//!
//! Modules, in the order data flows:
//! - [`load`] (with [`yaml`], `include`, `motif`, `legacy`, `de`, `validate`): files in,
//!   the typed model ([`model`]) out, then [`compile`]: every CRD ready to run, or every
//!   error with its file, line and column.
//! - [`template`], [`cron`], [`duration`], [`calendar`]: the expression language; [`tree`]:
//!   JSON whose strings are templates.
//! - [`sentinel`]: old and new object in, the facts of an update out.
//! - [`resolver`], [`condition`]: the one evaluation context and the one condition evaluator;
//!   [`fields`] and [`rules`]: typed values written into objects, admission rules at reconcile.
//! - [`component`]: a Wasm component as the Katalog declares it, and its grants.
//! - [`effective_box`]: a CR's CRD box overlaid by its serve target's box.
//! - [`ownership`], [`labels`]: whose child an object is, by evidence a CR's writer cannot forge.
//! - [`text`]: bounded, char-safe text for anything a tenant supplies; [`names`]: the rules
//!   for names that reach an API path.

pub mod access;
pub mod calendar;
pub mod compile;
pub mod component;
pub mod condition;
mod crd_file;
pub mod cron;
mod cross_target;
mod de;
pub mod duration;
pub mod effective_box;
pub mod fields;
mod include;
pub mod intent;
mod komposer;
pub mod labels;
mod legacy;
pub mod load;
mod loaded;
pub mod migrate;
pub mod model;
mod motif;
pub mod names;
pub mod normalize;
pub mod ownership;
pub mod profile;
pub mod rbac;
pub mod reads;
pub mod resolver;
pub mod rules;
pub mod sentinel;
pub mod serve_rules;
pub mod serve_schema;
pub mod template;
pub mod text;
pub mod tree;
mod validate;
pub mod yaml;

pub use compile::Compiled;
pub use de::{Problem, read};
pub use load::{load, load_sources};
pub use loaded::{Diagnostic, Error, Katalog, LoadedCrd};
pub use model::*;
pub use reads::StampReads;
pub use validate::{is_builtin_group, is_dns1123_label};

/// The current Katalog apiVersion.
pub const API_VERSION: &str = "orkestra.orkspace.io/v1";
/// The older apiVersion, still accepted.
pub const LEGACY_API_VERSION: &str = "orkestra.konductor.io/v1Alpha";

#[cfg(test)]
mod tests;
