//! What the runtime, the Wasm host and `ork dev` need from an API server beyond kube's
//! client: finding a kind (with fallbacks to older API versions), applying manifests, and
//! installing a Katalog's CRDs, and [`objects`], the one way to an API path that carries a
//! name (checked and encoded), [`trace`], a write's trace context carried on the object,
//! [`tenant`], whose work the current task's requests are, and [`transient`], start-up
//! writes tried again while the API server refuses them for a moment.

pub mod crd_install;
pub mod discovery;
pub mod manifests;
pub mod objects;
pub mod setup_wait;
pub mod tenant;
pub mod trace;
pub mod transient;
