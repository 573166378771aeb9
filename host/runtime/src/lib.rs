//! Orkestra-rs runtime: one native host process runs the declarative pipeline for every CRD
//! of a Katalog (loaded by `orkestra_katalog`), and sandboxed WebAssembly components
//! (hosted by `orkestra_wasm`) supply hooks and reconcilers.
//!
//! It runs what `orkestra_katalog::compile` made of the Katalog; nothing is compiled here.
//! Grouped by stage:
//! - [`pipeline`]: one CRD's watches, queue, workers and gates, and the declarative
//!   reconciler with what it renders and reads;
//! - [`outcome`]: what reconciles leave behind (health, failures, counts, the write budget,
//!   readiness), read by the gates, the Live API and `/metrics`;
//! - [`runtime`]: the per-CRD runs and their supervisor, component slots, live reloads and
//!   the autoscaler;
//! - [`live`]: the Live API (probes, the Katalog, CRs, components) and `/metrics`;
//! - [`ha`]: which replica reconciles which CR when several run;
//! - [`tenants`]: what one namespace may take of the whole runtime (reconciles at once, API
//!   requests), over every CRD;
//! - [`rehearse`]: what a reconcile would do, found by the API server's dry runs (`ork
//!   plan`).
//!
//! The entry points are re-exported here: [`Runtime`] runs a compiled Katalog, [`Reloader`]
//! applies a changed Katalog file to it, and [`live::router`] serves what it knows.

mod error;
pub mod ha;
pub mod live;
pub mod outcome;
pub mod pipeline;
pub mod rehearse;
pub mod runtime;
pub mod tenants;

pub use error::Error;
pub use runtime::Runtime;
pub use runtime::reload::Reloader;
pub use runtime::slots::ComponentStore;

/// What the unit tests of several stages share.
#[cfg(test)]
mod testing {
    use std::sync::Arc;

    use crate::pipeline::queue::QueueItem;
    use orkestra_katalog::compile::CompiledCrd;

    /// A queue item of CR `key` (`namespace/name`) of kind `Web`.
    pub(crate) fn queue_item(key: &str) -> QueueItem {
        QueueItem {
            key: key.into(),
            gvk: "demo.io/v1/Web".into(),
            event_id: None,
        }
    }

    /// Compiles a one-CRD Katalog (CRD `web`, kind `Web`) whose operatorBox is
    /// `operator_box` (YAML indented by 8 spaces); for tests of the stages that read
    /// compiled CRDs.
    pub(crate) fn compile_for_test(operator_box: &str) -> Arc<CompiledCrd> {
        let text = format!(
            "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nspec:\n  crds:\n    web:\n      apiTypes: {{group: a.io, version: v1, kind: Web}}\n      operatorBox:\n{operator_box}"
        );
        let compiled = orkestra_katalog::load_sources(&[("k.yaml".into(), text)]).expect("a valid test Katalog");
        compiled.crds["web"].clone()
    }
}
