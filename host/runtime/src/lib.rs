//! Orkestra-rs runtime: one native host process runs the declarative pipeline for every CRD
//! of a Katalog (loaded by `orkestra_katalog`), and sandboxed WebAssembly components
//! (hosted by `orkestra_wasm`) supply hooks and reconcilers.
//!
//! Modules, in the order data flows:
//! - [`compiled`]: a loaded Katalog compiled into what the pipeline runs.
//! - [`observe`], [`enqueue`], [`queue`]: watches in, keyed work items out.
//! - [`kordinator`], [`gate`], [`mux`], [`failure`]: workers, the gates in front of
//!   reconcile, the one request each reconcile receives, and why one failed.
//! - [`declarative`] with [`render`], [`external`], [`cross`]: the reconciler, the templates
//!   it renders, its HTTP calls and reads of other CRDs.
//! - [`health`], [`feedback`], [`counters`]: the health state machine, the stamps gates read,
//!   the counts behind them.
//! - [`runtime`], [`reload`], [`admin`]: wiring, live reloads and the admin endpoint.
//! - [`control_plane`]: a real local etcd + kube-apiserver + kube-controller-manager.

pub mod admin;
pub mod compiled;
pub mod control_plane;
pub mod counters;
pub mod cross;
pub mod declarative;
pub mod enqueue;
pub mod external;
pub mod failure;
pub mod feedback;
pub mod gate;
pub mod health;
pub mod kordinator;
pub mod mux;
pub mod observe;
pub mod queue;
pub mod reload;
pub mod render;
pub mod runtime;
