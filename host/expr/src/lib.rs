//! The expression language Katalogs are written in, and the pure evaluation around it:
//! - [`template`]: Go-style templates, compiled once against a function table (the notes
//!   library, the sentinels, a Katalog's own notes) and evaluated many times; [`tree`]: JSON
//!   whose strings are templates;
//! - [`condition`]: the one condition evaluator (operators, shorthands, time windows), and
//!   the condition fields every Katalog feature shares;
//! - [`resolver`]: the one evaluation context (the object, `.request`, `.health`, results
//!   added by the pipeline) that templates and conditions read;
//! - [`sentinel`]: old and new object in, the facts of an update out;
//! - [`cron`], [`duration`], [`calendar`]: time as Katalogs write it;
//! - [`names`], [`text`], [`labels`]: the rules for names that reach an API path, bounded
//!   text for anything a tenant supplies, and the labels and annotations templates read.
//!
//! Pure: no kube, wasmtime, tokio or HTTP stack, and nothing of the Katalog's file format
//! (the Katalog crate deserializes into these types).

pub mod calendar;
pub mod condition;
pub mod cron;
pub mod duration;
mod error;
pub mod labels;
pub mod names;
pub mod resolver;
pub mod sentinel;
pub mod template;
pub mod text;
pub mod tree;

pub use error::Error;
