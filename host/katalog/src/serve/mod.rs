//! What the gateway does with a compiled `serve`, request by request (the Katalog side of
//! its stages; the model, checks and compile of `serve` are `model::serve`,
//! `validate::serve` and `compile::serve`):
//! - [`intent`]: which CRD and surface a request names, and the CR its fields make;
//! - [`access`]: who may do what through the Serve API;
//! - [`schema`]: the flat field schema of a target, and the type at a path.

pub mod access;
pub mod intent;
pub mod schema;
