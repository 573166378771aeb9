//! The Wasm host: components (hooks and constructors) compiled once per digest, called on a
//! fresh sandboxed instance per reconcile, limited per call, checked against their grants,
//! and swapped live. A component with file grants runs on threads of its own, so a read that
//! never returns pins only them.

mod bindings;
mod cache;
mod call;
mod capability;
pub mod componentize;
mod engine;
mod limiter;
mod load;
mod pool;
pub mod registry;
pub mod slot;
pub mod stats;
mod store;

pub use bindings::types::{Event, EventType, Failure, Gvk, Outcome, Request, Response};
pub use call::{CallError, Hook};
pub use capability::kube::identity;
pub use engine::{EPOCH_TICK, HostOptions, MAX_CONCURRENT_CALLS, WasmHost};
pub use load::{LoadCause, LoadError, Loaded};
pub use orkestra_katalog::component::{Deletion, Limits, Source, Spec, World};
pub use registry::Registries;
pub use slot::{Active, Components, Slot, SlotStatus};
pub use stats::{CallOutcome, CallStats, Phase, StatsView, Swap};
pub use store::Caller;
