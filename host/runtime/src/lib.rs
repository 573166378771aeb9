//! Orkestra-rs runtime: one native host process runs the declarative pipeline for every CRD
//! of a Katalog (loaded by `orkestra_katalog`), and sandboxed WebAssembly components
//! (hosted by `orkestra_wasm`) supply hooks and reconcilers.
//!
//! It runs what `orkestra_katalog::compile` made of the Katalog; nothing is compiled here.
//! Modules, in the order data flows:
//! - [`observe`], [`enqueue`], [`queue`]: watches in (the echoes of the runtime's own writes
//!   left out), keyed work items out.
//! - [`kordinator`], [`mux`], [`failure`], [`budget`]: workers and the gates in front of
//!   reconcile, the one request each reconcile receives, why one failed, and the write budget
//!   a CR that never settles is held to.
//! - [`declarative`] with [`render`], [`external`], [`cross`], [`cross_remote`]: the
//!   reconciler, the templates it renders, its HTTP calls, reads of other CRDs (of this
//!   runtime or another).
//! - [`health`], [`readiness`], [`feedback`], [`counters`]: the health state machine, what
//!   makes a child ready, the stamps gates read, the counts behind them.
//! - [`tuning`], [`autoscale`]: the workers, queue depth and resync a CRD runs with, and the
//!   autoscaler that moves them.
//! - [`runtime`], [`roster`], [`slots`], [`reload`]: the per-CRD runs and their supervisor,
//!   the CRDs running now, their component slots, and live reloads.
//! - [`live`], [`metrics`]: the Live API (probes, the Katalog, CRs, components) and
//!   `/metrics`.
//! - [`control_plane`]: a real local etcd + kube-apiserver + kube-controller-manager.

pub mod autoscale;
pub mod budget;
pub mod control_plane;
pub mod counters;
pub mod cross;
pub mod cross_remote;
pub mod declarative;
pub mod enqueue;
pub mod external;
pub mod failure;
pub mod feedback;
pub mod ha;
pub mod health;
pub mod identities;
pub mod kordinator;
pub mod live;
pub mod metrics;
pub mod mux;
pub mod observe;
pub mod queue;
pub mod readiness;
pub mod reload;
pub mod render;
pub mod roster;
pub mod runtime;
pub mod slots;
pub mod tuning;

/// Compiles a one-CRD Katalog (CRD `web`, kind `Web`) whose operatorBox is `operator_box`
/// (YAML indented by 8 spaces); for tests of the stages that read compiled CRDs.
#[cfg(test)]
mod testing {
    use std::sync::Arc;

    use orkestra_katalog::compile::CompiledCrd;

    pub(crate) fn compile_for_test(operator_box: &str) -> Arc<CompiledCrd> {
        let text = format!(
            "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nspec:\n  crds:\n    web:\n      apiTypes: {{group: a.io, version: v1, kind: Web}}\n      operatorBox:\n{operator_box}"
        );
        let compiled = orkestra_katalog::load_sources(&[("k.yaml".into(), text)]).expect("a valid test Katalog");
        compiled.crds["web"].clone()
    }
}
