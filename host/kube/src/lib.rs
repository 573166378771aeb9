//! What the runtime, the Wasm host and `ork dev` need from an API server beyond kube's
//! client: finding a kind (with fallbacks to older API versions), applying manifests, and
//! installing a Katalog's CRDs, and [`objects`], the one way to an API path that carries a
//! name (checked and encoded), [`trace`], a write's trace context carried on the object,
//! [`tenant`], whose work the current task's requests are, and [`transient`], start-up
//! writes tried again while the API server refuses them for a moment; and [`user_agent`], the
//! name every request of `ork` carries.

pub mod crd_install;
pub mod discovery;
pub mod manifests;
pub mod objects;
pub mod setup_wait;
pub mod tenant;
pub mod trace;
pub mod transient;

/// `ork/<version> (<command>)`: the User-Agent of every request `ork command` sends, so an
/// API server's audit log, its metrics and its priority and fairness rules can tell ork's
/// requests from anyone else's (and a benchmark can count them).
pub fn user_agent(command: &str) -> String {
    format!("ork/{} ({command})", env!("CARGO_PKG_VERSION"))
}
