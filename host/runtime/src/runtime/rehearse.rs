//! One reconcile of one CR outside the running pipeline (no queue, no watches), for
//! `ork plan`: the CR's effective box, its reconcile gate, then its reconcilers, as a worker
//! runs them. Its writes go through the runtime's client: a dry-run one, for a plan. The
//! stamps a worker writes after a reconcile (`.health`, `.metrics`) are not part of it.

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::Arc;

use futures::FutureExt;
use kube::core::ApiResource;
use serde_json::Value;

use super::{Error, Runtime};
use crate::pipeline::mux::{Action, Interrupt, Reconciled, Request, StampPatch};
use orkestra_expr::resolver::Resolver;
use orkestra_katalog::component::Source;

/// How a rehearsed reconcile ended.
#[derive(Debug)]
pub enum Rehearsed {
    /// Its reconcile gate is closed: nothing runs.
    Gated,
    Reconciled(Reconciled),
    /// The reconcile failed (or panicked): why.
    Failed(String),
}

impl Rehearsed {
    /// When the reconcile asked to run again (`30s`), if it did.
    pub fn requeue_after(&self) -> Option<String> {
        match self {
            Rehearsed::Reconciled(Reconciled {
                action: Action::RequeueAfter(after),
                ..
            }) => Some(format!("{}s", after.as_secs_f64())),
            _ => None,
        }
    }
}

/// The key of the CR `object`: `namespace/name`, or `name` for a cluster-scoped one.
pub fn key_of(object: &Value) -> String {
    let metadata = &object["metadata"];
    let name = metadata["name"].as_str().unwrap_or_default();
    match metadata["namespace"].as_str() {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_string(),
    }
}

impl Runtime {
    /// Serves the component slot `name` (`crd`, or `crd/target`) from the file `path` instead
    /// of what the Katalog declares (no checksum).
    pub fn replace_component(&self, name: &str, path: &Path) -> Result<(), Error> {
        let components = &self.slots.components;
        let Some(slot) = components.get(name) else {
            let known: Vec<String> = components.slots().iter().map(|s| s.name.to_string()).collect();
            return Err(Error::Wasm(format!(
                "no component slot {name:?} in this Katalog; known: {}",
                known.join(", ")
            )));
        };
        let mut spec = (*slot.declared()).clone();
        spec.source = Source::Path(path.to_path_buf());
        spec.sha256 = None;
        slot.declare(Arc::new(spec));
        Ok(())
    }

    /// Loads every component now; the errors, each naming its slot.
    pub async fn load_components(&self) -> Vec<String> {
        let loads = self.slots.components.reload_where(|_| true).await;
        let failed = loads
            .into_iter()
            .filter_map(|(name, result)| result.err().map(|e| (name, e)));
        failed
            .map(|(name, error)| format!("component {name}: {error}"))
            .collect()
    }

    /// One reconcile of `object`, a CR of the CRD `crd` (served as `resource`), as a worker
    /// runs it.
    pub async fn rehearse(&self, crd: &str, resource: &ApiResource, object: Value) -> Result<Rehearsed, Error> {
        let handle = self.roster.get(crd).ok_or_else(|| Error::UnknownCrd(crd.to_string()))?;
        let (compiled, target) = handle.crd.for_object(&object);
        let context = Arc::new(handle.crd.context_of(&object));
        let alive = object["metadata"]["deletionTimestamp"].is_null();
        if alive && let Some(gate) = &compiled.gates.reconcile {
            let resolver = Resolver::in_context(&object, &handle.crd.notes, &context);
            if !crate::pipeline::kordinator::gate_passes(&self.externals, gate, resolver).await {
                return Ok(Rehearsed::Gated);
            }
        }
        let request = Request {
            key: key_of(&object),
            crd: handle.crd.name.clone(),
            resource: Arc::new(resource.clone()),
            target: target.map(String::from),
            compiled: compiled.clone(),
            context,
            object: Some(Arc::new(object)),
            text: None,
            sentinels: Default::default(),
            event_id: None,
            interrupt: Interrupt::default(),
            stamps: StampPatch::default(),
            own: handle.own.clone(),
        };
        let mux = self.mux(&handle);
        Ok(match AssertUnwindSafe(mux.reconcile(&request)).catch_unwind().await {
            Ok(Ok(reconciled)) => Rehearsed::Reconciled(reconciled),
            Ok(Err(error)) => Rehearsed::Failed(error.to_string()),
            Err(panic) => Rehearsed::Failed(format!(
                "panic: {}",
                crate::pipeline::kordinator::panic_message(panic.as_ref())
            )),
        })
    }
}
