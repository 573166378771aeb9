//! What a component may reach, one module per capability: the cluster through the grants
//! ([`kube`]), the host's log ([`log`]), and read-only directories ([`files`]). WASI 0.2 gives
//! the rest (clocks, random; no network, no other filesystem). The store links them, in one
//! place (`store::add_to_linker`), so a component importing anything else fails at load.
//!
//! Each capability owns its part of a call's store (`KubeState`, `LogState`) and the view
//! its host functions are implemented on (`KubeView`, `LogView`: its state, who is calling,
//! the tape, known by the port [`Tap`]). A new capability is its module, a line here, and a
//! field and a line in the store.

pub mod files;
pub mod kube;
pub mod log;

use wasmtime_wasi::WasiCtxBuilder;

/// Where a call's imports are taken down (a recorded call) or served from (a replay): the
/// port the store and the call know the tape by, so nothing beneath `record/` names it.
pub trait Tap: kube::exchange::KubeTap + log::LogTap {
    /// Puts the tape's clocks and random sources in the call's WASI context.
    fn wire(&self, wasi: &mut WasiCtxBuilder);
}
