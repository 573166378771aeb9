//! Orkestra-rs: a Kubernetes operator host. A YAML Katalog declares operators; one native
//! host process runs the declarative pipeline for every CRD in it, and sandboxed
//! WebAssembly components supply hooks and reconcilers.
//!
//! Modules, in the order data flows:
//! - [`katalog`]: Katalog files in, a merged typed model out (pure).
//! - [`template`], [`cron`], [`duration`]: the expression language of Katalogs (pure).
//! - [`sentinel`]: old and new object in, the facts of an update out (pure).
//! - [`resolver`], [`condition`]: the one evaluation context and the one condition evaluator (pure).
//! - [`effective_box`]: a CR's CRD box overlaid by its serve target's box (pure).
//! - [`ownership`]: whose child an object is, by evidence a CR's writer cannot forge (pure).
//! - [`crd_install`] and [`manifests`]: CRDs and sample CRs applied for `ork dev` and tests.
//! - [`control_plane`]: a real local etcd + kube-apiserver + kube-controller-manager.

pub mod admin;
pub mod calendar;
pub mod compiled;
pub mod condition;
pub mod control_plane;
pub mod crd_install;
pub mod cron;
pub mod cross;
pub mod declarative;
pub mod discovery;
pub mod duration;
pub mod effective_box;
pub mod enqueue;
pub mod external;
pub mod feedback;
pub mod gate;
pub mod health;
pub mod katalog;
pub mod kordinator;
pub mod labels;
pub mod manifests;
pub mod mux;
pub mod observe;
pub mod ownership;
pub mod queue;
pub mod reload;
pub mod resolver;
pub mod runtime;
pub mod sentinel;
pub mod template;
pub mod text;
pub mod wasm;
