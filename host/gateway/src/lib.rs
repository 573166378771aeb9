//! The Orkestra-rs gateway: the shared front door of every serve-enabled CRD. [`Gateway`]
//! starts what a Katalog enables of it and serves it on its own port, or hands the Serve
//! API to the runtime's Live API port.
//!
//! - [`admission`], [`patch`], [`review`]: the validating and mutating webhooks the API
//!   server calls, running the Katalog's rules at admission.
//! - [`protection`]: deletion and namespace protection; [`provenance`]: the annotations only
//!   the gateway writes.
//! - [`conversion`]: the conversion webhook of multi-version CRDs.
//! - [`registration`]: the webhook configurations that point the API server at them, each
//!   reaching only what its entry selects ([`scope`]); [`serving`]: which of them the
//!   Katalog turns on.
//! - [`tls`], [`webhooks`]: the HTTPS server, its certificate and its renewal; [`failpoint`]:
//!   the faults `ork test --faults` makes it answer with.
//! - [`stats`]: `GET /katalog` of a standalone gateway.
//! - [`api`], [`tokens`], [`oidc`], [`clusters`]: the Serve API (intents in, CRs applied with
//!   provenance, to one cluster or several), the bearer tokens it accepts (static and
//!   OIDC, signatures checked by [`jwt_ring`]), and the clients of the clusters it routes to;
//!   its OpenAPI document is `GET /api/v1/openapi.json`.
//! - [`intake`]: webhook intake (GitHub and GitLab pushes, Slack slash commands, signed
//!   JSON) into the Serve API's apply chain; `secrets` reads the Secrets it checks with.

pub mod admission;
pub mod api;
pub mod cert_manager;
pub mod clusters;
pub mod conversion;
pub mod conversion_window;
pub mod failpoint;
pub mod intake;
pub mod jwt_ring;
pub mod oidc;
pub mod patch;
pub mod protection;
pub mod provenance;
pub mod registration;
pub mod review;
pub mod scope;
mod secrets;
pub mod serving;
mod start;
pub mod stats;
pub mod tls;
pub mod tokens;
pub mod webhooks;

pub use start::{Error, Gateway};
