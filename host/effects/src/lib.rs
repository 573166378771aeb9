//! What a Katalog asks of the world besides Kubernetes objects, shared by the runtime's
//! reconcile and gates and the gateway's admission rules, so neither needs the other (and
//! the gateway links no Wasm engine):
//! - [`external`]: the HTTP calls a block, a gate or a rule declares;
//! - [`tls`]: the certificate and key a `secrets` entry asks to be generated.

mod error;
pub mod external;
pub mod tls;

pub use error::Error;
