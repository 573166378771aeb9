//! The Wasm host: components (hooks and constructors) compiled once per digest, called on a
//! fresh sandboxed instance per reconcile (or a warm one of the same tenant, where the
//! component asks for it), limited per call, checked against their grants, and swapped live.
//! The engine's instance pool is budgeted per tenant and per component ([`footprint`],
//! `budget`). A component with file grants runs on threads of its own, so a read that never
//! returns pins only them.

mod bindings;
mod budget;
mod cache;
mod call;
mod caller;
mod capability;
pub mod componentize;
mod cpu;
mod engine;
mod error;
pub mod failpoint;
pub mod footprint;
mod hook;
mod json;
pub mod kept;
mod limiter;
mod load;
mod pool;
pub mod record;
pub mod registry;
pub mod replay;
pub mod rollout;
pub mod slot;
pub mod stats;
mod store;
mod tenants;
mod warm;

pub use bindings::types::{Event, EventType, Failure, Gvk, Outcome, Request, Response};
pub use caller::Caller;
pub use capability::kube::identity;
pub use cpu::CpuUse;
pub use engine::{EPOCH_TICK, HostOptions, MAX_CONCURRENT_CALLS, POOL, PoolView, TenantPool, WasmHost};
pub use error::Error;
pub use hook::{CallError, Hook};
pub use json::json_text;
pub use load::{Active, LoadCause, LoadError, Loaded};
pub use orkestra_katalog::component::{Deletion, Instances, Limits, Source, Spec, Warm, World};
pub use registry::Registries;
pub use slot::{Components, Role, RolloutView, SLOT_CALLS, Slot, SlotStatus};
pub use stats::{CallOutcome, CallStats, InstancesView, Phase, Retired, StatsView, Swap};
pub use store::MAX_RESOURCES;
