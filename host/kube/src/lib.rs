//! What the runtime, the Wasm host and `ork dev` need from an API server beyond kube's
//! client: finding a kind (with fallbacks to older API versions), applying manifests, and
//! installing a Katalog's CRDs, and [`objects`], the one way to an API path that carries a
//! name (checked and encoded), [`trace`], a write's trace context carried on the object,
//! and [`tenant`], whose work the current task's requests are.

pub mod crd_install;
pub mod discovery;
pub mod manifests;
pub mod objects;
pub mod tenant;
pub mod trace;
