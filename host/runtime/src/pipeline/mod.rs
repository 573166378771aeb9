//! One CRD's pipeline, in the order data flows:
//! - [`observe`], [`enqueue`], [`queue`] with [`flows`]: watches in (the echoes of the
//!   runtime's own writes left out), keyed work items out, flows (namespaces) served in
//!   turn, users' changes before background work;
//! - [`kordinator`], [`mux`], [`feedback`], [`tuning`]: workers and the gates in front of
//!   reconcile, the one request each reconcile receives, the stamps gates read, and the
//!   workers, queue depth and resync the CRD runs with;
//! - [`declarative`] with [`render`], [`cross`], [`cross_remote`], [`identities`]: the
//!   reconciler, the templates it renders, reads of other CRDs (of this runtime or another),
//!   and the identity its writes are made as;
//! - [`roster`]: the CRDs running now, each with its caches and queue (what cross reads see).

pub mod cross;
pub mod cross_remote;
pub mod declarative;
pub mod enqueue;
pub mod feedback;
pub mod flows;
pub mod identities;
pub mod kordinator;
pub mod mux;
pub mod observe;
pub mod queue;
pub mod render;
pub mod roster;
pub mod tuning;
