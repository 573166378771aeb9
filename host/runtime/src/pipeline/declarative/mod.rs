//! The declarative reconciler (Katalog templates only). On each reconcile: mark the CR as
//! ours where it needs a write (finalizers, labels, annotations), render and apply its children (`onCreate` once,
//! `onReconcile` with drift correction, DeleteIfOwned for entries whose conditions fail),
//! then write status (Ready with observedGeneration, then the `emit.status` fields in order,
//! `.children` visible), skipping every write whose result is already there so a reconcile
//! never triggers itself. On deletion: the onDelete work, then our finalizers off.

mod applied;
mod apply;
mod children;
mod component;
mod context;
mod copy;
mod enrich;
mod finalize;
mod lifecycle;
mod metadata;
mod record;
mod scale;
mod status;

use applied::Applied;
use children::{child_refs, expand};

pub use status::desired_status;
use status::{failed_status, permission_condition, validation_conditions};

use std::sync::Arc;

use futures::future::BoxFuture;
use kube::api::{DynamicObject, Patch, PatchParams};
use orkestra_effects::external::Externals;
use orkestra_kube::objects::Objects;
use serde_json::{Map, Value, json};

use crate::outcome::counters::Counters;
use crate::outcome::failure::{Reason, ReconcileError, Retry};
use crate::pipeline::cross::Peers;
use crate::pipeline::mux::{Action, Form, Reconciled, Reconciler, Request};
use crate::pipeline::observe::{Children, api_for_key, split_key};
use crate::pipeline::render::merge;
use orkestra_expr::resolver::Resolver;
use orkestra_expr::template::Functions;
use orkestra_katalog::compile::{CompiledBox, CompiledCrd};
use orkestra_katalog::reads::changes_what_it_reads;
use orkestra_katalog::rules::Verdict;
use orkestra_wasm::{Hook, Slot, World};

/// The declarative reconciler of one CRD.
pub struct Declarative {
    client: kube::Client,
    crd: Arc<CompiledCrd>,
    applier: apply::Applier,
    events: record::Events,
    counters: Arc<Counters>,
    peers: Peers,
    /// The Katalog's external calls (made, or only noted in a rehearsal).
    externals: Externals,
    /// The Wasm component of this CRD or target: hooks, or a constructor.
    component: Option<Arc<Slot>>,
    /// The component's `args` templates, compiled once per declaration.
    args: Option<component::ComponentArgs>,
    managers: Managers,
    /// The kind has no status subresource: status goes through the object itself.
    status_inline: std::sync::atomic::AtomicBool,
    /// The kind's schema drops `status`: writing it again could never settle.
    status_dropped: std::sync::atomic::AtomicBool,
    /// Clients acting as the ServiceAccounts components declare.
    identities: Option<Arc<crate::pipeline::identities::Identities>>,
    /// The permissions the runtime lacks, as its last check found them.
    permissions: Arc<crate::outcome::permissions::Permissions>,
}

/// The field managers of this reconciler's writes: one per CRD for its templates, one per
/// component, so tenants never share one and `managedFields` says who wrote what.
struct Managers {
    templates: String,
    component: String,
}

impl Declarative {
    /// `counters.writes` counts every write this reconciler makes.
    pub fn new(
        client: kube::Client,
        crd: Arc<CompiledCrd>,
        counters: Arc<Counters>,
        peers: Peers,
        externals: Externals,
    ) -> Self {
        Self {
            peers,
            externals,
            applier: apply::Applier::new(client.clone(), counters.clone()),
            events: record::Events::new(client.clone()),
            client,
            counters,
            managers: Managers {
                templates: orkestra_katalog::ownership::field_manager("orkestra", &crd.crd_name(), None),
                component: orkestra_katalog::ownership::field_manager("orkestra-wasm", &crd.crd_name(), None),
            },
            component: None,
            args: None,
            status_inline: Default::default(),
            status_dropped: Default::default(),
            identities: None,
            permissions: Arc::default(),
            crd,
        }
    }

    /// Components that declare a `serviceAccount` act as it through `identities`.
    pub fn with_identities(mut self, identities: Option<Arc<crate::pipeline::identities::Identities>>) -> Self {
        self.identities = identities;
        self
    }

    /// Says on each CR what of its CRD's needs `permissions` found the runtime lacks.
    pub fn with_permissions(mut self, permissions: Arc<crate::outcome::permissions::Permissions>) -> Self {
        self.permissions = permissions;
        self
    }

    /// Reads existing children from `children` (the owned-kind watches) where it holds them,
    /// instead of asking the API server.
    pub fn with_children(mut self, children: Children) -> Self {
        self.applier = self.applier.with_children(children);
        self
    }

    /// Runs `slot`'s component: hooks around the templates, or a constructor instead of them;
    /// its `args` templates compile with `functions`.
    pub fn with_component(mut self, slot: Arc<Slot>, functions: Functions) -> Self {
        let target = slot.name.split_once('/').map(|(_, target)| target);
        self.managers.component =
            orkestra_katalog::ownership::field_manager("orkestra-wasm", &self.crd.crd_name(), target);
        self.component = Some(slot);
        self.args = Some(component::ComponentArgs::new(functions));
        self
    }

    fn is_constructor(&self) -> bool {
        self.component
            .as_ref()
            .is_some_and(|s| s.declared().world == World::Constructor)
    }

    /// One declarative reconcile of `request`'s CR: its blocks rendered and applied in
    /// order (or its finalization run), its component called where it has one, its status
    /// written.
    ///
    /// Guarantees: children are server-side applied under the runtime's field manager and
    /// marked as the CR's, so a reconcile that changes nothing writes nothing; a child the
    /// CR does not provably own is never adopted or deleted. Errors are [`ReconcileError`]s:
    /// a [`Reason`](crate::outcome::failure::Reason) for the Ready condition and the
    /// failure counts, and the API server's answer when one caused it, from which the
    /// Kordinator decides to run again at once (the CR changed under a write), back off (the
    /// server is busy) or report it and retry on the failure schedule.
    #[tracing::instrument(level = "debug", name = "declarative.reconcile", skip_all)]
    async fn run(&self, request: &Request) -> Result<Reconciled, ReconcileError> {
        let Some(object) = &request.object else {
            if let Some(slot) = &self.component {
                self.call_component(slot, Hook::NotFound, request, None, &request.context)
                    .await?;
            }
            return Ok(Action::Done.into());
        };
        let compiled = &request.compiled;
        if !object["metadata"]["deletionTimestamp"].is_null() {
            return self.finalize(request, compiled, object).await.map(Reconciled::from);
        }
        let now = jiff::Timestamp::now();
        let normalized = self.normalize(request, object);
        // One context for every stage of this run, starting from the stamps parsed once.
        let mut context = (*request.context).clone();
        let rule_calls = self.call_rule_externals(&normalized, &mut context).await;
        let (mutated, verdict) = self.crd.rules.run(&normalized, &self.crd.notes, &context);
        // Mutations are persisted; normalization never is.
        let checked = Checked {
            mutation: added_fields(&normalized, &mutated),
            verdict,
        };
        let verdict = &checked.verdict;
        for skipped in &verdict.skipped {
            // As upstream: a mutation that cannot produce a value is skipped, the CR is reconciled.
            tracing::warn!(key = %request.key, mutation = %skipped, "mutation rule skipped");
        }
        if !compiled.cross.is_empty() {
            let resolver = Resolver::in_context(&mutated, &self.crd.notes, &context);
            let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
            context.insert(
                "cross".into(),
                self.peers.read_all(&compiled.cross, &resolver, namespace).await,
            );
        }
        // The children earlier runs made, for the conditions that read them (a step's Job).
        let observed = self.observed_children(object);
        if !observed.is_empty() {
            context.insert("children".into(), Value::Object(observed.clone()));
        }
        let calls = match rule_calls {
            Ok(()) => self.call_externals(compiled, &mutated, &mut context).await,
            Err(error) => Err(error),
        };
        let outcome = match calls {
            Ok(()) => self.apply_all(request, object, &mutated, &checked, &context, now).await,
            Err(error) => Err(error),
        };
        // The CR changed under our write (a stale cache): nothing failed, so nothing is
        // reported; the run that sees the new version is already due. Reporting it would
        // cost a status write and an Event on every try while the cache catches up.
        let mut outcome = match outcome {
            Err(error) if error.retry() == Retry::Soon => return Err(error),
            other => other,
        };
        if let Err(error) = &outcome
            && error.reason == Reason::Interrupted
        {
            // Nothing half-done is recorded: the run that handles the deletion (or the next
            // start) is already due.
            tracing::debug!(key = %request.key, why = %error.message, "reconcile stopped early");
            return Ok(Action::Done.into());
        }
        if let Ok(done) = &mut outcome {
            if let Value::Object(children) = &mut done.children {
                // What this run applied wins; a kind it applied none of shows the newest seen.
                for (kind, child) in observed {
                    children.entry(kind).or_insert(child);
                }
            }
            if let Value::Object(children) = &mut done.children
                && !self.crd.enrich.is_empty()
            {
                // Gates see the children as applied; what they ask for is then embedded.
                let mut seen = context.clone();
                seen.insert("children".into(), Value::Object(children.clone()));
                let resolver = Resolver::in_context(&mutated, &self.crd.notes, &seen);
                self.enrich(children, &resolver).await;
            }
            context.insert("children".into(), done.children.clone());
        }
        let mut status = match &outcome {
            Ok(done) => {
                let mut status = desired_status(compiled, &mutated, &self.crd.notes, now, &context);
                for (key, value) in done.status.iter().flatten() {
                    if key != "conditions" && key != "observedGeneration" {
                        status[key.as_str()] = value.clone();
                    }
                }
                status
            }
            Err(error) => failed_status(object, error, now),
        };
        if self.crd.rules.validates() {
            validation_conditions(&mut status, verdict, &object["metadata"]["generation"], now);
        }
        let moved = self.component.as_ref().and_then(|slot| {
            let at = (&object["metadata"]["generation"], now);
            let change = component::component_condition(&mut status, &object["status"], slot, &request.key, at);
            change.map(|change| change.event(&slot.name))
        });
        // Each CR a new version (or a rollout's step) moves says so where its owner looks.
        match moved {
            Some((true, reason, note)) => self.events.warning(object, reason, note),
            Some((false, reason, note)) => self.events.normal(object, reason, note),
            None => {}
        }
        // With conditions switched off, the log, the Live API and /metrics still say it.
        let missing = self.permissions.missing(&self.crd.name);
        let generation = &object["metadata"]["generation"];
        if compiled.status_conditions
            && let Some(note) = permission_condition(&mut status, &object["status"], &missing, generation, now)
        {
            self.events.warning(object, "PermissionMissing", note);
        }
        let step = changes_what_it_reads(&self.crd.own_status_reads, &object["status"], &status);
        let status_written = self.patch_status(request, object, status).await?;
        let kind = &self.crd.kind;
        match outcome {
            Ok(done) => {
                // Only a reconcile that changed something reports: a resync of a settled CR
                // stays silent, as it writes nothing either.
                if done.wrote || status_written {
                    // One event per write: the finalizers this run put in place ride along.
                    let mut note = format!("{kind} {} reconciled", request.key);
                    if done.finalizers_added {
                        note.push_str(&format!("; finalizers {} in place", self.crd.finalizers.join(", ")));
                    }
                    self.events.normal(object, &format!("{kind}Reconciled"), note);
                    self.emit_declared(compiled, &mutated, &context, None).await;
                }
                let mut action = done.action.unwrap_or(Action::Done);
                if status_written && step {
                    // A status field it reads has just changed: the next step now, not at
                    // the next resync. A field nobody reads (a timestamp) is no step; one
                    // read and changed every time is slowed as any hot loop is, and the
                    // write budget holds it.
                    action = Action::RequeueAfter(std::time::Duration::ZERO);
                }
                Ok(Reconciled {
                    action,
                    waiting: done.waiting,
                })
            }
            Err(error) => {
                self.events
                    .warning(object, &format!("{kind}ReconcileError"), error.to_string());
                self.emit_declared(compiled, &mutated, &context, Some(&error)).await;
                Err(error)
            }
        }
    }

    /// The CR with `reconcile.normalize` applied (in memory only); with `audit`, each change
    /// is logged, and a template that fails is always logged (its value stays as written).
    fn normalize<'o>(&self, request: &Request, object: &'o Value) -> std::borrow::Cow<'o, Value> {
        let normalizer = &request.compiled.normalize;
        let (normalized, changes) = normalizer.apply(object, &self.crd.notes);
        for change in changes {
            match change {
                Ok(change) if normalizer.audit => {
                    tracing::info!(key = %request.key, path = %change.path, before = %change.before, after = %change.after, "normalized");
                }
                Ok(_) => {}
                Err(why) => tracing::warn!(key = %request.key, %why, "normalize entry skipped"),
            }
        }
        normalized
    }

    /// The `emit.events` whose `on` and conditions match this outcome; the reconcile's context
    /// (`.cross`, `.external`, `.children` on success) and `.error` on failure are visible.
    async fn emit_declared(
        &self,
        compiled: &CompiledBox,
        object: &Value,
        context: &Map<String, Value>,
        error: Option<&ReconcileError>,
    ) {
        if compiled.events.is_empty() {
            return;
        }
        let mut resolver = Resolver::in_context(object, &self.crd.notes, context);
        if let Some(error) = error {
            resolver.set("error", json!(error.to_string()));
        }
        for event in compiled.events.iter().filter(|e| e.fires_on(error.is_none())) {
            if !event.conditions.passes(&resolver, None) {
                continue;
            }
            match (resolver.render(&event.reason), resolver.render(&event.message)) {
                (Ok(reason), Ok(message)) if event.warning => self.events.warning(object, &reason, message),
                (Ok(reason), Ok(message)) => self.events.normal(object, &reason, message),
                (Err(error), _) | (_, Err(error)) => {
                    tracing::warn!(event = %event.name, error = %error.message, "emit.events entry did not render");
                }
            }
        }
    }

    /// Bookkeeping, the mutated fields, then (unless a deny rule failed) the children: the
    /// templates' and the component's.
    #[tracing::instrument(level = "debug", name = "templates", skip_all)]
    async fn apply_all(
        &self,
        request: &Request,
        object: &Value,
        mutated: &Value,
        checked: &Checked,
        context: &Map<String, Value>,
        now: jiff::Timestamp,
    ) -> Result<Done, ReconcileError> {
        let wrote = self
            .write_metadata(request, object, checked.mutation.clone(), now)
            .await?;
        let denied = &checked.verdict.denied;
        if !denied.is_empty() {
            return Err(ReconcileError::new(Reason::ValidationFailed, denied.join("; ")));
        }
        let compiled = &request.compiled;
        let surface = self.surface(request);
        let Some(slot) = &self.component else {
            let applied = self.children(compiled, mutated, context, surface).await?;
            return Ok(Done::from_call(Applied::default(), applied, wrote));
        };
        if self.is_constructor() {
            let called = self
                .call_component(slot, Hook::Reconcile, request, Some(mutated), context)
                .await?;
            return Ok(Done::from_call(called, Applied::default(), wrote));
        }
        let first = slot.active().is_some_and(|a| a.spec.run_first);
        let before = if first {
            Some(
                self.call_component(slot, Hook::Reconcile, request, Some(mutated), context)
                    .await?,
            )
        } else {
            None
        };
        let applied = self.children(compiled, mutated, context, surface).await?;
        let called = match before {
            Some(called) => called,
            None => {
                // After the templates, the hook sees what they applied.
                let mut seen = context.clone();
                seen.insert("children".into(), Value::Object(applied.children.clone()));
                self.call_component(slot, Hook::Reconcile, request, Some(mutated), &seen)
                    .await?
            }
        };
        Ok(Done::from_call(called, applied, wrote))
    }

    fn api(&self, request: &Request) -> Result<Objects<DynamicObject>, kube::Error> {
        Ok(api_for_key(&self.client, &request.resource, &request.key)?.0)
    }

    /// The surface whose box runs for this CR (its target, or "" for the CRD's own box), and
    /// whether the children only another surface made stay; `None` when the CRD has no
    /// target with a box of its own (there is no other surface to have made anything).
    fn surface<'r>(&self, request: &'r Request) -> Option<(&'r str, bool)> {
        if self.crd.targets.is_empty() {
            return None;
        }
        let object = request.object.as_deref()?;
        let routed = object["metadata"]["annotations"][orkestra_expr::labels::SERVE_TARGET].as_str();
        let keep = self
            .crd
            .serve
            .as_ref()
            .and_then(|serve| serve.surface(routed?))
            .is_some_and(|surface| surface.overrides.keep_previous_surface);
        Some((request.target.as_deref().unwrap_or_default(), keep))
    }
}

/// A merge patch holding the fields `mutated` sets or changes against `object` (status
/// aside: it has its own subresource); `None` when there are none.
fn added_fields(object: &Value, mutated: &Value) -> Option<Value> {
    match (object, mutated) {
        (Value::Object(old), Value::Object(new)) => {
            let patch: Map<String, Value> = new
                .iter()
                .filter(|(key, _)| key.as_str() != "status")
                .filter_map(|(key, value)| {
                    let changed = match old.get(key) {
                        Some(previous) => added_fields(previous, value),
                        None => Some(value.clone()),
                    };
                    changed.map(|c| (key.clone(), c))
                })
                .collect();
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        (old, new) => (old != new).then(|| new.clone()),
    }
}

/// What the admission rules made of the CR: their verdict, and the fields mutation set (a
/// merge patch to persist).
struct Checked {
    verdict: Verdict,
    mutation: Option<Value>,
}

/// What the CR's own write did.
#[derive(Debug, Default, Clone, Copy)]
struct Bookkept {
    wrote: bool,
    /// Our finalizers were put in place: said on the reconcile's event, not one of its own.
    finalizers_added: bool,
}

/// What a successful reconcile did.
struct Done {
    /// `.children`.
    children: Value,
    wrote: bool,
    finalizers_added: bool,
    /// Status fields a component returned.
    status: Option<Map<String, Value>>,
    action: Option<Action>,
    /// The first child not ready yet, if any.
    waiting: Option<String>,
}

impl Done {
    /// The component's call and the templates' children together (the templates' first of a
    /// kind wins `.children`), with the CR's own write.
    fn from_call(called: Applied, templates: Applied, own: Bookkept) -> Self {
        let mut children = templates.children;
        for (kind, child) in called.children {
            children.entry(kind).or_insert(child);
        }
        Self {
            children: Value::Object(children),
            wrote: own.wrote || templates.wrote || called.wrote,
            finalizers_added: own.finalizers_added,
            status: called.status,
            action: called.action,
            waiting: templates.holdouts.and(called.holdouts).summary(),
        }
    }
}

impl Reconciler for Declarative {
    fn form(&self) -> Form {
        match &self.component {
            None => Form::Declarative,
            Some(_) if self.is_constructor() => Form::Constructor,
            Some(_) => Form::Hybrid,
        }
    }

    fn reconcile<'a>(&'a self, request: &'a Request) -> BoxFuture<'a, Result<Reconciled, ReconcileError>> {
        Box::pin(self.run(request))
    }
}
