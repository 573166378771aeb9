//! What a component may reach, one module per capability: the cluster through the grants
//! ([`kube`]), the host's log ([`log`]), and read-only directories ([`files`]). WASI 0.2 gives
//! the rest (clocks, random; no network, no other filesystem). [`add_to_linker`] is the one
//! place they are linked, so a component importing anything else fails at load.
//!
//! Each capability owns its part of a call's store (`KubeState`, `LogState`) and the view
//! its host functions are implemented on (`KubeView`, `LogView`: its state, who is calling,
//! the tape). A new capability is its module, a line here and a field of `CallState`.

pub mod files;
pub mod kube;
pub mod log;

use wasmtime::component::{HasSelf, Linker};

use super::store::CallState;

/// Links WASI 0.2 (its `open-at` held to the instance's open files) and
/// `orkestra:operator/{kube, log, types}` for the store's [`CallState`].
pub fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    use super::bindings;
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    files::cap_open_files(linker)?;
    bindings::types::add_to_linker::<_, HasSelf<CallState>>(linker, |state| state)?;
    bindings::kube::add_to_linker::<_, kube::Kube>(linker, CallState::kube)?;
    bindings::log::add_to_linker::<_, log::Log>(linker, CallState::log)
}
