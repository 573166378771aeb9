//! The `serve` of a CRD, from Katalog to request. Its types, as the Katalog is written, are
//! `model/serve.rs` (a CRD entry holds one, so they sit below every stage); the rest is
//! here:
//! - `check`: the Katalog checks of a `serve` (targets unique, clusters and tokens known);
//! - [`compile`]: the surfaces a request can name, compiled once at load;
//! - [`rules`]: the admission rules a `serve`'s field constraints stand for;
//! - [`intent`]: which CRD and surface a request names, and the CR its fields make;
//! - [`access`]: who may do what through the Serve API;
//! - [`schema`]: the flat field schema of a target, and the type at a path.

pub mod access;
mod check;
pub mod compile;
pub mod intent;
pub mod rules;
pub mod schema;

pub use compile::{CompiledServe, IntentField, Response, Surface};
