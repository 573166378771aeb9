//! Orkestra-rs Katalogs: YAML files in, a merged, validated, typed description of every
//! operator out, with errors that point at file, line and column. The expression language
//! the Katalog is written in (templates, conditions, the resolver) is `orkestra_expr`.
//!
//! Pure: this crate depends on neither kube, wasmtime, tokio nor an HTTP stack (Cargo
//! enforces it: none is a dependency), so it is fast to build, test and fuzz.
//!
//! Modules, in the order data flows:
//! - [`load`] (with [`yaml`], `compose`, `de`, `validate`): files in,
//!   the typed model ([`model`]) out, then [`compile`]: every CRD ready to run, or every
//!   error with its file, line and column. `check` and `gather` are what every check and
//!   every compile report through.
//! - [`model`] holds the Katalog's types as written, one file per concept, below every
//!   stage (a CRD entry holds a `serve`, a serve target holds an operator box). A concept
//!   that reaches past the CRD has its own folder with its checks, its compile and its use:
//!   [`serve`] (the Serve API: checks, surfaces, intents, access, field schema) and
//!   [`cross`] (cross reads: which CRD a read names, its checks, its compile). The CRD and
//!   its operator box are the stages' own subject: `validate/`, `compile/`.
//! - [`fields`] and [`rules`]: typed values written into objects, admission rules at
//!   reconcile (both evaluated with `orkestra_expr`).
//! - [`component`]: a Wasm component as the Katalog declares it, and its grants.
//! - [`kinds`]: the child kinds a block templates, one row each with its renderer.
//! - [`effective_box`]: a CR's CRD box overlaid by its serve target's box.
//! - [`ownership`]: whose child an object is, by evidence a CR's writer cannot forge.

mod check;
pub mod compile;
pub mod component;
mod compose;
pub mod cross;
mod de;
mod diagnostic;
pub mod effective_box;
mod error;
pub mod fields;
pub mod gateway;
mod gather;
pub mod kinds;
pub mod load;
mod loaded;
pub mod migrate;
pub mod model;
pub mod normalize;
pub mod oci;
pub mod ownership;
pub mod profile;
pub mod rbac;
pub mod reads;
pub mod rules;
pub mod serve;
mod validate;
pub mod yaml;

pub use compile::Compiled;
pub use compose::include::PulledMotifs;
pub use de::{Problem, read};
pub use diagnostic::Diagnostic;
pub use error::Error;
pub use kinds::{KindSpec, RESOURCE_KINDS, kind_spec};
pub use load::{load, load_sources, load_sources_with, load_with, read_sources};
pub use loaded::{Katalog, LoadedCrd};
pub use model::*;
pub use reads::StampReads;
pub use validate::{is_builtin_group, is_dns1123_label};

#[cfg(test)]
mod condition_tests;
#[cfg(test)]
mod tests;
