//! The pages, rendered on the server (maud escapes everything a runtime says).

pub mod components;
pub mod crd;
pub mod create;
pub mod dashboard;
pub mod draw;
pub mod layout;
