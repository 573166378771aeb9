//! The gateway's half of a Katalog, past its types: what the gateway's own sections check and
//! compile to. Their types, as the Katalog is written, are `model/gateway.rs` and
//! `model/intake.rs` (a Katalog file holds them, so they sit below every stage); a CRD's
//! `serve` has its own folder, [`crate::serve`]. Here:
//! - `check`: `gateway` and `security` (tokens, OIDC issuers, clusters, the webhooks'
//!   certificate, namespace protection);
//! - [`intake`]: webhook intake entries, checked, and what a push entry compiles to.

mod check;
pub mod intake;

pub use intake::{Repository, WatchGlobs};
