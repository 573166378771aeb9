//! The reconciler contract and the MuxReconciler: a dequeued request in, routed by the CR's
//! serve target to that target's reconciler, or to the CRD-level one.
//!
//! A reconciler takes one of three forms: declarative (Katalog templates only), hybrid
//! (templates plus hooks), or a constructor (code owns reconcile entirely). The Kordinator
//! sees only this trait.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use kube::core::ApiResource;
use serde_json::{Map, Value};

use crate::outcome::failure::ReconcileError;
use crate::pipeline::feedback::{self, StampSource, Stamps};
use orkestra_expr::sentinel::SentinelBits;
use orkestra_katalog::compile::CompiledBox;

/// One unit of work handed to a reconciler.
#[derive(Debug, Clone)]
pub struct Request {
    /// `namespace/name` (or `name`).
    pub key: String,
    /// The CRD's name in the Katalog.
    pub crd: Arc<str>,
    pub resource: Arc<ApiResource>,
    /// The CR as last observed; `None` when it is gone (deleted before this run).
    pub object: Option<Arc<Value>>,
    /// `object`'s JSON text, when the cache gave both: a component receives it as it is.
    pub text: Option<Arc<str>>,
    /// The serve target whose box applies, if any.
    pub target: Option<String>,
    /// The effective box of the CR (its target's, else the CRD's), resolved once by the
    /// Kordinator for the gate, the reconciler and the requeue alike.
    pub compiled: Arc<CompiledBox>,
    /// What every resolver of this run starts from (the CR's stamps, parsed once).
    pub context: Arc<Map<String, Value>>,
    /// Union of the sentinels of the events behind this run.
    pub sentinels: SentinelBits,
    /// Present for eventAware CRDs.
    pub event_id: Option<u64>,
    /// Says when long work should stop early.
    pub interrupt: Interrupt,
    /// The stamps the runtime wants on the CR, for a reconciler that writes its metadata
    /// anyway to carry along.
    pub stamps: StampPatch,
    /// Where a write to the CR is announced, so its echo triggers nothing.
    pub own: Arc<crate::pipeline::observe::own_writes::OwnWrites>,
}

/// The stamps (`.health`, `.metrics`) of one run. A reconciler that writes the CR's metadata
/// anyway asks for them ([`StampPatch::offer`]) and says it carried them, saving a write;
/// otherwise the runtime writes them after the reconcile (those only shown, not read, only
/// when the run wrote the CR: see [`Request::write_cr`]).
#[derive(Clone, Default)]
pub struct StampPatch {
    /// Where they are made; none where nothing is stamped (a rehearsal).
    source: Option<Arc<StampSource>>,
    /// What a write of the CR's metadata carried.
    carried: Arc<parking_lot::Mutex<Option<Stamps>>>,
    /// The run wrote the CR itself (its status or its metadata).
    touched: Arc<AtomicBool>,
}

impl std::fmt::Debug for StampPatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StampPatch").field("touched", &self.touched()).finish()
    }
}

impl StampPatch {
    pub fn new(source: Arc<StampSource>) -> Self {
        Self {
            source: Some(source),
            ..Self::default()
        }
    }

    /// Every stamp as it stands now, and the annotations of them that differ from
    /// `object`'s, for a write of the CR's metadata to carry.
    pub fn offer(&self, object: &Value) -> Option<(Stamps, Option<Map<String, Value>>)> {
        let stamps = self.source.as_ref()?.stamps(true);
        let differ = feedback::annotations(object, &stamps);
        Some((stamps, differ))
    }

    /// Called by the reconciler once its write carried `stamps` (from [`StampPatch::offer`]).
    pub fn carried_by_write(&self, stamps: Stamps) {
        *self.carried.lock() = Some(stamps);
    }

    /// What a write of the CR's metadata carried, if one did.
    pub fn carried(&self) -> Option<Stamps> {
        self.carried.lock().clone()
    }

    /// Whether the run wrote the CR itself.
    pub fn touched(&self) -> bool {
        self.touched.load(Ordering::Relaxed)
    }
}

impl Request {
    /// Sends a write of the CR itself (its status, its metadata): announced, so its echo
    /// triggers nothing, and noted, so the stamps only shown follow it.
    pub async fn write_cr<E>(
        &self,
        write: impl std::future::Future<Output = Result<kube::api::DynamicObject, E>>,
    ) -> Result<kube::api::DynamicObject, E> {
        let written = self.own.write(&self.key, write).await;
        if written.is_ok() {
            self.stamps.touched.store(true, Ordering::Relaxed);
        }
        written
    }
}

/// Whether a reconcile should stop early, and why: the runtime is shutting down, or the CR is
/// being deleted (its deletion runs next). Reconcilers ask between the steps of long work.
#[derive(Clone, Default)]
pub struct Interrupt(Option<Arc<dyn Fn() -> Option<&'static str> + Send + Sync>>);

impl Interrupt {
    pub fn new(check: impl Fn() -> Option<&'static str> + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(check)))
    }

    /// Why to stop now, if so.
    pub fn reason(&self) -> Option<&'static str> {
        self.0.as_ref().and_then(|check| check())
    }
}

impl std::fmt::Debug for Interrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Interrupt(checked)"
        } else {
            "Interrupt(never)"
        })
    }
}

/// What a successful reconcile asks for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing until the next event.
    Done,
    /// Run again after this long.
    RequeueAfter(Duration),
}

/// What a successful reconcile reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reconciled {
    pub action: Action,
    /// The first of the CR's children that is not ready yet (and how many more are not),
    /// for a reconciler that knows its children; `None` when all are ready.
    pub waiting: Option<String>,
}

impl From<Action> for Reconciled {
    fn from(action: Action) -> Self {
        Self { action, waiting: None }
    }
}

/// The three forms a reconciler takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Declarative,
    Hybrid,
    Constructor,
}

/// A reconciler for one CRD (or one serve target of it).
pub trait Reconciler: Send + Sync {
    fn form(&self) -> Form;
    fn reconcile<'a>(&'a self, request: &'a Request) -> BoxFuture<'a, Result<Reconciled, ReconcileError>>;
}

/// Routes each request to the reconciler of its target, else to the CRD-level one.
#[derive(Clone)]
pub struct MuxReconciler {
    default: Arc<dyn Reconciler>,
    targets: HashMap<String, Arc<dyn Reconciler>>,
}

impl MuxReconciler {
    pub fn new(default: Arc<dyn Reconciler>) -> Self {
        Self {
            default,
            targets: HashMap::new(),
        }
    }

    /// Registers the reconciler for CRs routed through `target`.
    pub fn with_target(mut self, target: impl Into<String>, reconciler: Arc<dyn Reconciler>) -> Self {
        self.targets.insert(target.into(), reconciler);
        self
    }

    /// The reconciler a request goes to.
    pub fn route(&self, target: Option<&str>) -> &Arc<dyn Reconciler> {
        target.and_then(|t| self.targets.get(t)).unwrap_or(&self.default)
    }

    pub async fn reconcile(&self, request: &Request) -> Result<Reconciled, ReconcileError> {
        self.route(request.target.as_deref()).reconcile(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(&'static str);

    impl Reconciler for Named {
        fn form(&self) -> Form {
            Form::Constructor
        }
        fn reconcile<'a>(&'a self, _: &'a Request) -> BoxFuture<'a, Result<Reconciled, ReconcileError>> {
            Box::pin(async move {
                Err(ReconcileError::new(
                    crate::outcome::failure::Reason::component(self.0),
                    "called",
                ))
            })
        }
    }

    fn request(target: Option<&str>) -> Request {
        Request {
            key: "ns/a".into(),
            crd: "web".into(),
            resource: Arc::new(ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
                "a.io", "v1", "Web",
            ))),
            object: None,
            target: target.map(String::from),
            compiled: crate::testing::compile_for_test("        {}\n").crd_box().clone(),
            context: Arc::default(),
            sentinels: SentinelBits::default(),
            event_id: None,
            text: None,
            interrupt: Interrupt::default(),
            stamps: StampPatch::default(),
            own: Arc::default(),
        }
    }

    #[tokio::test]
    async fn mux_routes_by_target_and_falls_back_to_the_crd_reconciler() {
        let mux = MuxReconciler::new(Arc::new(Named("crd"))).with_target("v2", Arc::new(Named("v2")));
        let reason = |r: Result<Reconciled, ReconcileError>| r.unwrap_err().reason.as_str().to_string();
        assert_eq!(reason(mux.reconcile(&request(Some("v2"))).await), "v2");
        assert_eq!(reason(mux.reconcile(&request(Some("other"))).await), "crd");
        assert_eq!(reason(mux.reconcile(&request(None)).await), "crd");
    }
}
