//! Host bindings of the two worlds of `wit/`. Both import the same `kube` and `log`
//! interfaces, so the constructor world reuses the hook world's types and host traits.

#![allow(clippy::all, reason = "generated code")]

/// The `hook` world.
pub mod hook {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "hook",
        imports: {
            // Logging never blocks; kube calls are async I/O on the host.
            "orkestra:operator/log.log": trappable,
            default: async | trappable,
        },
        exports: { default: async },
    });
}

/// The `constructor` world.
pub mod constructor {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "%constructor",
        with: {
            "orkestra:operator/types": super::hook::orkestra::operator::types,
            "orkestra:operator/kube": super::hook::orkestra::operator::kube,
            "orkestra:operator/log": super::hook::orkestra::operator::log,
        },
        exports: { default: async },
    });
}

pub use hook::orkestra::operator::{kube, log, types};
