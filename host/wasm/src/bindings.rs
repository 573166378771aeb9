//! Host bindings of `wit/`: the types, and the `kube` and `log` imports both worlds share.
//! The hook world's bindings serve the constructor world too (a call looks its one export up
//! by name, see `engine::Pre`).

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

pub use hook::orkestra::operator::{kube, log, types};
