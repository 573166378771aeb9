//! A Wasm component as the Katalog declares it (`reconcile.hooks` / `reconcile.constructor`):
//! its source, world, limits and grants, checked when the Katalog loads. The host that
//! compiles and calls it lives in the runtime.

pub mod grants;
mod spec;

pub use crate::oci::{InvalidReference, OciReference, is_sha256_hex};

pub use spec::{
    Declared, Deletion, Instances, Limits, MAX_MEMORY, Mount, Rollout, Source, Spec, Warm, World, declared_in, outside,
};
